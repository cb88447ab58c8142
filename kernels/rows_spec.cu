// resample one output element a thread (Config.stage = 4, the autotuner's candidate for rows of a few bytes), as
// Inductor's fused kernel maps it: thread i computes out[b, t, d] for i = (b * T + t) * D + d. What it buys over the
// row kernel where a row is one element or two (H200, 2026-11-29, scripts/tune_probe.py: B51510 S12 T42 D1 float32
// 12.2 us against the row kernel's best 22.3 us): every lane of a warp busy on its own output instead of a group a
// target, the index divisions by multiply-shift, 32-bit indices where the sizes allow (the _i32 entries), and a
// search of a fixed number of steps for every lane (ceil(log2 S) halvings, each one load and a select: no branch,
// no divergence) instead of the guessed search.
// Measured on the H200 (2026-11-29, tune_probe.py A/B in docs/evidence/h200-s24-20261129/): the 32-bit entries'
// 32-bit dividers take 4-6% off short rows against the 64-bit ones (B51510 S12 T42 D1 float32 15.6 against 16.5
// us); a search unrolled per power-of-two step count (a uniform switch on bit_length(S)) lost to this loop by 0-7%
// and was dropped; the sizes compiled in stay 1.29x faster there (12.1 us), at a module per shape.
//
// The sizes are run-time arguments (one module serves every shape). RC_SPEC_S > 0 compiles S, T, D and the element
// count in instead (NVRTC options -DRC_SPEC_S=... -DRC_SPEC_T=... -DRC_SPEC_D=... -DRC_SPEC_N=...; a probe's A/B
// of constant sizes, never the library's default: a module per shape is a compile per new shape).
// Brackets, weights and rc_mix are rows_v2's (rc_bracket_tail): the row kernel's outcomes bit for bit for every
// non-decreasing row.
#include "common.cuh"
#include "rows_v2.cuh"

#ifndef RC_SPEC_S
#define RC_SPEC_S 0
#endif

// The last j with row[j] <= x (or -1), for a non-decreasing row of n times: a fixed number of halvings for a given
// n, each one load and a select.
template <typename TT>
__device__ __forceinline__ int rc_spec_upper(const TT* __restrict__ row, int n, TT x) {
    int base = 0;
#if RC_SPEC_S > 0
#pragma unroll
#endif
    for (int m = n; m > 1; m -= m / 2) {
        const int half = m / 2;
        base = __ldg(row + base + half) <= x ? base + half : base;
    }
    return __ldg(row + base) <= x ? base : base - 1;
}

#ifndef RC_SPEC_DIV32
// 1: the 32-bit entries divide by the host's 32-bit multiplier (robocache._launch.fast_divmod32, PyTorch's
// IntDivider: one __umulhi, an add and a shift), 0: by the 64-bit one (the A/B)
#define RC_SPEC_DIV32 1
#endif

// q / d: I = long long, 0 <= q < 2**63, by the host's 64-bit multiplier and shift (robocache._launch.fast_divmod;
// mult 0: d == 1); I = int, 0 <= q < 2**31, by the 32-bit ones (fast_divmod32) where RC_SPEC_DIV32
template <typename I>
__device__ __forceinline__ I rc_spec_div(I q, unsigned long long mult, unsigned int shift, unsigned int m32,
                                         unsigned int s32) {
#if RC_SPEC_DIV32
    if (sizeof(I) == 4) return (I)((__umulhi((unsigned int)q, m32) + (unsigned int)q) >> s32);
#endif
    (void)m32; (void)s32;
    return mult ? (I)(__umul64hi((unsigned long long)q, mult) >> shift) : q;
}

