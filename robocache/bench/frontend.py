"""asv and pytest-benchmark front ends: thin adapters over the one measurement path.

Both ask the harness for a case by its key (``specs``), measure it with the same
worker (correctness gate, then the device timer, then NVML clocks), report the
figure in the host tool's own format, and also append the record to our store,
tagged with the front end. A front-end "session" (one ``asv run`` invocation,
one pytest session) measures the copy ceiling once and writes one run file, through the
same :class:`~robocache.bench.context.RunContext` as ``robocache-bench run`` (its tasks, its
results folder rule, its run file).

Differences from ``robocache-bench run``: asv already runs each benchmark in its
own process; pytest-benchmark runs in the pytest process (no isolation: a kernel
fault ends the session, as it would for any pytest test). Multi-GPU cases (suite
``multigpu``) go through the CLI's torchrun launcher in a child process group
(:func:`measure_multigpu`), skipped where fewer GPUs are present than a case needs.

Call-cost ("dispatch") cases (``specs.Case.dispatch``) are host time per call in a tight loop, not device
time: they never feed the device-time, bandwidth or %-of-ceiling benchmarks (:func:`device_cases`) and get
their own host-time benchmark (:func:`dispatch_cases`, asv ``<Op>CallCost.track_host_us``; pytest-benchmark
times them with the host-loop samples and says so in ``extra_info``).
"""
from __future__ import annotations

import functools
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import msgspec

from .. import providers as _providers
from . import messages, runner, specs, store, worker
from .context import RunContext, git_state, new_run_id
from .messages import Baseline, Ceiling, TimingOptions
from .schema import Record

ROOT = Path(__file__).resolve().parents[2]
RESULTS_ENV = "ROBOCACHE_RESULTS"  # where front-end records go; default <repo>/results/local (not committed)
DEVICE_ENV = "ROBOCACHE_DEVICE"  # "gpu" | "cpu" to skip detection
# Front ends sample for at most 1 s per case (the CLI: 2 s) and skip the CUDA-graph self-check, which
# `robocache-bench run` records: asv's nightly pass over the whole grid with every peer must fit 15 minutes.
FRONTEND_TIMING = TimingOptions(time_limit_s=float(os.environ.get("ROBOCACHE_TIME_LIMIT", "1.0")))


def preload_gpu_libraries() -> None:
    """Import torch and CuPy (without touching CUDA) where benchmarks will need them.

    asv forks every benchmark from a server process that imported the benchmark modules; importing the
    GPU libraries there once saves seconds per benchmark (and ~6 s per ``torch.compile`` case for dynamo,
    inductor and triton: see :mod:`robocache.providers.torch_compile`). No CUDA call happens here, and the
    function checks that none of the imports initialized CUDA (a forked child could not use it then).
    """
    if device_here() == "gpu":
        from ..providers import torch_compile

        torch = sys.modules.get("torch")
        if torch is not None and torch.cuda.is_initialized():
            raise RuntimeError("CUDA was initialized in this process before the benchmark modules were imported, so "
                               "benchmarks forked from it could not use the GPU: import them in a fresh process "
                               "(as asv does)")
        torch_compile.prepare_process_env()
        for mod in ("torch", "cupy", *torch_compile.PRELOAD):
            try:
                __import__(mod)
            except ImportError:
                pass
        if not torch_compile.fork_safe():
            raise RuntimeError("preloading the GPU libraries initialized CUDA, so benchmarks forked from this "
                               "process could not use the GPU; report this with your torch and triton versions "
                               "(robocache.providers.torch_compile.PRELOAD lists the modules)")


class Unavailable(Exception):
    """The case cannot run here (no GPU for a GPU case, provider missing); the message says why."""


@functools.lru_cache(maxsize=1)
def device_here() -> str:
    """"gpu" or "cpu", decided without touching CUDA in this process (asv forks benchmarks from it)."""
    forced = os.environ.get(DEVICE_ENV)
    if forced in ("gpu", "cpu"):
        return forced
    return runner.detect_device()


def gpu_only(provider: str) -> bool:
    """Whether ``provider`` needs a CUDA GPU (the provider table's :func:`robocache.providers.gpu_only`)."""
    return _providers.gpu_only(provider)


def _suite(op: str | None, suite: str | None, default_suite: str) -> list[specs.Case]:
    suite = suite or os.environ.get("ROBOCACHE_SUITE", default_suite)
    provs = [x for x in os.environ.get("ROBOCACHE_PROVIDERS", "").split(",") if x.strip()] or None
    dts = [x for x in os.environ.get("ROBOCACHE_DTYPES", "").split(",") if x.strip()] or None
    return specs.cases(suite, device=device_here(), ops=[op] if op else None, providers=provs, dtypes=dts)


