"""The one grid: every benchmark case of every op, with named suites and a reason per point.

asv, pytest-benchmark, the CLI and the nightly job all enumerate cases from here;
nothing else may hold a case list. A :class:`Case` is one (op, shape, dtype,
provider) point; it knows an upper bound of the bytes the op must move from its
parameters alone (:attr:`Case.bytes`), the items it produces, and it builds its
own random, seeded inputs for the provider's array kind. The figure a record
carries is :func:`moved_bytes`: the minimum traffic of the very inputs measured
(the source rows the targets actually use), so a % of the copy ceiling can never
pass 100%.

The ``dispatch`` points (one per op, tag ``dispatch-...``, ``params["kind"] == "dispatch"``) measure the
host cost of one tiny call through the public API in a tight loop (timer ``host_loop``), for robocache on
PyTorch tensors, robocache on CuPy arrays (provider ``robocache@cupy``) and a bare CuPy RawKernel launch
(``bare_launch``: the launch floor the public call is judged against).

``GRID_VERSION`` goes up whenever the meaning of an existing case id changes
(inputs, bytes, semantics), so the history never compares across such a change.

The ``multigpu`` suite holds the cases that span several ranks (one GPU each; Gloo processes on the CPU):
GPU count, scaling mode (weak: fixed batch per GPU; strong: fixed total batch) and gather mode (none, all:
``all_gather`` to every rank, one: ``gather`` to rank 0) are axes of the grid and part of the case's tag
(``B4096-S100-T50-D32-weak-g4-allgather``); :attr:`Case.world_size` says how many ranks a case needs.
They run through ``torchrun`` (:mod:`robocache.bench.launch`), never through the single-process runner.
"""
from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .. import _versions

# Unchanged by adding/removing points or dtypes; bumped when an existing case id's meaning changes.
# 2: a record's bytes are the inputs' minimum traffic (moved_bytes), no longer the params-only bound.
GRID_VERSION = 2
OPS = ("resample", "fuse", "voxelize")
GPU_DTYPES = ("float32", "float16", "bfloat16")
CPU_DTYPES = ("float32",)  # NumPy has no bfloat16 and its float16 math is emulated: not a peer a user picks
# The GPU peers of every single-GPU point: the public API (the best kernel version), every kernel version
# (robocache@v1, robocache@v2, ...: the optimisation journey, measured side by side in one run), PyTorch eager,
# torch.compile in its default mode and in max-autotune-no-cudagraphs (the faster one is the peer to beat), CuPy.
GPU_PROVIDERS = ("robocache", *(f"robocache@{v}" for v in _versions.all_versions()),
                 "torch_eager", "torch_compile", "torch_compile@max-autotune", "cupy")
CPU_PROVIDERS = ("numpy", "torch_eager", "torch_compile")
SUITES = ("quick", "nightly", "multigpu")
# Dispatch (call-cost) points: the public call on torch CUDA tensors, the same on CuPy arrays, and the
# bare CuPy RawKernel launch of a kernel with the same arguments (the floor). GPU only.
DISPATCH_PROVIDERS = ("robocache", "robocache@cupy", "bare_launch")
# Multi-GPU cases: one provider on the GPU (the library under test; its peers' scaling is the same
# collective), the NumPy and torch-eager CPU providers for the Gloo rehearsal on the CPU.
MULTIGPU_GPU_PROVIDERS = ("robocache",)
MULTIGPU_CPU_PROVIDERS = ("numpy", "torch_eager")
MULTIGPU_COUNTS = (1, 2, 4, 8)  # GPUs of one machine; 16 = two 8-GPU machines (resample only)
MULTIGPU_CPU_COUNTS = (1, 2)  # Gloo processes on the CPU (CI)
GATHER_MODES = ("none", "all", "one")
GATHER_TAG = {"none": "nogather", "all": "allgather", "one": "gather"}
_MULTI_KEYS = ("world_size", "scaling", "gather", "B_rank", "B_total")  # params only multi-GPU cases have
SWEEP_DTYPES = ("float32", "bfloat16")  # scaling sweeps: fp32 and the 16-bit type robot learning uses
ITEM_SIZE = {"float32": 4, "float16": 2, "bfloat16": 2, "float64": 8}
BOUNDS = ((-2.0, -2.0, -2.0), (2.0, 2.0, 2.0))
# CPU providers only run where one call costs well under a second, so a nightly pass stays bounded.
CPU_MAX_BYTES = 64 * 2**20


