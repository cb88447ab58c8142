"""``run --processes K``: a short case timed in K fresh processes, reported as their median (issue 27: a short case's
median moves more from one process to the next than within one, docs/regressions.md).

The arithmetic (:func:`runner.combined`) and the runner's loop (fake processes) in the fast tier; one CPU run of
real processes, and the CLI's usage errors, in the multiprocess tier."""
from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from statistics import fmean, median

import msgspec
import pytest

from robocache.bench import runner, specs, store
from robocache.bench.schema import Dispatch, Interleaved, Record
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


def test_the_median_of_the_processes_and_their_own_noise():
    recs = [record(3.0, graph=2.1, noise=0.002), record(3.2, graph=2.2, noise=0.003), record(3.1, graph=2.0)]
    got = runner.combined(recs)
    assert got.processes == [3.0, 3.2, 3.1]
    q = got.metrics.time_us
    assert q.p50 == pytest.approx(3.1) and q.p20 == pytest.approx(3.0) and q.p80 == pytest.approx(3.2)
    assert q.min == pytest.approx(2.8) and q.max == pytest.approx(3.7) and q.mean == pytest.approx(3.15)
    assert got.metrics.gb_per_s == pytest.approx(100.0 / 3.1) and got.metrics.pct_of_ceiling == pytest.approx(10 / 3.1)
    assert got.metrics.graph_time_us == pytest.approx(2.1)
    assert got.metrics.event_vs_graph == pytest.approx((3.1 - 2.1) / 2.1)
    # within-process only: the spread between processes is the history's and the priors' (not counted twice)
    assert got.method.noise == pytest.approx(math.sqrt(0.002**2 + 0.003**2 + 0.002**2) / 3)
    assert got.method.noise_target_met and not got.health.noisy
    assert got.method.samples == 3 * recs[0].method.samples and got.duration_s == pytest.approx(4.5)
    msgspec.json.decode(msgspec.json.encode(got), type=Record)  # a valid record
    assert runner.combined(recs[:1]) is recs[0]


def test_one_slow_process_moves_the_median_little_and_two_processes_give_the_mean():
    got = runner.combined([record(3.0), record(300.0), record(3.1)])
    assert got.metrics.time_us.p50 == pytest.approx(3.1) and got.processes == [3.0, 300.0, 3.1]
    assert runner.combined([record(3.0), record(3.2)]).metrics.time_us.p50 == pytest.approx(fmean([3.0, 3.2]))


def test_a_throttled_process_makes_the_record_throttled_and_a_missing_graph_time_is_none():
    hot = record(6.0, graph=None, noise=0.009)
    hot = msgspec.structs.replace(hot, health=msgspec.structs.replace(hot.health, throttled=True,
                                                                      reasons=["throttled: sw_thermal_slowdown"]))
    got = runner.combined([record(3.0, graph=2.0), hot, record(3.0, graph=2.0)])
    assert got.health.throttled and "throttled: sw_thermal_slowdown" in got.health.reasons
    assert got.metrics.graph_time_us is None and got.metrics.event_vs_graph is None
    noisy = runner.combined([record(3.0, noise=0.02), record(3.0, noise=0.02)])
    assert noisy.method.noise == pytest.approx(math.sqrt(2) * 0.02 / 2) and not noisy.method.noise_target_met
    assert noisy.health.noisy and noisy.health.reasons.count("noisy: noise target not met") == 1


def test_which_records_are_timed_again():
    short, long_ = record(3.0), record(30.0)
    assert runner.repeats(short, 3, 11.0) and not runner.repeats(short, 1, 11.0)
    assert not runner.repeats(long_, 3, 11.0) and runner.repeats(long_, 3, 31.0)
    failed = msgspec.structs.replace(short, status="error")
    untimed = msgspec.structs.replace(short, metrics=None)
    assert not runner.repeats(failed, 3, 11.0) and not runner.repeats(untimed, 3, 11.0)
    assert not runner.repeats(None, 3, 11.0)


