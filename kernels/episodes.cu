// EpisodeCache (robocache/episodes.py): one launch resamples every stream of a batch of training windows
// straight from the cache's ragged buffers onto the windows' target timelines.
//
// The cache packs each stream of every episode once: values [N_k, D_k] (float32, float16 or bfloat16, the
// stream's own dtype) and times [N_k] (float64) as one contiguous buffer per stream, the episodes back to
// back; in streamed mode that buffer is a ring of slots (slot j starts at sample j * cap_k) into which chunks
// of episodes are copied, and `slot_of[chunk]` says where each resident chunk sits. Per episode e (shard-local
// index) the int64 table `ep` holds [gid, n_tgt, (first sample within its chunk, samples) per stream], `origin`
// its time origin (float64), `chunk_of` its chunk.
//
// Row b of a batch reads episode e = order[order_off + b]; its window (start s, length L, in targets of the
// 1/rate grid) is drawn here from (seed, epoch, position) by a counter-based hash (splitmix64, the same
// arithmetic as robocache/episodes.py's NumPy path), or is the whole episode (lo == 0: s = 0, L = n_tgt).
// Target t < L sits at origin + (s + t) / rate (the division in double: the CPU workers' arange(T) / rate
// exactly); targets t >= L are zero and masked off. Each (row, target, stream) is one output row piece of D_k
// features, done by a group of 2^lg lanes as resample v2 does (kernels/rows_v2.cuh: the guessed bracket
// search rc_bracket2, vector loads of N elements, rc_mix, streaming stores); the launch's blocks are split
// between the streams by the table (narrow streams first, as fuse v2). The first stream of the table also
// writes the mask [B, T] and the window table [B, 3] (gid, s, L).
#include "common.cuh"
#include "rows_v2.cuh"

// Table passed by value (__grid_constant__): RC_EP_HEAD shared fields, then RC_EP_FIELDS per stream.
//   head: order ptr (int32), ep ptr (int64 [E, 2 + 2K]), origin ptr (double [E]), chunk_of ptr (int32 [E]),
//         slot_of ptr (int32 [chunks]), K, window lo, window hi, seed (uint64 bits), rate (double bits).
//   stream: values ptr, times ptr, slot capacity in samples, D, first output column,
//           dtype | N << 4 | lg << 8 | tpg << 16 (dtype 0 float32, 1 float16, 2 bfloat16; N elements per vector),
//           first block of the stream, the stream's index k in the ep table.
#define RC_EP_HEAD 16
#define RC_EP_FIELDS 8
#define RC_EP_MAX 16
struct rc_ep_table { long long f[RC_EP_HEAD + RC_EP_FIELDS * RC_EP_MAX]; };

// splitmix64's output function on x + golden ratio: a counter-based generator (no state to carry), the
// same in NumPy (robocache/episodes.py: _sm64).
__device__ __forceinline__ unsigned long long rc_sm64(unsigned long long x) {
    unsigned long long z = x + 0x9E3779B97F4A7C15ULL;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
}

// The window of the row at epoch position `pos`: whole episode (lo == 0) or length in [lo, hi] and a start
// that keeps it inside the episode's n_tgt targets; floor(h * range / 2^64) (no modulo bias, no division).
__device__ __forceinline__ void rc_ep_window(unsigned long long seed, unsigned long long epoch,
                                             unsigned long long pos, int lo, int hi, int n_tgt, int& s, int& L) {
    if (lo <= 0) { s = 0; L = n_tgt; return; }
    const unsigned long long h = rc_sm64(rc_sm64(rc_sm64(seed) ^ epoch) ^ pos);
    L = lo == hi ? lo : lo + (int)__umul64hi(rc_sm64(h), (unsigned long long)(hi - lo + 1));
    s = (int)__umul64hi(h, (unsigned long long)(n_tgt - L + 1));
}

