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


// ---------------------------------------------------------------------------------------------------------------
// Shifted vectors: rows of any alignment moved in aligned 16-byte vectors (a configuration's `shift`).
//
// The row kernel's vector width needs the row stride, the column and the pointers 16-byte aligned; a row of an odd
// element count (D = 855 float32) moves 4-byte scalars, and ncu put the H200's large sampled points of that kind
// at 41-56% of DRAM peak with 84-88% achieved occupancy, where rows of D % 4 == 0 reach 81-87% of the copy ceiling
// (docs/evidence/h200-wide-20261128). Here a group of g = 2^lg lanes owns an output row and walks it in aligned
// 16-byte output vectors k (the row's first byte sits `head` bytes into vector 0). Output vector k's source bytes
// are the 16 bytes at (source row - head) + 16k: bytes sh.. of the source's aligned vectors M_k and M_k+1, with sh
// the same for the whole row. Lane l loads M_k (k = it * g + l), takes M_k+1 from lane l + 1 by a shuffle (the
// group's last lane loads its own, or with a batch of trips, rc_shift_row's TB, takes the next trip's first lane's
// by a second shuffle), and funnel-shifts the pair into place, for both source rows. Vectors wholly
// inside the row are stored whole (streaming), the row's first and last vectors element by element, so no byte
// of a neighbouring row is written. An aligned vector is loaded only where it holds a byte of its row: bytes of it
// outside the row (its neighbours', or past the array's end within the same 16 bytes, never another page) are
// mixed but never stored (compute-sanitizer's memcheck may still report such a read past the end of an allocation
// of exactly the array's size, e.g. with PYTORCH_NO_CUDA_MEMORY_CACHING=1: harmless on the hardware). Every lane of
// a warp runs the same trips (the trip count depends on D and g only) and a dead group (past the last target) runs
// them too with nothing loaded or stored, so the shuffles see the whole warp.
// Brackets, weights and rc_mix are rows_v2's: the outcomes are the row kernel's bit for bit.

// bytes sh .. sh + 15 of the 32 bytes lo || hi (little endian), sh in [0, 16): words sh / 4 .. sh / 4 + 4 picked by
// selects (an indexed array would live in local memory), then funnel shifts by the bytes left (0 keeps the low word)
__device__ __forceinline__ uint4 rc_funnel16(const uint4& lo, const uint4& hi, int sh) {
    const int ws = sh >> 2, bits = (sh & 3) * 8;
    const unsigned int w0 = ws == 0 ? lo.x : ws == 1 ? lo.y : ws == 2 ? lo.z : lo.w;
    const unsigned int w1 = ws == 0 ? lo.y : ws == 1 ? lo.z : ws == 2 ? lo.w : hi.x;
    const unsigned int w2 = ws == 0 ? lo.z : ws == 1 ? lo.w : ws == 2 ? hi.x : hi.y;
    const unsigned int w3 = ws == 0 ? lo.w : ws == 1 ? hi.x : ws == 2 ? hi.y : hi.z;
    const unsigned int w4 = ws == 0 ? hi.x : ws == 1 ? hi.y : ws == 2 ? hi.z : hi.w;
    return make_uint4(__funnelshift_r(w0, w1, bits), __funnelshift_r(w1, w2, bits), __funnelshift_r(w2, w3, bits),
                      __funnelshift_r(w3, w4, bits));
}

__device__ __forceinline__ uint4 rc_shfl_down4(const uint4& v, int width) {
    uint4 r;
    r.x = __shfl_down_sync(0xffffffffu, v.x, 1, width);
    r.y = __shfl_down_sync(0xffffffffu, v.y, 1, width);
    r.z = __shfl_down_sync(0xffffffffu, v.z, 1, width);
    r.w = __shfl_down_sync(0xffffffffu, v.w, 1, width);
    return r;
}

__device__ __forceinline__ uint4 rc_shfl_xor4(const uint4& v, int mask, int width) {
    uint4 r;
    r.x = __shfl_xor_sync(0xffffffffu, v.x, mask, width);
    r.y = __shfl_xor_sync(0xffffffffu, v.y, mask, width);
    r.z = __shfl_xor_sync(0xffffffffu, v.z, mask, width);
    r.w = __shfl_xor_sync(0xffffffffu, v.w, mask, width);
    return r;
}

// One source row as aligned vectors: `base` the aligned vector holding byte (row - head), `sh` that byte's offset
// in it, [lo, hi) the aligned vectors (counted from base) that hold a byte of the row.
struct rc_shift_src {
    const uint4* base;
    int sh, lo, hi;
};

__device__ __forceinline__ rc_shift_src rc_shift_view(const void* row, int head, int nbytes) {
    const unsigned long long p = reinterpret_cast<unsigned long long>(row);
    const unsigned long long s = p - (unsigned long long)head;
    const unsigned long long a = s & ~15ULL;
    rc_shift_src v;
    v.base = reinterpret_cast<const uint4*>(a);
    v.sh = (int)(s & 15ULL);
    v.lo = (int)((p - a) >> 4);
    v.hi = (int)((p + (unsigned long long)nbytes - 1ULL - a) >> 4) + 1;
    return v;
}

#ifndef RC_SHIFT_TB
#define RC_SHIFT_TB 2  // trips of a shifted-vector row loaded before the first is shuffled and stored
#endif

__device__ __forceinline__ uint4 rc_shift_load(const rc_shift_src& v, int k, bool live) {
    return (live && k >= v.lo && k < v.hi) ? __ldg(v.base + k) : make_uint4(0u, 0u, 0u, 0u);
}

// Output vector k of a row (its bytes from `head` in the aligned vectors at oa): the two source rows' vectors
// (m, and n the next one) funnel-shifted into place by their offsets, mixed with weight w and stored; the row's first
// and last vectors store their own elements only.
template <typename T>
__device__ __forceinline__ void rc_shift_out(const uint4& m0, const uint4& n0, const uint4& m1, const uint4& n1,
                                             int sh0, int sh1, float w, int k, int head, int nbytes, uint4* oa) {
    constexpr int ES = (int)sizeof(T);
    constexpr int N = 16 / ES;
    float x[N], y[N];
    rc_vec<T, 16>::unpack(rc_funnel16(m0, n0, sh0), x);
    rc_vec<T, 16>::unpack(rc_funnel16(m1, n1, sh1), y);
#pragma unroll
    for (int i = 0; i < N; ++i) x[i] = rc_mix(x[i], y[i], w);
    const int b0 = (k << 4) - head;  // the row's byte at this vector's first byte
    if (b0 >= 0 && b0 + 16 <= nbytes) {
        rc_vec<T, 16>::store(reinterpret_cast<T*>(oa + k), x);
    } else {  // the row's first or last vector: its own elements only
        T* e = reinterpret_cast<T*>(oa + k);
#pragma unroll
        for (int i = 0; i < N; ++i) {
            const int bi = b0 + i * ES;
            if (bi >= 0 && bi < nbytes) e[i] = rc_from_float<T>(x[i]);
        }
    }
}

