// voxelize(points[B,N,3], features[B,N,C] | None, grid (GX,GY,GZ), bounds, mode)
//
// Kernel versions (providers robocache@vN; docs/kernels.md):
//   v1  voxel_{count,accumulate,mean}_v1_<T>: one thread per point, a 64-bit division per point for
//       its batch row, one atomic per point (and per feature).
//   v2  voxel_{count,accumulate,hashed,mean}_v2_<T>: blocks never straddle batch rows (one division
//       per block), PPT points per thread in flight; mean (and count where chosen) adds each block's
//       points into a shared-memory hash table first and flushes one atomic per distinct voxel
//       (vector atomics for the sums on sm_90); accumulate (the fallback for many channels) combines
//       the lanes of a warp that hit one voxel (__match_any_sync); the mean kernel walks voxels.
//   v3  voxel_{hashed,mean}_v3_<T>, voxel_mean_inplace_v3_float32, voxel_zero_v3 (mean; count and
//       occupancy call v2's kernels): one zero-fill launch, float32 sums accumulated in the output, a
//       mean pass touching only occupied voxels with vector accesses and one exact reciprocal per voxel,
//       the hash kernel with 512-thread blocks and its loads in flight together (section "v3" below).
//       Opt-in (TUNING["vox_list"]): voxel_list_v3_<T>, voxel_list_mean_v3_<T>, voxel_list_mean_inplace_v3_float32,
//       voxel_zero_list_v3, mean over sparse rows through a list of the occupied voxels (section "the list path").
//
// A point p is kept when lo <= p < hi on every axis (fp32 compare; NaN and
// +-inf fail it) and lands in voxel floor((p - lo) * inv) clamped to g - 1,
// where inv = g / (hi - lo) is rounded to fp32 on the host. The voxel's flat
// index is ((b*GX + ix)*GY + iy)*GZ + iz. The NumPy reference does the very
// same fp32 operations, so voxel assignment matches it bit for bit.
//
// Determinism: counts and occupancy are integer atomics or idempotent stores,
// hence bitwise deterministic. Mean features sum fp32 atomics in arrival order,
// so the last bits of a mean may change between runs (documented, tested with
// a tolerance); the voxel set and counts never do.
#include "common.cuh"

// Flat voxel index of point i within its row, or -1 when dropped.
template <typename T>
__device__ __forceinline__ int rc_voxel_of(const T* __restrict__ p, const float* lo,
                                           const float* hi, const float* inv, const int* g) {
    int idx = 0;
#pragma unroll
    for (int a = 0; a < 3; ++a) {
        const float x = rc_to_float(p[a]);
        if (!(x >= lo[a] && x < hi[a])) return -1;
        int ix = (int)floorf((x - lo[a]) * inv[a]);
        ix = min(ix, g[a] - 1);
        idx = idx * g[a] + ix;
    }
    return idx;
}

#define RC_VOX_ARGS                                                                      \
    float lo0, float lo1, float lo2, float hi0, float hi1, float hi2, float inv0,       \
    float inv1, float inv2, int g0, int g1, int g2
#define RC_VOX_LOCALS                                                                    \
    const float lo[3] = {lo0, lo1, lo2};                                                 \
    const float hi[3] = {hi0, hi1, hi2};                                                 \
    const float inv[3] = {inv0, inv1, inv2};                                             \
    const int g[3] = {g0, g1, g2};                                                       \
    const long long V = (long long)g0 * g1 * g2;

// Occupancy's store of a voxel: an atomicOr of the byte's bit pattern into its aligned 32-bit word (a reduction the
// L2 performs, as torch.compile's index_add does its counts; the word's other bytes are or-ed with 0, and a word
// never leaves the allocation's 256-byte granule). On the H200 (scripts/vox_probe.py, the occupancy points of seeds
// 8861, 5309 and 3318, 2026-11-28) 0.83x the byte store's time in geomean over 41 points, 0.50x on the slowest
// (s5309-40: 1384 -> 685 us), 40 of 40 at >= 1.0x torch.compile where the byte store had 37 (worst 0.73x -> 1.14x):
// byte stores from many SMs into hot lines cost more than reductions there. RC_VOX_OCC_RED=0: the byte store.
#ifndef RC_VOX_OCC_RED
#define RC_VOX_OCC_RED 1
#endif
__device__ __forceinline__ void rc_occ_set(unsigned char* occ, long long flat) {
#if RC_VOX_OCC_RED
    const unsigned long long a = reinterpret_cast<unsigned long long>(occ + flat);
    atomicOr(reinterpret_cast<unsigned int*>(a & ~3ull), 1u << ((a & 3ull) * 8u));
#else
    occ[flat] = 1;
#endif
}

// counts[B*V] (int32, zeroed) += 1 per kept point; occupancy[B*V] (uint8,
// zeroed) = 1 per kept point. Either pointer may be null.
template <typename T>
__device__ __forceinline__ void count_body(const T* __restrict__ points, long long B, int N,
                                           int* __restrict__ counts, unsigned char* __restrict__ occ,
                                           RC_VOX_ARGS) {
    RC_VOX_LOCALS
    const long long total = B * (long long)N;
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < total;
         i += (long long)gridDim.x * blockDim.x) {
        const int v = rc_voxel_of(points + 3 * i, lo, hi, inv, g);
        if (v < 0) continue;
        const long long flat = (i / N) * V + v;
        if (counts) atomicAdd(counts + flat, 1);
        if (occ) rc_occ_set(occ, flat);
    }
}

// counts[B*V] += 1 and sums[B*V*C] += features for each kept point.
template <typename T>
__device__ __forceinline__ void accumulate_body(const T* __restrict__ points,
                                                const T* __restrict__ feats, long long B, int N,
                                                int C, int* __restrict__ counts,
                                                float* __restrict__ sums, RC_VOX_ARGS) {
    RC_VOX_LOCALS
    const long long total = B * (long long)N;
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < total;
         i += (long long)gridDim.x * blockDim.x) {
        const int v = rc_voxel_of(points + 3 * i, lo, hi, inv, g);
        if (v < 0) continue;
        const long long flat = (i / N) * V + v;
        atomicAdd(counts + flat, 1);
        const T* f = feats + i * C;
        float* s = sums + flat * C;
        for (int c = 0; c < C; ++c) atomicAdd(s + c, rc_to_float(f[c]));
    }
}

// out[B*V*C] = sums / counts (0 where a voxel is empty), in the feature dtype.
template <typename T>
__device__ __forceinline__ void mean_body(const int* __restrict__ counts,
                                          const float* __restrict__ sums, T* __restrict__ out,
                                          long long BV, int C) {
    const long long total = BV * C;
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < total;
         i += (long long)gridDim.x * blockDim.x) {
        const int n = counts[i / C];
        out[i] = rc_from_float<T>(n > 0 ? sums[i] / (float)n : 0.0f);
    }
}

// ---- v2 ---------------------------------------------------------------------------------------
#ifndef RC_VOX_PPT
#define RC_VOX_PPT 4  // points per thread: independent loads in flight before the first atomic
#endif

// The batch row and the first point of this block: blocks_per_row blocks per row, so a block never
// straddles two rows (one division per block, none per point).
__device__ __forceinline__ void rc_vox_block(int blocks_per_row, long long& b, long long& first) {
    b = blockIdx.x / blocks_per_row;
    first = (long long)(blockIdx.x - b * blocks_per_row) * blockDim.x * RC_VOX_PPT;
}

