// Wide rows with few targets: one output row's features split over several warps (a column split).
//
// The row kernel of resample and fuse (kernels/rows_v2.cuh) gives a row at most one warp: where a launch has few
// rows of many features (fuse B5 T50 with one 717-feature stream: 250 rows, 250 warps), each lane loops over
// ~23 vectors, likely one load latency per trip (a loop whose stores may alias its loads keeps its loads in order;
// not profiled) (H200, sampled seed 6427: 11.5 us of graph time against torch.compile's 5.4). Here 2^cs warps share a
// row: warp w of the launch takes target w >> cs and chunk w & (2^cs - 1), and its lanes take the chunk's vectors
// v = chunk * 32 + lane + k * (32 << cs). The first RC_WIDE_K of them are loaded before any is stored (all
// independent requests: one latency), the rest (a row wider than 32 * RC_WIDE_K << cs vectors) in a loop.
// Brackets, weights and rc_mix are rows_v2's, so the outcomes are the row kernel's bit for bit.
//
// A launch configuration of the autotuner (robocache/_tune.py Config.cs > 0), timed against the row kernel's on
// the buckets where it can pay. Its own file: kernels_hash (the shipped tables' key) covers resample.cu and
// fuse.cu, whose text this leaves unchanged.
#include "common.cuh"
#include "rows_v2.cuh"

#ifndef RC_WIDE_K
#define RC_WIDE_K 4  // vectors per lane loaded before the first store
#endif

// One virtual warp `w` (over n_targets << cs) of one stream.
template <typename T, typename TT, int VB>
__device__ __forceinline__ void rc_wide_warp(const rc_stream2& st, int cs, const TT* __restrict__ tgt,
                                             T* __restrict__ out, long long n_targets, int Tn, int out_stride,
                                             unsigned long long div_mult, unsigned int div_shift, long long w) {
    constexpr int N = VB / (int)sizeof(T);
    const long long q = w >> cs;
    if (q >= n_targets) return;
    const int lane = threadIdx.x & 31;
    const int chunk = (int)(w & ((1LL << cs) - 1));
    long long b, t;
    rc_fast_divmod((unsigned long long)q, (unsigned long long)Tn, div_mult, div_shift, b, t);
    const TT* __restrict__ times = static_cast<const TT*>(st.times);
    const T* __restrict__ values = static_cast<const T*>(st.values);
    int j0, j1;
    float wt;
    rc_bracket2(times + b * st.S, st.S, __ldg(tgt + q), j0, j1, wt);
    const T* r0 = values + (b * st.S + j0) * (long long)st.D;
    const T* r1 = values + (b * st.S + j1) * (long long)st.D;
    T* o = out + q * (long long)out_stride + st.col;
    const int nvec = st.D / N;
    const int stride = 32 << cs;
    const int v0 = chunk * 32 + lane;
    // the raw vectors (4 registers at most each, whatever the dtype), unpacked only to be mixed and stored
    typedef typename rc_vec<T, VB>::W W;
    W a[RC_WIDE_K], c[RC_WIDE_K];
#pragma unroll
    for (int k = 0; k < RC_WIDE_K; ++k) {
        const int v = v0 + k * stride;
        if (v < nvec) {
            a[k] = __ldg(reinterpret_cast<const W*>(r0 + v * N));
            c[k] = __ldg(reinterpret_cast<const W*>(r1 + v * N));
        }
    }
#pragma unroll
    for (int k = 0; k < RC_WIDE_K; ++k) {
        const int v = v0 + k * stride;
        if (v < nvec) {
            float x[N], y[N];
            rc_vec<T, VB>::unpack(a[k], x);
            rc_vec<T, VB>::unpack(c[k], y);
#pragma unroll
            for (int i = 0; i < N; ++i) x[i] = rc_mix(x[i], y[i], wt);
            rc_vec<T, VB>::store(o + v * N, x);
        }
    }
#pragma unroll 1
    for (int v = v0 + RC_WIDE_K * stride; v < nvec; v += stride) {
        float x[N], y[N];
        rc_vec<T, VB>::load(r0 + v * N, x);
        rc_vec<T, VB>::load(r1 + v * N, y);
#pragma unroll
        for (int i = 0; i < N; ++i) x[i] = rc_mix(x[i], y[i], wt);
        rc_vec<T, VB>::store(o + v * N, x);
    }
}

template <typename T, typename TT>
__device__ __forceinline__ void rc_wide_any(const rc_stream2& st, int cs, const TT* __restrict__ tgt,
                                            T* __restrict__ out, long long n_targets, int Tn, int out_stride,
                                            unsigned long long div_mult, unsigned int div_shift, long long w) {
    switch (st.vb) {  // uniform per stream: never diverges
        case 16: rc_wide_warp<T, TT, 16>(st, cs, tgt, out, n_targets, Tn, out_stride, div_mult, div_shift, w); break;
        case 8: rc_wide_warp<T, TT, 8>(st, cs, tgt, out, n_targets, Tn, out_stride, div_mult, div_shift, w); break;
        default:
            if constexpr (sizeof(T) == 2) {
                if (st.vb == 4) {
                    rc_wide_warp<T, TT, 4>(st, cs, tgt, out, n_targets, Tn, out_stride, div_mult, div_shift, w);
                } else {
                    rc_wide_warp<T, TT, 2>(st, cs, tgt, out, n_targets, Tn, out_stride, div_mult, div_shift, w);
                }
            } else {
                rc_wide_warp<T, TT, 4>(st, cs, tgt, out, n_targets, Tn, out_stride, div_mult, div_shift, w);
            }
    }
}