// One output row of D elements: o its first element, r0 and r1 the source rows mixed with weight w; lane `li` of a
// group of g = 2^lg lanes; `live`: the group has a row (else it only takes part in the shuffles). TB: trips loaded
// together (0: one trip at a time, the last lane's next vector loaded after the shuffle).
template <typename T, int TB = RC_SHIFT_TB>
__device__ __forceinline__ void rc_shift_row(const T* r0, const T* r1, T* o, int D, float w, int li, int lg,
                                             bool live) {
    const int g = 1 << lg;
    const int nbytes = D * (int)sizeof(T);
    const unsigned long long ob = reinterpret_cast<unsigned long long>(o);
    const int head = (int)(ob & 15ULL);
    uint4* oa = reinterpret_cast<uint4*>(ob - (unsigned long long)head);
    const int kout = (head + nbytes + 15) >> 4;        // this row's output vectors
    const int trips = (((nbytes + 30) >> 4) + g - 1) >> lg;  // the most any alignment needs: uniform per stream
    const rc_shift_src s0 = rc_shift_view(r0, head, nbytes), s1 = rc_shift_view(r1, head, nbytes);
    if constexpr (TB == 0) {  // one trip at a time, the last lane's next vector loaded after the shuffle
#pragma unroll 1
        for (int it = 0; it < trips; ++it) {
            const int k = (it << lg) + li;
            const uint4 m0 = rc_shift_load(s0, k, live), m1 = rc_shift_load(s1, k, live);
            uint4 n0 = rc_shfl_down4(m0, g), n1 = rc_shfl_down4(m1, g);
            if (li == g - 1) {  // M_k+1 is the next trip's first lane's: loaded here
                n0 = rc_shift_load(s0, k + 1, live);
                n1 = rc_shift_load(s1, k + 1, live);
            }
            if (live && k < kout) rc_shift_out<T>(m0, n0, m1, n1, s0.sh, s1.sh, w, k, head, nbytes, oa);
        }
    } else {
        // TB trips' vectors loaded before any is shuffled: one load latency for a row of up to TB
        // trips, where a trip used to cost two in a chain (the last lane loaded its next vector after the shuffle). The
        // last lane's next vector is the next trip's first lane's, taken by a second shuffle (lane g - 1 ^ g - 1 = 0),
        // and after the batch's last trip loaded with the batch.
#pragma unroll 1
        for (int it0 = 0; it0 < trips; it0 += TB) {
            uint4 m0[TB + 1], m1[TB + 1];
#pragma unroll
            for (int u = 0; u < TB; ++u) {
                // every trip of the batch loads, past the row's trips too: a past trip's first vector may be the
                // last lane's next one (rc_shift_load loads only the row's own vectors)
                const int k = ((it0 + u) << lg) + li;
                m0[u] = rc_shift_load(s0, k, live);
                m1[u] = rc_shift_load(s1, k, live);
            }
            {
                const int k = ((it0 + TB - 1) << lg) + li;
                const bool last = live && li == g - 1;
                m0[TB] = rc_shift_load(s0, k + 1, last);
                m1[TB] = rc_shift_load(s1, k + 1, last);
            }
#pragma unroll
            for (int u = 0; u < TB; ++u) {
                if (it0 + u >= trips) break;  // uniform: every group of the warp has this stream's trips
                const int k = ((it0 + u) << lg) + li;
                uint4 n0 = rc_shfl_down4(m0[u], g), n1 = rc_shfl_down4(m1[u], g);
                if (u + 1 < TB) {  // the last lane's next vector: the next trip's first lane's
                    const uint4 x0 = rc_shfl_xor4(m0[u + 1], g - 1, g), x1 = rc_shfl_xor4(m1[u + 1], g - 1, g);
                    if (li == g - 1) {
                        n0 = x0;
                        n1 = x1;
                    }
                } else if (li == g - 1) {
                    n0 = m0[TB];
                    n1 = m1[TB];
                }
                if (live && k < kout) rc_shift_out<T>(m0[u], n0, m1[u], n1, s0.sh, s1.sh, w, k, head, nbytes, oa);
            }
        }
    }
}

// One group's target of one stream (values [B, S, D] on times [B, S], output columns col.. of rows out_stride
// long): group `gid` (over n_targets) of 2^lg lanes, this thread its lane `li`.
template <typename T, typename TT>
__device__ __forceinline__ void rc_shift_target(const T* __restrict__ values, const TT* __restrict__ times, int S,
                                                int D, int col, int lg, const TT* __restrict__ tgt,
                                                T* __restrict__ out, long long n_targets, int Tn, int out_stride,
                                                unsigned long long div_mult, unsigned int div_shift, long long gid,
                                                int li) {
    const bool live = gid < n_targets;
    const long long q = live ? gid : 0;  // a dead group brackets target 0 (valid memory) and stores nothing
    long long b, t;
    rc_fast_divmod((unsigned long long)q, (unsigned long long)Tn, div_mult, div_shift, b, t);
    int j0, j1;
    float wt;
    rc_bracket2(times + b * S, S, __ldg(tgt + q), j0, j1, wt);
    // as before the batch (TB 0): a group a target, the launch's many groups keep loads in flight; one or two trips
    // a batch spilled registers on sm_80
    rc_shift_row<T, 0>(values + (b * S + j0) * (long long)D, values + (b * S + j1) * (long long)D,
                    out + q * (long long)out_stride + col, D, wt, li, lg, live);
}

#define RC_RESAMPLE_SHIFT_ENTRY(NAME, T, TT)                                                                   \
    extern "C" __global__ void __launch_bounds__(256) NAME(                                                   \
        const T* __restrict__ values, const TT* __restrict__ src, const TT* __restrict__ tgt,                  \
        T* __restrict__ out, int S, int Tn, int D, long long n_targets, int lg,                                \
        unsigned long long div_mult, unsigned int div_shift) {                                                 \
        const long long gid = ((long long)blockIdx.x * blockDim.x + threadIdx.x) >> lg;                        \
        rc_shift_target<T, TT>(values, src, S, D, 0, lg, tgt, out, n_targets, Tn, D, div_mult, div_shift, gid,  \
                               (int)(threadIdx.x & ((1u << lg) - 1u)));                                        \
    }

