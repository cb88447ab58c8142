"""The one grid: every benchmark case of every op, with named suites and a reason per point.

asv, pytest-benchmark, the CLI and the nightly job all enumerate cases from here;
nothing else may hold a case list. A :class:`Case` is one (op, shape, dtype,
provider) point; it knows the bytes the op must move (each input read once, each
output written once: the memory-bound floor) and the items it produces, and it
builds its own random, seeded inputs for the provider's array kind.

``GRID_VERSION`` goes up whenever the meaning of an existing case id changes
(inputs, bytes, semantics), so the history never compares across such a change.
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
SUITES = ("quick", "nightly")
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
    def bytes(self) -> int:
        return case_bytes(self.op, self.params, self.dtype)

    @property
    def items(self) -> int:
        p = self.params
        return p["B"] * p["N"] if self.op == "voxelize" else p["B"]

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


def _providers_for(point: Point, dtype: str, device: str) -> tuple[str, ...]:
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
