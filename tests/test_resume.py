"""``robocache-bench run --resume FILE``: a cut run continued, whole points kept, the rest measured, one run file.

The plan (:func:`runner.resume_plan`) is checked here without a process; one CPU run, cut and resumed, runs its
cases in the harness's processes (the multiprocess tier).
"""
from __future__ import annotations

import copy
import json
import types
from pathlib import Path

import pytest

from robocache.bench import cli, runner, specs, store
from robocache.bench.messages import TimingOptions
from tests.test_store import make_env, make_record

COMMIT = "0123456789abcdef0123456789abcdef01234567"
P1, P2 = "resample/B256-S100-T50-D32/float32/", "resample/B32-S100-T50-D32/float32/"
CASES = [specs.find(P1 + p) for p in ("numpy", "torch_eager")] + [specs.find(P2 + p) for p in ("numpy", "torch_eager")]


def rec(key: str, run_id: str = "20261128T000000Z-aaaaaa", **over) -> dict:
    op_tag, dtype, provider = key.rsplit("/", 2)
    r = make_record(run_id=run_id)
    r["case"].update(id=op_tag, op=op_tag.split("/")[0], dtype=dtype, provider=provider)
    r.update(suite="quick", git_commit=COMMIT, **over)
    return r


def run_file(tmp_path: Path, keys: list[str], env: dict | None = None, **over) -> Path:
    env = env or make_env()
    return store.write_records(tmp_path / f"cpu-{env['machine']}", env, [rec(k, **over) for k in keys],
                               name="20261128T000000Z-aaaaaa-quick", unique=False)


def plan(path: Path, cases=CASES, **kw) -> runner.Resume:
    fixture_timing = TimingOptions(noise_target=0.02, time_limit_s=5.0)  # make_record's method
    args = {"suite": "quick", "device": "cpu", "git": (COMMIT, False), "env": make_env(), "timing": fixture_timing} | kw
    return runner.resume_plan(path, cases, **args)


def test_whole_points_are_kept_and_a_partial_point_runs_again_whole(tmp_path):
    path = run_file(tmp_path, [P1 + "numpy", P1 + "torch_eager", P2 + "numpy"])
    p = plan(path)
    assert p.run_id == "20261128T000000Z-aaaaaa" and p.path == path
    assert [f"{r.case.id}/{r.case.dtype}/{r.case.provider}" for r in p.kept] == [P1 + "numpy", P1 + "torch_eager"]
    assert [c.key for c in p.todo] == [P2 + "numpy", P2 + "torch_eager"]  # P2's numpy again: side by side
    every = plan(run_file(tmp_path, [c.key for c in CASES]))
    assert every.todo == [] and len(every.kept) == 4


@pytest.mark.parametrize("what, change, why", [
    ("suite", lambda kw: kw.update(suite="nightly"), "a run of suite 'quick', not 'nightly'"),
    ("commit", lambda kw: kw.update(git=("f" * 40, False)), "measured at commit 0123"),
    ("dirty", lambda kw: kw.update(git=(COMMIT, True)), "uncommitted changes"),
    ("driver", lambda kw: kw["env"].update(driver="580.1"), "its driver is None, here it is '580.1'"),
    ("libs", lambda kw: kw["env"]["libs"].update(numpy="9.9"), "its libs is"),
    ("machine", lambda kw: kw["env"].update(machine="other"), "its machine is 'ci-synthetic'"),
    ("host", lambda kw: kw["env"].update(hostname="elsewhere"), "its hostname is 'ci-host'"),
    ("kernel", lambda kw: kw["env"].update(kernel="6.9"), "its kernel is None"),
    ("sources", lambda kw: kw["env"].update(sources="0" * 16), "its sources is None"),
    ("cases", lambda kw: kw.update(cases=CASES[2:]), f"cases this command would not run ({P1}numpy and 1 more)"),
    ("unknown commit", lambda kw: kw.update(git=(None, None)), "commit is unknown"),
    ("cache", lambda kw: kw.update(cache="cold"), "timed with --cache warm, this command cold"),
    ("time limit", lambda kw: kw.update(timing=TimingOptions(noise_target=0.02, time_limit_s=0.5)),
     "time_limit_s 5.0, this command 0.5"),
])
def test_another_run_is_refused(tmp_path, what, change, why):
    path = run_file(tmp_path, [P1 + "numpy", P1 + "torch_eager"])
    kw = {"env": copy.deepcopy(make_env())}
    change(kw)
    with pytest.raises(ValueError, match="^--resume ") as e:
        plan(path, **kw)
    assert why in str(e.value) and "\n" not in str(e.value), str(e.value)


def test_host_id_and_a_dirty_run_are_refused(tmp_path):
    env = make_env() | {"host_id": "a" * 12}
    path = run_file(tmp_path, [P1 + "numpy"], env=env)
    assert plan(path, env=env).todo == CASES  # the one partial point, the first: measured again whole
    with pytest.raises(ValueError, match="its host_id is 'aaaaaaaaaaaa'"):
        plan(path, env=env | {"host_id": "b" * 12})
    dirty = run_file(tmp_path / "d", [P1 + "numpy"], git_dirty=True)
    with pytest.raises(ValueError, match="uncommitted changes"):
        plan(dirty)


