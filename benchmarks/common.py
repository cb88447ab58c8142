"""asv base classes: thin adapters over the harness's one measurement path (``robocache.bench.frontend``).

Every ``benchmarks/bench_<op>.py`` subclasses these, naming its op in a class attribute ``op``; the base classes are
abstract (asv's discovery skips abstract classes), so asv finds benchmarks only in the op modules.

**One device-independent grid.** ``params`` are built from the grid (``robocache.bench.specs``) over *both*
devices and *every* suite the class serves, never from the machine that discovers them, so asv's single
``results/asv/benchmarks.json`` is the same whichever machine ran last. The parameters are split
(``param_names = ["case", "dtype", "provider"]``: the shape tag, the dtype, the provider) so asv's UI slices by
each. Their product holds combinations this machine, this suite or the grid itself does not run; ``setup``
raises ``NotImplementedError`` for them with the reason, which asv records as skipped (n/a), never as a figure.

**Only lower-is-better figures** (asv treats every increase as a regression): the harness's device time
(``time_device``), one call's wall time (``time_wall``), a call-cost case's host time per call (``time_host``)
and device time per call (``track_device_us_per_call``), a multi-GPU group's step (``time_step``). Bandwidth,
% of the copy ceiling, aggregate throughput and scaling efficiency stay in our records and the dashboard.

**The harness's samples reach asv's statistics.** ``setup`` measures the case once per asv invocation through
the harness (correctness gate, CUDA-event timer behind a blocked stream, noise-based stopping, NVML clocks) and
hands its per-call samples to :data:`CLOCK`, the benchmarks' asv ``timer``: each call of the timed method
advances it by the next sample, so asv's samples, median, quartiles and confidence interval (``asv compare``'s
``±`` and "not significant") are the harness's device times, as in the pytest-benchmark front end
(``benchmarks/test_pytest_benchmarks.py``). The record also lands in our store (front end "asv").

**Short runs.** ``ROBOCACHE_SUITE=quick`` runs the quick suite's cases only (the rest skip). ``asv run --quick``
(asv asks for one sample) or ``-a repeat=N`` bound the harness's sampling too (:func:`asv_requested`):
with ``--quick`` one sample per case, a short warm-up and time limit.

Suite: ``ROBOCACHE_SUITE`` (quick | nightly | multigpu, default nightly); ``ROBOCACHE_PROVIDERS`` /
``ROBOCACHE_DTYPES`` narrow what runs (the rest skip); ``ROBOCACHE_WALL_PROVIDERS`` widens the wall-time
benchmarks beyond :data:`WALL_PROVIDERS`. None of them changes ``params``.
"""
from __future__ import annotations

import abc
import functools
import os
import sys
from typing import Any

import msgspec

from robocache import providers as provider_table
from robocache.bench import frontend as F, specs
from robocache.bench.messages import TimingOptions
from robocache.bench.schema import Record

# A grid change is a new benchmark, never a regression; asv keys results by this version, not by the code.
ASV_VERSION = f"robocache-grid-{specs.GRID_VERSION}"
PARAM_NAMES = ["case", "dtype", "provider"]
KINDS = ("device", "dispatch", "wall", "multigpu")
# Wall-time benchmarks cover the quick suite for the judged pair, robocache and torch.compile (NumPy on a CPU
# run), not every peer: each case costs a process, the correctness gate and a compile (on an H200 the walls of
# all four GPU providers took ~90 s of fuse's 256 s asv pass). The provider table marks them (``wall``).
WALL_PROVIDERS = tuple(provider_table.names(wall=True))


# --- the grid -----------------------------------------------------------------------------------------

def _suites(kind: str) -> tuple[str, ...]:
    return {"device": ("quick", "nightly"), "dispatch": ("quick", "nightly"), "wall": ("quick",),
            "multigpu": ("multigpu",)}[kind]


def _belongs(case: specs.Case, kind: str) -> bool:
    if kind == "multigpu":
        return case.distributed
    if case.distributed:
        return False
    return case.dispatch if kind == "dispatch" else not case.dispatch


@functools.cache
def grid_keys(op: str, kind: str) -> frozenset[str]:
    """Every case key of ``op`` a ``kind`` benchmark can ever measure: its suites, on either device."""
    if kind not in KINDS:
        raise ValueError(f"unknown benchmark kind {kind!r}; expected one of {', '.join(KINDS)}")
    return frozenset(c.key for s in _suites(kind) for d in ("gpu", "cpu")
                     for c in specs.cases(s, device=d, ops=[op]) if _belongs(c, kind))


