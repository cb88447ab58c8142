"""Multi-GPU launches: the ``multigpu`` suite through ``torchrun``, one process per GPU.

``robocache-bench run --suite multigpu --gpus N`` comes here. For each world size ``k`` of the selected
cases with ``k <= N`` (ascending, so the one-rank cases, every efficiency's reference, run first), one::

    python -m torch.distributed.run --standalone --nnodes 1 --nproc-per-node k --max-restarts 0 \\
        --monitor-interval 1 -m robocache.bench.multigpu.rank --task TASK.json

(the venv's own torchrun: ``sys.executable -m torch.distributed.run``). NCCL on GPUs, Gloo on the CPU. The
ranks write the records through the store (:mod:`robocache.bench.multigpu.rank`); this module watches them:

* **collective timeout** (``collective_timeout``, default 120 s) is the process group's timeout once every
  rank has started (the start may take :data:`rank.STARTUP_TIMEOUT_S`): a rank waiting in a collective for a
  dead or hung peer raises after it;
* **a dead rank**: torchrun's agent sees it within its monitor interval and stops the other ranks; should
  the group still be alive ``collective_timeout + margin`` after a local rank died, this launcher stops
  it (the margin: ``margin_s``, else ``$ROBOCACHE_LAUNCH_MARGIN_S``, else :data:`MARGIN_S`, 30 s; tests
  lower it so that a hung group ends in seconds). The case is recorded as ``crash`` with the root cause torchrun reports (which rank, which exit code
  or signal) and no metrics: a partial aggregate is never recorded;
* **a hung case**: a case still running ``case_timeout`` seconds after it started (``--timeout``) is
  ``timeout``;
* **no process left behind**: torchrun runs in its own session; the ranks (which torchrun puts in sessions
  of their own) carry ``ROBOCACHE_LAUNCH_ID`` in their environment, and after every launch each process
  with this launch's id is killed (SIGTERM to torchrun first, which forwards it; SIGKILL after
  ``GRACE_S``). :func:`processes_with_env` finds them through ``/proc``.

After a failed case the launch is started again for the cases after it, so the run goes on (as the
single-GPU runner does); a launch that fails before its first case fails every case it had.

Multi-node (``nnodes > 1``): every node runs the same ``robocache-bench run`` command with its own
``--node-rank`` and one ``--rdzv-endpoint HOST:PORT`` (torchrun's c10d rendezvous); the world is
``nnodes x gpus`` ranks and runs the cases of that world size. The node given ``--node-rank 0`` first runs
their one-rank cases on its own (for the efficiency), then joins; its local rank 0 writes the records.
"""
from __future__ import annotations

import contextlib
import functools
import math
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .. import messages, specs
from ..context import LaunchTask, RunContext, capture_env_in_child, new_run_id
from ..messages import Baseline, CaseDone, Progress, RankFailure, RankPid, Task, TimingOptions
from ..schema import FAILED_STATUSES, Record

COLLECTIVE_TIMEOUT_S = 120.0
MARGIN_S = 30.0  # a dead rank must end the launch within the collective timeout plus this
MARGIN_ENV = "ROBOCACHE_LAUNCH_MARGIN_S"  # overrides MARGIN_S (seconds > 0): tests make a hung group end sooner
GRACE_S = 10.0  # SIGTERM -> SIGKILL
# SIGKILLed processes still in /proc are killed again until none is left, for at most this long: a killed process
# must get a core to exit, which on a loaded machine can take seconds (the launch returns only once they are gone)
REAP_S = 60.0
LAUNCH_ENV = "ROBOCACHE_LAUNCH_ID"
POLL_S = 0.2
# A multi-GPU case samples for 1 s (the op alone) plus ~3 x 0.5 s of lockstep phases (gather cases), so the
# 56 cases of an 8-GPU machine take ~4 minutes; --time-limit overrides it.
DEFAULT_TIME_LIMIT_S = 1.0