RC_RESAMPLE_SHIFT_ENTRY(resample_shift_float32_float32, float, float)
RC_RESAMPLE_SHIFT_ENTRY(resample_shift_float16_float32, rc_half, float)
RC_RESAMPLE_SHIFT_ENTRY(resample_shift_bfloat16_float32, rc_bf16, float)
RC_RESAMPLE_SHIFT_ENTRY(resample_shift_float32_float64, float, double)
RC_RESAMPLE_SHIFT_ENTRY(resample_shift_float16_float64, rc_half, double)
RC_RESAMPLE_SHIFT_ENTRY(resample_shift_bfloat16_float64, rc_bf16, double)

// The fields of block blk's stream, blocks [first_k, first_{k+1}) being stream k's (field 6: first_k), by static
// indices only (constant-bank operands): a dynamic index into the table cost the stack frame of a spill.
__device__ __forceinline__ void rc_wide_stream_of(const rc_wide_table& table, int K, long long blk,
                                                  long long (&f)[RC_WIDE_FIELDS]) {
#pragma unroll
    for (int i = 0; i < RC_WIDE_FIELDS; ++i) f[i] = table.f[i];
#pragma unroll
    for (int k = 1; k < RC_WIDE_MAX; ++k) {
        if (k < K && table.f[RC_WIDE_FIELDS * k + 6] <= blk) {
#pragma unroll
            for (int i = 0; i < RC_WIDE_FIELDS; ++i) f[i] = table.f[RC_WIDE_FIELDS * k + i];
        }
    }
}

// fuse: the column split's stream table (above), its packed field vb | lg << 8 (lg: lanes per row of the stream); blocks
// [first_k, first_{k+1}) are stream k's, each block's groups the stream's targets in order.
template <typename T, typename TT>
__device__ __forceinline__ void fuse_shift_body(const rc_wide_table& table, int K, const TT* __restrict__ tgt,
                                                T* __restrict__ out, int Tn, int Dtot, long long n_targets,
                                                unsigned long long div_mult, unsigned int div_shift) {
    const long long blk = blockIdx.x;
    long long f[RC_WIDE_FIELDS];
    rc_wide_stream_of(table, K, blk, f);
    const int lg = (int)((f[5] >> 8) & 0xff);
    const long long gid = ((blk - f[6]) * (long long)blockDim.x + threadIdx.x) >> lg;
    rc_shift_target<T, TT>(reinterpret_cast<const T*>(f[0]), reinterpret_cast<const TT*>(f[1]), (int)f[2], (int)f[3],
                           (int)f[4], lg, tgt, out, n_targets, Tn, Dtot, div_mult, div_shift, gid,
                           (int)(threadIdx.x & ((1u << lg) - 1u)));
}

#define RC_FUSE_SHIFT_ENTRY(NAME, T, TT)                                                                       \
    extern "C" __global__ void __launch_bounds__(256) NAME(                                                   \
        const __grid_constant__ rc_wide_table table, int K, const TT* __restrict__ tgt, T* __restrict__ out,    \
        int Tn, int Dtot, long long n_targets, unsigned long long div_mult, unsigned int div_shift) {           \
        fuse_shift_body<T, TT>(table, K, tgt, out, Tn, Dtot, n_targets, div_mult, div_shift);                  \
    }

RC_FUSE_SHIFT_ENTRY(fuse_shift_float32_float32, float, float)
RC_FUSE_SHIFT_ENTRY(fuse_shift_float16_float32, rc_half, float)
RC_FUSE_SHIFT_ENTRY(fuse_shift_bfloat16_float32, rc_bf16, float)
RC_FUSE_SHIFT_ENTRY(fuse_shift_float32_float64, float, double)
RC_FUSE_SHIFT_ENTRY(fuse_shift_float16_float64, rc_half, double)
RC_FUSE_SHIFT_ENTRY(fuse_shift_bfloat16_float64, rc_bf16, double)


// ---------------------------------------------------------------------------------------------------------------
// Staged: every target of a block bracketed at once, then the block's rows copied (a configuration's `stage`).
//
// The kernels above bracket a target by the group of lanes that then copies its row, so a group's search (a few
// dependent loads) and its copy follow one another, one target at a time. On narrow rows (a few hundred bytes)
// that chain is the time: the H200's mid-size sampled points with rows of 40-400 bytes ran at 15-55% of the copy
// ceiling, and a tuned row kernel or the shifted vectors no faster than torch.compile's two kernels (a search,
// then a gather). Here a block of RC_STAGE_T threads takes RC_STAGE_T consecutive targets of one stream: each
// thread brackets one (all the block's searches in flight together) into shared memory, then the block's groups of
// 2^lg lanes copy the rows by the shifted vectors (rc_shift_row), group after group of rows. Every group runs the
// same rows count (RC_STAGE_T / groups; a row past the last target is dead: nothing loaded or stored), so a warp's
// lanes stay together for the shuffles. Brackets, weights and rc_mix are rows_v2's: the row kernel's outcomes.
#ifndef RC_STAGE_T
#define RC_STAGE_T 256  // targets per block, the block's threads
#endif

// The block's rows copied from global memory by the shifted vectors, group after group: row r of the block
// (target first + r) mixes the source elements at r0[r] and r1[r] with weight w[r] (shared memory).
template <typename T, int TB = RC_SHIFT_TB>
__device__ __forceinline__ void rc_staged_copy(const T* __restrict__ values, const long long* r0, const long long* r1,
                                               const float* wt, int D, int col, int lg, T* __restrict__ out,
                                               long long n_targets, int out_stride, long long first) {
    const int tid = (int)threadIdx.x;
    const int li = tid & ((1 << lg) - 1);
    const int groups = RC_STAGE_T >> lg;
    const long long live_rows = n_targets - first;  // >= 1: the block has a first target
#pragma unroll 1
    for (int r = tid >> lg; r < RC_STAGE_T; r += groups) {  // RC_STAGE_T / groups rows for every group
        const bool live = r < live_rows;
        const int rr = live ? r : 0;
        rc_shift_row<T, TB>(values + r0[rr], values + r1[rr], out + (first + rr) * (long long)out_stride + col, D,
                        wt[rr], li, lg, live);
    }
}