template <typename T>
__device__ __forceinline__ void count_v2_body(const T* __restrict__ points, int N, int blocks_per_row,
                                              int* __restrict__ counts, unsigned char* __restrict__ occ,
                                              RC_VOX_ARGS) {
    RC_VOX_LOCALS
    long long b, first;
    rc_vox_block(blocks_per_row, b, first);
    const T* prow = points + b * (long long)N * 3;
    int vox[RC_VOX_PPT];
#pragma unroll
    for (int k = 0; k < RC_VOX_PPT; ++k) {  // all loads first: RC_VOX_PPT points in flight per thread
        const long long i = first + (long long)k * blockDim.x + threadIdx.x;
        vox[k] = i < N ? rc_voxel_of(prow + 3 * i, lo, hi, inv, g) : -1;
    }
#pragma unroll
    for (int k = 0; k < RC_VOX_PPT; ++k) {
        // one atomic per point: warp aggregation (__match_any_sync) was measured no faster on an H100
        // (uniform and clustered clouds; clustered points of a warp rarely share a voxel)
        if (vox[k] >= 0) {
            const long long flat = b * V + vox[k];
            if (counts) atomicAdd(counts + flat, 1);
            if (occ) rc_occ_set(occ, flat);
        }
    }
}

template <typename T>
__device__ __forceinline__ void accumulate_v2_body(const T* __restrict__ points, const T* __restrict__ feats,
                                                   int N, int C, int blocks_per_row, int* __restrict__ counts,
                                                   float* __restrict__ sums, RC_VOX_ARGS) {
    RC_VOX_LOCALS
    long long b, first;
    rc_vox_block(blocks_per_row, b, first);
    const T* prow = points + b * (long long)N * 3;
    const T* frow = feats + b * (long long)N * C;
    int vox[RC_VOX_PPT];
#pragma unroll
    for (int k = 0; k < RC_VOX_PPT; ++k) {
        const long long i = first + (long long)k * blockDim.x + threadIdx.x;
        vox[k] = i < N ? rc_voxel_of(prow + 3 * i, lo, hi, inv, g) : -1;
    }
    const int lane = threadIdx.x & 31;
#pragma unroll
    for (int k = 0; k < RC_VOX_PPT; ++k) {
        const long long i = first + (long long)k * blockDim.x + threadIdx.x;
        const unsigned int peers = __match_any_sync(0xffffffffu, vox[k]);
        const bool leader = vox[k] >= 0 && lane == __ffs(peers) - 1;
        // rounds needed so every lane has summed its peers: the largest peer set of the warp, minus one
        int rounds = __popc(peers);
#pragma unroll
        for (int o = 16; o > 0; o >>= 1) rounds = max(rounds, __shfl_xor_sync(0xffffffffu, rounds, o));
        const long long flat = b * V + vox[k];
        if (leader) atomicAdd(counts + flat, __popc(peers));
        for (int c = 0; c < C; ++c) {
            const float x = vox[k] >= 0 ? rc_to_float(frow[i * C + c]) : 0.0f;
            float tot = x;
            unsigned int rest = peers & ~(1u << lane);
            for (int r = 1; r < rounds; ++r) {  // uniform trip count: every lane shuffles each round
                const int src = rest ? __ffs(rest) - 1 : lane;
                rest &= rest - 1;
                const float y = __shfl_sync(0xffffffffu, x, src);
                if (src != lane) tot += y;
            }
            if (leader) atomicAdd(sums + flat * C + c, tot);
        }
    }
}

// out[v, c] = sums[v, c] / counts[v] (0 where empty): one thread per voxel, its C features in a row.
template <typename T>
__device__ __forceinline__ void mean_v2_body(const int* __restrict__ counts, const float* __restrict__ sums,
                                             T* __restrict__ out, long long BV, int C) {
    for (long long v = blockIdx.x * (long long)blockDim.x + threadIdx.x; v < BV;
         v += (long long)gridDim.x * blockDim.x) {
        const int n = __ldg(counts + v);
        for (int c = 0; c < C; ++c)  // a division, as v1 and the reference (a reciprocal is 1 ulp off)
            out[v * C + c] = rc_from_float<T>(n > 0 ? __ldg(sums + v * C + c) / (float)n : 0.0f);
    }
}

// ---- v2, block-aggregated (count and mean) ---------------------------------------------------------
// Clustered clouds send hundreds of points of a row to a few hot voxels, and same-address atomics
// serialise in L2 (v1 on an H200: mean over a clustered cloud 65 us against 56 us uniform, and
// slower than torch.compile). Each block first adds its ppb points into a shared-memory hash table
// keyed by voxel (linear probing, <= 50% full), then adds every occupied slot to the grid with one
// atomic (feature sums with 16- or 8-byte vector atomics on sm_90): a hot voxel costs one global
// atomic per block instead of one per point. A point whose probe sequence is full goes straight to
// the grid. Shared memory: keys, counts and C float sums per slot (dynamic, <= 48 KB).
__device__ __forceinline__ void rc_add_sums(float* dst, const float* src, int C) {
    int c = 0;
#if __CUDA_ARCH__ >= 900
    if (((reinterpret_cast<unsigned long long>(dst) & 15) == 0)) {
        for (; c + 4 <= C; c += 4)
            asm volatile("red.global.add.v4.f32 [%0], {%1, %2, %3, %4};" ::"l"(dst + c), "f"(src[c]),
                         "f"(src[c + 1]), "f"(src[c + 2]), "f"(src[c + 3]) : "memory");
    }
    if (((reinterpret_cast<unsigned long long>(dst + c) & 7) == 0)) {
        for (; c + 2 <= C; c += 2)
            asm volatile("red.global.add.v2.f32 [%0], {%1, %2};" ::"l"(dst + c), "f"(src[c]), "f"(src[c + 1])
                         : "memory");
    }
#endif
    for (; c < C; ++c) atomicAdd(dst + c, src[c]);
}

template <typename T>
__device__ __forceinline__ void hashed_body(const T* __restrict__ points, const T* __restrict__ feats, int N,
                                            int C, int blocks_per_row, int ppb, int hs_log2,
                                            int* __restrict__ counts, float* __restrict__ sums, RC_VOX_ARGS) {
    RC_VOX_LOCALS
    extern __shared__ int rc_sh[];
    const int HS = 1 << hs_log2;
    int* keys = rc_sh;
    int* cnt = rc_sh + HS;
    float* acc = reinterpret_cast<float*>(rc_sh + 2 * HS);  // acc[slot * C + c]
    for (int i = threadIdx.x; i < HS; i += blockDim.x) { keys[i] = -1; cnt[i] = 0; }
    for (int i = threadIdx.x; i < HS * C; i += blockDim.x) acc[i] = 0.0f;
    __syncthreads();

    const long long b = blockIdx.x / blocks_per_row;
    const long long first = (long long)(blockIdx.x - b * blocks_per_row) * ppb;
    const long long last = min(first + (long long)ppb, (long long)N);
    const T* prow = points + b * (long long)N * 3;
    const T* frow = feats + b * (long long)N * C;
    for (long long i = first + threadIdx.x; i < last; i += blockDim.x) {
        const int v = rc_voxel_of(prow + 3 * i, lo, hi, inv, g);
        if (v < 0) continue;
        unsigned int h = ((unsigned int)v * 2654435761u) >> (32 - hs_log2);
        int slot = -1;
        for (int probe = 0; probe < 16; ++probe) {
            const int k = atomicCAS(keys + h, -1, v);
            if (k == -1 || k == v) { slot = (int)h; break; }
            h = (h + 1) & (HS - 1);
        }
        if (slot >= 0) {
            atomicAdd(cnt + slot, 1);
            for (int c = 0; c < C; ++c) atomicAdd(acc + slot * C + c, rc_to_float(frow[i * C + c]));
        } else {  // table crowded here: straight to the grid
            const long long flat = b * V + v;
            atomicAdd(counts + flat, 1);
            for (int c = 0; c < C; ++c) atomicAdd(sums + flat * C + c, rc_to_float(frow[i * C + c]));
        }
    }
    __syncthreads();
    for (int s = threadIdx.x; s < HS; s += blockDim.x) {
        const int k = keys[s];
        if (k < 0) continue;
        const long long flat = b * V + k;
        atomicAdd(counts + flat, cnt[s]);
        if (C) rc_add_sums(sums + flat * C, acc + s * C, C);
    }
}

