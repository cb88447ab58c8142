"""The one grid: every benchmark case of every op, with named suites and a reason per point.

asv, pytest-benchmark, the CLI and the nightly job all enumerate cases from here;
nothing else may hold a case list. A :class:`Case` is one (op, shape, dtype,
provider) point; it knows an upper bound of the bytes the op must move from its
parameters alone (:attr:`Case.bytes`), the items it produces, and it builds its
own random, seeded inputs for the provider's array kind. The figure a record
carries is :func:`moved_bytes`: the minimum traffic of the very inputs measured
(the source rows the targets actually use), so a % of the copy ceiling can never
pass 100%.

What is particular to one op (its points and their reasons, inputs, call, reference, byte and item
model) lives in its module under :mod:`robocache.bench.ops`; this module assembles the grid from the
registered ops and delegates to them.

The ``dispatch`` points (one per op, tag ``dispatch-...``, ``params["kind"] == "dispatch"``) measure the
host cost of one tiny call through the public API in a tight loop (timer ``host_loop``), for robocache on
PyTorch tensors, robocache on CuPy arrays (provider ``robocache@cupy``) and a bare CuPy RawKernel launch
(``bare_launch``: the launch floor the public call is judged against).

``GRID_VERSION`` goes up whenever the meaning of an existing case id changes
(inputs, bytes, semantics), so the history never compares across such a change.

The ``sampled`` suite (issue 25) holds, per op, :data:`ops.base.SAMPLES_PER_OP` shapes drawn from a documented
distribution over what users pass (:meth:`Op.sample <robocache.bench.ops.base.Op.sample>`, capped by memory and
host time), one dtype each, measured with the public API and its peers (the provider table's grid
``sampled-gpu``). The default draw's seed is :data:`SAMPLE_SEED` (tied to ``GRID_VERSION``): its points are
in the nightly grid too and change only with the grid. ``sample_seed=N`` (``--sample-seed N``, or
``$ROBOCACHE_SAMPLE_SEED`` for the front ends) draws a fresh set in their place; the seed is in every sampled tag
(``s<seed>-<index>-<shape>``) and params, so :func:`find` rebuilds any seed's point from its key and two seeds'
series never mix.

The ``multigpu`` suite holds the cases that span several ranks (one GPU each; Gloo processes on the CPU):
GPU count, scaling mode (weak: fixed batch per GPU; strong: fixed total batch) and gather mode (none, all:
``all_gather`` to every rank, one: ``gather`` to rank 0) are axes of the grid and part of the case's tag
(``B4096-S100-T50-D32-weak-g4-allgather``); :attr:`Case.world_size` says how many ranks a case needs.
They run through ``torchrun`` (:mod:`robocache.bench.multigpu.launch`), never through the single-process runner.
"""
from __future__ import annotations

import functools
import os
import re

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .. import providers as provider_table  # ``cases`` has a parameter called ``providers``
from . import ops
from . import ops as ops_mod  # ``cases`` has a parameter called ``ops``
# The grid vocabulary the op modules share, re-exported: other modules and tests read them here.
from .schema import PIPELINE_KINDS, PIPELINES_SUITE
from .ops.base import (BOUNDS, GATHER_MODES, GATHER_TAG, GPU_DTYPES, ITEM_SIZE, MULTIGPU_COUNTS,  # noqa: F401
                       MULTIGPU_CPU_COUNTS, SAMPLED, SAMPLES_PER_OP, SWEEP_DTYPES, N, Point, Q,
                       rows_needed)