@dataclass(frozen=True)
class Point:
    """A shape of one op, before dtype and provider are chosen."""

    op: str
    tag: str
    params: dict[str, Any]
    reason: str
    suites: tuple[str, ...]
    dtypes: tuple[str, ...] = GPU_DTYPES
    devices: tuple[str, ...] = ("gpu", "cpu")  # where the point exists (multi-GPU points: one of them)


@dataclass(frozen=True)
class Case:
    """One measurable point: op x shape x dtype x provider."""

    op: str
    tag: str
    params: dict[str, Any] = field(hash=False)
    dtype: str
    provider: str
    reason: str
    suites: tuple[str, ...]

    @property
    def id(self) -> str:
        """Series id without provider and dtype: ``<op>/<tag>``."""
        return f"{self.op}/{self.tag}"

    @property
    def key(self) -> str:
        """Unique within a grid: ``<op>/<tag>/<dtype>/<provider>``."""
        return f"{self.op}/{self.tag}/{self.dtype}/{self.provider}"

    @property
    def distributed(self) -> bool:
        """A case of the multi-GPU grid (run through torchrun, even with one rank)."""
        return "world_size" in self.params

    @property
    def world_size(self) -> int:
        """Ranks the case needs: one GPU each on a GPU run (1 for every single-process case)."""
        return int(self.params.get("world_size", 1))

    gpus = world_size  # what front ends compare with the GPUs present

    def _total_params(self) -> dict[str, Any]:
        p = self.params
        return {**p, "B": p["B_total"]} if "B_total" in p else p

    @property
    def bytes(self) -> int:
        """An upper bound of the bytes the op must move, from the params alone (every source row read);
        for a multi-GPU case, summed over the ranks' shards.

        What ``list``, the CPU size limit and the input rotation use; a record carries
        :func:`moved_bytes` of its inputs instead (never more than this).
        """
        return case_bytes(self.op, self._total_params(), self.dtype)

    @property
    def dispatch(self) -> bool:
        """A call-cost case: host time per call of a tiny call in a tight loop (timer ``host_loop``)."""
        return self.params.get("kind") == "dispatch"

    @property
    def items(self) -> int:
        """Items the op produces per call; for a multi-GPU case, over the whole group."""
        p = self._total_params()
        return p["B"] * p["N"] if self.op == "voxelize" else p["B"]

    def shard(self, rank: int) -> Case:
        """Rank ``rank``'s part of a multi-GPU case: a single-process case with the per-rank batch.

        Its id (``<op>/<tag>/rank<r>``) seeds its inputs, so every rank works on its own random data.
        """
        if not self.distributed:
            return self
        if not 0 <= rank < self.world_size:
            raise ValueError(f"rank {rank} out of range for a case of {self.world_size} ranks")
        own = {k: v for k, v in self.params.items() if k not in _MULTI_KEYS}
        return Case(self.op, f"{self.tag}/rank{rank}", {**own, "B": self.params["B_rank"]}, self.dtype,
                    self.provider, self.reason, self.suites)

    @property
    def baseline_key(self) -> str | None:
        """Key of the one-rank case of the same op, shape, scaling and gather mode (the efficiency's
        reference), or None for a single-process or one-rank case."""
        if not self.distributed or self.world_size == 1:
            return None
        # The tag's B is the batch per rank (weak) or in all (strong): the one-rank case has the same B.
        tag = self.tag.replace(f"-g{self.world_size}-", "-g1-")
        return f"{self.op}/{tag}/{self.dtype}/{self.provider}"

    @property
    def items_unit(self) -> str:
        return "points" if self.op == "voxelize" else "trajectories"

    def to_record_case(self, moved: int | None = None) -> dict[str, Any]:
        """The schema's ``Case`` dict; ``bytes`` is ``moved`` (:func:`moved_bytes` of the inputs measured)
        when given, else the params-only bound (a record whose inputs were never built)."""
        return {"id": self.id, "op": self.op, "provider": self.provider, "dtype": self.dtype,
                "params": dict(self.params), "grid_version": GRID_VERSION,
                "bytes": int(moved) if moved is not None else self.bytes,
                "items": self.items, "items_unit": self.items_unit, "reason": self.reason}


