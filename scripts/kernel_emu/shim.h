// Host shims: run kernels/voxelize.cu's CUDA C++ on the CPU, one std::thread per CUDA thread, a barrier for
// __syncthreads, GCC atomics for CUDA atomics. Only for checking logic (index math, phases, semantics).
#pragma once
#include <atomic>
#include <barrier>
#include <cmath>
#include <cstring>
#include <cstdint>
#include <cstdlib>
#include <cstdio>
#include <functional>
#include <thread>
#include <vector>
#include <string>
#define __device__
#define __global__
#define __forceinline__ inline
#define __launch_bounds__(...)
#define __restrict__
#define asm(...) (void)0
#define __noinline__
#define __grid_constant__
struct dim3 { unsigned int x = 0, y = 0, z = 0; };
extern thread_local dim3 threadIdx;
extern dim3 blockIdx, blockDim, gridDim;
extern std::barrier<>* g_bar;
#define RC_EMU_SMEM_BYTES (64 * 1024)  // the emulator's shared memory (runtime.cpp g_smem), a block's all
extern unsigned char g_smem[RC_EMU_SMEM_BYTES];
// a launch's dynamic shared memory (extern __shared__): exactly the bytes the launch asked for (rc_emu_dyn_smem, rounded
// up to 16), ending where a page that faults on any access begins, so a kernel reading or writing past what its
// launch gave it crashes the emulator, as it would fault or corrupt on the GPU
extern unsigned char* g_dyn_smem;
extern "C" void rc_emu_dyn_smem(unsigned long long bytes);
inline void __syncthreads() { g_bar->arrive_and_wait(); }
extern std::atomic<int> g_sync_or;
// the block's OR of pred, every thread the same answer: barriers around the flag so no thread resets it early
inline int __syncthreads_or(int pred) {
    g_bar->arrive_and_wait();
    if (pred) g_sync_or.store(1);
    g_bar->arrive_and_wait();
    const int r = g_sync_or.load();
    g_bar->arrive_and_wait();
    if (threadIdx.x == 0) g_sync_or.store(0);
    g_bar->arrive_and_wait();
    return r;
}
struct uint4 { unsigned int x, y, z, w; };
struct uint2 { unsigned int x, y; };
struct float4 { float x, y, z, w; };
struct float2 { float x, y; };
inline uint4 make_uint4(unsigned a, unsigned b, unsigned c, unsigned d) { return {a, b, c, d}; }
inline uint2 make_uint2(unsigned a, unsigned b) { return {a, b}; }
template <class T> inline T min(T a, T b) { return a < b ? a : b; }
template <class T> inline T max(T a, T b) { return a > b ? a : b; }
// RC_EMU_CHECK_ALIGN (the rows_wide build): a load or store of T at an address not a multiple of sizeof(T) stops the
// run, as the GPU's vector accesses fault on it ("misaligned address"); the host would read it silently.
#ifdef RC_EMU_CHECK_ALIGN
#define RC_EMU_ALIGNED(p, T)                                                                                          \
    do {                                                                                                              \
        if (reinterpret_cast<std::uintptr_t>(p) % sizeof(T)) {                                                        \
            std::fprintf(stderr, "kernel_emu: misaligned %zu-byte access at %p\n", sizeof(T), (const void*)(p));      \
            std::abort();                                                                                             \
        }                                                                                                             \
    } while (0)
