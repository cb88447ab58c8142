"""Infinite and extreme numbers follow docs/semantics.md exactly (issue 16).

resample/fuse: the reference (and so the CPU path of the public API) is numpy.interp bit for bit, infinite
source times, infinite values and values whose differences overflow included; the one documented exception is
numpy's S = 1 special case, where a NaN target gets the sample (robocache: NaN, as for every S).
``kernel_rule`` below is the GPU kernels' rule (kernels/common.cuh ``rc_wt_interior``/``rc_mix``, both
kernel versions' weights) written line by line in NumPy float32/float64: it must agree with the reference in
NaN/inf pattern everywhere except the documented corners (``kernel_corners``, docs/semantics.md), where it
must give the documented outcome. tests/gpu/test_kernels_v2_gpu.py runs the kernels on the same inputs and
checks them against both.
voxelize: bounds finite in float64 but not in float32 are refused; a point whose ``p - lo`` overflows float32
lands in the last voxel (the documented ``min(floor(...), g - 1)``).
"""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import robocache
from robocache import reference

INF = np.inf


def interp_rows(values, src, tgt):
    b_, _, d_ = values.shape
    out = np.empty((b_, tgt.shape[1], d_))
    for b in range(b_):
        for d in range(d_):
            out[b, :, d] = np.interp(tgt[b], src[b], values[b, :, d])
    return out


# The classes of the issue, each against numpy.interp (src row, values of one feature, target -> numpy's answer)
CASES = [
    ([-INF, 0.0, 1.0], [1.0, 2.0, 3.0], -5.0),   # infinite first time: numpy gives the sample at 0 (was NaN)
    ([0.0, 1.0, INF], [1.0, 2.0, 3.0], 5.0),     # infinite last time, inside: the left sample
    ([-INF, INF], [4.0, 4.0], 0.0),              # both infinite, equal values: the value
    ([-INF, INF], [4.0, 5.0], 0.0),              # both infinite, different values: NaN
    ([-INF, 0.0], [7.0, 8.0], -INF),             # exact hit at -inf: the sample (was NaN)
    ([0.0, 1.0], [INF, 1.0], 0.5),               # infinite left value: inf (was NaN)
    ([0.0, 1.0], [INF, INF], 0.5),               # both inf: inf (was NaN)
    ([0.0, 1.0], [INF, -INF], 0.5),              # opposite infinities: NaN
    ([0.0, 1.0], [1.0, -INF], 0.5),              # infinite right value: -inf
    ([0.0, INF], [0.0, INF], 1.0),               # infinite gap and value: NaN (was 0)
    ([0.0, INF], [INF, 0.0], 1.0),               # infinite gap, infinite left value: NaN (was inf)
    ([-1e308, 1e308], [1.0, 2.0], 1e308 - 1e292),  # finite times whose difference overflows
    ([-1e308, 1e308], [1.0, 2.0], -1e308 + 1e292),
    ([0.0, 1e-300], [-1e300, 1e300], 5e-301),    # finite values, a slope that overflows
    ([0.0, 1.0], [-1.7e308, 1.7e308], 0.25),     # values whose difference overflows
]


@pytest.mark.parametrize(("src", "vals", "t"), CASES)
def test_reference_is_numpy_interp_on_extremes(src, vals, t):
    s = np.array([src])
    v = np.array([vals])[:, :, None]
    tgt = np.array([[t]])
    want = np.interp(tgt[0], s[0], v[0, :, 0])
    got = reference.resample(v, s, tgt)[0, :, 0]
    np.testing.assert_array_equal(got, want)  # bit for bit, NaN where numpy has NaN
    api = robocache.resample(v, s, tgt)[0, :, 0]  # the public API's CPU path is the reference
    np.testing.assert_array_equal(api, want)


def test_nan_target_with_one_sample_is_nan():
    """numpy.interp's S = 1 shortcut returns the sample for a NaN target; robocache's rule is NaN for every S."""
    v = np.array([[[5.0]]])
    got = reference.resample(v, np.array([[0.0]]), np.array([[np.nan, -1.0, 0.0, 1.0]]))
    assert np.isnan(got[0, 0, 0]) and (got[0, 1:, 0] == 5.0).all()


