"""Runs a suite: one process per case, every outcome a status, every result a record in the store.

Isolation: each case runs in its own process, forked from a forkserver that has
already imported what the run's cases need (torch/CuPy/robocache on a GPU; on a CPU
only their providers' modules: :func:`preload_for`), so a case costs a fork plus a CUDA
context, not a Python start-up, and that never touches CUDA itself. A kernel fault or an
``abort()`` kills only that case's process (status ``crash``); a case that does not
finish within its timeout has its whole process group killed (``timeout``); an
out-of-memory is ``oom``; an unavailable provider is ``skipped`` with the reason;
a wrong result is ``incorrect``. The run goes on, records are checkpointed to the
run's file as they come, and the exit code says whether anything failed.

Optional compile pre-pass (``precompile_jobs > 0``): before the ceiling and the timing
pass, each ``torch_compile*`` case is called once, with its own inputs, in up to N
processes at a time, so Inductor's on-disk caches (FX graph, AOT autograd, Triton
binaries) hold its compiled code when the case's timing process compiles it again. The
timing pass is unchanged: its process still compiles (now from the cache), checks and
warms up as before. A pre-pass failure is only counted; the case then compiles as
without the pre-pass.
"""
from __future__ import annotations

import multiprocessing as mp
import multiprocessing.connection
import os
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import msgspec

from . import messages, specs, store, worker
from .. import providers as provider_table
from ..providers import COMPILE, torch_compile
from .context import RunContext, git_state
from .messages import Ceiling, Precompiled, Task
from .schema import FAILED_STATUSES, Dispatch, Quantiles, Record

# `run --processes K`: a case whose first process measured a median under this many us is timed in K fresh
# processes and reported as their median. Below it a case's median moves 1.4-3.7% (sd) from one process to the next
# on the H200 while a process's own sd is 0.15-0.5%; from 13 us up under 0.7% (docs/regressions.md, "How much a
# case moves from one process to the next").
PROCESSES_BELOW_US = 12.0  # in the gap between the quick suite's 10.7 us and 13.8 us cases: none flips night to night
MAX_PROCESSES = 16

PRELOAD = ["numpy", "torch", "cupy", "robocache", "robocache.providers", "robocache.bench.worker",
           "robocache.bench.timing", "robocache.bench.env", "robocache.bench.runner", *torch_compile.PRELOAD]
# what every case process imports, whatever its provider: a CPU run of NumPy cases preloads only these
BASE_PRELOAD = ("numpy", "robocache", "robocache.providers", "robocache.bench.worker", "robocache.bench.timing",
                "robocache.bench.env", "robocache.bench.runner")
COMPILED_PREFIX = COMPILE  # providers whose cases the pre-pass compiles: torch_compile, torch_compile@<mode>
_CTX: Any = None
_PRELOADED: frozenset[str] = frozenset()  # what the running forkserver imported (set_forkserver_preload)


def preload_for(cases: list[specs.Case], device: str) -> list[str]:
    """The modules the forkserver imports before it forks a run's case processes (:data:`PRELOAD`'s order).

    A GPU run preloads them all (torch and CuPy time every GPU case). A CPU run preloads what its cases'
    providers need (:attr:`Provider.requires`, torch for the ones on torch tensors, Dynamo and Inductor for
    torch.compile): importing torch, Dynamo and Inductor took 12.6 CPU-s on this 2-core machine, against 0.6 s
    for the rest, and a run of NumPy cases never uses them. A provider outside the table (a test's
    ``module:attr``) gets the whole list: what it needs is unknown."""
    if device != "cpu":
        return list(PRELOAD)
    want = set(BASE_PRELOAD)
    for c in cases:
        try:
            p = provider_table.get(c.provider)
        except ValueError:
            return list(PRELOAD)
        want.update(p.requires)
        if p.array_kind == "torch":
            want.add("torch")
        if compiles(c.provider):
            want.update(("torch", *torch_compile.PRELOAD))
    return [m for m in PRELOAD if m in want]


def _context(preload: list[str] | None = None):
    """A forkserver context with the heavy imports preloaded (spawn where forkserver is missing).

    ``preload``: the modules a run's cases need (:func:`preload_for`); None: the running forkserver's, or all of
    :data:`PRELOAD` before one runs. A forkserver already running without some of them is stopped and started
    again with both sets (one process running several suites, a test session's worker: a torch run after a NumPy
    run must not import torch in every case process)."""
    global _CTX, _PRELOADED
    if _CTX is None:
        torch_compile.prepare_process_env()  # inherited by the forkserver and every case process
        try:
            _CTX = mp.get_context("forkserver")
        except ValueError:
            _CTX = mp.get_context("spawn")
            return _CTX
    if _CTX.get_start_method() != "forkserver":
        return _CTX
    want = frozenset(PRELOAD if preload is None and not _PRELOADED else preload or ())
    if not want <= _PRELOADED:
        from multiprocessing import forkserver

        server = forkserver._forkserver
        if _PRELOADED:  # a restart: stop it (the next Process starts it again), where this Python can
            if not hasattr(server, "_stop"):
                return _CTX  # the cases import what is missing themselves
            server._stop()
        _PRELOADED = _PRELOADED | want
        _CTX.set_forkserver_preload([m for m in PRELOAD if m in _PRELOADED]
                                    + sorted(_PRELOADED.difference(PRELOAD)))
    return _CTX