@dataclass
class MultiRunResult:
    """What a multi-GPU run did on this node."""

    run_id: str
    paths: list[Path] = field(default_factory=list)  # records files written (one per world size)
    records: list[Record] = field(default_factory=list)  # this node's view: the writer's records
    samples: dict[str, list[float]] = field(default_factory=dict)  # case key -> the slowest rank's step samples
    not_run: list[tuple[str, str]] = field(default_factory=list)  # (case key, why): more GPUs than present, ...
    launches: list[dict[str, Any]] = field(default_factory=list)  # per torchrun: world size, exit code, seconds
    writer: bool = True  # False on a node other than --node-rank 0: its records are on node 0
    wall_s: float = 0.0

    @property
    def failed(self) -> list[Record]:
        return [r for r in self.records if r.status in FAILED_STATUSES]

    @property
    def launch_failed(self) -> bool:
        """A launch that failed without a record saying so (a node other than the writer's)."""
        return not self.writer and any(x["rc"] != 0 for x in self.launches)

    def counts(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for r in self.records:
            out[r.status] = out.get(r.status, 0) + 1
        return out


def launch_margin_s(margin_s: float | None = None) -> float:
    """The grace after the collective timeout (a dead rank's group, a group that does not exit after its last
    case): ``margin_s`` when given, else ``$ROBOCACHE_LAUNCH_MARGIN_S``, else :data:`MARGIN_S`. ``ValueError``
    (one line) unless it is a finite number of seconds > 0."""
    text = os.environ.get(MARGIN_ENV, "").strip() if margin_s is None else None
    if margin_s is None and not text:
        return MARGIN_S
    try:
        value = float(text) if margin_s is None else float(margin_s)
    except (TypeError, ValueError):
        value = math.nan
    if not (math.isfinite(value) and value > 0):
        where, got = (f"${MARGIN_ENV}", text) if margin_s is None else ("margin_s", repr(margin_s))
        raise ValueError(f"{where} must be a number of seconds > 0, got {got}")
    return value


# --- what this machine has -------------------------------------------------------------------------

@functools.lru_cache(maxsize=1)
def gpu_count() -> int:
    """CUDA GPUs visible here, asked in a throw-away process (this one stays CUDA-free);
    ``ROBOCACHE_GPUS`` overrides (tests)."""
    forced = os.environ.get("ROBOCACHE_GPUS", "").strip()
    if forced.isdigit():
        return int(forced)
    code = ("import sys\ntry:\n import torch; n = torch.cuda.device_count()\nexcept Exception:\n n = 0\n"
            "if not n:\n try:\n  import cupy; n = cupy.cuda.runtime.getDeviceCount()\n except Exception:\n  n = 0\n"
            "print(n)")
    try:
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
        return int(out.stdout.strip().splitlines()[-1]) if out.returncode == 0 and out.stdout.strip() else 0
    except (OSError, subprocess.TimeoutExpired, ValueError):
        return 0


def available(device: str) -> tuple[bool, str]:
    """Whether torch.distributed with this device's backend (NCCL on GPUs, Gloo on the CPU) is usable."""
    try:
        import torch.distributed as dist
    except Exception as e:  # noqa: BLE001
        return False, f"torch.distributed cannot be imported: {type(e).__name__}: {e}"
    if not dist.is_available():
        return False, "this torch build has no torch.distributed"
    if device == "gpu" and not dist.is_nccl_available():
        return False, "this torch build has no NCCL backend"
    if device == "cpu" and not dist.is_gloo_available():
        return False, "this torch build has no Gloo backend"
    return True, ""


# --- processes -------------------------------------------------------------------------------------

def processes_with_env(name: str, value: str) -> list[int]:
    """Live (non-zombie) processes whose environment has ``name=value`` (Linux ``/proc``; [] elsewhere)."""
    needle = f"{name}={value}".encode()
    found = []
    try:
        pids = [int(p) for p in os.listdir("/proc") if p.isdigit()]
    except OSError:
        return []
    for pid in pids:
        if pid == os.getpid():
            continue
        try:
            with open(f"/proc/{pid}/environ", "rb") as f:
                env = f.read().split(b"\0")
            with open(f"/proc/{pid}/stat", "rb") as f:
                state = f.read().rsplit(b")", 1)[1].split()[0]
        except OSError:  # gone, or not ours
            continue
        if needle in env and state not in (b"Z", b"X"):
            found.append(pid)
    return found


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            return f.read().rsplit(b")", 1)[1].split()[0] not in (b"Z", b"X")
    except OSError:
        if os.path.isdir("/proc"):
            return False
    try:  # no /proc: signal 0
        os.kill(pid, 0)
        return True
    except OSError:
        return False


def _kill_launch(proc: subprocess.Popen, launch_id: str, grace_s: float = GRACE_S) -> None:
    """Stop a launch: SIGTERM to torchrun's group (it forwards to the ranks), then SIGKILL to every process
    of this launch still there."""
    if proc.poll() is None:
        try:
            os.killpg(proc.pid, signal.SIGTERM)
        except OSError:
            pass
        try:
            proc.wait(grace_s)
        except subprocess.TimeoutExpired:
            pass
    _reap(proc, launch_id)


def _reap(proc: subprocess.Popen, launch_id: str) -> list[int]:
    """SIGKILL torchrun's group and every process carrying this launch's id; returns the pids killed."""
    killed: list[int] = []
    try:
        os.killpg(proc.pid, signal.SIGKILL)  # torchrun leads its own session (start_new_session)
    except OSError:
        pass
    deadline = time.monotonic() + REAP_S
    while (left := processes_with_env(LAUNCH_ENV, launch_id)) and time.monotonic() < deadline:
        for pid in left:
            try:
                os.kill(pid, signal.SIGKILL)
                if pid not in killed:
                    killed.append(pid)
            except OSError:
                pass
        time.sleep(0.2)
    try:
        proc.wait(5)
    except subprocess.TimeoutExpired:
        pass
    return killed


# --- torchrun ----------------------------------------------------------------------------------------

def torchrun_command(k: int, task_path: str | os.PathLike[str], *, nnodes: int = 1, node_rank: int = 0,
                     rdzv_endpoint: str | None = None, rdzv_id: str = "robocache-bench",
                     join_timeout_s: float = 600.0, module: str = "robocache.bench.multigpu.rank") -> list[str]:
    """The torchrun command line of one launch of ``k`` ranks per node; every rank runs ``python -m module
    --task TASK`` (:mod:`robocache.bench.multigpu.rank`; the pipelines suite's DDP training runs its own)."""
    cmd = [sys.executable, "-m", "torch.distributed.run"]
    if nnodes == 1:
        cmd += ["--standalone", "--nnodes", "1"]
    else:
        if not rdzv_endpoint:
            raise ValueError("a multi-node run needs --rdzv-endpoint HOST:PORT (the same on every node)")
        cmd += ["--nnodes", str(nnodes), "--node-rank", str(node_rank), "--rdzv-backend", "c10d",
                "--rdzv-endpoint", rdzv_endpoint, "--rdzv-id", rdzv_id,
                "--rdzv-conf", f"join_timeout={int(join_timeout_s)}"]
    cmd += ["--nproc-per-node", str(k), "--max-restarts", "0", "--monitor-interval", "1",
            "-m", module, "--task", str(task_path)]
    return cmd


_ROOT_CAUSE = re.compile(r"Root Cause.*?rank\s*:\s*(\d+)\s*\(local_rank:\s*(\d+)\).*?exitcode\s*:\s*(-?\d+)",
                         re.S)


def root_cause(log: str) -> str | None:
    """torchrun's "Root Cause" of a failed launch: which rank, which exit code or signal."""
    m = _ROOT_CAUSE.search(log)
    if not m:
        return None
    rank, local, code = m.group(1), m.group(2), int(m.group(3))
    if code < 0:
        try:
            how = f"was killed by {signal.Signals(-code).name}"
        except ValueError:
            how = f"was killed by signal {-code}"
    else:
        how = f"exited with code {code}"
    return f"rank {rank} (local rank {local}) {how}"


_FAILURE = re.compile(r"rank\s*:\s*(\d+)\s*\(local_rank:\s*\d+\)\s*\n\s*exitcode\s*:\s*(-?\d+)")


def _exit_text(code: int) -> str:
    if code < 0:
        try:
            return f"killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"killed by signal {-code}"
    return f"exit code {code}"


def who_died(log: str, ranks: Sequence[int], failed: dict[int, str]) -> str | None:
    """Which local rank died first: of the ranks this node started (``ranks``), those that did not report a
    failure of their own (``failed``: rank -> error, written by ranks whose collective failed after a peer
    died) died without a word (a crash, a kill, ``os._exit``); torchrun's failure table gives their exit."""
    codes = {int(r): int(c) for r, c in _FAILURE.findall(log)}
    silent = [r for r in sorted(ranks) if r not in failed and (r in codes or not codes)]
    if not silent:
        return None
    parts = [f"rank {r} died without reporting an error ({_exit_text(codes[r]) if r in codes else 'exit unknown'})"
             for r in silent]
    after = [f"rank {r}: {failed[r]}" for r in sorted(failed)]
    return "; ".join(parts) + (("; then " + "; ".join(after)) if after else "")


def _last_error(log: str) -> str | None:
    """The last Python exception line in the ranks' output (their tracebacks go to torchrun's log)."""
    lines = [ln.strip() for ln in log.splitlines()]
    for ln in reversed(lines):
        if re.match(r"^[\w.]+(Error|Exception|Interrupt)\b.*:", ln) and "ChildFailedError" not in ln:
            return ln[:300]
    return None


@dataclass
class _Launch:
    rc: int
    status: str | None  # None: finished; "timeout" / "crash": stopped by this launcher
    detail: str
    log: str
    done: list[CaseDone]
    progress: Progress | None
    seconds: float
    died: str | None = None  # which local rank died first, when one did


class Stopped(Exception):
    """The launcher got SIGTERM or SIGHUP while a launch ran: its processes are killed before it exits."""


def _raise_stopped(signum: int, _frame: Any) -> None:
    raise Stopped(f"stopped by {signal.Signals(signum).name}")


@contextlib.contextmanager
def _stop_on_signals():
    """While a launch runs, SIGTERM/SIGHUP raise :class:`Stopped` here: torchrun runs in a session of its own, so
    a SIGTERM to this process (a timeout, a cancelled CI job, asv's own timeout) would not reach it, and the
    launch's ``finally`` kills it instead. Not in the main thread: no handler, the caller's own cleanup applies."""
    previous = {}
    for sig in (signal.SIGTERM, signal.SIGHUP):
        try:
            previous[sig] = signal.signal(sig, _raise_stopped)
        except ValueError:
            pass
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def run_torchrun(cmd: list[str], work: Path, *, k: int, n_cases: int, case_timeout_s: float,
            collective_timeout_s: float, env: dict[str, str],
            on_case: Callable[[CaseDone], None] | None, margin_s: float = MARGIN_S) -> _Launch:
    """Run one torchrun and watch it (:func:`_watch`) until it exits or must be stopped; then kill whatever of
    it is left and read what the ranks wrote (:func:`_outcome`)."""
    launch_id = uuid.uuid4().hex
    log_path = work / "torchrun.log"
    t0 = time.monotonic()
    seen: set[int] = set()

    def new_cases() -> None:  # each case's record, once, as it arrives
        for p in sorted(work.glob("case-*.json"), key=lambda p: int(p.stem.split("-")[1])):
            i = int(p.stem.split("-")[1])
            if i not in seen and (got := messages.read_json(p, CaseDone)) is not None:
                seen.add(i)
                if on_case is not None:
                    on_case(got)

    with _stop_on_signals():
        with open(log_path, "wb") as log:
            proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                    env={**env, LAUNCH_ENV: launch_id}, start_new_session=True)
        try:
            status, detail = _watch(proc, work, t0, new_cases, k=k, n_cases=n_cases, case_timeout_s=case_timeout_s,
                                    collective_timeout_s=collective_timeout_s, margin_s=margin_s)
        finally:
            _kill_launch(proc, launch_id)
    new_cases()
    return _outcome(proc, work, log_path, status, detail, time.monotonic() - t0)