template <typename T, typename TT>
__device__ __forceinline__ void rc_staged_block(const T* __restrict__ values, const TT* __restrict__ times, int S,
                                                int D, int col, int lg, const TT* __restrict__ tgt,
                                                T* __restrict__ out, long long n_targets, int Tn, int out_stride,
                                                unsigned long long div_mult, unsigned int div_shift,
                                                long long first) {
    __shared__ long long rc_st_r0[RC_STAGE_T];
    __shared__ long long rc_st_r1[RC_STAGE_T];
    __shared__ float rc_st_w[RC_STAGE_T];
    const int tid = (int)threadIdx.x;
    const long long q = first + tid;
    if (q < n_targets) {
        long long b, t;
        rc_fast_divmod((unsigned long long)q, (unsigned long long)Tn, div_mult, div_shift, b, t);
        int j0, j1;
        float w;
        rc_bracket2(times + b * S, S, __ldg(tgt + q), j0, j1, w);
        rc_st_r0[tid] = (b * S + j0) * (long long)D;
        rc_st_r1[tid] = (b * S + j1) * (long long)D;
        rc_st_w[tid] = w;
    }
    __syncthreads();
    rc_staged_copy<T>(values, rc_st_r0, rc_st_r1, rc_st_w, D, col, lg, out, n_targets, out_stride, first);
}

#define RC_RESAMPLE_STAGED_ENTRY(NAME, T, TT)                                                                  \
    extern "C" __global__ void __launch_bounds__(RC_STAGE_T) NAME(                                            \
        const T* __restrict__ values, const TT* __restrict__ src, const TT* __restrict__ tgt,                  \
        T* __restrict__ out, int S, int Tn, int D, long long n_targets, int lg,                                \
        unsigned long long div_mult, unsigned int div_shift) {                                                 \
        rc_staged_block<T, TT>(values, src, S, D, 0, lg, tgt, out, n_targets, Tn, D, div_mult, div_shift,     \
                               (long long)blockIdx.x * RC_STAGE_T);                                            \
    }

RC_RESAMPLE_STAGED_ENTRY(resample_staged_float32_float32, float, float)
RC_RESAMPLE_STAGED_ENTRY(resample_staged_float16_float32, rc_half, float)
RC_RESAMPLE_STAGED_ENTRY(resample_staged_bfloat16_float32, rc_bf16, float)
RC_RESAMPLE_STAGED_ENTRY(resample_staged_float32_float64, float, double)
RC_RESAMPLE_STAGED_ENTRY(resample_staged_float16_float64, rc_half, double)
RC_RESAMPLE_STAGED_ENTRY(resample_staged_bfloat16_float64, rc_bf16, double)

// fuse: the column split's stream table, its packed field vb | lg << 8; blocks [first_k, first_{k+1}) are stream k's,
// block i of them its targets [i * RC_STAGE_T, (i + 1) * RC_STAGE_T).
template <typename T, typename TT>
__device__ __forceinline__ void fuse_staged_body(const rc_wide_table& table, int K, const TT* __restrict__ tgt,
                                                 T* __restrict__ out, int Tn, int Dtot, long long n_targets,
                                                 unsigned long long div_mult, unsigned int div_shift) {
    const long long blk = blockIdx.x;
    long long f[RC_WIDE_FIELDS];
    rc_wide_stream_of(table, K, blk, f);
    rc_staged_block<T, TT>(reinterpret_cast<const T*>(f[0]), reinterpret_cast<const TT*>(f[1]), (int)f[2], (int)f[3],
                           (int)f[4], (int)((f[5] >> 8) & 0xff), tgt, out, n_targets, Tn, Dtot, div_mult, div_shift,
                           (blk - f[6]) * RC_STAGE_T);
}

#define RC_FUSE_STAGED_ENTRY(NAME, T, TT)                                                                      \
    extern "C" __global__ void __launch_bounds__(RC_STAGE_T) NAME(                                            \
        const __grid_constant__ rc_wide_table table, int K, const TT* __restrict__ tgt, T* __restrict__ out,    \
        int Tn, int Dtot, long long n_targets, unsigned long long div_mult, unsigned int div_shift) {           \
        fuse_staged_body<T, TT>(table, K, tgt, out, Tn, Dtot, n_targets, div_mult, div_shift);                 \
    }

RC_FUSE_STAGED_ENTRY(fuse_staged_float32_float32, float, float)
RC_FUSE_STAGED_ENTRY(fuse_staged_float16_float32, rc_half, float)
RC_FUSE_STAGED_ENTRY(fuse_staged_bfloat16_float32, rc_bf16, float)
RC_FUSE_STAGED_ENTRY(fuse_staged_float32_float64, float, double)
RC_FUSE_STAGED_ENTRY(fuse_staged_float16_float64, rc_half, double)
RC_FUSE_STAGED_ENTRY(fuse_staged_bfloat16_float64, rc_bf16, double)


// ---------------------------------------------------------------------------------------------------------------
// Tile: a warp's 32 consecutive targets of one stream bracketed by its 32 lanes at once, then their rows copied one
// target after another, a batch of each target's two source rows loaded before any is stored (a configuration's
// `stage` = 3).
//
// With every bracket computed beforehand, the row kernel's own loop reaches 67-91% of the copy ceiling on the large
// sampled points of wide rows (97-301 features) where the public call reaches 51-64% (H200, seed 6113,
// scripts/gather_bound.py, docs/kernels.md): a warp that brackets a target and then copies its row pays the search's
// chain of dependent loads before each row's first load. Here a lane brackets one target of the warp's tile (all 32
// searches in flight together, no shared memory, no barrier), the warp takes the brackets lane by lane from the
// lanes that found them (__shfl_sync), and each lane holds RC_TILE_K(VB) vectors of each of the target's two source
// rows in registers before it mixes and stores them (16 registers whatever the vector width; two targets at once
// took 90-94 registers and spilled). Rows wider than 32 * RC_TILE_K(VB) vectors take further batches. Vector widths are the row kernel's (VB, chosen on the host for
// the stream), as are brackets, weights and rc_mix: its outcomes bit for bit. Every warp runs all 32 targets of its
// tile and every batch (a dead target loads and stores nothing) so a warp's shuffles stay together.
#define RC_TILE_K(VB) ((VB) >= 16 ? 2 : (VB) == 8 ? 4 : 8)