def call_cost(p50: float, *, device_us: float | None = 2.0, ratio: float | None = 1.7, rounds: int = 30,
              met: bool = True) -> Record:
    """A call-cost record (timer host_loop, ``dispatch`` set): ``ratio`` None: no interleaved section (its
    interleaved timing failed, or a bare_launch row); the interleaved figures spread around ``ratio``."""
    r = record(p50)
    il = None if ratio is None else Interleaved(
        rounds=rounds, calls_per_loop=200, bare_us=p50 / ratio, public_us=p50, public_cupy_us=p50 * 1.1,
        ratio_p20=ratio - 0.05, ratio_p50=ratio, ratio_p80=ratio + 0.05, cupy_ratio_p20=ratio + 0.1,
        cupy_ratio_p50=ratio + 0.2, cupy_ratio_p80=ratio + 0.3, noise_target_met=met)
    keeps_up = None if device_us is None else device_us < p50
    reasons = [] if keeps_up is not False else [runner._gpu_bound(device_us, p50)]
    return msgspec.structs.replace(
        r, method=msgspec.structs.replace(r.method, timer="host_loop"),
        dispatch=Dispatch(device_us=device_us, gpu_keeps_up=keeps_up, interleaved=il),
        health=msgspec.structs.replace(r.health, reasons=reasons))


def test_a_call_cost_record_is_timed_again_whatever_its_time():
    """Its judged measure is the interleaved ratio, which moves from process to process at any host time."""
    slow = call_cost(300.0)
    assert runner.repeats(slow, 3, 11.0) and runner.repeats(call_cost(3.0), 2, 11.0)
    assert runner.repeats(call_cost(300.0, device_us=None, ratio=None), 3, 11.0)  # a CPU run's, a bare launch's
    assert not runner.repeats(slow, 1, 11.0)
    assert not runner.repeats(msgspec.structs.replace(slow, status="error"), 3, 11.0)
    assert not runner.repeats(msgspec.structs.replace(slow, metrics=None), 3, 11.0)
    assert not runner.repeats(record(300.0), 3, 11.0)  # not a call-cost record: the threshold still holds


def test_call_cost_records_combine_their_dispatch_and_ratios():
    """Three processes: device time and every interleaved figure the median, rounds summed, the noise flag only
    where every process met it; two processes: the mean; the record valid and its ratio judged."""
    from robocache.bench.regressions.records import call_ratio, interleaved_ratio

    recs = [call_cost(20.0, device_us=2.0, ratio=1.70, rounds=30), call_cost(24.0, device_us=2.6, ratio=1.90,
                                                                             rounds=31, met=False),
            call_cost(21.0, device_us=2.2, ratio=1.74, rounds=29)]
    got = runner.combined(recs)
    assert got.processes == [20.0, 24.0, 21.0] and got.metrics.time_us.p50 == pytest.approx(21.0)
    d, il = got.dispatch, got.dispatch.interleaved
    assert d.device_us == pytest.approx(2.2) and d.gpu_keeps_up is True
    assert il.rounds == 90 and il.calls_per_loop == 200 and not il.noise_target_met
    assert il.ratio_p50 == pytest.approx(1.74) and il.ratio_p20 == pytest.approx(1.69)
    assert il.ratio_p80 == pytest.approx(1.79) and il.cupy_ratio_p50 == pytest.approx(1.94)
    assert il.cupy_ratio_p20 == pytest.approx(1.84) and il.cupy_ratio_p80 == pytest.approx(2.04)
    assert il.public_us == pytest.approx(21.0) and il.public_cupy_us == pytest.approx(23.1)
    assert il.bare_us == pytest.approx(median(r.dispatch.interleaved.bare_us for r in recs))
    # the check's noise of the combined ratio: the within-process spread over all the rounds; for equal processes
    # sqrt(sum of their squared sigmas) / K, the rule of method.noise
    assert call_ratio(got) == pytest.approx(interleaved_ratio(1.69, 1.74, 1.79, 90))
    same = [call_cost(20.0 + i, ratio=1.7) for i in range(3)]
    one = call_ratio(same[0])[1]
    assert call_ratio(runner.combined(same))[1] == pytest.approx(math.sqrt(3 * one**2) / 3)
    msgspec.json.decode(msgspec.json.encode(got), type=Record)  # a valid record
    assert all(r.dispatch.interleaved.rounds in (29, 30, 31) for r in recs)  # the inputs untouched

    two = runner.combined([call_cost(20.0, device_us=2.0, ratio=1.70), call_cost(24.0, device_us=3.0, ratio=1.90)])
    assert two.dispatch.device_us == pytest.approx(2.5) and two.dispatch.interleaved.ratio_p50 == pytest.approx(1.8)
    assert two.dispatch.interleaved.rounds == 60 and two.dispatch.interleaved.noise_target_met
    assert two.dispatch.interleaved.public_us == pytest.approx(22.0)