@functools.cache
def grid_params(op: str, kind: str) -> tuple[tuple[str, ...], tuple[str, ...], tuple[str, ...]]:
    """asv ``params`` of an ``op``'s ``kind`` benchmark: (shape tags in grid order, dtypes, providers in the
    provider table's order). The same on every machine: built from :func:`grid_keys`, never from the device."""
    keys = grid_keys(op, kind)
    parts = [k.split("/", 3)[1:] for k in keys]
    tag_order = [pt.tag for pt in specs.all_points() if pt.op == op]
    tags = tuple(t for t in dict.fromkeys(tag_order) if any(p[0] == t for p in parts))
    dtypes = tuple(d for d in specs.GPU_DTYPES if any(p[1] == d for p in parts))
    provs = tuple(p for p in provider_table.names() if any(q[2] == p for q in parts))
    return tags, dtypes, provs


def suite() -> str:
    """The suite an asv run measures: ``ROBOCACHE_SUITE``, default nightly."""
    s = os.environ.get("ROBOCACHE_SUITE", "nightly")
    if s not in specs.SUITES:
        raise ValueError(f"ROBOCACHE_SUITE={s!r}: expected one of {', '.join(specs.SUITES)}")
    return s


def _env_list(name: str) -> list[str]:
    return [x.strip() for x in os.environ.get(name, "").split(",") if x.strip()]


def _suite_of(kind: str, suite_: str) -> str | None:
    """The suite whose cases a ``kind`` benchmark runs in an asv run of ``suite_`` (None: it runs none)."""
    if kind == "wall":  # one call's wall time over the quick suite, in the quick and nightly passes
        return "quick" if suite_ in ("quick", "nightly") else None
    return suite_ if suite_ in _suites(kind) else None


@functools.cache
def _runnable(op: str, kind: str, suite_: str, device: str) -> frozenset[str]:
    s = _suite_of(kind, suite_)
    if s is None:
        return frozenset()
    return frozenset(c.key for c in specs.cases(s, device=device, ops=[op]) if _belongs(c, kind))


def why_not(op: str, kind: str, tag: str, dtype: str, provider: str) -> str | None:
    """Why this machine does not run the case ``op/tag/dtype/provider`` in a ``kind`` benchmark of this asv
    run (None when it does): not a grid point, not this suite's, not this device's, or filtered out."""
    key = f"{op}/{tag}/{dtype}/{provider}"
    if key not in grid_keys(op, kind):
        return f"{key} is not a point of the grid (a combination of the split parameters only)"
    device, s = F.device_here(), suite()
    if _suite_of(kind, s) is None:
        return f"ROBOCACHE_SUITE={s}: this benchmark runs in the {' and '.join(_suites(kind))} suite(s)"
    if key not in _runnable(op, kind, s, device):
        if F.gpu_only(provider) and device != "gpu":
            return f"{provider} needs a CUDA GPU; none found on this machine"
        return f"{key} is not in the {_suite_of(kind, s)} suite on a {device} machine"
    provs, dts = _env_list("ROBOCACHE_PROVIDERS"), _env_list("ROBOCACHE_DTYPES")
    if provs and provider not in provs:
        return f"provider {provider} filtered out (ROBOCACHE_PROVIDERS={','.join(provs)})"
    if dts and dtype not in dts:
        return f"dtype {dtype} filtered out (ROBOCACHE_DTYPES={','.join(dts)})"
    wall = _env_list("ROBOCACHE_WALL_PROVIDERS") or list(WALL_PROVIDERS)
    if kind == "wall" and provider not in wall:
        return f"{provider}: the wall-time benchmark covers {', '.join(wall)} (ROBOCACHE_WALL_PROVIDERS widens it)"
    return None


# --- asv's sampling -> the harness's --------------------------------------------------------------------

def asv_requested() -> dict[str, Any]:
    """The sampling attributes given on asv's command line for the benchmark being set up (``--quick``: number,
    repeat and rounds 1, warmup_time 0; ``-a repeat=N`` ...), or {} outside asv or when none were given.

    asv_runner puts them in front of the benchmark's own attributes (a class named ``ExtraBenchmarkAttrs`` first
    in the benchmark's ``_attr_sources``) and calls ``setup`` from that benchmark object, which is found on the
    call stack; asv offers no other way for ``setup`` to learn them.
    """
    frame = sys._getframe(1)
    while frame is not None:
        sources = getattr(frame.f_locals.get("self"), "_attr_sources", None)
        if isinstance(sources, list):
            first = sources[0] if sources else None
            if isinstance(first, type) and first.__name__ == "ExtraBenchmarkAttrs":
                return {k: v for k, v in vars(first).items() if not k.startswith("_")}
            return {}
        frame = frame.f_back
    return {}