// resample: one stream, output rows of D features.
template <typename T, typename TT>
__device__ __forceinline__ void resample_wide_body(const T* __restrict__ values, const TT* __restrict__ src,
                                                   const TT* __restrict__ tgt, T* __restrict__ out, int S, int Tn,
                                                   int D, long long n_targets, int vb, int cs,
                                                   unsigned long long div_mult, unsigned int div_shift) {
    rc_stream2 st;
    st.values = values;
    st.times = src;
    st.S = S;
    st.D = D;
    st.col = 0;
    st.vb = vb;
    st.lg = 5;
    st.tpg = 1;
    const long long w = (long long)blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5);
    rc_wide_any<T, TT>(st, cs, tgt, out, n_targets, Tn, D, div_mult, div_shift, w);
}

#define RC_RESAMPLE_WIDE_ENTRY(NAME, T, TT)                                                                    \
    extern "C" __global__ void __launch_bounds__(256) NAME(                                                   \
        const T* __restrict__ values, const TT* __restrict__ src, const TT* __restrict__ tgt,                  \
        T* __restrict__ out, int S, int Tn, int D, long long n_targets, int vb, int cs,                        \
        unsigned long long div_mult, unsigned int div_shift) {                                                 \
        resample_wide_body<T, TT>(values, src, tgt, out, S, Tn, D, n_targets, vb, cs, div_mult, div_shift);   \
    }

RC_RESAMPLE_WIDE_ENTRY(resample_wide_float32_float32, float, float)
RC_RESAMPLE_WIDE_ENTRY(resample_wide_float16_float32, rc_half, float)
RC_RESAMPLE_WIDE_ENTRY(resample_wide_bfloat16_float32, rc_bf16, float)
RC_RESAMPLE_WIDE_ENTRY(resample_wide_float32_float64, float, double)
RC_RESAMPLE_WIDE_ENTRY(resample_wide_float16_float64, rc_half, double)
RC_RESAMPLE_WIDE_ENTRY(resample_wide_bfloat16_float64, rc_bf16, double)

// fuse: fuse v2's stream table (kernels/fuse.cu: RC_FUSE2_FIELDS int64 per stream, passed by value), whose packed
// field holds vb | lg << 8 | tpg << 16 | cs << 24 here (lg and tpg unused); blocks [first_k, first_{k+1}) are stream
// k's, each block's warps the stream's virtual warps in order.
#define RC_WIDE_FIELDS 8
#define RC_WIDE_MAX 16
struct rc_wide_table { long long f[RC_WIDE_FIELDS * RC_WIDE_MAX]; };

template <typename T, typename TT>
__device__ __forceinline__ void fuse_wide_body(const rc_wide_table& table, int K, const TT* __restrict__ tgt,
                                               T* __restrict__ out, int Tn, int Dtot, long long n_targets,
                                               unsigned long long div_mult, unsigned int div_shift) {
    const long long blk = blockIdx.x;
    int k = 0;
    while (k + 1 < K && table.f[RC_WIDE_FIELDS * (k + 1) + 6] <= blk) ++k;
    const int base = RC_WIDE_FIELDS * k;
    const long long packed = table.f[base + 5];
    rc_stream2 st;
    st.values = reinterpret_cast<const void*>(table.f[base + 0]);
    st.times = reinterpret_cast<const void*>(table.f[base + 1]);
    st.S = (int)table.f[base + 2];
    st.D = (int)table.f[base + 3];
    st.col = (int)table.f[base + 4];
    st.vb = (int)(packed & 0xff);
    st.lg = 5;
    st.tpg = 1;
    const int cs = (int)((packed >> 24) & 0xff);
    const long long w = (blk - table.f[base + 6]) * (blockDim.x >> 5) + (threadIdx.x >> 5);
    rc_wide_any<T, TT>(st, cs, tgt, out, n_targets, Tn, Dtot, div_mult, div_shift, w);
}

#define RC_FUSE_WIDE_ENTRY(NAME, T, TT)                                                                        \
    extern "C" __global__ void __launch_bounds__(256) NAME(                                                   \
        const __grid_constant__ rc_wide_table table, int K, const TT* __restrict__ tgt, T* __restrict__ out,    \
        int Tn, int Dtot, long long n_targets, unsigned long long div_mult, unsigned int div_shift) {           \
        fuse_wide_body<T, TT>(table, K, tgt, out, Tn, Dtot, n_targets, div_mult, div_shift);                   \
    }

RC_FUSE_WIDE_ENTRY(fuse_wide_float32_float32, float, float)
RC_FUSE_WIDE_ENTRY(fuse_wide_float16_float32, rc_half, float)
RC_FUSE_WIDE_ENTRY(fuse_wide_bfloat16_float32, rc_bf16, float)
RC_FUSE_WIDE_ENTRY(fuse_wide_float32_float64, float, double)
RC_FUSE_WIDE_ENTRY(fuse_wide_float16_float64, rc_half, double)
RC_FUSE_WIDE_ENTRY(fuse_wide_bfloat16_float64, rc_bf16, double)
