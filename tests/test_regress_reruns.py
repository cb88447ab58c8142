"""``robocache-bench check --reruns DIR`` (issue 27): the confirmation on reruns measured elsewhere.

The nightly job can measure (``check --confirm --confirm-out DIR``) and check (``check --reruns DIR``) in
separate steps, and anyone can audit a night's confirmation from its artifact: the same reruns give the same
decisions. Records here are synthetic fixtures (``"synthetic": True`` via ``test_store.make_record``).
"""
from __future__ import annotations

import copy
import json
import math
import os
from pathlib import Path
from types import SimpleNamespace

import msgspec
import numpy as np
import pytest
from test_regress import _noisy, _write_hist, series
from test_store import make_env

from robocache.bench import cli, runner, schema, store
from robocache.bench import regressions as regress

MACHINE = "ci-synthetic"


@pytest.fixture
def stepped(tmp_path: Path) -> tuple[Path, list[dict], float]:
    """20 nights of a 3%-noise series, then 6 nights +10%: an alert tonight (the history folder, its records, the
    level before as a log-time)."""
    vals = _noisy(5, n=20, sigma=0.03) + [v * 1.10 for v in _noisy(6, n=6, sigma=0.03)]
    hist = series(vals, provider="numpy")
    _write_hist(tmp_path / "hist", hist)
    return tmp_path / "hist", hist, float(np.median(np.log(vals[:20])))


def _rerun(hist: list[schema.Record], t_us: float, k: int, **over) -> schema.Record:
    r = copy.deepcopy(hist[-1])
    r.run_id = f"confirm-{k}"
    r.created = f"2026-02-01T00:00:{k:02d}+00:00"
    r.metrics.time_us.p50 = t_us
    for key, v in over.items():
        setattr(r, key, v)
    return r


def _check(capsys, *argv: str) -> tuple[int, dict, str]:
    js = Path(argv[0]).parent / "alerts.json"
    if js.exists():
        js.unlink()
    try:
        rc = cli.main(["check", *argv, "--machine", MACHINE, "--json", str(js), "--fail-on-regression"])
    except SystemExit as e:
        rc = e.code
    err = capsys.readouterr().err
    return rc, (json.loads(js.read_text()) if js.exists() else {}), err


def test_measure_then_check_elsewhere_gives_the_same_decisions(stepped, tmp_path, capsys, monkeypatch):
    """--confirm measures (here: five reruns, the first three inconclusive, so a second look); --reruns on the
    folder it wrote reaches the same decision on the same reruns, without measuring."""
    hist_dir, hist, ref = stepped
    ratios = iter([1.10, 1.02, 1.11, 1.11, 1.10])
    calls = []

    def fake_run_suite(suite, *, device, cases, out_dir, machine, cache, progress):
        calls.append([c.key for c in cases])
        r = _rerun(hist, math.exp(ref) * next(ratios), len(calls))
        return SimpleNamespace(path=store.write_records(out_dir, make_env(), [r], name=r.run_id))

    monkeypatch.setattr(runner, "run_suite", fake_run_suite)
    # the device the reruns would measure on, asked in no process (the fast tier starts none: tests/conftest.py)
    monkeypatch.setattr(runner, "detect_device", lambda: "cpu")
    again = tmp_path / "again"
    rc1, measured, _ = _check(capsys, str(hist_dir), "--confirm", "--confirm-out", str(again))
    assert len(calls) == regress.CONFIRM_RUNS_MAX and rc1 == 1
    monkeypatch.setattr(runner, "run_suite", lambda *a, **k: pytest.fail("--reruns must not measure"))
    rc2, audited, err = _check(capsys, str(hist_dir), "--reruns", str(again))
    assert rc2 == rc1
    a, b = measured["alerts"][0], audited["alerts"][0]
    assert (a["fingerprint"], a["confirmed"], a["reruns"]) == (b["fingerprint"], b["confirmed"], b["reruns"])
    assert b["confirmed"] is True and b["reruns"] == regress.CONFIRM_RUNS_MAX
    assert b["confirm_note"].startswith(a["confirm_note"])  # the same evidence, plus where the reruns came from
    assert "reruns read from" in b["confirm_note"] and "confirm-1" in b["confirm_note"]
    assert audited["confirm_asked"] is True  # alerts_to_issues treats it as a confirmed check
    assert f"{regress.CONFIRM_RUNS_MAX} used as reruns" in err