def suite_cases(op: str | None = None, suite: str | None = None, default_suite: str = "nightly") -> list[str]:
    """Case keys in the suite (``ROBOCACHE_SUITE`` or ``default_suite``) for this device, call-cost ones included.

    ``ROBOCACHE_PROVIDERS`` / ``ROBOCACHE_DTYPES`` (comma-separated) narrow it, as ``robocache-bench run``'s
    filters do; the grid itself stays the one in ``specs``.
    """
    return [c.key for c in _suite(op, suite, default_suite)]


def device_cases(op: str | None = None, suite: str | None = None, default_suite: str = "nightly") -> list[str]:
    """:func:`suite_cases` without the call-cost (dispatch) cases: the ones with a device time, GB/s and a %
    of the copy ceiling."""
    return [c.key for c in _suite(op, suite, default_suite) if not c.dispatch]


def dispatch_cases(op: str | None = None, suite: str | None = None, default_suite: str = "nightly") -> list[str]:
    """The call-cost (dispatch) cases of :func:`suite_cases`: host time per tiny call (GPU only; none on a CPU)."""
    return [c.key for c in _suite(op, suite, default_suite) if c.dispatch]


# Wall-time benchmarks (one call end to end, asv's own timer) cover the quick suite for the judged pair,
# robocache and torch.compile (NumPy on a CPU run), not every peer: each case costs a process, the correctness
# gate and a compile, and on an H200 the walls of all four GPU providers took ~90 s of fuse's 256 s asv pass,
# which with the rest put the nightly asv run over its 15-minute budget. ROBOCACHE_WALL_PROVIDERS widens it.
# The provider table marks them (``wall``); torch_compile@max-autotune is not: its setup autotunes.
WALL_PROVIDERS = tuple(_providers.names(wall=True))


def wall_cases(op: str) -> list[str]:
    """Case keys for ``<Op>Wall``: the quick suite, providers from ``ROBOCACHE_WALL_PROVIDERS`` (comma-separated)
    or :data:`WALL_PROVIDERS`, intersected with ``ROBOCACHE_PROVIDERS`` when that is set. Call-cost cases are
    left out: ``<Op>CallCost`` times them (host time per call in a tight loop, the figure they exist for)."""
    wanted = [x.strip() for x in os.environ.get("ROBOCACHE_WALL_PROVIDERS", "").split(",") if x.strip()]
    keys = device_cases(op, suite="quick")
    provs = set(wanted or WALL_PROVIDERS)
    return [k for k in keys if k.rsplit("/", 1)[1] in provs]


def results_dir() -> Path:
    return Path(os.environ.get(RESULTS_ENV) or ROOT / "results" / "local")


def frontend_git() -> tuple[str | None, bool | None]:
    """(commit, dirty) of a front end's records: asv's ``ASV_COMMIT`` (the commit it measures), else the checkout's."""
    commit = os.environ.get("ASV_COMMIT") or None
    return (commit, None) if commit else git_state()


class Session:
    """State shared by the benchmarks of one front-end invocation, kept in a temp folder: its run id, the
    environment, the copy ceiling and the records measured (asv runs each benchmark in a process of its own)."""

    def __init__(self, frontend: str, key: str):
        self.frontend = frontend
        self.dir = Path(tempfile.gettempdir()) / "robocache-frontend" / store.safe_component(f"{frontend}-{key}")
        self.dir.mkdir(parents=True, exist_ok=True)
        rid = self.dir / "run_id"
        if not rid.exists():
            _atomic_write(rid, new_run_id().encode())
        self.run_id = rid.read_text().strip()

    def _path(self, name: str) -> Path:
        return self.dir / (store.safe_component(name) + ".json")

    def cached(self, name: str, kind: type[Any]) -> Any:
        """What :meth:`cache` kept under ``name``, decoded as ``kind`` (None when absent or not a ``kind``)."""
        return messages.read_json(self._path(name), kind)

    def cache(self, name: str, value: Any) -> None:
        _atomic_write(self._path(name), msgspec.json.encode(value))

    def context(self, suite: str) -> RunContext:
        """The session's run: its records go to ``<results_dir()>/<machine folder>/<run id>-<front end>``, the
        environment captured once per session (machine: ROBOCACHE_MACHINE, else the hostname)."""
        env = self.cached("env", dict)
        if env is None:
            from . import env as envmod

            env = envmod.capture_env(device_here())
            self.cache("env", env)
        return RunContext.start(suite=suite, device=env["device"], frontend=self.frontend, out_dir=results_dir(),
                                run_id=self.run_id, env=env, git=frontend_git(), name=f"{self.run_id}-{self.frontend}")

    def ceiling(self) -> Ceiling | None:
        """The copy bandwidth, measured once per session (in a child process: CUDA stays out of this one)."""
        if device_here() != "gpu":
            return None
        hit = self.cached("ceiling", Ceiling)
        if hit is None:
            code = ("import sys; from robocache.bench import messages, worker; "
                    "sys.stdout.buffer.write(messages.pack(worker.ceiling_task()))")
            out = subprocess.run([sys.executable, "-c", code], capture_output=True, timeout=600)
            try:
                if out.returncode != 0:
                    raise ValueError(out.stderr.decode(errors="replace")[-500:])
                hit = messages.unpack(out.stdout, Ceiling)
            except (ValueError, msgspec.DecodeError) as e:  # ValidationError is a ValueError
                hit = Ceiling(status="error", reason=str(e)[-500:])
            self.cache("ceiling", hit)
        return hit if hit.status == "ok" else None

    def append(self, rec: Record, suite: str = "nightly") -> Path:
        """Add ``rec`` to this session's run file (benchmarks run one after another: read, append, rewrite)."""
        return self.context(suite).append([rec])


