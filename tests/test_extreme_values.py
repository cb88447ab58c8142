"""Infinite and extreme numbers follow docs/semantics.md exactly (issue 16).

resample/fuse: the reference (and so the CPU path of the public API) is numpy.interp bit for bit, infinite
source times, infinite values and values whose differences overflow included; the one documented exception is
numpy's S = 1 special case, where a NaN target gets the sample (robocache: NaN, as for every S).
``gpu_rule`` below is the two-step rule the kernels are to follow, written in NumPy (float32 lerp, then numpy's
algorithm in float64 wherever the lerp or an input is not finite, or the target is exceptional): it must
agree with the reference in NaN/inf pattern everywhere. The kernel change that implements it waits on branch
issue-16-kernels for a GPU run (docs/semantics.md); its GPU test runs the kernels on the same inputs.
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


def interp_exact_model(a: float, c: float, x0: float, x1: float, x: float) -> np.float32:
    """kernels/common.cuh ``rc_interp_exact`` line by line in Python (numpy.interp's outcomes in closed form,
    the value ``a + w*(c - a)`` in double with ``w`` from ``1/(x1 - x0)``); ``a``, ``c`` float32 values."""
    f32, nan = np.float32, np.float32(np.nan)
    a, c, x0, x1, x = float(a), float(c), float(x0), float(x1), float(x)
    if x != x:
        return nan
    if x0 == x1 or x == x0:
        return f32(a)
    with np.errstate(all="ignore"):
        gap, d0, d1, dv = np.float64(x1) - x0, np.float64(x) - x0, np.float64(x) - x1, np.float64(c) - a
        fin = np.isfinite
        if dv != dv:
            return f32(a) if a == c else nan
        if not fin(dv):
            if not fin(gap):
                return nan
            if fin(a):
                return f32(c)
            if fin(c):
                return f32(a)
            return nan
        if not fin(gap):
            if fin(d0):
                return f32(a)
            if fin(d1):
                return f32(c)
            return f32(a) if a == c else nan
        if gap < 1.0 and abs(dv) > gap * 1.7976931348623157e308:
            return f32(np.inf) if dv > 0 else f32(-np.inf)
        g, n = gap, d0
        if g < 2.0 ** -900:
            g, n = g * 2.0 ** 600, n * 2.0 ** 600
        w = f32(n * (1.0 / g))
        return f32(np.float64(a) + np.float64(w) * dv)


def gpu_rule(vals32: np.ndarray, src: np.ndarray, tgt: np.ndarray) -> np.ndarray:
    """The kernels' documented rule (docs/semantics.md) in NumPy, for one time dtype ``src.dtype``.

    Per target: the bracket; ``w = (t - x0) / (x1 - x0)`` in the time dtype, replaced by NaN ("exceptional")
    when ``x1 - x0`` or ``t - x0`` is not finite or (float64 times) ``x1 - x0 < 1e-260``. Per element: the float32
    lerp ``a + w*(c - a)`` (exactly ``a`` when ``w == 0``); where ``a``, ``c`` or that result is not finite,
    :func:`interp_exact_model` (the kernels' slow path).
    """
    tt = src.dtype.type
    b_, s_, d_ = vals32.shape
    out = np.empty((b_, tgt.shape[1], d_), np.float32)
    with np.errstate(all="ignore"):
        for b in range(b_):
            j0, j1, _ = reference.bracket(src[b], tgt[b])
            x0, x1, t = src[b][j0], src[b][j1], tgt[b]
            gap, d0 = tt(1) * (x1 - x0), tt(1) * (t - x0)
            w = np.where(j1 > j0, d0 / np.where(j1 > j0, gap, 1), 0).astype(np.float32)
            bad = (j1 > j0) & (~np.isfinite(gap) | ~np.isfinite(d0))
            if src.dtype == np.float64:
                bad |= (j1 > j0) & (gap < 1e-260)
            w = np.where(bad | np.isnan(t), np.float32(np.nan), w)[:, None]
            a, c = vals32[b, j0], vals32[b, j1]
            r = np.where(w == 0, a, a + w * (c - a)).astype(np.float32)
            slow = ~(np.isfinite(a) & np.isfinite(c) & np.isfinite(r))
            for i, k in zip(*np.nonzero(slow)):
                r[i, k] = interp_exact_model(a[i, k], c[i, k], x0[i], x1[i], t[i])
            out[b] = r
    return out


@settings(max_examples=300, deadline=None)
@given(extreme_cases(), st.sampled_from([np.float32, np.float64]))
def test_property_gpu_rule_agrees_with_reference(case, tdtype):
    vals, src, tgt = case
    with np.errstate(over="ignore"):
        v32 = vals.astype(np.float32)
        s, t = np.sort(src.astype(tdtype), axis=1), tgt.astype(tdtype)
    want = reference.resample(v32, s, t, out_dtype=np.float32)
    got = gpu_rule(v32, s, t)
    assert np.array_equal(np.isnan(got), np.isnan(want))
    assert np.array_equal(np.isposinf(got), np.isposinf(want)) and np.array_equal(np.isneginf(got), np.isneginf(want))
    fin = np.isfinite(want)
    err = np.abs(got[fin].astype(np.float64) - want[fin]) / np.maximum(1.0, np.abs(want[fin].astype(np.float64)))
    scale = np.abs(v32[np.isfinite(v32)]).max(initial=1.0)
    assert (err <= 4e-7 * max(1.0, scale)).all()


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