def test_only_the_first_reruns_count_as_the_first_look(stepped, tmp_path, capsys):
    """Five reruns in the folder, the first three conclusive: the first look decides on those (as --confirm would
    have measured only them); a folder whose first three are at the old level refutes, whatever follows."""
    hist_dir, hist, ref = stepped
    d = tmp_path / "r"
    for k, f in enumerate((1.11, 1.10, 1.105, 1.0, 1.0), 1):
        store.write_records(d, make_env(), [_rerun(hist, math.exp(ref) * f, k)], name=f"confirm-{k}")
    rc, doc, _ = _check(capsys, str(hist_dir), "--reruns", str(d))
    assert rc == 1 and doc["alerts"][0]["confirmed"] is True and doc["alerts"][0]["reruns"] == regress.CONFIRM_RUNS
    d2 = tmp_path / "r2"
    for k, f in enumerate((1.0, 1.001, 0.999, 1.11, 1.10), 1):
        store.write_records(d2, make_env(), [_rerun(hist, math.exp(ref) * f, k)], name=f"confirm-{k}")
    rc, doc, _ = _check(capsys, str(hist_dir), "--reruns", str(d2))
    assert rc == 0 and not doc["alerts"] and len(doc["refuted"]) == 1


@pytest.mark.parametrize(("over", "why"), [
    ({"created": "2026-01-26T03:00:00+00:00"}, "not newer than the night alerted"),
    ({"git_commit": "f" * 40}, "not the night's"),
    ({"status": "crash"}, "status crash"),
    # the night alerted was timed in one process: reruns timed in 3 (run --processes 3) are another measurement
    ({"processes": 3}, "timed in 3 process(es), the night alerted in 1"),
])
def test_reruns_that_cannot_count_are_not_used_and_say_why(stepped, tmp_path, capsys, over, why):
    hist_dir, hist, ref = stepped
    d = tmp_path / "r"
    for k in range(1, regress.CONFIRM_RUNS + 1):
        r = _rerun(hist, math.exp(ref) * 1.10, k)
        if "created" in over:
            r.created = over["created"]
        if "git_commit" in over:
            r.git_commit = over["git_commit"]
        if "status" in over:
            r.status, r.metrics = "crash", None
        if "processes" in over:
            r.processes = [r.metrics.time_us.p50] * over["processes"]
        store.write_records(d, make_env(), [r], name=f"confirm-{k}")
    rc, doc, _ = _check(capsys, str(hist_dir), "--reruns", str(d))
    # six nights at +10%: significant at the check's own level, so raised unconfirmed, with the reason
    assert rc == 1 and len(doc["alerts"]) == 1, doc
    assert doc["alerts"][0]["confirmed"] is False and why in doc["alerts"][0]["confirm_note"]
    assert "0 valid rerun(s)" in doc["alerts"][0]["confirm_note"]


def test_reruns_timed_in_as_many_processes_as_the_night_count(stepped, tmp_path, capsys):
    """A series whose nights were timed in 3 processes (run --processes 3) is confirmed by reruns timed in 3, and
    not by reruns timed in one (their median moves more between runs than the nights' the test assumes)."""
    hist_dir, hist, ref = stepped
    for r in hist:
        r.processes = [r.metrics.time_us.p50] * 3
    k3 = tmp_path / "hist3"
    _write_hist(k3, hist)
    for name, procs in (("three", 3), ("one", 1)):
        d = tmp_path / name
        for k in range(1, regress.CONFIRM_RUNS + 1):
            r = _rerun(hist, math.exp(ref) * 1.10, k)
            r.processes = [r.metrics.time_us.p50] * procs if procs > 1 else []
            store.write_records(d, make_env(), [r], name=f"confirm-{k}")
        rc, doc, _ = _check(capsys, str(k3), "--reruns", str(d))
        a = doc["alerts"][0]
        if procs == 3:
            assert rc == 1 and a["confirmed"] is True and a["reruns"] == regress.CONFIRM_RUNS, a["confirm_note"]
            assert "--processes 3 " in a["reproduce"]
        else:
            assert a["confirmed"] is False and "timed in 1 process(es), the night alerted in 3" in a["confirm_note"]