extreme = st.sampled_from([-INF, INF, -1e308, 1e308, -3e38, 3e38, 0.0, -0.0, 1e-300, 5e-324])


@st.composite
def extreme_cases(draw):
    b, s, t, d = draw(st.integers(1, 3)), draw(st.integers(2, 8)), draw(st.integers(1, 8)), draw(st.integers(1, 3))
    times = st.one_of(st.floats(-1e3, 1e3, width=64, allow_nan=False), extreme)
    src = np.sort(draw(hnp.arrays(np.float64, (b, s), elements=times)), axis=1)
    tgt = draw(hnp.arrays(np.float64, (b, t), elements=st.one_of(times, st.just(np.nan))))
    vals = draw(hnp.arrays(np.float64, (b, s, d), elements=st.one_of(st.floats(-1e6, 1e6, width=64), extreme)))
    return vals, src, tgt


@settings(max_examples=300, deadline=None)
@given(extreme_cases())
def test_property_reference_is_numpy_interp_bitwise(case):
    vals, src, tgt = case
    np.testing.assert_array_equal(reference.resample(vals, src, tgt), interp_rows(vals, src, tgt))
    f = reference.fuse([(vals, src), (vals[:, :, :1], src)], tgt)
    np.testing.assert_array_equal(f[:, :, : vals.shape[2]], interp_rows(vals, src, tgt))


F32, F64 = np.float32, np.float64
FLT_MIN = F32(np.finfo(np.float32).tiny)
W_MAX = F32(0.5) - F32(2.0 ** -25)  # 1/2 - 2^-25


def fmaf(x, y, z) -> np.float32:
    """fmaf in float32: the float32 product is exact in float64, one rounding of the sum (a second, to float32,
    can differ from a true fma by one ulp in a double-rounding tie: finite values only, within tolerance)."""
    with np.errstate(all="ignore"):
        return F32(F64(x) * F64(y) + F64(z))


def _finite(v) -> bool:
    return bool(np.isfinite(v))


def _weight(version: str, num, den) -> np.float32:
    """The regular weight: v1 ``(float)(num / den)`` in the time dtype; v2 ``rc_weight2`` (float32: the same;
    float64: den = m * 2^e, ``(float)ldexp(num, -e) / (float)m``)."""
    with np.errstate(all="ignore"):
        if version == "v1" or isinstance(num, np.float32):
            return F32(num / den)
        m, e = np.frexp(den)
        return F32(F32(np.ldexp(num, -int(e))) / F32(m))


def _regular(q: np.float32) -> tuple[np.float32, bool]:
    """rc_wt_regular: (w, swap)."""
    swap = bool(q > F32(0.5))
    if swap:
        q = F32(1) - q
    return F32(min(max(q, FLT_MIN), W_MAX)), swap


def _diff64(x, y):
    """rc_diff64: float32 halves, float64 as it is."""
    with np.errstate(all="ignore"):
        if isinstance(x, np.float32):
            return F32(F32(0.5) * x) - F32(F32(0.5) * y)
        return x - y


def target_weight(version: str, x, x0, x1) -> tuple[np.float32, bool]:
    """rc_wt_interior for one bracketed target x0 <= x < x1 (scalars of the time dtype): (w, swap j0/j1)."""
    with np.errstate(all="ignore"):
        gap, num = x1 - x0, x - x0
        if _finite(gap):
            return (F32(-1), False) if num == 0 else _regular(_weight(version, num, gap))
        if x == x0:
            return F32(-1), False
        num64 = _diff64(x, x0)
        if isinstance(x, np.float32):
            gap64 = _diff64(x1, x0)
            if _finite(gap64):
                return _regular(_weight(version, num64, gap64))
        if _finite(num64):
            return F32(0), False
        if _finite(_diff64(x, x1)):
            return F32(0), True
        return F32(np.inf), False


