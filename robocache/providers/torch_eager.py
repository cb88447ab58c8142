"""PyTorch eager peer: what a torch user writes for each op, on CPU or CUDA tensors.

Results are on the inputs' device. Values may be float32, float16 or bfloat16
(float64 too); the arithmetic is float32 and the result has the values' dtype,
as in ``docs/semantics.md``. ``torch`` is imported inside the functions so that
importing this module has no side effects.
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from ..reference.voxelize import check_mode, voxel_geometry

if TYPE_CHECKING:
    import torch


def resample(values: torch.Tensor, src_times: torch.Tensor, tgt_times: torch.Tensor) -> torch.Tensor:
    """``values[B,S,D]`` at ``src_times[B,S]`` interpolated at ``tgt_times[B,T]`` -> ``[B,T,D]``."""
    import torch

    src = src_times.contiguous()  # batched searchsorted wants contiguous rows
    tgt = tgt_times.contiguous()
    b_, s_, d_ = values.shape
    t_ = tgt.shape[1]
    # numpy.interp's bracket: j = last source index with src[j] <= t
    j = torch.searchsorted(src, tgt, right=True) - 1
    clamped = (j < 0) | (j >= s_ - 1)
    j0 = j.clamp(0, s_ - 1)
    j1 = torch.where(clamped, j0, j0 + 1)
    x0 = torch.gather(src, 1, j0)
    x1 = torch.gather(src, 1, j1)
    # Interior brackets have x0 <= t < x1, so x1 > x0; clamped ones get weight 0
    # and never divide (equal source times therefore never divide by zero).
    w = torch.where(clamped, torch.zeros_like(tgt), (tgt - x0) / torch.where(clamped, torch.ones_like(x1), x1 - x0))
    w = torch.where(torch.isnan(tgt), torch.full_like(tgt, float("nan")), w)
    w = w.to(torch.float32).unsqueeze(-1)  # weight in the time dtype, then float32
    # Gather in the storage dtype (half the bytes for 16-bit values), then upcast.
    a = torch.gather(values, 1, j0.unsqueeze(-1).expand(b_, t_, d_)).to(torch.float32)
    c = torch.gather(values, 1, j1.unsqueeze(-1).expand(b_, t_, d_)).to(torch.float32)
    # exactly a where w == 0, so an infinite neighbour cannot turn a sample into NaN
    out = torch.where(w == 0, a, a + w * (c - a))
    return out.to(values.dtype)


def fuse(streams: Sequence[tuple[torch.Tensor, torch.Tensor]], tgt_times: torch.Tensor) -> torch.Tensor:
    """Each ``(values[B,S_k,D_k], times[B,S_k])`` resampled onto ``tgt_times``, concatenated -> ``[B,T,sum D_k]``."""
    import torch

    return torch.cat([resample(v, t, tgt_times) for v, t in streams], dim=-1)


def geometry_tensor(grid: Sequence[int], bounds: Any, device: Any) -> torch.Tensor:
    """float32 ``[3,3]`` rows ``lo, hi, inv`` exactly as ``reference.voxel_geometry`` rounds them.

    Cached per (grid, bounds, device), as a torch user would keep it: a host-to-device copy per call
    would synchronize the stream and could not be captured in a CUDA graph.
    """
    import torch

    key = (tuple(int(g) for g in grid), np.asarray(bounds, dtype=np.float64).tobytes(), str(torch.device(device)))
    hit = _GEOMETRY.get(key)
    if hit is None:
        _, lo, hi, inv = voxel_geometry(grid, bounds)
        hit = torch.from_numpy(np.stack([lo, hi, inv])).to(device)
        if len(_GEOMETRY) > 64:
            _GEOMETRY.clear()
        _GEOMETRY[key] = hit
    return hit


_GEOMETRY: dict[tuple, Any] = {}


def voxelize_with_geometry(points: torch.Tensor, features: torch.Tensor | None, grid: tuple[int, int, int],
                           geo: torch.Tensor, mode: str) -> torch.Tensor:
    """The tensor part of :func:`voxelize`, given ``geo`` from :func:`geometry_tensor`.

    Split out so that ``torch.compile`` sees tensors and Python ints only (the
    NumPy geometry stays outside the compiled graph).
    """
    import torch

    gx, gy, gz = grid
    b_, n_, _ = points.shape
    v_ = gx * gy * gz
    lo, hi, inv = geo[0], geo[1], geo[2]
    p = points.to(torch.float32)
    keep = ((p >= lo) & (p < hi)).all(dim=-1)  # NaN and +-inf fail a compare: dropped
    q = torch.floor((p - lo) * inv)  # float32, as the kernels and the reference
    q = torch.where(keep.unsqueeze(-1), q, torch.zeros_like(q)).to(torch.int64)
    ix = q[..., 0].clamp(max=gx - 1)
    iy = q[..., 1].clamp(max=gy - 1)
    iz = q[..., 2].clamp(max=gz - 1)
    row = torch.arange(b_, device=points.device, dtype=torch.int64).unsqueeze(-1)
    # Dropped points go to one spare bin past the end instead of being filtered:
    # no data-dependent shapes (and no host sync) on the GPU.
    gidx = torch.where(keep, row * v_ + (ix * gy + iy) * gz + iz, b_ * v_).reshape(-1)
    counts = torch.zeros(b_ * v_ + 1, dtype=torch.int32, device=points.device)
    counts.index_add_(0, gidx, torch.ones_like(gidx, dtype=torch.int32))
    counts = counts[:-1].reshape(b_, gx, gy, gz)
    if mode == "count":
        return counts
    if mode == "occupancy":
        return counts > 0
    c_ = features.shape[2]
    sums = torch.zeros(b_ * v_ + 1, c_, dtype=torch.float32, device=points.device)
    sums.index_add_(0, gidx, features.to(torch.float32).reshape(b_ * n_, c_))
    sums = sums[:-1].reshape(b_, gx, gy, gz, c_)
    cnt = counts.unsqueeze(-1)
    mean = torch.where(cnt > 0, sums / cnt.clamp(min=1).to(torch.float32), torch.zeros_like(sums))
    return mean.to(features.dtype)


def voxelize(points: torch.Tensor, features: torch.Tensor | None, grid: Sequence[int], bounds: Any,
             mode: str = "count") -> torch.Tensor:
    """Dense voxel grids of ``points[B,N,3]``: ``count`` int32, ``occupancy`` bool, or ``mean`` features."""
    check_mode(mode, features)
    g = tuple(int(x) for x in grid)
    return voxelize_with_geometry(points, features, g, geometry_tensor(g, bounds, points.device), mode)
