"""The one grid: every benchmark case of every op, with named suites and a reason per point.

asv, pytest-benchmark, the CLI and the nightly job all enumerate cases from here;
nothing else may hold a case list. A :class:`Case` is one (op, shape, dtype,
provider) point; it knows the bytes the op must move (each input read once, each
output written once: the memory-bound floor) and the items it produces, and it
builds its own random, seeded inputs for the provider's array kind.

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

GRID_VERSION = 1  # unchanged by adding/removing points or dtypes; bump when an existing case id's meaning changes
OPS = ("resample", "fuse", "voxelize")
GPU_DTYPES = ("float32", "float16", "bfloat16")
CPU_DTYPES = ("float32",)  # NumPy has no bfloat16 and its float16 math is emulated: not a peer a user picks
GPU_PROVIDERS = ("robocache", "torch_eager", "torch_compile", "cupy")
CPU_PROVIDERS = ("numpy", "torch_eager", "torch_compile")
SUITES = ("quick", "nightly", "multigpu")
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
        """Bytes the op must move; for a multi-GPU case, summed over the ranks' shards."""
        return case_bytes(self.op, self._total_params(), self.dtype)

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

    def to_record_case(self) -> dict[str, Any]:
        """The schema's ``Case`` dict."""
        return {"id": self.id, "op": self.op, "provider": self.provider, "dtype": self.dtype,
                "params": dict(self.params), "grid_version": GRID_VERSION, "bytes": self.bytes,
                "items": self.items, "items_unit": self.items_unit, "reason": self.reason}


def case_bytes(op: str, p: dict[str, Any], dtype: str) -> int:
    """Bytes the op must move through device memory at the least (inputs once, outputs once)."""
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
    prov_f = _filter("providers", providers, GPU_PROVIDERS + ("numpy",), allow_import_path=True)
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