template <typename T, typename TT, int VB>
__device__ __forceinline__ void rc_tile_warp(const T* __restrict__ values, const TT* __restrict__ times, int S, int D,
                                             int col, const TT* __restrict__ tgt, T* __restrict__ out,
                                             long long n_targets, int Tn, int out_stride, unsigned long long div_mult,
                                             unsigned int div_shift, long long q0) {
    constexpr int N = VB / (int)sizeof(T);
    constexpr int KV = RC_TILE_K(VB);
    typedef typename rc_vec<T, VB>::W W;
    const int lane = (int)(threadIdx.x & 31);
    const long long q = q0 + lane;
    const long long qq = q < n_targets ? q : 0;  // a dead lane brackets target 0 (valid memory), stores nothing
    long long b, t;
    rc_fast_divmod((unsigned long long)qq, (unsigned long long)Tn, div_mult, div_shift, b, t);
    int j0, j1;
    float w;
    rc_bracket2(times + b * S, S, __ldg(tgt + qq), j0, j1, w);
    const long long off0 = (b * S + j0) * (long long)D, off1 = (b * S + j1) * (long long)D;
    const int nvec = D / N;
#pragma unroll 1
    for (int it = 0; it < 32; ++it) {
        const long long a0 = __shfl_sync(0xffffffffu, off0, it), a1 = __shfl_sync(0xffffffffu, off1, it);
        const float aw = __shfl_sync(0xffffffffu, w, it);
        const bool al = q0 + it < n_targets;
        T* o = out + (al ? q0 + it : 0) * (long long)out_stride + col;
#pragma unroll 1
        for (int base = 0; base < nvec; base += 32 * KV) {
            W x[KV], y[KV];
#pragma unroll
            for (int k = 0; k < KV; ++k) {
                const int v = base + lane + 32 * k;
                if (al && v < nvec) {
                    x[k] = __ldg(reinterpret_cast<const W*>(values + a0 + (long long)v * N));
                    y[k] = __ldg(reinterpret_cast<const W*>(values + a1 + (long long)v * N));
                }
            }
#pragma unroll
            for (int k = 0; k < KV; ++k) {
                const int v = base + lane + 32 * k;
                if (al && v < nvec) {
                    float xf[N], yf[N];
                    rc_vec<T, VB>::unpack(x[k], xf);
                    rc_vec<T, VB>::unpack(y[k], yf);
#pragma unroll
                    for (int i = 0; i < N; ++i) xf[i] = rc_mix(xf[i], yf[i], aw);
                    rc_vec<T, VB>::store(o + v * N, xf);
                }
            }
        }
    }
}

// The warp's tile of one stream by the stream's vector width (uniform per stream: never diverges).
template <typename T, typename TT>
__device__ __forceinline__ void rc_tile_any(const T* __restrict__ values, const TT* __restrict__ times, int S, int D,
                                            int col, int vb, const TT* __restrict__ tgt, T* __restrict__ out,
                                            long long n_targets, int Tn, int out_stride, unsigned long long div_mult,
                                            unsigned int div_shift, long long q0) {
    switch (vb) {
        case 16: rc_tile_warp<T, TT, 16>(values, times, S, D, col, tgt, out, n_targets, Tn, out_stride, div_mult,
                                         div_shift, q0); break;
        case 8: rc_tile_warp<T, TT, 8>(values, times, S, D, col, tgt, out, n_targets, Tn, out_stride, div_mult,
                                       div_shift, q0); break;
        default:
            if constexpr (sizeof(T) == 2) {
                if (vb == 4) {
                    rc_tile_warp<T, TT, 4>(values, times, S, D, col, tgt, out, n_targets, Tn, out_stride, div_mult,
                                           div_shift, q0);
                } else {
                    rc_tile_warp<T, TT, 2>(values, times, S, D, col, tgt, out, n_targets, Tn, out_stride, div_mult,
                                           div_shift, q0);
                }
            } else {
                rc_tile_warp<T, TT, 4>(values, times, S, D, col, tgt, out, n_targets, Tn, out_stride, div_mult,
                                       div_shift, q0);
            }
    }
}

// resample: block i's warps take targets [i * RC_STAGE_T, (i + 1) * RC_STAGE_T), 32 each (the staged kernel's grid).
#define RC_RESAMPLE_TILE_ENTRY(NAME, T, TT)                                                                    \
    extern "C" __global__ void __launch_bounds__(RC_STAGE_T) NAME(                                            \
        const T* __restrict__ values, const TT* __restrict__ src, const TT* __restrict__ tgt,                  \
        T* __restrict__ out, int S, int Tn, int D, long long n_targets, int vb,                                \
        unsigned long long div_mult, unsigned int div_shift) {                                                 \
        rc_tile_any<T, TT>(values, src, S, D, 0, vb, tgt, out, n_targets, Tn, D, div_mult, div_shift,         \
                           (long long)blockIdx.x * RC_STAGE_T + (long long)(threadIdx.x >> 5) * 32);            \
    }

RC_RESAMPLE_TILE_ENTRY(resample_tile_float32_float32, float, float)
RC_RESAMPLE_TILE_ENTRY(resample_tile_float16_float32, rc_half, float)
RC_RESAMPLE_TILE_ENTRY(resample_tile_bfloat16_float32, rc_bf16, float)
RC_RESAMPLE_TILE_ENTRY(resample_tile_float32_float64, float, double)
RC_RESAMPLE_TILE_ENTRY(resample_tile_float16_float64, rc_half, double)
RC_RESAMPLE_TILE_ENTRY(resample_tile_bfloat16_float64, rc_bf16, double)

// fuse: the staged kernel's stream table and grid (blocks [first_k, first_{k+1}) stream k's, RC_STAGE_T targets a
// block), the stream's vector width the packed field's low byte.
template <typename T, typename TT>
__device__ __forceinline__ void fuse_tile_body(const rc_wide_table& table, int K, const TT* __restrict__ tgt,
                                               T* __restrict__ out, int Tn, int Dtot, long long n_targets,
                                               unsigned long long div_mult, unsigned int div_shift) {
    const long long blk = blockIdx.x;
    long long f[RC_WIDE_FIELDS];
    rc_wide_stream_of(table, K, blk, f);
    rc_tile_any<T, TT>(reinterpret_cast<const T*>(f[0]), reinterpret_cast<const TT*>(f[1]), (int)f[2], (int)f[3],
                       (int)f[4], (int)(f[5] & 0xff), tgt, out, n_targets, Tn, Dtot, div_mult, div_shift,
                       (blk - f[6]) * RC_STAGE_T + (long long)(threadIdx.x >> 5) * 32);
}

#define RC_FUSE_TILE_ENTRY(NAME, T, TT)                                                                        \
    extern "C" __global__ void __launch_bounds__(RC_STAGE_T) NAME(                                            \
        const __grid_constant__ rc_wide_table table, int K, const TT* __restrict__ tgt, T* __restrict__ out,    \
        int Tn, int Dtot, long long n_targets, unsigned long long div_mult, unsigned int div_shift) {           \
        fuse_tile_body<T, TT>(table, K, tgt, out, Tn, Dtot, n_targets, div_mult, div_shift);                   \
    }

