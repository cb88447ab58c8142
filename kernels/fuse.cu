// fuse(streams, tgt_times[B,T]) -> out[B,T,sum_k D_k]
//
// Kernel versions (providers robocache@vN; docs/kernels.md):
//   v1  fuse_v1_<T>_<TT>: below.
//   v2  fuse_v2_<T>_<TT>: each stream is resample v2 (kernels/rows_v2.cuh) writing its columns of
//       the shared output rows; the launch's blocks are split between the streams by a table.
//
// v1: one launch for all K streams. Each stream k is described by five int64s in
// `desc`: values pointer ([B,S_k,D_k], contiguous), times pointer ([B,S_k]),
// S_k, D_k and its first output column. One block per (row b, tile of targets):
// the tile's target times are read once into shared memory, then for each
// stream the block brackets every target (one binary search per target and
// stream, never per feature) and writes that stream's D_k columns of the tile.
#include "common.cuh"
#include "rows_v2.cuh"

#ifndef RC_TILE_T
#define RC_TILE_T 32
#endif

template <typename T, typename TT>
__device__ __forceinline__ void fuse_body(
    const long long* __restrict__ desc, int K, const TT* __restrict__ tgt,
    T* __restrict__ out, int Tn, int Dtot, int tiles_per_row)
{
    __shared__ TT s_t[RC_TILE_T];
    __shared__ int s_j0[RC_TILE_T];
    __shared__ int s_j1[RC_TILE_T];
    __shared__ float s_w[RC_TILE_T];

    const long long blk = blockIdx.x;
    const long long b = blk / tiles_per_row;
    const int t0 = (int)(blk % tiles_per_row) * RC_TILE_T;
    const int nt = min(RC_TILE_T, Tn - t0);

    for (int i = threadIdx.x; i < nt; i += blockDim.x) s_t[i] = __ldg(tgt + b * Tn + t0 + i);

    T* otile = out + (b * Tn + t0) * (long long)Dtot;
    for (int k = 0; k < K; ++k) {
        const T* values = reinterpret_cast<const T*>(__ldg(desc + 5 * k + 0));
        const TT* times = reinterpret_cast<const TT*>(__ldg(desc + 5 * k + 1));
        const int S = (int)__ldg(desc + 5 * k + 2);
        const int D = (int)__ldg(desc + 5 * k + 3);
        const int col = (int)__ldg(desc + 5 * k + 4);
        const TT* srow = times + b * S;
        const T* vrow = values + b * (long long)S * D;

        __syncthreads();  // s_t written (k == 0); previous stream done with s_j*/s_w
        for (int i = threadIdx.x; i < nt; i += blockDim.x) {
            int j0, j1; float w;
            rc_bracket(srow, S, s_t[i], j0, j1, w);
            s_j0[i] = j0; s_j1[i] = j1; s_w[i] = w;
        }
        __syncthreads();

        const int n = nt * D;
        for (int i = threadIdx.x; i < n; i += blockDim.x) {
            const int t = i / D;
            const int d = i - t * D;
            const float a = rc_to_float(vrow[(long long)s_j0[t] * D + d]);
            const float c = rc_to_float(vrow[(long long)s_j1[t] * D + d]);
            otile[(long long)t * Dtot + col + d] = rc_from_float<T>(rc_mix(a, c, s_w[t]));
        }
    }
}

#define RC_FUSE_ENTRY(NAME, T, TT)                                                       \
    extern "C" __global__ void __launch_bounds__(256) NAME(                             \
        const long long* __restrict__ desc, int K, const TT* __restrict__ tgt,           \
        T* __restrict__ out, int Tn, int Dtot, int tiles_per_row) {                      \
        fuse_body<T, TT>(desc, K, tgt, out, Tn, Dtot, tiles_per_row);                    \
    }

RC_FUSE_ENTRY(fuse_v1_float32_float32, float, float)
RC_FUSE_ENTRY(fuse_v1_float16_float32, rc_half, float)
RC_FUSE_ENTRY(fuse_v1_bfloat16_float32, rc_bf16, float)
RC_FUSE_ENTRY(fuse_v1_float32_float64, float, double)
RC_FUSE_ENTRY(fuse_v1_float16_float64, rc_half, double)
RC_FUSE_ENTRY(fuse_v1_bfloat16_float64, rc_bf16, double)

// v2 table, passed by value (no host-to-device copy per call): RC_FUSE2_FIELDS int64 per stream:
// values ptr, times ptr, S, D, first output column, vb | lg << 8 | tpg << 16, first block of the
// stream, unused. Blocks [first_k, first_{k+1}) belong to stream k (a short uniform scan). More than
// RC_FUSE2_MAX streams take v1.
#define RC_FUSE2_FIELDS 8
#define RC_FUSE2_MAX 16
struct rc_fuse2_table { long long f[RC_FUSE2_FIELDS * RC_FUSE2_MAX]; };

template <typename T, typename TT>
__device__ __forceinline__ void fuse_v2_body(const rc_fuse2_table& table, int K,
                                             const TT* __restrict__ tgt, T* __restrict__ out, int Tn,
                                             int Dtot, long long n_targets, unsigned long long div_mult,
                                             unsigned int div_shift) {
    const long long blk = blockIdx.x;
    int k = 0;
    while (k + 1 < K && table.f[RC_FUSE2_FIELDS * (k + 1) + 6] <= blk) ++k;
    const int base = RC_FUSE2_FIELDS * k;
    const long long packed = table.f[base + 5];
    rc_stream2 st;
    st.values = reinterpret_cast<const void*>(table.f[base + 0]);
    st.times = reinterpret_cast<const void*>(table.f[base + 1]);
    st.S = (int)table.f[base + 2];
    st.D = (int)table.f[base + 3];
    st.col = (int)table.f[base + 4];
    st.vb = (int)(packed & 0xff);
    st.lg = (int)((packed >> 8) & 0xff);
    st.tpg = (int)(packed >> 16);
    const long long per_block = (long long)(blockDim.x >> st.lg) * st.tpg;
    rc_rows_v2_any<T, TT>(st, tgt, out, n_targets, Tn, Dtot, div_mult, div_shift, (blk - table.f[base + 6]) * per_block);
}

// (256, 8): at most 32 registers, the bucket fuse v2 had before rc_mix (without the bound ptxas took up
// to 40 for the same code); no spills (tests/test_kernels_compile.py).
#define RC_FUSE_V2_ENTRY(NAME, T, TT)                                                    \
    extern "C" __global__ void __launch_bounds__(256, RC_V2_MINB_OR(8)) NAME(                             \
        const __grid_constant__ rc_fuse2_table table, int K, const TT* __restrict__ tgt, \
        T* __restrict__ out, int Tn, int Dtot, long long n_targets, unsigned long long div_mult, \
        unsigned int div_shift) {                                                        \
        fuse_v2_body<T, TT>(table, K, tgt, out, Tn, Dtot, n_targets, div_mult, div_shift); \
    }

RC_FUSE_V2_ENTRY(fuse_v2_float32_float32, float, float)
RC_FUSE_V2_ENTRY(fuse_v2_float16_float32, rc_half, float)
RC_FUSE_V2_ENTRY(fuse_v2_bfloat16_float32, rc_bf16, float)
RC_FUSE_V2_ENTRY(fuse_v2_float32_float64, float, double)
RC_FUSE_V2_ENTRY(fuse_v2_float16_float64, rc_half, double)
RC_FUSE_V2_ENTRY(fuse_v2_bfloat16_float64, rc_bf16, double)
