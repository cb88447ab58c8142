"""Multi-GPU launches: the ``multigpu`` suite through ``torchrun``, one process per GPU.

``robocache-bench run --suite multigpu --gpus N`` comes here. For each world size ``k`` of the selected
cases with ``k <= N`` (ascending, so the one-rank cases, every efficiency's reference, run first), one::

    python -m torch.distributed.run --standalone --nnodes 1 --nproc-per-node k --max-restarts 0 \\
        --monitor-interval 1 -m robocache.bench.distributed --task TASK.json

(the venv's own torchrun: ``sys.executable -m torch.distributed.run``). NCCL on GPUs, Gloo on the CPU. The
ranks write the records through the store (:mod:`robocache.bench.distributed`); this module watches them:

* **collective timeout** (``collective_timeout``, default 120 s) goes to ``init_process_group``: a rank
  waiting in a collective for a dead or hung peer raises after it;
* **a dead rank**: torchrun's agent sees it within its monitor interval and stops the other ranks; should
  the group still be alive ``collective_timeout + MARGIN_S`` after a local rank died, this launcher stops
  it. The case is recorded as ``crash`` with the root cause torchrun reports (which rank, which exit code
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

import functools
import json
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

from . import specs, store
from .schema import FAILED_STATUSES

COLLECTIVE_TIMEOUT_S = 120.0
MARGIN_S = 30.0  # a dead rank must end the launch within the collective timeout plus this
GRACE_S = 10.0  # SIGTERM -> SIGKILL
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
    records: list[dict[str, Any]] = field(default_factory=list)  # this node's view: the writer's records
    samples: dict[str, list[float]] = field(default_factory=dict)  # case key -> the slowest rank's step samples
    not_run: list[tuple[str, str]] = field(default_factory=list)  # (case key, why): more GPUs than present, ...
    launches: list[dict[str, Any]] = field(default_factory=list)  # per torchrun: world size, exit code, seconds
    writer: bool = True  # False on a node other than --node-rank 0: its records are on node 0
    wall_s: float = 0.0

    @property
    def failed(self) -> list[dict[str, Any]]:
        return [r for r in self.records if r["status"] in FAILED_STATUSES]

    @property
    def launch_failed(self) -> bool:
        """A launch that failed without a record saying so (a node other than the writer's)."""
        return not self.writer and any(x["rc"] != 0 for x in self.launches)

    def counts(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for r in self.records:
            out[r["status"]] = out.get(r["status"], 0) + 1
        return out


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
    killed = []
    try:
        os.killpg(proc.pid, signal.SIGKILL)  # torchrun leads its own session (start_new_session)
    except OSError:
        pass
    for _ in range(3):
        left = processes_with_env(LAUNCH_ENV, launch_id)
        if not left:
            break
        for pid in left:
            try:
                os.kill(pid, signal.SIGKILL)
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
                     join_timeout_s: float = 600.0) -> list[str]:
    """The torchrun command line of one launch of ``k`` ranks per node."""
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
            "-m", "robocache.bench.distributed", "--task", str(task_path)]
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


def _read_json(path: Path) -> Any:
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


@dataclass
class _Launch:
    rc: int
    status: str | None  # None: finished; "timeout" / "crash": stopped by this launcher
    detail: str
    log: str
    done: list[dict[str, Any]]
    progress: dict[str, Any] | None
    seconds: float
    died: str | None = None  # which local rank died first, when one did


class Stopped(Exception):
    """The launcher got SIGTERM or SIGHUP while a launch ran: its processes are killed before it exits."""


def _raise_stopped(signum: int, _frame: Any) -> None:
    raise Stopped(f"stopped by {signal.Signals(signum).name}")