# Unchanged by adding/removing points or dtypes; bumped when an existing case id's meaning changes.
# 2: a record's bytes are the inputs' minimum traffic (moved_bytes), no longer the params-only bound.
GRID_VERSION = 2
# The sampled suite's default seed: the grid version's, so the default set is the same in every run and changes
# only with the grid (a new GRID_VERSION draws a new set: the sampled tags carry the seed, s<seed>-...).
SAMPLE_SEED = GRID_VERSION
SAMPLE_SEED_ENV = "ROBOCACHE_SAMPLE_SEED"  # the front ends' (asv, pytest-benchmark) way to pick a fresh seed
CPU_DTYPES = ("float32",)  # NumPy has no bfloat16 and its float16 math is emulated: not a peer a user picks
# Which providers each grid measures is the provider table's fact (robocache.providers, Provider.grids), in its
# order. GPU: the public API (the best kernel version), every kernel version (robocache@v1, robocache@v2, ...: the
# optimisation journey, measured side by side in one run), torch.compile in its default mode and in
# max-autotune-no-cudagraphs (the faster one is the peer to beat), PyTorch eager, CuPy. CPU: NumPy and PyTorch.
GPU_PROVIDERS = tuple(provider_table.names("gpu"))
CPU_PROVIDERS = tuple(provider_table.names("cpu"))
SUITES = ("quick", "nightly", "sampled", "multigpu")
# The quick suite's GPU peers: the public API, torch.compile in its default mode, PyTorch eager and CuPy (no
# kernel versions, no max-autotune: both are the nightly's). torch.compile compiles once per quick shape: on
# the shape's float32 only (its timing process costs 5-8 s a case, ten times robocache's; issue 25).
QUICK_GPU_PROVIDERS = tuple(provider_table.names("quick-gpu"))
QUICK_COMPILE_DTYPES = ("float32",)
# The sampled suite's GPU providers: the public API and its peers (never the kernel versions).
SAMPLED_PROVIDERS = tuple(provider_table.names("sampled-gpu"))
# Dispatch (call-cost) points: the public call on torch CUDA tensors, the same on CuPy arrays, and the
# bare CuPy RawKernel launch of a kernel with the same arguments (the floor). GPU only.
DISPATCH_PROVIDERS = tuple(provider_table.names("dispatch"))
# Multi-GPU cases: one provider on the GPU (the library under test; its peers' scaling is the same
# collective), the NumPy and torch-eager CPU providers for the Gloo rehearsal on the CPU.
MULTIGPU_GPU_PROVIDERS = tuple(provider_table.names("multigpu-gpu"))
MULTIGPU_CPU_PROVIDERS = tuple(provider_table.names("multigpu-cpu"))
_MULTI_KEYS = ("world_size", "scaling", "gather", "B_rank", "B_total")  # params only multi-GPU cases have
# CPU providers only run where one call costs well under a second, so a nightly pass stays bounded.
CPU_MAX_BYTES = 64 * 2**20


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
        return ops.get(self.op).items(self._total_params())

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
        """What :attr:`items` counts (the op's unit: trajectories, points, ...)."""
        return ops.get(self.op).items_unit

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
    try:
        model = ops.get(op)
    except KeyError as e:
        raise ValueError(f"unknown op {op!r}") from e
    return model.case_bytes(p, dtype)


def moved_bytes(case: Case, inputs: dict[str, Any]) -> int:
    """The minimum traffic of ``case`` on these host inputs (:func:`host_inputs`), in bytes: the op's model
    (resample and fuse: the source rows the targets use, see :func:`rows_needed`; voxelize: the params
    model). Times are rounded to the case's time dtype first, as the provider sees them. Never more than
    :attr:`Case.bytes`."""
    try:
        model = ops.get(case.op)
    except KeyError as e:
        raise ValueError(f"unknown op {case.op!r}") from e
    return model.moved_bytes(case, inputs)


# --- the grid ---------------------------------------------------------------------------------------
# Each op declares its points (with their reasons); the grid is, in this order, every op's single-process
# points, every op's call-cost (dispatch) points, every op's multi-GPU points on GPUs, then every op's
# multi-rank points of the CPU rehearsal; ops in registry order (resample, the classic case, first).

def all_points(seed: int | None = None) -> tuple[Point, ...]:
    """Every point of every registered op, in grid order (also :data:`POINTS`): each op's single-process
    points, its call-cost points, its sampled points of ``seed`` (default :data:`SAMPLE_SEED`; never the
    environment's, see :func:`sample_seed`), its multi-GPU points, its multi-rank CPU ones."""
    return _grid_points(SAMPLE_SEED if seed is None else seed, ops.generation)


_KINDS = ("points", "dispatch_points", "sampled", "multigpu_points", "multigpu_cpu_points")


