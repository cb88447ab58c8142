"""``run --processes K``: a short case timed in K fresh processes, reported as their mean (issue 27: a short case's
median moves more from one process to the next than within one, docs/regressions.md).

The arithmetic (:func:`runner.combined`) and the runner's loop (fake processes) in the fast tier; one CPU run of
real processes, and the CLI's usage errors, in the multiprocess tier."""
from __future__ import annotations

import json
import math
import subprocess
import sys
from statistics import fmean, stdev

import msgspec
import pytest

from robocache.bench import runner, specs, store
from robocache.bench.schema import Record
from tests.test_store import make_record

KEY = "resample/B32-S100-T50-D32/float32/numpy"


def record(p50: float, *, graph: float | None = None, noise: float = 0.002, run_id: str = "run-0") -> Record:
    r = make_record(run_id=run_id)
    r["metrics"]["time_us"] = {"p20": p50 - 0.1, "p50": p50, "p80": p50 + 0.1, "min": p50 - 0.2, "max": p50 + 0.5,
                               "mean": p50 + 0.05}
    r["metrics"]["gb_per_s"], r["metrics"]["items_per_s"] = 100.0 / p50, 1000.0 / p50
    r["metrics"]["pct_of_ceiling"] = 10.0 / p50
    r["metrics"]["graph_time_us"] = graph
    r["method"].update(noise=noise, noise_target=0.005, noise_target_met=noise <= 0.005)
    return msgspec.convert(r, Record)


def test_the_mean_of_the_processes_and_their_spread_as_its_noise():
    recs = [record(3.0, graph=2.1), record(3.2, graph=2.2), record(3.1, graph=2.0)]
    got = runner.combined(recs)
    assert got.processes == [3.0, 3.2, 3.1]
    q = got.metrics.time_us
    assert q.p50 == pytest.approx(3.1) and q.p20 == pytest.approx(3.0) and q.p80 == pytest.approx(3.2)
    assert q.min == pytest.approx(2.8) and q.max == pytest.approx(3.7) and q.mean == pytest.approx(3.15)
    assert got.metrics.gb_per_s == pytest.approx(100.0 / 3.1) and got.metrics.pct_of_ceiling == pytest.approx(10 / 3.1)
    assert got.metrics.graph_time_us == pytest.approx(2.1)
    assert got.metrics.event_vs_graph == pytest.approx((3.1 - 2.1) / 2.1)
    between = 1.96 * stdev([3.0, 3.2, 3.1]) / math.sqrt(3) / 3.1
    assert got.method.noise == pytest.approx(between) and between > 0.002  # the spread, not the processes' own
    assert got.method.noise_target_met is False and got.health.noisy
    assert "across 3 processes" in got.health.reasons[-1]
    assert got.method.samples == 3 * recs[0].method.samples and got.duration_s == pytest.approx(4.5)
    msgspec.json.decode(msgspec.json.encode(got), type=Record)  # a valid record
    assert runner.combined(recs[:1]) is recs[0]


def test_the_processes_own_noise_stands_where_it_is_larger_and_a_missing_graph_time_is_none():
    recs = [record(20.0, graph=19.0, noise=0.004), record(20.0, graph=None, noise=0.003)]
    got = runner.combined(recs)
    assert got.method.noise == pytest.approx(0.004) and got.method.noise_target_met and not got.health.noisy
    assert got.metrics.graph_time_us is None and got.metrics.event_vs_graph is None


def test_which_records_are_timed_again():
    short, long_ = record(3.0), record(30.0)
    assert runner.repeats(short, 3, 11.0) and not runner.repeats(short, 1, 11.0)
    assert not runner.repeats(long_, 3, 11.0) and runner.repeats(long_, 3, 31.0)
    failed = msgspec.structs.replace(short, status="error")
    untimed = msgspec.structs.replace(short, metrics=None)
    assert not runner.repeats(failed, 3, 11.0) and not runner.repeats(untimed, 3, 11.0)
    assert not runner.repeats(None, 3, 11.0)