// ---- v3 (mean; count and occupancy keep v2's kernels) -------------------------------------------
// From the ncu study of v2 mean over a clustered cloud (docs/kernel-dev/ncu-h100-voxelize-mean-clustered.md):
// two zero fills (counts, sums), a hash kernel at 36% occupancy and 14% of DRAM peak (B4 N100k: 392
// blocks of 256 threads are about 3 blocks, 760 threads, per SM of 132, the 36% measured; each thread
// walks its 4 points one after another: load, probe, load features, add), and a dense mean pass over
// every voxel (a scalar loop of one division per feature, 21 MB read for the occupied few). v3:
//   - one zero-fill launch (voxel_zero_v3) for both buffers, 16-byte stores;
//   - float32 features sum straight into the output (no sums buffer): the mean pass reads the dense
//     counts and touches only occupied voxels, scaling their rows in place with 16-/8-byte accesses;
//     float16/bfloat16 keep float32 sums in the scratch buffer beside the counts and the mean pass
//     writes every row (zeros where empty) with the widest access the row and pointer allow;
//   - the quotient from one reciprocal per voxel, made exact: q = s * y, r = fma(-q, n, s),
//     q' = fma(r, y, q) with y = RN(1 / n) is the correctly rounded s / n (Markstein's theorem; a
//     NumPy model of these three roundings checks it in tests/test_voxelize_v3_model.py), so v3's
//     means equal v2's division bit for bit on the same sums; non-finite or tiny sums (|s| < 2^-64,
//     zero included) take the division itself;
//   - the hash kernel: 512-thread blocks (the same 392 blocks hold twice the threads; 40 registers and
//     48 KB of table let 3 blocks, 1536 threads, share an SM; v2: 4 of 256), RC_V3_PPT points
//     per thread with their coordinates and first RC_V3_CPRE features loaded before any probe (one
//     memory latency per round instead of two per point), a table sized from the problem so small
//     launches still cover the SMs, 16-byte shared-memory initialisation.
#ifndef RC_V3_PPT
#define RC_V3_PPT 2  // points per thread in flight in the hash kernel
#endif
#ifndef RC_V3_FLAT_FLUSH
#define RC_V3_FLAT_FLUSH 0  // 1: the hash kernel flushes its sums one table element a thread (hashed_v3_body)
#endif
#ifndef RC_V3_CPRE
#define RC_V3_CPRE 4  // features per point loaded with the coordinates (the rest after the probe)
#endif

// Zero n 4-byte words at p (4-byte aligned): a scalar head to the first 16-byte boundary, 16-byte
// stores, a scalar tail. t / nt: this thread's index and the number of threads in the grid.
__device__ __forceinline__ void rc_zero_words(unsigned int* p, long long n, long long t, long long nt) {
    if (n <= 0) return;
    const long long head = min((long long)(((16 - (reinterpret_cast<unsigned long long>(p) & 15)) & 15) >> 2), n);
    for (long long i = t; i < head; i += nt) p[i] = 0u;
    uint4* q = reinterpret_cast<uint4*>(p + head);
    const long long nq = (n - head) >> 2;
    for (long long i = t; i < nq; i += nt) q[i] = make_uint4(0u, 0u, 0u, 0u);
    const long long done = head + 4 * nq;
    for (long long i = t; i < n - done; i += nt) p[done + i] = 0u;  // < 4 words
}

// s / d rounded to nearest (IEEE division), from y = RN(1 / d): q0 = RN(s y) is within an ulp of s / d,
// r = s - q0 d is exact (one fma), and RN(q0 + r y) is the correctly rounded quotient when y is within
// half an ulp of 1 / d and nothing under- or overflows (Markstein 1990). d = (float)n, n >= 1, so
// y in [2^-31, 1]; |s| >= 2^-64 keeps r and the quotient far from the subnormal range. Elsewhere (zero,
// tiny, inf, NaN sums) the division itself.
__device__ __forceinline__ float rc_div_by_rcp(float s, float d, float y) {
    const bool finite = (__float_as_uint(s) & 0x7f800000u) != 0x7f800000u;  // neither inf nor NaN
    const float q0 = __fmul_rn(s, y);
    const float r = __fmaf_rn(-q0, d, s);
    const float q = __fmaf_rn(r, y, q0);
    return (finite && fabsf(s) >= 0x1p-64f) ? q : s / d;
}

// Rows narrower than a 16-byte access (vw <= 2: C odd, or C % 4 == 2): a thread per voxel made each warp access
// touch 32 rows C elements apart (2 or 4 useful bytes a lane, spread over 32 * C elements: up to a sector per lane
// per access; on the H200's sampled run, bfloat16 means of C = 13-15 ran 0.32-0.70x torch.compile). Here each
// block walks its 256 voxels' C * 256 elements flat, so a warp's loads and stores are contiguous; the voxel of
// element j (j / C) follows by adding blockDim's quotient and remainder, no division per element. Each element's
// arithmetic is the row loop's (the same reciprocal and rc_div_by_rcp), so the output is the same bit for bit;
// empty voxels get +0 and their sums are not read (the load is predicated per lane).
// Zero n 16-bit values at p (2-byte aligned) with the block's threads: a scalar head to the first 16-byte
// boundary, 16-byte stores, a scalar tail.
__device__ __forceinline__ void rc_zero_halves(unsigned short* p, unsigned int n) {
    const unsigned int head = min((unsigned int)(((16u - (unsigned int)(reinterpret_cast<unsigned long long>(p) & 15u)) & 15u) >> 1), n);
    for (unsigned int i = threadIdx.x; i < head; i += blockDim.x) p[i] = 0;
    uint4* q = reinterpret_cast<uint4*>(p + head);
    const unsigned int nq = (n - head) >> 3;
    for (unsigned int i = threadIdx.x; i < nq; i += blockDim.x) q[i] = make_uint4(0u, 0u, 0u, 0u);
    const unsigned int done = head + 8 * nq;
    for (unsigned int i = threadIdx.x; i < n - done; i += blockDim.x) p[done + i] = 0;  // < 8 values
}

template <typename T>
__device__ __forceinline__ void mean_v3_flat(const int* __restrict__ counts, const float* __restrict__ sums,
                                             T* __restrict__ out, long long BV, int C) {
    const unsigned int uc = (unsigned int)C;
    const unsigned int step_q = blockDim.x / uc, step_r = blockDim.x % uc;
    const unsigned int q0 = threadIdx.x / uc, r0 = threadIdx.x % uc;
    for (long long v0 = (long long)blockIdx.x * blockDim.x; v0 < BV; v0 += (long long)gridDim.x * blockDim.x) {
        // at most blockDim voxels: the callers take this path only where blockDim * C fits 32 bits
        const unsigned int nel = (unsigned int)min((long long)blockDim.x, BV - v0) * uc;
        const long long e0 = v0 * C;
        // a tile of empty voxels (most of a sparse grid) is zeroed with 16-byte stores, its counts read once
        const int mine = v0 + threadIdx.x < BV ? __ldg(counts + v0 + threadIdx.x) : 0;
        if (!__syncthreads_or(mine > 0)) {
            rc_zero_halves(reinterpret_cast<unsigned short*>(out + e0), nel);
            continue;
        }
        unsigned int q = q0, r = r0;  // (q, r) = divmod(j, C)
        for (unsigned int j = threadIdx.x; j < nel; j += blockDim.x) {
            const int n = __ldg(counts + v0 + q);
            float x = 0.0f;
            if (n > 0) {
                const float d = (float)n;
                x = rc_div_by_rcp(__ldg(sums + e0 + j), d, __frcp_rn(d));
            }
            out[e0 + j] = rc_from_float<T>(x);
            q += step_q;
            r += step_r;
            if (r >= uc) {
                r -= uc;
                ++q;
            }
        }
    }
}

