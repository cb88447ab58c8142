"""The fast tier's size, held by counts, never by wall time (a loaded machine must not fail a test: docs/ci.md).

``tests/conftest.py`` marks every test that needs a GPU, drives a browser, starts processes or was measured slow;
``make test-fast`` runs the rest. What keeps that tier fast is checked here:

- the tests outside it (GPU tests aside) stay under a budget, and the fast tier stays most of the suite;
- ``conftest.SLOW`` is short, and every entry names a test that exists, with its measured reason;
- no test file sets a tier marker by hand (one place: the conftest's rules);
- a module whose code starts processes or serves the dashboard has its tests marked (a second, plainer look at
  the source than the conftest's rule: a call it misses still fails here);
- the rule and the guard themselves: they see a spawning call through a helper, and a process started without
  the marker is caught.

A budget is raised only with the measurement that justifies it (docs/contributing.md).
"""
from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parent.parent

# At the change that made the tiers (2026-11-27): 142 of 903 CPU tests outside the fast tier, 4 entries in SLOW.
# Raised to 200 when bisect (13 git-worktree tests), the quick suite's 20 CPU pytest-benchmark cases (frontend
# measure) and the CLI hardening tests came in: 186 of 1153 outside, the fast tier 967 tests in 110 s on CI's
# 2 cores (CI run of 2026-11-27); FAST_SHARE below still holds the tier at most of the suite.
# Raised to 202 for the NVRTC compile of kernels/rows_wide.cu (the column split, shifted vectors: a kernel file of
# its own, two cases, sm_80 and sm_90): 4.1 and 4.5 s of wall here (2026-11-28, `pytest tests/test_kernels_compile.py
# -k rows_wide --durations=0`).
# Raised to 204 for tests/test_provenance.py's two git tests (a repository built and committed in tmp, the command
# against it): 0.25 s of wall together here (2026-11-28, `pytest tests/test_provenance.py --durations=0`).
# Raised to 207 for tests/test_processes.py's three (`run --processes K`: the runner's loop over fake processes, the
# CLI's usage errors in four subprocesses, a CPU run of two real processes through the CLI and two resumes of it):
# 7.7 s of wall together here (2026-11-28, `pytest tests/test_processes.py -m "" --durations=0`).
# Raised to 208 for tests/test_regress.py's check --confirm of a series timed in K processes (`run --processes K`:
# the CLI's reruns in K processes, three histories in one test, run_suite faked): 3.03 s of wall here (2026-11-28,
# `pytest tests/test_regress.py -k as_many_processes -m "" --durations=0`).
BUDGET_REST = 208  # CPU tests (tests/gpu aside) marked slow, browser or multiprocess
BUDGET_SLOW = 8  # entries of conftest.SLOW
FAST_SHARE = 0.8  # the fast tier's share of the CPU tests, at least (0.84 then)


def _tiers(config: pytest.Config) -> ModuleType:
    """tests/conftest.py as pytest loaded it (its guard's state lives there, not in a second import)."""
    for plugin in config.pluginmanager.get_plugins():
        if isinstance(plugin, ModuleType) and Path(getattr(plugin, "__file__", "") or "") == ROOT / "tests" / \
                "conftest.py":
            return plugin
    raise AssertionError("tests/conftest.py is not loaded")


@pytest.fixture(scope="module")
def suite(request: pytest.FixtureRequest) -> dict[str, set[str]]:
    """Every test of ``make test`` (tests/ and benchmarks/) -> its tier markers: what this session collected
    before ``-m`` chose a tier, when it collected both folders whole (``make test-fast``); else a collection of
    them in this process."""
    tiers = _tiers(request.config)
    args = {Path(a).resolve() for a in request.config.args}
    if args == {ROOT / "tests", ROOT / "benchmarks"}:
        return dict(tiers.COLLECTED)
    found: dict[str, set[str]] = {}

    class Grab:
        def pytest_collection_finish(self, session: pytest.Session) -> None:
            for item in session.items:
                found[item.nodeid] = {m.name for m in item.iter_markers()} & set(tiers.TIERS)

    # collecting imports what the modules import (pytest-benchmark asks the VCS for the commit): not this test's
    # processes, so the guard looks away meanwhile, as it does during the session's own collection
    mine, tiers._started = tiers._started, None
    try:
        rc = pytest.main(["--collect-only", "-q", "-p", "no:cacheprovider", "-p", "no:xdist", "--benchmark-disable",
                          "--rootdir", str(ROOT), str(ROOT / "tests"), str(ROOT / "benchmarks")], plugins=[Grab()])
    finally:
        tiers._started = mine
    assert rc == 0 and found, f"collecting the suite failed (exit {rc})"
    return found


def test_the_fast_tier_stays_most_of_the_suite(suite: dict[str, set[str]]) -> None:
    cpu = {k: v for k, v in suite.items() if "gpu" not in v}
    rest = sorted(k for k, v in cpu.items() if v)
    print(f"\n{len(cpu)} CPU tests: {len(cpu) - len(rest)} fast, {len(rest)} slow/browser/multiprocess")
    assert len(rest) <= BUDGET_REST, (
        f"{len(rest)} CPU tests outside the fast tier, budget {BUDGET_REST}: share a set-up across a module, "
        "or raise the budget with the measurement (docs/contributing.md)")
    assert (len(cpu) - len(rest)) >= FAST_SHARE * len(cpu)
    assert sum(1 for v in suite.values() if "gpu" in v) > 0  # tests/gpu is collected (and marked) too


