"""Shared fixtures, the test tiers, and a loud banner when the GPU tests could not run.

Test tiers (docs/contributing.md): every test is in the fast tier (``make test-fast``) unless it is expensive by
what it does, and the markers saying so are set here, once, from the test's code (never by decorating tests):

- ``gpu``: the test lives under ``tests/gpu/``;
- ``browser``: its code calls into ``dashboard.browser`` (a Streamlit server and Playwright's Chromium);
- ``multiprocess``: its code starts processes (:data:`SPAWNERS`: subprocess calls, torchrun/Gloo launches, a
  benchmark run whose cases fork from the harness's forkserver, a Streamlit server);
- ``slow``: named in :data:`SLOW` (the test, or a fixture it uses) with the measured reason: in-process work
  that still takes long.

"Its code" is the test function, every fixture it uses, and every function of ``tests/`` they call, followed
through the calls (a helper of the module, ``tests.test_store.make_record``, ...). A fast-tier test that starts a
process fails where the tier is selected (``-m``, as ``make test-fast`` does: :func:`pytest_runtest_call`), so a
rule this file is missing shows up at once instead of slowing the fast tier down. ``tests/test_durations.py``
holds the tier's size.
"""
from __future__ import annotations

import ast
import functools
import inspect
import multiprocessing.process
import os
import subprocess
import sys
import textwrap
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parent.parent
TESTS = ROOT / "tests"
TIERS = ("gpu", "browser", "multiprocess", "slow")

# Calls that start processes, by the called name's last part (``subprocess.run``, ``launch.run_multigpu``, ...):
SPAWNERS = {
    "Popen": "a subprocess", "check_output": "a subprocess", "check_call": "a subprocess",
    "Process": "a multiprocessing process", "Pool": "a multiprocessing pool",
    "ProcessPoolExecutor": "a process pool",
    "run_multigpu": "a torchrun/Gloo group (multigpu.launch)",
    "run_ddp": "a torchrun/Gloo group (pipelines.ddp)",
    "run_suite": "a benchmark run: each case forks from the harness's forkserver",
    "capture_env_in_child": "the environment captured in a child process",
}
# ... and calls whose last part is too common a word alone: only on these objects
SPAWNERS_ON = {("subprocess", "run"): "a subprocess", ("subprocess", "call"): "a subprocess",
               ("os", "fork"): "os.fork", ("os", "system"): "a shell",
               ("frontend", "measure"): "a front end's case: its own process"}
# names whose mere mention (a base class, a function passed on) means processes
SPAWNING_NAMES = {"MultiGPUTime": "asv's multi-GPU benchmark: a torchrun launch in its setup"}
# keyword arguments that ask for processes (with a value other than 0, (0,) or None)
SPAWNING_KEYWORDS = {"ddp_ranks": "the pipelines' DDP training: a torchrun/Gloo group",
                     "workers": "DataLoader worker processes"}
# library modules whose functions start processes when called
SPAWNING_MODULES = {"robocache.providers.torch_compile": "torch.compile: Inductor builds C++ in child processes"}
# a call naming a provider by a string that starts with one of these
SPAWNING_PROVIDERS = {"torch_compile": "torch.compile: Inductor builds C++ in child processes"}
# CLI entry points (``cli.main([...])``) whose command starts processes: a benchmark run forks every case, the
# confirmation rerun of `check --confirm` too
CLI_COMMANDS = {"run": "a benchmark run: each case forks from the harness's forkserver",
                "--confirm": "check --confirm reruns the alerted cases, each in its own process"}
BROWSER_MODULE = "dashboard.browser"

# Tests that are expensive in their own process, by node id without parameters, or by a fixture they use
# (``path::fixture``: every test using it), with the measurement that put them here: CPU seconds of pytest's own
# process, and the wall time on the shared 2-core machine (load average 8-12, 2026-11-27). A new entry needs one.
SLOW: dict[str, str] = {
    "tests/test_regress_quality.py::world": "the A/A and detection simulations over the noise priors: 43 s CPU, "
                                            "166 s wall (all four tests that use it)",
    "tests/test_kernels_compile.py::test_kernel_compiles": "NVRTC compiles every kernel for sm_80 and sm_90: "
                                                           "20 s CPU in all (2-5 s a case), 141 s wall",
    "tests/test_pipelines.py::test_training_same_loss_curve_and_profile": "trains and profiles both pipelines: "
                                                                          "8 s CPU, 39 s wall",
    "tests/test_regress_replay.py::ci_run": "the out-of-sample replay of the nightly check at CI's size, 4 "
                                            "replicates in two processes: 117 s CPU (the whole module; 224 s "
                                            "at 8 replicates), 232 s wall at load 6-10",
}


