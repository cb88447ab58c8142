"""The security rules of .github/workflows, checked offline (docs/ci.md, "Security rules").

`make test` also runs check-jsonschema (GitHub's workflow schema) and zizmor over the same files; these tests
pin down the rules that are ours: who may write, where the GPU runners may be reached from, pinned actions,
no expressions inside shell scripts, timeouts. They also rehearse the two shell parts of the nightly without
GitHub: scripts/nightly.sh with a stub interpreter, and the persist job's script against a local bare repo.
"""
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parent.parent
WF_DIR = ROOT / ".github" / "workflows"
NIGHTLY_SH = ROOT / "scripts" / "nightly.sh"
PR_TRIGGERS = {"pull_request", "pull_request_target", "pull_request_review", "pull_request_review_comment",
               "issue_comment", "workflow_run"}  # events a stranger (a fork, a commenter) can cause
FORK_GUARD = "github.event.repository.fork == false"
EVENT_GUARD = "(github.event_name == 'schedule' || github.event_name == 'workflow_dispatch')"
# The only jobs with a write scope, and the one scope each may write.
WRITERS = {("nightly-machine.yml", "persist"): "contents", ("nightly-machine.yml", "issues"): "issues",
           ("nightly-watchdog.yml", "queued"): "actions"}
# nightly.yml's jobs call the per-machine chain: they grant the most its jobs may have (each asks for less)
CALLERS = {("nightly.yml", j): {"contents", "issues"} for j in ("a100", "h100", "h200")}
# The only checkout that keeps its credentials (it pushes to the benchmark-results branch).
CREDENTIAL_CHECKOUTS = {("nightly-machine.yml", "persist")}
NIGHTLY_FILES = ("nightly.yml", "nightly-machine.yml", "nightly-watchdog.yml")
MACHINE = "nightly-machine.yml"
SHA_PIN = re.compile(r"^[A-Za-z0-9_.-]+/[A-Za-z0-9_./-]+@[0-9a-f]{40}$")


def _load(path: Path) -> dict:
    doc = yaml.safe_load(path.read_text())
    # YAML 1.1 reads the key `on` as the boolean True
    if True in doc:
        doc["on"] = doc.pop(True)
    return doc


WORKFLOWS = {p.name: _load(p) for p in sorted(WF_DIR.glob("*.y*ml"))}


def _triggers(wf: dict) -> set[str]:
    on = wf["on"]
    if isinstance(on, str):
        return {on}
    if isinstance(on, list):
        return set(on)
    return set(on)


def _jobs():
    for name, wf in WORKFLOWS.items():
        for job_id, job in wf["jobs"].items():
            yield name, job_id, job


def _steps():
    for name, job_id, job in _jobs():
        for step in job.get("steps", []):
            yield name, job_id, step


def _write_scopes(perms) -> set[str]:
    if perms is None:
        return set()
    if isinstance(perms, str):
        assert perms in ("read-all", "write-all"), perms
        return {"*"} if perms == "write-all" else set()
    return {k for k, v in perms.items() if v == "write"}


def _runs_on(job: dict) -> list[str]:
    r = job.get("runs-on", [])
    if isinstance(r, dict):
        r = r.get("labels", [])
    return [r] if isinstance(r, str) else list(r)


# ---------------------------------------------------------------------------------------------------------

def test_the_workflows_exist():
    assert {"ci.yml", *NIGHTLY_FILES} <= set(WORKFLOWS)


@pytest.mark.parametrize("name", sorted(WORKFLOWS))
def test_top_level_permissions_present_and_read_only(name):
    wf = WORKFLOWS[name]
    assert "permissions" in wf, f"{name}: no top-level permissions (the default token may write)"
    assert not _write_scopes(wf["permissions"]), f"{name}: top-level permissions write"


def test_nightly_grants_nothing_by_default():
    for name in NIGHTLY_FILES:
        assert WORKFLOWS[name]["permissions"] == {}, name


def test_write_scopes_only_in_named_jobs_one_scope_each():
    for name, job_id, job in _jobs():
        writes = _write_scopes(job.get("permissions"))
        allowed = WRITERS.get((name, job_id))
        if (name, job_id) in CALLERS:
            assert writes == CALLERS[(name, job_id)] and job["uses"].endswith(MACHINE), (name, job_id, writes)
        elif allowed is None:
            assert not writes, f"{name}:{job_id} writes {writes}"
        else:
            assert writes == {allowed}, f"{name}:{job_id} must write exactly {allowed}, writes {writes}"
    for (name, job_id) in WRITERS:
        assert job_id in WORKFLOWS[name]["jobs"], f"{name}:{job_id} is gone: update WRITERS and docs/ci.md"


