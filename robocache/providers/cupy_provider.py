"""CuPy peer: what a CuPy user at their best writes for each op, on CuPy arrays.

``resample``: CuPy has no batched interpolation (``cupy.interp`` takes one row and one
feature; it is used where that is the whole problem, B == 1 and D == 1) and its
``searchsorted`` takes one sorted 1-D array. So the rows are searched together: each
time becomes the complex key ``row + 1j*time`` (complex numbers sort lexicographically
in NumPy and CuPy), which makes the whole batch one sorted array, and one
``cupy.searchsorted`` finds every bracket, exactly for any times. Then a vectorised
gather of whole value rows and a float32 lerp. ``fuse`` resamples each stream straight
into its slice of the output. The steps are written against an array module ``xp``
(:func:`resample_xp`, :func:`fuse_xp`) so the CPU tests run the same code with NumPy.
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

from ..reference.voxelize import check_mode, voxel_geometry

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

    ``cupy.interp`` (one row, one feature) when B == 1 and D == 1; otherwise
    :func:`resample_xp`: one batched search over all rows, then a vectorised gather and lerp.
    """
    import cupy

    _check_values_dtype("values", values)
    if values.shape[0] == 1 and values.shape[2] == 1:
        # fp upcast to float32 first: cupy.interp subtracts neighbours in fp's own
        # dtype, which would round the difference to half precision for float16.
        fp = values[0, :, 0].astype(cupy.float32)
        out = cupy.interp(tgt_times[0], src_times[0], fp)  # float64; clamps, NaN -> NaN, repeated xp: last wins
        return out.astype(values.dtype).reshape(1, -1, 1)
    return resample_xp(cupy, values, src_times, tgt_times)


def fuse(streams: Sequence[tuple[cupy.ndarray, cupy.ndarray]], tgt_times: cupy.ndarray) -> cupy.ndarray:
    """Each ``(values[B,S_k,D_k], times[B,S_k])`` resampled onto ``tgt_times``, concatenated -> ``[B,T,sum D_k]``."""
    import cupy

    return fuse_xp(cupy, streams, tgt_times)


# ---- the algorithm, on any NumPy-like array module (CuPy here; NumPy in the CPU tests) ----------------------

def resample_xp(xp: Any, values: Any, src_times: Any, tgt_times: Any) -> Any:
    """:func:`resample` on the array module ``xp`` (``cupy``; ``numpy`` runs the same steps on the CPU)."""
    _check_values_dtype("values", values)
    _check_shapes(values, src_times, tgt_times)
    out = xp.empty((values.shape[0], tgt_times.shape[1], values.shape[2]), dtype=values.dtype)
    ktype = _key_dtype(xp, values.shape[0], src_times.dtype, tgt_times.dtype)
    _resample_into(xp, out, values, src_times, tgt_times, _keys(xp, tgt_times, ktype))
    return out


def fuse_xp(xp: Any, streams: Sequence[tuple[Any, Any]], tgt_times: Any) -> Any:
    """:func:`fuse` on the array module ``xp``: each stream resampled straight into its slice of the output.

    No per-stream result and no concatenate (one pass less over the output), and the target keys are
    built once for all streams whose time dtypes share a key dtype.
    """
    streams = list(streams)
    if not streams:
        raise ValueError("fuse needs at least one (values, times) stream")
    for k, (v, t) in enumerate(streams):
        _check_values_dtype(f"stream {k} values", v)
        _check_shapes(v, t, tgt_times, f"stream {k} ")
    dtypes = {v.dtype for v, _ in streams}
    dtype = dtypes.pop() if len(dtypes) == 1 else xp.result_type(*dtypes)  # as concatenate would promote
    b_, t_ = tgt_times.shape
    out = xp.empty((b_, t_, sum(v.shape[2] for v, _ in streams)), dtype=dtype)
    keys: dict[Any, Any] = {}
    off = 0
    for v, t in streams:
        ktype = _key_dtype(xp, b_, t.dtype, tgt_times.dtype)
        if ktype not in keys:
            keys[ktype] = _keys(xp, tgt_times, ktype)
        d_ = v.shape[2]
        _resample_into(xp, out[:, :, off:off + d_], v, t, tgt_times, keys[ktype])
        off += d_
    return out


def _check_shapes(values: Any, src_times: Any, tgt_times: Any, what: str = "") -> None:
    if values.ndim != 3 or src_times.ndim != 2 or tgt_times.ndim != 2:
        raise ValueError(f"{what}expects values[B,S,D], times[B,S], tgt_times[B,T]; got shapes "
                         f"{values.shape}, {src_times.shape}, {tgt_times.shape}")
    b_, s_, _ = values.shape
    if src_times.shape != (b_, s_) or tgt_times.shape[0] != b_:
        raise ValueError(f"{what}shapes disagree: values {values.shape}, times {src_times.shape}, "
                         f"tgt_times {tgt_times.shape}")
    if s_ < 1:
        raise ValueError(f"{what}needs at least one source sample per row (S >= 1)")