def case_bytes(op: str, p: dict[str, Any], dtype: str) -> int:
    """An upper bound of the bytes the op must move, from the params alone: every input read once (all
    ``S`` source rows of every stream), every output written once. :func:`moved_bytes` is the exact
    minimum for given inputs and never exceeds it."""
    es, ts = ITEM_SIZE[dtype], ITEM_SIZE[p.get("time_dtype", "float32")]
    if op == "resample":
        b, s, t, d = p["B"], p["S"], p["T"], p["D"]
        return b * s * d * es + b * s * ts + b * t * ts + b * t * d * es
    if op == "fuse":
        b, t = p["B"], p["T"]
        streams = p["streams"]
        d_total = sum(d for _, d in streams)
        return sum(b * s * d * es + b * s * ts for s, d in streams) + b * t * ts + b * t * d_total * es
    if op == "voxelize":
        b, n, c = p["B"], p["N"], p["C"]
        v = math.prod(p["grid"])
        out = {"count": 4 * b * v, "occupancy": b * v, "mean": es * b * v * c}[p["mode"]]
        feats = b * n * c * es if p["mode"] == "mean" else 0
        return b * n * 3 * es + feats + out
    raise ValueError(f"unknown op {op!r}")


# --- the bytes these inputs need (the record's figure) -----------------------------------------------

# Rows of a batch searched at once: bounds the temporaries (16 bytes per element) to ~64 MB.
_SEARCH_CHUNK = 1 << 22