def test_every_job_declares_permissions_in_nightly():
    for name in NIGHTLY_FILES:
        for job_id, job in WORKFLOWS[name]["jobs"].items():
            assert "permissions" in job, f"{name}:{job_id} inherits permissions: say what it needs"


def test_writers_run_on_github_hosted_runners():
    for (name, job_id) in WRITERS:
        labels = _runs_on(WORKFLOWS[name]["jobs"][job_id])
        assert "self-hosted" not in labels, f"{name}:{job_id}: a write token must not reach a self-hosted runner"


def test_nightly_triggers_are_schedule_and_dispatch_only():
    for name in ("nightly.yml", "nightly-watchdog.yml"):
        trig = _triggers(WORKFLOWS[name])
        assert trig == {"schedule", "workflow_dispatch"}, (name, trig)
    assert _triggers(WORKFLOWS[MACHINE]) == {"workflow_call"}  # no trigger of its own


def _callers(target: str) -> list[tuple[str, str]]:
    return [(name, job_id) for name, job_id, job in _jobs() if str(job.get("uses", "")).endswith(f"/{target}")]


def _may_run_self_hosted(job: dict) -> bool:
    """A job whose labels say self-hosted, or are computed (an expression could name any label)."""
    labels = _runs_on(job)
    return "self-hosted" in labels or any("${{" in str(x) for x in labels) or "${{" in str(job.get("runs-on", ""))


@pytest.mark.parametrize("name", sorted(WORKFLOWS))
def test_no_workflow_reaches_self_hosted_runners_from_a_pull_request(name):
    """Every workflow file, not only the nightly: a job that may run on a self-hosted runner lives only in a
    workflow without pull-request (or comment, workflow_run) triggers, is called only from such workflows,
    and carries the fork guard and, in a reusable workflow, the event guard (schedule or dispatch only). A
    workflow with such triggers has no self-hosted job, no computed runs-on, and calls no workflow that has
    one. (A fork's pull request runs its own copy of the files: the runner's job-started hook,
    scripts/runner_job_guard.sh, is what refuses it there; see test_runner_job_guard.)"""
    wf = WORKFLOWS[name]
    trig = _triggers(wf)
    for job_id, job in wf["jobs"].items():
        uses = str(job.get("uses", ""))
        if uses.startswith("./"):
            called = WORKFLOWS[Path(uses).name]
            if any(_may_run_self_hosted(j) for j in called["jobs"].values()):
                assert not trig & PR_TRIGGERS, f"{name}:{job_id} calls {uses} (self-hosted) on {trig & PR_TRIGGERS}"
                assert FORK_GUARD in str(job.get("if", "")), f"{name}:{job_id}: no fork guard"
        elif uses:
            pytest.fail(f"{name}:{job_id}: calls a workflow of another repository: {uses}")
        if not _may_run_self_hosted(job):
            continue
        assert not trig & PR_TRIGGERS, f"{name}:{job_id} may run self-hosted but {name} has {trig & PR_TRIGGERS}"
        cond = " ".join(str(job.get("if", "")).split())
        assert FORK_GUARD in cond, f"{name}:{job_id}: no fork guard ({FORK_GUARD})"
        if "workflow_call" in trig:
            assert EVENT_GUARD in cond, f"{name}:{job_id}: a reusable workflow's GPU job needs {EVENT_GUARD}"
            callers = _callers(name)
            assert callers, f"{name} has a self-hosted job and no caller"
            for cname, cjob in callers:
                assert not _triggers(WORKFLOWS[cname]) & PR_TRIGGERS, f"{cname}:{cjob} calls {name} from a PR"


def test_some_job_is_self_hosted():
    assert any(_may_run_self_hosted(j) for _, _, j in _jobs()), "no self-hosted job found: the GPU chain is gone?"