def _key_dtype(xp: Any, rows: int, *time_dtypes: Any) -> Any:
    """complex64 (8 bytes, like a float64 offset) when every time is float32 or narrower and row indices fit
    float32's 24-bit mantissa exactly; complex128 otherwise."""
    narrow = all(xp.dtype(d).itemsize <= 4 for d in time_dtypes)
    return xp.dtype(xp.complex64 if narrow and rows <= 1 << 24 else xp.complex128)


def _keys(xp: Any, times: Any, ktype: Any) -> Any:
    """``times[B,N]`` as search keys ``row + 1j*time``: sorted over the whole batch when each row is sorted.

    NumPy and CuPy order complex numbers lexicographically (real part, then imaginary part), so one
    ``searchsorted`` over the flattened keys searches every row at once, and exactly: the row index and the
    time are each held exactly, where a float offset ``row * span + time`` rounds (large row offsets or
    epoch-second times make distinct times collide and pick the wrong bracket).
    """
    key = xp.empty(times.shape, dtype=ktype)
    key.real = xp.arange(times.shape[0], dtype=key.real.dtype)[:, None]
    key.imag = times
    return key


def _resample_into(xp: Any, out: Any, values: Any, src_times: Any, tgt_times: Any, tgt_key: Any) -> None:
    """Write the resampled ``values`` into ``out[B,T,D]`` (a strided slice of a wider output is fine)."""
    b_, s_, d_ = values.shape
    t_ = tgt_times.shape[1]
    src = xp.ascontiguousarray(src_times).reshape(-1)
    tgt = tgt_times
    # The bracket as a global index into the flattened [B*S] samples: r*S - 1 + (samples of row r with
    # time <= t). side="right" makes the last of equal source times win, as numpy.interp does.
    src_key = _keys(xp, src_times, tgt_key.dtype)
    g = xp.searchsorted(src_key.reshape(-1), tgt_key.reshape(-1), side="right").reshape(b_, t_) - 1
    start = xp.arange(0, b_ * s_, s_, dtype=g.dtype)[:, None]
    last = start + (s_ - 1)
    # Before the first sample or at/after the last (NaN targets search past the end too): weight 0.
    clamped = (g < start) | (g >= last)
    g0 = xp.minimum(xp.maximum(g, start), last)
    g1 = g0 + (~clamped)
    x0 = src[g0]
    x1 = src[g1]
    # Interior brackets have x0 <= t < x1, so x1 > x0; clamped ones get weight 0 without dividing.
    one, zero, nan = (tgt.dtype.type(x) for x in (1, 0, np.nan))
    w = xp.where(clamped, zero, (tgt - x0) / xp.where(clamped, one, x1 - x0))
    w = xp.where(xp.isnan(tgt), nan, w)
    w = w.astype(xp.float32)[..., None]  # weight in the time dtype, then float32
    # Gather whole rows of the flattened [B*S, D] values in the storage dtype (half the bytes for 16-bit
    # values), then upcast and lerp in float32, in place where it can be.
    v2 = values.reshape(b_ * s_, d_)
    a = v2[g0].astype(xp.float32, copy=False)
    c = v2[g1].astype(xp.float32)  # a fresh array: updated in place below
    c -= a
    c *= w
    c += a
    out[...] = xp.where(w == 0, a, c)  # exactly a where w == 0: an infinite neighbour cannot make it NaN


def voxelize(points: cupy.ndarray, features: cupy.ndarray | None, grid: Sequence[int], bounds: Any,
             mode: str = "count") -> cupy.ndarray:
    """Dense voxel grids of ``points[B,N,3]``: ``count`` int32, ``occupancy`` bool, or ``mean`` features."""
    import cupy

    check_mode(mode, features)
    _check_values_dtype("points", points)
    g, lo_np, hi_np, inv_np = voxel_geometry(grid, bounds)
    gx, gy, gz = (int(x) for x in g)
    b_, n_, _ = points.shape
    v_ = gx * gy * gz
    lo, hi, inv = _geometry(cupy, lo_np, hi_np, inv_np)  # float32 [3] each, on the device
    p = points.astype(cupy.float32, copy=False)
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
    cupy.add.at(sums, gidx, features.astype(cupy.float32, copy=False).reshape(b_ * n_, c_))
    sums = sums[:-1].reshape(b_, gx, gy, gz, c_)
    cnt = counts[..., None]
    mean = cupy.where(cnt > 0, sums / cupy.maximum(cnt, 1).astype(cupy.float32), cupy.zeros_like(sums))
    return mean.astype(features.dtype)


_GEOMETRY: dict[tuple, Any] = {}


def _geometry(cupy: Any, lo: np.ndarray, hi: np.ndarray, inv: np.ndarray) -> Any:
    """``[3,3]`` float32 rows lo, hi, inv on the current device, cached per value and device.

    Kept as a CuPy user would (and as the torch peers do): a host-to-device copy per call blocks the
    host on the copy and puts a transfer into every timed call.
    """
    key = (np.stack([lo, hi, inv]).tobytes(), cupy.cuda.Device().id)
    hit = _GEOMETRY.get(key)
    if hit is None:
        if len(_GEOMETRY) > 64:
            _GEOMETRY.clear()
        hit = _GEOMETRY[key] = cupy.asarray(np.stack([lo, hi, inv]))
    return hit