def _fake(monkeypatch, times: dict[str, list[float]], fail: tuple[str, int] | None = None) -> list[str]:
    """run_in_process answering each case's successive processes from ``times``; ``fail``: (case key, n): that
    case's n-th process fails."""
    calls: list[str] = []

    def fake(task, timeout_s):
        if not task.case_key:  # the copy ceiling: none on the CPU
            raise AssertionError("a CPU run measures no ceiling")
        calls.append(task.case_key)
        n = calls.count(task.case_key)
        if fail == (task.case_key, n):
            return "timeout", None, "killed after 1 s"
        r = record(times[task.case_key][n - 1], run_id=task.run_id)
        case = specs.find(task.case_key)
        r = msgspec.structs.replace(r, case=msgspec.structs.replace(r.case, id=case.id, provider=case.provider,
                                                                    dtype=case.dtype, op=case.op))
        return "ok", r, ""

    monkeypatch.setattr(runner, "run_in_process", fake)
    monkeypatch.setattr(runner, "_context", lambda preload=None: None)
    return calls


def test_the_runner_times_short_cases_again_and_long_ones_once(tmp_path, monkeypatch):
    """Three cases, K = 3: a short one (three processes, their mean), a long one (once), a short one whose second
    process fails (the first process's record alone, its reason saying so); the file written and loaded back."""
    long_key = "resample/B256-S100-T50-D32/float32/numpy"
    failing = "resample/B32-S100-T50-D32/float32/torch_eager"
    calls = _fake(monkeypatch, {KEY: [3.0, 3.3, 3.1], long_key: [40.0], failing: [3.0, 3.3, 3.1]}, (failing, 2))
    res = runner.run_suite("quick", device="cpu", cases=[specs.find(k) for k in (KEY, long_key, failing)],
                           out_dir=tmp_path, progress=False, processes=3)
    assert calls == [KEY, KEY, KEY, long_key, failing, failing]
    short, long_, failed = res.records
    assert short.processes == [3.0, 3.3, 3.1] and short.metrics.time_us.p50 == pytest.approx(fmean([3.0, 3.3, 3.1]))
    assert long_.processes == [] and long_.metrics.time_us.p50 == 40.0
    assert failed.status == "ok" and failed.processes == [] and failed.metrics.time_us.p50 == 3.0
    assert "timed in 1 process of 3: process 2: killed after 1 s" in failed.reason
    doc = json.loads(res.path.read_text())  # written and loaded back: the field round-trips, omitted when empty
    assert doc["records"][0]["processes"] == [3.0, 3.3, 3.1] and "processes" not in doc["records"][1]
    loaded = store.load(res.path)
    assert not loaded.bad and len(loaded.records) == 3


@pytest.mark.parametrize("processes, below", [(0, 11.0), (17, 11.0), (2.5, 11.0), (True, 11.0), (3, 0.0),
                                              (3, -1.0), (3, float("nan")), (3, float("inf")), (3, "11")])
def test_a_process_count_or_threshold_out_of_range_is_refused(processes, below):
    with pytest.raises(ValueError, match="processes"):
        runner.check_processes(processes, below)
    runner.check_processes(1, 11.0)
    runner.check_processes(16, 0.5)


def test_a_resume_with_another_process_count_is_refused():
    one, three = record(3.0), msgspec.structs.replace(record(3.0), processes=[3.0, 3.1, 2.9])
    assert runner._processes_mismatch([three], 3) is None and runner._processes_mismatch([one], 1) is None
    assert "timed with --processes 3, this command 1" in runner._processes_mismatch([three], 1)
    assert "timed in one process each" in runner._processes_mismatch([one], 3)
    assert runner._processes_mismatch([record(30.0)], 3) is None  # no short case: nothing to tell


def test_usage_errors_exit_2_and_leave_nothing(tmp_path):
    for args, why in ((["--suite", "quick", "--processes", "17"], "expected an integer >= 1 and <= 16"),
                      (["--suite", "quick", "--processes-below-us", "5"], "--processes-below-us applies with"),
                      (["--suite", "pipelines", "--processes", "2"], "--suite pipelines takes")):
        out = tmp_path / "out"
        p = subprocess.run([sys.executable, "-m", "robocache.bench.cli", "run", "--device", "cpu", "--out", str(out),
                            *args], capture_output=True, text=True, timeout=120)
        assert p.returncode == 2 and why in p.stderr + p.stdout and not out.exists(), (args, p.stderr)


def test_a_cpu_run_in_real_processes(tmp_path):
    res = runner.run_suite("quick", device="cpu", cases=[specs.find(KEY)], out_dir=tmp_path, progress=False,
                           processes=2, processes_below_us=1e9,
                           timing={"time_limit_s": 0.2, "noise_target": 0.1, "warmup_s": 0.01})
    [r] = res.records
    assert r.status == "ok" and len(r.processes) == 2 and r.metrics.time_us.p50 == pytest.approx(fmean(r.processes))
    assert not store.load(res.path).bad