def test_runner_job_guard(tmp_path):
    guard = ROOT / "scripts" / "runner_job_guard.sh"
    base = {"PATH": os.environ["PATH"], "ROBOCACHE_RUNNER_REPO": "octo/robocache", "GITHUB_REPOSITORY": "octo/robocache",
            "GITHUB_WORKFLOW_REF": "octo/robocache/.github/workflows/nightly.yml@refs/heads/main"}

    def run(**env):
        return subprocess.run(["bash", str(guard)], env={**base, **env}, capture_output=True, text=True)

    assert run(GITHUB_EVENT_NAME="schedule").returncode == 0
    assert run(GITHUB_EVENT_NAME="workflow_dispatch").returncode == 0
    # a dispatch from another branch would run that branch's code on the GPU runners
    other = run(GITHUB_EVENT_NAME="workflow_dispatch",
                GITHUB_WORKFLOW_REF="octo/robocache/.github/workflows/nightly.yml@refs/heads/feature")
    assert other.returncode == 1 and "on main" in other.stderr
    assert run(GITHUB_EVENT_NAME="workflow_dispatch", ROBOCACHE_RUNNER_BRANCH="release",
               GITHUB_WORKFLOW_REF="octo/robocache/.github/workflows/nightly.yml@refs/heads/release").returncode == 0
    for env, why in [({"GITHUB_EVENT_NAME": "pull_request"}, "only the schedule"),
                     ({"GITHUB_EVENT_NAME": "pull_request_target"}, "only the schedule"),
                     ({"GITHUB_EVENT_NAME": "push"}, "only the schedule"),
                     ({"GITHUB_EVENT_NAME": "schedule", "GITHUB_REPOSITORY": "fork/robocache"}, "is not octo/robocache"),
                     ({"GITHUB_EVENT_NAME": "schedule",
                       "GITHUB_WORKFLOW_REF": "octo/robocache/.github/workflows/ci.yml@refs/heads/main"},
                      "only octo/robocache/.github/workflows/nightly.yml"),
                     ({"GITHUB_EVENT_NAME": "schedule", "ROBOCACHE_RUNNER_REPO": ""}, "is not set")]:
        out = run(**env)
        assert out.returncode == 1 and "refusing this job" in out.stderr and why in out.stderr, (env, out.stderr)


def test_follow_on_jobs_are_fork_guarded_and_default_branch_only():
    jobs = WORKFLOWS[MACHINE]["jobs"]
    for job_id in ("persist", "issues"):
        cond = " ".join(str(jobs[job_id]["if"]).split())
        assert FORK_GUARD in cond and "!cancelled()" in cond, cond
        assert "github.ref_name == github.event.repository.default_branch" in cond, cond
        assert jobs[job_id]["needs"] == "bench"


def test_one_job_chain_per_gpu_runner_label():
    jobs = WORKFLOWS["nightly.yml"]["jobs"]
    got = {(j["with"]["machine"], j["with"]["gpu"]) for j in jobs.values()}
    assert got == {("gpu-a100", "a100"), ("gpu-h100", "h100"), ("gpu-h200", "h200")}
    assert all(j["uses"].endswith(MACHINE) and "needs" not in j for j in jobs.values())  # independent chains
    chain = WORKFLOWS[MACHINE]["jobs"]
    assert chain["bench"]["runs-on"] == ["self-hosted", "linux", "gpu", "${{ inputs.gpu }}"]
    assert set(chain) == {"bench", "persist", "issues"}
    # the persist job commits only this machine's night
    dl = [s for s in chain["persist"]["steps"] if str(s.get("uses", "")).startswith("actions/download-artifact@")]
    assert dl[0]["with"]["pattern"] == "nightly-${{ inputs.machine }}"


def test_bench_job_is_thin_one_script():
    steps = WORKFLOWS[MACHINE]["jobs"]["bench"]["steps"]
    runs = [s["run"] for s in steps if "run" in s]
    assert runs == ['bash scripts/nightly.sh "$MACHINE" "$RUNNER_TEMP/nightly"']
    upload = [s for s in steps if str(s.get("uses", "")).startswith("actions/upload-artifact@")]
    assert len(upload) == 1 and upload[0]["if"] == "${{ !cancelled() }}"  # uploaded after a regression too