RC_FUSE_TILE_ENTRY(fuse_tile_float32_float32, float, float)
RC_FUSE_TILE_ENTRY(fuse_tile_float16_float32, rc_half, float)
RC_FUSE_TILE_ENTRY(fuse_tile_bfloat16_float32, rc_bf16, float)
RC_FUSE_TILE_ENTRY(fuse_tile_float32_float64, float, double)
RC_FUSE_TILE_ENTRY(fuse_tile_float16_float64, rc_half, double)
RC_FUSE_TILE_ENTRY(fuse_tile_bfloat16_float64, rc_bf16, double)

// ---------------------------------------------------------------------------------------------------------------
// Span: the staged kernel's brackets, then the block's source rows loaded once into shared memory (a
// configuration's `stage` = 2).
//
// ncu of the large sampled points with narrow rows and T near or above S (H200, seed 2741: fuse B4719 T490 of one
// 571x13 float32 stream, resample B3411 S38 T151 D73) put the staged and shifted kernels at 29-40% of DRAM peak with
// the L2 at 58-88% of its own: every target loads its two source rows, and neighbouring targets share rows, so a
// source byte crosses the L2 two to eight times. Here the block's targets (consecutive outputs of one stream) need
// source rows [lo, hi] of the stream's values, one contiguous run of memory (rows of consecutive batch rows follow
// each other); the block loads the run once in aligned 16-byte vectors (each vector holds a byte of the run, so
// none leaves its allocation's page), then each thread mixes output elements from shared memory, consecutive
// threads consecutive elements of the block's output rows. A block whose run is longer than RC_SPAN_BYTES (sparse
// targets over long rows), or whose rows hold more than RC_SPAN_MAX_D elements, copies its rows as the staged
// kernel does. Brackets, weights, rc_mix and the conversions are the row kernel's: its outcomes bit for bit.
#ifndef RC_SPAN_BYTES
#define RC_SPAN_BYTES 24576
#endif
#define RC_SPAN_MAX_D 2048  // e / D by a multiply: exact for e < RC_STAGE_T * D while D * D < 2^24

template <typename T>
__device__ __forceinline__ void rc_store_cs(T* p, T v) {
    if constexpr (sizeof(T) == 4) {
        __stcs(reinterpret_cast<float*>(p), *reinterpret_cast<const float*>(&v));
    } else {
        __stcs(reinterpret_cast<unsigned short*>(p), *reinterpret_cast<const unsigned short*>(&v));
    }
}

template <typename T, typename TT>
__device__ __forceinline__ void rc_span_block(const T* __restrict__ values, const TT* __restrict__ times, int S,
                                              int D, int col, int lg, const TT* __restrict__ tgt,
                                              T* __restrict__ out, long long n_targets, int Tn, int out_stride,
                                              unsigned long long div_mult, unsigned int div_shift, long long first) {
    __shared__ long long rc_sp_r0[RC_STAGE_T];
    __shared__ long long rc_sp_r1[RC_STAGE_T];
    __shared__ float rc_sp_w[RC_STAGE_T];
    __shared__ unsigned long long rc_sp_lo, rc_sp_hi;
    __shared__ uint4 rc_sp_buf[RC_SPAN_BYTES / 16];
    const int tid = (int)threadIdx.x;
    if (tid == 0) {
        rc_sp_lo = ~0ULL;
        rc_sp_hi = 0ULL;
    }
    __syncthreads();
    const long long q = first + tid;
    unsigned long long lo = ~0ULL, hi = 0ULL;  // the thread's source rows (global row indices b * S + j)
    if (q < n_targets) {
        long long b, t;
        rc_fast_divmod((unsigned long long)q, (unsigned long long)Tn, div_mult, div_shift, b, t);
        int j0, j1;
        float w;
        rc_bracket2(times + b * S, S, __ldg(tgt + q), j0, j1, w);
        const long long g0 = b * S + j0, g1 = b * S + j1;
        rc_sp_r0[tid] = g0 * (long long)D;
        rc_sp_r1[tid] = g1 * (long long)D;
        rc_sp_w[tid] = w;
        lo = (unsigned long long)(g0 < g1 ? g0 : g1);
        hi = (unsigned long long)(g0 < g1 ? g1 : g0);
    }
#pragma unroll
    for (int o = 16; o; o >>= 1) {
        const unsigned long long l2 = __shfl_xor_sync(0xffffffffu, lo, o), h2 = __shfl_xor_sync(0xffffffffu, hi, o);
        lo = l2 < lo ? l2 : lo;
        hi = h2 > hi ? h2 : hi;
    }
    if ((tid & 31) == 0) {
        atomicMin(&rc_sp_lo, lo);
        atomicMax(&rc_sp_hi, hi);
    }
    __syncthreads();
    lo = rc_sp_lo;
    hi = rc_sp_hi;
    const unsigned long long start = reinterpret_cast<unsigned long long>(values + (long long)lo * D);
    const unsigned long long end = reinterpret_cast<unsigned long long>(values + ((long long)hi + 1) * D);
    const unsigned long long a0 = start & ~15ULL;
    const long long nv = (long long)((((end + 15ULL) & ~15ULL) - a0) >> 4);
    if (D > RC_SPAN_MAX_D || nv > RC_SPAN_BYTES / 16) {  // uniform per block
        // the span's rare fallback: as before the batch (TB 0; its registers are the span's)
        rc_staged_copy<T, 0>(values, rc_sp_r0, rc_sp_r1, rc_sp_w, D, col, lg, out, n_targets, out_stride, first);
        return;
    }
    const uint4* __restrict__ run = reinterpret_cast<const uint4*>(a0);
#pragma unroll 4
    for (int k = tid; k < (int)nv; k += RC_STAGE_T) rc_sp_buf[k] = __ldg(run + k);
    __syncthreads();
    const T* sh = reinterpret_cast<const T*>(reinterpret_cast<const char*>(rc_sp_buf) + (start - a0));
    const long long base = (long long)lo * D;
    const long long live_rows = n_targets - first;
    const unsigned int n = (unsigned int)(live_rows < RC_STAGE_T ? live_rows : RC_STAGE_T) * (unsigned int)D;
    const unsigned long long m = ((1ULL << 32) + (unsigned long long)D - 1ULL) / (unsigned long long)D;
    T* __restrict__ o = out + first * (long long)out_stride + col;
#pragma unroll 2
    for (unsigned int e = (unsigned int)tid; e < n; e += RC_STAGE_T) {
        const unsigned int r = (unsigned int)(((unsigned long long)e * m) >> 32);  // e / D
        const int d = (int)(e - r * (unsigned int)D);
        const float x = rc_to_float(sh[rc_sp_r0[r] - base + d]);
        const float y = rc_to_float(sh[rc_sp_r1[r] - base + d]);
        rc_store_cs<T>(o + (long long)r * out_stride + d, rc_from_float<T>(rc_mix(x, y, rc_sp_w[r])));
    }
}