def test_the_timers_defaults_stand_for_unset_options(tmp_path):
    """The fixture's records were timed by the host timer with noise target 0.02 and a 5 s limit: only a command
    giving those values matches them; unset options mean the timer's defaults (0.01, 2 s)."""
    path = run_file(tmp_path, [P1 + "numpy", P1 + "torch_eager"])
    with pytest.raises(ValueError, match="timed with noise_target 0.02, this command 0.01"):
        plan(path, timing=TimingOptions())
    assert plan(path, timing=TimingOptions(noise_target=0.02, time_limit_s=5.0)).todo == CASES[2:]


@pytest.mark.parametrize("keys, cases", [
    ([P1 + "numpy", P2 + "numpy", P2 + "torch_eager"], CASES),  # a partial point before a whole one
    ([P2 + "numpy", P2 + "torch_eager"], CASES),  # not the command's first points (a wider --ops, say)
    ([P1 + "numpy", P2 + "numpy"], CASES),  # two partial points: other --providers than the run's
])
def test_other_filters_than_the_runs_are_refused(tmp_path, keys, cases):
    """A wider command than the run's (more providers, ops or dtypes) would find the file's points partial or out
    of order, and resuming would drop records that were whole: refused."""
    with pytest.raises(ValueError, match="not this command's first ones"):
        plan(run_file(tmp_path, keys), cases=cases)


def test_files_that_are_not_one_run_are_refused(tmp_path):
    with pytest.raises(ValueError, match="no such file"):
        plan(tmp_path / "missing.records.json")
    bad = tmp_path / "bad.records.json"
    bad.write_text("{not json")
    with pytest.raises(ValueError, match=f"^--resume {bad}: "):
        plan(bad)
    env = make_env()
    two = store.write_records(tmp_path / "cpu-ci-synthetic", env,
                              [rec(P1 + "numpy"), rec(P1 + "torch_eager", run_id="20261128T000001Z-bbbbbb")],
                              name="two", unique=False)
    with pytest.raises(ValueError, match="records of 2 runs"):
        plan(two)


def test_a_cut_run_resumed_holds_every_case_once(tmp_path, monkeypatch, capsys):
    """A CPU run of two points, cut after one provider of the second, resumed: the second point runs again whole,
    the first is not run again, and the one file holds every case once under the run's id. Before that, the CLI
    refuses another suite's resume with exit 2, the file as it was and no --out made."""
    fast = {"time_limit_s": 0.2, "noise_target": 0.1, "warmup_s": 0.01}
    monkeypatch.setenv("ROBOCACHE_GIT_COMMIT", COMMIT)  # one commit, whatever this checkout's state
    real = runner.run_in_process
    started: list[str] = []

    def cut_at_the_fourth(task, timeout_s):  # Ctrl-C (or `timeout --signal=INT`) while the fourth case runs
        if task.case_key:
            started.append(task.case_key)
            if len(started) == 4:
                raise KeyboardInterrupt
        return real(task, timeout_s)

    monkeypatch.setattr(runner, "run_in_process", cut_at_the_fourth)
    with pytest.raises(KeyboardInterrupt):
        runner.run_suite("quick", device="cpu", cases=CASES, out_dir=tmp_path, timing=fast, progress=False)
    [path] = list(tmp_path.rglob("*" + store.RECORDS_SUFFIX))  # written on the interrupt, not at a checkpoint
    doc = json.loads(path.read_text())
    assert [r["status"] for r in doc["records"]] == ["ok"] * 3  # the second point's torch_eager never ran
    first = types.SimpleNamespace(path=path, run_id=doc["records"][0]["run_id"])
    kept_before = doc["records"][:2]
    before = first.path.read_bytes()
    rc = cli.main(["run", "--device", "cpu", "--suite", "nightly", "--ops", "resample", "--resume", str(first.path),
                   "--no-progress", "--out", str(tmp_path / "unused")])
    err = capsys.readouterr().err
    assert rc == 2 and "--resume" in err and "a run of suite 'quick', not 'nightly'" in err, err
    assert first.path.read_bytes() == before and not (tmp_path / "unused").exists()
    ran: list[str] = []

    def counting(task, timeout_s):
        if task.case_key:
            ran.append(task.case_key)
        return real(task, timeout_s)

    monkeypatch.setattr(runner, "run_in_process", counting)
    opts = TimingOptions(noise_target=fast["noise_target"], time_limit_s=fast["time_limit_s"])
    with pytest.raises(ValueError, match="timed with noise_target 0.1, this command 0.01"):  # the defaults: no
        runner.resume_plan(first.path, CASES, suite="quick", device="cpu")
    p = runner.resume_plan(first.path, CASES, suite="quick", device="cpu", timing=opts)
    res = runner.run_suite("quick", device="cpu", cases=CASES, timing=fast, progress=False, resume=p)
    assert ran == [P2 + "numpy", P2 + "torch_eager"]
    assert res.run_id == first.run_id and res.path == first.path
    after = json.loads(first.path.read_text())["records"]
    keys = [f"{r['case']['id']}/{r['case']['dtype']}/{r['case']['provider']}" for r in after]
    assert keys == [c.key for c in CASES] and {r["run_id"] for r in after} == {first.run_id}
    assert after[:2] == kept_before  # the kept records as they were (times, created)
    assert runner.resume_plan(first.path, CASES, suite="quick", device="cpu", timing=opts).todo == []