def test_every_uses_is_pinned_to_a_full_sha_with_a_version_comment():
    n = 0
    for path in WF_DIR.glob("*.y*ml"):
        for line in path.read_text().splitlines():
            m = re.match(r"\s*(?:-\s+)?uses:\s*(\S+)(.*)$", line)
            if not m:
                continue
            n += 1
            ref, rest = m.groups()
            if ref.startswith("./"):
                continue  # a local action is pinned by this commit
            assert SHA_PIN.match(ref), f"{path.name}: {ref} is not pinned to a 40-hex commit"
            assert re.match(r"\s+# v\d+\.\d+\.\d+\s*$", rest), f"{path.name}: {ref} lacks a '# vX.Y.Z' comment"
    assert n >= 4
    # one action, one pin, everywhere
    pins: dict[str, set[str]] = {}
    for _, _, step in _steps():
        if "uses" in step:
            action, sha = step["uses"].split("@")
            pins.setdefault(action, set()).add(sha)
    assert all(len(v) == 1 for v in pins.values()), pins


def test_no_expressions_inside_run_scripts():
    # zizmor's template-injection rule, made absolute: values reach scripts through env:, never ${{ }}
    for name, job_id, step in _steps():
        if "run" in step:
            assert "${{" not in step["run"], f"{name}:{job_id}: expression inside run: {step['run']!r}"


def test_untrusted_values_only_via_env():
    for name, job_id, step in _steps():
        for k, v in (step.get("env") or {}).items():
            if "github.event." in str(v) and "fork" not in str(v):
                pytest.fail(f"{name}:{job_id}: env {k} carries event data {v!r}")


def test_checkouts_do_not_persist_credentials_except_the_push_job():
    n = 0
    for name, job_id, step in _steps():
        if not str(step.get("uses", "")).startswith("actions/checkout@"):
            continue
        n += 1
        persist = (step.get("with") or {}).get("persist-credentials")
        if (name, job_id) in CREDENTIAL_CHECKOUTS:
            assert persist is True, f"{name}:{job_id}: the push checkout says persist-credentials: true explicitly"
        else:
            assert persist is False, f"{name}:{job_id}: checkout without persist-credentials: false"
    assert n >= 4


def test_push_job_runs_no_repository_code_and_uploads_nothing():
    steps = WORKFLOWS[MACHINE]["jobs"]["persist"]["steps"]
    assert not any(str(s.get("uses", "")).startswith("actions/upload-artifact@") for s in steps)
    script = "\n".join(s["run"] for s in steps if "run" in s)
    for banned in ("scripts/", "python", "pip ", "make ", "bash ", "source ", "./"):
        assert banned not in script, f"the persist job must only move files and run git: found {banned!r}"
    assert "git push" in script and "benchmark-results" in script


def test_every_job_has_a_timeout():
    for name, job_id, job in _jobs():
        if "uses" in job:  # a call of a reusable workflow: its own jobs carry the timeouts (GitHub allows none here)
            continue
        t = job.get("timeout-minutes")
        assert isinstance(t, int) and 0 < t <= 120, f"{name}:{job_id}: timeout-minutes {t!r}"


def test_ci_workflow():
    ci = WORKFLOWS["ci.yml"]
    assert {"push", "pull_request"} <= _triggers(ci)
    assert ci["permissions"] == {"contents": "read"}
    assert ci["concurrency"]["cancel-in-progress"] is True
    (job,) = ci["jobs"].values()
    assert job["runs-on"] == "ubuntu-latest"
    setup = [s for s in job["steps"] if str(s.get("uses", "")).startswith("actions/setup-python@")]
    assert setup and str(setup[0]["with"]["python-version"]) == "3.11"
    assert [s["run"] for s in job["steps"] if "run" in s] == ["bash .ci/run fast", "bash .ci/run rest"]  # fast tier first
    # uv on PATH for `make setup`, its cache keyed by the lock, its version the lock's pin
    (uv,) = [s for s in job["steps"] if str(s.get("uses", "")).startswith("astral-sh/setup-uv@")]
    assert uv["with"]["enable-cache"] is True and uv["with"]["cache-dependency-glob"] == "requirements/dev.lock"
    (pin,) = re.findall(r"^uv==(\S+)$", (ROOT / "requirements" / "dev.lock").read_text(), re.M)
    assert str(uv["with"]["version"]) == pin
    steps = [str(s.get("uses", s.get("run"))) for s in job["steps"]]
    assert steps.index(uv["uses"]) < steps.index("bash .ci/run fast")


