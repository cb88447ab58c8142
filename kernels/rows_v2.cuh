// Version 2 of resample and fuse: one body serves both (resample is fuse with one stream).
//
// What v1 left on the table (H200, B16384 S200 T100 D32 bf16: v1 ~320 us vs torch.compile ~85 us):
// per block, 32 threads ran dependent binary searches while the other 224 waited at a barrier; every
// element paid an integer division (i / D) and a 2-byte load/store; a 32-target tile left half-empty
// blocks when T % 32 was small. v2:
//  - a GROUP of g lanes (g a power of two <= 32, chosen on the host) owns one output row t of D
//    features; 32/g targets per warp, so short rows pack many targets into a warp and long rows
//    (D up to thousands) loop over their features with the whole warp. No barrier, no shared memory.
//  - each lane moves VB-byte vectors (16 where D*es, the output row stride, the column offset and the
//    pointers allow it; else 8, 4, or one element), chosen per stream on the host.
//  - target index -> (row b, target t) by a 64-bit multiply-shift (FastDivmod) once per target,
//    never a division per element.
//  - every lane of a group runs the same search (same addresses: one broadcast load per step); the
//    row's times stay in L1 for the neighbouring groups of the warp, which bracket neighbouring
//    targets. Unsorted targets are still correct (each search is independent).
//  - outputs are written with streaming stores (st.global.cs): they are not read again here, and
//    the values rows that neighbouring targets share stay in L2.
#pragma once
#include "common.cuh"

#ifndef RC_V2_PREFETCH_BYTES
// A row of source times up to this size is prefetched into L1 before its search, the warp's lanes sharing the
// lines (lane l: line l; lanes of the warp on another row prefetch that row's line l). 0, the default since
// 2026-11-27: no prefetch. The guessed search (rc_upper_bound_guess) touches two or three lines of a row, and
// an A/B on the H100 (scripts/tune_probe.py --variants, docs/kernels.md "Prefetch") measured the prefetch
// slower or equal on 12 of 16 shapes, by up to 1.4x on upsampling with narrow rows, where every lane of a
// one-lane group prefetched the whole row (up to 32 instructions per target). A build option: the autotuner's
// Config.prefetch (robocache/_tune.py) times it with a cap of 4096 on buckets whose rows fit (short rows, where
// an H100 nightly check saw the default without it +4.6% slower: B4096 S100 T50 D32 float32).
#define RC_V2_PREFETCH_BYTES 0
#endif


// q / d and q % d for 0 <= q < 2^63 by multiply-shift (CUTLASS FastDivmod, 64-bit): mult == 0 means
// d == 1. A few integer multiplies per target instead of a 64-bit division (a called subroutine).
__device__ __forceinline__ void rc_fast_divmod(unsigned long long q, unsigned long long d,
                                               unsigned long long mult, unsigned int shift,
                                               long long& quo, long long& rem) {
    const unsigned long long qq = mult ? (__umul64hi(q, mult) >> shift) : q;
    quo = (long long)qq;
    rem = (long long)(q - qq * d);
}

// (x - x0) / (x1 - x0) as a float weight, 0 <= num < den. float64 times (epoch seconds): the
// subtractions stay in double (that is where precision matters); the quotient is taken in float
// after scaling by den's binary exponent (exact), since a double division is a called subroutine
// whose stack frame spills. The weight is a float either way.
__device__ __forceinline__ float rc_weight2(float num, float den) { return num / den; }
__device__ __forceinline__ float rc_weight2(double num, double den) {
    int e;
    const double m = frexp(den, &e);  // den = m * 2^e, m in [0.5, 1)
    return (float)ldexp(num, -e) / (float)m;
}

