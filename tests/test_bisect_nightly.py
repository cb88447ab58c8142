"""The nightly's bisection step: scripts/nightly.sh step 4 with the stub interpreter of tests/test_workflows.py,
the persist job committing the documents, and the issues job handing them to alerts_to_issues.py."""
from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from tests.test_workflows import MACHINE, PERSIST, WORKFLOWS, _cmd, _git, origin, stub  # noqa: F401 - fixtures


def test_a_confirmed_regression_is_bisected_after_the_check(stub, tmp_path: Path) -> None:  # noqa: F811
    hist, out = tmp_path / "history", tmp_path / "out"
    (hist / "bisect").mkdir(parents=True)
    p, calls, summary = stub("gpu-h100", str(out), HISTORY=str(hist), CONFIRM="1", STUB_CHECK_RC="1", ASV="0")
    assert p.returncode == 1, p.stdout + p.stderr  # the regression still fails the night
    assert [_cmd(c) for c in calls] == ["run", "report", "check", "bisect"]
    assert calls[-1]["args"][2:] == [
        "bisect", "--alerts", f"{out}/alerts.json", "--all", "--machine", "gpu-h100", "--device", "gpu",
        "--suite", "nightly", "--budget", "1800", "--out", f"{out}/bisect", "--known", f"{hist}/bisect"]
    assert (out / "bisect" / "stub.bisect.json").exists() and "STUB CULPRIT" in (out / "bisect.md").read_text()
    assert "STUB CULPRIT" in summary and "NIGHTLY bisect: gpu-h100: exit 0" in p.stdout
    assert "CONFIRMED REGRESSION" in p.stdout


def test_the_bisection_budget_and_switch(stub, tmp_path: Path) -> None:  # noqa: F811
    out = tmp_path / "out"
    p, calls, _ = stub("gpu-h200", str(out), CONFIRM="1", STUB_CHECK_RC="1", ASV="0", BISECT_BUDGET_S="600")
    args = calls[-1]["args"]
    assert args[2] == "bisect" and args[args.index("--budget") + 1] == "600" and "--known" not in args
    p, calls, _ = stub("gpu-h200", str(tmp_path / "o2"), CONFIRM="1", STUB_CHECK_RC="1", ASV="0", BISECT="0")
    assert [_cmd(c) for c in calls][-1] == "check"


@pytest.mark.parametrize("env", [{"STUB_CHECK_RC": "0"}, {"STUB_CHECK_RC": "1", "CONFIRM": ""},
                                 {"STUB_CHECK_RC": "2"}, {"STUB_CHECK_CRASH": "1"}])
def test_no_bisection_without_a_confirmed_regression(stub, tmp_path: Path, env: dict) -> None:  # noqa: F811
    p, calls, _ = stub("gpu-h200", str(tmp_path / "out"), **{"CONFIRM": "1", "ASV": "0", **env})
    assert "bisect" not in [_cmd(c) for c in calls]


def test_a_failed_bisection_is_reported_and_fails_the_night(stub, tmp_path: Path) -> None:  # noqa: F811
    p, calls, summary = stub("gpu-h200", str(tmp_path / "out"), CONFIRM="1", STUB_CHECK_RC="1", ASV="0",
                             STUB_BISECT_RC="3")
    assert p.returncode == 1 and "NIGHTLY bisect: gpu-h200: exit 3" in p.stdout
    assert "robocache-bench bisect failed (exit 3)" in summary


def test_persist_commits_the_bisections_beside_the_night(tmp_path: Path, origin) -> None:  # noqa: F811
    ws = tmp_path / "ws"
    d = ws / "night" / "nightly-gpu-h100"
    (d / "bisect").mkdir(parents=True)
    (d / "alerts.json").write_text('{"schema": "robocache-alerts/1", "alerts": []}\n')
    (d / "bisect.md").write_text("### Bisection: SYNTHETIC\n")
    (d / "bisect" / "gpu-h100-0123456789ab.bisect.json").write_text('{"schema": "robocache-bisect/1"}\n')
    _git(tmp_path, "clone", "-q", "--depth=1", f"file://{origin}", str(ws / "results-branch"))
    env = {**os.environ, "GITHUB_SHA": "1" * 40, "GITHUB_RUN_ID": "7", "GITHUB_SERVER_URL": "https://github.example",
           "GITHUB_REPOSITORY": "octo/robocache", "GIT_CONFIG_GLOBAL": "/dev/null"}
    p = subprocess.run(["bash", "-c", PERSIST], cwd=ws, env=env, capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stdout + p.stderr
    files = _git(ws / "results-branch", "ls-tree", "-r", "--name-only", "HEAD").splitlines()
    assert "bisect/gpu-h100/gpu-h100-0123456789ab.bisect.json" in files
    assert any(f.endswith("/gpu-h100/bisect.md") and f.startswith("nights/") for f in files)
    assert not any(f.startswith("records/") and "bisect" in f for f in files)  # never a history record


def test_the_issues_job_hands_the_bisections_to_alerts_to_issues() -> None:
    step = next(s for s in WORKFLOWS[MACHINE]["jobs"]["issues"]["steps"] if s.get("name") == "Alerts to issues")
    assert 'bisections=(night/nightly-*/bisect/*.bisect.json)' in step["run"]
    assert '--bisect "${bisections[@]}"' in step["run"]
    bench = WORKFLOWS[MACHINE]["jobs"]["bench"]
    run = next(s for s in bench["steps"] if "run" in s)
    assert run["env"]["BISECT_BUDGET_S"] == "1800" and bench["timeout-minutes"] >= 90 + 30