def test_makefile_setup_installs_the_lock_with_uv_or_pip():
    mk = (ROOT / "Makefile").read_text()
    rule = mk.split("$(BIN)/.installed:", 1)[1].split("\n\n", 1)[0]
    assert "LOCK ?= requirements/dev.lock" in mk and "$(LOCK)" in rule.splitlines()[0]  # a new lock reinstalls
    assert "$$uv pip install" in rule and "-r $(LOCK) -e ." in rule  # uv: the lock and robocache
    assert "$(BIN)/python -m pip install -q -r $(LOCK) -e ." in rule  # pip: the same, when uv cannot be had
    assert "grep -m1 '^uv==' $(LOCK)" in rule  # uv from PyPI at the lock's version


def test_dependabot_updates_actions_and_python_weekly_with_a_cooldown():
    path = ROOT / ".github" / "dependabot.yml"
    doc = yaml.safe_load(path.read_text())
    assert doc["version"] == 2
    ups = {u["package-ecosystem"]: u for u in doc["updates"]}
    assert set(ups) == {"github-actions", "pip"}  # the pinned actions; pyproject.toml's dependencies
    for eco, u in ups.items():
        assert u["directory"] == "/" and u["schedule"]["interval"] == "weekly", eco
        assert u["cooldown"]["default-days"] >= 7, eco  # zizmor's dependabot-cooldown audit
    # the same offline validators as the workflows: SchemaStore's dependabot schema and zizmor's audits
    bindir = Path(sys.executable).parent
    for tool, args in (("check-jsonschema", ["--builtin-schema", "vendor.dependabot", str(path)]),
                       ("zizmor", ["--offline", "--no-progress", str(path)])):
        exe = bindir / tool
        if not exe.exists():
            pytest.skip(f"{tool} is not installed next to {sys.executable}: `make setup` installs it")
        out = subprocess.run([str(exe), *args], capture_output=True, text=True, timeout=120)
        assert out.returncode == 0, f"{tool}: {out.stdout[-2000:]}{out.stderr[-2000:]}"


def test_nightly_has_no_concurrency_group_that_could_drop_a_night():
    # GitHub keeps ONE pending run or job per concurrency group and cancels the older pending one: three
    # machines' pushes, or two nights behind an offline runner, would lose a night
    for name in ("nightly.yml", MACHINE):
        assert "concurrency" not in WORKFLOWS[name], name
        for job_id, job in WORKFLOWS[name]["jobs"].items():
            assert "concurrency" not in job, f"{name}:{job_id}"


def test_makefile_runs_the_offline_validators_before_pytest():
    mk = (ROOT / "Makefile").read_text()
    validate = mk.split("\nvalidate:", 1)[1].split("\n\n", 1)[0]
    assert "check-jsonschema --builtin-schema vendor.github-workflows .github/workflows/*.yml" in validate
    assert "zizmor --offline .github/workflows" in validate
    test = mk.split("\ntest:", 1)[1].split("\n\n", 1)[0]  # make test: the validators, then the two test tiers
    assert test.index("validate") < test.index("test-fast") < test.index("test-rest")


# ---------------------------------------------------------------------------------------------------------
# scripts/nightly.sh with a stub interpreter: the order of the steps, their arguments, the exit code

STUB = r'''#!/usr/bin/env bash
# A stand-in for python3: logs each call as one JSON line and plays robocache-bench and asv.
log="$STUB_LOG"
python3 - "$log" "$@" <<'PY'
import json, os, sys
log, args = sys.argv[1], sys.argv[2:]
with open(log, "a") as f:
    f.write(json.dumps({"args": args, "results": os.environ.get("ROBOCACHE_RESULTS"),
                        "suite": os.environ.get("ROBOCACHE_SUITE"),
                        "pythonpath": os.environ.get("PYTHONPATH", "")}) + "\n")
PY
if [ "$1 $2" = "-m robocache.bench.cli" ]; then
  case "$3" in
    run) echo "run r1: ok 3"; exit "${STUB_RUN_RC:-0}" ;;
    report) echo "| headline table |"; exit 0 ;;
    check)
      [ "${STUB_CHECK_CRASH:-0}" = 1 ] && { echo "Traceback (most recent call last): ..." >&2; exit 1; }
      shift 3
      while [ $# -gt 0 ]; do
        case "$1" in
          --json) printf '{"schema": "robocache-alerts/1", "alerts": []}' > "$2"; shift ;;
          --markdown) printf '## robocache-bench check\n\nSTUB ALERTS\n' > "$2"; shift ;;
        esac
        shift
      done
      exit "${STUB_CHECK_RC:-0}" ;;
    bisect)
      shift 3
      while [ $# -gt 0 ]; do
        case "$1" in
          --out) mkdir -p "$2" && printf '{"schema": "robocache-bisect/1"}' > "$2/stub.bisect.json"; shift ;;
        esac
        shift
      done
      echo "### Bisection: STUB CULPRIT"; exit "${STUB_BISECT_RC:-0}" ;;
  esac
fi
if [ "$1 $2 $3" = "-m asv run" ]; then exit "${STUB_ASV_RC:-0}"; fi
if [ "$1 $2" = "-m asv" ]; then exit 0; fi
if [ "$1 $2" = "-m benchmarks.machine" ]; then exit 0; fi
echo "stub: unexpected call: $*" >&2; exit 99
'''