def _watch(proc: subprocess.Popen, work: Path, t0: float, new_cases: Callable[[], None], *, k: int, n_cases: int,
           case_timeout_s: float, collective_timeout_s: float, margin_s: float = MARGIN_S) -> tuple[str | None, str]:
    """Poll a running launch: (None, "") when torchrun exits on its own, else why this launcher stops it:
    a stall (:func:`_stalled`), or a dead rank whose group did not end within the collective timeout."""
    dead_since: float | None = None
    while True:
        try:
            proc.wait(POLL_S)
            return None, ""
        except subprocess.TimeoutExpired:
            pass
        now = time.monotonic()
        new_cases()
        stop = _stalled(messages.read_json(work / "progress.json", Progress), now - t0, k=k, n_cases=n_cases,
                        case_timeout_s=case_timeout_s, collective_timeout_s=collective_timeout_s, margin_s=margin_s)
        if stop is not None:
            return stop
        pids = [x for x in (messages.read_json(p, RankPid) for p in work.glob("pid-*.json")) if x]
        if dead_since is None and any(not _alive(x.pid) for x in pids):
            dead_since = now
        if dead_since is not None and now - dead_since > collective_timeout_s + margin_s:
            return "crash", (f"a rank died and the group did not end within the {collective_timeout_s:g} s collective "
                             f"timeout + {margin_s:g} s; stopped")