def timing_options(requested: dict[str, Any]) -> TimingOptions:
    """The harness's timer options for an asv run that asked for ``requested`` (:func:`asv_requested`): asv's
    ``repeat`` (its maximum) is the number of samples to take (the time limit may still stop it earlier),
    ``warmup_time=0`` shortens the warm-up; otherwise the front ends' defaults
    (:data:`robocache.bench.frontend.FRONTEND_TIMING`: noise-based stopping)."""
    base = TimingOptions.of(F.FRONTEND_TIMING)
    rep = requested.get("repeat")
    if rep in (None, 0):
        return base
    n = int(rep[1] if isinstance(rep, (tuple, list)) else rep)
    if n < 1:
        return base
    short = {"max_samples": n, "min_samples": n}  # the noise rule must not stop it earlier (its time limit may)
    if n <= 2:  # --quick: one sample, a short warm-up, a short limit
        short.update(time_limit_s=min(base.time_limit_s or 1.0, 0.2), warmup_s=0.01 if
                     requested.get("warmup_time") == 0 else None, noise_target=None)
    return msgspec.structs.replace(base, **{k: v for k, v in short.items() if v is not None})


# --- one measurement per case and asv invocation --------------------------------------------------------

def asv_session() -> F.Session:
    """One ``asv run`` invocation: its benchmarks are forked from one asv process (their parent)."""
    return F.Session("asv", f"{os.environ.get('ASV_COMMIT', 'nocommit')[:12]}-{F.process_key(os.getppid())}")


def measured(key: str, timing: TimingOptions | None = None) -> tuple[Record, list[float]]:
    """The record of ``key`` in this asv invocation and its per-call samples (us): measured by the first
    benchmark that asks, then reused by the others (asv runs each parameter set in its own process, and reruns
    ``setup`` between samples). ``NotImplementedError`` (asv: skipped) for a case this machine cannot run."""
    session = asv_session()
    why = session.cached("unavailable-" + key, str)
    if why is not None:
        raise NotImplementedError(why)
    hit = session.cached("rec-" + key, Record)
    samples = session.cached("samples-" + key, list)
    if hit is not None and samples is not None:
        return hit, samples
    extras: dict[str, Any] = {}
    try:
        rec = F.measure(key, session, suite=suite(), timing=timing, extras=extras)
    except F.Unavailable as e:
        session.cache("unavailable-" + key, str(e))
        raise NotImplementedError(str(e)) from None  # asv records this as skipped, never as passed
    samples = list(extras["timing"].samples_us) if "timing" in extras else []
    session.cache("rec-" + key, rec)
    session.cache("samples-" + key, samples)
    return rec, samples


class ReplayClock:
    """asv's ``timer`` for the benchmarks that report the harness's figures: its time advances only when the
    timed method calls :meth:`tick`, by the next per-call sample the harness measured (seconds).

    asv reads the clock before and after each of its samples and calls the timed method once in between
    (``number = 1``); ``setup`` sets ``repeat`` to the number of harness samples, so asv's samples are exactly
    the harness's. asv asking for more samples than there are is an error, never a repeated sample."""

    def __init__(self) -> None:
        self.now = 0.0
        self.key: str | None = None
        self.samples_s: list[float] = []
        self.used = 0

    def __call__(self) -> float:
        return self.now

    def load(self, key: str, samples_us: list[float]) -> None:
        """Hold ``key``'s samples (again for the same key: asv reruns setup between samples, nothing changes)."""
        if key != self.key:
            if not samples_us:
                raise RuntimeError(f"{key}: the harness returned no samples")
            self.key, self.samples_s, self.used = key, [s * 1e-6 for s in samples_us], 0

    def tick(self) -> None:
        if self.used >= len(self.samples_s):
            raise RuntimeError(f"{self.key}: asv asked for more than the harness's {len(self.samples_s)} samples (the "
                               "harness stopped at its time limit, ROBOCACHE_TIME_LIMIT: raise it or ask asv for fewer)")
        self.now += self.samples_s[self.used]
        self.used += 1


CLOCK = ReplayClock()