def test_a_process_lacking_the_ratio_keeps_the_first_section_and_gpu_keeps_up_is_recomputed():
    first = call_cost(20.0, device_us=2.0, ratio=1.70)
    got = runner.combined([first, call_cost(22.0, device_us=2.4, ratio=None), call_cost(21.0, ratio=1.9)])
    assert got.dispatch.interleaved == first.dispatch.interleaved and got.dispatch.device_us == pytest.approx(2.0)
    # a device time of one process over its own host time: the median of three keeps up, the note goes
    bound = call_cost(3.0, device_us=3.5)
    assert not bound.dispatch.gpu_keeps_up and bound.health.reasons[0].startswith("gpu-bound:")
    got = runner.combined([call_cost(4.0, device_us=3.0), bound, call_cost(4.2, device_us=3.2)])
    assert got.dispatch.gpu_keeps_up is True and not any(x.startswith("gpu-bound") for x in got.health.reasons)
    got = runner.combined([call_cost(3.0, device_us=3.4), bound, call_cost(4.0, device_us=3.6)])
    assert got.dispatch.gpu_keeps_up is False and got.dispatch.device_us == pytest.approx(3.5)
    assert [x for x in got.health.reasons if x.startswith("gpu-bound")] == [runner._gpu_bound(3.5, 3.0)]
    # a CPU run's: no device time, gpu_keeps_up the first's (None), no interleaved section
    cpu = runner.combined([call_cost(5.0, device_us=None, ratio=None), call_cost(6.0, device_us=None, ratio=None)])
    assert cpu.dispatch == Dispatch(device_us=None, gpu_keeps_up=None) and cpu.processes == [5.0, 6.0]
    # one process with no device time: none combined
    assert runner.combined([call_cost(5.0), call_cost(6.0, device_us=None)]).dispatch.device_us is None


def _fake(monkeypatch, times: dict[str, list[float]], fail: tuple[str, int] | None = None,
          wrong: tuple[str, int] | None = None, cost: frozenset[str] = frozenset()) -> list[str]:
    """run_in_process answering each case's successive processes from ``times``; ``fail``: (case key, n): that
    case's n-th process times out; ``wrong``: (case key, n): that one measures a wrong output (status incorrect);
    ``cost``: the case keys answered with a call-cost record (:func:`call_cost`)."""
    calls: list[str] = []

    def fake(task, timeout_s):
        if not task.case_key:  # the copy ceiling: none on the CPU
            raise AssertionError("a CPU run measures no ceiling")
        calls.append(task.case_key)
        n = calls.count(task.case_key)
        if fail == (task.case_key, n):
            return "timeout", None, "killed after 1 s"
        t = times[task.case_key][n - 1]
        r = call_cost(t) if task.case_key in cost else record(t, run_id=task.run_id)
        r = msgspec.structs.replace(r, run_id=task.run_id)
        if wrong == (task.case_key, n):
            r = msgspec.structs.replace(r, status="incorrect", reason="max_rel_err 0.3 > tolerance 1e-05")
        case = specs.find(task.case_key)
        r = msgspec.structs.replace(r, case=msgspec.structs.replace(r.case, id=case.id, provider=case.provider,
                                                                    dtype=case.dtype, op=case.op))
        return "ok", r, ""

    monkeypatch.setattr(runner, "run_in_process", fake)
    monkeypatch.setattr(runner, "_context", lambda preload=None: None)
    return calls


