"""The newcomer path (issue 24): `make run SERVE=0` twice, then the regression tests, and they do not conflict.

A user's first hour: `make run` (the quick suite on the best device here, its headline, records into the ignored
``results/local/``), again, then `make test`. Five regression tests failed after that: they fitted noise priors
from ``results/`` whole, the user's two runs of one commit included. Here, in a copy of this checkout made a git
repository of one commit (the project's .gitignore applies, the records carry that commit as a user's would),
`make run SERVE=0` runs twice with this environment's Python, and then the regression tests run in that copy.

The runs sample each case for 0.2 s instead of the default 2 s (``RUN_ARGS``: what is checked is where the records
go and who reads them, not their figures). Without a GPU they also leave out the quick suite's PyTorch cases
(``--providers``: NumPy and robocache's NumPy path, 10 of its 20 CPU cases, the headline's robocache row among them):
with torch.compile the test took 297 s, without it 181 s (rest tier, 2026-11-27, loads 1-7 and 2-12); leaving out
torch eager too spares each run's forkserver the import of torch, 14.5 -> 9.0 s a `make run` (2026-11-28, load 3).
Their records go and are read as the others' (torch.compile and torch eager on the CPU are tested by
tests/test_providers.py and benchmarks/test_pytest_benchmarks.py; on a GPU the whole quick suite runs). tests/test_regress_quality.py is not run again in the copy: its only read of ``results/`` is
``regress.fit_priors(committed.load().records)`` (tests/regress_sim.py's noise pools), and
tests/test_regress.py::test_prior_per_provider_is_fitted_from_committed_records, run there, asserts that this very
fit equals the committed priors file: the user's runs cannot reach the simulation unless that test fails.
"""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
# the tests that read the committed records through results/ (tests/committed.py), less the quality simulation:
# its pools are the fit test_regress.py checks (see above)
REGRESSION_TESTS = ["tests/test_regress.py", "tests/test_cli_json.py"]


def _copy_checkout(dst: Path) -> None:
    """This working tree's files as git sees them (tracked, and untracked but not ignored: never results/local,
    .venv or caches), links kept, times kept (so make finds nothing to rebuild)."""
    listed = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=ROOT,
                            capture_output=True, check=True).stdout.decode("utf-8", "surrogateescape")
    for rel in sorted({p for p in listed.split("\0") if p}):
        src, out = ROOT / rel, dst / rel
        if not os.path.lexists(src):  # deleted in the working tree, not yet in the index
            continue
        out.parent.mkdir(parents=True, exist_ok=True)
        if src.is_symlink():
            os.symlink(os.readlink(src), out)
        else:
            shutil.copy2(src, out)


def _git(cwd: Path, *args: str) -> None:
    env = {**os.environ, "GIT_AUTHOR_NAME": "newcomer", "GIT_AUTHOR_EMAIL": "newcomer@localhost",
           "GIT_COMMITTER_NAME": "newcomer", "GIT_COMMITTER_EMAIL": "newcomer@localhost", "GIT_CONFIG_GLOBAL": "/dev/null"}
    subprocess.run(["git", *args], cwd=cwd, env=env, check=True, capture_output=True)


def test_make_run_twice_then_the_regression_tests(tmp_path: Path) -> None:
    if shutil.which("make") is None or shutil.which("git") is None or not (ROOT / ".git").exists():
        pytest.skip("needs make, git and a git checkout")
    clone = tmp_path / "clone"
    _copy_checkout(clone)
    _git(clone, "init", "-q")
    _git(clone, "add", "-A")
    _git(clone, "commit", "-q", "-m", "the checkout under test")
    venv = Path(sys.executable).parent.parent  # this environment: make must not build another
    env = {**os.environ, "PYTHONPATH": str(clone), "ROBOCACHE_IGNORE_HOST_LOAD": ""}
    env.pop("ROBOCACHE_RESULTS", None)
    from robocache.bench import specs
    from robocache.bench.multigpu import launch

    run_args = "--time-limit 0.2"
    if launch.gpu_count() == 0:  # the CPU providers: make run's device here (the GPU's quick suite otherwise)
        cpu = sorted({c.provider for c in specs.cases("quick", device="cpu")} - {"torch_compile", "torch_eager"})
        run_args += f" --providers {','.join(cpu)}"
    make = ["make", "-C", str(clone), "run", "SERVE=0", f"VENV={venv}", "-o", str(venv / "bin" / ".installed"),
            f"RUN_ARGS={run_args}"]
    for night in (1, 2):
        run = subprocess.run(make, env=env, capture_output=True, text=True, timeout=1800)
        assert run.returncode == 0, (night, run.stdout[-3000:], run.stderr[-3000:])
        assert "robocache (NumPy path)" in run.stdout or "| robocache |" in run.stdout, run.stdout[-3000:]
        assert "Case `resample/B256-S100-T50-D32`" in run.stdout or "Case resample/B256-S100-T50-D32" in run.stdout
    local = sorted((clone / "results" / "local").rglob("*.records.json"))
    assert len(local) == 2, local  # the user's two runs, where make run puts them
    ignored = subprocess.run(["git", "check-ignore", "-q", str(local[0])], cwd=clone).returncode
    assert ignored == 0  # and git ignores them
    tests = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-m", "slow or not slow",
                            *REGRESSION_TESTS], cwd=clone, env=env, capture_output=True, text=True, timeout=3600)
    assert tests.returncode == 0, tests.stdout[-6000:] + tests.stderr[-2000:]
    assert " passed" in tests.stdout and " failed" not in tests.stdout