@functools.lru_cache(maxsize=8)
def _grid_points(seed: int, generation: int) -> tuple[Point, ...]:
    fixed = _fixed_points(generation)
    return tuple(pt for kind in _KINDS for op in ops.registered()
                 for pt in (sampled_points(op.name, seed) if kind == "sampled" else fixed[(kind, op.name)]))


@functools.lru_cache(maxsize=2)
def _fixed_points(generation: int) -> dict[tuple[str, str], tuple[Point, ...]]:
    """Each op's declared points per kind (everything but the sampled ones, which are drawn)."""
    return {(kind, op.name): tuple(getattr(op, kind)()) for kind in _KINDS if kind != "sampled"
            for op in ops.registered()}


def sample_seed(given: int | None = None) -> int:
    """The sampled suite's seed: ``given``, else ``$ROBOCACHE_SAMPLE_SEED``, else :data:`SAMPLE_SEED`.
    ``ValueError`` for a seed that is not a non-negative integer."""
    if given is None:
        env = os.environ.get(SAMPLE_SEED_ENV, "").strip()
        if not env:
            return SAMPLE_SEED
        if not env.isdigit():
            raise ValueError(f"{SAMPLE_SEED_ENV}={env!r}: expected a non-negative integer seed")
        given = int(env)
    if isinstance(given, bool) or not isinstance(given, int) or given < 0:
        raise ValueError(f"sample seed must be a non-negative integer, got {given!r}")
    return given


def sampled_points(op: str, seed: int | None = None) -> tuple[Point, ...]:
    """The sampled points of ``op`` for ``seed`` (default :data:`SAMPLE_SEED`), in the sampled and nightly
    suites whatever the seed (a run picks one seed: :func:`cases`)."""
    seed = SAMPLE_SEED if seed is None else sample_seed(seed)
    return _sampled(op, seed, ops.generation)


@functools.lru_cache(maxsize=64)
def _sampled(op: str, seed: int, generation: int) -> tuple[Point, ...]:
    return ops.get(op).sampled_points(seed, SAMPLED)


_SAMPLED_TAG = re.compile(r"^s(\d+)-\d+-")


def _points_of(op: str, tag: str) -> Iterable[Point]:
    """Where ``op/tag`` can be: a sampled tag's own seed's points (any seed), else every point."""
    m = _SAMPLED_TAG.match(tag)
    if m and op in ops.names():
        return sampled_points(op, int(m.group(1)))
    # a case process finds its case here: never draw the sampled points for a declared one
    return (pt for pts in _fixed_points(ops.generation).values() for pt in pts)


def __getattr__(name: str) -> Any:
    # The registry's view at the time of the access, so an op registered later (a test's toy op) is in them.
    if name == "POINTS":
        return all_points()
    if name == "OPS":
        return ops.names()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _providers_for(point: Point, dtype: str, device: str, suite: str) -> tuple[str, ...]:
    """The providers of ``point`` in ``dtype`` on ``device`` in ``suite``: the provider table's grid for the
    kind of point, only those that implement the point's op (a case that could only skip is never listed)."""
    if device not in point.devices:
        return ()
    if "multigpu" in point.suites:
        provs = MULTIGPU_GPU_PROVIDERS if device == "gpu" else MULTIGPU_CPU_PROVIDERS
    elif point.params.get("kind") == "dispatch":
        provs = DISPATCH_PROVIDERS
    elif device == "gpu" and point.params.get("kind") == "sampled":
        provs = SAMPLED_PROVIDERS
    elif device == "gpu" and suite == "quick":
        provs = tuple(p for p in QUICK_GPU_PROVIDERS
                      if provider_table.compile_mode(p) is None or dtype in QUICK_COMPILE_DTYPES)
    elif device == "gpu":
        provs = GPU_PROVIDERS
    elif dtype not in CPU_DTYPES or case_bytes(point.op, point.params, dtype) > CPU_MAX_BYTES:
        return ()
    else:
        provs = CPU_PROVIDERS
    mine = provider_table.names(op=point.op)
    return tuple(p for p in provs if p in mine)