#else
#define RC_EMU_ALIGNED(p, T) (void)0
#endif
template <class T> inline T __ldg(const T* p) { RC_EMU_ALIGNED(p, T); return *p; }
inline float __uint_as_float(unsigned int u) { float f; std::memcpy(&f, &u, 4); return f; }
inline unsigned long long __umul64hi(unsigned long long a, unsigned long long b) {
    return (unsigned long long)(((unsigned __int128)a * b) >> 64);
}
inline unsigned int __umulhi(unsigned int a, unsigned int b) {
    return (unsigned int)(((unsigned long long)a * b) >> 32);
}
template <class T> inline void __stcs(T* p, T v) { RC_EMU_ALIGNED(p, T); *p = v; }
inline unsigned int __float_as_uint(float f) { unsigned int u; std::memcpy(&u, &f, 4); return u; }
inline float __int_as_float(int u) { float f; std::memcpy(&f, &u, 4); return f; }
inline long long __double_as_longlong(double f) { long long u; std::memcpy(&u, &f, 8); return u; }
inline double __drcp_rn(double x) { return 1.0 / x; }
inline float __fmul_rn(float a, float b) { return a * b; }
inline float __fmaf_rn(float a, float b, float c) { return std::fmaf(a, b, c); }
inline float __frcp_rn(float x) { return 1.0f / x; }
inline int __ffs(unsigned x) { return __builtin_ffs((int)x); }
inline int __popc(unsigned x) { return __builtin_popcount(x); }
inline unsigned __match_any_sync(unsigned, int) { std::abort(); }
// __shfl_down_sync through a block-wide exchange (kernels/rows_wide.cu's shifted vectors): every thread of the block
// must call it the same number of times, as that kernel's trips are uniform per block.
inline unsigned char g_shfl[1024 * 8];
template <class T> inline T __shfl_down_sync(unsigned, T v, unsigned delta, int width = 32) {
    static_assert(sizeof(T) <= 8);
    std::memcpy(g_shfl + threadIdx.x * 8, &v, sizeof(T));
    g_bar->arrive_and_wait();
    const unsigned sub = threadIdx.x & 31 & (unsigned)(width - 1);
    T r = v;
    if (sub + delta < (unsigned)width) std::memcpy(&r, g_shfl + (threadIdx.x + delta) * 8, sizeof(T));
    g_bar->arrive_and_wait();
    return r;
}
// __shfl_xor_sync the same way (kernels/rows_wide.cu's span: its butterfly runs for every thread of the block): lane
// l of each group of `width` lanes takes lane l ^ mask's value (its own where that lane is outside the group).
template <class T> inline T __shfl_xor_sync(unsigned, T v, int mask, int width = 32) {
    static_assert(sizeof(T) <= 8);
    std::memcpy(g_shfl + threadIdx.x * 8, &v, sizeof(T));
    g_bar->arrive_and_wait();
    const unsigned sub = threadIdx.x & 31 & (unsigned)(width - 1), to = sub ^ (unsigned)mask;
    T r = v;
    if (to < (unsigned)width) std::memcpy(&r, g_shfl + (threadIdx.x - sub + to) * 8, sizeof(T));
    g_bar->arrive_and_wait();
    return r;
}
#ifdef RC_EMU_SHFL_SYNC
// __shfl_sync the same way (kernels/rows_wide.cu's tile: every warp of the block runs all 32 of its targets): lane l of
// each group of `width` lanes takes lane src's value. Opt-in: a kernel that calls it from divergent code would wait
// at the barrier forever, where the default stops at once.
template <class T> inline T __shfl_sync(unsigned, T v, int src, int width = 32) {
    static_assert(sizeof(T) <= 8);
    std::memcpy(g_shfl + threadIdx.x * 8, &v, sizeof(T));
    g_bar->arrive_and_wait();
    const unsigned sub = threadIdx.x & 31 & (unsigned)(width - 1), from = (unsigned)src & (unsigned)(width - 1);
    T r;
    std::memcpy(&r, g_shfl + (threadIdx.x - sub + from) * 8, sizeof(T));
    g_bar->arrive_and_wait();
    return r;
}
#else
template <class T> inline T __shfl_sync(unsigned, T, int, int = 32) { std::abort(); }
#endif
inline unsigned __funnelshift_r(unsigned lo, unsigned hi, unsigned s) {
    return (unsigned)((((unsigned long long)hi << 32) | lo) >> (s & 31));
}
inline int atomicAdd(int* p, int v) { return __atomic_fetch_add(p, v, __ATOMIC_RELAXED); }
inline float atomicAdd(float* p, float v) {
    unsigned int* u = reinterpret_cast<unsigned int*>(p);
    unsigned int old = __atomic_load_n(u, __ATOMIC_RELAXED), want;
    do { want = __float_as_uint(__uint_as_float(old) + v); } while (!__atomic_compare_exchange_n(u, &old, want, false, __ATOMIC_RELAXED, __ATOMIC_RELAXED));
    return __uint_as_float(old);
}
inline int atomicCAS(int* p, int cmp, int v) { __atomic_compare_exchange_n(p, &cmp, v, false, __ATOMIC_RELAXED, __ATOMIC_RELAXED); return cmp; }
inline unsigned atomicOr(unsigned* p, unsigned v) { return __atomic_fetch_or(p, v, __ATOMIC_RELAXED); }
// 64-bit atomicMin / atomicMax (kernels/rows_wide.cu's span: a block's run of source rows), the old value returned
inline unsigned long long atomicMin(unsigned long long* p, unsigned long long v) {
    unsigned long long old = __atomic_load_n(p, __ATOMIC_RELAXED);
    while (v < old && !__atomic_compare_exchange_n(p, &old, v, false, __ATOMIC_RELAXED, __ATOMIC_RELAXED)) {}
    return old;
}
inline unsigned long long atomicMax(unsigned long long* p, unsigned long long v) {
    unsigned long long old = __atomic_load_n(p, __ATOMIC_RELAXED);
    while (v > old && !__atomic_compare_exchange_n(p, &old, v, false, __ATOMIC_RELAXED, __ATOMIC_RELAXED)) {}
    return old;
}