def _stalled(prog: Progress | None, running_s: float, *, k: int, n_cases: int, case_timeout_s: float,
             collective_timeout_s: float, margin_s: float = MARGIN_S) -> tuple[str | None, str] | None:
    """(status, why) when the launch must be stopped from its progress file (None: let it run). Status None:
    every case is recorded and only the group's exit hangs."""
    if prog is None:
        if running_s > case_timeout_s:
            return "timeout", (f"the launch of {k} rank(s) did not start its first case within {case_timeout_s:g} s "
                               "(rendezvous or process-group setup); stopped")
        return None
    since = time.time() - prog.time
    if prog.state == "start" and since > case_timeout_s:
        return "timeout", (f"no result within the {case_timeout_s:g} s timeout; the launch of {k} rank(s) was "
                           "stopped (process groups killed)")
    if prog.state == "done" and prog.index >= n_cases - 1 and since > collective_timeout_s + margin_s:
        # every case is recorded; the group hangs in its final barrier or in tearing down NCCL
        return None, (f"the group did not exit within {collective_timeout_s + margin_s:g} s after its last case; "
                      "stopped (its records are complete)")
    if prog.state == "done" and prog.index < n_cases - 1 and since > case_timeout_s:
        return "timeout", (f"the next case did not start within the {case_timeout_s:g} s timeout; the launch of "
                           f"{k} rank(s) was stopped (process groups killed)")
    return None


