"""asv and pytest-benchmark front ends: the shared part of two thin adapters over the one measurement path
(the asv classes are in ``benchmarks/common.py``, the pytest-benchmark suite in
``benchmarks/test_pytest_benchmarks.py``).

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
their own host-time benchmark (:func:`dispatch_cases`, asv ``<Op>CallCost.time_host``; pytest-benchmark
times them with the host-loop samples and says so in ``extra_info``).
"""
from __future__ import annotations

import functools
import os
import stat
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


def results_dir() -> Path:
    return Path(os.environ.get(RESULTS_ENV) or ROOT / "results" / "local")


def frontend_git() -> tuple[str | None, bool | None]:
    """(commit, dirty) of a front end's records: asv's ``ASV_COMMIT`` (the commit it measures), else the checkout's."""
    commit = os.environ.get("ASV_COMMIT") or None
    return (commit, None) if commit else git_state()


def private_dir(base: str | os.PathLike[str] | None = None) -> Path:
    """This user's folder for front-end sessions under the temporary folder (``robocache-frontend-<uid>``, mode
    0700): another user cannot create it first and plant a run id, an environment or records in it. A folder of
    that name that is a link, another user's, or open to others is refused (RuntimeError naming it)."""
    uid = os.getuid() if hasattr(os, "getuid") else None
    d = Path(tempfile.gettempdir() if base is None else base) / (f"robocache-frontend-{uid}" if uid is not None
                                                               else "robocache-frontend")
    d.mkdir(mode=0o700, exist_ok=True)
    st = d.lstat()
    if uid is not None and (stat.S_ISLNK(st.st_mode) or not stat.S_ISDIR(st.st_mode) or st.st_uid != uid
                            or st.st_mode & 0o077):
        raise RuntimeError(f"{d}: not a private folder of this user (owner uid {st.st_uid}, mode "
                           f"{stat.filemode(st.st_mode)}); remove it, or set TMPDIR to a folder of your own")
    return d


def process_key(pid: int, proc: Path = Path("/proc")) -> str:
    """A key for one process's lifetime: its pid and, where ``/proc`` tells it, its start time (clock ticks since
    boot). A pid alone is reused: a later process with the pid of an earlier one found that one's session folder
    and took its run id and its measured records for its own (an asv invocation of 2026-11-28 in CI rewrote the
    first invocation's records file, two records where four were measured; across days, a reused pid would
    return another commit's measurements). Where /proc is not there (macOS), the pid alone, as before."""
    try:
        fields = (proc / str(pid) / "stat").read_text().rsplit(")", 1)[1].split()
        return f"{pid}-{int(fields[19])}"  # field 22 of proc(5), starttime; fields after the name start at 3
    except (OSError, IndexError, ValueError):
        return str(pid)


class Session:
    """State shared by the benchmarks of one front-end invocation, kept in a temp folder: its run id, the
    environment, the copy ceiling and the records measured (asv runs each benchmark in a process of its own)."""

    def __init__(self, frontend: str, key: str):
        self.frontend = frontend
        self.dir = private_dir() / store.safe_component(f"{frontend}-{key}")
        self.dir.mkdir(exist_ok=True)
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