template <typename Tin, typename Tout, int N>
__device__ __forceinline__ void rc_ep_stream(const rc_ep_table& tb, const int base, Tout* __restrict__ out,
                                             unsigned char* __restrict__ mask, long long* __restrict__ win,
                                             long long order_off, long long pos0, unsigned long long epoch,
                                             int Tn, int Dtot, long long n_targets, unsigned long long div_mult,
                                             unsigned int div_shift, long long first, int lg, int tpg, bool lead) {
    const int g = 1 << lg;
    const int lane = threadIdx.x & (g - 1);
    const int grp = threadIdx.x >> lg;
    const int groups = blockDim.x >> lg;
    const int* __restrict__ order = reinterpret_cast<const int*>(tb.f[0]);
    const long long* __restrict__ ep = reinterpret_cast<const long long*>(tb.f[1]);
    const double* __restrict__ origin = reinterpret_cast<const double*>(tb.f[2]);
    const int* __restrict__ chunk_of = reinterpret_cast<const int*>(tb.f[3]);
    const int* slot_of = reinterpret_cast<const int*>(tb.f[4]);  // written by episodes_place between launches
    const int K = (int)tb.f[5];
    const int lo = (int)tb.f[6], hi = (int)tb.f[7];
    const unsigned long long seed = (unsigned long long)tb.f[8];
    const double rate = __longlong_as_double(tb.f[9]);
    const Tin* __restrict__ values = reinterpret_cast<const Tin*>(tb.f[base + 0]);
    const double* __restrict__ times = reinterpret_cast<const double*>(tb.f[base + 1]);
    const long long cap = tb.f[base + 2];
    const int D = (int)tb.f[base + 3];
    const int col = (int)tb.f[base + 4];
    const int k = (int)tb.f[base + 7];
    const int nvec = D / N;
    const int W = 2 + 2 * K;
    for (int it = 0; it < tpg; ++it) {
        const long long q = first + (long long)it * groups + grp;
        if (q >= n_targets) return;
        long long b, t;
        rc_fast_divmod((unsigned long long)q, (unsigned long long)Tn, div_mult, div_shift, b, t);
        const int e = __ldg(order + order_off + b);
        const long long* row = ep + (long long)e * W;
        int s, L;
        rc_ep_window(seed, epoch, (unsigned long long)(pos0 + b), lo, hi, (int)__ldg(row + 1), s, L);
        const bool live = t < L;
        if (lead && lane == 0) {
            mask[q] = live ? 1 : 0;
            if (t == 0) {
                win[3 * b] = __ldg(row);
                win[3 * b + 1] = s;
                win[3 * b + 2] = L;
            }
        }
        Tout* o = out + q * (long long)Dtot + col;
        float a[N], c[N];
        if (!live) {  // past the window's end: zeros (the CPU workers' padding)
#pragma unroll
            for (int i = 0; i < N; ++i) a[i] = 0.0f;
            for (int v = lane; v < nvec; v += g) rc_vec<Tout, N * (int)sizeof(Tout)>::store(o + v * N, a);
            continue;
        }
        const int slot = slot_of[__ldg(chunk_of + e)];
        if (slot < 0) {  // never expected (the host keeps every batch's chunks resident): NaN, not a wild read
#pragma unroll
            for (int i = 0; i < N; ++i) a[i] = __int_as_float(0x7fc00000);
            for (int v = lane; v < nvec; v += g) rc_vec<Tout, N * (int)sizeof(Tout)>::store(o + v * N, a);
            continue;
        }
        const long long off = (long long)slot * cap + __ldg(row + 2 + 2 * k);
        const int cnt = (int)__ldg(row + 3 + 2 * k);
        const double x = __ldg(origin + e) + (double)((long long)s + t) / rate;
        int j0, j1;
        float w;
        rc_bracket2(times + off, cnt, x, j0, j1, w);
        const Tin* r0 = values + (off + j0) * (long long)D;
        const Tin* r1 = values + (off + j1) * (long long)D;
        for (int v = lane; v < nvec; v += g) {
            rc_vec<Tin, N * (int)sizeof(Tin)>::load(r0 + v * N, a);
            rc_vec<Tin, N * (int)sizeof(Tin)>::load(r1 + v * N, c);
#pragma unroll
            for (int i = 0; i < N; ++i) a[i] = rc_mix(a[i], c[i], w);
            rc_vec<Tout, N * (int)sizeof(Tout)>::store(o + v * N, a);
        }
    }
}