// The float32 means in place, walked flat as mean_v3_flat (occupied voxels' elements only).
__device__ __forceinline__ void mean_inplace_v3_flat(const int* __restrict__ counts, float* __restrict__ out,
                                                     long long BV, int C) {
    const unsigned int uc = (unsigned int)C;
    const unsigned int step_q = blockDim.x / uc, step_r = blockDim.x % uc;
    const unsigned int q0 = threadIdx.x / uc, r0 = threadIdx.x % uc;
    for (long long v0 = (long long)blockIdx.x * blockDim.x; v0 < BV; v0 += (long long)gridDim.x * blockDim.x) {
        const unsigned int nel = (unsigned int)min((long long)blockDim.x, BV - v0) * uc;
        float* base = out + v0 * C;
        // a tile of empty voxels was zeroed by voxel_zero_v3: nothing to scale, its counts read once
        const int mine = v0 + threadIdx.x < BV ? __ldg(counts + v0 + threadIdx.x) : 0;
        if (!__syncthreads_or(mine > 0)) continue;
        unsigned int q = q0, r = r0;
        for (unsigned int j = threadIdx.x; j < nel; j += blockDim.x) {
            const int n = __ldg(counts + v0 + q);
            if (n > 0) {
                const float d = (float)n;
                base[j] = rc_div_by_rcp(base[j], d, __frcp_rn(d));
            }
            q += step_q;
            r += step_r;
            if (r >= uc) {
                r -= uc;
                ++q;
            }
        }
    }
}

// float32 means in place: out[v, :] holds the sums; scale the rows of occupied voxels by 1 / counts[v]
// (empty rows were zeroed by voxel_zero_v3 and are not touched). vw: floats per access (4, 2 or 1),
// chosen on the host so every row start is aligned to it (C % vw == 0 and out aligned to 4 * vw bytes).
__device__ __forceinline__ void mean_inplace_v3_body(const int* __restrict__ counts, float* __restrict__ out,
                                                     long long BV, int C, int vw) {
    if (vw <= 2 && (unsigned long long)C * blockDim.x <= 0xffffffffull) {  // narrow rows: walked flat
        mean_inplace_v3_flat(counts, out, BV, C);
        return;
    }
    for (long long v = blockIdx.x * (long long)blockDim.x + threadIdx.x; v < BV;
         v += (long long)gridDim.x * blockDim.x) {
        const int n = __ldg(counts + v);
        if (n <= 0) continue;
        const float d = (float)n;
        const float y = __frcp_rn(d);  // once per voxel
        float* row = out + v * C;
        if (vw == 4) {
            for (int c = 0; c < C; c += 4) {
                float4 x = *reinterpret_cast<float4*>(row + c);
                x.x = rc_div_by_rcp(x.x, d, y);
                x.y = rc_div_by_rcp(x.y, d, y);
                x.z = rc_div_by_rcp(x.z, d, y);
                x.w = rc_div_by_rcp(x.w, d, y);
                *reinterpret_cast<float4*>(row + c) = x;
            }
        } else if (vw == 2) {
            for (int c = 0; c < C; c += 2) {
                float2 x = *reinterpret_cast<float2*>(row + c);
                x.x = rc_div_by_rcp(x.x, d, y);
                x.y = rc_div_by_rcp(x.y, d, y);
                *reinterpret_cast<float2*>(row + c) = x;
            }
        } else {
            for (int c = 0; c < C; ++c) row[c] = rc_div_by_rcp(row[c], d, y);
        }
    }
}

// Pack two 16-bit values into a word (low half first, as in memory on a little-endian GPU).
template <typename T>
__device__ __forceinline__ unsigned int rc_pack2(float a, float b) {
    return (unsigned int)rc_from_float<T>(a).bits | ((unsigned int)rc_from_float<T>(b).bits << 16);
}

// float16/bfloat16 means: out[v, :] = sums[v, :] / counts[v] for every voxel, 0 where empty. sums:
// float32 rows in the scratch buffer (16-byte aligned). vw: 16-bit values per store (8, 4, 2 or 1),
// chosen on the host so C % vw == 0 and out is aligned to 2 * vw bytes; sums rows are then aligned to
// the matching float loads (C % 4 == 0 for 4 and 8, C % 2 == 0 for 2).
template <typename T>
__device__ __forceinline__ void mean_v3_body(const int* __restrict__ counts, const float* __restrict__ sums,
                                             T* __restrict__ out, long long BV, int C, int vw) {
    if (vw <= 2 && (unsigned long long)C * blockDim.x <= 0xffffffffull) {  // narrow rows: walked flat
        mean_v3_flat<T>(counts, sums, out, BV, C);
        return;
    }
    for (long long v = blockIdx.x * (long long)blockDim.x + threadIdx.x; v < BV;
         v += (long long)gridDim.x * blockDim.x) {
        const int n = __ldg(counts + v);
        T* row = out + v * C;
        const float* srow = sums + v * C;
        if (n <= 0) {  // empty voxel: zeros, the sums are not read
            if (vw == 8) {
                for (int c = 0; c < C; c += 8) *reinterpret_cast<uint4*>(row + c) = make_uint4(0u, 0u, 0u, 0u);
            } else if (vw == 4) {
                for (int c = 0; c < C; c += 4) *reinterpret_cast<uint2*>(row + c) = make_uint2(0u, 0u);
            } else if (vw == 2) {
                for (int c = 0; c < C; c += 2) *reinterpret_cast<unsigned int*>(row + c) = 0u;
            } else {
                for (int c = 0; c < C; ++c) row[c] = rc_from_float<T>(0.0f);
            }
            continue;
        }
        const float d = (float)n;
        const float y = __frcp_rn(d);  // once per voxel
        if (vw >= 4) {  // C % 4 == 0: float4 loads of the sums
            for (int c = 0; c < C; c += vw) {
                const float4 a = __ldg(reinterpret_cast<const float4*>(srow + c));
                const unsigned int w0 = rc_pack2<T>(rc_div_by_rcp(a.x, d, y), rc_div_by_rcp(a.y, d, y));
                const unsigned int w1 = rc_pack2<T>(rc_div_by_rcp(a.z, d, y), rc_div_by_rcp(a.w, d, y));
                if (vw == 8) {
                    const float4 e = __ldg(reinterpret_cast<const float4*>(srow + c + 4));
                    const unsigned int w2 = rc_pack2<T>(rc_div_by_rcp(e.x, d, y), rc_div_by_rcp(e.y, d, y));
                    const unsigned int w3 = rc_pack2<T>(rc_div_by_rcp(e.z, d, y), rc_div_by_rcp(e.w, d, y));
                    *reinterpret_cast<uint4*>(row + c) = make_uint4(w0, w1, w2, w3);
                } else {
                    *reinterpret_cast<uint2*>(row + c) = make_uint2(w0, w1);
                }
            }
        } else if (vw == 2) {
            for (int c = 0; c < C; c += 2) {
                const float2 a = __ldg(reinterpret_cast<const float2*>(srow + c));
                *reinterpret_cast<unsigned int*>(row + c) =
                    rc_pack2<T>(rc_div_by_rcp(a.x, d, y), rc_div_by_rcp(a.y, d, y));
            }
        } else {
            for (int c = 0; c < C; ++c) row[c] = rc_from_float<T>(rc_div_by_rcp(__ldg(srow + c), d, y));
        }
    }
}