@pytest.fixture
def rng() -> np.random.Generator:
    """Seeded per test: random inputs, never zeros."""
    return np.random.default_rng(20261120)


# ------------------------------------------------------------------------------------------- the tier rules

def _dotted(node: ast.expr) -> list[str]:
    """``a.b.c`` -> ["a", "b", "c"]; [] for anything that is not a plain name chain."""
    parts: list[str] = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
        return parts[::-1]
    return []


def _local_imports(tree: ast.AST) -> dict[str, Any]:
    """Names bound by imports inside a function (``from robocache.providers import torch_compile``), to modules
    already imported (sys.modules: the rule imports nothing itself)."""
    out: dict[str, Any] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                mod = sys.modules.get(a.name)
                if mod is not None:
                    out[a.asname or a.name.split(".")[0]] = mod if a.asname else sys.modules.get(a.name.split(".")[0])
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            mod = sys.modules.get(node.module)
            for a in node.names:
                obj = sys.modules.get(f"{node.module}.{a.name}") or getattr(mod, a.name, None)
                if obj is not None:
                    out[a.asname or a.name] = obj
    return out


def _resolve(fn: Callable[..., Any], parts: list[str], local: dict[str, Any] | None = None) -> Any:
    """The object a dotted name in ``fn``'s code names, through ``fn``'s globals, closure and local imports (None
    if unknown)."""
    scope = {**fn.__globals__, **(local or {})}
    code = getattr(fn, "__code__", None)
    if code is not None and fn.__closure__:
        for name, cell in zip(code.co_freevars, fn.__closure__):
            try:
                scope[name] = cell.cell_contents
            except ValueError:  # an empty cell: assigned later
                pass
    obj = scope.get(parts[0]) if parts else None
    if obj is None and parts:
        obj = getattr(__builtins__, parts[0], None) if not isinstance(__builtins__, dict) else __builtins__.get(
            parts[0])
    for p in parts[1:]:
        obj = getattr(obj, p, None)
        if obj is None:
            return None
    return obj


def _ours(obj: Any) -> bool:
    """A function or class defined in a file under tests/ (followed into), not a library's."""
    obj = inspect.unwrap(obj) if callable(obj) else obj
    try:
        return Path(inspect.getsourcefile(obj) or "").resolve().is_relative_to(TESTS)
    except (TypeError, OSError):
        return False


def _none_or_zero(node: ast.expr) -> bool:
    """A literal 0, None, () or a tuple/list of zeros: asks for no process."""
    if isinstance(node, ast.Constant):
        return node.value in (0, None)
    if isinstance(node, (ast.Tuple, ast.List)):
        return all(_none_or_zero(e) for e in node.elts)
    return False


