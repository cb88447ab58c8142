"""``robocache-bench bisect`` end to end over a small git history whose "robocache" is a stand-in CLI.

Each commit of the throwaway history has its own ``robocache/bench/cli.py``: a stand-in for the harness that writes
schema-valid records (synthetic, from tests/test_store.py's template) whose time is 100 us times the commit's
``level.txt``. What is tested is the plumbing the real harness goes through: the range from git, a worktree per
tested commit with the candidate's own code imported (never this checkout's), a commit that does not import or
does not know the case skipped as untestable, the records read back, the run files kept as ``*.bisect-run.json``,
the worktrees removed, the document and the command line. The real harness is the CPU rehearsal's
(tests/test_bisect_rehearsal.py).
"""
from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from robocache.bench import bisect as B
from robocache.bench import cli, schema, store
from tests.test_store import make_env, make_record

KEY = "resample/B32-S100-T50-D32/float32/numpy"
OTHER = "resample/B16-S100-T50-D32/float32/numpy"

FAKE_CLI = r'''
"""A stand-in for robocache-bench run (tests/test_bisect_git.py): records whose time is 100 us x level.txt."""
import argparse, copy, json, os, random, sys, uuid
from pathlib import Path

def main(argv=None):
    p = argparse.ArgumentParser()
    p.add_argument("cmd")
    p.add_argument("--cases", default="")
    p.add_argument("--out")
    p.add_argument("--machine")
    p.add_argument("--cache", default="warm")
    a, _ = p.parse_known_args(argv)
    if a.cmd != "run":
        return 2
    here = Path(__file__).resolve().parents[2]
    if (here / "unknown.txt").exists():
        print("robocache-bench run: unknown case " + a.cases.split(",")[0], file=sys.stderr)
        return 2
    level = float((here / "level.txt").read_text())
    tpl = json.loads(Path(os.environ["FAKE_TEMPLATE"]).read_text())
    rng = random.Random(os.environ.get("ROBOCACHE_GIT_COMMIT", "") + a.cases)
    run_id = "20260101T000000Z-" + uuid.uuid4().hex[:6]
    recs = []
    for key in a.cases.split(","):
        cid, dtype, prov = key.rsplit("/", 2)
        r = copy.deepcopy(tpl["records"][0])
        t = 100.0 * level * (1 + 0.02 * rng.random())
        r.update(run_id=run_id, git_commit=os.environ.get("ROBOCACHE_GIT_COMMIT"), suite="nightly", frontend="cli")
        r["case"].update(id=cid, dtype=dtype, provider=prov)
        r["method"]["cache"] = a.cache
        r["metrics"]["time_us"] = {"p20": t, "p50": t, "p80": t, "min": t, "max": t, "mean": t}
        recs.append(r)
    env = dict(tpl["env"], machine=a.machine)
    out = Path(a.out) / ("cpu-" + a.machine)
    out.mkdir(parents=True, exist_ok=True)
    doc = {"schema_version": 3, "kind": "robocache-bench/records", "env": env, "records": recs}
    (out / (run_id + "-nightly.records.json")).write_text(json.dumps(doc))
    return 0

if __name__ == "__main__":
    sys.exit(main())
'''


def git(repo: Path, *args: str) -> str:
    env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@localhost", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@localhost", "GIT_CONFIG_GLOBAL": "/dev/null"}
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, text=True,
                          env=env).stdout.strip()