// The hash kernel of v2 (see above) at higher occupancy and with its loads in flight together. Shared
// memory: keys[HS], cnt[HS], acc[HS * C] (HS a power of two >= 512, so every region is a whole number
// of 16-byte words). C == 0 counts only (counts may then be the int32 output itself); occ non-null: occupancy, one word
// reduction (rc_occ_set) per distinct voxel of a block (counts and sums unused).
template <typename T, bool FLAT_INSERT>
__device__ __forceinline__ void hashed_v3_body(const T* __restrict__ points, const T* __restrict__ feats, int N,
                                               int C, int blocks_per_row, int ppb, int hs_log2,
                                               int* __restrict__ counts, float* __restrict__ sums,
                                               unsigned char* __restrict__ occ, RC_VOX_ARGS) {
    RC_VOX_LOCALS
    extern __shared__ uint4 rc_sh4[];
    const int HS = 1 << hs_log2;
    int* keys = reinterpret_cast<int*>(rc_sh4);
    int* cnt = keys + HS;
    float* acc = reinterpret_cast<float*>(keys + 2 * HS);  // acc[slot * C + c]
    // the flat insert's: a bit per slot whose acc holds sums, the count of new slots, a slot index per thread
    const int used_words = ((HS + 127) >> 7) << 2;  // >= HS / 32, a whole number of uint4
    unsigned int* rc_used = reinterpret_cast<unsigned int*>(keys + HS * (2 + C));
    int* rc_fresh = reinterpret_cast<int*>(rc_used + used_words);
    int* rc_slot = rc_fresh + 4;
    {
        const int kq = HS >> 2, nq = (HS * (2 + C) + (FLAT_INSERT ? used_words + 4 : 0)) >> 2;
        for (int q = threadIdx.x; q < nq; q += blockDim.x)
            rc_sh4[q] = q < kq ? make_uint4(~0u, ~0u, ~0u, ~0u) : make_uint4(0u, 0u, 0u, 0u);
    }
    __syncthreads();

    const int b = blockIdx.x / blocks_per_row;
    // point indices within the row in 32 bits: N < 2^31, and base + RC_V3_PPT * blockDim stays below 2^32
    const unsigned int first = (unsigned int)(blockIdx.x - b * blocks_per_row) * (unsigned int)ppb;
    const unsigned int last = min(first + (unsigned int)ppb, (unsigned int)N);
    const T* prow = points + (long long)b * N * 3;
    const T* frow = feats + (long long)b * N * C;
    if (FLAT_INSERT) {
        // Mean, inserted flat (voxel_hashed_flat_v3): a round of blockDim points, one a thread, finds each
        // point's slot (its count added there) and leaves it in rc_slot; then the round's blockDim * C features
        // are added one element a thread (contiguous loads; a warp's shared atomics on consecutive channels of
        // one or two slots: no bank conflicts where the thread-per-point insert puts 32 lanes' channel c of
        // slots C words apart on the same banks). A point the crowded table could not take is added to the
        // grid (rc_slot = -2 - voxel); a dropped one is skipped (-1). A round whose points took new slots for
        // more than half of them aggregates little: its features go straight to the grid (one element a
        // thread, as voxel_accumulate_flat_v3), and only slots that received sums (rc_used) are flushed.
        const unsigned int uc = (unsigned int)C;
        const unsigned int step_q = blockDim.x / uc, step_r = blockDim.x % uc;
        int fresh0 = 0;  // new slots before this round (*rc_fresh read where no thread adds to it)
        for (unsigned int base = first; base < last; base += blockDim.x) {
            const unsigned int i = base + threadIdx.x;
            int slot = -1;
            if (i < last) {
                const int v = rc_voxel_of(prow + 3ll * i, lo, hi, inv, g);
                if (v >= 0) {
                    unsigned int h = ((unsigned int)v * 2654435761u) >> (32 - hs_log2);
                    for (int probe = 0; probe < 16; ++probe) {
                        const int key = atomicCAS(keys + h, -1, v);
                        if (key == -1 || key == v) {
                            slot = (int)h;
                            if (key == -1) atomicAdd(rc_fresh, 1);
                            break;
                        }
                        h = (h + 1) & (HS - 1);
                    }
                    if (slot >= 0) {
                        atomicAdd(cnt + slot, 1);
                    } else {
                        atomicAdd(counts + (long long)b * V + v, 1);
                        slot = -2 - v;
                    }
                }
            }
            rc_slot[threadIdx.x] = slot;
            __syncthreads();
            const unsigned int np = min((unsigned int)blockDim.x, last - base), ne = np * uc;
            const int fresh1 = *rc_fresh;
            const bool direct = 2u * (unsigned int)(fresh1 - fresh0) > np;
            fresh0 = fresh1;
            const T* fr = frow + (long long)base * C;
            unsigned int q = threadIdx.x / uc, r = threadIdx.x % uc;
            for (unsigned int e0 = threadIdx.x; e0 < ne; e0 += blockDim.x * RC_VOX_PPT) {
                float fv[RC_VOX_PPT];
                int sl[RC_VOX_PPT];
                unsigned int ch[RC_VOX_PPT];
#pragma unroll
                for (int k = 0; k < RC_VOX_PPT; ++k) {  // the loads of this thread's elements before any atomic
                    const unsigned int e = e0 + k * blockDim.x;
                    fv[k] = e < ne ? rc_to_float(fr[e]) : 0.0f;
                    sl[k] = e < ne ? rc_slot[q] : -1;
                    ch[k] = r;
                    q += step_q;
                    r += step_r;
                    if (r >= uc) {
                        r -= uc;
                        ++q;
                    }
                }
#pragma unroll
                for (int k = 0; k < RC_VOX_PPT; ++k) {
                    if (sl[k] >= 0 && direct) {
                        atomicAdd(sums + ((long long)b * V + keys[sl[k]]) * C + ch[k], fv[k]);
                    } else if (sl[k] >= 0) {
                        atomicAdd(acc + sl[k] * C + ch[k], fv[k]);
                        if (ch[k] == 0) atomicOr(rc_used + (sl[k] >> 5), 1u << (sl[k] & 31));
                    } else if (sl[k] <= -2)
                        atomicAdd(sums + ((long long)b * V + (-2 - sl[k])) * C + ch[k], fv[k]);
                }
            }
            __syncthreads();  // rc_slot is the next round's
        }
    }
    const int cpre = min(C, RC_V3_CPRE);
    for (unsigned int base = first + threadIdx.x; !FLAT_INSERT && base < last; base += blockDim.x * RC_V3_PPT) {
        int vox[RC_V3_PPT];
        float fv[RC_V3_PPT][RC_V3_CPRE];
#pragma unroll
        for (int k = 0; k < RC_V3_PPT; ++k) {  // every load of this round before the first probe
            const unsigned int i = base + k * blockDim.x;
            vox[k] = i < last ? rc_voxel_of(prow + 3ll * i, lo, hi, inv, g) : -1;
#pragma unroll
            for (int c = 0; c < RC_V3_CPRE; ++c)  // loaded for dropped points too: no wait on the coordinates
                fv[k][c] = (i < last && c < cpre) ? rc_to_float(frow[(long long)i * C + c]) : 0.0f;
        }
#pragma unroll
        for (int k = 0; k < RC_V3_PPT; ++k) {
            const int v = vox[k];
            if (v < 0) continue;
            const long long i = base + k * blockDim.x;
            unsigned int h = ((unsigned int)v * 2654435761u) >> (32 - hs_log2);
            int slot = -1;
            for (int probe = 0; probe < 16; ++probe) {
                const int key = atomicCAS(keys + h, -1, v);
                if (key == -1 || key == v) { slot = (int)h; break; }
                h = (h + 1) & (HS - 1);
            }
            if (slot >= 0) {
                atomicAdd(cnt + slot, 1);
                float* a = acc + slot * C;
#pragma unroll
                for (int c = 0; c < RC_V3_CPRE; ++c)
                    if (c < cpre) atomicAdd(a + c, fv[k][c]);
                for (int c = RC_V3_CPRE; c < C; ++c) atomicAdd(a + c, rc_to_float(frow[i * C + c]));
            } else if (occ) {  // table crowded here: straight to the grid
                rc_occ_set(occ, (long long)b * V + v);
            } else {
                const long long flat = (long long)b * V + v;
                atomicAdd(counts + flat, 1);
                float* s = sums + flat * C;
#pragma unroll
                for (int c = 0; c < RC_V3_CPRE; ++c)
                    if (c < cpre) atomicAdd(s + c, fv[k][c]);
                for (int c = RC_V3_CPRE; c < C; ++c) atomicAdd(s + c, rc_to_float(frow[i * C + c]));
            }
        }
    }
    __syncthreads();
    for (int s = threadIdx.x; s < HS; s += blockDim.x) {
        const int k = keys[s];
        if (k < 0) continue;
        const long long flat = b * V + k;
        if (occ) {  // occupancy: one reduction per distinct voxel of the block
            rc_occ_set(occ, flat);
            continue;
        }
        atomicAdd(counts + flat, cnt[s]);
        if (!FLAT_INSERT && !RC_V3_FLAT_FLUSH && C) rc_add_sums(sums + flat * C, acc + s * C, C);
    }
    // The sums flushed one table element a thread (always after the flat insert; the thread-per-point insert
    // with RC_V3_FLAT_FLUSH): lane e adds channel e % C of slot e / C, so a warp's atomics land on the rows of
    // one or two slots (contiguous addresses) where a thread per slot sends each atomic instruction to 32 rows:
    // the flush costs what the flat accumulate's atomics cost when a block's points meet as many voxels as
    // they are, and aggregates as before where they meet few.
    if ((FLAT_INSERT || RC_V3_FLAT_FLUSH) && C && !occ) {
        const unsigned int uc = (unsigned int)C, ne = (unsigned int)HS * uc;
        const unsigned int step_q = blockDim.x / uc, step_r = blockDim.x % uc;
        unsigned int q = threadIdx.x / uc, r = threadIdx.x % uc;
        for (unsigned int e = threadIdx.x; e < ne; e += blockDim.x) {
            const int k = keys[q];
            if (k >= 0 && (!FLAT_INSERT || ((rc_used[q >> 5] >> (q & 31)) & 1u)))
                atomicAdd(sums + ((long long)b * V + k) * C + r, acc[e]);
            q += step_q;
            r += step_r;
            if (r >= uc) { r -= uc; ++q; }
        }
    }
}