@dataclass
class RunResult:
    run_id: str
    path: Path | None
    records: list[Record] = field(default_factory=list)
    env: dict[str, Any] = field(default_factory=dict)
    ceiling: Ceiling | None = None  # status "failed" when the measurement failed (GPU runs only)
    wall_s: float = 0.0

    precompile: dict[str, Any] | None = None  # the pre-pass's summary (see precompile()), None when off

    @property
    def failed(self) -> list[Record]:
        return [r for r in self.records if r.status in FAILED_STATUSES]

    @property
    def ceiling_failed(self) -> bool:
        """A GPU run whose copy-ceiling measurement failed: no record has a % of ceiling."""
        return self.ceiling is not None and self.ceiling.status == "failed"

    def counts(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for r in self.records:
            out[r.status] = out.get(r.status, 0) + 1
        return out


def detect_device() -> str:
    """"gpu" when a CUDA device is usable (asked in a throw-away process, so this one stays CUDA-free)."""
    code = "import cupy, sys; sys.exit(0 if cupy.cuda.runtime.getDeviceCount() > 0 else 1)"
    try:
        ok = subprocess.run([os.sys.executable, "-c", code], capture_output=True, timeout=60).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        ok = False
    return "gpu" if ok else "cpu"


def run_in_process(task: Task, timeout_s: float) -> tuple[str, Record | Ceiling | None, str]:
    """Run ``task`` in its own process. Returns (outcome, answer, detail) with outcome ok|timeout|crash|invalid:
    the answer (a :class:`Record`, or a :class:`Ceiling` for a ceiling task) is decoded with its type, so a
    record the schema refuses (a NaN figure, a misspelt status) is ``invalid`` with the reason."""
    kind = Ceiling if task.kind == "ceiling" else Record
    ctx = _context()
    with tempfile.TemporaryDirectory(prefix="rcb-") as tmp:
        result_path = os.path.join(tmp, "result.msgpack")
        proc = ctx.Process(target=worker.run_task, args=(messages.pack(task), result_path), daemon=False)
        proc.start()
        try:
            proc.join(timeout_s)
        except BaseException:
            # Ctrl-C (KeyboardInterrupt) or another exit while the case runs: the case process has its own process
            # group (Ctrl-C does not reach it), so it would outlive this folder and print a traceback on writing
            # into it after "interrupted" (issue 24); it is stopped first, its compile workers with it
            _kill_group(proc.pid)
            if proc.is_alive():  # interrupted before it made its own group: the process itself
                proc.kill()
            proc.join(10)
            raise
        late = proc.is_alive()
        if late:
            _kill_group(proc.pid)
            proc.join(10)
        else:
            _kill_group(proc.pid)  # leftovers (compile workers) of a finished case
        if os.path.exists(result_path):  # (after a timeout: it finished just as the timeout struck; kept)
            with open(result_path, "rb") as f:
                data = f.read()
            try:
                return "ok", messages.unpack(data, kind), ""
            except (msgspec.ValidationError, msgspec.DecodeError) as e:
                return "invalid", None, f"the case process's {kind.__name__.lower()} is invalid: {e}"
        if late:
            return "timeout", None, f"no result within the {timeout_s:g} s timeout; process group killed"
        code = proc.exitcode
        if code is not None and code < 0:
            try:
                sig = signal.Signals(-code).name
            except ValueError:
                sig = f"signal {-code}"
            return "crash", None, f"case process killed by {sig} (exit {code}) before writing a result"
        return "crash", None, f"case process exited with code {code} without a result"


def _kill_group(pid: int | None) -> None:
    if pid is None:
        return
    try:
        # The case process made itself a group leader (worker.run_task), so its pid is the group id.
        # No os.kill fallback: a reaped pid may already belong to an unrelated process.
        os.killpg(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError, OSError):
        pass


def compiles(provider: str) -> bool:
    """Whether cases of ``provider`` compile with torch.compile (``module:attr`` test providers by their attr)."""
    return provider.rsplit(":", 1)[-1].lower().startswith(COMPILED_PREFIX)


def precompile_task(data: bytes, result_path: str) -> None:
    """Pre-pass process entry point: the case of the MessagePack-encoded :class:`Task` ``data`` called once on
    its own inputs, which compiles it and leaves the compiled code in Inductor's on-disk caches. No check, no
    timing. Writes a :class:`Precompiled` (MessagePack) to ``result_path``."""
    if hasattr(os, "setsid"):
        try:
            os.setsid()  # own process group, so a timeout kills its compile workers too
        except OSError:
            pass
    t0 = time.perf_counter()
    task = messages.unpack(data, Task)
    counts: dict[str, int] = {}
    try:
        _no_tuning_cache()
        case = specs.find(task.case_key)
        prep, skip = worker.prepare(case, task.device, task.seed)
        if prep is None:
            status, reason = "skipped", skip
        else:
            prep.call()
            torch = sys.modules.get("torch")
            if task.device == "gpu" and torch is not None and torch.cuda.is_initialized():
                torch.cuda.synchronize()  # a fault in the call surfaces here, in this process
            from torch._dynamo.utils import counters

            counts = {k: int(counters["inductor"][k]) for k in ("fxgraph_cache_hit", "fxgraph_cache_miss")}
            status, reason = "ok", None
    except BaseException as e:  # noqa: BLE001 - every failure is a status; the timing pass compiles anyway
        status, reason, counts = worker.classify(e), f"{type(e).__name__}: {str(e)[:400]}", {}
    res = Precompiled(status=status, reason=reason, compile_s=time.perf_counter() - t0, **counts)
    tmp = result_path + ".tmp"
    try:
        with open(tmp, "wb") as f:
            f.write(messages.pack(res))
        os.replace(tmp, result_path)
    except FileNotFoundError:  # the run was interrupted and removed its temporary folder: nobody reads this
        return


def _no_tuning_cache() -> None:
    """Keep the pre-pass from storing tuning decisions: only compiled code may reach the timing pass.

    Inductor benchmarks Triton configurations on the GPU at a kernel's first launch (more of them, plus
    coordinate descent, in max-autotune) and caches the winner on disk. The pre-pass shares the GPU among N
    processes, so its timings, and the winners they pick, are distorted. With ``autotune_local_cache`` off
    (a flag Inductor leaves out of the FX-graph cache key, so the timing process still hits that cache) the
    pre-pass stores no winner, and the kernels it generates carry the flag, so the timing process tunes
    them itself, in its own first call on an otherwise idle GPU, as a process with a cold cache does.
    """
    try:
        from torch._inductor import config as inductor_config
    except Exception:  # noqa: BLE001 - no torch/inductor: nothing compiles, nothing to keep
        return
    inductor_config.autotune_local_cache = False


def warm_module_task(op: str, options: tuple[str, ...]) -> None:
    """Pre-pass process entry point: build robocache's kernel module of ``op`` with the NVRTC ``options`` once,
    so CuPy's on-disk kernel cache holds it and no timing process compiles it (a fresh H100 spent ~20 s in the
    first resample case and ~20 s in the first fuse case compiling the module and the tuner's builds)."""
    try:
        from robocache import _cuda

        _cuda._module(op, 0, tuple(options)).get_function(_cuda.first_entry(op))
    except Exception:  # noqa: BLE001 - only a warm-up: the timing pass compiles whatever is missing
        pass


def _module_builds(cases: list[specs.Case]) -> list[tuple[str, tuple[str, ...]]]:
    """The (op, NVRTC options) modules the robocache cases of ``cases`` may build: every op's default build, and
    the tuner's candidate builds where the op's launch is tuned (``Op.tuned_launch``; robocache/_tune.py), with
    the other modules those candidates may launch (``_tune.side_modules``: the column split's, the element
    kernel's)."""
    from robocache import _cuda, _tune

    ops_ = sorted({c.op for c in cases if c.provider.startswith("robocache") and c.op in _cuda.OPS})
    builds = _tune.builds()  # every build a first call's candidates may ask for (the walk's, the prefetch's too)
    tuned = [op for op in ops_ if specs.ops.get(op).tuned_launch]
    extra = list(dict.fromkeys(m for op in tuned for m in _tune.side_modules(op)))
    return [(op, b) for op in ops_ for b in (builds if op in tuned else [()])] + extra


def precompile(cases: list[specs.Case], run: RunContext, jobs: int, timeout_s: float, progress: bool = False,
               **options: Any) -> dict[str, Any]:
    """Run :func:`precompile_task` for every torch.compile case of ``cases``, at most ``jobs`` processes at a
    time, each killed after ``timeout_s``; ``options``: the run's task options (:meth:`RunContext.task`).
    Returns a summary; never raises for a task's failure."""
    todo = [c for c in cases if compiles(c.provider)]
    t0 = time.perf_counter()
    out: dict[str, Any] = {"jobs": jobs, "cases": len(todo), "ok": 0, "failed": [], "compile_s": [],
                           "fxgraph_cache_hit": 0, "fxgraph_cache_miss": 0, "wall_s": 0.0}
    if jobs < 1:
        return out
    ctx = _context(preload_for(todo, run.env.device))
    # robocache's kernel modules build beside the torch.compile cases (NVRTC, one CPU core each)
    builds = _module_builds(cases) if run.env.device == "gpu" else []
    warmers = [ctx.Process(target=warm_module_task, args=(op, opts), daemon=True) for op, opts in builds]
    out["modules"] = len(warmers)
    deadline = time.monotonic() + timeout_s
    started: list[Any] = []

    def start_warmers(n: int) -> None:  # at most n module builds at a time beside the compile processes
        while warmers and sum(w.is_alive() for w in started) < n:
            w = warmers.pop(0)
            w.start()
            started.append(w)

    start_warmers(jobs)
    try:
        _precompile_cases(todo, run, jobs, timeout_s, out, ctx, **options)
        while warmers:  # the rest of the builds, `jobs` at a time
            start_warmers(jobs)
            mp.connection.wait([w.sentinel for w in started if w.is_alive()], timeout=0.2)
    finally:
        warmers.clear()
        for w in started:
            w.join(max(0.0, deadline - time.monotonic()))
            if w.is_alive():
                w.kill()
                w.join(10)
    out["wall_s"] = time.perf_counter() - t0
    if progress:
        print(f"precompile: {out['ok']} of {len(todo)} torch.compile cases compiled and {out['modules']} robocache "
              f"kernel modules built in {out['wall_s']:.0f} s with {jobs} processes"
              + (f"; {len(out['failed'])} failed (they compile in the timing pass)" if out["failed"] else ""),
              file=sys.stderr)
    return out


def _precompile_cases(todo: list[specs.Case], run: RunContext, jobs: int, timeout_s: float, out: dict[str, Any],
                      ctx: Any, **options: Any) -> None:
    """The torch.compile cases of the pre-pass, at most ``jobs`` processes at a time; results into ``out``."""
    if not todo:
        return
    queue = list(todo)
    running: dict[Any, tuple[specs.Case, str, float]] = {}  # process -> (case, result path, start)
    with tempfile.TemporaryDirectory(prefix="rcb-pre-") as tmp:
        while queue or running:
            while queue and len(running) < jobs:
                case = queue.pop(0)
                path = os.path.join(tmp, f"{len(queue)}-{uuid.uuid4().hex[:6]}.msgpack")
                proc = ctx.Process(target=precompile_task, args=(messages.pack(run.task(case.key, **options)), path),
                                   daemon=False)
                proc.start()
                running[proc] = (case, path, time.monotonic())
            try:
                mp.connection.wait([p.sentinel for p in running], timeout=0.2)
            except BaseException:  # Ctrl-C: no pre-pass process outlives the run (nor writes into a removed folder)
                for proc in running:
                    _kill_group(proc.pid)
                    if proc.is_alive():
                        proc.kill()
                    proc.join(10)
                raise
            for proc, (case, path, start) in list(running.items()):
                late = time.monotonic() - start > timeout_s
                if proc.is_alive() and not late:
                    continue
                _kill_group(proc.pid)  # leftovers of a finished task, or the whole task on timeout
                proc.join(10)
                del running[proc]
                result = None
                if os.path.exists(path):
                    with open(path, "rb") as f:
                        data = f.read()
                    try:
                        result = messages.unpack(data, Precompiled)
                    except (msgspec.ValidationError, msgspec.DecodeError) as e:
                        result = Precompiled(status="error", reason=f"invalid answer: {e}")
                if result is None:
                    why = (f"no result within the {timeout_s:g} s timeout" if late
                           else f"process exited with code {proc.exitcode} without a result")
                    result = Precompiled(status="timeout" if late else "crash", reason=why)
                if result.status == "ok":
                    out["ok"] += 1
                    out["compile_s"].append(round(result.compile_s, 3))
                    out["fxgraph_cache_hit"] += result.fxgraph_cache_hit
                    out["fxgraph_cache_miss"] += result.fxgraph_cache_miss
                else:
                    out["failed"].append({"case": case.key, "status": result.status, "reason": result.reason})


# What a resumed run must share with the run it continues (schema ``Env``): the same machine, GPU, driver, CPU,
# kernel and libraries, and the same host (hostname and host_id), so every record in the file is where its env says
# (the rewritten file carries this process's env for the kept records too); and the same sources, which the commit
# label alone cannot promise where it comes from ROBOCACHE_GIT_COMMIT.
RESUME_SAME = ("machine", "device", "gpu_name", "arch", "compute_capability", "gpu_count", "gpu_memory_gb",
               "sm_count", "l2_mb", "driver", "cuda", "cpu", "python", "libs", "kernel", "hostname", "host_id",
               "sources")


@dataclass
class Resume:
    """:func:`resume_plan`'s answer: the run to continue and what is left of it."""
    path: Path  # the run file, rewritten with the kept and the new records
    run_id: str
    kept: list[Record]  # the records of the points measured whole, in file order
    todo: list[specs.Case]  # the cases of every point not measured whole, in the run's order
    env: dict[str, Any]  # this process's environment (checked against the file's)


def point_of(key: str) -> str:
    """A case key's point: op/tag/dtype (its providers are measured side by side, one after another)."""
    return key.rsplit("/", 1)[0]


def resume_plan(path: str | os.PathLike[str], cases: list[specs.Case], *, suite: str, device: str,
                machine: str | None = None, git: tuple[str | None, bool | None] | None = None,
                env: dict[str, Any] | None = None, cache: str = "warm", timing: Any = None,
                processes: int = 1, processes_below_us: float = PROCESSES_BELOW_US) -> Resume:
    """How to continue the run whose records file is ``path`` (cut short by a time limit or a killed runner) with
    ``cases``, the cases of the same command. A point (op/tag/dtype) whose every provider has a record (of any
    status) is kept; the one point the cut left measured in part is measured again whole (its ratios stay side by
    side), its old records dropped. ``ValueError`` with one line, before anything runs, when the file does not
    load or is not this run: another suite; cases this command would not run, or a command whose first points are
    not the file's (other filters: its points must be this command's first ones, all whole but the last); an
    unknown or another commit, uncommitted changes then or now; another cache or timer options
    (``timing``: :class:`messages.TimingOptions`; unset, the timer's default); another machine, GPU, driver,
    library set or host (:data:`RESUME_SAME`); a file outside its machine's folder. ``git`` and ``env`` default
    to this process's."""
    from . import env as envmod

    p = Path(path)
    records, why = store.read_file(str(p))
    if why is not None:
        raise ValueError(f"--resume {p}: {why}")
    if not records:
        raise ValueError(f"--resume {p}: the file holds no records: start a new run")
    ids = {r.run_id for r in records}
    if len(ids) != 1:
        raise ValueError(f"--resume {p}: records of {len(ids)} runs ({', '.join(sorted(ids))}): not one run's file")
    first = records[0]
    if {r.suite for r in records} != {suite}:
        raise ValueError(f"--resume {p}: a run of suite {first.suite!r}, not {suite!r}")
    keys = {c.key for c in cases}
    stray = sorted(k for k in (f"{r.case.id}/{r.case.dtype}/{r.case.provider}" for r in records) if k not in keys)
    if stray:
        raise ValueError(f"--resume {p}: it has cases this command would not run ({stray[0]}"
                         f"{f' and {len(stray) - 1} more' if len(stray) > 1 else ''}): resume with the run's "
                         "own --ops, --providers, --dtypes, --cases and --sample-seed")
    have = {f"{r.case.id}/{r.case.dtype}/{r.case.provider}" for r in records}
    order = list(dict.fromkeys(point_of(c.key) for c in cases))  # the command's points, in run order
    mine = {point_of(k) for k in have}
    whole = {pt for pt in mine if all(c.key in have for c in cases if point_of(c.key) == pt)}
    if set(order[:len(mine)]) != mine or len(mine - whole) > 1 or (mine - whole and order[len(mine) - 1] in whole):
        raise ValueError(f"--resume {p}: its points are not this command's first ones, whole but the last (other "
                         "--ops, --providers, --dtypes or --cases than the run's): resume with the run's own filters")
    why = _git_mismatch(records, git if git is not None else git_state())
    why = (why or _method_mismatch(records, cache, timing)
           or _processes_mismatch(records, processes, processes_below_us))
    now = env if env is not None else envmod.capture_env(device, machine=machine)
    old = msgspec.to_builtins(first.env)
    why = why or next((f"its {k} is {old.get(k)!r}, here it is {now.get(k)!r}: a resumed run continues on the "
                       "same machine and sources" for k in RESUME_SAME if old.get(k) != now.get(k)), None)
    if why:
        raise ValueError(f"--resume {p}: {why}; start a new run")
    run = RunContext.start(suite=suite, device=device, out_dir=p.parent.parent, env=now, run_id=first.run_id,
                           git=(None, None), name=p.name.removesuffix(store.RECORDS_SUFFIX))
    if run.path() != p:
        raise ValueError(f"--resume {p}: not in its machine's folder ({run.path()}): resume the file where the run "
                         "wrote it")
    kept = [r for r in records if f"{r.case.id}/{r.case.dtype}" in whole]
    todo = [c for c in cases if point_of(c.key) not in whole]
    return Resume(path=p, run_id=first.run_id, kept=kept, todo=todo, env=now)


def _git_mismatch(records: list[Record], git: tuple[str | None, bool | None]) -> str | None:
    """Why records and this checkout are not one commit (unknown, another, or uncommitted changes), or None."""
    commit, dirty = git
    if commit is None:
        return "this checkout's commit is unknown (no git, no ROBOCACHE_GIT_COMMIT)"
    if dirty or any(r.git_dirty for r in records):
        return "uncommitted changes (then or now); a resumed run measures one commit"
    bad = next((r.git_commit for r in records if r.git_commit != commit), commit)
    return None if bad == commit else f"measured at commit {bad}, this checkout is at {commit}"


def _method_mismatch(records: list[Record], cache: str, timing: Any) -> str | None:
    """Why the records were timed otherwise than this command would (cache; noise target and time limit, given
    or the record's timer's default), or None."""
    import inspect

    from .timing import device as tdev, host as thost

    timers = {"cuda_event": tdev.time_gpu, "cuda_graph": tdev.time_gpu, "host": thost.time_host,
              "host_loop": thost.time_host_loop}
    for r in records:
        m = r.method
        if m is None:
            continue
        if m.cache != cache:
            return f"timed with --cache {m.cache}, this command {cache}"
        fn = timers.get(m.timer)
        for opt in ("noise_target", "time_limit_s") if fn is not None else ():
            given = getattr(timing, opt, None) if timing is not None else None
            want = given if given is not None else inspect.signature(fn).parameters[opt].default
            if getattr(m, opt) != want:
                return f"timed with {opt} {getattr(m, opt)}, this command {want}"
    return None


def _processes_mismatch(records: list[Record], processes: int,
                        below_us: float = PROCESSES_BELOW_US) -> str | None:
    """Why the records were timed with another ``--processes`` or ``--processes-below-us`` than these (as far as
    they show: a record timed in k processes lists k medians, one timed once under the threshold was not
    repeated, a call-cost record is timed in K processes whatever its time), or None."""
    for r in records:
        if r.processes and len(r.processes) != processes:
            return f"timed with --processes {len(r.processes)}, this command {processes}"
        cost = r.dispatch is not None  # repeated whatever its time (:func:`repeats`): the threshold tells nothing
        if r.processes and not cost and r.processes[0] >= below_us:
            return (f"{r.case.id} was timed in {len(r.processes)} processes at {r.processes[0]:.3g} us, over this "
                    f"command's --processes-below-us {below_us:g}")
        if not r.processes and repeats(r, processes, below_us):
            if cost:
                return (f"{r.case.id} (a call-cost case) was timed in one process, this command times call-cost "
                        f"cases in --processes {processes}")
            return (f"{r.case.id} was timed in one process at {r.metrics.time_us.p50:.3g} us, under this command's "
                    f"--processes-below-us {below_us:g} with --processes {processes}")
    return None


def _run_context(*, suite: str, device: str, frontend: str, out_dir: str | Path, machine: str | None,
                 synthetic: bool, resume: Resume | None) -> RunContext:
    """The run's context: a new run's, or the resumed run's (its id, its file's folder and name, this process's
    env, checked against the file's by :func:`resume_plan`)."""
    if resume is None:
        return RunContext.start(suite=suite, device=device, frontend=frontend, out_dir=out_dir, machine=machine,
                                synthetic=synthetic)
    return RunContext.start(suite=suite, device=device, frontend=frontend, out_dir=resume.path.parent.parent,
                            machine=machine, run_id=resume.run_id, env=resume.env, synthetic=synthetic,
                            name=resume.path.name.removesuffix(store.RECORDS_SUFFIX))


def run_suite(suite: str = "quick", *, device: str = "auto", ops=None, providers=None, dtypes=None,
              out_dir: str | Path = "results/local", cache: str = "warm", timeout_s: float = 600.0,
              timing: dict[str, Any] | None = None, frontend: str = "cli", machine: str | None = None,
              progress: bool = True, cases: list[specs.Case] | None = None, seed: int = 0,
              measure_ceiling: bool = True, synthetic: bool = False, precompile_jobs: int = 0,
              case_timeouts: Mapping[str, float] | None = None, resume: Resume | None = None,
              processes: int = 1, processes_below_us: float = PROCESSES_BELOW_US) -> RunResult:
    """Run the cases of ``suite`` (or the given ``cases``) and write them to one run file under ``out_dir``.

    ``processes``: a case whose first process measured a median under ``processes_below_us``, and a call-cost case
    whatever its time (:func:`repeats`), runs in that many fresh processes in all and is reported as their median
    (:func:`combined`; the record's ``processes`` lists each).

    ``timeout_s``: each case process's timeout; ``case_timeouts``: another timeout for some cases, by case key (a
    case known to hang: the isolation test's hang is stopped in seconds while the other cases keep the generous
    timeout a loaded machine needs).

    ``precompile_jobs``: when > 0, first compile the torch.compile cases in that many parallel processes
    (:func:`precompile`), so the serial timing pass loads their compiled code from Inductor's cache.

    ``resume``: continue a cut run (:func:`resume_plan`): only its ``todo`` cases run, under the run's id, and its
    file is rewritten with the kept records first (``cases`` and ``out_dir`` are then the plan's).
    """
    t0 = time.perf_counter()
    check_processes(processes, processes_below_us)
    if device == "auto":
        device = detect_device()
    todo = cases if cases is not None else specs.cases(suite, device=device, ops=ops, providers=providers,
                                                       dtypes=dtypes)
    stray = sorted(set(case_timeouts or {}) - {c.key for c in todo})
    if stray:  # a misspelt key would run its case under the other timeout, unnoticed
        raise ValueError(f"case_timeouts names cases this run does not have: {', '.join(stray)}")
    run = _run_context(suite=suite, device=device, frontend=frontend, out_dir=out_dir, machine=machine,
                       synthetic=synthetic, resume=resume)
    res = RunResult(run_id=run.run_id, path=None, env=msgspec.to_builtins(run.env))
    todo, kept = (resume.todo, resume.kept) if resume is not None else (todo, [])
    options: dict[str, Any] = {"cache": cache, "timing": timing, "seed": seed}
    run.task(**options)  # the options are checked before anything runs: a misspelt timing option fails here

    if precompile_jobs > 0:  # before the ceiling, so the copy bandwidth is measured on an idle GPU
        try:
            res.precompile = precompile(todo, run, precompile_jobs, timeout_s, progress, **options)
        except Exception as e:  # noqa: BLE001 - the pre-pass only saves time; the run goes on without it
            res.precompile = {"jobs": precompile_jobs, "error": f"{type(e).__name__}: {e}"}

    if device == "gpu" and measure_ceiling:
        outcome, result, detail = run_in_process(run.task(kind="ceiling", **options), timeout_s)
        if outcome == "ok" and result.status == "ok":
            res.ceiling = result
            options["ceiling_gb_per_s"] = result.gb_per_s
        else:
            res.ceiling = Ceiling(status="failed", reason=detail or (result.reason if result else None) or "unknown")

    _context(preload_for(todo, device))  # the forkserver with what these cases import (a CPU run: no more)
    bar = _progress(len(todo), progress, suite)
    last_write = time.monotonic()
    written = 0
    try:
        for i, case in enumerate(todo):
            if bar is not None:
                bar.set_postfix_str(case.key[-60:], refresh=False)
            task = run.task(case.key, **options)
            case_timeout = (case_timeouts or {}).get(case.key, timeout_s)
            outcome, rec, detail = run_in_process(task, case_timeout)
            if outcome != "ok":
                rec = worker.base_record(task, case, "error" if outcome == "invalid" else outcome, detail)
            elif repeats(rec, processes, processes_below_us):
                rec = _more_processes(rec, task, case, processes, case_timeout)
            res.records.append(rec)
            if bar is not None:
                bar.update(1)
                bar.set_description(_status_line(res.counts()), refresh=False)
            # checkpoint: the run file is rewritten atomically, so a killed runner loses at most this interval
            if time.monotonic() - last_write > 30 or i == len(todo) - 1:
                res.path = run.write([*kept, *res.records])
                written, last_write = len(res.records), time.monotonic()
    except KeyboardInterrupt:  # Ctrl-C, or a call's `timeout --signal=INT`: the cases measured so far are kept
        if len(res.records) > written:  # (the interrupted case is not among them: `run --resume` measures it)
            res.path = run.write([*kept, *res.records])
        raise
    if bar is not None:
        bar.close()
    if not todo:
        res.path = None if resume is None else resume.path  # a resumed run with nothing left: its file as it was
    res.wall_s = time.perf_counter() - t0
    return res


def check_processes(processes: Any, below_us: Any) -> None:
    """``ValueError`` (one line) unless ``processes`` is an integer from 1 to :data:`MAX_PROCESSES` and
    ``below_us`` a positive finite number of microseconds."""
    if not (type(processes) is int and 1 <= processes <= MAX_PROCESSES):
        raise ValueError(f"processes must be an integer from 1 to {MAX_PROCESSES}, got {processes!r}")
    if not (type(below_us) in (int, float) and 0 < below_us < float("inf")):
        raise ValueError(f"processes_below_us must be a positive number of us, got {below_us!r}")


def repeats(rec: Record | None, processes: int, below_us: float) -> bool:
    """Whether ``rec`` (a case's first process) is timed again in fresh processes: ``processes`` > 1, a timed,
    single-process, single-GPU record (no multi-GPU or pipeline section) whose median is under ``below_us``, or a
    call-cost record (``dispatch`` set) whatever its time: its judged measure, the interleaved ratio of the public
    call to the bare launch (``records.call_ratio``), moves from one process to the next at any host time (3.6-7.5%
    between the runs of an H200 A/A pair, docs/regressions.md), and a bare launch's host time likewise."""
    if not (processes > 1 and rec is not None and rec.status == "ok" and rec.metrics is not None
            and rec.method is not None and rec.distributed is None and rec.pipeline is None):
        return False
    return rec.dispatch is not None or rec.metrics.time_us.p50 < below_us


def combined(recs: list[Record]) -> Record:
    """One record of a case timed in ``len(recs)`` fresh processes, every one ``ok``: each of ``metrics.time_us``'s
    quantiles and its mean the processes' median (their mean for two; one process slowed by a busy host moves a
    median of three less than a mean), min and max over all; the graph replay's median likewise where every
    process has one; throughput and share of the ceiling scaled to the new median; ``processes`` every process's
    median; ``method.noise`` the within-process half-width of that estimate (sqrt of the sum of the processes'
    squared noises, over K: the spread between processes is the history's and the priors' to judge, as for one
    process, and stays in ``processes``), ``noise_target_met`` judged on it, ``method.samples`` and ``duration_s``
    summed; health the union of the processes' flags and reasons (a throttled or contended process makes the
    record so); check, clocks and launches the first's. A call-cost record's ``dispatch`` likewise
    (:func:`_combined_dispatch`)."""
    import math
    from statistics import median

    first = recs[0]
    if len(recs) == 1:
        return first
    ms = [r.metrics for r in recs]
    q = {f: median(getattr(m.time_us, f) for m in ms) for f in ("p20", "p50", "p80", "mean")}
    q["min"], q["max"] = min(m.time_us.min for m in ms), max(m.time_us.max for m in ms)
    scale = first.metrics.time_us.p50 / q["p50"] if q["p50"] > 0 else 1.0
    graphs = [m.graph_time_us for m in ms]
    graph = median(graphs) if all(g for g in graphs) else None
    m0 = first.metrics
    metrics = msgspec.structs.replace(
        m0, time_us=Quantiles(**q), items_per_s=m0.items_per_s * scale, gb_per_s=m0.gb_per_s * scale,
        pct_of_ceiling=None if m0.pct_of_ceiling is None else m0.pct_of_ceiling * scale, graph_time_us=graph,
        event_vs_graph=(q["p50"] - graph) / graph if graph else None)
    own = [r.method.noise for r in recs]
    noise = None if any(n is None for n in own) else math.sqrt(sum(n * n for n in own)) / len(own)
    method = msgspec.structs.replace(first.method, noise=noise,
                                     noise_target_met=noise is not None and noise <= first.method.noise_target,
                                     samples=sum(r.method.samples for r in recs))
    dispatch, regated = first.dispatch, False
    if all(r.dispatch is not None for r in recs):  # a call-cost case
        dispatch = _combined_dispatch([r.dispatch for r in recs], q["p50"])
        # a process's gpu-bound note (worker._time_dispatch) stands where the combined gpu_keeps_up says so only
        regated = dispatch.device_us is not None
    hs = [r.health for r in recs]
    health = msgspec.structs.replace(
        first.health, throttled=any(h.throttled for h in hs), contended=any(h.contended for h in hs),
        noisy=not method.noise_target_met,
        reasons=list(dict.fromkeys(x for h in hs for x in h.reasons
                                   if not x.startswith("noisy:") and not (regated and x.startswith("gpu-bound:"))))
        + ([_gpu_bound(dispatch.device_us, q["p50"])] if regated and dispatch.gpu_keeps_up is False else [])
        + (["noisy: noise target not met"] if not method.noise_target_met else []))
    return msgspec.structs.replace(first, metrics=metrics, method=method, health=health, dispatch=dispatch,
                                   processes=[m.time_us.p50 for m in ms], duration_s=sum(r.duration_s for r in recs))


def _gpu_bound(device_us: float, host_us: float) -> str:
    """The health reason of a call-cost record whose GPU does not keep up (the words of worker._time_dispatch)."""
    return (f"gpu-bound: {device_us:.2f} us of device time per call >= {host_us:.2f} us of host time: "
            "a loop of these calls runs at the GPU's rate, not the host's")


# an interleaved section's figures that :func:`_combined_dispatch` takes the processes' median of
_INTERLEAVED_MEDIANS = ("bare_us", "public_us", "public_cupy_us", "ratio_p20", "ratio_p50", "ratio_p80",
                        "cupy_ratio_p20", "cupy_ratio_p50", "cupy_ratio_p80")


def _combined_dispatch(ds: list[Dispatch], host_us: float) -> Dispatch:
    """The ``dispatch`` section of a call-cost case timed in ``len(ds)`` processes (:func:`combined`; ``host_us``
    its combined host p50): ``device_us`` the processes' median (None where one has none), ``gpu_keeps_up``
    recomputed against ``host_us`` (the first's where there is no device time), and where every process has an
    ``interleaved`` section: ``rounds`` summed, ``calls_per_loop`` the first's, every other figure the processes'
    median (their mean for two; a median of per-process quantiles keeps p20 <= p50 <= p80, which
    ``records.interleaved_ratio`` requires), ``noise_target_met`` only where every process's was; where one lacks it
    (its interleaved timing failed), the first's section unchanged.

    ``rounds`` summed is the within-process figure, as ``method.noise`` is in :func:`combined`:
    ``records.interleaved_ratio`` takes the ratio median's sigma as sqrt(pi / 2) x (log p80 - log p20) / 1.68 /
    sqrt(rounds), a standard error within one process. With the p20..p80 spread the processes' median (a within-
    process spread) and ``rounds`` the sum n_1 + ... + n_K, that is the standard error of the K processes' ratios
    pooled, which for K equal processes is sqrt(sum of their squared errors) / K, the same rule as ``method.noise``
    (exact for the mean of two; the median of three is a little less steady than a mean, as for the time). The
    spread between processes, what repeating them averages down, stays out of it: the ratio's history and its
    ``|host-ratio`` prior (fitted apart for K-process runs, ``|p<K>``) hold it, and counting it here too would make
    a K-process ratio harder to call "same"."""
    from statistics import median

    first = ds[0]
    devs = [d.device_us for d in ds]
    device_us = None if any(v is None for v in devs) else median(devs)
    keeps_up = device_us < host_us if device_us is not None and host_us is not None else first.gpu_keeps_up
    interleaved = first.interleaved
    ils = [d.interleaved for d in ds]
    if all(il is not None for il in ils):
        interleaved = msgspec.structs.replace(
            first.interleaved, rounds=sum(il.rounds for il in ils),
            noise_target_met=all(il.noise_target_met for il in ils),
            **{f: median(getattr(il, f) for il in ils) for f in _INTERLEAVED_MEDIANS})
    return msgspec.structs.replace(first, device_us=device_us, gpu_keeps_up=keeps_up, interleaved=interleaved)


def _more_processes(first: Record, task: Task, case: specs.Case, processes: int, timeout_s: float) -> Record:
    """``first`` and ``processes`` - 1 more fresh processes of the same task, :func:`combined`. Where one of them
    does not end ``ok``, the case's record is that process's (its status: a kernel wrong in one process of three is
    wrong), its reason saying which process it was."""
    recs = [first]
    for i in range(2, processes + 1):
        outcome, rec, detail = run_in_process(task, timeout_s)
        if outcome != "ok" or rec is None:
            rec = worker.base_record(task, case, "error" if outcome == "invalid" else outcome, detail)
        if rec.status != "ok" or rec.metrics is None or rec.method is None:
            why = (rec.reason or rec.status).splitlines()[0] if (rec.reason or rec.status) else "no measurement"
            status = rec.status if rec.status != "ok" else "error"
            return msgspec.structs.replace(rec, status=status,
                                           reason=f"process {i} of {processes} (the first ok): {why}"[:600])
        recs.append(rec)
    return combined(recs)


def _status_line(counts: dict[str, int]) -> str:
    return " ".join(f"{k} {v}" for k, v in sorted(counts.items()))


def _progress(total: int, enabled: bool, suite: str):
    if not enabled or total == 0:
        return None
    from tqdm import tqdm

    return tqdm(total=total, desc=suite, unit="case", dynamic_ncols=True)