def test_the_runner_times_short_cases_again_and_long_ones_once(tmp_path, monkeypatch):
    """Five cases, K = 3: a short one (three processes, their median), a long one (once), a short one whose second
    process fails (the first process's record alone, its reason saying so), one whose third is wrong, and a long
    call-cost one (three processes: its ratio moves per process at any time); the file written and loaded back."""
    long_key = "resample/B256-S100-T50-D32/float32/numpy"
    failing = "resample/B32-S100-T50-D32/float32/torch_eager"
    wrong = "resample/B32-S100-T50-D32/float16/torch_eager"
    cost_key = "resample/B256-S100-T50-D32/float16/numpy"  # answered as a call-cost record (no CPU case is one)
    times = {KEY: [3.0, 3.3, 3.1], long_key: [40.0], failing: [3.0, 3.3, 3.1], wrong: [3.0, 3.3, 3.1],
             cost_key: [40.0, 44.0, 42.0]}
    calls = _fake(monkeypatch, times, fail=(failing, 2), wrong=(wrong, 3), cost=frozenset({cost_key}))
    keys = (KEY, long_key, failing, wrong, cost_key)
    res = runner.run_suite("quick", device="cpu", cases=[specs.find(k) for k in keys], out_dir=tmp_path,
                           progress=False, processes=3)
    assert calls == [KEY, KEY, KEY, long_key, failing, failing, wrong, wrong, wrong, cost_key, cost_key, cost_key]
    short, long_, failed, incorrect, cost = res.records
    assert cost.processes == [40.0, 44.0, 42.0] and cost.dispatch.interleaved.rounds == 90
    assert long_.dispatch is None
    assert short.processes == [3.0, 3.3, 3.1] and short.metrics.time_us.p50 == pytest.approx(3.1)
    assert long_.processes == [] and long_.metrics.time_us.p50 == 40.0
    assert failed.status == "timeout" and failed.processes == [] and failed.metrics is None
    assert failed.reason == "process 2 of 3 (the first ok): killed after 1 s"
    assert incorrect.status == "incorrect" and incorrect.reason.startswith("process 3 of 3 (the first ok): max_rel")
    assert res.counts() == {"ok": 3, "timeout": 1, "incorrect": 1}
    doc = json.loads(res.path.read_text())  # written and loaded back: the field round-trips, omitted when empty
    assert doc["records"][0]["processes"] == [3.0, 3.3, 3.1] and "processes" not in doc["records"][1]
    loaded = store.load(res.path)
    assert not loaded.bad and len(loaded.records) == 5


@pytest.mark.parametrize("processes, below", [(0, 11.0), (17, 11.0), (2.5, 11.0), (True, 11.0), (3, 0.0),
                                              (3, -1.0), (3, float("nan")), (3, float("inf")), (3, "11")])
def test_a_process_count_or_threshold_out_of_range_is_refused(processes, below):
    with pytest.raises(ValueError, match="processes"):
        runner.check_processes(processes, below)
    runner.check_processes(1, 11.0)
    runner.check_processes(16, 0.5)


