"""The op interface and the grid vocabulary every op module shares.

An :class:`Op` holds everything the harness knows about one op: its grid points (each with a written
reason), its seeded inputs, the call, the NumPy reference, the byte and item model, the output dtype and
the bare launch's argument list. The rest of the harness (``specs``, ``worker``, ``timing``, ``report``)
asks the op object and never branches on an op's name. Nothing here imports the rest of the harness.
"""
from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

GPU_DTYPES = ("float32", "float16", "bfloat16")
SWEEP_DTYPES = ("float32", "bfloat16")  # scaling sweeps: fp32 and the 16-bit type robot learning uses
ITEM_SIZE = {"float32": 4, "float16": 2, "bfloat16": 2, "float64": 8}
BOUNDS = ((-2.0, -2.0, -2.0), (2.0, 2.0, 2.0))
Q, N = ("quick", "nightly"), ("nightly",)  # the suites of a quick point and of a nightly-only one
SAMPLED = ("sampled", "nightly")  # the suites of a sampled point (of whichever seed a run draws)
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


# --- the sampled suite ------------------------------------------------------------------------------------
# Shapes drawn from a documented, seeded distribution over what users pass (issue 25), not one axis at a time
# around a tuned point. Each op draws its candidates (:meth:`Op.sample`); a candidate over a cap is rejected
# and drawn again, so the suite's distribution is the op's one conditioned on the caps (docs/harness.md, "The
# sampled suite"). One dtype per shape: the suite has to fit a GPU pass, and every peer of a shape is timed on
# the same inputs in that dtype.

SAMPLES_PER_OP = 48
# Of them, the last SAMPLE_LARGE are the same distribution conditioned on an estimated minimal traffic of at
# least LARGE_BYTES: log-uniform draws put the median near 3-15 MB and only 0-1 point in 48 at 256 MB or more,
# where the bandwidth claims (% of the copy ceiling, H200 over H100) are judged.
SAMPLE_LARGE = 8
LARGE_BYTES = 256 * 10**6
# Caps, per case, so a case fits one GPU beside its peers' temporaries (torch eager holds ~4-5x its output in
# float32) and its host work (inputs, the float64 reference, the check: every case is gated before timing, in
# each provider's own process) stays within a few seconds: the params-only traffic bound, the elements the host
# builds and checks, and the modelled host time of :func:`host_seconds`.
SAMPLE_MAX_BYTES = 2 * 2**30
SAMPLE_MAX_ELEMENTS = 2**28
SAMPLE_MAX_HOST_S = 4.0
_SAMPLE_TRIES = 2000  # draws per accepted point at most (a large draw is ~1 in 100; a bug rejects every draw)


@dataclass(frozen=True)
class Draw:
    """One accepted draw of an op's sampled distribution: its shape tag (the case tag without the seed and
    index), its params (every drawn parameter), its one dtype, a readable reason and its estimated minimal
    traffic in bytes (what a large draw is selected by; the record carries the exact one)."""

    shape: str
    params: dict[str, Any]
    dtype: str
    reason: str
    moved: int


def log_uniform_int(u: float, lo: int, hi: int) -> int:
    """An integer in ``[lo, hi]`` whose logarithm is uniform, from one uniform ``u`` in [0, 1):
    ``floor(exp(ln lo + u * (ln(hi + 1) - ln lo)))``."""
    return int(min(hi, max(lo, math.floor(math.exp(math.log(lo) + u * (math.log(hi + 1) - math.log(lo)))))))


def log_uniform(u: float, lo: float, hi: float) -> float:
    """A float in ``[lo, hi]`` whose logarithm is uniform, from one uniform ``u`` in [0, 1)."""
    return math.exp(math.log(lo) + u * (math.log(hi) - math.log(lo)))


def pick(u: float, options: tuple[Any, ...]) -> Any:
    """One of ``options`` alike, from one uniform ``u`` in [0, 1)."""
    return options[min(int(u * len(options)), len(options) - 1)]


def sample_tag(seed: int, index: int, shape: str) -> str:
    """The tag of the ``index``-th sampled point of ``seed``: ``s<seed>-<index>-<shape>``; the seed is part of
    every case id, so series of two seeds never mix."""
    return f"s{seed}-{index:02d}-{shape}"


def host_seconds(*, rows: int = 0, generated: int = 0, reference: int = 0, searched: int = 0, points: int = 0,
                 cells: int = 0, scattered: int = 0) -> float:
    """The modelled host time of one case process beyond its fixed ~0.4 s (start, CUDA context, timing): its
    inputs, bytes model, reference and check, in seconds on the H200 host.

    ``rows``: Python-level iterations of the reference (one per batch row and stream); ``generated``: random
    input elements; ``reference``: float64 output elements interpolated and compared; ``searched``: source and
    target times the bytes model brackets (:func:`rows_needed`, one complex ``searchsorted``: it dominates where
    D is small); ``points``: points the voxel reference indexes; ``cells``: dense voxel-grid elements it fills
    and compares; ``scattered``: feature elements ``np.add.at`` accumulates (voxelize mean). The resample terms
    are fitted on the H200 host's nightly records (issue 25: duration ~ 0.42 s + 12 us a row + 14 ns a generated
    element + 90 ns a reference element, where D = 32 hides the search); the search and the voxel terms are the
    CI machine's (2 cores, shared: 100 ns a searched time at B = 58339, S = 1498) divided by 2.5, except the
    dense grids' 30 ns a cell (zeroed, filled, divided, cast and compared in float64: five or more passes).
    """
    return (12e-6 * rows + 14e-9 * generated + 90e-9 * reference + 40e-9 * searched + 80e-9 * points
            + 30e-9 * cells + 40e-9 * scattered)