def rc_mix(a: np.float32, c: np.float32, w: np.float32) -> np.float32:
    """``w < 0 ? a : fmaf(w, c, fmaf(fmaf(-2, w, 1), a, w*a))``."""
    if w < 0:
        return a
    with np.errstate(all="ignore"):
        return fmaf(w, c, fmaf(fmaf(F32(-2), w, F32(1)), a, F32(w * a)))


def kernel_rule(vals32: np.ndarray, src: np.ndarray, tgt: np.ndarray, version: str = "v2") -> np.ndarray:
    """The kernels' output (before the cast to the storage dtype) in NumPy, for the time dtype ``src.dtype``:
    numpy.interp's bracket (reference.bracket), then the per-target weight and the per-output mix."""
    tt = src.dtype.type
    b_, _, d_ = vals32.shape
    out = np.empty((b_, tgt.shape[1], d_), np.float32)
    for b in range(b_):
        j0s, j1s, _ = reference.bracket(src[b], tgt[b])
        for i, (j0, j1, x) in enumerate(zip(j0s, j1s, tgt[b])):
            x = tt(x)
            if np.isnan(x):
                w, swap = F32(np.nan), False
            elif j0 == j1:
                w, swap = F32(-1), False
            else:
                w, swap = target_weight(version, x, tt(src[b, j0]), tt(src[b, j1]))
            if swap:
                j0, j1 = j1, j0
            for k in range(d_):
                out[b, i, k] = rc_mix(F32(vals32[b, j0, k]), F32(vals32[b, j1, k]), w)
    return out