@pytest.fixture
def history(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict:
    """Commits 0..8: level 1 before commit 6, 2 from it; commit 4 (the first probe) does not import (fixed by 5)."""
    tpl_dir = tmp_path / "tpl"
    rec = make_record(32, run_id="template")
    rec["synthetic"] = True
    path = store.write_records(tpl_dir, make_env("fake"), [rec], name="template")
    monkeypatch.setenv("FAKE_TEMPLATE", str(path))
    repo = tmp_path / "repo"
    (repo / "robocache" / "bench").mkdir(parents=True)
    (repo / "robocache" / "__init__.py").write_text("")
    (repo / "robocache" / "bench" / "__init__.py").write_text("")
    cli_py = repo / "robocache" / "bench" / "cli.py"
    git(repo, "init", "-q", "-b", "main")
    shas = []
    for i in range(9):
        cli_py.write_text(FAKE_CLI + ("\nthis is not python\n" if i == 4 else ""))
        (repo / "level.txt").write_text("2.0" if i >= 6 else "1.0")
        (repo / "n.txt").write_text(f"{i}\n")
        git(repo, "add", "-A")
        git(repo, "commit", "-q", "-m", f"commit {i}" + (" <b>breaks the import</b>" if i == 4 else ""))
        shas.append(git(repo, "rev-parse", "HEAD"))
    return {"repo": repo, "shas": shas}


def bisect_args(history: dict, out: Path, *extra: str) -> list[str]:
    return ["bisect", "--repo", str(history["repo"]), "--device", "cpu", "--samples", "6", "--max-samples", "12",
            "--out", str(out), *extra]


def the_doc(out: Path) -> schema.BisectDoc:
    docs, bad = B.load_docs(out)
    assert not bad and len(docs) == 1, bad
    return docs[0]


def test_commit_range_is_the_first_parent_line(history: dict) -> None:
    s = history["shas"]
    commits = B.commit_range(history["repo"], s[0][:10], "HEAD")
    assert [c.sha for c in commits] == s and [c.index for c in commits] == list(range(9))
    assert commits[4].subject.endswith("<b>breaks the import</b>")
    with pytest.raises(B.SetupError, match="not an ancestor"):
        B.commit_range(history["repo"], s[5], s[2])
    with pytest.raises(B.SetupError, match="same commit"):
        B.commit_range(history["repo"], s[2], s[2])
    with pytest.raises(B.SetupError, match="not a commit"):
        B.commit_range(history["repo"], "no-such-rev", s[2])
    with pytest.raises(B.SetupError, match="not a commit"):
        B.commit_range(history["repo"], "--output=/tmp/x", s[2])


def test_bisect_series_finds_the_commit_with_its_own_code(history: dict, tmp_path: Path,
                                                          capsys: pytest.CaptureFixture) -> None:
    s, out = history["shas"], tmp_path / "out"
    rc = cli.main(bisect_args(history, out, "--series", f"{KEY},{OTHER}", "--good", s[0], "--bad", s[8],
                              "--machine", "fake-m"))
    text = capsys.readouterr()
    assert rc == 0, text.err
    doc = the_doc(out)
    assert doc.status == "found" and doc.culprit.commit == s[6] and doc.culprit.index == 6
    assert doc.last_good.commit == s[5] and doc.first_bad.commit == s[6]
    assert [u.commit for u in doc.untestable] == [s[4]]
    assert "does not import robocache.bench.cli" in doc.untestable[0].reason
    assert doc.reproduced == [KEY, OTHER]
    # the candidates' own code measured: times of 100 us x level, never this checkout's NumPy
    used = [m for m in doc.measurements if m.used]
    assert used and all(90 < m.p50_us < 105 or 190 < m.p50_us < 210 for m in used)
    assert {m.commit for m in used if m.p50_us > 150} <= set(s[6:])
    # the run files kept as *.bisect-run.json beside the document, none as history records
    runs = list(out.rglob(f"*{B.RUN_SUFFIX}"))
    assert runs and not list(out.rglob("*.records.json"))
    assert {m.file for m in used} <= {f"{p.parent.name}/{p.name}" for p in runs}
    loaded = store.load(*runs)  # still records, for whoever names them
    assert not loaded.bad and len(loaded.records) == len(doc.measurements)
    # the series from the bad endpoint's records, and the History link with the culprit marked
    rec = next(r for r in loaded.records if r.git_commit == s[8] and r.case.id == KEY.rsplit("/", 2)[0])
    case = next(c for c in doc.cases if c.key == KEY)
    assert case.fingerprint == schema.fingerprint(schema.series_key(rec)) and case.series["machine"] == "fake-m"
    assert f"culprit={s[6]}" in doc.link and f"series={case.fingerprint}" in doc.link
    # every worktree removed, the repository as it was
    assert git(history["repo"], "worktree", "list", "--porcelain").count("worktree ") == 1
    assert git(history["repo"], "status", "--porcelain") == ""
    assert "### Bisection: culprit" in text.out and "\\<b\\>" not in text.out  # the summary, as plain text
    assert f"bisection {doc.id}: culprit found" in text.out


def test_a_commit_that_does_not_know_the_case_is_untestable(history: dict, tmp_path: Path) -> None:
    repo, s = history["repo"], history["shas"]
    (repo / "unknown.txt").write_text("")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "the case is gone")
    gone = git(repo, "rev-parse", "HEAD")
    (repo / "unknown.txt").unlink()
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "the case is back")
    out = tmp_path / "out"
    assert cli.main(bisect_args(history, out, "--series", KEY, "--good", s[6], "--bad", "HEAD", "--machine", "m",
                                "--expect", "2")) == 0
    doc = the_doc(out)
    assert doc.status == "not_reproducible"  # 6 and 10 are both at level 2
    assert cli.main(bisect_args(history, tmp_path / "o2", "--series", KEY, "--good", s[0], "--bad", gone,
                                "--machine", "m")) == 0
    doc = the_doc(tmp_path / "o2")
    assert doc.status == "not_reproducible" and "bad endpoint" in doc.reason and "exit 2" in doc.reason


