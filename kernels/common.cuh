// Shared helpers for every robocache kernel.
//
// Half and bfloat16 values are carried as 16-bit storage structs and converted
// with PTX cvt instructions, so the kernels need no CUDA headers at all: the
// same source compiles under CuPy's NVRTC at run time, under NVRTC from pip in
// CI (no GPU), and under nvcc. All arithmetic is done in fp32 (fp64 for
// float64 timestamps); storage keeps the caller's dtype.
#pragma once

struct rc_half { unsigned short bits; };
struct rc_bf16 { unsigned short bits; };

__device__ __forceinline__ float rc_to_float(float v) { return v; }
__device__ __forceinline__ float rc_to_float(rc_half v) {
    float f;
    asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(v.bits));
    return f;
}
__device__ __forceinline__ float rc_to_float(rc_bf16 v) {
    return __uint_as_float(((unsigned int)v.bits) << 16);
}

template <typename T> __device__ __forceinline__ T rc_from_float(float f);
template <> __device__ __forceinline__ float rc_from_float<float>(float f) { return f; }
template <> __device__ __forceinline__ rc_half rc_from_float<rc_half>(float f) {
    rc_half h;
    asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h.bits) : "f"(f));
    return h;
}
template <> __device__ __forceinline__ rc_bf16 rc_from_float<rc_bf16>(float f) {
    // Round to nearest even, NaN stays NaN (sm_80+ instruction).
    rc_bf16 h;
    asm("cvt.rn.bf16.f32 %0, %1;" : "=h"(h.bits) : "f"(f));
    return h;
}

// Index of the last source time <= x in a non-decreasing row of length n,
// or -1 when x is before the first time (or NaN). One O(log n) search per
// target, never per feature.
template <typename TT>
__device__ __forceinline__ int rc_upper_bound_minus_one(const TT* __restrict__ row, int n, TT x) {
    int lo = 0, hi = n;
    while (lo < hi) {
        int mid = lo + ((hi - lo) >> 1);  // no overflow for S near 2^31
        if (__ldg(row + mid) <= x) lo = mid + 1; else hi = mid;
    }
    return lo - 1;
}

// numpy.interp's bracket for one target time: the two source indices and the
// weight of the second one. Outside the source range both indices are the end
// sample (clamped, weight 0); at a repeated source time the last sample with
// that time wins (numpy's rule: xp[j] <= x < xp[j+1]); a NaN target gives NaN.
template <typename TT>
__device__ __forceinline__ void rc_bracket(const TT* __restrict__ row, int n, TT x,
                                           int& j0, int& j1, float& w) {
    int j = rc_upper_bound_minus_one(row, n, x);
    if (x != x) {             // NaN target -> NaN output, like numpy.interp
        j0 = 0; j1 = 0; w = __int_as_float(0x7fc00000);
    } else if (j < 0) {       // before the first source time
        j0 = 0; j1 = 0; w = 0.0f;
    } else if (j >= n - 1) {  // at or after the last source time
        j0 = n - 1; j1 = n - 1; w = 0.0f;
    } else {
        TT x0 = __ldg(row + j), x1 = __ldg(row + j + 1);  // x0 <= x < x1, so x1 > x0
        j0 = j; j1 = j + 1;
        w = (float)((x - x0) / (x1 - x0));
    }
}

// a + w * (b - a), and exactly a when w == 0 (so an infinite neighbour does
// not turn a clamped or on-sample value into NaN, as in numpy.interp).
__device__ __forceinline__ float rc_lerp(float a, float b, float w) {
    return w == 0.0f ? a : fmaf(w, b - a, a);
}