// Mean sums one element a thread (the flat accumulate): thread j of a row's N * C feature elements adds feature
// j % C of point j / C into its voxel's row (the lane of channel 0 also counts the point), so a warp's atomics
// hit a few contiguous rows, one or two points' C channels, where a thread per point (accumulate_v2) sends every
// atomic instruction to 32 rows and the hash (hashed_v3) aggregates nothing when a block's points meet as many
// voxels as it has points (clustered clouds on fine grids). Each thread recomputes its point's voxel (the C
// threads of a point read the same 12 bytes, served by L1). RC_VOX_PPT elements per thread, loads first; the
// element's point and channel by stepping (q, r) = divmod(j, C) by blockDim's quotient and remainder. The
// host takes this path only where N * C < 2^31 and blocks_per_row * blockDim * RC_VOX_PPT fits 32 bits.
// counts null (the list path, below): the points were counted by voxel_list_v3, only the sums are added here.
template <typename T>
__device__ __forceinline__ void accumulate_flat_v3_body(const T* __restrict__ points, const T* __restrict__ feats,
                                                        int N, int C, int blocks_per_row, int* __restrict__ counts,
                                                        float* __restrict__ sums, RC_VOX_ARGS) {
    RC_VOX_LOCALS
    const int b = blockIdx.x / blocks_per_row;
    const unsigned int uc = (unsigned int)C;
    const unsigned int nc = (unsigned int)N * uc;
    const unsigned int first = (unsigned int)(blockIdx.x - b * blocks_per_row) * blockDim.x * RC_VOX_PPT + threadIdx.x;
    const T* prow = points + (long long)b * N * 3;
    const T* frow = feats + (long long)b * nc;
    const unsigned int step_q = blockDim.x / uc, step_r = blockDim.x % uc;
    unsigned int q = first / uc, r = first % uc;
    int vox[RC_VOX_PPT];
    unsigned int ch[RC_VOX_PPT];
    float fv[RC_VOX_PPT];
#pragma unroll
    for (int k = 0; k < RC_VOX_PPT; ++k) {  // every load of the thread's elements before the first atomic
        const unsigned int j = first + k * blockDim.x;
        vox[k] = j < nc ? rc_voxel_of(prow + 3ll * q, lo, hi, inv, g) : -1;
        fv[k] = j < nc ? rc_to_float(frow[j]) : 0.0f;
        ch[k] = r;
        q += step_q;
        r += step_r;
        if (r >= uc) {
            r -= uc;
            ++q;
        }
    }
#pragma unroll
    for (int k = 0; k < RC_VOX_PPT; ++k) {
        if (vox[k] < 0) continue;
        const long long flat = (long long)b * V + vox[k];
        if (ch[k] == 0 && counts) atomicAdd(counts + flat, 1);
        atomicAdd(sums + flat * C + ch[k], fv[k]);
    }
}

// ---- v3, the list path (mean over sparse rows; robocache/voxelize.py _list_pays, TUNING["vox_list"]) ----------
// Where a row has few points for its voxels, the dense passes above cost more than the points: the zero fill of the
// float32 sums (16-bit features: 4 C bytes a voxel, twice the output), and the mean pass reading every voxel's count
// and writing every row. The list path touches the grid densely only where it must (the output, zeroed, and the
// counts) and everything else through a list of the occupied voxels:
//   1. voxel_zero_list_v3: the output (any 2-byte alignment, 16-byte stores) and the scratch's header and counts;
//   2. voxel_list_v3_<T>: a thread per point counts it; the point that finds its voxel's count 0 appends the voxel
//      to the list and (16-bit features) clears its float32 sums row, so no sums row is zero-filled that no point
//      reaches;
//   3. voxel_accumulate_flat_v3 with null counts: the sums (16-bit: the scratch rows; float32: the output in place),
//      launched after the list kernel, so every row it adds into is cleared;
//   4. voxel_list_mean_v3_<T> / voxel_list_mean_inplace_v3_float32: the listed voxels' rows only, one element a
//      thread, the quotient of rc_div_by_rcp as the dense mean pass computes it (the same bits on the same sums).
// The list's length is known on the device only: the mean grid is sized for the worst case on the host and its
// threads stop at the header's count. The scratch buffer (int32 words, every region 16-byte aligned):
//   [0, 4)            header: word 0 the list's length (nslots), the rest unused (zeroed)
//   [4, 4 + CW)       counts[B*V], CW = B*V rounded up to a multiple of 4
//   [4 + CW, ...)     the list: at most B * min(N, V) flat voxel indices, int32 (B*V < 2^31) or int64 ("wide")
//   [..., + B*V*C)    16-bit features: the float32 sums rows, never zero-filled (cleared per listed voxel)
// Order within the list follows the atomics (nondeterministic); the means do not depend on it.

