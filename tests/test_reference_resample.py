"""The NumPy reference resample against numpy.interp, row by row and feature by feature, in float64."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from robocache import reference


def interp_oracle(values: np.ndarray, src: np.ndarray, tgt: np.ndarray) -> np.ndarray:
    b_, _, d_ = values.shape
    out = np.empty((b_, tgt.shape[1], d_))
    for b in range(b_):
        for d in range(d_):
            out[b, :, d] = np.interp(tgt[b], src[b], values[b, :, d])
    return out


def make_case(rng, b, s, t, d, lo=-0.5, hi=1.5):
    src = np.sort(rng.uniform(0.0, 1.0, (b, s)), axis=1)
    tgt = rng.uniform(lo, hi, (b, t))
    values = rng.standard_normal((b, s, d))
    return values, src, tgt


def check(values, src, tgt):
    got = reference.resample(values, src, tgt)
    want = interp_oracle(values, src, tgt)
    assert got.shape == want.shape and got.dtype == np.float64
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize(
    "b,s,t,d",
    [
        (4, 37, 19, 8),    # random, odd sizes
        (1, 100, 50, 32),  # B=1
        (3, 2, 9, 5),      # S=2: one interval
        (3, 17, 1, 4),     # T=1
        (2, 23, 31, 1),    # D=1
        (2, 23, 31, 7),    # odd D
        (2, 41, 13, 270),  # D=270 (> a warp, not a multiple of 32)
        (5, 1, 6, 3),      # S=1: one sample, every target clamps to it
    ],
)
def test_matches_numpy_interp(rng, b, s, t, d):
    check(*make_case(rng, b, s, t, d))


def test_targets_before_and_after_range_clamp(rng):
    values, src, _ = make_case(rng, 3, 20, 1, 4)
    tgt = np.concatenate([src[:, :1] - rng.uniform(0.1, 5, (3, 4)), src[:, -1:] + rng.uniform(0.1, 5, (3, 4)),
                          src[:, :1], src[:, -1:]], axis=1)
    got = reference.resample(values, src, tgt)
    np.testing.assert_array_equal(got[:, :4], np.repeat(values[:, :1], 4, axis=1))
    np.testing.assert_array_equal(got[:, 4:8], np.repeat(values[:, -1:], 4, axis=1))
    np.testing.assert_array_equal(got[:, 8], values[:, 0])
    np.testing.assert_array_equal(got[:, 9], values[:, -1])
    check(values, src, tgt)


def test_equal_source_times_last_sample_wins(rng):
    src = np.array([[0.0, 1.0, 1.0, 1.0, 2.0]])
    values = rng.standard_normal((1, 5, 3))
    tgt = np.array([[0.5, 1.0, 1.5, 2.0]])
    got = reference.resample(values, src, tgt)
    np.testing.assert_array_equal(got[0, 1], values[0, 3])  # at the repeated time: the last of the three
    np.testing.assert_allclose(got[0, 0], 0.5 * (values[0, 0] + values[0, 1]))  # left of it: towards the first
    np.testing.assert_allclose(got[0, 2], 0.5 * (values[0, 3] + values[0, 4]))  # right of it: from the last
    check(values, src, tgt)


def test_all_source_times_equal(rng):
    src = np.full((2, 6), 3.0)
    values = rng.standard_normal((2, 6, 4))
    tgt = np.array([[2.0, 3.0, 4.0], [3.0, 3.0, -1.0]])
    check(values, src, tgt)


def test_many_duplicates_random(rng):
    values, src, tgt = make_case(rng, 4, 60, 80, 5)
    src = np.round(src * 8) / 8  # many ties, including at the targets' grid
    tgt[:, ::3] = np.round(tgt[:, ::3] * 8) / 8
    check(values, np.sort(src, axis=1), tgt)


def test_nan_target_gives_nan(rng):
    values, src, tgt = make_case(rng, 2, 10, 5, 3)
    tgt[0, 2] = np.nan
    got = reference.resample(values, src, tgt)
    assert np.isnan(got[0, 2]).all()
    assert np.isfinite(np.delete(got[0], 2, axis=0)).all()
    check(values, src, tgt)


def test_out_dtype(rng):
    values, src, tgt = make_case(rng, 2, 10, 5, 3)
    assert reference.resample(values, src, tgt, out_dtype=np.float32).dtype == np.float32


sizes = st.integers(1, 12)


@st.composite
def resample_cases(draw):
    b, s, t, d = draw(sizes), draw(st.integers(1, 40)), draw(sizes), draw(sizes)
    finite = st.floats(-1e3, 1e3, allow_nan=False, allow_infinity=False, width=64)
    src = np.sort(draw(hnp.arrays(np.float64, (b, s), elements=finite)), axis=1)
    tgt = draw(hnp.arrays(np.float64, (b, t), elements=st.floats(-1.2e3, 1.2e3, width=64)))
    values = draw(hnp.arrays(np.float64, (b, s, d), elements=st.floats(-1e6, 1e6, width=64)))
    return values, src, tgt


@settings(max_examples=200, deadline=None)
@given(resample_cases())
def test_property_matches_numpy_interp(case):
    values, src, tgt = case
    got = reference.resample(values, src, tgt)
    want = interp_oracle(values, src, tgt)
    # numpy.interp computes slope*(x - x0) + y0, we compute y0 + w*(y1 - y0): equal up to rounding
    scale = np.abs(values).max(initial=1.0)
    np.testing.assert_allclose(got, want, rtol=1e-9, atol=1e-9 * scale)


@settings(max_examples=100, deadline=None)
@given(resample_cases())
def test_property_bounded_by_neighbours(case):
    """Interpolated values never leave the range of the row's samples, where numpy.interp's slope
    ``(c - a) / (x1 - x0)`` is finite: a bracket narrower than ``|c - a| / DBL_MAX`` (a subnormal time gap with
    these values) overflows it to an infinity, as numpy.interp does (``test_slope_overflow_is_numpys``)."""
    values, src, tgt = case
    gaps = np.diff(src, axis=1)
    assume(np.all((gaps == 0) | (gaps > 1e-290)))  # |c - a| <= 2e6 here: slopes below 2e296
    got = reference.resample(values, src, tgt)
    lo = values.min(axis=1, keepdims=True)
    hi = values.max(axis=1, keepdims=True)
    tol = 1e-9 * np.abs(values).max(initial=1.0)
    assert np.all(got >= lo - tol) and np.all(got <= hi + tol)


def test_slope_overflow_is_numpys():
    """A bracket of a subnormal time gap (2^-1023) between samples 2 apart: numpy.interp's slope overflows to an
    infinity and so does the reference, bit for bit (the case hypothesis found in CI, 2026-11-28)."""
    src = np.zeros((1, 18))
    src[0, 16], src[0, 17] = 2.0**-1023, 1.0
    t = np.array([[np.finfo(np.float64).tiny / 10]])
    for k in (15, 16):  # the gap's left sample 2 (slope -inf), its right one (+inf)
        v = np.zeros((1, 18, 1))
        v[0, k, 0] = 2.0
        got = reference.resample(v, src, t)[0, 0, 0]
        want = np.interp(t[0, 0], src[0], v[0, :, 0])
        assert np.isinf(want) and got == want, (k, got, want)