def _outcome(proc: subprocess.Popen, work: Path, log_path: Path, status: str | None, detail: str,
             seconds: float) -> _Launch:
    """What an ended launch did: its exit code, log, records, last progress and, when it failed on its own,
    which rank died first."""
    log_text = log_path.read_text(errors="replace") if log_path.exists() else ""
    done = [got for p in sorted(work.glob("case-*.json"), key=lambda p: int(p.stem.split("-")[1]))
            if (got := messages.read_json(p, CaseDone)) is not None]
    rc = proc.returncode if proc.returncode is not None else -9
    ranks = [x.rank for x in (messages.read_json(p, RankPid) for p in work.glob("pid-*.json")) if x]
    failed = {x.rank: x.error for x in (messages.read_json(p, RankFailure) for p in work.glob("fail-*.json")) if x}
    return _Launch(rc=rc, status=status, detail=detail, log=log_text, done=done,
                   progress=messages.read_json(work / "progress.json", Progress), seconds=seconds,
                   # a timeout is this launcher's kill: the ranks it stopped did not die on their own
                   died=who_died(log_text, ranks, failed) if (rc != 0 or status) and status != "timeout" else None)


# --- a multi-GPU run, step by step ---------------------------------------------------------------------

def run_multigpu(cases: Sequence[specs.Case], *, device: str, gpus: int | None = None,
                 out_dir: str | os.PathLike[str] = "results", suite: str = "multigpu", frontend: str = "cli",
                 run_id: str | None = None, timing: TimingOptions | dict[str, Any] | None = None,
                 machine: str | None = None, collective_timeout_s: float = COLLECTIVE_TIMEOUT_S,
                 case_timeout_s: float = 600.0, nnodes: int = 1, node_rank: int = 0, rdzv_endpoint: str | None = None,
                 rdzv_id: str = "robocache-bench", seed: int = 0, check_only: bool = False,
                 baselines: dict[str, Baseline] | None = None, add_baselines: bool = True,
                 synthetic: bool = False, git: tuple[str | None, bool | None] | None = None,
                 log: Callable[[str], None] | None = None, margin_s: float | None = None) -> MultiRunResult:
    """Run multi-GPU ``cases`` through torchrun; records go to ``out_dir/<arch>-<machine>/``.

    ``gpus``: GPUs (or, on the CPU, Gloo processes) per node; default: the GPUs visible here (2 on the CPU).
    Cases needing more ranks than ``gpus x nnodes`` are not run (listed in ``not_run``). With
    ``add_baselines`` the one-rank case of every selected case is run too when it was not selected (the
    efficiency needs it); ``baselines`` passes such figures in from elsewhere (front ends: an earlier launch).
    ``git``: (commit, dirty) of the records, else the checkout's (:func:`robocache.bench.context.git_state`).
    ``margin_s``: the grace after ``collective_timeout_s`` before a group with a dead rank, or one that does not
    exit after its last case, is stopped (default: ``$ROBOCACHE_LAUNCH_MARGIN_S``, else :data:`MARGIN_S`).

    The steps: check the arguments, select the cases (:func:`select_cases`), start the run's context (the
    environment captured in a child process), then per world size, ascending, launch torchrun until every
    case of that size has a record (:class:`_MultiRun`).
    """
    t0 = time.perf_counter()
    margin_s = launch_margin_s(margin_s)
    gpus = _check_arguments(cases, device, gpus, nnodes, node_rank)
    res = MultiRunResult(run_id=run_id or new_run_id(), writer=node_rank == 0)
    selected = select_cases(cases, res, gpus=gpus, nnodes=nnodes, node_rank=node_rank, baselines=baselines,
                            add_baselines=add_baselines)
    if selected:
        run = RunContext.start(suite=suite, device=device, frontend=frontend, out_dir=out_dir, run_id=res.run_id,
                               env=capture_env_in_child(device, machine), git=git, synthetic=synthetic)
        task = run.task(timing=TimingOptions.of(timing).with_defaults(time_limit_s=DEFAULT_TIME_LIMIT_S), seed=seed,
                        check_only=check_only)
        multi = _MultiRun(run=run, task=task, res=res, gpus=gpus, nnodes=nnodes, node_rank=node_rank,
                          rdzv_endpoint=rdzv_endpoint, rdzv_id=rdzv_id, collective_timeout_s=collective_timeout_s,
                          case_timeout_s=case_timeout_s, known=dict(baselines or {}), say=log or (lambda s: None),
                          margin_s=margin_s)
        for k in sorted({c.world_size for c in selected}):
            multi.world_size(k, [c for c in selected if c.world_size == k])
    res.wall_s = time.perf_counter() - t0
    return res