// Zero n 16-bit values at p (2-byte aligned) with the grid's threads: a scalar head to the first 16-byte boundary,
// 16-byte stores, a scalar tail. t / nt: this thread's index and the number of threads in the grid.
__device__ __forceinline__ void rc_zero_halves_grid(unsigned short* p, long long n, long long t, long long nt) {
    if (n <= 0) return;
    const long long head = min((long long)(((16 - (reinterpret_cast<unsigned long long>(p) & 15)) & 15) >> 1), n);
    for (long long i = t; i < head; i += nt) p[i] = 0;
    uint4* q = reinterpret_cast<uint4*>(p + head);
    const long long nq = (n - head) >> 3;
    for (long long i = t; i < nq; i += nt) q[i] = make_uint4(0u, 0u, 0u, 0u);
    const long long done = head + 8 * nq;
    for (long long i = t; i < n - done; i += nt) p[done + i] = 0;  // < 8 values
}

// Count each kept point and list each voxel at its first point. RC_VOX_PPT points per thread, their loads first (as
// count_v2_body); a block's new voxels take their list slots from one global atomic (a shared counter per block, so
// the list's length is not one hot address per new voxel). sums non-null (16-bit features): the new voxel's C float32
// sums cleared by the thread that listed it (16-byte stores where C % 4 == 0: the rows start 16-byte aligned then).
// Every thread reaches every barrier (no early exit). Shared memory: 16 bytes (dynamic).
template <typename T>
__device__ __forceinline__ void list_v3_body(const T* __restrict__ points, int N, int blocks_per_row,
                                             int* __restrict__ nslots, int* __restrict__ counts,
                                             void* __restrict__ list, int wide, float* __restrict__ sums, int C,
                                             RC_VOX_ARGS) {
    RC_VOX_LOCALS
    extern __shared__ uint4 rc_sh4[];
    int* sh = reinterpret_cast<int*>(rc_sh4);  // [0]: the block's new voxels, [1]: their first slot in the list
    long long b, first;
    rc_vox_block(blocks_per_row, b, first);
    const T* prow = points + b * (long long)N * 3;
    int vox[RC_VOX_PPT];
#pragma unroll
    for (int k = 0; k < RC_VOX_PPT; ++k) {  // all loads first: RC_VOX_PPT points in flight per thread
        const long long i = first + (long long)k * blockDim.x + threadIdx.x;
        vox[k] = i < N ? rc_voxel_of(prow + 3 * i, lo, hi, inv, g) : -1;
    }
    if (threadIdx.x == 0) sh[0] = 0;
    __syncthreads();
    int mine[RC_VOX_PPT];  // this thread's new voxels: their index among the block's, else -1
#pragma unroll
    for (int k = 0; k < RC_VOX_PPT; ++k) {
        mine[k] = -1;
        if (vox[k] >= 0 && atomicAdd(counts + b * V + vox[k], 1) == 0) mine[k] = atomicAdd(sh, 1);
    }
    __syncthreads();
    if (threadIdx.x == 0) sh[1] = sh[0] ? atomicAdd(nslots, sh[0]) : 0;
    __syncthreads();
    const int base = sh[1];
#pragma unroll
    for (int k = 0; k < RC_VOX_PPT; ++k) {
        if (mine[k] < 0) continue;
        const long long flat = b * V + vox[k];
        const int slot = base + mine[k];
        if (wide)
            reinterpret_cast<long long*>(list)[slot] = flat;
        else
            reinterpret_cast<int*>(list)[slot] = (int)flat;
        if (sums) {
            float* s = sums + flat * C;
            int c = 0;
            if ((C & 3) == 0)
                for (; c < C; c += 4) *reinterpret_cast<uint4*>(s + c) = make_uint4(0u, 0u, 0u, 0u);
            for (; c < C; ++c) s[c] = 0.0f;
        }
    }
}

// The flat voxel index in list slot q (int32 or int64 entries).
__device__ __forceinline__ long long rc_list_at(const void* __restrict__ list, int wide, long long q) {
    return wide ? __ldg(reinterpret_cast<const long long*>(list) + q)
                : (long long)__ldg(reinterpret_cast<const int*>(list) + q);
}

// The means of the listed voxels, one element a thread over the list's nslots * C elements (grid-stride; the element's
// slot and channel by stepping (q, r) = divmod(e, C) by the grid's quotient and remainder, one division per thread).
// 16-bit: out[v, c] = sums[v, c] / counts[v] converted; float32 (sums null): out[v, c] scaled in place. Every listed
// voxel has a count >= 1; the quotient is rc_div_by_rcp with y = RN(1 / n), as the dense mean pass computes it.
template <typename T>
__device__ __forceinline__ void list_mean_v3_body(const int* __restrict__ nslots, const int* __restrict__ counts,
                                                  const void* __restrict__ list, int wide,
                                                  const float* __restrict__ sums, T* __restrict__ out, int C) {
    const unsigned int uc = (unsigned int)C;
    const long long total = (long long)__ldg(nslots) * C;
    const long long t = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    const long long nt = (long long)gridDim.x * blockDim.x;
    const long long step_q = nt / uc;
    const unsigned int step_r = (unsigned int)(nt % uc);
    long long q = t / uc;
    unsigned int r = (unsigned int)(t % uc);
    for (long long e = t; e < total; e += nt) {
        const long long v = rc_list_at(list, wide, q);
        const float d = (float)__ldg(counts + v);
        const long long i = v * C + r;
        out[i] = rc_from_float<T>(rc_div_by_rcp(__ldg(sums + i), d, __frcp_rn(d)));
        q += step_q;
        r += step_r;
        if (r >= uc) {
            r -= uc;
            ++q;
        }
    }
}

__device__ __forceinline__ void list_mean_inplace_v3_body(const int* __restrict__ nslots,
                                                          const int* __restrict__ counts,
                                                          const void* __restrict__ list, int wide,
                                                          float* __restrict__ out, int C) {
    const unsigned int uc = (unsigned int)C;
    const long long total = (long long)__ldg(nslots) * C;
    const long long t = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    const long long nt = (long long)gridDim.x * blockDim.x;
    const long long step_q = nt / uc;
    const unsigned int step_r = (unsigned int)(nt % uc);
    long long q = t / uc;
    unsigned int r = (unsigned int)(t % uc);
    for (long long e = t; e < total; e += nt) {
        const long long v = rc_list_at(list, wide, q);
        const float d = (float)__ldg(counts + v);
        const long long i = v * C + r;
        out[i] = rc_div_by_rcp(out[i], d, __frcp_rn(d));
        q += step_q;
        r += step_r;
        if (r >= uc) {
            r -= uc;
            ++q;
        }
    }
}