@functools.cache
def _causes(fn: Callable[..., Any]) -> frozenset[tuple[str, str]]:
    """``{(marker, why), ...}`` for one function's code and every tests/ function it calls, followed through."""
    fn = inspect.unwrap(fn)
    try:
        tree = ast.parse(textwrap.dedent(inspect.getsource(fn)))
    except (OSError, TypeError, SyntaxError):
        return frozenset()
    found: set[tuple[str, str]] = set()
    name = f"{fn.__module__}.{fn.__qualname__}"
    local = _local_imports(tree)
    for node in ast.walk(tree):
        if isinstance(node, (ast.Name, ast.Attribute)):
            ref = node.id if isinstance(node, ast.Name) else node.attr
            if ref in SPAWNING_NAMES:
                found.add(("multiprocess", f"{name} names {ref}: {SPAWNING_NAMES[ref]}"))
        if not isinstance(node, ast.Call):
            continue
        for kw in node.keywords:
            if kw.arg in SPAWNING_KEYWORDS and not _none_or_zero(kw.value):
                found.add(("multiprocess", f"{name} passes {kw.arg}=: {SPAWNING_KEYWORDS[kw.arg]}"))
        for arg in node.args:
            if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
                for prefix, why in SPAWNING_PROVIDERS.items():
                    if arg.value.startswith(prefix):
                        found.add(("multiprocess", f"{name} names provider {arg.value!r}: {why}"))
        parts = _dotted(node.func)
        if not parts:
            continue
        last = parts[-1]
        target = _resolve(fn, parts, local)
        if last in SPAWNERS:
            found.add(("multiprocess", f"{name} calls {'.'.join(parts)}: {SPAWNERS[last]}"))
        if tuple(parts[-2:]) in SPAWNERS_ON:
            found.add(("multiprocess", f"{name} calls {'.'.join(parts)}: {SPAWNERS_ON[tuple(parts[-2:])]}"))
        if last in ("main", "_main", "_cli_main"):
            args = [e.value for a in node.args[:1] if isinstance(a, (ast.List, ast.Tuple)) for e in a.elts
                    if isinstance(e, ast.Constant) and isinstance(e.value, str)]
            for word, why in CLI_COMMANDS.items():
                if (args and args[0] == word) or (word.startswith("--") and word in args):
                    found.add(("multiprocess", f"{name} calls {'.'.join(parts)}({args[:2]}...): {why}"))
        owner = target.__name__ if inspect.ismodule(target) else getattr(target, "__module__", None)
        if owner in SPAWNING_MODULES:
            found.add(("multiprocess", f"{name} calls {'.'.join(parts)}: {SPAWNING_MODULES[owner]}"))
        if owner == BROWSER_MODULE:
            found.add(("browser", f"{name} calls {'.'.join(parts)} (the dashboard in Chromium)"))
            found.add(("multiprocess", f"{name} calls {'.'.join(parts)}: a Streamlit server and a browser"))
        if target is not None and target is not fn and _ours(target) and (
                inspect.isfunction(target) or inspect.ismethod(target)):
            found |= _causes(target)
        elif inspect.isclass(target) and _ours(target):
            for member in vars(target).values():
                if inspect.isfunction(member):
                    found |= _causes(member)
    return frozenset(found)


def causes(item: pytest.Item) -> dict[str, list[str]]:
    """marker -> the reasons this test gets it (tests/test_durations.py and --collect-only -v read them)."""
    out: dict[str, list[str]] = {}
    path = Path(str(item.fspath)).resolve()
    if path.is_relative_to(TESTS / "gpu"):
        out["gpu"] = ["under tests/gpu/"]
    fns: list[Callable[..., Any]] = []
    slow = [SLOW[k] for k in (item.nodeid.split("[", 1)[0],) if k in SLOW]
    if isinstance(item, pytest.Function):
        fns.append(item.function)
        info = getattr(item, "_fixtureinfo", None)
        for name in item.fixturenames:
            defs = info.name2fixturedefs.get(name) if info is not None else None
            if defs:
                fns.append(defs[-1].func)
                key = f"{defs[-1].baseid}::{name}"
                slow += [SLOW[key]] if key in SLOW else []
    for fn in fns:
        if _ours(fn) or Path(inspect.getsourcefile(inspect.unwrap(fn)) or "").resolve().is_relative_to(ROOT / "benchmarks"):
            for marker, why in _causes(fn):
                out.setdefault(marker, []).append(why)
    # a parameter naming a compiled provider's case (``op/tag/dtype/torch_compile...``) or the provider itself
    for value in getattr(getattr(item, "callspec", None), "params", {}).values():
        if isinstance(value, str):
            last = value.rsplit("/", 1)[-1]
            for prefix, why in SPAWNING_PROVIDERS.items():
                if last.startswith(prefix):
                    out.setdefault("multiprocess", []).append(f"parameter {value!r}: {why}")
    if slow:
        out["slow"] = slow
    return out