def kernel_corners(vals: np.ndarray, src: np.ndarray, tgt: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Where the kernels differ from numpy.interp by design (docs/semantics.md), from the inputs alone:
    ``equal``: a target strictly inside a bracket whose float64 gap x1 - x0 is infinite, with a == c infinite,
    or a == c where t - x0 and t - x1 are both infinite (numpy: a; kernels: NaN); ``steep``: float64 times, a target strictly inside a bracket, finite a != c and
    (c - a)/(x1 - x0) overflowing float64 (numpy: +-inf; kernels: the interpolated value)."""
    b_, _, d_ = vals.shape
    equal = np.zeros((b_, tgt.shape[1], d_), bool)
    steep = np.zeros_like(equal)
    with np.errstate(all="ignore"):
        for b in range(b_):
            s, t = src[b].astype(np.float64), tgt[b].astype(np.float64)
            j0, j1, _ = reference.bracket(s, t)
            inside = (j1 > j0) & (t > s[j0])
            a, c = vals[b, j0].astype(np.float64), vals[b, j1].astype(np.float64)
            gap = (s[j1] - s[j0])[:, None]
            both = (np.isinf(t - s[j0]) & np.isinf(t - s[j1]))[:, None]  # x0 = -inf, x1 = +inf (or overflows)
            equal[b] = inside[:, None] & np.isinf(gap) & (a == c) & (np.isinf(a) | both)
            if src.dtype == np.float64:
                slope = (c - a) / gap
                steep[b] = inside[:, None] & np.isfinite(a) & np.isfinite(c) & (a != c) & np.isinf(slope)
    return equal, steep


def check_kernel_outcome(got: np.ndarray, want: np.ndarray, vals32: np.ndarray, src: np.ndarray, tgt: np.ndarray,
                         rtol: float = 4e-7) -> None:
    """``got`` (the kernels or their model) against the reference ``want``: the same NaN/+inf/-inf pattern
    and finite values within ``rtol * max(1, |values|)`` outside the documented corners; the documented
    outcome inside them."""
    equal, steep = kernel_corners(vals32, src, tgt)
    corner = equal | steep
    for name, f in (("nan", np.isnan), ("+inf", np.isposinf), ("-inf", np.isneginf)):
        diff = (f(got) != f(want)) & ~corner
        assert not diff.any(), f"{name} pattern differs at {np.argwhere(diff)[:5].tolist()}"
    assert np.isnan(got[equal]).all() and not np.isnan(want[equal]).any()
    assert np.isfinite(got[steep]).all() and np.isinf(want[steep]).all()
    fin = np.isfinite(want) & ~corner
    # each output's own scale: the larger magnitude of its bracket's two samples (the interpolation's rounding is
    # relative to them, not to the result nor to the largest value anywhere in the input)
    scale = np.ones(want.shape, np.float64)
    with np.errstate(all="ignore"):
        for b in range(want.shape[0]):
            j0, j1, _ = reference.bracket(src[b].astype(np.float64), tgt[b].astype(np.float64))
            a, c = np.abs(vals32[b, j0].astype(np.float64)), np.abs(vals32[b, j1].astype(np.float64))
            scale[b] = np.maximum(1.0, np.fmax(a, c))  # fmax: a NaN sample does not hide the other's scale
    err = np.abs(got[fin].astype(np.float64) - want[fin].astype(np.float64))
    bound = rtol * scale[fin]
    assert (err <= bound).all(), f"finite values differ: worst {float((err / bound).max(initial=0.0)):.3g}x the bound"



def test_check_kernel_outcome_catches_a_wrong_finite_value() -> None:
    """The tolerance has teeth: a finite output off by far more than its bracket's rounding fails, also when
    the same input holds ±3e38 elsewhere (a bound scaled by the input's largest value would let it pass)."""
    vals = np.array([[[1.0], [2.0], [3e38], [4.0]]], np.float32)
    src = np.array([[0.0, 1.0, 2.0, 3.0]])
    tgt = np.array([[0.5, 0.25, 2.0]])
    want = reference.resample(vals, src, tgt, out_dtype=np.float32)
    check_kernel_outcome(want.copy(), want, vals, src, tgt)  # the reference itself passes
    bad = want.copy()
    bad[0, 0, 0] = 1.5 + 1e-3  # 1.5 in [1, 2]: off by ~1e-3, far beyond rtol * 2
    with pytest.raises(AssertionError, match="finite values differ"):
        check_kernel_outcome(bad, want, vals, src, tgt)
    bad = want.copy()
    bad[0, 1, 0] = 1e20
    with pytest.raises(AssertionError, match="finite values differ"):
        check_kernel_outcome(bad, want, vals, src, tgt)

def _inputs(case, tdtype):
    vals, src, tgt = case
    with np.errstate(over="ignore"):
        v32 = vals.astype(np.float32)
        s, t = np.sort(src.astype(tdtype), axis=1), tgt.astype(tdtype)
    return v32, s, t


@pytest.mark.parametrize("version", ["v1", "v2"])
@pytest.mark.parametrize("tdtype", [np.float32, np.float64])
@pytest.mark.parametrize(("src", "vals", "t"), CASES)
def test_kernel_rule_on_the_issue_cases(src, vals, t, tdtype, version):
    v32, s, tg = _inputs((np.array([vals])[:, :, None], np.array([src]), np.array([[t, src[0], src[-1]]])), tdtype)
    want = reference.resample(v32, s, tg, out_dtype=np.float32)
    got = kernel_rule(v32, s, tg, version)
    check_kernel_outcome(got, want, v32, s, tg)


def test_kernel_rule_table_rows():
    """docs/semantics.md's table, row by row, for the kernels' rule (finite t inside the bracket)."""
    def one(src, vals, t, tdtype=np.float64):
        v32, s, tg = _inputs((np.array([vals])[:, :, None], np.array([src]), np.array([[t]])), tdtype)
        return float(kernel_rule(v32, s, tg)[0, 0, 0])
    assert one([-INF, 1.0], [2.0, 3.0], 0.0) == 3.0                      # x0 = -inf: c
    assert one([0.0, INF], [2.0, 3.0], 1.0) == 2.0                       # x1 = +inf: a
    assert np.isnan(one([-INF, INF], [2.0, 3.0], 0.0))                   # both infinite, a != c: NaN
    assert np.isnan(one([-INF, INF], [2.0, 2.0], 0.0))                   # the corner: numpy gives 2.0
    assert np.isnan(one([-INF, 1.0], [INF, 3.0], 0.0))                   # infinite time and value: NaN
    assert np.isnan(one([0.0, INF], [INF, INF], 1.0))                    # the corner: numpy gives inf
    assert one([0.0, 1.0], [INF, 3.0], 0.5) == INF and one([0.0, 1.0], [3.0, -INF], 0.5) == -INF
    assert one([0.0, 1.0], [INF, 3.0], 0.999999) == INF                  # the weight rounds to 1: still a
    assert one([0.0, 1.0], [3.0, INF], 1e-300) == INF                    # the weight rounds to 0: still c
    assert one([0.0, 1.0], [INF, INF], 0.5) == INF and np.isnan(one([0.0, 1.0], [INF, -INF], 0.5))
    assert one([-1e308, 1e308], [2.0, 3.0], 0.0) == 2.0                  # overflowing gap: a
    assert one([-1e308, 1e308], [2.0, 3.0], 1e308 - 1e292) == 3.0        # ... c where t - x0 overflows too
    assert abs(one([-3e38, 3e38], [-3e38, 3e38], 1e38, np.float32) - 1e38) < 1e32  # gap overflows float32 only
    assert abs(one([0.0, 1.0], [-3e38, 3e38], 0.25) + 1.5e38) < 1e32     # c - a would overflow float32
    assert np.isfinite(one([0.0, 1e-300], [-3e38, 3e38], 5e-301))        # the steep corner: numpy gives +inf


@settings(max_examples=300, deadline=None)
@given(extreme_cases(), st.sampled_from([np.float32, np.float64]), st.sampled_from(["v1", "v2"]))
def test_property_kernel_rule_agrees_with_reference(case, tdtype, version):
    v32, s, t = _inputs(case, tdtype)
    want = reference.resample(v32, s, t, out_dtype=np.float32)
    check_kernel_outcome(kernel_rule(v32, s, t, version), want, v32, s, t)


@pytest.mark.parametrize("version", ["v1", "v2"])
@pytest.mark.parametrize("tdtype", [np.float32, np.float64])
def test_kernel_rule_precision_within_the_gate(version, tdtype):
    """Ordinary data (the GPU tests' kind): the kernels' arithmetic passes the float32 correctness gate."""
    from robocache.bench import gate

    rng = np.random.default_rng(7)
    vals = rng.standard_normal((3, 40, 6)).astype(np.float32)
    src = np.sort(rng.uniform(0, 1, (3, 40)), axis=1).astype(tdtype)
    tgt = rng.uniform(-0.1, 1.1, (3, 60)).astype(tdtype)
    got = kernel_rule(vals, src, tgt, version)
    assert gate.check(got, reference.resample(vals, src, tgt), "float32")["passed"]


# --- voxelize ----------------------------------------------------------------------------------------------

@pytest.mark.parametrize("bounds", [((-1e39, 0, 0), (1, 1, 1)), ((0, 0, 0), (1, 1e39, 1)),
                                    ((0, 0, 0), (1, 1, 3.5e38))])
def test_voxelize_refuses_bounds_infinite_in_float32(bounds):
    pts = np.zeros((1, 4, 3), np.float32)
    with pytest.raises(ValueError, match="float32"):
        robocache.voxelize(pts, None, (2, 2, 2), bounds)


def test_voxel_overflow_lands_in_last_voxel():
    """p - lo overflows float32 (inf): min(floor(inf * inv), g - 1) is the last voxel, as documented."""
    bounds = ((-3e38, 0, 0), (3.4e38, 1, 1))
    pts = np.array([[[3.3e38, 0.5, 0.5], [-2.9e38, 0.5, 0.5]]], np.float32)
    idx = reference.voxel_index(pts, (4, 1, 1), bounds)
    assert idx.tolist() == [[3, 0]]
    counts = robocache.voxelize(pts, None, (4, 1, 1), bounds)
    assert counts[0, :, 0, 0].tolist() == [1, 0, 0, 1]