def _atomic_write(path: Path, data: bytes) -> None:
    store.atomic_write(path, data)


def measure(key: str, session: Session, *, suite: str = "nightly", check_only: bool = False,
            timing: TimingOptions | dict[str, Any] | None = None, extras: dict[str, Any] | None = None,
            store_record: bool = True) -> Record:
    """Measure case ``key`` in this process through the harness; append the record to the session's file.

    Raises :class:`Unavailable` for a case this machine cannot run (a GPU provider without a GPU, a
    missing library), so asv can mark it skipped and pytest can skip it.
    """
    case = specs.find(key)
    device = device_here()
    if gpu_only(case.provider) and device != "gpu":
        raise Unavailable(f"{case.provider} needs a CUDA GPU; none found on this machine")
    if case.distributed:
        return measure_multigpu(case, session, suite=suite, check_only=check_only, timing=timing, extras=extras,
                                store_record=store_record)
    # the ceiling first, in a child process, while this one holds no CUDA context (capturing the environment
    # for the session's context initialises CUDA here)
    ceiling = session.ceiling() if not check_only else None
    run = session.context(suite)
    task = run.task(key, timing=timing or FRONTEND_TIMING, check_only=check_only, graph_check=False,
                    ceiling_gb_per_s=ceiling.gb_per_s if ceiling else None)
    rec = worker.measure(task, extras)
    if rec.status == "skipped":
        raise Unavailable(rec.reason)
    if store_record and not check_only:
        run.append([rec])
    return rec


def multigpu_unavailable(case: specs.Case) -> str | None:
    """Why this machine cannot run the multi-GPU ``case`` (None when it can): its grid point is for another
    device, torch.distributed or its backend is missing, or fewer GPUs are present than it needs."""
    from .multigpu import launch

    device = device_here()
    if device not in specs.devices_of(case):
        return f"{case.key} is a {'/'.join(specs.devices_of(case))} case; this machine runs the {device} ones"
    ok, why = launch.available(device)
    if not ok:
        return why
    if device == "gpu":
        n = launch.gpu_count()
        if n < case.world_size:
            return f"needs {case.world_size} GPUs; {n} present"
    return None


def measure_multigpu(case: specs.Case, session: Session, *, suite: str = "multigpu", check_only: bool = False,
                     timing: TimingOptions | dict[str, Any] | None = None, extras: dict[str, Any] | None = None,
                     store_record: bool = True) -> Record:
    """A multi-GPU case through the same torchrun path as ``robocache-bench run --suite multigpu`` (a child
    torchrun; rank 0's record). Its one-rank case is measured first in this session (once) when it has not
    been, so the efficiency is against the same session's baseline. ``extras["timing"].samples_us``: the
    slowest rank's step samples."""
    import types

    from .multigpu import launch

    why = multigpu_unavailable(case)
    if why:
        raise Unavailable(why)
    key = case.key
    hit = None if check_only else session.cached("rec-" + key, Record)
    if hit is not None:
        if extras is not None:
            extras["timing"] = types.SimpleNamespace(samples_us=session.cached("samples-" + key, list) or [])
        return hit
    baselines: dict[str, Baseline] = {}
    bk = case.baseline_key
    if bk and not check_only:
        try:
            base_case = specs.find(bk)
        except KeyError:
            base_case = None
        if base_case is not None:
            try:
                base = measure_multigpu(base_case, session, suite=suite, timing=timing, store_record=store_record)
            except Unavailable:
                base = None
            if base is not None and (b := Baseline.of(base)) is not None:
                baselines[bk] = b
    with tempfile.TemporaryDirectory(prefix="rcb-frontend-") as tmp:
        res = launch.run_multigpu([case], device=device_here(), gpus=case.world_size, out_dir=tmp, suite=suite,
                                  frontend=session.frontend, run_id=session.run_id, timing=timing or FRONTEND_TIMING,
                                  check_only=check_only, baselines=baselines, add_baselines=False, git=frontend_git())
    if not res.records:
        raise RuntimeError(f"{key}: the launch returned no record ({res.launches})")
    rec = res.records[0]
    if rec.status == "skipped":
        raise Unavailable(rec.reason)
    if extras is not None:
        extras["timing"] = types.SimpleNamespace(samples_us=res.samples.get(key, []))
    if not check_only:
        if store_record:
            session.append(rec, suite)
        session.cache("rec-" + key, rec)
        session.cache("samples-" + key, res.samples.get(key, []))
    return rec