# Modules started first, longest first: on two workers (make test's -n 2 --dist loadfile, collection order kept: see
# pytest_configure) a long module started last is the run's tail. A worker is handed its next unit while it still
# runs the last test of its current one (pytest-xdist's worker needs the next test to run the current one), so the
# long single-test units come first, then the long modules in SPLIT, whose tests fill the workers' ends. Their wall
# time from --durations in a fresh-clone `bash .ci/run` (rest tier on two workers, load average 4-6 with other jobs,
# 2026-11-27, at af4c3a6): test_regress_replay 313 s (its fixture), test_bisect_rehearsal 179 + 154,
# test_rehearsal 152, test_newcomer 83, test_pipelines_ddp 71, test_regress_quality 66 (its fixture),
# test_distributed 66 + 62 + 61 + 52 + 45 and less, test_gpu_check_script 64, test_frontends 52 + 38. Order only:
# no test depends on it.
LONGEST_FIRST = ("tests/test_regress_replay.py", "tests/test_bisect_rehearsal.py", "tests/test_rehearsal.py",
                 "tests/test_newcomer.py", "tests/test_regress_quality.py", "tests/test_gpu_check_script.py",
                 "tests/test_distributed.py", "tests/test_pipelines_ddp.py", "tests/test_frontends.py",
                 "tests/test_bench_pipeline.py", "tests/test_precompile.py", "benchmarks/test_pytest_benchmarks.py")

@pytest.fixture(scope="session", autouse=True)
def _frame_cache(tmp_path_factory):
    """The CLI's and the dashboard's columnar cache (robocache/bench/frame.py) in a folder of this session (one per
    xdist worker), never the checkout's .cache/frames: tests over tmp folders would otherwise fill it, evict the
    real results' cache, and race the other worker's pruning. A test that sets the variable itself still wins."""
    if "ROBOCACHE_FRAME_CACHE" in os.environ:
        yield
        return
    os.environ["ROBOCACHE_FRAME_CACHE"] = str(tmp_path_factory.mktemp("frames"))
    yield
    os.environ.pop("ROBOCACHE_FRAME_CACHE", None)


COLLECTED: dict[str, set[str]] = {}  # this session's tests, before -m/-k deselect any, -> their tier markers


# Long modules whose tests share no set-up (each its own processes, tmp_path only; test_distributed's mostly wait
# for timeouts that must fire): their tests go to whichever worker is free, one by one, instead of the whole module to one worker (with
# --dist loadfile, test_distributed's 464-549 s of waits were one worker's tail while the other idled). Every
# other module stays whole on one worker (one work unit), so a module's shared server or launch is made once.
SPLIT = frozenset({"tests/test_distributed.py", "tests/test_frontends.py", "tests/test_bench_pipeline.py",
                   "tests/test_pipelines_ddp.py", "tests/test_bisect_rehearsal.py"})


@pytest.hookimpl(optionalhook=True)  # a hook of pytest-xdist: unknown where it is off (-p no:xdist, a nested session)
def pytest_xdist_make_scheduler(config: pytest.Config, log):
    """make test's --dist loadfile, but SPLIT's modules test by test: each module is one work unit (one worker, its
    shared set-up made once) except those, whose tests are handed out one by one as workers free up. (The
    xdist_group marker cannot say this: pytest-xdist 3.8 renames node ids that pytest 9.2 no longer lets it.)"""
    if config.getvalue("dist") != "loadfile":
        return None
    from xdist.scheduler import LoadFileScheduling

    class LoadFileSplitSome(LoadFileScheduling):
        def _split_scope(self, nodeid: str) -> str:
            module = nodeid.split("::", 1)[0]
            return nodeid if module in SPLIT else super()._split_scope(nodeid)

    return LoadFileSplitSome(config, log)


@pytest.hookimpl(tryfirst=True)  # before pytest's own -m/-k deselection: the tiers of every collected test
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        marks = causes(item)
        for marker in marks:
            item.add_marker(marker)
        COLLECTED[item.nodeid] = set(marks)
    rank = {m: i for i, m in enumerate(LONGEST_FIRST)}
    items.sort(key=lambda it: rank.get(it.nodeid.split("::", 1)[0], len(rank)))  # stable: a module's own order kept


# ------------------------------------------------------------------------ a spawning test must be marked

# programs that libraries run for a moment to ask the system something (the git commit, pytest-benchmark's VCS
# tag, ctypes.util.find_library's ldconfig/gcc/ld/objdump): not what makes a test slow, and not worth a marker
PROBES = frozenset({"git", "hg", "ldconfig", "uname", "gcc", "cc", "ld", "objdump", "which", "nvidia-smi"})
_PID = os.getpid()
_started: list[str] | None = None  # the processes the running test started (None: not watching)