class _Grid(abc.ABC):
    """One op's benchmarks of one kind over the device-independent grid; a subclass names the op."""

    kind = "device"
    version = ASV_VERSION
    timeout = 900  # torch.compile compiles each shape on first use
    param_names = PARAM_NAMES

    @property
    @abc.abstractmethod
    def op(self) -> str:
        """The op (``resample``, ``fuse``, ``voxelize``): a subclass sets it as a class attribute."""

    @property
    def params(self) -> list[list[str]]:
        return [list(x) for x in grid_params(self.op, self.kind)]

    def key(self, case: str, dtype: str, provider: str) -> str:
        why = why_not(self.op, self.kind, case, dtype, provider)
        if why:
            raise NotImplementedError(why)
        return f"{self.op}/{case}/{dtype}/{provider}"


class _Replayed(_Grid):
    """setup: the harness's record and samples of the case, loaded into :data:`CLOCK` (asv's ``timer``)."""

    timer = CLOCK
    number = 1
    warmup_time = 0.0  # the harness warmed up; a warm-up here would spend samples
    rounds = 1  # one measurement per case and asv invocation: a second round would repeat its samples
    min_run_count = 1

    def setup(self, case: str, dtype: str, provider: str) -> None:
        key = self.key(case, dtype, provider)
        self.rec, samples = measured(key, timing_options(asv_requested()))
        if self.rec.status != "ok":
            raise RuntimeError(f"{key}: {self.rec.status}: {self.rec.reason}")
        CLOCK.load(key, samples)
        self.repeat = (len(samples), len(samples), float(self.timeout))


class DeviceTime(_Replayed):
    """``time_device``: the harness's device time per call (CUDA events; on a CPU run, its host timer), one asv
    sample per harness sample. Call-cost cases are not here (:class:`CallCost`)."""

    def time_device(self, case: str, dtype: str, provider: str) -> None:
        CLOCK.tick()


class CallCost(_Replayed):
    """A call-cost (dispatch) case (GPU): ``time_host`` is the host time per tiny call in a tight loop (the
    public API on torch tensors and on CuPy arrays, and the bare CuPy launch that is their floor), one asv sample
    per harness sample; ``track_device_us_per_call`` the device time per call beside it (the GPU keeps up when
    it is the smaller)."""

    kind = "dispatch"

    def time_host(self, case: str, dtype: str, provider: str) -> None:
        CLOCK.tick()

    def track_device_us_per_call(self, case: str, dtype: str, provider: str) -> float:
        dev = self.rec.dispatch.device_us if self.rec.dispatch is not None else None
        return float("nan") if dev is None else dev  # asv shows n/a: no device time

    track_device_us_per_call.unit = "us"


class MultiGPUTime(_Replayed):
    """``time_step`` of a multi-GPU case (``ROBOCACHE_SUITE=multigpu``): the group's step (the slowest rank's),
    one asv sample per harness sample; each case through torchrun, skipped with fewer GPUs than it needs.
    Aggregate throughput, scaling efficiency and the gather's bandwidth are in our records (higher is better)."""

    kind = "multigpu"
    timeout = 1800  # a torchrun launch per case (and its one-GPU baseline)

    def time_step(self, case: str, dtype: str, provider: str) -> None:
        CLOCK.tick()


_CALLS: dict[str, Any] = {}  # this process's prepared call per case (asv reruns setup between samples)


class WallTime(_Grid):
    """``time_wall``: end-to-end wall time of one call with the GPU synchronized, asv's own timer (quick suite,
    :data:`WALL_PROVIDERS`)."""

    kind = "wall"
    # One round: a second runs setup again in a new process, and setup is the correctness gate (and a
    # torch.compile compile); on an H200 the compiles dominated the nightly asv wall time.
    rounds = 1
    repeat = (1, 10, 5.0)

    def setup(self, case: str, dtype: str, provider: str) -> None:
        key = self.key(case, dtype, provider)
        if key not in _CALLS:
            extras: dict[str, Any] = {}
            try:
                rec = F.measure(key, asv_session(), suite="quick", check_only=True, extras=extras,
                                store_record=False)
            except F.Unavailable as e:
                raise NotImplementedError(str(e)) from None
            if rec.status != "ok":
                raise RuntimeError(f"{key}: {rec.status}: {rec.reason}")
            _CALLS[key] = extras["call"]
        self.call = _CALLS[key]

    def time_wall(self, case: str, dtype: str, provider: str) -> None:
        self.call()
        F.synchronize()