def multigpu_suite() -> bool:
    """asv's multi-GPU classes exist only for ``ROBOCACHE_SUITE=multigpu``: on the nightly pass (one GPU) they
    would add a torchrun launch per case to a run that must fit its 15 minutes."""
    return os.environ.get("ROBOCACHE_SUITE", "") == "multigpu"


def gather_cases(op: str) -> list[str]:
    """The multi-GPU cases of ``op`` that gather their outputs (the bandwidth benchmarks)."""
    return [k for k in suite_cases(op, suite="multigpu") if specs.find(k).params.get("gather") != "none"]


def synchronize() -> None:
    """Wait for the GPU (both libraries' default streams), for wall-time benchmarks."""
    torch = sys.modules.get("torch")
    if torch is not None and torch.cuda.is_available() and torch.cuda.is_initialized():
        torch.cuda.synchronize()
    cupy = sys.modules.get("cupy")
    if cupy is not None:
        try:
            cupy.cuda.Device().synchronize()
        except Exception:  # noqa: BLE001 - no CUDA: nothing to wait for
            pass


# --- asv ----------------------------------------------------------------------------------------------

ASV_VERSION = f"robocache-grid-{specs.GRID_VERSION}"  # a grid change is a new benchmark, never a regression


def asv_session() -> Session:
    """One ``asv run`` invocation: its benchmarks are forked from one asv process (their parent)."""
    return Session("asv", f"{os.environ.get('ASV_COMMIT', 'nocommit')[:12]}-{os.getppid()}")


def asv_suite() -> str:
    return os.environ.get("ROBOCACHE_SUITE", "nightly")


def asv_record(key: str) -> Record:
    """The record of ``key`` in this asv invocation: measured by the first benchmark that asks, then reused
    by the others (asv runs each ``track_*`` method in its own process)."""
    session = asv_session()
    why = session.cached("unavailable-" + key, str)
    if why is not None:
        raise NotImplementedError(why)
    hit = session.cached("rec-" + key, Record)
    if hit is not None:
        return hit
    try:
        rec = measure(key, session, suite=asv_suite())
    except Unavailable as e:
        session.cache("unavailable-" + key, str(e))
        raise NotImplementedError(str(e)) from None  # asv records this as skipped, never as passed
    session.cache("rec-" + key, rec)
    return rec


class _Measured:
    """The shared setup of the ``track_*`` classes: one harness measurement per case and asv invocation."""

    version = ASV_VERSION
    timeout = 900  # torch.compile compiles each shape on first use
    param_names = ["case"]

    def setup(self, key: str) -> None:
        self.rec = asv_record(key)
        if self.rec["status"] != "ok":
            raise RuntimeError(f"{key}: {self.rec['status']}: {self.rec.get('reason')}")


def _not_dispatch(key: str, rec: dict[str, Any]) -> None:
    """A call-cost case's figures are host times: never reported as a device time, GB/s or % of the ceiling."""
    if rec["method"].get("timer") == "host_loop" or specs.find(key).dispatch:
        raise NotImplementedError(f"{key} is a call-cost case (host time per call): see <Op>CallCost.track_host_us")


class DeviceBenchmark(_Measured):
    """asv ``track_*`` benchmarks of one case: the harness's device time and bandwidth."""

    def setup(self, key: str) -> None:
        super().setup(key)
        _not_dispatch(key, self.rec)

    def track_device_us(self, key: str) -> float:
        return self.rec["metrics"]["time_us"]["p50"]

    track_device_us.unit = "us"

    def track_gb_per_s(self, key: str) -> float:
        return self.rec["metrics"]["gb_per_s"]

    track_gb_per_s.unit = "GB/s"