def rows_needed(src_times: np.ndarray, tgt_times: np.ndarray) -> np.ndarray:
    """Per batch row, how many distinct source rows (``values[b, j, :]``) interpolating ``tgt_times`` needs.

    ``numpy.interp``'s bracket rule: ``j`` = the last index with ``src[j] <= t``. A target before the
    first source time needs row 0, one at or after the last needs row ``S - 1`` (clamped); inside, row
    ``j``, and row ``j + 1`` only where the weight is non-zero (``t > src[j]``: an exact hit needs one
    row). A NaN target needs none (its output is NaN whatever the rows hold). Exact for any finite or
    infinite times; ``src_times`` must be non-decreasing per row and free of NaN (what the op requires).

    Vectorised: each time becomes the complex number ``row + 1j * time``, which NumPy orders
    lexicographically, so one ``searchsorted`` over the flattened source times finds every row's
    brackets with no offset added to (and no rounding of) the times.
    """
    src = np.asarray(src_times, dtype=np.float64)
    tgt = np.asarray(tgt_times, dtype=np.float64)
    if src.ndim != 2 or tgt.ndim != 2 or src.shape[0] != tgt.shape[0] or src.shape[1] < 1:
        raise ValueError(f"need src_times[B, S] (S >= 1) and tgt_times[B, T], got {src.shape} and {tgt.shape}")
    if np.isnan(src).any():
        raise ValueError("src_times must be free of NaN")
    b, s = src.shape
    t = tgt.shape[1]
    out = np.zeros(b, dtype=np.int64)
    step = max(1, _SEARCH_CHUNK // max(s + t, 1))
    for lo in range(0, b, step):
        hi = min(b, lo + step)
        out[lo:hi] = _rows_needed_chunk(src[lo:hi], tgt[lo:hi])
    return out


def _rows_needed_chunk(src: np.ndarray, tgt: np.ndarray) -> np.ndarray:
    b, s = src.shape
    t = tgt.shape[1]
    row = np.arange(b)
    nan = np.isnan(tgt)
    keys = np.empty((b, s), dtype=np.complex128)
    keys.real = row[:, None]
    keys.imag = src
    q = np.empty((b, t), dtype=np.complex128)
    q.real = row[:, None]
    q.imag = np.where(nan, -np.inf, tgt)  # searched anywhere in its own row, then ignored
    # the number of this row's source times <= t, minus one
    j = np.searchsorted(keys.ravel(), q.ravel(), side="right").reshape(b, t) - (row * s)[:, None] - 1
    j0 = np.clip(j, 0, s - 1)
    used = np.zeros((b, s), dtype=bool)
    rr = np.broadcast_to(row[:, None], (b, t))
    keep = ~nan
    used[rr[keep], j0[keep]] = True
    inside = keep & (j >= 0) & (j < s - 1)
    if inside.any():
        x0 = np.take_along_axis(src, j0, axis=1)
        second = inside & (tgt > x0)  # non-zero weight: the next row is needed too
        used[rr[second], j0[second] + 1] = True
    return used.sum(axis=1)


def _round_times(times: np.ndarray, time_dtype: str) -> np.ndarray:
    # The provider sees its times in the time dtype; rounding can turn a near-hit into an exact hit.
    return np.asarray(times).astype(time_dtype).astype(np.float64)


def moved_bytes(case: Case, inputs: dict[str, Any]) -> int:
    """The minimum traffic of ``case`` on these host inputs (:func:`host_inputs`), in bytes.

    resample: the distinct source rows the targets use (:func:`rows_needed`) x D x the value size, plus
    every source time and every target time read once and the output written once; fuse: the same per
    stream, the targets read once for all streams; voxelize: the params model (:func:`case_bytes`: points,
    features in mean mode, the dense output). Times are rounded to the case's time dtype first, as the
    provider sees them. Never more than :attr:`Case.bytes`.
    """
    p = case.params
    es, ts_ = ITEM_SIZE[case.dtype], ITEM_SIZE[p.get("time_dtype", "float32")]
    tdt = p.get("time_dtype", "float32")
    if case.op == "resample":
        tgt = _round_times(inputs["tgt_times"], tdt)
        src = _round_times(inputs["src_times"], tdt)
        b, t = tgt.shape
        d = np.shape(inputs["values"])[2]
        rows = int(rows_needed(src, tgt).sum())
        return rows * d * es + src.size * ts_ + tgt.size * ts_ + b * t * d * es
    if case.op == "fuse":
        tgt = _round_times(inputs["tgt_times"], tdt)
        b, t = tgt.shape
        total, d_total = tgt.size * ts_, 0
        for values, times in inputs["streams"]:
            src = _round_times(times, tdt)
            d = np.shape(values)[2]
            total += int(rows_needed(src, tgt).sum()) * d * es + src.size * ts_
            d_total += d
        return total + b * t * d_total * es
    if case.op == "voxelize":
        return case_bytes("voxelize", p, case.dtype)
    raise ValueError(f"unknown op {case.op!r}")


# --- the grid ---------------------------------------------------------------------------------------

Q, N = ("quick", "nightly"), ("nightly",)


def _resample(b: int, s: int, t: int, d: int, reason: str, suites=N, dtypes=SWEEP_DTYPES,
              time_dtype: str = "float32") -> Point:
    tag = f"B{b}-S{s}-T{t}-D{d}" + ("-t64" if time_dtype == "float64" else "")
    return Point("resample", tag, {"B": b, "S": s, "T": t, "D": d, "time_dtype": time_dtype}, reason, suites, dtypes)


def _fuse(mix: str, b: int, t: int, streams: list[tuple[int, int]], reason: str, suites=N,
          dtypes=SWEEP_DTYPES) -> Point:
    return Point("fuse", f"{mix}-B{b}-T{t}", {"B": b, "T": t, "streams": [list(x) for x in streams],
                                              "mix": mix, "time_dtype": "float32"}, reason, suites, dtypes)


def _vox(b: int, n: int, g: int, mode: str, cloud: str, reason: str, suites=N, c: int = 4,
         dtypes=SWEEP_DTYPES) -> Point:
    tag = f"B{b}-N{n}-G{g}-{mode}-{cloud}" + (f"-C{c}" if mode == "mean" else "")
    return Point("voxelize", tag, {"B": b, "N": n, "grid": [g, g, g], "C": c if mode == "mean" else 0,
                                   "mode": mode, "cloud": cloud}, reason, suites, dtypes)


# The robot mix: vision features 256-D at 30 Hz, proprioception 14-D at 100 Hz, force 6-D at 333 Hz, 2 s
# windows onto a 50 Hz timeline (100 targets).
ROBOT = [(60, 256), (200, 14), (666, 6)]

POINTS: tuple[Point, ...] = (
    # resample: the classic case first
    _resample(256, 100, 50, 32, "the classic case: 256 trajectories, 100 -> 50 frames, 32 features", Q,
              dtypes=GPU_DTYPES),
    _resample(4096, 100, 50, 32, "large batch: a data loader's full step; shows peak bandwidth", Q,
              dtypes=("float32", "bfloat16")),
    _resample(32, 100, 50, 32, "small batch: launch-bound regime, latency matters", Q, dtypes=("float32",)),
    # batch scaling at the classic shape
    *(_resample(b, 100, 50, 32, f"batch scaling: B={b} at the classic shape")
      for b in (1, 16, 64, 1024, 16384)),
    # length scaling (T = S/2) at B=256, D=32
    *(_resample(256, s, s // 2, 32, f"length scaling: S={s}, T=S/2 (binary search depth log2 S)")
      for s in (32, 500, 2000, 10000)),
    # feature-dimension scaling at B=256, 100 -> 50
    *(_resample(256, 100, 50, d, f"dimension scaling: D={d} ({'sub-warp' if d < 32 else 'multi-warp'} rows)")
      for d in (1, 7, 128, 512)),
    _resample(256, 100, 50, 32, "float64 timestamps (epoch seconds stay exact): cost of double weights",
              dtypes=("float32",), time_dtype="float64"),
    # fuse
    _fuse("robot", 256, 100, ROBOT, "realistic robot mix: vision 256-D@30 Hz, proprio 14-D@100 Hz, force "
          "6-D@333 Hz onto 50 Hz", Q, dtypes=GPU_DTYPES),
    _fuse("robot", 32, 100, ROBOT, "robot mix, small batch: launch-bound; one fused launch vs K+1", N),
    _fuse("robot", 2048, 100, ROBOT, "robot mix, large batch: bandwidth-bound", N, dtypes=("float32", "bfloat16")),
    _fuse("eight", 256, 100, [(20 * (k + 1), 2 ** (k % 6 + 1)) for k in range(8)],
          "eight streams of mixed rates and widths: per-stream overhead of the peers", N),
    # voxelize
    _vox(4, 100_000, 64, "count", "uniform", "a LiDAR sweep per sample, 64^3 counts: scatter throughput", Q,
         dtypes=("float32",)),
    _vox(4, 100_000, 64, "mean", "clustered", "clustered scene, mean features: atomic contention", Q,
         dtypes=("float32",)),
    _vox(16, 100_000, 64, "count", "uniform", "batch of 16 sweeps, uniform cloud"),
    _vox(16, 100_000, 64, "count", "clustered", "batch of 16 sweeps, clustered cloud (hot voxels)"),
    _vox(1, 1_000_000, 128, "count", "uniform", "one dense cloud of 1M points into 128^3"),
    _vox(4, 100_000, 64, "occupancy", "uniform", "occupancy grids: idempotent stores, no atomics",
         dtypes=("float32",)),
    _vox(4, 100_000, 64, "mean", "uniform", "mean features over a uniform cloud"),
    _vox(1, 10_000, 32, "count", "uniform", "tiny cloud: launch-bound regime", dtypes=("float32",)),
)


# --- dispatch (call cost) ----------------------------------------------------------------------------
# One tiny call per op through the public API in a tight loop: the host's cost per call, which is what a
# training loop pays when the batch is small. Shapes as small as the op allows, so the GPU keeps up.

_DISPATCH_WHY = ("call cost: host time per call of a tiny {what} through the public API in a tight loop, "
                 "against a bare CuPy RawKernel launch (the floor; issue 12: public call <= 2x bare)")
DISPATCH_POINTS: tuple[Point, ...] = (
    Point("resample", "dispatch-B1-S4-T2-D1",
          {"B": 1, "S": 4, "T": 2, "D": 1, "time_dtype": "float32", "kind": "dispatch"},
          _DISPATCH_WHY.format(what="resample (B1 S4 T2 D1)"), Q, ("float32",), ("gpu",)),
    Point("fuse", "dispatch-B1-T2",
          {"B": 1, "T": 2, "streams": [[4, 1], [3, 2]], "mix": "dispatch", "time_dtype": "float32",
           "kind": "dispatch"},
          _DISPATCH_WHY.format(what="fuse (2 streams, B1 T2)"), Q, ("float32",), ("gpu",)),
    Point("voxelize", "dispatch-B1-N16-G4-count-uniform",
          {"B": 1, "N": 16, "grid": [4, 4, 4], "C": 0, "mode": "count", "cloud": "uniform", "kind": "dispatch"},
          _DISPATCH_WHY.format(what="voxelize (16 points into 4^3 counts)"), Q, ("float32",), ("gpu",)),
)
POINTS = POINTS + DISPATCH_POINTS


# --- the multi-GPU grid -----------------------------------------------------------------------------
# For each op, one shape the data loader of one GPU would run (weak scaling: that batch on every GPU) and
# one fixed total batch (strong scaling: that batch split over the GPUs; with 8 GPUs each gets the weak
# batch, so the two curves meet), at 1, 2, 4 and 8 GPUs, with the outputs left where they are, gathered to
# every rank (all_gather: each rank trains on the whole batch) or to rank 0 (gather: one consumer).

def _multi(base: Point, scaling: str, k: int, gather: str, total: int, why: str, devices: tuple[str, ...]) -> Point:
    per_rank = total // k
    if per_rank * k != total:
        raise ValueError(f"{base.op} {base.tag}: total batch {total} does not split over {k} ranks")
    where = "GPU" if devices == ("gpu",) else "process"
    gather_why = {"none": "outputs stay on each rank",
                  "all": "outputs all_gathered to every rank",
                  "one": "outputs gathered to rank 0"}[gather]
    if scaling == "weak":
        reason = f"weak scaling: {why}, {per_rank} per {where} on {k} {where}(s); {gather_why}"
    else:
        reason = f"strong scaling: {why}, {total} in all split over {k} {where}(s) ({per_rank} each); {gather_why}"
    params = {**base.params, "world_size": k, "scaling": scaling, "gather": gather, "B_rank": per_rank,
              "B_total": total}
    return Point(base.op, f"{base.tag}-{scaling}-g{k}-{GATHER_TAG[gather]}", params, reason, ("multigpu",),
                 ("float32",), devices)


def _multigpu_points(make, weak_b: int, strong_b: int, why: str, counts: tuple[int, ...],
                     gathers: tuple[str, ...], devices: tuple[str, ...]) -> list[Point]:
    out = []
    for scaling, b in (("weak", weak_b), ("strong", strong_b)):
        base = make(b)
        for k in counts:
            for g in gathers:
                total = b * k if scaling == "weak" else b
                out.append(_multi(base, scaling, k, g, total, why, devices))
    return out


_GPU, _CPU = ("gpu",), ("cpu",)
MULTIGPU_POINTS: tuple[Point, ...] = (
    # GPUs: 60 cases, one provider (robocache), float32
    *_multigpu_points(lambda b: _resample(b, 100, 50, 32, ""), 4096, 32768,
                      "trajectories at the classic shape (100 -> 50 frames, D=32)", MULTIGPU_COUNTS, GATHER_MODES,
                      _GPU),
    *_multigpu_points(lambda b: _resample(b, 100, 50, 32, ""), 4096, 32768,
                      "two 8-GPU machines (torchrun over two nodes), classic shape", (16,), ("none", "all"), _GPU),
    # fuse at the quick suite's batch per GPU (its float64 reference on the host costs ~2 s per 1000 windows,
    # and every rank gates its shard first)
    *_multigpu_points(lambda b: _fuse("robot", b, 100, ROBOT, ""), 256, 2048, "robot-mix windows (vision, "
                      "proprio, force onto 50 Hz)", MULTIGPU_COUNTS, ("none", "all"), _GPU),
    *_multigpu_points(lambda b: _vox(b, 100_000, 64, "count", "uniform", ""), 4, 32,
                      "LiDAR sweeps of 100k points into 64^3 counts", MULTIGPU_COUNTS, ("none", "all"), _GPU),
    # CPU: the same axes at tiny shapes, 1 and 2 Gloo processes, so CI runs the whole multi-rank path
    *_multigpu_points(lambda b: _resample(b, 100, 50, 32, ""), 64, 128,
                      "CPU rehearsal (Gloo), classic shape", MULTIGPU_CPU_COUNTS, GATHER_MODES, _CPU),
    *_multigpu_points(lambda b: _fuse("robot", b, 100, ROBOT, ""), 8, 16, "CPU rehearsal (Gloo), robot mix",
                      MULTIGPU_CPU_COUNTS, ("none", "all"), _CPU),
    *_multigpu_points(lambda b: _vox(b, 10_000, 32, "count", "uniform", ""), 1, 2,
                      "CPU rehearsal (Gloo), tiny clouds", MULTIGPU_CPU_COUNTS, ("none", "all"), _CPU),
)
POINTS = POINTS + MULTIGPU_POINTS


def _providers_for(point: Point, dtype: str, device: str) -> tuple[str, ...]:
    if device not in point.devices:
        return ()
    if "multigpu" in point.suites:
        return MULTIGPU_GPU_PROVIDERS if device == "gpu" else MULTIGPU_CPU_PROVIDERS
    if point.params.get("kind") == "dispatch":
        return DISPATCH_PROVIDERS
    if device == "gpu":
        return GPU_PROVIDERS
    if dtype not in CPU_DTYPES or case_bytes(point.op, point.params, dtype) > CPU_MAX_BYTES:
        return ()
    return CPU_PROVIDERS


def cases(suite: str = "nightly", *, device: str = "gpu", ops: Iterable[str] | None = None,
          providers: Iterable[str] | None = None, dtypes: Iterable[str] | None = None) -> list[Case]:
    """The cases of ``suite`` for a ``device`` ("gpu" or "cpu"), optionally filtered."""
    if suite not in SUITES:
        raise ValueError(f"unknown suite {suite!r}; expected one of {', '.join(SUITES)}")
    if device not in ("gpu", "cpu"):
        raise ValueError(f"device must be 'gpu' or 'cpu', got {device!r}")
    ops_f = _filter("ops", ops, OPS)
    known = tuple(dict.fromkeys(GPU_PROVIDERS + ("numpy",) + DISPATCH_PROVIDERS))
    prov_f = _filter("providers", providers, known, allow_import_path=True)
    dt_f = _filter("dtypes", dtypes, GPU_DTYPES)
    out: list[Case] = []
    for pt in POINTS:
        if suite not in pt.suites or (ops_f and pt.op not in ops_f):
            continue
        for dt in pt.dtypes:
            if dt_f and dt not in dt_f:
                continue
            provs = _providers_for(pt, dt, device)
            if prov_f:  # explicit providers (incl. test-only "module:attr" ones) replace the defaults
                provs = tuple(p for p in prov_f if p in provs or ":" in p)
            for pr in provs:
                out.append(Case(pt.op, pt.tag, pt.params, dt, pr, pt.reason, pt.suites))
    return out


def _filter(what: str, given: Iterable[str] | None, valid: tuple[str, ...],
            allow_import_path: bool = False) -> tuple[str, ...]:
    if given is None:
        return ()
    items = tuple(x.strip() for x in given if x.strip())
    bad = [x for x in items if x not in valid and not (allow_import_path and ":" in x)]
    if bad:
        raise ValueError(f"unknown {what}: {', '.join(bad)}; expected some of {', '.join(valid)}")
    return items


def devices_of(case: Case) -> tuple[str, ...]:
    """Where ``case``'s grid point exists ("gpu", "cpu"); the multi-GPU points exist on one of them."""
    for pt in POINTS:
        if pt.op == case.op and pt.tag == case.tag:
            return pt.devices
    raise KeyError(f"no case {case.key!r} in grid version {GRID_VERSION}")


def find(key: str, *, device: str = "gpu") -> Case:
    """The case with ``key`` (``<op>/<tag>/<dtype>/<provider>``) in the full grid."""
    op, tag, dtype, provider = key.split("/", 3)
    for pt in POINTS:
        if pt.op == op and pt.tag == tag:
            return Case(op, tag, pt.params, dtype, provider, pt.reason, pt.suites)
    raise KeyError(f"no case {key!r} in grid version {GRID_VERSION}")


# --- inputs -----------------------------------------------------------------------------------------

def host_inputs(case: Case, seed: int = 0) -> dict[str, Any]:
    """Random float64 inputs on the host (never zeros), seeded by the case id and ``seed``.

    Not by provider or dtype: every peer of a case is timed on the same data (rounded to its dtype).
    """
    rng = np.random.default_rng([seed, *case.id.encode()])
    p = case.params
    if case.op == "resample":
        b, s, t, d = p["B"], p["S"], p["T"], p["D"]
        dur = 2.0
        # jittered sensor timestamps: uniform frames plus up to 30% of a period of jitter, sorted
        src = np.sort(np.linspace(0, dur, s)[None, :] + rng.uniform(-0.3, 0.3, (b, s)) * dur / s, axis=1)
        tgt = np.broadcast_to(np.linspace(0, dur, t), (b, t)).copy()
        return {"values": rng.standard_normal((b, s, d)), "src_times": src, "tgt_times": tgt}
    if case.op == "fuse":
        b, t = p["B"], p["T"]
        dur = 2.0
        streams = []
        for s, d in p["streams"]:
            ts = np.sort(np.linspace(0, dur, s)[None, :] + rng.uniform(-0.3, 0.3, (b, s)) * dur / s, axis=1)
            streams.append((rng.standard_normal((b, s, d)), ts))
        return {"streams": streams, "tgt_times": np.broadcast_to(np.linspace(0, dur, t), (b, t)).copy()}
    b, n, c = p["B"], p["N"], p["C"]
    if p["cloud"] == "clustered":
        centers = rng.uniform(-1.6, 1.6, (b, 16, 3))
        pts = centers[:, rng.integers(0, 16, n)] + 0.08 * rng.standard_normal((b, n, 3))
    else:
        pts = rng.uniform(-2.1, 2.1, (b, n, 3))  # ~14% of points fall outside the bounds
    feats = rng.standard_normal((b, n, c)) if p["mode"] == "mean" else None
    return {"points": pts, "features": feats}


def call_args(case: Case, inputs: dict[str, Any], convert) -> tuple[tuple, dict]:
    """Positional/keyword arguments for a provider's op, with arrays passed through ``convert(arr, role)``.

    ``role`` is "values" (gets the case dtype) or "times" (gets the time dtype).
    """
    p = case.params
    if case.op == "resample":
        return ((convert(inputs["values"], "values"), convert(inputs["src_times"], "times"),
                 convert(inputs["tgt_times"], "times")), {})
    if case.op == "fuse":
        streams = [(convert(v, "values"), convert(t, "times")) for v, t in inputs["streams"]]
        return (streams, convert(inputs["tgt_times"], "times")), {}
    feats = convert(inputs["features"], "values") if inputs["features"] is not None else None
    return (convert(inputs["points"], "values"), feats, tuple(p["grid"]), BOUNDS, p["mode"]), {}


def reference_output(case: Case, rounded_inputs: dict[str, Any]) -> np.ndarray:
    """The float64 NumPy reference on the inputs as the provider saw them (rounded to its dtype)."""
    from .. import reference

    p = case.params
    if case.op == "resample":
        return reference.resample(rounded_inputs["values"], rounded_inputs["src_times"], rounded_inputs["tgt_times"])
    if case.op == "fuse":
        return reference.fuse(rounded_inputs["streams"], rounded_inputs["tgt_times"])
    return reference.voxelize(rounded_inputs["points"], rounded_inputs["features"], tuple(p["grid"]), BOUNDS,
                              p["mode"])