// The last index j with row[j] <= x (or -1; NaN x gives -1), for a non-decreasing row, searched from a
// guess: where x falls between the row's first and last time, scaled to the row's length. Sensor
// timestamps are close to uniform, so the guess is within a step or two and the search costs ~3
// dependent loads instead of log2(n) (14 at S = 10000): gallop from the guess (1, 2, 4, ... steps)
// until x is bracketed, then bisect. Any non-decreasing row gives the exact answer; an adversarial
// one costs at most about twice a plain binary search.
template <typename TT>
__device__ __forceinline__ int rc_upper_bound_guess(const TT* __restrict__ row, int n, TT x) {
    const TT first = __ldg(row), last = __ldg(row + n - 1);
    const float span = (float)(last - first);
    float gf = (float)(x - first) / span * (float)(n - 1);
    if (!(gf >= 0.0f)) gf = 0.0f;  // NaN (x or span) and below the row
    if (gf > (float)(n - 1)) gf = (float)(n - 1);
    int lo, hi;
    const int j = min((int)gf, n - 1);  // (float)(n - 1) rounds up past n - 1 once n > 2^24
    if (__ldg(row + j) <= x) {  // answer in [j, n): gallop up to an hi with row[hi] > x (or n)
        lo = j; hi = j + 1;
#pragma unroll 1
        for (long long step = 2; hi < n && __ldg(row + hi) <= x; step <<= 1) {  // 64-bit: S near 2^31
            lo = hi;
            hi = (int)min((long long)n, (long long)hi + step);
        }
    } else {                    // answer in [-1, j): gallop down to a lo with row[lo] <= x (or -1)
        hi = j; lo = j - 1;
#pragma unroll 1
        for (long long step = 2; lo >= 0 && !(__ldg(row + lo) <= x); step <<= 1) {
            hi = lo;
            lo = (int)max(-1LL, (long long)lo - step);
        }
    }
#pragma unroll 1
    while ((long long)hi - lo > 1) {  // row[lo] <= x (or lo == -1), !(row[hi] <= x) (or hi == n); 64-bit: -1 .. 2^31-1
        const int mid = (int)(lo + (((long long)hi - lo) >> 1));
        if (__ldg(row + mid) <= x) lo = mid; else hi = mid;
    }
    return lo;
}

struct rc_weight2_fn {  // v2's weight (rc_weight2)
    template <typename TT> __device__ __forceinline__ float operator()(TT num, TT den) const {
        return rc_weight2(num, den);
    }
};

// rc_bracket of common.cuh with the guessed search and the weight of rc_weight2 (v2 only: v1 stays as
// it was measured); the same weights (rc_mix), so v1 and v2 give the same outcomes.
// rc_bracket2's outcome from j, the last index with row[j] <= x (or -1), however it was found.
template <typename TT>
__device__ __forceinline__ void rc_bracket_tail(const TT* __restrict__ row, int n, TT x, int j, int& j0, int& j1,
                                                float& w) {
    if (x != x) {
        j0 = 0; j1 = 0; w = __int_as_float(0x7fc00000);
    } else if (j < 0) {
        j0 = 0; j1 = 0; w = -1.0f;
    } else if (j >= n - 1) {
        j0 = n - 1; j1 = n - 1; w = -1.0f;
    } else {
        const TT x0 = __ldg(row + j), x1 = __ldg(row + j + 1);
        j0 = j; j1 = j + 1;
        w = rc_wt_interior(x, x0, x1, j0, j1, rc_weight2_fn());
    }
}

template <typename TT>
__device__ __forceinline__ void rc_bracket2(const TT* __restrict__ row, int n, TT x, int& j0, int& j1, float& w) {
    rc_bracket_tail(row, n, x, rc_upper_bound_guess(row, n, x), j0, j1, w);
}

