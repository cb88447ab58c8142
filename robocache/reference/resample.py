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
    with np.errstate(invalid="ignore", divide="ignore"):
        w = np.where(j1 > j0, (tgt_row - x0) / np.where(j1 > j0, x1 - x0, 1.0), 0.0)
    w = np.where(np.isnan(tgt_row), np.nan, w)
    return j0, j1, w


def resample(values: np.ndarray, src_times: np.ndarray, tgt_times: np.ndarray,
             *, out_dtype: np.dtype | type | None = np.float64) -> np.ndarray:
    """``values[B,S,D]`` sampled at ``src_times[B,S]``, interpolated at ``tgt_times[B,T]``.

    Returns ``[B,T,D]``. Source times must be non-decreasing per row (not checked
    here: the public API checks). Computed in float64; cast to ``out_dtype``
    (``None`` keeps float64 too).
    """
    v = np.asarray(values, dtype=np.float64)
    s = np.asarray(src_times, dtype=np.float64)
    t = np.asarray(tgt_times, dtype=np.float64)
    b_, _, d_ = v.shape
    out = np.empty((b_, t.shape[1], d_), dtype=np.float64)
    for b in range(b_):
        j0, j1, w = bracket(s[b], t[b])
        a = v[b, j0]
        c = v[b, j1]
        ww = w[:, None]
        with np.errstate(invalid="ignore"):
            # a + w*(c - a), and exactly a where w == 0 (as numpy.interp on a sample)
            out[b] = np.where(ww == 0.0, a, a + ww * (c - a))
    return out.astype(out_dtype or np.float64, copy=False)