def alerts_file(path: Path, s: list[str], machine: str = "fake-m", confirmed=True) -> Path:
    series = {"machine": machine, "op": "resample", "case_id": KEY.rsplit("/", 2)[0], "provider": "numpy",
              "dtype": "float32", "timer": "host", "cache": "warm", "grid_version": 1, "frontend": "cli",
              "input_sets": 1}
    fp = schema.fingerprint(series)
    a = {"fingerprint": fp, "change_id": "abcdef012345", "kind": "step", "series": series, "direction": "slower",
         "ratio": 2.0, "ratio_ci": [1.9, 2.1], "before": {"commit": s[0]}, "after": {"commit": s[8]},
         "case_key": KEY, "confirmed": confirmed, "title": "t", "markdown": "m"}
    path.write_text(json.dumps({"schema": "robocache-alerts/1", "alerts": [a], "drifts": [], "checked": [fp]}))
    return path


def test_bisect_all_alerts_once_then_skips_what_is_known(history: dict, tmp_path: Path,
                                                        capsys: pytest.CaptureFixture) -> None:
    s, out = history["shas"], tmp_path / "out"
    alerts = alerts_file(tmp_path / "alerts.json", s)
    assert cli.main(bisect_args(history, out, "--alerts", str(alerts), "--all", "--machine", "fake-m",
                                "--dashboard-url", "https://dash.example")) == 0
    doc = the_doc(out)
    assert doc.status == "found" and doc.culprit.commit == s[6]
    assert doc.alert.key == B.issue_key("fake-m", s[0], s[8]) and doc.alert.change_ids == ["abcdef012345"]
    assert doc.link.startswith("https://dash.example/history?")
    capsys.readouterr()
    assert cli.main(bisect_args(history, tmp_path / "again", "--alerts", str(alerts), "--all", "--known",
                                str(out))) == 0
    text = capsys.readouterr()
    assert "already bisected" in text.err and "nothing to bisect" in text.out
    assert not list((tmp_path / "again").rglob("*.bisect.json"))
    # an unconfirmed alert is not bisected by --all; named by its id it is
    unconf = alerts_file(tmp_path / "unconfirmed.json", s, confirmed=None)
    assert cli.main(bisect_args(history, tmp_path / "u", "--alerts", str(unconf), "--all")) == 0
    assert "nothing to bisect" in capsys.readouterr().out
    assert cli.main(bisect_args(history, tmp_path / "u", "--alerts", str(unconf), "abcdef012345")) == 0
    assert the_doc(tmp_path / "u").status == "found"