#ifndef RC_V2_SEQ
// 1: a build option, the autotuner's Config.seq (robocache/_tune.py), never the default: each group takes a
// contiguous run of its block's targets (tpg of them, one after another) instead of every groups-th one, and
// brackets a target by walking on from the previous target's bracket when both lie in one row and the new
// target time is not smaller (up to RC_V2_SEQ_WALK steps; a longer walk, a new row, an unsorted or NaN target
// take the guessed search). Meant for upsampling (T > S), where neighbouring targets share a bracket and the
// search dominates narrow rows (D = 1: one lane per row); the tuner offers it there only (one-lane rows, T > S).
// It has one target in flight (RC_V2_UNROLL unused) and no prefetch. The walk's answer is the guessed search's for a
// non-decreasing row: row[j] <= x_prev <= x, and it stops at the first row[j + 1] > x.
#define RC_V2_SEQ 0
#endif
#ifndef RC_V2_SEQ_WALK
#define RC_V2_SEQ_WALK 4
#endif

// The last j with row[j] <= x, from the previous target's jp (row[jp] <= xp <= x, or jp == -1) of the same row.
// The guessed search out of line for the walk's misses (a new row, an unsorted target): inlined beside the walk
// it costs the float64-times builds their register budget.
template <typename TT>
__device__ __noinline__ int rc_search_cold(const TT* __restrict__ row, int n, TT x) {
    return rc_upper_bound_guess(row, n, x);
}

template <typename TT>
__device__ __forceinline__ int rc_walk(const TT* __restrict__ row, int n, TT x, int jp) {
    int j = jp;
#pragma unroll 1
    for (int s = 0; s < RC_V2_SEQ_WALK && j + 1 < n && __ldg(row + j + 1) <= x; ++s) ++j;
    if (j + 1 < n && __ldg(row + j + 1) <= x) j = rc_search_cold(row, n, x);  // farther than the walk
    return j;
}

#define RC_STR(x) #x
#define RC_PRAGMA_UNROLL(n) _Pragma(RC_STR(unroll n))

// VB bytes of T (VB / sizeof(T) elements) as floats, and back. VB == sizeof(T) is a scalar.
template <int VB> struct rc_word;
template <> struct rc_word<16> { typedef uint4 type; };
template <> struct rc_word<8> { typedef uint2 type; };
template <> struct rc_word<4> { typedef unsigned int type; };
template <> struct rc_word<2> { typedef unsigned short type; };

template <typename T, int VB>
struct rc_vec {
    static constexpr int N = VB / (int)sizeof(T);
    typedef typename rc_word<VB>::type W;
    __device__ __forceinline__ static void load(const T* p, float* f) {
        const W w = __ldg(reinterpret_cast<const W*>(p));
        unpack(w, f);
    }
    __device__ __forceinline__ static void store(T* p, const float* f) {
        W w;
        pack(f, w);
        __stcs(reinterpret_cast<W*>(p), w);
    }
    // 32-bit words of a vector; 16-bit types hold two values per word (low half first, little endian).
    __device__ __forceinline__ static void unpack(const W& w, float* f) {
        const unsigned int* u = reinterpret_cast<const unsigned int*>(&w);
        if constexpr (VB == 2) {
            T v; v.bits = w; f[0] = rc_to_float(v);
        } else if constexpr (sizeof(T) == 4) {
#pragma unroll
            for (int i = 0; i < N; ++i) f[i] = __uint_as_float(u[i]);
        } else {
#pragma unroll
            for (int i = 0; i < N / 2; ++i) {
                T lo, hi;
                lo.bits = (unsigned short)(u[i] & 0xffffu);
                hi.bits = (unsigned short)(u[i] >> 16);
                f[2 * i] = rc_to_float(lo);
                f[2 * i + 1] = rc_to_float(hi);
            }
        }
    }
    __device__ __forceinline__ static void pack(const float* f, W& w) {
        unsigned int* u = reinterpret_cast<unsigned int*>(&w);
        if constexpr (VB == 2) {
            w = rc_from_float<T>(f[0]).bits;
        } else if constexpr (sizeof(T) == 4) {
#pragma unroll
            for (int i = 0; i < N; ++i) u[i] = __float_as_uint(f[i]);
        } else {
#pragma unroll
            for (int i = 0; i < N / 2; ++i)
                u[i] = (unsigned int)rc_from_float<T>(f[2 * i]).bits |
                       ((unsigned int)rc_from_float<T>(f[2 * i + 1]).bits << 16);
        }
    }
};