// N (elements per vector access) is uniform per stream, so the switch never diverges; 8 only where both the
// stream and the output are 16-bit (16 bytes either way).
template <typename Tin, typename Tout>
__device__ __forceinline__ void rc_ep_stream_n(int n, const rc_ep_table& tb, const int base, Tout* __restrict__ out,
                                               unsigned char* __restrict__ mask, long long* __restrict__ win,
                                               long long order_off, long long pos0, unsigned long long epoch,
                                               int Tn, int Dtot, long long n_targets, unsigned long long div_mult,
                                               unsigned int div_shift, long long first, int lg, int tpg, bool lead) {
    switch (n) {
        case 8:
            if constexpr (sizeof(Tin) == 2 && sizeof(Tout) == 2) {
                rc_ep_stream<Tin, Tout, 8>(tb, base, out, mask, win, order_off, pos0, epoch, Tn, Dtot, n_targets,
                                           div_mult, div_shift, first, lg, tpg, lead);
            }
            break;
        case 4:
            rc_ep_stream<Tin, Tout, 4>(tb, base, out, mask, win, order_off, pos0, epoch, Tn, Dtot, n_targets,
                                       div_mult, div_shift, first, lg, tpg, lead);
            break;
        case 2:
            rc_ep_stream<Tin, Tout, 2>(tb, base, out, mask, win, order_off, pos0, epoch, Tn, Dtot, n_targets,
                                       div_mult, div_shift, first, lg, tpg, lead);
            break;
        default:
            rc_ep_stream<Tin, Tout, 1>(tb, base, out, mask, win, order_off, pos0, epoch, Tn, Dtot, n_targets,
                                       div_mult, div_shift, first, lg, tpg, lead);
    }
}

template <typename Tout>
__device__ __forceinline__ void rc_ep_body(const rc_ep_table& tb, Tout* __restrict__ out,
                                           unsigned char* __restrict__ mask, long long* __restrict__ win,
                                           long long order_off, long long pos0, unsigned long long epoch, int Tn,
                                           int Dtot, long long n_targets, unsigned long long div_mult,
                                           unsigned int div_shift) {
    const long long blk = blockIdx.x;
    const int K = (int)tb.f[5];
    int slot = 0;
    while (slot + 1 < K && tb.f[RC_EP_HEAD + RC_EP_FIELDS * (slot + 1) + 6] <= blk) ++slot;
    const int base = RC_EP_HEAD + RC_EP_FIELDS * slot;
    const long long packed = tb.f[base + 5];
    const int dt = (int)(packed & 0xf);
    const int n = (int)((packed >> 4) & 0xf);
    const int lg = (int)((packed >> 8) & 0xff);
    const int tpg = (int)(packed >> 16);
    const long long first = (blk - tb.f[base + 6]) * (long long)((blockDim.x >> lg) * tpg);
    const bool lead = slot == 0;
    if (dt == 0) {
        rc_ep_stream_n<float, Tout>(n, tb, base, out, mask, win, order_off, pos0, epoch, Tn, Dtot, n_targets,
                                    div_mult, div_shift, first, lg, tpg, lead);
    } else if (dt == 1) {
        rc_ep_stream_n<rc_half, Tout>(n, tb, base, out, mask, win, order_off, pos0, epoch, Tn, Dtot, n_targets,
                                      div_mult, div_shift, first, lg, tpg, lead);
    } else {
        rc_ep_stream_n<rc_bf16, Tout>(n, tb, base, out, mask, win, order_off, pos0, epoch, Tn, Dtot, n_targets,
                                      div_mult, div_shift, first, lg, tpg, lead);
    }
}

// (table, out, mask, win, order_off, pos0, epoch, T, Dtot, n_targets, div_mult, div_shift)
#define RC_EP_ENTRY(NAME, TOUT)                                                                          \
    extern "C" __global__ void __launch_bounds__(256) NAME(                                               \
        const __grid_constant__ rc_ep_table table, TOUT* __restrict__ out, unsigned char* __restrict__ mask, \
        long long* __restrict__ win, long long order_off, long long pos0, unsigned long long epoch, int Tn,  \
        int Dtot, long long n_targets, unsigned long long div_mult, unsigned int div_shift) {              \
        rc_ep_body<TOUT>(table, out, mask, win, order_off, pos0, epoch, Tn, Dtot, n_targets, div_mult,     \
                         div_shift);                                                                      \
    }

RC_EP_ENTRY(episodes_batch_float32, float)
RC_EP_ENTRY(episodes_batch_float16, rc_half)
RC_EP_ENTRY(episodes_batch_bfloat16, rc_bf16)

// A chunk placed into a slot (streamed mode), launched on the cache's side stream after the chunk's copies:
// the chunk that held the slot before (or -1) is marked absent, the new one present. A kernel, not a copy
// from host memory: its arguments travel with the launch, so no host buffer has to outlive the call.
extern "C" __global__ void episodes_place(int* slot_of, int evicted, int chunk, int slot) {
    if (threadIdx.x == 0 && blockIdx.x == 0) {
        if (evicted >= 0) slot_of[evicted] = -1;
        slot_of[chunk] = slot;
    }
}