#define RC_VOX_PASS lo0, lo1, lo2, hi0, hi1, hi2, inv0, inv1, inv2, g0, g1, g2
#define RC_VOX_ENTRIES(SUFFIX, T)                                                        \
    extern "C" __global__ void __launch_bounds__(256) voxel_count_v1_##SUFFIX(           \
        const T* __restrict__ points, long long B, int N, int* __restrict__ counts,      \
        unsigned char* __restrict__ occ, RC_VOX_ARGS) {                                  \
        count_body<T>(points, B, N, counts, occ, RC_VOX_PASS);                           \
    }                                                                                    \
    extern "C" __global__ void __launch_bounds__(256) voxel_accumulate_v1_##SUFFIX(      \
        const T* __restrict__ points, const T* __restrict__ feats, long long B, int N,   \
        int C, int* __restrict__ counts, float* __restrict__ sums, RC_VOX_ARGS) {        \
        accumulate_body<T>(points, feats, B, N, C, counts, sums, RC_VOX_PASS);           \
    }                                                                                    \
    extern "C" __global__ void __launch_bounds__(256) voxel_mean_v1_##SUFFIX(            \
        const int* __restrict__ counts, const float* __restrict__ sums,                  \
        T* __restrict__ out, long long BV, int C) {                                      \
        mean_body<T>(counts, sums, out, BV, C);                                          \
    }                                                                                    \
    extern "C" __global__ void __launch_bounds__(256) voxel_count_v2_##SUFFIX(           \
        const T* __restrict__ points, int N, int blocks_per_row, int* __restrict__ counts, \
        unsigned char* __restrict__ occ, RC_VOX_ARGS) {                                  \
        count_v2_body<T>(points, N, blocks_per_row, counts, occ, RC_VOX_PASS);           \
    }                                                                                    \
    extern "C" __global__ void __launch_bounds__(256) voxel_accumulate_v2_##SUFFIX(      \
        const T* __restrict__ points, const T* __restrict__ feats, int N, int C,         \
        int blocks_per_row, int* __restrict__ counts, float* __restrict__ sums,          \
        RC_VOX_ARGS) {                                                                   \
        accumulate_v2_body<T>(points, feats, N, C, blocks_per_row, counts, sums, RC_VOX_PASS); \
    }                                                                                    \
    extern "C" __global__ void __launch_bounds__(256) voxel_hashed_v2_##SUFFIX(          \
        const T* __restrict__ points, const T* __restrict__ feats, int N, int C,         \
        int blocks_per_row, int ppb, int hs_log2, int* __restrict__ counts,              \
        float* __restrict__ sums, RC_VOX_ARGS) {                                         \
        hashed_body<T>(points, feats, N, C, blocks_per_row, ppb, hs_log2, counts, sums,  \
                       RC_VOX_PASS);                                                     \
    }                                                                                    \
    extern "C" __global__ void __launch_bounds__(256) voxel_mean_v2_##SUFFIX(            \
        const int* __restrict__ counts, const float* __restrict__ sums,                  \
        T* __restrict__ out, long long BV, int C) {                                      \
        mean_v2_body<T>(counts, sums, out, BV, C);                                       \
    }

RC_VOX_ENTRIES(float32, float)
RC_VOX_ENTRIES(float16, rc_half)
RC_VOX_ENTRIES(bfloat16, rc_bf16)

#define RC_VOX_ENTRIES_V3(SUFFIX, T)                                                     \
    extern "C" __global__ void __launch_bounds__(512, 3) voxel_hashed_v3_##SUFFIX(       \
        const T* __restrict__ points, const T* __restrict__ feats, int N, int C,         \
        int blocks_per_row, int ppb, int hs_log2, int* __restrict__ counts,              \
        float* __restrict__ sums, unsigned char* __restrict__ occ, RC_VOX_ARGS) {        \
        hashed_v3_body<T, false>(points, feats, N, C, blocks_per_row, ppb, hs_log2, counts, \
                                 sums, occ, RC_VOX_PASS);                                \
    }                                                                                    \
    extern "C" __global__ void __launch_bounds__(512, 3) voxel_hashed_flat_v3_##SUFFIX(  \
        const T* __restrict__ points, const T* __restrict__ feats, int N, int C,         \
        int blocks_per_row, int ppb, int hs_log2, int* __restrict__ counts,              \
        float* __restrict__ sums, unsigned char* __restrict__ occ, RC_VOX_ARGS) {        \
        hashed_v3_body<T, true>(points, feats, N, C, blocks_per_row, ppb, hs_log2, counts, \
                                sums, nullptr, RC_VOX_PASS);                             \
    }
#define RC_VOX_FLAT_V3(SUFFIX, T)                                                        \
    extern "C" __global__ void __launch_bounds__(256) voxel_accumulate_flat_v3_##SUFFIX( \
        const T* __restrict__ points, const T* __restrict__ feats, int N, int C,         \
        int blocks_per_row, int* __restrict__ counts, float* __restrict__ sums,          \
        RC_VOX_ARGS) {                                                                   \
        accumulate_flat_v3_body<T>(points, feats, N, C, blocks_per_row, counts, sums,    \
                                   RC_VOX_PASS);                                         \
    }
#define RC_VOX_MEAN_V3(SUFFIX, T)                                                        \
    extern "C" __global__ void __launch_bounds__(256) voxel_mean_v3_##SUFFIX(            \
        const int* __restrict__ counts, const float* __restrict__ sums,                  \
        T* __restrict__ out, long long BV, int C, int vw) {                              \
        mean_v3_body<T>(counts, sums, out, BV, C, vw);                                   \
    }

RC_VOX_ENTRIES_V3(float32, float)
RC_VOX_ENTRIES_V3(float16, rc_half)
RC_VOX_ENTRIES_V3(bfloat16, rc_bf16)
RC_VOX_FLAT_V3(float32, float)
RC_VOX_FLAT_V3(float16, rc_half)
RC_VOX_FLAT_V3(bfloat16, rc_bf16)
RC_VOX_MEAN_V3(float16, rc_half)
RC_VOX_MEAN_V3(bfloat16, rc_bf16)

// float32 features: the sums are the output itself, scaled in place.
extern "C" __global__ void __launch_bounds__(256) voxel_mean_inplace_v3_float32(
    const int* __restrict__ counts, float* __restrict__ out, long long BV, int C, int vw) {
    mean_inplace_v3_body(counts, out, BV, C, vw);
}

// One launch zeroes the counts and the float32 output (or the one scratch buffer of counts and sums).
extern "C" __global__ void __launch_bounds__(256) voxel_zero_v3(unsigned int* __restrict__ a, long long na,
                                                                unsigned int* __restrict__ b, long long nb) {
    const long long t = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    const long long nt = (long long)gridDim.x * blockDim.x;
    rc_zero_words(a, na, t, nt);
    rc_zero_words(b, nb, t, nt);
}

// The list path (section "v3, the list path" above): the list kernel per points dtype, the mean per output dtype
// (float32 in place), one zero fill.
#define RC_VOX_LIST_V3(SUFFIX, T)                                                        \
    extern "C" __global__ void __launch_bounds__(256) voxel_list_v3_##SUFFIX(            \
        const T* __restrict__ points, int N, int blocks_per_row, int* __restrict__ nslots, \
        int* __restrict__ counts, void* __restrict__ list, int wide,                     \
        float* __restrict__ sums, int C, RC_VOX_ARGS) {                                  \
        list_v3_body<T>(points, N, blocks_per_row, nslots, counts, list, wide, sums, C,  \
                        RC_VOX_PASS);                                                    \
    }
#define RC_VOX_LIST_MEAN_V3(SUFFIX, T)                                                   \
    extern "C" __global__ void __launch_bounds__(256) voxel_list_mean_v3_##SUFFIX(       \
        const int* __restrict__ nslots, const int* __restrict__ counts,                  \
        const void* __restrict__ list, int wide, const float* __restrict__ sums,         \
        T* __restrict__ out, int C) {                                                    \
        list_mean_v3_body<T>(nslots, counts, list, wide, sums, out, C);                  \
    }

RC_VOX_LIST_V3(float32, float)
RC_VOX_LIST_V3(float16, rc_half)
RC_VOX_LIST_V3(bfloat16, rc_bf16)
RC_VOX_LIST_MEAN_V3(float16, rc_half)
RC_VOX_LIST_MEAN_V3(bfloat16, rc_bf16)

extern "C" __global__ void __launch_bounds__(256) voxel_list_mean_inplace_v3_float32(
    const int* __restrict__ nslots, const int* __restrict__ counts, const void* __restrict__ list, int wide,
    float* __restrict__ out, int C) {
    list_mean_inplace_v3_body(nslots, counts, list, wide, out, C);
}

// The list path's zero fill: na 4-byte words at a (the scratch's header and counts) and no 16-bit values at o (the
// output, of either element size, at any 2-byte alignment).
extern "C" __global__ void __launch_bounds__(256) voxel_zero_list_v3(unsigned int* __restrict__ a, long long na,
                                                                     unsigned short* __restrict__ o, long long no) {
    const long long t = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    const long long nt = (long long)gridDim.x * blockDim.x;
    rc_zero_words(a, na, t, nt);
    rc_zero_halves_grid(o, no, t, nt);
}