def within_caps(bytes_bound: int, elements: int, seconds: float) -> bool:
    """A draw under every cap: params-only traffic, host elements, modelled host seconds."""
    return bytes_bound <= SAMPLE_MAX_BYTES and elements <= SAMPLE_MAX_ELEMENTS and seconds <= SAMPLE_MAX_HOST_S


def sample_points(op: Op, seed: int, suites: tuple[str, ...], n: int = SAMPLES_PER_OP,
                  large: int = SAMPLE_LARGE) -> tuple[Point, ...]:
    """The ``n`` sampled points of ``op`` for ``seed``: each candidate is ``op.sample`` of one row of
    ``op.sample_width`` uniforms from one generator seeded by the seed and the op's name (each op its own
    stream; drawn 512 rows at a time, so a case process rebuilds its op's points in milliseconds), rejected
    candidates (``None``) skipped; the last ``large`` only from candidates whose estimated minimal traffic is
    at least :data:`LARGE_BYTES`."""
    rng = np.random.default_rng([seed, *op.name.encode()])
    out: list[Point] = []
    rows: list[list[float]] = []
    tries = 0
    while len(out) < n:
        tries += 1
        if tries > _SAMPLE_TRIES * n:
            raise RuntimeError(f"{op.name}: {len(out)} of {n} sampled points after {tries - 1} draws; the caps "
                               "reject almost every draw")
        if not rows:
            rows = rng.random((512, op.sample_width)).tolist()[::-1]
        big = len(out) >= n - large
        d = op.sample(rows.pop(), LARGE_BYTES if big else 0)
        if d is None:
            continue
        i = len(out)
        params = {**d.params, "kind": "sampled", "stratum": "large" if big else "base", "sample_seed": seed,
                  "sample_index": i}
        why = f"sampled (seed {seed}, #{i}{', large' if big else ''}): {d.reason}"
        out.append(Point(op.name, sample_tag(seed, i, d.shape), params, why, suites, (d.dtype,), ("gpu", "cpu")))
    return tuple(out)


def sensor_times(rng: np.random.Generator, b: int, s: int, t0: float, dur: float) -> np.ndarray:
    """``s`` frames per row over ``[t0, t0 + dur]`` with up to 30% of a period of jitter, float64 ``[b, s]``.

    Sorted by construction, so nothing is sorted: neighbours are a period apart and move at most 0.3 of one
    each way, which leaves at least 0.4 of a period between them (:func:`jittered_times`, built for the grid's
    points, sorts; at S = 200000 a sort of every row costs seconds)."""
    step = dur / max(s - 1, 1)
    out = rng.uniform(-0.3 * step, 0.3 * step, (b, s))
    out += np.arange(s, dtype=np.float64) * step
    out += t0
    return out


def even_times(b: int, t: int, t0: float, dur: float) -> np.ndarray:
    """``t`` evenly spaced target times over ``[t0, t0 + dur]``, the same for every row, float64 ``[b, t]``."""
    return np.broadcast_to(t0 + np.linspace(0.0, dur, t), (b, t)).copy()


def normal_values(rng: np.random.Generator, shape: tuple[int, ...]) -> np.ndarray:
    """Standard normal float32 values (never all zeros): half the memory and time of float64, and every
    case dtype is float32 or narrower."""
    return rng.standard_normal(shape, dtype=np.float32)


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
    # whether robocache's launch configuration of this op is tuned per shape (robocache/_tune.py: resample and fuse
    # v3): `robocache-bench tune` tunes it and the compile pre-pass builds its candidate modules
    tuned_launch: bool = False
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

    # uniforms one draw of :meth:`sample` consumes (every draw the same number, used or not)
    sample_width: int = 0

    def sample(self, u: list[float], min_moved: int = 0) -> Draw | None:
        """One draw of the sampled suite's distribution (:func:`sample_points`) from ``sample_width`` uniforms
        in [0, 1), or None when it is over a cap or its estimated minimal traffic is below ``min_moved`` (the
        next is drawn). An op without one has no sampled points."""
        return None

    def sample_cost(self, p: dict[str, Any]) -> tuple[int, float]:
        """(elements the host builds and checks, modelled :func:`host_seconds`) of a sampled case's process."""
        raise NotImplementedError(f"op {self.name!r} has no sampled distribution")

    def sampled_points(self, seed: int, suites: tuple[str, ...] = SAMPLED) -> tuple[Point, ...]:
        """The sampled points of ``seed`` (:func:`sample_points`); none for an op without :meth:`sample`."""
        if type(self).sample is Op.sample:
            return ()
        return sample_points(self, seed, suites)

    # the model of a case
    def items(self, p: dict[str, Any]) -> int:
        """Items the op produces per call."""
        return int(p["B"])

    def features(self, p: dict[str, Any]) -> int | None:
        """The feature width of a case (what the sampled suite's speedups are plotted against), or None."""
        return None

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
