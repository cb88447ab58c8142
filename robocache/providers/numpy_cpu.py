"""NumPy CPU peer: the reference itself (float64 arithmetic), returning the input dtype.

This is the baseline a user without a GPU has. Values may be float32, float16 or
float64 (NumPy has no bfloat16 without ml_dtypes).
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from .. import reference


def resample(values: np.ndarray, src_times: np.ndarray, tgt_times: np.ndarray) -> np.ndarray:
    """``values[B,S,D]`` at ``src_times[B,S]`` interpolated at ``tgt_times[B,T]`` -> ``[B,T,D]`` in values' dtype."""
    return reference.resample(values, src_times, tgt_times, out_dtype=values.dtype)


def fuse(streams: Sequence[tuple[np.ndarray, np.ndarray]], tgt_times: np.ndarray) -> np.ndarray:
    """Each stream resampled onto ``tgt_times`` and concatenated -> ``[B,T,sum D_k]`` in the values' dtype."""
    streams = list(streams)
    return reference.fuse(streams, tgt_times, out_dtype=streams[0][0].dtype)


def voxelize(points: np.ndarray, features: np.ndarray | None, grid: Sequence[int], bounds: Any,
             mode: str = "count") -> np.ndarray:
    """Dense voxel grids; ``mean`` in the features' dtype, ``count`` int32 and ``occupancy`` bool as the reference."""
    out_dtype = features.dtype if (mode == "mean" and features is not None) else None
    return reference.voxelize(points, features, grid, bounds, mode, out_dtype=out_dtype)