@pytest.mark.parametrize("args, message", [
    (["--series", KEY], "give --series KEYS with --good COMMIT and --bad COMMIT"),
    (["--series", KEY, "--good", "nope", "--bad", "HEAD"], "'nope' is not a commit"),
    (["--series", "resample/nope/float32/numpy", "--good", "HEAD~1", "--bad", "HEAD"], "resample/nope"),
    (["--alerts", "missing.json", "--all"], "cannot read"),
    (["--alerts", "missing.json", "--all", "--measure", "call_ratio"], "--measure is for --series"),
    (["--series", KEY, "--good", "HEAD~1", "--bad", "HEAD", "--measure", "ratio"], "--measure"),
    (["--series", KEY, "--good", "HEAD~1", "--bad", "HEAD", "--dashboard-url", "javascript:x"], "--dashboard-url"),
    (["--series", KEY, "--good", "HEAD~1", "--bad", "HEAD", "--samples", "1"], "--samples"),
    (["--series", KEY, "--good", "HEAD~1", "--bad", "HEAD", "--out", "{repo}/level.txt"], "--out"),
])
def test_usage_errors_are_one_line_exit_2(history: dict, tmp_path: Path, capsys: pytest.CaptureFixture,
                                          args: list[str], message: str) -> None:
    args = [a.replace("{repo}", str(history["repo"])) for a in args]
    try:
        rc = cli.main(bisect_args(history, tmp_path / "out", *args))
    except SystemExit as e:  # argparse's own refusals exit from the parser
        rc = e.code
    assert rc == 2
    err = capsys.readouterr().err.strip()
    assert message in err and len(err.splitlines()) == 1, err
    assert not list((tmp_path / "out").rglob("*.bisect.json"))


def test_alerts_file_needs_an_alert_or_all(history: dict, tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    alerts = alerts_file(tmp_path / "alerts.json", history["shas"])
    assert cli.main(bisect_args(history, tmp_path / "out", "--alerts", str(alerts))) == 2
    assert "--alerts needs an ALERT id" in capsys.readouterr().err
    (tmp_path / "bad.json").write_text('{"schema": "robocache-alerts/1", "alerts": [{"series": 1}]}')
    assert cli.main(bisect_args(history, tmp_path / "out", "--alerts", str(tmp_path / "bad.json"), "--all")) == 2
    assert "alerts[0] lacks" in capsys.readouterr().err


def test_a_worktree_that_cannot_be_added_fails_the_bisection_in_its_document(history: dict, tmp_path: Path,
                                                                            monkeypatch: pytest.MonkeyPatch,
                                                                            capsys: pytest.CaptureFixture) -> None:
    real = B._git

    def no_worktrees(repo: Path, *args: str) -> str:
        if args[:2] == ("worktree", "add"):
            raise B.SetupError("git worktree add: fatal: No space left on device")
        return real(repo, *args)

    monkeypatch.setattr(B, "_git", no_worktrees)
    s, out = history["shas"], tmp_path / "out"
    assert cli.main(bisect_args(history, out, "--series", KEY, "--good", s[0], "--bad", s[8], "--machine", "m")) == 2
    assert "No space left on device" in capsys.readouterr().err
    doc = the_doc(out)
    assert doc.status == "failed" and "No space left on device" in doc.reason


def test_a_call_ratio_alert_from_a_file_reaches_the_measurer(tmp_path: Path) -> None:
    """The measure an alert's series carries (check's call_ratio) survives the alerts file, the grouping and the
    bisection's own copy of the cases, to the measurer that picks each sample."""
    from robocache.bench.regressions.noise import CALL_RATIO

    path = alerts_file(tmp_path / "alerts.json", ["a" * 40] * 9)
    raw = json.loads(path.read_text())
    raw["alerts"][0]["series"]["measure"] = CALL_RATIO
    path.write_text(json.dumps(raw))
    (g,) = B.groups(B.read_alerts(path).alerts)
    (case,) = g.cases
    assert case.series["measure"] == CALL_RATIO and case.fingerprint == raw["alerts"][0]["fingerprint"]
    meas = B.WorktreeMeasurer(tmp_path, tmp_path, tmp_path / "runs", [case], machine="m")
    assert meas.measures == {KEY: CALL_RATIO}