def _note(what: str) -> None:
    if _started is not None and os.getpid() == _PID:
        _started.append(what)


def _watch() -> None:
    """Wrap the three ways a process starts: subprocess.Popen, multiprocessing, os.fork (once per process: a
    nested session, as tests/test_durations.py's collection, finds them wrapped)."""
    if getattr(subprocess.Popen.__init__, "_tiers_watch", False):
        return
    popen_init = subprocess.Popen.__init__
    mp_start = multiprocessing.process.BaseProcess.start
    fork = os.fork

    @functools.wraps(popen_init)
    def init(self, args, *a, **kw):
        # a test's child is no xdist worker: a nested pytest's pytest-benchmark reads PYTEST_XDIST_WORKER and
        # disables itself (no saved run), so the worker's own variables stay out of the child's environment
        env = os.environ if kw.get("env") is None else kw["env"]
        if any(str(k).startswith("PYTEST_XDIST_") for k in env):
            kw["env"] = {k: v for k, v in env.items() if not str(k).startswith("PYTEST_XDIST_")}
        prog = args if isinstance(args, (str, bytes, os.PathLike)) else (args[0] if args else "")
        if Path(os.fsdecode(prog).split()[0] if prog else "").name not in PROBES:
            _note(f"subprocess {os.fsdecode(prog) if not isinstance(args, (list, tuple)) else list(map(str, args[:4]))}")
        return popen_init(self, args, *a, **kw)

    @functools.wraps(mp_start)
    def start(self):
        _note(f"multiprocessing {type(self).__name__}")
        return mp_start(self)

    @functools.wraps(fork)
    def forked():
        _note("os.fork")
        return fork()

    init._tiers_watch = True
    subprocess.Popen.__init__ = init
    multiprocessing.process.BaseProcess.start = start
    os.fork = forked


_GUARD = False  # on when this session selects by tier (-m naming one): make test-fast, CI's first step


def pytest_configure(config: pytest.Config) -> None:
    global _GUARD
    _watch()
    # only where the fast tier is chosen: a run of everything (scripts/gpu_check.sh on a GPU machine, where CUDA
    # libraries may start helpers of their own) has no fast tier to keep fast
    # (a nested session, tests/test_durations.py's collection, never turns it off)
    _GUARD = _GUARD or any(t in (config.option.markexpr or "") for t in TIERS)
    # pytest-xdist's loadfile hands out modules by their number of tests, most first, unless told not to: that put
    # the one-test rehearsal (the longest module) last, 18 minutes into the rest tier. Collection order instead,
    # which pytest_collection_modifyitems sorts LONGEST_FIRST first.
    if hasattr(config.option, "loadscopereorder"):
        config.option.loadscopereorder = False


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None):  # noqa: ARG001
    global _started
    fast = not any(item.get_closest_marker(t) for t in TIERS)
    _started = [] if _GUARD and fast else None
    try:
        return (yield)
    finally:
        _started = None


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item):
    res = yield
    if _started:
        pytest.fail(f"{item.nodeid} started {len(_started)} process(es) ({_started[0]}, ...) without the "
                    "'multiprocess' marker: tests/conftest.py's rules (SPAWNERS, CLI_COMMANDS) do not see how; "
                    "extend them so the fast tier stays fast", pytrace=False)
    return res


def pytest_terminal_summary(terminalreporter, exitstatus, config):  # noqa: ARG001
    skipped = terminalreporter.stats.get("skipped", [])
    gpu_skips = [r for r in skipped if "/gpu/" in str(getattr(r, "fspath", "")) or "tests/gpu" in r.nodeid]
    if gpu_skips:
        reason = str(gpu_skips[0].longrepr[-1]) if isinstance(gpu_skips[0].longrepr, tuple) else ""
        terminalreporter.write_sep(
            "!", f"{len(gpu_skips)} GPU tests SKIPPED, NOT PASSED ({reason.removeprefix('Skipped: ')}); "
                 "run scripts/gpu_check.sh on a GPU machine", yellow=True, bold=True)