@pytest.fixture
def stub(tmp_path, monkeypatch):
    py = tmp_path / "stub-python"
    py.write_text(STUB)
    py.chmod(0o755)
    log = tmp_path / "calls.jsonl"
    summary = tmp_path / "summary.md"
    monkeypatch.setenv("PYTHON", str(py))
    monkeypatch.setenv("STUB_LOG", str(log))
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    for k in ("SUITE", "DEVICE", "CONFIRM", "ASV", "HISTORY", "STUB_RUN_RC", "STUB_CHECK_RC", "STUB_ASV_RC",
              "STUB_CHECK_CRASH", "BISECT", "BISECT_BUDGET_S", "STUB_BISECT_RC"):
        monkeypatch.delenv(k, raising=False)

    def run(*args: str, **env: str):
        p = subprocess.run(["bash", str(NIGHTLY_SH), *args], capture_output=True, text=True, timeout=60,
                           env={**os.environ, **env})
        calls = [json.loads(x) for x in log.read_text().splitlines()] if log.exists() else []
        return p, calls, (summary.read_text() if summary.exists() else "")

    return run


def _cmd(call: dict) -> str:
    a = call["args"]
    if a[:2] == ["-m", "benchmarks.machine"]:  # asv's machine description with the GPU (benchmarks/machine.py)
        return "asv machine"
    return a[2] if a[:2] == ["-m", "robocache.bench.cli"] else f"asv {a[2]}"


def test_nightly_sh_help_and_bad_args():
    p = subprocess.run(["bash", str(NIGHTLY_SH), "--help"], capture_output=True, text=True)
    assert p.returncode == 0 and "scripts/nightly.sh MACHINE OUTDIR" in p.stdout and "HISTORY" in p.stdout
    assert subprocess.run(["bash", str(NIGHTLY_SH)], capture_output=True).returncode == 2
    assert subprocess.run(["bash", str(NIGHTLY_SH), "a;b", "/tmp/x"], capture_output=True).returncode == 2


def test_nightly_sh_steps_and_arguments(stub, tmp_path):
    hist = tmp_path / "history"
    hist.mkdir()
    out = tmp_path / "out"
    p, calls, summary = stub("gpu-h100", str(out), HISTORY=str(hist), CONFIRM="1")
    assert p.returncode == 0, p.stdout + p.stderr
    assert [_cmd(c) for c in calls] == ["run", "report", "asv machine", "asv run", "check"]
    run, report, machine, asv, check = (c["args"][2:] for c in calls)
    assert run == ["run", "--suite", "nightly", "--device", "gpu", "--out", f"{out}/records",
                   "--machine", "gpu-h100", "--no-progress", "--precompile-jobs", "4"]
    assert report == ["report", f"{out}/records", "--headline"]
    # asv's machine description: benchmarks.machine (asv machine --yes plus the GPU facts); `asv machine` until
    # nightly.sh switches to it
    assert machine in (["--machine", "gpu-h100"], ["machine", "--machine", "gpu-h100", "--yes"])
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True).stdout.strip()
    assert asv[:6] == ["run", "--python=same", "--machine", "gpu-h100", "--set-commit-hash", head]
    assert calls[3]["results"] == f"{out}/records" and calls[3]["suite"] == "nightly"
    assert check == ["check", str(hist), f"{out}/records", "--machine", "gpu-h100", "--json", f"{out}/alerts.json",
                     "--markdown", f"{out}/alerts.md", "--confirm", "--confirm-out", f"{out}/confirm",
                     "--fail-on-regression"]
    assert calls[0]["pythonpath"].split(":")[0] == str(ROOT)  # robocache from this checkout
    assert "| headline table |" in summary and "STUB ALERTS" in summary and "gpu-h100" in summary
    assert (out / "report.md").read_text().strip() == "| headline table |"
    assert "NIGHTLY check: gpu-h100: no confirmed regression" in p.stdout