def _launch(cmd: list[str], work: Path, *, k: int, n_cases: int, case_timeout_s: float,
            collective_timeout_s: float, env: dict[str, str],
            on_case: Callable[[dict[str, Any]], None] | None) -> _Launch:
    launch_id = uuid.uuid4().hex
    env = {**env, LAUNCH_ENV: launch_id}
    log_path = work / "torchrun.log"
    t0 = time.monotonic()
    status, detail = None, ""
    seen: set[int] = set()
    dead_since: float | None = None
    # torchrun runs in a session of its own, so a SIGTERM to this process (timeout, a cancelled CI job, asv's
    # own timeout) would not reach it: while it runs, SIGTERM/SIGHUP raise here and the finally below kills it.
    previous = {}
    for sig in (signal.SIGTERM, signal.SIGHUP):
        try:
            previous[sig] = signal.signal(sig, _raise_stopped)
        except ValueError:  # not the main thread: no handler, the caller's own cleanup applies
            pass
    try:
        with open(log_path, "wb") as log:
            proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env,
                                    start_new_session=True)
    except BaseException:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        raise
    try:
        while True:
            try:
                proc.wait(POLL_S)
                break
            except subprocess.TimeoutExpired:
                pass
            now = time.monotonic()
            for p in sorted(work.glob("case-*.json")):
                i = int(p.stem.split("-")[1])
                if i not in seen and (got := _read_json(p)) is not None:
                    seen.add(i)
                    if on_case is not None:
                        on_case(got)
            prog = _read_json(work / "progress.json")
            if prog and prog.get("state") == "start":
                running_for = time.time() - float(prog["time"])
                if running_for > case_timeout_s:
                    status = "timeout"
                    detail = (f"no result within the {case_timeout_s:g} s timeout; the launch of {k} rank(s) was "
                              "stopped (process groups killed)")
                    break
            elif prog and prog.get("state") == "done":
                idle_for = time.time() - float(prog["time"])
                if int(prog.get("index", -1)) >= n_cases - 1 and idle_for > collective_timeout_s + MARGIN_S:
                    # every case is recorded; the group hangs in its final barrier or in tearing down NCCL
                    detail = (f"the group did not exit within {collective_timeout_s + MARGIN_S:g} s after its last "
                              "case; stopped (its records are complete)")
                    break
                if int(prog.get("index", -1)) < n_cases - 1 and idle_for > case_timeout_s:
                    status = "timeout"
                    detail = (f"the next case did not start within the {case_timeout_s:g} s timeout; the launch of "
                              f"{k} rank(s) was stopped (process groups killed)")
                    break
            elif not prog and now - t0 > case_timeout_s:
                status = "timeout"
                detail = (f"the launch of {k} rank(s) did not start its first case within {case_timeout_s:g} s "
                          "(rendezvous or process-group setup); stopped")
                break
            pids = [x for x in (_read_json(p) for p in work.glob("pid-*.json")) if x]
            if dead_since is None and any(not _alive(int(x["pid"])) for x in pids):
                dead_since = now
            if dead_since is not None and now - dead_since > collective_timeout_s + MARGIN_S:
                status = "crash"
                detail = (f"a rank died and the group did not end within the {collective_timeout_s:g} s collective "
                          f"timeout + {MARGIN_S:g} s; stopped")
                break
    finally:
        try:
            _kill_launch(proc, launch_id)
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)
    log_text = log_path.read_text(errors="replace") if log_path.exists() else ""
    done = []
    for p in sorted(work.glob("case-*.json"), key=lambda p: int(p.stem.split("-")[1])):
        got = _read_json(p)
        if got is not None:
            done.append(got)
            i = int(p.stem.split("-")[1])
            if i not in seen and on_case is not None:
                seen.add(i)
                on_case(got)
    rc = proc.returncode if proc.returncode is not None else -9
    ranks = [int(x["rank"]) for x in (_read_json(p) for p in work.glob("pid-*.json")) if x]
    failed = {int(x["rank"]): str(x["error"]) for x in (_read_json(p) for p in work.glob("fail-*.json")) if x}
    return _Launch(rc=rc, status=status, detail=detail, log=log_text, done=done,
                   progress=_read_json(work / "progress.json"), seconds=time.monotonic() - t0,
                   # a timeout is this launcher's kill: the ranks it stopped did not die on their own
                   died=who_died(log_text, ranks, failed) if (rc != 0 or status) and status != "timeout" else None)


def _capture_env(device: str, machine: str | None) -> dict[str, Any]:
    """The schema ``Env``, captured in a child process: this one must not hold a CUDA context on GPU 0 (the
    ranks' NVML sampling would count it as another process on their GPU)."""
    code = ("import json, sys\nfrom robocache.bench.env import capture_env\n"
            "print(json.dumps(capture_env(sys.argv[1], machine=sys.argv[2] or None)))")
    out = subprocess.run([sys.executable, "-c", code, device, machine or ""], capture_output=True, text=True,
                         timeout=300)
    if out.returncode != 0:
        raise RuntimeError(f"capturing the environment failed: {out.stderr.strip()[-500:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def _failure_record(base: dict[str, Any], case: specs.Case, status: str, reason: str, synthetic: bool
                    ) -> dict[str, Any]:
    from . import worker

    rec = worker.base_record(base, case)
    rec.update(status=status, reason=reason, synthetic=synthetic)
    return rec


