"""Reference fusion: each stream resampled onto the shared targets, then concatenated."""
from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from .resample import resample


def fuse(streams: Sequence[tuple[np.ndarray, np.ndarray]], tgt_times: np.ndarray,
         *, out_dtype: np.dtype | type | None = np.float64) -> np.ndarray:
    """``streams`` is a sequence of ``(values[B,S_k,D_k], times[B,S_k])``; returns ``[B,T,sum D_k]``."""
    parts = [resample(v, t, tgt_times, out_dtype=np.float64) for v, t in streams]
    return np.concatenate(parts, axis=2).astype(out_dtype or np.float64, copy=False)