def cases(suite: str = "nightly", *, device: str = "gpu", ops: Iterable[str] | None = None,
          providers: Iterable[str] | None = None, dtypes: Iterable[str] | None = None,
          sample_seed: int | None = None) -> list[Case]:
    """The cases of ``suite`` for a ``device`` ("gpu" or "cpu"), optionally filtered.

    ``sample_seed``: the sampled points' seed (:func:`sample_seed`: else ``$ROBOCACHE_SAMPLE_SEED``, else
    :data:`SAMPLE_SEED`); another seed's points replace the default ones in the suites ``sampled`` and
    ``nightly``.
    """
    if suite not in SUITES:
        raise ValueError(f"unknown suite {suite!r}; expected one of {', '.join(SUITES)}")
    if device not in ("gpu", "cpu"):
        raise ValueError(f"device must be 'gpu' or 'cpu', got {device!r}")
    ops_f = _filter("ops", ops, ops_mod.names())
    known = tuple(provider_table.names())
    prov_f = _filter("providers", providers, known, allow_import_path=True)
    dt_f = _filter("dtypes", dtypes, GPU_DTYPES)
    points = all_points(globals()["sample_seed"](sample_seed))  # the parameter shadows the function
    out: list[Case] = []
    for pt in points:
        if suite not in pt.suites or (ops_f and pt.op not in ops_f):
            continue
        for dt in pt.dtypes:
            if dt_f and dt not in dt_f:
                continue
            provs = _providers_for(pt, dt, device, suite)
            if prov_f:  # explicit providers (incl. test-only "module:attr" ones) replace the defaults
                if device == "gpu" and pt.params.get("kind") == "sampled":
                    # a sampled point takes any GPU provider of its op by name: the kernel versions side by
                    # side out of sample (robocache@v2 against robocache@v3 on a fresh --sample-seed)
                    mine = provider_table.names(op=pt.op)
                    provs = tuple(p for p in GPU_PROVIDERS if p in mine)
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
    for pt in _points_of(case.op, case.tag):
        if pt.op == case.op and pt.tag == case.tag:
            return pt.devices
    raise KeyError(f"no case {case.key!r} in grid version {GRID_VERSION}")


_MODULE_PROVIDER = re.compile(r"^[A-Za-z_][\w.]*:[A-Za-z_]\w*$")  # module:attr (fault injectors, experiments)


def find(key: str) -> Case:
    """The case with ``key`` (``<op>/<tag>/<dtype>/<provider>``) in the full grid.

    ``KeyError`` with one line naming what is wrong: not four non-empty parts, an unknown op, dtype or
    provider (a known name or ``module:attr``), or no such grid point.
    """
    parts = key.split("/", 3)
    if len(parts) != 4 or not all(parts):
        raise KeyError(f"case key {key!r} must be op/tag/dtype/provider, as `robocache-bench list` prints them")
    op, tag, dtype, provider = parts
    if op not in ops.names():
        raise KeyError(f"case key {key!r}: unknown op {op!r}; expected one of {', '.join(ops.names())}")
    if dtype not in GPU_DTYPES:
        raise KeyError(f"case key {key!r}: unknown dtype {dtype!r}; expected one of {', '.join(GPU_DTYPES)}")
    known = dict.fromkeys(provider_table.names())
    if provider not in known and not _MODULE_PROVIDER.match(provider):
        raise KeyError(f"case key {key!r}: unknown provider {provider!r}; expected one of {', '.join(known)} "
                       "(or module:attr)")
    for pt in _points_of(op, tag):
        if pt.op == op and pt.tag == tag:
            return Case(op, tag, pt.params, dtype, provider, pt.reason, pt.suites)
    raise KeyError(f"no case {key!r} in grid version {GRID_VERSION}")


# --- inputs -----------------------------------------------------------------------------------------

def host_inputs(case: Case, seed: int = 0) -> dict[str, Any]:
    """Random float64 inputs on the host (never zeros), seeded by the case id and ``seed``.

    Not by provider or dtype: every peer of a case is timed on the same data (rounded to its dtype).
    """
    rng = np.random.default_rng([seed, *case.id.encode()])
    return ops.get(case.op).host_inputs(case, rng)


def call_args(case: Case, inputs: dict[str, Any], convert) -> tuple[tuple, dict]:
    """Positional/keyword arguments for a provider's op, with arrays passed through ``convert(arr, role)``.

    ``role`` is "values" (gets the case dtype) or "times" (gets the time dtype).
    """
    return ops.get(case.op).call_args(case, inputs, convert)