def _append(folder: Path, name: str, env: dict[str, Any], new: list[dict[str, Any]]) -> Path:
    """Add records to a world size's file (after its launch has ended: one writer at a time)."""
    path = folder / f"{store.safe_component(name)}{store.RECORDS_SUFFIX}"
    previous = list(store.load(path).records) if path.exists() else []
    return store.write_records(folder, env, [*previous, *new], name=name, unique=False)


def run_multigpu(cases: Sequence[specs.Case], *, device: str, gpus: int | None = None,
                 out_dir: str | os.PathLike[str] = "results", suite: str = "multigpu", frontend: str = "cli",
                 run_id: str | None = None, timing: dict[str, Any] | None = None, machine: str | None = None,
                 collective_timeout_s: float = COLLECTIVE_TIMEOUT_S, case_timeout_s: float = 600.0,
                 nnodes: int = 1, node_rank: int = 0, rdzv_endpoint: str | None = None,
                 rdzv_id: str = "robocache-bench", seed: int = 0, check_only: bool = False,
                 baselines: dict[str, dict[str, Any]] | None = None, add_baselines: bool = True,
                 synthetic: bool = False, log: Callable[[str], None] | None = None) -> MultiRunResult:
    """Run multi-GPU ``cases`` through torchrun; records go to ``out_dir/<arch>-<machine>/``.

    ``gpus``: GPUs (or, on the CPU, Gloo processes) per node; default: the GPUs visible here (2 on the CPU).
    Cases needing more ranks than ``gpus x nnodes`` are not run (listed in ``not_run``). With
    ``add_baselines`` the one-rank case of every selected case is run too when it was not selected (the
    efficiency needs it); ``baselines`` passes such figures in from elsewhere (front ends: an earlier launch).
    """
    from . import runner

    t0 = time.perf_counter()
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
    say = log or (lambda s: None)
    res = MultiRunResult(run_id=run_id or runner.new_run_id(), writer=node_rank == 0)
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
    if not selected:
        res.wall_s = time.perf_counter() - t0
        return res

    env = _capture_env(device, machine)
    commit, dirty = runner.git_state()
    slug = (env.get("arch") or "gpu").lower() if device == "gpu" else "cpu"
    folder = Path(out_dir) / store.safe_component(f"{slug}-{env['machine']}")
    opts = {"time_limit_s": DEFAULT_TIME_LIMIT_S, **(timing or {})}
    base_task = {"run_id": res.run_id, "suite": suite, "frontend": frontend, "device": device, "cache": "warm",
                 "git_commit": commit, "git_dirty": dirty, "timing": opts, "seed": seed,
                 "collective_timeout": float(collective_timeout_s), "check_only": check_only, "env": env,
                 "records_folder": str(folder), "synthetic": synthetic}
    known = dict(baselines or {})
    child_env = dict(os.environ)
    child_env.setdefault("NCCL_NVLS_ENABLE", "0")  # never NVLink multicast on shared machines (DESIGN.md)
    child_env.setdefault("OMP_NUM_THREADS", "1")  # torchrun's own default for k > 1; the same for k = 1
    child_env.setdefault("PYTHONUNBUFFERED", "1")

    sizes = sorted({c.world_size for c in selected})
    for k in sizes:
        group = [c for c in selected if c.world_size == k]
        multi_node = nnodes > 1 and k == world
        if nnodes > 1 and not multi_node and node_rank != 0:
            continue
        per_node = gpus if multi_node else k
        name = f"{res.run_id}-{suite}-g{k}"
        remaining = list(group)
        while remaining:
            with tempfile.TemporaryDirectory(prefix="rcb-multigpu-") as tmp:
                work = Path(tmp)
                task = {**base_task, "cases": [c.key for c in remaining], "world_size": k, "workdir": str(work),
                        "node_rank": node_rank if multi_node else 0, "records_name": name,
                        "baselines": known}
                (work / "task.json").write_text(json.dumps(task, allow_nan=False))
                cmd = torchrun_command(per_node, work / "task.json", nnodes=nnodes if multi_node else 1,
                                       node_rank=node_rank, rdzv_endpoint=rdzv_endpoint, rdzv_id=f"{rdzv_id}-g{k}",
                                       join_timeout_s=case_timeout_s)
                say(f"[{k} rank(s){f' over {nnodes} nodes' if multi_node else ''}] {len(remaining)} case(s): "
                    + " ".join(cmd[1:4]) + " ...")

                def on_case(got: dict[str, Any]) -> None:
                    r = got["record"]
                    d = r.get("distributed") or {}
                    eff = d.get("efficiency")
                    say(f"  {r['status']:<9} {got['key']}"
                        + (f"  step {d['step_us']:.1f} us, {d['aggregate_items_per_s']:.4g} items/s"
                           + (f", efficiency {eff:.2f}" if eff is not None else "") if d else
                           f"  {(r.get('reason') or '').splitlines()[0][:100] if r.get('reason') else ''}"))
                got = _launch(cmd, work, k=k, n_cases=len(remaining), case_timeout_s=case_timeout_s,
                              collective_timeout_s=collective_timeout_s, env=child_env,
                              on_case=on_case if res.writer else None)
                res.launches.append({"world_size": k, "rc": got.rc, "seconds": got.seconds, "cases": len(remaining),
                                     "status": got.status, "detail": got.detail})
            for d in got.done:
                rec = d["record"]
                res.records.append(rec)
                if d.get("samples_us"):
                    res.samples[d["key"]] = d["samples_us"]
                if k == 1 and rec["status"] == "ok" and rec.get("distributed"):
                    known[d["key"]] = {"step_us": rec["distributed"]["step_us"], "items": rec["case"]["items"],
                                       "host_bound": any("host-bound" in x for x in rec["health"]["reasons"])}
            n_done = len(got.done)
            if n_done > 0 or (res.writer and (folder / f"{store.safe_component(name)}{store.RECORDS_SUFFIX}").exists()):
                path = folder / f"{store.safe_component(name)}{store.RECORDS_SUFFIX}"
                if path not in res.paths and path.exists():
                    res.paths.append(path)
            if n_done >= len(remaining):
                if got.rc != 0 and got.status is None and res.writer:
                    say(f"  (torchrun exited {got.rc} after its last case: "
                        f"{got.detail or root_cause(got.log) or 'no root cause'})")
                break
            if not res.writer:  # the writer's node records what happened; this node just reports
                if got.rc != 0 or got.status:
                    say(f"  launch failed on this node (exit {got.rc}): {root_cause(got.log) or got.detail or ''}")
                break
            failed = remaining[n_done]
            prog = got.progress or {}
            started = prog.get("key") == failed.key and prog.get("index") == n_done
            when = "during the case" if started else "before the case started"
            if got.status:
                status, reason = got.status, got.detail
                if got.died:
                    reason += f"; {got.died}"
            elif got.died:
                status, reason = "crash", f"{when}: {got.died} (torchrun exit {got.rc})"
            else:
                cause, err = root_cause(got.log), _last_error(got.log)
                status = "crash"
                reason = (f"{when}: torchrun exited {got.rc}" + (f": {cause}" if cause else "")
                          + (f"; last error: {err}" if err else ""))
            if not started and n_done == 0:
                # nothing ran: the launch itself failed (rendezvous, process group, import); no retry loop
                fails = [_failure_record(base_task, c, status, f"the launch of {k} rank(s) failed before its first "
                                         f"case: {reason}", synthetic) for c in remaining]
                remaining = []
            elif nnodes > 1 and multi_node:
                fails = [_failure_record(base_task, failed, status, reason, synthetic)]
                fails += [_failure_record(base_task, c, "skipped", f"not run: the {nnodes}-node launch ended at "
                                          f"{failed.key}", synthetic) for c in remaining[n_done + 1:]]
                remaining = []
            else:
                fails = [_failure_record(base_task, failed, status, reason, synthetic)]
                remaining = remaining[n_done + 1:]
            for r in fails:
                say(f"  {r['status']:<9} {r['case']['id']}/{r['case']['dtype']}/{r['case']['provider']}  "
                    f"{r['reason'].splitlines()[0][:160]}")
            path = _append(folder, name, env, fails)
            if path not in res.paths:
                res.paths.append(path)
            res.records.extend(fails)
    res.wall_s = time.perf_counter() - t0
    return res
