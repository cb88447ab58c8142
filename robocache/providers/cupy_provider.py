"""CuPy peer: what a sensible CuPy user writes for each op, on CuPy arrays.

CuPy has no batched interpolation: ``cupy.interp`` applies only to one row and
one feature; it cannot batch rows or features (x, xp and fp are all 1-D), so
``B*D`` calls would be needed. It is used where it applies exactly (B == 1 and
D == 1); otherwise ``resample`` searches per row and interpolates vectorized.
Arithmetic is float32 (float64 inside ``cupy.interp``); results have the values'
dtype. ``cupy`` is imported inside the functions: importing this module has no
side effects.

bfloat16: CuPy has no ``cupy.bfloat16``; CuPy 14 holds ``ml_dtypes.bfloat16`` arrays
when ml_dtypes is installed (checked on the H200 runners: CuPy 14.2.0, ml_dtypes
0.6.0). :func:`value_dtype` raises ``TypeError`` where the installed CuPy cannot.
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from ..reference.voxelize import MODES, voxel_geometry

if TYPE_CHECKING:
    import cupy

VALUE_DTYPES = ("float32", "float16", "bfloat16", "float64")


def bfloat16_unsupported_reason() -> str | None:
    """Why the installed CuPy cannot hold bfloat16 arrays, or None when it can."""
    import cupy

    bf16 = getattr(cupy, "bfloat16", None)
    if bf16 is None:
        try:
            import ml_dtypes
        except ImportError:
            return ("CuPy has no bfloat16 dtype (cupy.bfloat16 is missing and ml_dtypes, through which "
                    "newer CuPy supports it, is not installed)")
        bf16 = ml_dtypes.bfloat16
    try:
        cupy.empty(0, dtype=bf16).astype(cupy.float32)
    except Exception as e:  # noqa: BLE001 - any failure means: not usable here
        return f"CuPy has no bfloat16 support in this build (cupy {cupy.__version__}): {type(e).__name__}: {e}"
    return None


def value_dtype(name: str) -> Any:
    """The dtype object to create CuPy arrays of ``name`` (float32, float16, bfloat16, float64).

    Raises ``TypeError("CuPy has no bfloat16 ...")`` where the installed CuPy lacks it.
    """
    import cupy

    if name not in VALUE_DTYPES:
        raise TypeError(f"dtype {name!r} is not one of {VALUE_DTYPES}")
    if name != "bfloat16":
        return cupy.dtype(name)
    reason = bfloat16_unsupported_reason()
    if reason is not None:
        raise TypeError(reason)
    bf16 = getattr(cupy, "bfloat16", None)
    if bf16 is None:
        import ml_dtypes

        bf16 = ml_dtypes.bfloat16
    return cupy.dtype(bf16)


def _check_values_dtype(name: str, x: cupy.ndarray) -> None:
    if x.dtype.name not in VALUE_DTYPES:
        raise TypeError(f"{name} has dtype {x.dtype.name}; the CuPy peer supports {', '.join(VALUE_DTYPES)}")


def resample(values: cupy.ndarray, src_times: cupy.ndarray, tgt_times: cupy.ndarray) -> cupy.ndarray:
    """``values[B,S,D]`` at ``src_times[B,S]`` interpolated at ``tgt_times[B,T]`` -> ``[B,T,D]``.

    ``cupy.interp`` applies only to one row and one feature; it cannot batch rows
    or features. It is used when B == 1 and D == 1; otherwise one
    ``cupy.searchsorted`` per row, then a vectorized bracket, gather and lerp.
    """
    import cupy

    _check_values_dtype("values", values)
    b_, s_, d_ = values.shape
    src = cupy.ascontiguousarray(src_times)
    tgt = cupy.ascontiguousarray(tgt_times)
    if b_ == 1 and d_ == 1:
        # fp upcast to float32 first: cupy.interp subtracts neighbours in fp's own
        # dtype, which would round the difference to half precision for float16.
        fp = values[0, :, 0].astype(cupy.float32)
        out = cupy.interp(tgt[0], src[0], fp)  # float64; clamps, NaN -> NaN, repeated xp: last wins
        return out.astype(values.dtype).reshape(1, -1, 1)
    # cupy.searchsorted takes one 1-D sorted array, so this is B launches: CuPy has
    # no batched (row-wise) search.
    j = cupy.stack([cupy.searchsorted(src[b], tgt[b], side="right") for b in range(b_)]) - 1
    clamped = (j < 0) | (j >= s_ - 1)
    j0 = cupy.clip(j, 0, s_ - 1)
    j1 = cupy.where(clamped, j0, j0 + 1)
    rows = cupy.arange(b_)[:, None]
    x0 = src[rows, j0]
    x1 = src[rows, j1]
    # Interior brackets have x0 <= t < x1; clamped ones get weight 0 without dividing.
    w = cupy.where(clamped, cupy.zeros_like(tgt), (tgt - x0) / cupy.where(clamped, cupy.ones_like(x1), x1 - x0))
    w = cupy.where(cupy.isnan(tgt), cupy.full_like(tgt, cupy.nan), w)
    w = w.astype(cupy.float32)[..., None]  # weight in the time dtype, then float32
    # Gather in the storage dtype, then upcast: lerp in float32.
    a = values[rows, j0].astype(cupy.float32)
    c = values[rows, j1].astype(cupy.float32)
    out = cupy.where(w == 0, a, a + w * (c - a))  # exactly a where w == 0
    return out.astype(values.dtype)


def fuse(streams: Sequence[tuple[cupy.ndarray, cupy.ndarray]], tgt_times: cupy.ndarray) -> cupy.ndarray:
    """Each ``(values[B,S_k,D_k], times[B,S_k])`` resampled onto ``tgt_times``, concatenated -> ``[B,T,sum D_k]``."""
    import cupy

    return cupy.concatenate([resample(v, t, tgt_times) for v, t in streams], axis=2)


def voxelize(points: cupy.ndarray, features: cupy.ndarray | None, grid: Sequence[int], bounds: Any,
             mode: str = "count") -> cupy.ndarray:
    """Dense voxel grids of ``points[B,N,3]``: ``count`` int32, ``occupancy`` bool, or ``mean`` features."""
    import cupy

    if mode not in MODES:
        raise ValueError(f"mode must be one of {MODES}, got {mode!r}")
    if mode == "mean" and features is None:
        raise ValueError("mode='mean' needs features[B,N,C]")
    _check_values_dtype("points", points)
    g, lo_np, hi_np, inv_np = voxel_geometry(grid, bounds)
    gx, gy, gz = (int(x) for x in g)
    b_, n_, _ = points.shape
    v_ = gx * gy * gz
    lo, hi, inv = cupy.asarray(np.stack([lo_np, hi_np, inv_np]))  # float32 [3] each
    p = points.astype(cupy.float32)
    keep = cupy.all((p >= lo) & (p < hi), axis=-1)  # NaN and +-inf fail a compare: dropped
    q = cupy.floor((p - lo) * inv)  # float32, as the kernels and the reference
    q = cupy.where(keep[..., None], q, cupy.zeros_like(q)).astype(cupy.int64)
    ix = cupy.minimum(q[..., 0], gx - 1)
    iy = cupy.minimum(q[..., 1], gy - 1)
    iz = cupy.minimum(q[..., 2], gz - 1)
    row = cupy.arange(b_, dtype=cupy.int64)[:, None]
    # Dropped points go to a spare bin past the end: no boolean compaction (which syncs),
    # and no cupy.bincount (it reads the maximum back to size its output).
    gidx = cupy.where(keep, row * v_ + (ix * gy + iy) * gz + iz, b_ * v_).ravel()
    counts = cupy.zeros(b_ * v_ + 1, dtype=cupy.int32)
    # cupy.add.at is unbuffered (atomics); cupyx.scatter_add is deprecated for it in CuPy 14.
    cupy.add.at(counts, gidx, cupy.int32(1))
    counts = counts[:-1].reshape(b_, gx, gy, gz)
    if mode == "count":
        return counts
    if mode == "occupancy":
        return counts > 0
    _check_values_dtype("features", features)
    c_ = features.shape[2]
    sums = cupy.zeros((b_ * v_ + 1, c_), dtype=cupy.float32)
    cupy.add.at(sums, gidx, features.astype(cupy.float32).reshape(b_ * n_, c_))
    sums = sums[:-1].reshape(b_, gx, gy, gz, c_)
    cnt = counts[..., None]
    mean = cupy.where(cnt > 0, sums / cupy.maximum(cnt, 1).astype(cupy.float32), cupy.zeros_like(sums))
    return mean.astype(features.dtype)
