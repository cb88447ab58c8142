"""Reference resampling: per row and feature, exactly ``numpy.interp``."""
from __future__ import annotations

import numpy as np


def bracket(src_row: np.ndarray, tgt_row: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """numpy.interp's bracket for each target: indices ``j0``, ``j1`` and weight ``w`` of ``j1``.

    ``j0`` is the last source index with ``src[j0] <= t`` (numpy's rule
    ``xp[j] <= x < xp[j+1]``, so at a repeated source time the last sample with
    that time wins). Before the first source time both indices are 0, at or after
    the last both are S-1 (clamped, weight 0). A NaN target gets weight NaN.
    """
    s = src_row.shape[0]
    j = np.searchsorted(src_row, tgt_row, side="right") - 1
    before = j < 0
    after = j >= s - 1
    j0 = np.clip(j, 0, s - 1)
    j1 = np.where(before | after, j0, np.minimum(j0 + 1, s - 1))
    x0 = src_row[j0]
    x1 = src_row[j1]
    with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
        w = np.where(j1 > j0, (tgt_row - x0) / np.where(j1 > j0, x1 - x0, 1.0), 0.0)
    w = np.where(np.isnan(tgt_row), np.nan, w)
    return j0, j1, w


def resample(values: np.ndarray, src_times: np.ndarray, tgt_times: np.ndarray,
             *, out_dtype: np.dtype | type | None = np.float64) -> np.ndarray:
    """``values[B,S,D]`` sampled at ``src_times[B,S]``, interpolated at ``tgt_times[B,T]``.

    Returns ``[B,T,D]``. Source times must be non-decreasing per row (not checked
    here: the public API checks). Computed in float64 with numpy.interp's own
    algorithm, so the result is ``numpy.interp``'s bit for bit, infinities included
    (docs/semantics.md): at a sample (clamped or an exact hit) the sample; inside a
    bracket ``slope*(t - x0) + a`` with ``slope = (c - a)/(x1 - x0)``; where that is
    NaN, ``slope*(t - x1) + c``; where that is NaN too and ``a == c``, ``a``. The one
    exception: a NaN target gives NaN also for S = 1 (numpy returns the sample).
    Cast to ``out_dtype`` (``None`` keeps float64 too).
    """
    v = np.asarray(values, dtype=np.float64)
    s = np.asarray(src_times, dtype=np.float64)
    t = np.asarray(tgt_times, dtype=np.float64)
    b_, _, d_ = v.shape
    out = np.empty((b_, t.shape[1], d_), dtype=np.float64)
    for b in range(b_):
        j0, j1, _ = bracket(s[b], t[b])
        out[b] = interp_rule(v[b, j0], v[b, j1], s[b][j0], s[b][j1], t[b])
    return out.astype(out_dtype or np.float64, copy=False)


def interp_rule(a: np.ndarray, c: np.ndarray, x0: np.ndarray, x1: np.ndarray, t: np.ndarray) -> np.ndarray:
    """numpy.interp's arithmetic for targets ``t[T]`` bracketed by ``x0[T] <= t < x1[T]`` with values
    ``a[T,D]``, ``c[T,D]`` (``x0 == x1`` where the target is clamped to one sample), in float64."""
    x0, x1, t = x0[:, None], x1[:, None], t[:, None]
    with np.errstate(all="ignore"):
        slope = (c - a) / (x1 - x0)
        r = slope * (t - x0) + a
        nan = np.isnan(r)
        if nan.any():  # "if we get nan in one direction, try the other" (numpy's words)
            r = np.where(nan, slope * (t - x1) + c, r)
            r = np.where(np.isnan(r) & (a == c), a, r)
    # a sample (clamped, the last time, an exact hit: numpy's dy[j]) is the sample; a NaN target is NaN
    r = np.where((x0 == x1) | (t == x0), a, r)
    return np.where(np.isnan(t), np.nan, r)
