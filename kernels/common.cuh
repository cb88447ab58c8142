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

// numpy.interp's rule for one target (docs/semantics.md, "Infinite and extreme values") as ONE float
// weight w, decided once per target in the bracket; every output of the target is then
//     rc_mix(a, c, w) = w < 0 ? a : w*c + (1 - 2w)*a + w*a
// with a, c the values at j0, j1, computed as fmaf(w, c, fmaf(1 - 2w, a, w*a)): three FMA-unit
// operations and the select on a per-target predicate (as the old lerp's w == 0), no branch, no second
// pass, no other per-target register.
// Target classes (x0 <= t < x1 its bracket):
//   NaN target: w = NaN -> NaN.
//   a sample (clamped before/after the row, or t == x0, also x0 = t = -inf): w = -1 -> a, whatever c is.
//   regular (x1 - x0 finite, t > x0): q = (t - x0)/(x1 - x0); where q > 1/2, j0 and j1 are swapped and
//     q = 1 - q, so w <= 1/2; then w is clamped to [FLT_MIN, 1/2 - 2^-25]. Every coefficient (w, 1 - 2w,
//     w) is then > 0, so an infinite value passes through with its sign, as numpy.interp gives it:
//     a = +-inf, c finite -> a; c = +-inf, a finite -> c; a = c = +-inf -> a; a = -c = +-inf -> NaN,
//     also where q rounds to 0 or 1 (t next to x0 or x1). Products, never c - a, so finite values near
//     FLT_MAX of opposite signs do not overflow.
//   exceptional (x1 - x0 infinite: an infinite source time, or finite times whose difference overflows
//     float64; numpy's slope (c - a)/(x1 - x0) is then 0 for finite values, NaN for an infinite one):
//     numpy gives, for finite a, c: a where t - x0 is finite, else c where t - x1 is finite, else
//     (x0 = -inf, x1 = +inf) a if a == c else NaN; with an infinite value, a if a == c else NaN.
//     "a": w = 0 (0*c + a + 0*a: a for finite values, NaN with an infinite one).
//     "c": the same with j0 and j1 swapped. x0 = -inf, x1 = +inf: w = +inf (NaN for every a, c).
//     The one place the kernels differ from numpy (docs/semantics.md): numpy's "a if a == c" in such a
//     bracket (a = c = +-inf; or equal values between -inf and +inf) needs a per-output compare of a
//     and c; it costs the v2 kernels their register budget, so the kernels give NaN there.
//   float32 times whose difference overflows float32 but not float64 (e.g. -3e38, 3e38; numpy computes
//     in float64): regular, the weight from the halved times (exact at such magnitudes).
// Not modelled: float64 times so close (x1 - x0 < 3.8e-270) that numpy's slope (c - a)/(x1 - x0)
// overflows for float32-range values: numpy gives +-inf, the kernels the interpolated value.
__device__ __forceinline__ bool rc_finite(float v) {
    return (__float_as_uint(v) & 0x7f800000u) != 0x7f800000u;
}
__device__ __forceinline__ bool rc_finite(double v) {
    return (__double_as_longlong(v) & 0x7ff0000000000000LL) != 0x7ff0000000000000LL;
}

// A regular target's weight q = (t - x0)/(x1 - x0) in [0, 1] (rounded) -> its w (may swap j0, j1).
__device__ __forceinline__ float rc_wt_regular(float q, int& j0, int& j1) {
    if (q > 0.5f) { const int j = j0; j0 = j1; j1 = j; q = 1.0f - q; }  // exact for q in [1/2, 1]
    return fminf(fmaxf(q, 1.17549435e-38f), 0.49999997f);              // [FLT_MIN, 1/2 - 2^-25]
}

// x - y with numpy's (float64) range: float32 times are halved first (exact for the magnitudes where
// it matters, so the difference of two finite float32 numbers is always finite); float64 as it is.
__device__ __forceinline__ float rc_diff64(float x, float y) { return 0.5f * x - 0.5f * y; }
__device__ __forceinline__ double rc_diff64(double x, double y) { return x - y; }

// The weight of the target x in the bracket x0 <= x < x1 (j0 < j1), given the regular weight function
// `weight(num, den)` of the kernel version (v1: a division in the time dtype; v2: rc_weight2).
// May set j1 = j0 (an exact hit) or swap j0 and j1.
template <typename TT, typename WF>
__device__ __forceinline__ float rc_wt_interior(TT x, TT x0, TT x1, int& j0, int& j1, WF weight) {
    const TT gap = x1 - x0, num = x - x0;
    const float q = weight(num, gap);  // unconditionally: one division call site
    if (rc_finite(gap)) return num == (TT)0 ? -1.0f : rc_wt_regular(q, j0, j1);  // num == 0: an exact hit
    if (x == x0) return -1.0f;                                // x0 = x = -inf: a sample
    const TT num64 = rc_diff64(x, x0);
    if constexpr (sizeof(TT) == 4) {  // float32 times whose difference overflows float32 only
        const TT gap64 = rc_diff64(x1, x0);
        if (rc_finite(gap64)) return rc_wt_regular(weight(num64, gap64), j0, j1);
    }
    if (rc_finite(num64)) return 0.0f;                                          // "a" (x1 = +inf, or an overflow)
    if (rc_finite(rc_diff64(x, x1))) { const int j = j0; j0 = j1; j1 = j; return 0.0f; }  // "c"
    return __int_as_float(0x7f800000);                                          // x0 = -inf, x1 = +inf
}

// One output of a target with weight w (see above).
__device__ __forceinline__ float rc_mix(float a, float c, float w) {
    return w < 0.0f ? a : fmaf(w, c, fmaf(fmaf(-2.0f, w, 1.0f), a, w * a));
}

struct rc_weight1 {  // v1's weight: the quotient in the time dtype, rounded to float
    template <typename TT> __device__ __forceinline__ float operator()(TT num, TT den) const {
        return (float)(num / den);
    }
};

// numpy.interp's bracket for one target time: the two source indices and the target's weight
// (rc_mix). Outside the source range both indices are the end sample (clamped); at a repeated source time
// the last sample with that time wins (numpy's rule: xp[j] <= x < xp[j+1]); a NaN target gives NaN.
template <typename TT>
__device__ __forceinline__ void rc_bracket(const TT* __restrict__ row, int n, TT x,
                                           int& j0, int& j1, float& w) {
    int j = rc_upper_bound_minus_one(row, n, x);
    if (x != x) {             // NaN target -> NaN output, like numpy.interp
        j0 = 0; j1 = 0; w = __int_as_float(0x7fc00000);
    } else if (j < 0) {       // before the first source time
        j0 = 0; j1 = 0; w = -1.0f;
    } else if (j >= n - 1) {  // at or after the last source time
        j0 = n - 1; j1 = n - 1; w = -1.0f;
    } else {
        const TT x0 = __ldg(row + j), x1 = __ldg(row + j + 1);  // x0 <= x < x1
        j0 = j; j1 = j + 1;
        w = rc_wt_interior(x, x0, x1, j0, j1, rc_weight1());
    }
}
