// resample(values[B,S,D], src_times[B,S], tgt_times[B,T]) -> out[B,T,D]
//
// Kernel versions (numbered variants beside the NumPy reference; each is a provider robocache@vN and
// docs/kernels.md says what each changed and what it measured):
//   v1  resample_v1_<T>_<TT>: the first kernel, below.
//   v2  resample_v2_<T>_<TT>: kernels/rows_v2.cuh (groups of lanes per output row, 16-byte vectors).
//
// v1: one block per (row b, tile of TILE_T targets). Phase 1: the first TILE_T
// threads each run one binary search for one target and leave (j0, j1, w) in
// shared memory. Phase 2: all threads sweep the tile's TILE_T*D contiguous
// outputs; consecutive threads touch consecutive features, so both the reads
// of values[b, j, :] and the writes of out[b, t, :] are coalesced.
// The search costs O(T log S) per row, independent of D.
#include "common.cuh"
#include "rows_v2.cuh"

#ifndef RC_TILE_T
#define RC_TILE_T 32
#endif

template <typename T, typename TT>
__device__ __forceinline__ void resample_body(
    const T* __restrict__ values, const TT* __restrict__ src, const TT* __restrict__ tgt,
    T* __restrict__ out, int S, int Tn, int D, int tiles_per_row)
{
    __shared__ int s_j0[RC_TILE_T];
    __shared__ int s_j1[RC_TILE_T];
    __shared__ float s_w[RC_TILE_T];

    const long long blk = blockIdx.x;
    const long long b = blk / tiles_per_row;
    const int t0 = (int)(blk % tiles_per_row) * RC_TILE_T;
    const int nt = min(RC_TILE_T, Tn - t0);
    const TT* srow = src + b * S;

    for (int i = threadIdx.x; i < nt; i += blockDim.x) {
        int j0, j1; float w;
        rc_bracket(srow, S, __ldg(tgt + b * Tn + t0 + i), j0, j1, w);
        s_j0[i] = j0; s_j1[i] = j1; s_w[i] = w;
    }
    __syncthreads();

    const T* vrow = values + b * (long long)S * D;
    T* orow = out + (b * Tn + t0) * (long long)D;
    const int n = nt * D;
    for (int i = threadIdx.x; i < n; i += blockDim.x) {
        const int t = i / D;
        const int d = i - t * D;
        const float a = rc_to_float(vrow[(long long)s_j0[t] * D + d]);
        const float c = rc_to_float(vrow[(long long)s_j1[t] * D + d]);
        orow[i] = rc_from_float<T>(rc_mix(a, c, s_w[t]));
    }
}

#define RC_RESAMPLE_ENTRY(NAME, T, TT)                                                   \
    extern "C" __global__ void __launch_bounds__(256) NAME(                             \
        const T* __restrict__ values, const TT* __restrict__ src,                        \
        const TT* __restrict__ tgt, T* __restrict__ out, int S, int Tn, int D,           \
        int tiles_per_row) {                                                             \
        resample_body<T, TT>(values, src, tgt, out, S, Tn, D, tiles_per_row);            \
    }

RC_RESAMPLE_ENTRY(resample_v1_float32_float32, float, float)
RC_RESAMPLE_ENTRY(resample_v1_float16_float32, rc_half, float)
RC_RESAMPLE_ENTRY(resample_v1_bfloat16_float32, rc_bf16, float)
RC_RESAMPLE_ENTRY(resample_v1_float32_float64, float, double)
RC_RESAMPLE_ENTRY(resample_v1_float16_float64, rc_half, double)
RC_RESAMPLE_ENTRY(resample_v1_bfloat16_float64, rc_bf16, double)

// v2: the launch covers n_targets = B*T output rows, (blockDim / 2^lg) * tpg of them per block.
// MINB (blocks per SM the compiler must fit) keeps each entry in the register bucket it had before
// rc_mix (numpy.interp's infinite-value rule, kernels/common.cuh): float32 values <= 32 registers (8 blocks
// of 256), 16-bit values <= 40 (6 blocks); with the old (256, 4) ptxas took 33-34 and 48 for the same code.
// No spills (tests/test_kernels_compile.py).
#define RC_RESAMPLE_V2_ENTRY(NAME, T, TT, MINB)                                              \
    extern "C" __global__ void __launch_bounds__(256, RC_V2_MINB_OR(MINB)) NAME(                             \
        const T* __restrict__ values, const TT* __restrict__ src,                        \
        const TT* __restrict__ tgt, T* __restrict__ out, int S, int Tn, int D,           \
        long long n_targets, int vb, int lg, int tpg, unsigned long long div_mult,        \
        unsigned int div_shift) {                                                        \
        const rc_stream2 st = {values, src, S, D, 0, vb, lg, tpg};                       \
        const long long per_block = (long long)(blockDim.x >> lg) * tpg;                 \
        rc_rows_v2_any<T, TT>(st, tgt, out, n_targets, Tn, D, div_mult, div_shift,      \
                              (long long)blockIdx.x * per_block);                        \
    }

RC_RESAMPLE_V2_ENTRY(resample_v2_float32_float32, float, float, 8)
RC_RESAMPLE_V2_ENTRY(resample_v2_float16_float32, rc_half, float, 6)
RC_RESAMPLE_V2_ENTRY(resample_v2_bfloat16_float32, rc_bf16, float, 6)
RC_RESAMPLE_V2_ENTRY(resample_v2_float32_float64, float, double, 8)
RC_RESAMPLE_V2_ENTRY(resample_v2_float16_float64, rc_half, double, 6)
RC_RESAMPLE_V2_ENTRY(resample_v2_bfloat16_float64, rc_bf16, double, 6)