def _check_arguments(cases: Sequence[specs.Case], device: str, gpus: int | None, nnodes: int, node_rank: int) -> int:
    """Refuse what cannot run (``ValueError``; ``RuntimeError`` without torch.distributed); the GPUs per node."""
    if device not in ("gpu", "cpu"):
        raise ValueError(f"device must be 'gpu' or 'cpu', got {device!r}")
    if nnodes < 1 or not 0 <= node_rank < nnodes:
        raise ValueError(f"need nnodes >= 1 and 0 <= node_rank < nnodes, got {nnodes}, {node_rank}")
    bad = [c.key for c in cases if not c.distributed]
    if bad:
        raise ValueError(f"not multi-GPU cases (run them with the single-GPU runner): {', '.join(bad[:5])}")
    ok, why = available(device)
    if not ok:
        raise RuntimeError(why)
    if gpus is None:
        gpus = gpu_count() if device == "gpu" else 2
    if gpus < 1:
        raise ValueError(f"no GPUs to run on (--gpus {gpus}); on a machine without GPUs use --device cpu")
    return gpus


def select_cases(cases: Sequence[specs.Case], res: MultiRunResult, *, gpus: int, nnodes: int, node_rank: int,
                 baselines: dict[str, Baseline] | None, add_baselines: bool) -> list[specs.Case]:
    """The cases this run launches, in the order every node agrees on (world size, then grid order): those
    that fit (the others go to ``res.not_run`` with the reason), plus the one-rank baselines they miss."""
    world = gpus * nnodes
    selected: list[specs.Case] = []
    for c in cases:
        if nnodes > 1 and c.world_size != world:
            res.not_run.append((c.key, f"a {nnodes}-node run of {gpus} per node runs the {world}-rank cases"))
        elif nnodes == 1 and c.world_size > gpus:
            res.not_run.append((c.key, f"needs {c.world_size} GPUs, {gpus} here"))
        elif c not in selected:
            selected.append(c)
    if add_baselines and node_rank == 0:
        keys = {c.key for c in selected}
        for c in list(selected):
            bk = c.baseline_key
            if bk and bk not in keys and not (baselines and bk in baselines):
                try:
                    selected.append(specs.find(bk))
                    keys.add(bk)
                except KeyError:
                    pass
    # every node must agree on the case list of the multi-node launch: its order is the grid's
    order = {(p.op, p.tag): i for i, p in enumerate(specs.POINTS)}
    selected.sort(key=lambda c: (c.world_size, order.get((c.op, c.tag), len(order)), c.dtype, c.provider))
    return selected