def reference_output(case: Case, rounded_inputs: dict[str, Any]) -> np.ndarray:
    """The float64 NumPy reference on the inputs as the provider saw them (rounded to its dtype)."""
    return ops.get(case.op).reference(case, rounded_inputs)


# --- the pipelines suite ----------------------------------------------------------------------------
# The end-to-end cases (robocache.bench.pipelines, docs/pipelines.md): data loading, training step, policy
# inference. They are not points of the kernel grid (no op of ``ops``, no dtype sweep: ``cases`` and ``find``
# never return them) but their grid is declared here, with the kernel grid's: :class:`PipelineConfig` (the
# suite's knobs) and :func:`pipeline_points` (its cases for a config and a dataset). The measuring code lives in
# :mod:`robocache.bench.pipelines`, which reads its vocabulary from here.
PIPELINES = PIPELINES_SUITE  # "pipelines": the records' suite
PIPELINE_PARTS = PIPELINE_KINDS  # dataload, train, infer: a record's case "op", and the parts a run picks
PIPELINE_UNITS = dict(zip(PIPELINE_KINDS, ("trajectories", "trajectories", "observations")))  # what items count
PIPELINE_RATE_HZ = 50.0  # the rate every stream is resampled to
PIPELINE_LOADERS = ("cpu_workers", "robocache")  # the DataLoader pipelines (their records sweep the worker count)
PIPELINE_CACHE = "episode_cache"  # robocache.EpisodeCache: no worker, no per-batch copy
PIPELINE_REGIMES = ("resident", "streamed")  # the cache's: the whole dataset on the device, or within a budget
PIPELINE_MODELS = ("mlp", "diffusion")  # the training step's policies
# The inference benchmark's transformer policy (its shape is in every infer case's params).
INFER_OBS_STEPS, INFER_HORIZON, INFER_D_MODEL, INFER_HEADS, INFER_LAYERS = 16, 8, 256, 4, 4
# The inference benchmark's backends, in the report's order: eager, SDPA, then torch.compile in every mode the
# provider table holds (the kernel grid's peer: the same names, labels and colours).
INFER_BACKENDS = ("eager", "sdpa", *(n for n in provider_table.names()
                                     if n.split("@")[0] == provider_table.COMPILE))


def _known(what: str, given: Sequence[str], known: Sequence[str]) -> None:
    """Raise ValueError naming the entries of ``given`` not in ``known`` (a PipelineConfig's parts, models, ...)."""
    bad = [x for x in given if x not in known]
    if bad:
        raise ValueError(f"unknown {what}: {', '.join(bad)}; expected some of {', '.join(known)}")