def test_a_resume_with_another_process_count_or_threshold_is_refused():
    one, three = record(3.0), msgspec.structs.replace(record(3.0), processes=[3.0, 3.1, 2.9])
    eight = record(8.0)
    assert runner._processes_mismatch([three], 3) is None and runner._processes_mismatch([one], 1) is None
    assert "timed with --processes 3, this command 1" in runner._processes_mismatch([three], 1)
    assert "timed in one process at 3 us, under this command's --processes-below-us 12" in \
        runner._processes_mismatch([one], 3)
    assert runner._processes_mismatch([record(30.0)], 3) is None  # no short case: nothing to tell
    assert runner._processes_mismatch([eight, three], 3, 5.0) is None  # the run's own threshold: accepted
    assert "over this command's --processes-below-us 2" in runner._processes_mismatch([three], 3, 2.0)
    assert "under this command's --processes-below-us 12" in runner._processes_mismatch([eight], 3)


def test_a_resume_of_call_cost_records_asks_for_k_processes_whatever_their_time():
    slow = call_cost(30.0)
    three = msgspec.structs.replace(slow, processes=[30.0, 31.0, 29.0])
    assert runner._processes_mismatch([three], 3) is None  # over the threshold, yet timed in three: right
    assert runner._processes_mismatch([three], 3, 2.0) is None
    assert runner._processes_mismatch([slow], 1) is None
    assert "(a call-cost case) was timed in one process, this command times call-cost cases in --processes 3" in \
        runner._processes_mismatch([slow], 3)
    assert "timed with --processes 3, this command 2" in runner._processes_mismatch([three], 2)
    assert "timed with --processes 3, this command 1" in runner._processes_mismatch([record(30.0), three], 1)


def test_usage_errors_exit_2_and_leave_nothing(tmp_path):
    for args, why in ((["--suite", "quick", "--processes", "17"], "expected an integer >= 1 and <= 16"),
                      (["--suite", "quick", "--processes-below-us", "5"], "--processes-below-us applies with"),
                      (["--suite", "pipelines", "--processes", "2"], "--suite pipelines takes"),
                      (["--suite", "multigpu", "--gpus", "2", "--processes", "2"], "single-GPU cases")):
        out = tmp_path / "out"
        p = subprocess.run([sys.executable, "-m", "robocache.bench.cli", "run", "--device", "cpu", "--out", str(out),
                            *args], capture_output=True, text=True, timeout=120)
        assert p.returncode == 2 and why in p.stderr + p.stdout and not out.exists(), (args, p.stderr)


def test_a_cpu_run_in_real_processes_through_the_cli_and_its_resume(tmp_path):
    """`run --processes 2 --processes-below-us 1e9` on the CPU: every case in two real processes; a resume of the
    same file with another threshold is refused (exit 2, the file unchanged), with the same one accepted."""
    env = {**os.environ, "ROBOCACHE_GIT_COMMIT": "0123456789abcdef0123456789abcdef01234567"}  # whatever the checkout
    out = tmp_path / "out"
    base = [sys.executable, "-m", "robocache.bench.cli", "run", "--device", "cpu", "--out", str(out), "--cases", KEY,
            "--time-limit", "0.2", "--noise-target", "0.1", "--no-progress", "--processes", "2"]
    p = subprocess.run([*base, "--processes-below-us", "1e9"], capture_output=True, text=True, timeout=300, env=env)
    assert p.returncode == 0, p.stderr
    assert "2 for a case under 1e+09 us" in p.stderr
    [path] = list(out.rglob("*" + store.RECORDS_SUFFIX))
    [r] = json.loads(path.read_text())["records"]
    assert r["status"] == "ok" and len(r["processes"]) == 2
    assert r["metrics"]["time_us"]["p50"] == pytest.approx(fmean(r["processes"]))
    before = path.read_bytes()
    p = subprocess.run([*base, "--resume", str(path)], capture_output=True, text=True, timeout=300, env=env)
    assert p.returncode == 2 and "over this command's --processes-below-us 12" in p.stderr and \
        path.read_bytes() == before
    p = subprocess.run([*base, "--processes-below-us", "1e9", "--resume", str(path)], capture_output=True, text=True,
                       timeout=300, env=env)
    assert p.returncode == 0, p.stderr