template <typename T, typename TT, typename I>
__device__ __forceinline__ void resample_spec_body(const T* __restrict__ values, const TT* __restrict__ src,
                                                   const TT* __restrict__ tgt, T* __restrict__ out, int S_, int T_,
                                                   int D_, long long N_, unsigned long long d_mult,
                                                   unsigned int d_shift, unsigned long long t_mult,
                                                   unsigned int t_shift, unsigned int d_m32, unsigned int d_s32,
                                                   unsigned int t_m32, unsigned int t_s32) {
#if RC_SPEC_S > 0
    const int S = RC_SPEC_S;
    const I D = RC_SPEC_D, Tn = RC_SPEC_T;
    const I N = (I)(RC_SPEC_N);
    const I i = (I)blockIdx.x * (I)blockDim.x + (I)threadIdx.x;
    if (i >= N) return;
    const I q = i / D;  // the target (b, t)
    const I b = q / Tn;
#else
    const int S = S_;
    const I D = D_;
    const I N = (I)N_;
    const I i = (I)blockIdx.x * (I)blockDim.x + (I)threadIdx.x;
    if (i >= N) return;
    const I q = rc_spec_div<I>(i, d_mult, d_shift, d_m32, d_s32);
    const I b = rc_spec_div<I>(q, t_mult, t_shift, t_m32, t_s32);
    (void)T_;
#endif
#if RC_SPEC_S > 0
    (void)d_m32; (void)d_s32; (void)t_m32; (void)t_s32;
#endif
    const I d = i - q * D;
    const TT* __restrict__ row = src + b * S;
    const TT x = __ldg(tgt + q);
    int j0, j1;
    float w;
    rc_bracket_tail(row, S, x, rc_spec_upper(row, S, x), j0, j1, w);
    const float a = rc_to_float(values[(b * S + j0) * D + d]);
    const float c = rc_to_float(values[(b * S + j1) * D + d]);
    out[i] = rc_from_float<T>(rc_mix(a, c, w));
}

// values, src, tgt, out, S, T, D, N (= B * T * D), D's and T's 64-bit multiplier and shift, then their 32-bit ones;
// _i32: every offset (the values' B * S * D, the outputs' N, the times') below 2**31, chosen by the host
#define RC_RESAMPLE_SPEC_ENTRY(NAME, T, TT, I)                                                                 \
    extern "C" __global__ void __launch_bounds__(256) NAME(                                                   \
        const T* __restrict__ values, const TT* __restrict__ src, const TT* __restrict__ tgt,                  \
        T* __restrict__ out, int S, int Tn, int D, long long N, unsigned long long d_mult,                    \
        unsigned int d_shift, unsigned long long t_mult, unsigned int t_shift, unsigned int d_m32,             \
        unsigned int d_s32, unsigned int t_m32, unsigned int t_s32) {                                          \
        resample_spec_body<T, TT, I>(values, src, tgt, out, S, Tn, D, N, d_mult, d_shift, t_mult, t_shift,    \
                                     d_m32, d_s32, t_m32, t_s32);                                              \
    }

// one line an entry (robocache._cuda.first_entry reads the first of them)
RC_RESAMPLE_SPEC_ENTRY(resample_spec_float32_float32, float, float, long long)
RC_RESAMPLE_SPEC_ENTRY(resample_spec_float32_float32_i32, float, float, int)
RC_RESAMPLE_SPEC_ENTRY(resample_spec_float16_float32, rc_half, float, long long)
RC_RESAMPLE_SPEC_ENTRY(resample_spec_float16_float32_i32, rc_half, float, int)
RC_RESAMPLE_SPEC_ENTRY(resample_spec_bfloat16_float32, rc_bf16, float, long long)
RC_RESAMPLE_SPEC_ENTRY(resample_spec_bfloat16_float32_i32, rc_bf16, float, int)
RC_RESAMPLE_SPEC_ENTRY(resample_spec_float32_float64, float, double, long long)
RC_RESAMPLE_SPEC_ENTRY(resample_spec_float32_float64_i32, float, double, int)
RC_RESAMPLE_SPEC_ENTRY(resample_spec_float16_float64, rc_half, double, long long)
RC_RESAMPLE_SPEC_ENTRY(resample_spec_float16_float64_i32, rc_half, double, int)
RC_RESAMPLE_SPEC_ENTRY(resample_spec_bfloat16_float64, rc_bf16, double, long long)
RC_RESAMPLE_SPEC_ENTRY(resample_spec_bfloat16_float64_i32, rc_bf16, double, int)
