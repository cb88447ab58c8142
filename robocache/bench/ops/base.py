"""The op interface and the grid vocabulary every op module shares.

An :class:`Op` holds everything the harness knows about one op: its grid points (each with a written
reason), its seeded inputs, the call, the NumPy reference, the byte and item model, the output dtype and
the bare launch's argument list. The rest of the harness (``specs``, ``worker``, ``timing``, ``report``)
asks the op object and never branches on an op's name. Nothing here imports the rest of the harness.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

GPU_DTYPES = ("float32", "float16", "bfloat16")
SWEEP_DTYPES = ("float32", "bfloat16")  # scaling sweeps: fp32 and the 16-bit type robot learning uses
ITEM_SIZE = {"float32": 4, "float16": 2, "bfloat16": 2, "float64": 8}
BOUNDS = ((-2.0, -2.0, -2.0), (2.0, 2.0, 2.0))
Q, N = ("quick", "nightly"), ("nightly",)  # the suites of a quick point and of a nightly-only one
GATHER_MODES = ("none", "all", "one")
GATHER_TAG = {"none": "nogather", "all": "allgather", "one": "gather"}
MULTIGPU_COUNTS = (1, 2, 4, 8)  # GPUs of one machine; 16 = two 8-GPU machines (resample only)
MULTIGPU_CPU_COUNTS = (1, 2)  # Gloo processes on the CPU (CI)
GPU, CPU = ("gpu",), ("cpu",)


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


# --- call cost (dispatch) points ----------------------------------------------------------------------
# One tiny call per op through the public API in a tight loop: the host's cost per call, which is what a
# training loop pays when the batch is small. Shapes as small as the op allows, so the GPU keeps up.

_DISPATCH_WHY = ("call cost: host time per call of a tiny {what} through the public API in a tight loop, "
                 "against a bare CuPy RawKernel launch (the floor; issue 12: public call <= 2x bare)")


def dispatch_point(op: str, tag: str, params: dict[str, Any], what: str) -> Point:
    """The call-cost point of ``op``: GPU only, float32, quick and nightly."""
    return Point(op, tag, {**params, "kind": "dispatch"}, _DISPATCH_WHY.format(what=what), Q, ("float32",), GPU)


# --- multi-GPU points ---------------------------------------------------------------------------------
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


def multigpu_points(make: Callable[[int], Point], weak_b: int, strong_b: int, why: str, counts: tuple[int, ...],
                    gathers: tuple[str, ...], devices: tuple[str, ...]) -> list[Point]:
    """Weak and strong scaling of the point ``make(B)`` over ``counts`` ranks and ``gathers`` modes."""
    out = []
    for scaling, b in (("weak", weak_b), ("strong", strong_b)):
        base = make(b)
        for k in counts:
            for g in gathers:
                total = b * k if scaling == "weak" else b
                out.append(_multi(base, scaling, k, g, total, why, devices))
    return out


# --- shared input and byte helpers ---------------------------------------------------------------------

def jittered_times(rng: np.random.Generator, b: int, s: int, dur: float = 2.0) -> np.ndarray:
    """Sensor timestamps: ``s`` uniform frames over ``dur`` s plus up to 30% of a period of jitter, sorted."""
    return np.sort(np.linspace(0, dur, s)[None, :] + rng.uniform(-0.3, 0.3, (b, s)) * dur / s, axis=1)


def uniform_times(b: int, t: int, dur: float = 2.0) -> np.ndarray:
    """``t`` evenly spaced target times over ``dur`` s, the same for every batch row."""
    return np.broadcast_to(np.linspace(0, dur, t), (b, t)).copy()


def round_times(times: np.ndarray, time_dtype: str) -> np.ndarray:
    """The times as the provider sees them (rounded to the time dtype), in float64: rounding can turn a
    near-hit into an exact hit."""
    return np.asarray(times).astype(time_dtype).astype(np.float64)


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


# --- the interface ---------------------------------------------------------------------------------------

class Op:
    """Everything the harness knows about one op. Subclass it in one module and :func:`register` an instance.

    ``case`` arguments are :class:`robocache.bench.specs.Case` objects (``op``, ``tag``, ``params``,
    ``dtype``, ``provider``, ``id``); ``p`` is a case's params (for a multi-GPU case: over the whole group).
    """

    name: str = ""
    items_unit: str = "trajectories"  # what :meth:`items` counts
    # The bare launch's argument list (:class:`robocache.bench.timing.BareLaunch`): "ptr" a device pointer,
    # "out" the one-element int32 output, "i32"/"i64" integers, "f32" floats. Empty: no call-cost case.
    launch_floor_args: tuple[str, ...] = ()
    # The (case id, dtype)s the optimisation journey is read on, in order of preference.
    representative: tuple[tuple[str, str], ...] = ()
    # The report's scaling tables: (title, axis, fixed params (a value or a function of the params)).
    scaling_views: tuple[tuple[str, str, dict[str, Any]], ...] = ()
    # The report's headline: (title, case id), or None (the first op that has one gives the headline).
    headline: tuple[str, str] | None = None

    # grid
    def points(self) -> tuple[Point, ...]:
        """The single-process grid points (quick and nightly suites), in grid order."""
        return ()

    def dispatch_points(self) -> tuple[Point, ...]:
        """The call-cost points (see :func:`dispatch_point`)."""
        return ()

    def multigpu_points(self) -> tuple[Point, ...]:
        """The multi-GPU points on GPUs (see :func:`multigpu_points`)."""
        return ()

    def multigpu_cpu_points(self) -> tuple[Point, ...]:
        """The multi-rank points of the CPU rehearsal (Gloo processes)."""
        return ()

    # the model of a case
    def items(self, p: dict[str, Any]) -> int:
        """Items the op produces per call."""
        return int(p["B"])

    def case_bytes(self, p: dict[str, Any], dtype: str) -> int:
        """An upper bound of the bytes the op must move, from the params alone."""
        raise NotImplementedError

    def moved_bytes(self, case: Any, inputs: dict[str, Any]) -> int:
        """The minimum traffic of ``case`` on these host inputs; never more than :meth:`case_bytes`."""
        return self.case_bytes(case.params, case.dtype)

    def expected_dtype(self, case: Any) -> str:
        """The dtype the op's output must have."""
        return case.dtype

    # inputs, call, reference
    def host_inputs(self, case: Any, rng: np.random.Generator) -> dict[str, Any]:
        """Random float64 inputs on the host (never zeros), drawn from ``rng``."""
        raise NotImplementedError

    def call_args(self, case: Any, inputs: dict[str, Any], convert: Callable[[Any, str], Any]) -> tuple[tuple, dict]:
        """Positional/keyword arguments of the provider's op; arrays through ``convert(arr, role)``."""
        raise NotImplementedError

    def rounded(self, case: Any, args: tuple, to_host: Callable[[Any], np.ndarray]) -> dict[str, Any]:
        """The inputs as the provider sees them (its call's ``args``), back on the host via ``to_host``."""
        raise NotImplementedError

    def reference(self, case: Any, rounded: dict[str, Any]) -> np.ndarray:
        """The float64 NumPy reference on :meth:`rounded` inputs."""
        raise NotImplementedError

    def bare_args(self, case: Any, args: tuple) -> tuple[list[int], list[int], list[float], list[Any]]:
        """(pointers, integers, floats, arrays to keep alive) of the bare launch, from the case's CuPy
        arrays, in the order of :attr:`launch_floor_args`."""
        raise NotImplementedError(f"op {self.name!r} has no bare launch")
