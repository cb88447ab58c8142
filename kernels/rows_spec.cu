// resample specialised to the call's sizes (Config.stage = 4, "spec"; a prototype, branch wip/spec): one output
// element a thread, as Inductor's fused kernel maps it, with S, T, D and the element count compiled in (NVRTC options
// -DRC_SPEC_S=..., built per shape at run time). What the constants buy (H200 sampled losers, 2026-11-28: B51510
// S12 T42 D1, torch.compile 17.6 us against the row kernel's best 22.2 us, docs/kernels.md): the index divisions by
// constants (multiply-shift chosen by the compiler), 32-bit indices where the element count allows, and a search of
// a fixed number of steps (ceil(log2 S), unrolled, branch-free) instead of the guessed search sized at run time.
// Brackets, weights and rc_mix are rows_v2's (rc_bracket_tail), so the outcomes are the row kernel's bit for bit for
// every non-decreasing row.
#include "common.cuh"
#include "rows_v2.cuh"

#ifndef RC_SPEC_S
#define RC_SPEC_S 1
#endif
#ifndef RC_SPEC_T
#define RC_SPEC_T 1
#endif
#ifndef RC_SPEC_D
#define RC_SPEC_D 1
#endif
#ifndef RC_SPEC_N
#define RC_SPEC_N 1LL  // B * T * D, the outputs
#endif

// 32-bit indices where every offset fits (the values' B * S * D elements too): RC_SPEC_I32, set by the host.
#if RC_SPEC_I32
typedef int rc_spec_idx;
#else
typedef long long rc_spec_idx;
#endif

// The last j with row[j] <= x (or -1), for a non-decreasing row of RC_SPEC_S times: a fixed number of halvings, each
// one load and a select (no branch: every lane of a warp takes the same steps).
template <typename TT>
__device__ __forceinline__ int rc_spec_upper(const TT* __restrict__ row, TT x) {
    int base = 0;
#pragma unroll
    for (int n = RC_SPEC_S; n > 1; n -= n / 2) {
        const int half = n / 2;
        base = __ldg(row + base + half) <= x ? base + half : base;
    }
    return __ldg(row + base) <= x ? base : base - 1;
}

template <typename T, typename TT>
__device__ __forceinline__ void resample_spec_body(const T* __restrict__ values, const TT* __restrict__ src,
                                                   const TT* __restrict__ tgt, T* __restrict__ out) {
    const rc_spec_idx i = (rc_spec_idx)blockIdx.x * (rc_spec_idx)blockDim.x + (rc_spec_idx)threadIdx.x;
    if (i >= (rc_spec_idx)RC_SPEC_N) return;
    const rc_spec_idx q = i / RC_SPEC_D;  // the target (b, t)
    const rc_spec_idx d = i - q * RC_SPEC_D;
    const rc_spec_idx b = q / RC_SPEC_T;
    const TT* __restrict__ row = src + b * RC_SPEC_S;
    const TT x = __ldg(tgt + q);
    int j0, j1;
    float w;
    rc_bracket_tail(row, RC_SPEC_S, x, rc_spec_upper(row, x), j0, j1, w);
    const float a = rc_to_float(values[(b * RC_SPEC_S + j0) * RC_SPEC_D + d]);
    const float c = rc_to_float(values[(b * RC_SPEC_S + j1) * RC_SPEC_D + d]);
    out[i] = rc_from_float<T>(rc_mix(a, c, w));
}

#define RC_RESAMPLE_SPEC_ENTRY(NAME, T, TT)                                                                    \
    extern "C" __global__ void __launch_bounds__(256) NAME(                                                   \
        const T* __restrict__ values, const TT* __restrict__ src, const TT* __restrict__ tgt,                  \
        T* __restrict__ out) {                                                                                 \
        resample_spec_body<T, TT>(values, src, tgt, out);                                                     \
    }

RC_RESAMPLE_SPEC_ENTRY(resample_spec_float32_float32, float, float)
RC_RESAMPLE_SPEC_ENTRY(resample_spec_float16_float32, rc_half, float)
RC_RESAMPLE_SPEC_ENTRY(resample_spec_bfloat16_float32, rc_bf16, float)
RC_RESAMPLE_SPEC_ENTRY(resample_spec_float32_float64, float, double)
RC_RESAMPLE_SPEC_ENTRY(resample_spec_float16_float64, rc_half, double)
RC_RESAMPLE_SPEC_ENTRY(resample_spec_bfloat16_float64, rc_bf16, double)