def test_reruns_of_another_machine_or_series_confirm_nothing(stepped, tmp_path, capsys):
    hist_dir, hist, ref = stepped
    d = tmp_path / "r"
    other_machine = [_rerun(hist, math.exp(ref) * 1.1, k) for k in (1, 2, 3)]
    other_case = [_rerun(hist, math.exp(ref) * 1.1, k) for k in (4, 5, 6)]
    for r in other_case:
        r.case = msgspec.structs.replace(r.case, id="resample/B2-S100-T50-D32")
    store.write_records(d, make_env("another-machine"), other_machine, name="m")
    store.write_records(d, make_env(), other_case, name="c")
    rc, doc, err = _check(capsys, str(hist_dir), "--reruns", str(d))
    assert not [a for a in doc["alerts"] if a["confirmed"]]
    assert "6 of other series or machines" in err


def test_reruns_option_errors(stepped, tmp_path, capsys):
    hist_dir, _, _ = stepped
    rc, _, err = _check(capsys, str(hist_dir), "--reruns", str(tmp_path / "missing"))
    assert rc == 2 and "--reruns" in err.strip().splitlines()[-1]
    rc, _, err = _check(capsys, str(hist_dir), "--reruns", str(tmp_path), "--confirm")
    assert rc == 2 and "pick one" in err.strip().splitlines()[-1]


def test_a_quiet_night_with_an_empty_reruns_folder(tmp_path, capsys):
    """The split workflow's check step on a night without alerts: an empty folder is fine."""
    _write_hist(tmp_path / "hist", series([100.0 * math.exp(0.002 * ((-1) ** i)) for i in range(20)]))
    (tmp_path / "empty").mkdir()
    rc, doc, _ = _check(capsys, str(tmp_path / "hist"), "--reruns", str(tmp_path / "empty"))
    assert rc == 0 and doc["alerts"] == [] and doc["confirm_asked"] is True


# ------------------------------------------------------------------ scripts/nightly.sh: RERUNS (stub interpreter)

from test_workflows import _cmd, stub  # noqa: E402,F401  (the fixture: nightly.sh with a stand-in python)


def test_nightly_sh_checks_on_reruns_measured_elsewhere(stub, tmp_path, monkeypatch):  # noqa: F811
    monkeypatch.delenv("RERUNS", raising=False)
    again = tmp_path / "confirm-from-another-job"
    again.mkdir()
    out = tmp_path / "out"
    # the history (the results branch) with earlier nights' alerts: the newest of this machine is the memory
    hist = tmp_path / "history"
    # the newest by name (the night's date), not by mtime: a checkout sets every file's mtime to its own time, so
    # here the older night's file is written last and given the newest mtime
    for day, m, mtime in (("2026-11-26", "gpu-h100", 1_000), ("2026-11-25", "gpu-h100", 2_000),
                          ("2026-11-27", "gpu-a100", 3_000)):
        (hist / "nights" / day / m).mkdir(parents=True)
        (hist / "nights" / day / m / "alerts.json").write_text("{}")
        os.utime(hist / "nights" / day / m / "alerts.json", (mtime, mtime))
    p, calls, _ = stub("gpu-h100", str(out), RERUNS=str(again), ASV="0", HISTORY=str(hist))
    assert p.returncode == 0, p.stdout + p.stderr
    check = calls[-1]["args"][2:]
    assert _cmd(calls[-1]) == "check" and "--confirm" not in check
    assert check[check.index("--reruns") + 1] == str(again)
    assert check[check.index("--refuted-before") + 1] == str(hist / "nights" / "2026-11-26" / "gpu-h100" / "alerts.json")
    # a night without a confirmation (a manual run without CONFIRM) carries the memory on instead of wiping it
    p, calls1, _ = stub("gpu-h100", str(tmp_path / "out1"), ASV="0", HISTORY=str(hist))
    check = calls1[-1]["args"][2:]
    assert p.returncode == 0 and "--confirm" not in check and "--reruns" not in check
    assert check[check.index("--refuted-before") + 1] == str(hist / "nights" / "2026-11-26" / "gpu-h100" / "alerts.json")
    # both: a usage error before anything runs or is created
    p, calls2, _ = stub("gpu-h100", str(tmp_path / "out2"), RERUNS=str(again), CONFIRM="1", ASV="0")
    assert p.returncode == 2 and len(calls2) == len(calls1) and not (tmp_path / "out2").exists()