def test_slow_names_tests_with_their_reasons(request: pytest.FixtureRequest, suite: dict[str, set[str]]) -> None:
    tiers = _tiers(request.config)
    assert len(tiers.SLOW) <= BUDGET_SLOW, f"{len(tiers.SLOW)} entries in conftest.SLOW, budget {BUDGET_SLOW}"
    ids = {k.split("[", 1)[0] for k in suite}
    for name, why in tiers.SLOW.items():
        assert re.search(r"\d+ s CPU", why), f"{name}: say what was measured ({why!r})"
        if name in ids:  # a test: every case of it is marked
            assert all("slow" in v for k, v in suite.items() if k.split("[", 1)[0] == name), name
            continue
        module, fixture = name.split("::", 1)  # a fixture: it exists, and the tests of its module using it are slow
        text = (ROOT / module).read_text(encoding="utf-8")
        assert re.search(rf"@pytest\.fixture[^\n]*\n(?:@[^\n]*\n)*def {fixture}\(", text), (
            f"conftest.SLOW names {name}, which is no test and no fixture")
        assert any("slow" in v for k, v in suite.items() if k.startswith(module + "::")), name


def test_longest_first_names_expensive_modules(request: pytest.FixtureRequest, suite: dict[str, set[str]]) -> None:
    """conftest.LONGEST_FIRST (the modules started first on two workers) names modules of the second tier."""
    for module in _tiers(request.config).LONGEST_FIRST:
        marks = [v for k, v in suite.items() if k.startswith(module + "::")]
        assert marks and any(m - {"gpu"} for m in marks), f"{module}: no such module, or none of its tests is expensive"


def test_no_tier_marker_is_set_by_hand() -> None:
    files = [p for d in ("tests", "benchmarks") for p in sorted((ROOT / d).rglob("*.py"))
             if p.name != "conftest.py" and p.name != Path(__file__).name]
    hand = [f"{p.relative_to(ROOT)}:{i}" for p in files
            for i, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1)
            if re.search(r"pytest\.mark\.(slow|browser|gpu|multiprocess)\b", line)]
    assert not hand, f"tier markers set by hand (tests/conftest.py sets them from what a test does): {hand}"


# plain signs in a module's source that its tests start processes or serve the dashboard
SIGNS = {"multiprocess": re.compile(r"subprocess\.(run|Popen|check_output|check_call)\((?!\[\s*\"git\")|run_multigpu\(|run_ddp\(|"
                                    r"\bPopen\(|torch\.distributed\.run|\"torchrun\""),
         "browser": re.compile(r"\bbrowser\.(serve|chromium)\(")}


def test_modules_that_start_processes_have_marked_tests(suite: dict[str, set[str]]) -> None:
    by_module: dict[str, list[set[str]]] = {}
    for k, v in suite.items():
        by_module.setdefault(k.split("::", 1)[0], []).append(v)
    missed = []
    for module, marks in sorted(by_module.items()):
        if module == f"tests/{Path(__file__).name}":  # its spawning helpers are examples for the rule, never run
            continue
        text = (ROOT / module).read_text(encoding="utf-8")
        for marker, sign in SIGNS.items():
            if sign.search(text) and not any(marker in m for m in marks):
                missed.append(f"{module}: {sign.search(text).group(0)!r} but no test marked {marker}")
    assert not missed, "\n".join(missed)


def _spawns_through_a_helper() -> None:
    _helper_that_spawns()


def _helper_that_spawns() -> None:
    subprocess.run([sys.executable, "-c", "pass"], check=True)


def _runs_a_benchmark(cli) -> None:  # noqa: ANN001
    cli.main(["run", "--suite", "quick"])


def test_the_rule_follows_helpers(request: pytest.FixtureRequest) -> None:
    tiers = _tiers(request.config)
    assert {m for m, _ in tiers._causes(_spawns_through_a_helper)} == {"multiprocess"}
    why = [w for m, w in tiers._causes(_spawns_through_a_helper)]
    assert any("subprocess.run" in w for w in why), why
    assert {m for m, _ in tiers._causes(_runs_a_benchmark)} == {"multiprocess"}  # cases fork: forkserver
    assert tiers._causes(test_no_tier_marker_is_set_by_hand) == frozenset()


def test_the_guard_sees_a_process_start(request: pytest.FixtureRequest) -> None:
    """A Popen is noted (this one starts nothing: the program does not exist), so a fast-tier test that starts a
    process fails with the rule to extend."""
    tiers = _tiers(request.config)
    assert request.node.get_closest_marker("multiprocess") is None
    popen = getattr(subprocess, "Popen")  # noqa: B009  by another name: the rule would mark this test otherwise
    mine, tiers._started = tiers._started, []
    try:
        with pytest.raises(FileNotFoundError):
            popen(["/nonexistent/robocache-no-such-program"])
        with pytest.raises(FileNotFoundError):
            popen(["/nonexistent/git"])  # a probe of the system (the commit), let through
        seen = list(tiers._started)
    finally:
        tiers._started = mine
    assert len(seen) == 1 and "robocache-no-such-program" in seen[0], seen