#define RC_RESAMPLE_SPAN_ENTRY(NAME, T, TT)                                                                    \
    extern "C" __global__ void __launch_bounds__(RC_STAGE_T) NAME(                                            \
        const T* __restrict__ values, const TT* __restrict__ src, const TT* __restrict__ tgt,                  \
        T* __restrict__ out, int S, int Tn, int D, long long n_targets, int lg,                                \
        unsigned long long div_mult, unsigned int div_shift) {                                                 \
        rc_span_block<T, TT>(values, src, S, D, 0, lg, tgt, out, n_targets, Tn, D, div_mult, div_shift,       \
                             (long long)blockIdx.x * RC_STAGE_T);                                              \
    }

RC_RESAMPLE_SPAN_ENTRY(resample_span_float32_float32, float, float)
RC_RESAMPLE_SPAN_ENTRY(resample_span_float16_float32, rc_half, float)
RC_RESAMPLE_SPAN_ENTRY(resample_span_bfloat16_float32, rc_bf16, float)
RC_RESAMPLE_SPAN_ENTRY(resample_span_float32_float64, float, double)
RC_RESAMPLE_SPAN_ENTRY(resample_span_float16_float64, rc_half, double)
RC_RESAMPLE_SPAN_ENTRY(resample_span_bfloat16_float64, rc_bf16, double)

// fuse: the staged kernel's table and blocks, each block's rows through the span.
template <typename T, typename TT>
__device__ __forceinline__ void fuse_span_body(const rc_wide_table& table, int K, const TT* __restrict__ tgt,
                                               T* __restrict__ out, int Tn, int Dtot, long long n_targets,
                                               unsigned long long div_mult, unsigned int div_shift) {
    const long long blk = blockIdx.x;
    long long f[RC_WIDE_FIELDS];
    rc_wide_stream_of(table, K, blk, f);
    rc_span_block<T, TT>(reinterpret_cast<const T*>(f[0]), reinterpret_cast<const TT*>(f[1]), (int)f[2], (int)f[3],
                         (int)f[4], (int)((f[5] >> 8) & 0xff), tgt, out, n_targets, Tn, Dtot, div_mult, div_shift,
                         (blk - f[6]) * RC_STAGE_T);
}

#define RC_FUSE_SPAN_ENTRY(NAME, T, TT)                                                                        \
    extern "C" __global__ void __launch_bounds__(RC_STAGE_T) NAME(                                            \
        const __grid_constant__ rc_wide_table table, int K, const TT* __restrict__ tgt, T* __restrict__ out,    \
        int Tn, int Dtot, long long n_targets, unsigned long long div_mult, unsigned int div_shift) {           \
        fuse_span_body<T, TT>(table, K, tgt, out, Tn, Dtot, n_targets, div_mult, div_shift);                   \
    }

RC_FUSE_SPAN_ENTRY(fuse_span_float32_float32, float, float)
RC_FUSE_SPAN_ENTRY(fuse_span_float16_float32, rc_half, float)
RC_FUSE_SPAN_ENTRY(fuse_span_bfloat16_float32, rc_bf16, float)
RC_FUSE_SPAN_ENTRY(fuse_span_float32_float64, float, double)
RC_FUSE_SPAN_ENTRY(fuse_span_float16_float64, rc_half, double)
RC_FUSE_SPAN_ENTRY(fuse_span_bfloat16_float64, rc_bf16, double)


// ---------------------------------------------------------------------------------------------------------------
// Flat: a block's 2^lg consecutive targets of every stream at once, their output walked flat (a configuration's
// `stage` = 5; fuse's streams, or resample's one).
//
// The fuse points that lost to torch.compile on the sampled suite were wide outputs of several narrow or odd-width
// streams (H200: s7019-40 7 + 132 features 0.76x, s7741-47 5 + 4 + 50 + 1 0.85x, s6113-46 2 + 1 + 166 + 21 + 25
// 0.87x, every one at 21-44% of the copy ceiling): every kernel above gives each stream's row its own group of lanes,
// so a target's output row is written as a few short pieces, most of them off the 16-byte grid, each after its own
// search. Inductor writes the whole concatenated row with one thread an element (its searches in a kernel before).
// Here a block of RC_FLAT_THREADS threads takes 2^lg consecutive targets (the flattened b * T + t; lg from the host,
// at most RC_FLAT_LG: fewer targets a block where the launch would give the SMs few blocks): first its threads
// bracket the K * 2^lg (stream, target) pairs (all of them in flight together, one search a pair) into shared
// memory, then they walk the block's 2^lg * Dtot output elements, which are contiguous in memory, one element a
// thread a step: column c's stream by a scan of the streams' first columns (K <= RC_WIDE_MAX), the two source
// elements, rc_mix, a streaming store. The streams come in column order (fuse's table as the host's plan lists them;
// resample's one stream from its arguments). Brackets, weights and rc_mix are rows_v2's: the row kernel's outcomes
// bit for bit. Dynamic shared memory: 16 * 12 + 20 * K * 2^lg bytes (robocache/_tune.py flat_smem); the host keeps
// 2^RC_FLAT_LG * Dtot below 2^31.
#define RC_FLAT_LG 7  // at most 128 targets a block
#define RC_FLAT_THREADS 256

// The streams of a flat launch: fuse's by-value table (RC_WIDE_FIELDS int64 per stream: values, times, S, D, first
// column) or resample's one stream.
struct rc_flat_table {
    const rc_wide_table& t;
    __device__ __forceinline__ long long values(int k) const { return t.f[RC_WIDE_FIELDS * k]; }
    __device__ __forceinline__ long long times(int k) const { return t.f[RC_WIDE_FIELDS * k + 1]; }
    __device__ __forceinline__ int S(int k) const { return (int)t.f[RC_WIDE_FIELDS * k + 2]; }
    __device__ __forceinline__ long long D(int k) const { return t.f[RC_WIDE_FIELDS * k + 3]; }
    __device__ __forceinline__ int col(int k) const { return (int)t.f[RC_WIDE_FIELDS * k + 4]; }
};
struct rc_flat_one {
    const void* v;
    const void* tm;
    int s, d;
    __device__ __forceinline__ long long values(int) const { return (long long)v; }
    __device__ __forceinline__ long long times(int) const { return (long long)tm; }
    __device__ __forceinline__ int S(int) const { return s; }
    __device__ __forceinline__ long long D(int) const { return d; }
    __device__ __forceinline__ int col(int) const { return 0; }
};

