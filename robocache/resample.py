"""resample: values on non-uniform source times, linearly interpolated at target times.

validate -> (CPU: reference) | (GPU: allocate -> pick the entry point by dtype -> launch).
Semantics: docs/semantics.md; kernel: kernels/resample.cu.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from . import _arrays as A
from . import _launch as L
from . import _tune
from . import _versions
from . import reference

TILE_T = A.TILE_T  # targets per block; must match RC_TILE_T in kernels/resample.cu and fuse.cu
BLOCK = 256


def check_sorted_numpy(name: str, t: np.ndarray) -> None:
    """Host check (NumPy inputs): ``ValueError`` naming ``name`` unless each row is non-decreasing and NaN-free."""
    with np.errstate(invalid="ignore"):
        ok = bool(np.all(t[:, 1:] >= t[:, :-1])) and not bool(np.isnan(t).any())
    if not ok:
        raise ValueError(f"{name} must be non-decreasing along each row and free of NaN")


def check_sorted_gpu(name: str, t: Any) -> None:
    """Opt-in GPU check: one reduction and one device sync."""
    bad = (t[:, 1:] < t[:, :-1]).any() | (t != t).any()
    if bool(bad):
        raise ValueError(f"{name} must be non-decreasing along each row and free of NaN")


def _validate(values: Any, src_times: Any, tgt_times: Any) -> tuple[A.Arr, A.Arr, A.Arr, str]:
    v = A.describe("values", values)
    s = A.describe("src_times", src_times)
    t = A.describe("tgt_times", tgt_times)
    _, device = A.same_place([v, s, t])
    A.check_rank(v, 3, "[B, S, D]")
    A.check_rank(s, 2, "[B, S]")
    A.check_rank(t, 2, "[B, T]")
    b, n_src, d = v.shape
    A.check_positive(v, {"B (batch)": b, "S (source length)": n_src, "D (features)": d})
    if d > A.MAX_FEATURES:
        raise ValueError(f"values has D = {d} features; robocache supports at most {A.MAX_FEATURES}")
    tiles = -(-t.shape[1] // A.TILE_T) if len(t.shape) == 2 else 1
    if v.on_gpu:
        A.check_grid(b * tiles, "values/tgt_times")
    if s.shape != (b, n_src):
        raise ValueError(f"src_times must have shape [B, S] = {(b, n_src)} to match values {v.shape}, got {s.shape}")
    if t.shape[0] != b:
        raise ValueError(f"tgt_times must have batch B = {b} like values {v.shape}, got shape {t.shape}")
    A.check_positive(t, {"T (target length)": t.shape[1]})
    A.check_value_dtype(v, on_gpu=v.on_gpu)
    A.check_time_dtypes(s, t)
    return v, s, t, device


class _Plan:
    """A validated v2 launch for one signature: the kernel with its argument block, grid and shape."""

    __slots__ = ("fl", "grid", "kind", "dev", "shape", "block", "alloc", "ptr", "smem")

    def __init__(self, fl: L.FastLaunch, grid: int, kind: str, dev: int, shape: tuple[int, int, int], block: int,
                 smem: int = 0):
        self.fl, self.grid, self.kind, self.dev, self.shape, self.block = fl, grid, kind, dev, shape, block
        self.smem = smem  # dynamic shared memory bytes (the flat kernel's)
        self.alloc = L.Output(kind, shape, dev)
        self.ptr = L.ptr_of(kind)

    def __call__(self, values: Any, src: Any, tgt: Any, out: Any = None) -> Any:
        if out is None:
            out = self.alloc(values)
        ptr = self.ptr
        L.fast_launch(self.fl, self.grid, self.kind, self.dev,
                      {0: ptr(values), 1: ptr(src), 2: ptr(tgt), 3: ptr(out)}, self.smem, block=self.block)
        return out

    def launch(self, values: Any, pv: int, ps: int, pt: int) -> Any:
        """A call whose pointers were read already (the tensor-check path)."""
        out = self.alloc(values)
        L.fast_launch(self.fl, self.grid, self.kind, self.dev, {0: pv, 1: ps, 2: pt, 3: out.data_ptr()}, self.smem,
                      block=self.block)
        return out


_PLANS = L.PlanCache()


def _geometry(v: A.Arr, vv: Any, out_ptr: int, n_tgt: int) -> tuple[int, int, int, int]:
    """(itemsize, vector bytes, output rows, SMs) of a v2 launch."""
    b, _, d = v.shape
    es = vv.element_size() if v.kind == "torch" else vv.itemsize
    vb = L.vector_bytes(es, (d * es,), (L.ptr(vv), out_ptr))
    return es, vb, b * n_tgt, L.sm_count(v.device_index)


def _plan_v2(v: A.Arr, s: A.Arr, vv: Any, out_ptr: int, n_tgt: int, cfg: _tune.Config = _tune.DEFAULT) -> _Plan:
    b, n_src, d = v.shape
    es, vb, n_targets, sms = _geometry(v, vv, out_ptr, n_tgt)
    cs = _tune.wide_split(cfg.cs, max(1, d * es // vb))  # 0 where the row is one warp's: the row kernel
    if cfg.stage == 5 and _tune.resample_flat_pays(vb, n_targets, d):  # the flat kernel: 2**lg targets a block
        lg = _tune.flat_lg(n_targets, sms)
        grid = -(-n_targets >> lg)
        A.check_grid(grid, "values/tgt_times")
        mult, shift = L.fast_divmod(n_tgt)
        fn = L.kernel("rows_wide", f"resample_flat_{v.dtype}_{s.dtype}", v.device_index)
        # (values, src, tgt, out, S, T, D, n_targets, lg, div_mult, div_shift): the staged kernel's arguments
        fl = L.FastLaunch(fn, [("ptr", None), ("ptr", None), ("ptr", None), ("ptr", None), ("i32", n_src),
                               ("i32", n_tgt), ("i32", d), ("i64", n_targets), ("i32", lg), ("u64", mult),
                               ("u32", shift)])
        return _Plan(fl, grid, v.kind, v.device_index, (b, n_tgt, d), _tune.FLAT_THREADS, _tune.flat_smem(1, lg))
    if cfg.stage == 5:  # a shape the flat kernel cannot take (a table's choice for its bucket): the default launch
        cfg = _tune.DEFAULT
    if cfg.stage == 4:  # one output element a thread (kernels/rows_spec.cu)
        n_out = n_targets * d
        grid = -(-n_out // BLOCK)
        A.check_grid(grid, "values/tgt_times")
        i32 = "_i32" if _tune.spec_i32(n_src, n_tgt, d, b) else ""
        fn = L.kernel("rows_spec", f"resample_spec_{v.dtype}_{s.dtype}{i32}", v.device_index,
                      _tune.spec_options(n_src, n_tgt, d, b) + cfg.options())  # () but a probe's variant
        (dm, ds), (tm, ts) = L.fast_divmod(d), L.fast_divmod(n_tgt)
        # the 32-bit dividers only for the _i32 entry (its sizes are below 2**31; the 64-bit entry never reads them,
        # and a T of 2**31 or more has no 32-bit divider)
        (dm32, ds32), (tm32, ts32) = (L.fast_divmod32(d), L.fast_divmod32(n_tgt)) if i32 else ((0, 0), (0, 0))
        # values, src, tgt, out, S, T, D, N, D's and T's 64-bit multiplier and shift, then their 32-bit ones
        fl = L.FastLaunch(fn, [("ptr", None), ("ptr", None), ("ptr", None), ("ptr", None), ("i32", n_src),
                               ("i32", n_tgt), ("i32", d), ("i64", n_out), ("u64", dm), ("u32", ds), ("u64", tm),
                               ("u32", ts), ("u32", dm32), ("u32", ds32), ("u32", tm32), ("u32", ts32)])
        fl.keep = fn  # with SPEC_CONSTANTS a module of one shape: loaded while the plan lives (_cuda.SPEC_MODULES)
        return _Plan(fl, grid, v.kind, v.device_index, (b, n_tgt, d), BLOCK)
    if cfg.shift or cfg.stage:  # shifted vectors, a group of 2**lg lanes a row (kernels/rows_wide.cu); staged: a
        lg = _tune.shift_lanes(d * es)  # block's targets bracketed first, STAGE_TARGETS of them
        if cfg.stage:
            block, grid = _tune.STAGE_TARGETS, -(-n_targets // _tune.STAGE_TARGETS)
        else:
            block, grid = L.wide_geometry(-(-(n_targets << lg) // 32), sms, cfg.block)
        A.check_grid(grid, "values/tgt_times")
        mult, shift = L.fast_divmod(n_tgt)
        kind = ("shift", "staged", "span", "tile")[cfg.stage]
        fn = L.kernel("rows_wide", f"resample_{kind}_{v.dtype}_{s.dtype}", v.device_index)
        # (values, src, tgt, out, S, T, D, n_targets, lg, div_mult, div_shift); the tile kernel's lg is the
        # row kernel's vector bytes (a warp a row)
        fl = L.FastLaunch(fn, [("ptr", None), ("ptr", None), ("ptr", None), ("ptr", None), ("i32", n_src),
                               ("i32", n_tgt), ("i32", d), ("i64", n_targets), ("i32", vb if cfg.stage == 3 else lg),
                               ("u64", mult), ("u32", shift)])
        return _Plan(fl, grid, v.kind, v.device_index, (b, n_tgt, d), block)
    if cs:  # the column split: 2**cs warps share an output row (kernels/rows_wide.cu)
        block, grid = L.wide_geometry(n_targets << cs, sms, cfg.block)
        A.check_grid(grid, "values/tgt_times")
        mult, shift = L.fast_divmod(n_tgt)
        fn = L.kernel("rows_wide", f"resample_wide_{v.dtype}_{s.dtype}", v.device_index)
        # (values, src, tgt, out, S, T, D, n_targets, vb, cs, div_mult, div_shift)
        fl = L.FastLaunch(fn, [("ptr", None), ("ptr", None), ("ptr", None), ("ptr", None), ("i32", n_src),
                               ("i32", n_tgt), ("i32", d), ("i64", n_targets), ("i32", vb), ("i32", cs),
                               ("u64", mult), ("u32", shift)])
        return _Plan(fl, grid, v.kind, v.device_index, (b, n_tgt, d), block)
    block = cfg.block or L.block_threads(d, es, vb, n_targets, sms, lg_shift=cfg.lg_shift, tpg=cfg.tpg)
    lg, tpg, grid = L.row_geometry(d, es, vb, n_targets, sms, threads=block, lg_shift=cfg.lg_shift, tpg=cfg.tpg)
    A.check_grid(grid, "values/tgt_times")
    mult, shift = L.fast_divmod(n_tgt)
    fn = L.kernel("resample", f"resample_v2_{v.dtype}_{s.dtype}", v.device_index, cfg.options())
    # (values, src, tgt, out, S, T, D, n_targets, vb, lg, tpg, div_mult, div_shift): kernels/resample.cu
    fl = L.FastLaunch(fn, [("ptr", None), ("ptr", None), ("ptr", None), ("ptr", None), ("i32", n_src),
                           ("i32", n_tgt), ("i32", d), ("i64", n_targets), ("i32", vb), ("i32", lg), ("i32", tpg),
                           ("u64", mult), ("u32", shift)])
    return _Plan(fl, grid, v.kind, v.device_index, (b, n_tgt, d), block)


def _tuned_config(v: A.Arr, s: A.Arr, vv: Any, ss: Any, tt: Any, out: Any, n_tgt: int) -> tuple[_tune.Config, bool]:
    """(the launch configuration of this call's bucket: cache, shipped table, or timed now; whether it is final,
    robocache/_tune.py ``choose``)."""
    b, n_src, d = v.shape
    es, vb, n_targets, sms = _geometry(v, vv, L.ptr(out) if out is not None else 0, n_tgt)
    nvec = max(1, d * es // vb)
    lg_nat = min(5, (nvec - 1).bit_length())
    key = _tune.bucket("resample", v.dtype, s.dtype, [(vb, nvec, n_src)], n_tgt, b)
    scratch: list[Any] = []

    def trial(cfg: _tune.Config) -> Any:
        plan = _plan_v2(v, s, vv, L.ptr(out) if out is not None else 0, n_tgt, cfg)
        if not scratch:
            scratch.append(out if out is not None else L.empty(v.kind, (b, n_tgt, d), vv, v.device_index))
        return lambda: plan(vv, ss, tt, scratch[0])

    may_tune = not _tune.capturing(v.kind, v.device_index)
    with L.on_device("cupy", v.device_index):
        cands = _tune.candidates(lg_nat, -(-nvec // (1 << lg_nat)), n_targets, n_tgt=n_tgt, n_src=n_src,
                                 time_bytes=8 if s.dtype == "float64" else 4, shifted=_tune.shift_pays(vb, d * es),
                                 staged=_tune.stage_pays(d * es, n_targets), tiled=_tune.tile_pays(lg_nat, n_targets),
                                 spanned=_tune.span_pays(d * es, n_src, n_tgt), spec=_tune.spec_pays(d * es),
                                 flat=_tune.resample_flat_pays(vb, n_targets, d))
        return _tune.choose(v.device_index, key, cands, trial, L.stream_for(v.kind, v.device_index), may_tune)


def resample(values: Any, src_times: Any, tgt_times: Any, *, check_times: bool = False,
             out: Any | None = None, _version: str | None = None) -> Any:
    """Resample ``values[B,S,D]`` from ``src_times[B,S]`` onto ``tgt_times[B,T]`` -> ``[B,T,D]``.

    Per row and feature exactly ``numpy.interp`` (clamped outside the source range;
    at a repeated source time the last sample wins). Math in float32 (float64 for
    float64 times' weights); the result has the values' dtype and kind.
    ``check_times=True`` verifies on the GPU that source times are non-decreasing
    (costs a reduction and a sync); the CPU path always checks. ``out``: an optional
    C-contiguous ``[B,T,D]`` array of the values' kind, device and dtype to write into.
    ``_version`` (benchmarks only): a kernel version of ``robocache._versions`` instead of the best.
    """
    if out is None and not check_times and _version is None:  # the launch floor: a recent plan's tensor check,
        for check, al, plan in _PLANS.recent:  # or one dict lookup
            if check(values, src_times, tgt_times):
                pv, ps, pt = values.data_ptr(), src_times.data_ptr(), tgt_times.data_ptr()
                if (pv & 15, ps & 15, pt & 15) == al:
                    return plan.launch(values, pv, ps, pt)
        sig = L.signature(values)
        if sig is not None:
            plan = _PLANS.get((sig, L.signature(src_times), L.signature(tgt_times)))
            if plan is not None:
                return plan(values, src_times, tgt_times)
    version = _versions.check("resample", _version)
    v, s, t, _ = _validate(values, src_times, tgt_times)
    b, n_src, d = v.shape
    n_tgt = t.shape[1]
    if out is not None:
        A.check_out(out, v, (b, n_tgt, d), v.dtype)
    if not v.on_gpu:
        src = A.to_numpy(s)
        check_sorted_numpy("src_times", src)
        res = reference.resample(A.to_numpy(v), src, A.to_numpy(t), out_dtype=None)
        return A.fill_out(out, A.from_numpy_like(v, res, v.dtype))

    return _LAUNCH[version](v, s, t, out, check_times, _version is None)


def _launch_v1(v: A.Arr, s: A.Arr, t: A.Arr, out: Any, check_times: bool, public: bool) -> Any:
    b, n_src, d = v.shape
    n_tgt = t.shape[1]
    with A.GpuContext(v.kind, v.device_index) as ctx:
        vv, ss, tt = A.contiguous(v), A.contiguous(s), A.contiguous(t)
        if check_times:
            check_sorted_gpu("src_times", ss)
        if out is None:
            out = ctx.empty((b, n_tgt, d), "like", vv)
        tiles = (n_tgt + TILE_T - 1) // TILE_T
        ctx.launch("resample", f"resample_v1_{v.dtype}_{s.dtype}", b * tiles, BLOCK,
                   (A.ptr_arg(vv), A.ptr_arg(ss), A.ptr_arg(tt), A.ptr_arg(out),
                    np.int32(n_src), np.int32(n_tgt), np.int32(d), np.int32(tiles)))
    return out


def _launch_rows(v: A.Arr, s: A.Arr, t: A.Arr, out: Any, check_times: bool, public: bool, tuned: bool) -> Any:
    """v2 and v3: the row kernel (kernels/rows_v2.cuh) with the default launch rule (v2) or the launch
    configuration chosen for the call's bucket (v3, robocache/_tune.py)."""
    n_tgt = t.shape[1]
    with L.on_device(v.kind, v.device_index):  # copies of non-contiguous CuPy inputs on their own device
        vv, ss, tt = A.contiguous(v), A.contiguous(s), A.contiguous(t)
    if check_times:
        with A.GpuContext(v.kind, v.device_index):
            check_sorted_gpu("src_times", ss)
    cfg, final = _tuned_config(v, s, vv, ss, tt, out, n_tgt) if tuned else (_tune.DEFAULT, True)
    plan = _plan_v2(v, s, vv, L.ptr(out) if out is not None else 0, n_tgt, cfg)
    # a provisional choice (made during a graph capture) is not cached: a later call may still tune the bucket
    cacheable = final and public and out is None and not check_times and vv is v.obj and ss is s.obj \
        and tt is t.obj
    if cacheable:
        _PLANS.put((L.signature(v.obj), L.signature(s.obj), L.signature(t.obj)), plan, (v.obj, s.obj, t.obj))
    return plan(vv, ss, tt, out)


# One launch function per kernel version (robocache/_versions.py): a version without one fails at import.
_LAUNCH = {
    "v1": _launch_v1,
    "v2": lambda v, s, t, out, check, public: _launch_rows(v, s, t, out, check, public, tuned=False),
    "v3": lambda v, s, t, out, check, public: _launch_rows(v, s, t, out, check, public, tuned=True),
}
_versions.require_launchers("resample", _LAUNCH)