def test_nightly_sh_regression_fails_after_everything_is_written(stub, tmp_path):
    out = tmp_path / "out"
    p, calls, summary = stub("gpu-a100", str(out), STUB_CHECK_RC="1", ASV="0", SUITE="quick", HISTORY="")
    assert p.returncode == 1
    assert [_cmd(c) for c in calls] == ["run", "report", "check"]  # ASV=0 skips asv
    assert "--confirm" not in calls[-1]["args"]  # CONFIRM unset
    assert calls[0]["args"][4] == "quick"
    assert (out / "alerts.json").exists() and (out / "alerts.md").exists()
    assert "CONFIRMED REGRESSION" in p.stdout
    assert "checked against itself only" in summary and "STUB ALERTS" in summary


def test_nightly_sh_failed_cases_or_asv_still_run_the_check(stub, tmp_path):
    out = tmp_path / "out"
    p, calls, summary = stub("gpu-h200", str(out), STUB_RUN_RC="1", STUB_ASV_RC="2")
    assert p.returncode == 1
    assert [_cmd(c) for c in calls] == ["run", "report", "asv machine", "asv run", "check"]
    assert "Some cases failed" in summary and "asv run failed (exit 2)" in summary
    assert "NIGHTLY check: gpu-h200: no confirmed regression" in p.stdout


def test_nightly_sh_check_error_is_reported(stub, tmp_path):
    p, calls, _ = stub("gpu-h200", str(tmp_path / "out"), STUB_CHECK_RC="2", ASV="0")
    assert p.returncode == 1 and "check failed (exit 2" in p.stdout


def test_nightly_sh_check_crash_is_not_a_regression(stub, tmp_path):
    # a Python traceback also exits 1: without alerts written it is a failed check, not a regression
    out = tmp_path / "out"
    out.mkdir()
    (out / "alerts.json").write_text("{}")  # a stale file from an earlier run in the same folder
    p, calls, summary = stub("gpu-h200", str(out), STUB_CHECK_CRASH="1", ASV="0")
    assert p.returncode == 1
    assert "check failed (exit 1; alerts.json missing)" in p.stdout and "REGRESSION" not in p.stdout
    assert "robocache-bench check failed (exit 1) and wrote no alerts" in summary
    assert not (out / "alerts.json").exists()


# ---------------------------------------------------------------------------------------------------------
# the persist job's script against a local bare repository (no GitHub, no network)

def _git(cwd: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, text=True).stdout.strip()


PERSIST = next(s["run"] for s in WORKFLOWS[MACHINE]["jobs"]["persist"]["steps"] if s.get("id") == "persist")


@pytest.fixture
def origin(tmp_path):
    if shutil.which("git") is None:
        pytest.skip("git is not installed")
    bare = tmp_path / "origin.git"
    _git(tmp_path, "init", "-q", "--bare", "-b", "main", str(bare))
    seed = tmp_path / "seed"
    _git(tmp_path, "clone", "-q", str(bare), str(seed))
    (seed / "code.py").write_text("print('the default branch')\n")
    _git(seed, "add", "code.py")
    _git(seed, "-c", "user.name=t", "-c", "user.email=t@example.invalid", "commit", "-q", "-m", "main")
    _git(seed, "push", "-q", "origin", "HEAD:main")
    return bare