class CeilingBenchmark(_Measured):
    """asv ``track_pct_of_ceiling``: bandwidth as % of the copy ceiling measured in the same asv run (GPU)."""

    def setup(self, key: str) -> None:
        super().setup(key)
        _not_dispatch(key, self.rec)
        if self.rec["metrics"]["pct_of_ceiling"] is None:
            raise NotImplementedError("no copy-bandwidth ceiling on a CPU run")

    def track_pct_of_ceiling(self, key: str) -> float:
        return self.rec["metrics"]["pct_of_ceiling"]

    track_pct_of_ceiling.unit = "%"


class CallCostBenchmark(_Measured):
    """asv ``track_*`` of a call-cost (dispatch) case: host time per tiny call in a tight loop (the public API
    on torch tensors and on CuPy arrays, and the bare CuPy launch that is their floor), and the device time per
    call beside it (the GPU keeps up when it is the smaller)."""

    def setup(self, key: str) -> None:
        super().setup(key)
        if not specs.find(key).dispatch:
            raise NotImplementedError(f"{key} is not a call-cost case")

    def track_host_us(self, key: str) -> float:
        return self.rec["metrics"]["time_us"]["p50"]

    track_host_us.unit = "us"

    def track_device_us_per_call(self, key: str) -> float:
        dev = (self.rec.get("dispatch") or {}).get("device_us")
        return float("nan") if dev is None else dev  # asv shows n/a: no device time (a CPU run)

    track_device_us_per_call.unit = "us"


class _MultiMeasured(_Measured):
    """Setup of the multi-GPU classes: skipped (NotImplementedError) when the machine has fewer GPUs than the
    case needs or no torch.distributed; otherwise one torchrun launch per case and asv invocation."""

    timeout = 1800  # a torchrun launch per case (and its one-GPU baseline)

    def setup(self, key: str) -> None:
        super().setup(key)
        if not self.rec.get("distributed"):
            raise NotImplementedError(f"{key} is not a multi-GPU case")


class MultiGPUBenchmark(_MultiMeasured):
    """asv ``track_*`` of a multi-GPU case (suite multigpu): the group's step, aggregate throughput and scaling
    efficiency against the one-GPU case of the same asv run."""

    def track_step_us(self, key: str) -> float:
        return self.rec["distributed"]["step_us"]

    track_step_us.unit = "us"

    def track_aggregate_items_per_s(self, key: str) -> float:
        return self.rec["distributed"]["aggregate_items_per_s"]

    track_aggregate_items_per_s.unit = "items/s"

    def track_efficiency(self, key: str) -> float:
        eff = self.rec["distributed"]["efficiency"]
        return float("nan") if eff is None else eff  # asv shows n/a: the one-GPU case failed

    track_efficiency.unit = "ratio"


class GatherBenchmark(_MultiMeasured):
    """asv bandwidth of the op's gather next to the collective's own (all_gather of a plain tensor of the same
    size, measured in the same launch): algbw and nccl-tests' busbw, GB/s."""

    def track_gather_gb_per_s(self, key: str) -> float:
        return self.rec["distributed"]["gather_gb_per_s"]

    track_gather_gb_per_s.unit = "GB/s"

    def track_collective_gb_per_s(self, key: str) -> float:
        return self.rec["distributed"]["collective_gb_per_s"]

    track_collective_gb_per_s.unit = "GB/s"

    def track_collective_busbw_gb_per_s(self, key: str) -> float:
        return self.rec["distributed"]["collective_busbw_gb_per_s"]

    track_collective_busbw_gb_per_s.unit = "GB/s"


class WallBenchmark:
    """asv ``time_*`` benchmark: end-to-end wall time of one call with the GPU synchronized (asv's timer)."""

    version = ASV_VERSION
    timeout = 900
    param_names = ["case"]
    # One round: asv's default two rounds run setup twice per case, and setup includes the correctness gate
    # (and a torch.compile compile); measured on an H200, compiles dominate the nightly asv wall time.
    rounds = 1
    repeat = (1, 10, 5.0)

    def setup(self, key: str) -> None:
        extras: dict[str, Any] = {}
        try:
            rec = measure(key, asv_session(), suite="quick", check_only=True, extras=extras, store_record=False)
        except Unavailable as e:
            raise NotImplementedError(str(e)) from None
        if rec["status"] != "ok":
            raise RuntimeError(f"{key}: {rec['status']}: {rec.get('reason')}")
        self.call = extras["call"]

    def time_wall(self, key: str) -> None:
        self.call()
        synchronize()
