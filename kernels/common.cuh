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

// Finite (neither inf nor NaN), by the exponent bits: no CUDA header needed.
__device__ __forceinline__ bool rc_finite(float v) {
    return (__float_as_uint(v) & 0x7f800000u) != 0x7f800000u;
}
__device__ __forceinline__ bool rc_finite(double v) {
    return (__double_as_longlong(v) & 0x7ff0000000000000LL) != 0x7ff0000000000000LL;
}

// A float64 gap below this could overflow numpy's float64 slope (c - a) / gap for float32-range values
// (|c - a| <= 6.8e38): such targets take rc_interp_exact. float32 gaps (>= 1.4e-45) never overflow it.
__device__ __forceinline__ bool rc_tiny_gap(float) { return false; }
__device__ __forceinline__ bool rc_tiny_gap(double gap) { return gap < 1e-260; }

// numpy.interp's bracket for one target time: the two source indices and the
// weight of the second one. Outside the source range both indices are the end
// sample (clamped, weight 0); at a repeated source time the last sample with
// that time wins (numpy's rule: xp[j] <= x < xp[j+1]); a NaN target gives NaN.
// An EXCEPTIONAL target (x1 - x0 or x - x0 not finite: an infinite source time or an overflow; or a
// float64 gap under rc_tiny_gap) also gets the weight NaN: every output of it then takes rc_interp_exact,
// numpy's own arithmetic (docs/semantics.md, "Infinite and extreme values").
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
        const TT gap = x1 - x0, num = x - x0;
        w = (rc_finite(gap) && rc_finite(num) && !rc_tiny_gap(gap)) ? (float)(num / gap)
                                                                     : __int_as_float(0x7fc00000);
    }
}

// a + w * (b - a), and exactly a when w == 0 (so an infinite neighbour does
// not turn a clamped or on-sample value into NaN, as in numpy.interp).
__device__ __forceinline__ float rc_lerp(float a, float b, float w) {
    return w == 0.0f ? a : fmaf(w, b - a, a);
}

// numpy.interp's result for one output (docs/semantics.md, "Infinite and extreme values"), rounded to float:
// the slow path of every resample/fuse kernel, taken only where the lerp's inputs or result are not finite,
// or the target is exceptional (rc_bracket's NaN weight), via rc_interp_checked. numpy computes
// r = slope*(x - x0) + a, slope = (c - a)/(x1 - x0); if NaN, slope*(x - x1) + c; if NaN and a == c, a. Its
// outcomes in closed form, so no double division (a called subroutine whose registers would count against
// the hot loops): the value itself is a + w*(c - a) in double with w = (x - x0) * (1/(x1 - x0)).
// x0 == x1: a clamped target (one sample).
template <typename TT>
__device__ __forceinline__ float rc_interp_exact(float a, float c, TT x0, TT x1, TT x) {
    const float nan = __int_as_float(0x7fc00000);
    if (x != x) return nan;                  // a NaN target is NaN (also for S = 1)
    if (x0 == x1 || x == x0) return a;       // a sample: clamped, the last time, an exact hit
    const double gap = (double)x1 - (double)x0;  // > 0; inf for an infinite time or an overflow
    const double d0 = (double)x - (double)x0;    // in (0, gap]
    const double d1 = (double)x - (double)x1;    // in [-gap, 0)
    const double dv = (double)c - (double)a;     // exact for float a, c
    if (dv != dv) return a == c ? a : nan;       // slope NaN (a NaN, or a = c = +-inf): numpy's last resort
    if (!rc_finite(dv)) {                        // slope +-inf, or NaN over an infinite gap
        if (!rc_finite(gap)) return nan;         // inf/inf (a != c here)
        if (rc_finite(a)) return c;              // r = +-inf*d0 + a = c
        if (rc_finite(c)) return a;              // r NaN; slope*d1 + c = a
        return nan;                              // a = -c = +-inf
    }
    if (!rc_finite(gap)) {                       // slope = +-0
        if (rc_finite(d0)) return a;             // r = a
        if (rc_finite(d1)) return c;             // 0*inf NaN; then c
        return a == c ? a : nan;
    }
    if (gap < 1.0 && fabs(dv) > gap * 1.7976931348623157e308)  // the slope overflows: +-inf*d0 + a
        return dv > 0.0 ? __int_as_float(0x7f800000) : __int_as_float(0xff800000);
    double g = gap, n = d0;
    if (g < 0x1p-900) { g *= 0x1p600; n *= 0x1p600; }  // exact: 1/g stays finite for subnormal gaps
    const float w = (float)(n * __drcp_rn(g));          // in [0, 1]
    return (float)((double)a + (double)w * dv);
}

// The documented rule for one output: the float lerp where it and its inputs are finite (the weight is
// finite for every regular target), else numpy's arithmetic. The times are read only on the slow path.
template <typename TT>
__device__ __forceinline__ float rc_interp_checked(float a, float c, float w, const TT* __restrict__ t0,
                                                   const TT* __restrict__ t1, const TT* __restrict__ tx) {
    const float r = rc_lerp(a, c, w);
    if (rc_finite(a) & rc_finite(c) & rc_finite(r)) return r;
    return rc_interp_exact<TT>(a, c, __ldg(t0), __ldg(t1), __ldg(tx));
}