// One stream's share of the launch. Sizes in elements; `out_stride` is the output row length
// (sum of D over the streams), `col` this stream's first output column.
struct rc_stream2 {
    const void* values;  // [B, S, D]
    const void* times;   // [B, S]
    int S, D, col;
    int vb;              // vector bytes: 16, 8, 4 or sizeof(T)
    int lg;              // log2 of the lanes per group
    int tpg;             // targets per group per block
};

// Targets [first, first + per_block) of one stream: group `grp` of the block takes targets
// first + it * groups + grp for it < tpg, so a warp's groups write neighbouring output rows. U targets
// per group are in flight at once (their searches, then all their loads, then the stores): more
// independent memory requests per thread where each target's row is short.
template <typename T, typename TT, int VB, int U>
__device__ __forceinline__ void rc_rows_v2(const rc_stream2& st, const TT* __restrict__ tgt,
                                           T* __restrict__ out, long long n_targets, int Tn,
                                           int out_stride, unsigned long long div_mult, unsigned int div_shift,
                                           long long first) {
    constexpr int N = VB / (int)sizeof(T);
    const int g = 1 << st.lg;
    const int lane_in_group = threadIdx.x & (g - 1);
    const int grp = threadIdx.x >> st.lg;
    const int groups = blockDim.x >> st.lg;
    const int nvec = st.D / N;
    const T* __restrict__ values = static_cast<const T*>(st.values);
    const TT* __restrict__ times = static_cast<const TT*>(st.times);
#if RC_V2_SEQ
    {
        (void)groups;
        long long bp = -1;
        int jp = -1;
        TT xp = (TT)0;
#pragma unroll 1
        for (int it = 0; it < st.tpg; ++it) {
            const long long q = first + (long long)grp * st.tpg + it;
            if (q >= n_targets) return;
            long long b, t;
            rc_fast_divmod((unsigned long long)q, (unsigned long long)Tn, div_mult, div_shift, b, t);
            const TT* __restrict__ row = times + b * st.S;
            const TT x = __ldg(tgt + q);
            const int j = (b == bp && x >= xp) ? rc_walk(row, st.S, x, jp) : rc_search_cold(row, st.S, x);
            bp = b; jp = j; xp = x;
            int j0, j1;
            float w;
            rc_bracket_tail(row, st.S, x, j, j0, j1, w);
            const T* r0 = values + (b * st.S + j0) * (long long)st.D;
            const T* r1 = values + (b * st.S + j1) * (long long)st.D;
            T* o = out + q * (long long)out_stride + st.col;
            for (int v = lane_in_group; v < nvec; v += g) {
                float a[N], c[N];
                rc_vec<T, VB>::load(r0 + v * N, a);
                rc_vec<T, VB>::load(r1 + v * N, c);
#pragma unroll
                for (int i = 0; i < N; ++i) a[i] = rc_mix(a[i], c[i], w);
                rc_vec<T, VB>::store(o + v * N, a);
            }
        }
    }
#else
    for (int it = 0; it < st.tpg; it += U) {
        const T* r0[U];
        const T* r1[U];
        T* o[U];
        float w[U];
        bool live[U];
#pragma unroll
        for (int u = 0; u < U; ++u) {
            const long long q = first + (long long)(it + u) * groups + grp;
            live[u] = it + u < st.tpg && q < n_targets;
            const long long qq = live[u] ? q : 0;
            long long b, t;
            rc_fast_divmod((unsigned long long)qq, (unsigned long long)Tn, div_mult, div_shift, b, t);
            if (RC_V2_PREFETCH_BYTES > 0 && (long long)st.S * (long long)sizeof(TT) <= RC_V2_PREFETCH_BYTES) {
                const char* row = reinterpret_cast<const char*>(times + b * st.S);
                const int nbytes = st.S * (int)sizeof(TT);
                for (int off = (threadIdx.x & 31) * 128; off < nbytes; off += 128 * 32)
                    asm volatile("prefetch.global.L1 [%0];" ::"l"(row + off));
            }
            int j0, j1;
            rc_bracket2(times + b * st.S, st.S, __ldg(tgt + qq), j0, j1, w[u]);
            r0[u] = values + (b * st.S + j0) * (long long)st.D;
            r1[u] = values + (b * st.S + j1) * (long long)st.D;
            o[u] = out + qq * (long long)out_stride + st.col;
        }
        if (!live[0]) return;
#ifdef RC_V2_VUNROLL  // a build of the autotuner's (robocache/_tune.py): the feature loop unrolled, loads hoisted
        RC_PRAGMA_UNROLL(RC_V2_VUNROLL)
#endif
        for (int v = lane_in_group; v < nvec; v += g) {
            float a[U][N], c[U][N];
#pragma unroll
            for (int u = 0; u < U; ++u) {
                if (live[u]) {
                    rc_vec<T, VB>::load(r0[u] + v * N, a[u]);
                    rc_vec<T, VB>::load(r1[u] + v * N, c[u]);
                }
            }
#pragma unroll
            for (int u = 0; u < U; ++u) {
                if (live[u]) {
#pragma unroll
                    for (int i = 0; i < N; ++i) a[u][i] = rc_mix(a[u][i], c[u][i], w[u]);
                    rc_vec<T, VB>::store(o[u] + v * N, a[u]);
                }
            }
        }
    }
#endif
}