template <typename T, typename TT, typename Src>
__device__ __forceinline__ void rc_flat_block(const Src& src, int K, int lg, const TT* __restrict__ tgt,
                                              T* __restrict__ out, int Tn, int Dtot, long long n_targets,
                                              unsigned long long div_mult, unsigned int div_shift) {
    // shared: the streams' values pointers [RC_WIDE_MAX], then per (stream k, target r) at (k << lg) + r: the first
    // and second source row's element offsets [K << lg] each, the weights [K << lg], then the streams' first columns
    // [RC_WIDE_MAX]
    extern __shared__ long long rc_fl_sh[];
    const int tf = 1 << lg;
    long long* vals = rc_fl_sh;
    long long* r0 = vals + RC_WIDE_MAX;
    long long* r1 = r0 + (K << lg);
    float* wt = reinterpret_cast<float*>(r1 + (K << lg));
    int* cols = reinterpret_cast<int*>(wt + (K << lg));
    const int tid = (int)threadIdx.x;
    const long long first = (long long)blockIdx.x << lg;
    if (tid < K) {
        vals[tid] = src.values(tid);
        cols[tid] = src.col(tid);
    }
    for (int p = tid; p < (K << lg); p += RC_FLAT_THREADS) {
        const int k = p >> lg;
        const long long q = first + (p & (tf - 1));
        if (q < n_targets) {
            const int S = src.S(k);
            const long long D = src.D(k);
            long long b, t;
            rc_fast_divmod((unsigned long long)q, (unsigned long long)Tn, div_mult, div_shift, b, t);
            int j0, j1;
            float w;
            rc_bracket2(reinterpret_cast<const TT*>(src.times(k)) + b * S, S, __ldg(tgt + q), j0, j1, w);
            r0[p] = (b * S + j0) * D;
            r1[p] = (b * S + j1) * D;
            wt[p] = w;
        }
    }
    __syncthreads();
    const long long live = n_targets - first;  // >= 1: the block has a first target
    const unsigned int n = (unsigned int)(live < tf ? live : tf) * (unsigned int)Dtot;
    const unsigned int dt = (unsigned int)Dtot;
    const unsigned int sq = RC_FLAT_THREADS / dt, sr = RC_FLAT_THREADS % dt;  // the step's rows and columns
    unsigned int r = (unsigned int)tid / dt, c = (unsigned int)tid % dt;        // element e = r * Dtot + c
    T* __restrict__ o = out + first * (long long)Dtot;
#pragma unroll 2
    for (unsigned int e = (unsigned int)tid; e < n; e += RC_FLAT_THREADS) {
        int k = 0;
        while (k + 1 < K && (int)c >= cols[k + 1]) ++k;
        const int p = (k << lg) + (int)r;
        const T* v = reinterpret_cast<const T*>(vals[k]) + ((int)c - cols[k]);
        float x, y;
        rc_vec<T, sizeof(T)>::load(v + r0[p], &x);
        rc_vec<T, sizeof(T)>::load(v + r1[p], &y);
        rc_store_cs<T>(o + e, rc_from_float<T>(rc_mix(x, y, wt[p])));
        r += sq;
        c += sr;
        if (c >= dt) {
            c -= dt;
            ++r;
        }
    }
}

// fuse: the stream table (the plan lists the streams in column order), 2^lg targets a block from the packed field
// (f[5]) of its first stream
#define RC_FUSE_FLAT_ENTRY(NAME, T, TT)                                                                        \
    extern "C" __global__ void __launch_bounds__(RC_FLAT_THREADS) NAME(                                       \
        const __grid_constant__ rc_wide_table table, int K, const TT* __restrict__ tgt, T* __restrict__ out,    \
        int Tn, int Dtot, long long n_targets, unsigned long long div_mult, unsigned int div_shift) {           \
        rc_flat_block<T, TT>(rc_flat_table{table}, K, (int)table.f[5], tgt, out, Tn, Dtot, n_targets, div_mult, \
                             div_shift);                                                                        \
    }

RC_FUSE_FLAT_ENTRY(fuse_flat_float32_float32, float, float)
RC_FUSE_FLAT_ENTRY(fuse_flat_float16_float32, rc_half, float)
RC_FUSE_FLAT_ENTRY(fuse_flat_bfloat16_float32, rc_bf16, float)
RC_FUSE_FLAT_ENTRY(fuse_flat_float32_float64, float, double)
RC_FUSE_FLAT_ENTRY(fuse_flat_float16_float64, rc_half, double)
RC_FUSE_FLAT_ENTRY(fuse_flat_bfloat16_float64, rc_bf16, double)

// resample: the staged kernel's arguments, lg the log2 of the targets a block
#define RC_RESAMPLE_FLAT_ENTRY(NAME, T, TT)                                                                    \
    extern "C" __global__ void __launch_bounds__(RC_FLAT_THREADS) NAME(                                       \
        const T* __restrict__ values, const TT* __restrict__ src, const TT* __restrict__ tgt,                  \
        T* __restrict__ out, int S, int Tn, int D, long long n_targets, int lg,                                \
        unsigned long long div_mult, unsigned int div_shift) {                                                 \
        rc_flat_block<T, TT>(rc_flat_one{values, src, S, D}, 1, lg, tgt, out, Tn, D, n_targets, div_mult,      \
                             div_shift);                                                                        \
    }

RC_RESAMPLE_FLAT_ENTRY(resample_flat_float32_float32, float, float)
RC_RESAMPLE_FLAT_ENTRY(resample_flat_float16_float32, rc_half, float)
RC_RESAMPLE_FLAT_ENTRY(resample_flat_bfloat16_float32, rc_bf16, float)
RC_RESAMPLE_FLAT_ENTRY(resample_flat_float32_float64, float, double)
RC_RESAMPLE_FLAT_ENTRY(resample_flat_float16_float64, rc_half, double)
RC_RESAMPLE_FLAT_ENTRY(resample_flat_bfloat16_float64, rc_bf16, double)