@dataclass
class PipelineConfig:
    """The pipelines suite's knobs (``python -m robocache.bench.pipelines run --help``); :meth:`validate` says
    what is wrong in one line (``ValueError``)."""

    device: str = "cpu"
    dataset: str | None = None  # an existing dataset file; else one of size_mb is generated
    size_mb: float = 8.0
    min_s: float = 3.0
    max_s: float = 10.0
    rgb: bool = False
    seed: int = 0
    parts: tuple[str, ...] = PIPELINE_PARTS
    batch_sizes: tuple[int, ...] = (32, 128)
    workers: tuple[int, ...] = (4,)
    load_batches: int = 20
    load_warmup: int = 3
    models: tuple[str, ...] = PIPELINE_MODELS
    train_batch: int | None = None  # default: the first batch size
    train_batches: tuple[int, ...] | None = None  # several training batch sizes (default: (train_batch,))
    train_workers: int | None = None  # default: the largest worker count
    train_steps: int = 20
    train_warmup: int = 3
    profile_steps: int = 3
    infer_batches: tuple[int, ...] = (1, 32)
    backends: tuple[str, ...] = INFER_BACKENDS
    infer_time_s: float = 1.0
    ddp_ranks: tuple[int, ...] = ()  # DDP training launches (torchrun; NCCL on GPUs, Gloo processes on the CPU)
    cache_regimes: tuple[str, ...] = PIPELINE_REGIMES  # the EpisodeCache's: resident, streamed (none: no cache case)
    cache_budget_mb: float | None = None  # the streamed regime's budget (default: half the dataset's payload)
    prefetch_depth: int = 1  # the streamed regime's chunks copied ahead beyond the next batch's
    notes: list[str] = field(default_factory=list)

    def validate(self) -> None:
        parts = PIPELINE_PARTS
        if self.device not in ("gpu", "cpu"):
            raise ValueError(f"device must be gpu or cpu, got {self.device!r}")
        _known("parts", self.parts, parts)
        if not self.parts and not self.ddp_ranks:
            raise ValueError(f"nothing to run: give some of {', '.join(parts)} or DDP rank counts")
        for name in ("batch_sizes", "infer_batches"):
            if not getattr(self, name) or min(getattr(self, name)) < 1:
                raise ValueError(f"{name} must be one or more integers >= 1")
        if not self.workers or min(self.workers) < 0:
            raise ValueError("workers must be one or more integers >= 0")
        for name in ("load_batches", "train_steps"):
            if getattr(self, name) < 3:
                raise ValueError(f"{name} must be >= 3 (quantiles need a few samples)")
        _known("models", self.models, PIPELINE_MODELS)
        if self.ddp_ranks and min(self.ddp_ranks) < 1:
            raise ValueError("ddp_ranks must be integers >= 1")
        if self.train_batches is not None and (not self.train_batches or min(self.train_batches) < 1):
            raise ValueError("train_batches must be one or more integers >= 1")
        _known("cache regimes", self.cache_regimes, PIPELINE_REGIMES)
        if self.cache_budget_mb is not None and not self.cache_budget_mb > 0:
            raise ValueError("cache_budget_mb must be > 0")
        if self.prefetch_depth < 0:
            raise ValueError("prefetch_depth must be >= 0")
        _known("backends", self.backends, INFER_BACKENDS)

    @property
    def t_batch(self) -> int:
        return self.train_batch or self.batch_sizes[0]

    @property
    def t_batches(self) -> tuple[int, ...]:
        return tuple(self.train_batches) if self.train_batches else (self.t_batch,)

    @property
    def t_workers(self) -> int:
        return self.train_workers if self.train_workers is not None else max(self.workers)


def pipeline_defaults(device: str) -> PipelineConfig:
    """What ``robocache-bench run --suite pipelines`` runs: on a GPU, the sizes of scripts/gpu_check.sh's
    ``pipelines`` part; on the CPU, a small sweep (no torch.compile: Inductor's CPU compile alone takes
    minutes on a small machine)."""
    if device == "gpu":
        return PipelineConfig(device="gpu", size_mb=128.0, batch_sizes=(32, 128), workers=(4, 8), load_batches=40,
                              train_steps=30, profile_steps=2, train_batches=(32, 128))
    # the streamed regime's budget: 3 of the ~4 MB (half would not hold a batch of 8 of these 23 episodes plus
    # the chunk prefetched: at least 2.8 MB)
    return PipelineConfig(device="cpu", size_mb=4.0, min_s=2.0, max_s=5.0, batch_sizes=(8,), workers=(2,),
                          load_batches=8, load_warmup=2, train_steps=6, train_warmup=2, profile_steps=1,
                          infer_batches=(1, 8), backends=("eager", "sdpa"), infer_time_s=0.3, cache_budget_mb=3.0)


def _ds_tag(info: dict[str, Any]) -> str:
    return f"{info['episodes']}ep-s{info['seed']}" + ("-rgb" if info["rgb"] else "")


def pipeline_cache_tag(cfg: PipelineConfig, regime: str) -> str:
    """The cache's part of a case tag: ``cache`` (resident), ``cache-streamed-half-d1`` (the default budget, half
    the dataset; prefetch depth 1) or ``cache-streamed64MB-d1``."""
    if regime == "resident":
        return "cache"
    budget = "-half" if cfg.cache_budget_mb is None else f"{cfg.cache_budget_mb:g}MB"
    return f"cache-streamed{budget}-d{cfg.prefetch_depth}"