@dataclass
class _MultiRun:
    """The launches of one multi-GPU run on this node, and what they have recorded so far."""

    run: RunContext
    task: Task  # the options every case shares
    res: MultiRunResult
    gpus: int
    nnodes: int
    node_rank: int
    rdzv_endpoint: str | None
    rdzv_id: str
    collective_timeout_s: float
    case_timeout_s: float
    known: dict[str, Baseline]  # one-rank figures, for the efficiencies of the larger world sizes
    say: Callable[[str], None]
    margin_s: float = MARGIN_S  # the grace after the collective timeout (launch_margin_s)

    def world_size(self, k: int, group: list[specs.Case]) -> None:
        """Launch the ``k``-rank cases until each has a record: after a failed case, again for those after it."""
        multi_node = self.nnodes > 1 and k == self.gpus * self.nnodes
        if self.nnodes > 1 and not multi_node and self.node_rank != 0:
            return  # the one-rank cases of a multi-node run: the node given --node-rank 0 runs them on its own
        name = f"{self.res.run_id}-{self.run.suite}-g{k}"
        remaining = list(group)
        while remaining:
            got = self.launch(k, remaining, name, multi_node)
            self.collect(k, got, name)
            remaining = self.after(k, got, remaining, name, multi_node)

    def launch(self, k: int, cases: list[specs.Case], name: str, multi_node: bool) -> _Launch:
        """One torchrun of ``k`` ranks (per node, ``gpus`` on a multi-node launch) over ``cases``."""
        res = self.res
        with tempfile.TemporaryDirectory(prefix="rcb-multigpu-") as tmp:
            work = Path(tmp)
            lt = LaunchTask(task=self.task, run=self.run, records_name=name, cases=[c.key for c in cases],
                            world_size=k, workdir=str(work), node_rank=self.node_rank if multi_node else 0,
                            collective_timeout_s=float(self.collective_timeout_s), baselines=dict(self.known))
            messages.write_json(work / "task.json", lt)
            cmd = torchrun_command(self.gpus if multi_node else k, work / "task.json",
                                   nnodes=self.nnodes if multi_node else 1, node_rank=self.node_rank,
                                   rdzv_endpoint=self.rdzv_endpoint, rdzv_id=f"{self.rdzv_id}-g{k}",
                                   join_timeout_s=self.case_timeout_s)
            self.say(f"[{k} rank(s){f' over {self.nnodes} nodes' if multi_node else ''}] {len(cases)} case(s): "
                     + " ".join(cmd[1:4]) + " ...")
            got = run_torchrun(cmd, work, k=k, n_cases=len(cases), case_timeout_s=self.case_timeout_s,
                          collective_timeout_s=self.collective_timeout_s, env=child_env(),
                          on_case=self.said if res.writer else None, margin_s=self.margin_s)
        res.launches.append({"world_size": k, "rc": got.rc, "seconds": got.seconds, "cases": len(cases),
                             "status": got.status, "detail": got.detail})
        return got

    def said(self, got: CaseDone) -> None:
        """One line per case as its record arrives."""
        r = got.record
        d = r.distributed
        if d:
            eff = f", efficiency {d.efficiency:.2f}" if d.efficiency is not None else ""
            tail = f"  step {d.step_us:.1f} us, {d.aggregate_items_per_s:.4g} items/s{eff}"
        else:
            tail = f"  {r.reason.splitlines()[0][:100]}" if r.reason else "  "
        self.say(f"  {r.status:<9} {got.key}{tail}")

    def collect(self, k: int, got: _Launch, name: str) -> None:
        """The launch's records and samples into the result; one-rank figures become baselines."""
        res = self.res
        for d in got.done:
            res.records.append(d.record)
            if d.samples_us:
                res.samples[d.key] = d.samples_us
            if k == 1 and (base := Baseline.of(d.record)) is not None:
                self.known[d.key] = base
        path = self.run.path(name)
        if (got.done or res.writer) and path.exists() and path not in res.paths:
            res.paths.append(path)

    def after(self, k: int, got: _Launch, remaining: list[specs.Case], name: str, multi_node: bool
              ) -> list[specs.Case]:
        """After a launch: the cases still to launch (none when it finished them, or when nothing can go on),
        and a record for the case that failed (for each case, when the launch failed before its first)."""
        res, n_done = self.res, len(got.done)
        if n_done >= len(remaining):
            if got.rc != 0 and got.status is None and res.writer:
                self.say(f"  (torchrun exited {got.rc} after its last case: "
                         f"{got.detail or root_cause(got.log) or 'no root cause'})")
            return []
        if not res.writer:  # the writer's node records what happened; this node just reports
            if got.rc != 0 or got.status:
                self.say(f"  launch failed on this node (exit {got.rc}): {root_cause(got.log) or got.detail or ''}")
            return []
        fails, rest = self.failures(k, got, remaining, multi_node)
        self.record_failures(fails, name)
        return rest

    def failures(self, k: int, got: _Launch, remaining: list[specs.Case], multi_node: bool
                 ) -> tuple[list[Record], list[specs.Case]]:
        """(the records of a launch that ended before ``remaining`` was done, the cases to launch again): the case
        it ended on failed; nothing ran: every case failed; a multi-node launch: the rest skipped, no retry."""
        n_done = len(got.done)
        failed = remaining[n_done]
        started = got.progress is not None and got.progress.key == failed.key and got.progress.index == n_done
        status, reason = case_failure(got, "during the case" if started else "before the case started")
        if not started and n_done == 0:
            # nothing ran: the launch itself failed (rendezvous, process group, import); no retry loop
            return [self.failure(c, status, f"the launch of {k} rank(s) failed before its first case: {reason}")
                    for c in remaining], []
        fails = [self.failure(failed, status, reason)]
        if not multi_node:
            return fails, remaining[n_done + 1:]
        return fails + [self.failure(c, "skipped", f"not run: the {self.nnodes}-node launch ended at {failed.key}")
                        for c in remaining[n_done + 1:]], []

    def record_failures(self, fails: list[Record], name: str) -> None:
        """Each failure said, appended to the run's records file (after the launch has ended: one writer at a
        time) and kept in the result."""
        res = self.res
        for r in fails:
            self.say(f"  {r.status:<9} {r.case.id}/{r.case.dtype}/{r.case.provider}  {r.reason.splitlines()[0][:160]}")
        path = self.run.append(fails, name)
        if path not in res.paths:
            res.paths.append(path)
        res.records.extend(fails)

    def failure(self, case: specs.Case, status: str, reason: str) -> Record:
        from .. import worker

        return worker.base_record(self.task, case, status, reason)


def case_failure(got: _Launch, when: str) -> tuple[str, str]:
    """(status, reason) of the case a launch ended on without a record."""
    if got.status:
        return got.status, got.detail + (f"; {got.died}" if got.died else "")
    if got.died:
        return "crash", f"{when}: {got.died} (torchrun exit {got.rc})"
    cause, err = root_cause(got.log), _last_error(got.log)
    return "crash", (f"{when}: torchrun exited {got.rc}" + (f": {cause}" if cause else "")
                     + (f"; last error: {err}" if err else ""))


def child_env() -> dict[str, str]:
    """torchrun's environment: this one's, NVLink multicast off and one OpenMP thread unless set."""
    env = dict(os.environ)
    env.setdefault("NCCL_NVLS_ENABLE", "0")  # never NVLink multicast on shared machines (DESIGN.md)
    env.setdefault("OMP_NUM_THREADS", "1")  # torchrun's own default for k > 1; the same for k = 1
    env.setdefault("PYTHONUNBUFFERED", "1")
    return env