#ifndef RC_V2_UNROLL
#define RC_V2_UNROLL 1  // targets in flight per group; a compile-time choice (registers decide occupancy)
#endif
// The entries' minimum resident blocks (__launch_bounds__'s second argument, i.e. their register cap) unless a
// build overrides it: a build with RC_V2_UNROLL > 1 holds U targets' vectors in registers and needs a
// higher cap (the autotuner's variants, robocache/_tune.py, build "-DRC_V2_UNROLL=U -DRC_V2_MINB=M").
#ifdef RC_V2_MINB
#define RC_V2_MINB_OR(x) RC_V2_MINB
#else
#define RC_V2_MINB_OR(x) x
#endif
template <typename T, typename TT, int VB>
__device__ __forceinline__ void rc_rows_v2_u(const rc_stream2& st, const TT* __restrict__ tgt,
                                             T* __restrict__ out, long long n_targets, int Tn, int out_stride,
                                             unsigned long long div_mult, unsigned int div_shift, long long first) {
    rc_rows_v2<T, TT, VB, RC_V2_UNROLL>(st, tgt, out, n_targets, Tn, out_stride, div_mult, div_shift, first);
}

template <typename T, typename TT>
__device__ __forceinline__ void rc_rows_v2_any(const rc_stream2& st, const TT* __restrict__ tgt,
                                               T* __restrict__ out, long long n_targets, int Tn,
                                               int out_stride, unsigned long long div_mult,
                                               unsigned int div_shift, long long first) {
    // The vector width is uniform per stream, so this branch never diverges.
    switch (st.vb) {
        case 16: rc_rows_v2_u<T, TT, 16>(st, tgt, out, n_targets, Tn, out_stride, div_mult, div_shift, first); break;
        case 8: rc_rows_v2_u<T, TT, 8>(st, tgt, out, n_targets, Tn, out_stride, div_mult, div_shift, first); break;
        default:
            if constexpr (sizeof(T) == 2) {
                if (st.vb == 4) {
                    rc_rows_v2_u<T, TT, 4>(st, tgt, out, n_targets, Tn, out_stride, div_mult, div_shift, first);
                } else {
                    rc_rows_v2_u<T, TT, 2>(st, tgt, out, n_targets, Tn, out_stride, div_mult, div_shift, first);
                }
            } else {
                rc_rows_v2_u<T, TT, 4>(st, tgt, out, n_targets, Tn, out_stride, div_mult, div_shift, first);
            }
    }
}