def pipeline_cache_params(cfg: PipelineConfig, info: dict[str, Any], regime: str) -> dict[str, Any]:
    if regime == "resident":
        return {"regime": "resident"}
    budget = cfg.cache_budget_mb
    if budget is None and info.get("cached_bytes"):  # half the cached streams (unknown when only listing)
        budget = info["cached_bytes"] / 2e6
    return {"regime": "streamed", "budget_mb": None if budget is None else round(float(budget), 3),
            "prefetch_depth": cfg.prefetch_depth}


def pipeline_points(cfg: PipelineConfig, info: dict[str, Any]) -> list[dict[str, Any]]:
    """The pipelines suite's cases for this config and dataset (``info``: episodes, seed, rgb, payload_bytes and,
    when known, cached_bytes), in the order the suite runs them: kind, tag, provider, params, reason."""
    dtag = _ds_tag(info)
    dsp = {"dataset_episodes": info["episodes"], "dataset_seed": info["seed"], "dataset_mb": round(
        info["payload_bytes"] / 1e6, 1), "rgb": info["rgb"], "rate_hz": PIPELINE_RATE_HZ}
    out = []
    if "dataload" in cfg.parts:
        for b in cfg.batch_sizes:
            for w in cfg.workers:
                for prov in PIPELINE_LOADERS:
                    out.append({"kind": "dataload", "tag": f"B{b}-W{w}-{dtag}", "provider": prov,
                                "params": {"B": b, "workers": w, **dsp},
                                "reason": "data loading (seed 001): DataLoader with N workers, CPU resampling to 50 Hz "
                                          "in the workers vs read+pad in the workers and one robocache.fuse per batch"})
            for regime in cfg.cache_regimes:
                where = ("the whole dataset on the device" if regime == "resident" else
                         "streamed from pinned host memory within a budget half the dataset")
                out.append({"kind": "dataload", "tag": f"B{b}-{pipeline_cache_tag(cfg, regime)}-{dtag}",
                            "provider": PIPELINE_CACHE,
                            "params": {"B": b, "workers": 0, **pipeline_cache_params(cfg, info, regime), **dsp},
                            "reason": "data loading from robocache.EpisodeCache (issue 26): no worker, no per-batch "
                                      f"copy, one launch per batch; {where}"})
    if "train" in cfg.parts:
        for m in cfg.models:
            for b in cfg.t_batches:
                tag = f"{m}-B{b}-W{cfg.t_workers}-{dtag}"
                base = {"B": b, "workers": cfg.t_workers, "model": m, "steps": cfg.train_steps, **dsp}
                for prov in PIPELINE_LOADERS:
                    out.append({"kind": "train", "tag": tag, "provider": prov, "params": dict(base),
                                "reason": "training step (seed 001/002): where a step's time goes, data vs model, "
                                          "from each data-loading pipeline"})
                for regime in cfg.cache_regimes:
                    rp = pipeline_cache_params(cfg, info, regime)
                    t = (tag if regime == "resident" else
                         f"{m}-B{b}-W{cfg.t_workers}-{pipeline_cache_tag(cfg, regime)}-{dtag}")
                    provs = (PIPELINE_CACHE,) if regime == "resident" else ("cpu_workers", PIPELINE_CACHE)
                    for prov in provs:
                        why = ("training step from robocache.EpisodeCache (issue 26): the episodes on the device, "
                               "one launch per batch" if regime == "resident" else
                               "training step from robocache.EpisodeCache streamed within a memory budget (a dataset "
                               "2x the budget), and the CPU workers on the same episode order (the gate's reference)")
                        out.append({"kind": "train", "tag": t, "provider": prov, "params": {**base, **rp},
                                    "reason": why})
    if "infer" in cfg.parts:  # backend-major: eager at every batch first, the slowest compile last
        for be in cfg.backends:
            for b in cfg.infer_batches:
                out.append({"kind": "infer", "tag": f"transformer-B{b}", "provider": be,
                            "params": {"B": b, "obs_steps": INFER_OBS_STEPS, "d_model": INFER_D_MODEL,
                                       "layers": INFER_LAYERS, "horizon": INFER_HORIZON},
                            "reason": "policy inference (seed 004): latency of a small transformer policy, "
                                      "eager vs SDPA vs torch.compile"})
    return out