def _night(tmp_path: Path, origin: Path, n: int, machines=("gpu-h100",), hook: str | None = None):
    """One run of the persist script in a fresh workspace, as the job sees it after its first two steps."""
    ws = tmp_path / f"ws{n}"
    for m in machines:
        d = ws / "night" / f"nightly-{m}"
        (d / "records" / f"sm_90-{m}").mkdir(parents=True)
        (d / "records" / f"sm_90-{m}" / f"run{n}.records.json").write_text("[]  SYNTHETIC\n")
        (d / "asv" / m).mkdir(parents=True)
        (d / "asv" / m / f"commit{n}.json").write_text("{}\n")
        (d / "alerts.json").write_text('{"schema": "robocache-alerts/1", "alerts": []}\n')
        (d / "alerts.md").write_text("No performance regression.\n")
    _git(tmp_path, "clone", "-q", "--depth=1", f"file://{origin}", str(ws / "results-branch"))
    if hook:
        h = ws / "results-branch" / ".git" / "hooks" / "pre-push"
        h.write_text(hook)
        h.chmod(0o755)
    env = {**os.environ, "GITHUB_SHA": f"{n:040x}", "GITHUB_RUN_ID": str(1000 + n),
           "GITHUB_SERVER_URL": "https://github.example", "GITHUB_REPOSITORY": "octo/robocache",
           "GIT_CONFIG_GLOBAL": "/dev/null"}
    return subprocess.run(["bash", "-c", PERSIST], cwd=ws, env=env, capture_output=True, text=True, timeout=120)


def test_persist_creates_orphan_branch_then_appends(tmp_path, origin):
    p = _night(tmp_path, origin, 1, machines=("gpu-h100", "gpu-h200"))
    assert p.returncode == 0, p.stdout + p.stderr
    files = set(_git(origin, "ls-tree", "-r", "--name-only", "benchmark-results").splitlines())
    day = _git(origin, "log", "-1", "--format=%s", "benchmark-results").split()[1].rstrip(":")
    assert "code.py" not in files  # an orphan branch: none of the default branch's files
    assert {"README.md", "records/sm_90-gpu-h100/run1.records.json", "records/sm_90-gpu-h200/run1.records.json",
            "asv/gpu-h100/commit1.json", f"nights/{day}/gpu-h100/alerts.json",
            f"nights/{day}/gpu-h200/alerts.md"} <= files
    assert _git(origin, "rev-list", "--count", "benchmark-results") == "1"
    msg = _git(origin, "log", "-1", "--format=%B", "benchmark-results")
    assert "gpu-h100 gpu-h200 at 000000000000" in msg and "actions/runs/1001" in msg
    assert _git(origin, "rev-parse", "main") != _git(origin, "rev-parse", "benchmark-results")
    assert len(_git(origin, "log", "--format=%H", "main").splitlines()) == 1  # main untouched

    p = _night(tmp_path, origin, 2)
    assert p.returncode == 0, p.stdout + p.stderr
    files = set(_git(origin, "ls-tree", "-r", "--name-only", "benchmark-results").splitlines())
    assert {"records/sm_90-gpu-h100/run1.records.json", "records/sm_90-gpu-h100/run2.records.json"} <= files
    assert _git(origin, "rev-list", "--count", "benchmark-results") == "2"


def test_persist_retries_when_someone_pushed_in_between(tmp_path, origin):
    assert _night(tmp_path, origin, 1).returncode == 0
    other = tmp_path / "other"
    _git(tmp_path, "clone", "-q", "-b", "benchmark-results", str(origin), str(other))
    # a pre-push hook that, the first time, lets someone else push first: our push is then rejected
    hook = textwrap.dedent(f"""\
        #!/usr/bin/env bash
        flag={tmp_path}/raced
        [ -e "$flag" ] && exit 0
        touch "$flag"
        cd {other} && echo x > manual.txt && git add manual.txt &&
          git -c user.name=o -c user.email=o@example.invalid commit -q -m manual && git push -q origin HEAD
        exit 0
        """)
    p = _night(tmp_path, origin, 2, hook=hook)
    assert p.returncode == 0, p.stdout + p.stderr
    files = set(_git(origin, "ls-tree", "-r", "--name-only", "benchmark-results").splitlines())
    assert {"manual.txt", "records/sm_90-gpu-h100/run1.records.json",
            "records/sm_90-gpu-h100/run2.records.json"} <= files
    assert _git(origin, "rev-list", "--count", "benchmark-results") == "3"


def test_persist_without_artifacts_is_a_warning(tmp_path, origin):
    ws = tmp_path / "ws"
    (ws / "night").mkdir(parents=True)
    p = subprocess.run(["bash", "-c", PERSIST], cwd=ws, capture_output=True, text=True, timeout=60)
    assert p.returncode == 0 and "::warning::no nightly-* artifacts" in p.stdout
