"""The timer on the CPU: the stop rule on synthetic samples, the host timer on known sleeps.

The GPU side (events, graphs, cold L2, the copy ceiling) is in tests/gpu/test_timer_gpu.py.
"""
from __future__ import annotations

import gc
import math
import random
import subprocess
import sys
import time

import pytest
import msgspec

from robocache.bench import schema, timing

# --- stop_rule ------------------------------------------------------------------------------------


def test_tight_samples_meet_half_a_percent_with_20():
    r = random.Random(1)
    xs = [100.0 * (1 + 0.001 * r.gauss(0, 1)) for _ in range(20)]
    met, noise = timing.stop_rule(xs, 0.005, 10)
    assert met and noise is not None and noise < 0.005


def test_noisy_samples_do_not_meet():
    r = random.Random(2)
    xs = [r.lognormvariate(0, 0.5) for _ in range(200)]
    met, noise = timing.stop_rule(xs, 0.005, 10)
    assert not met and noise is not None and noise > 0.005


def test_fewer_than_min_samples_never_meets():
    xs = [5.0] * 9  # zero spread: the noise target itself is met
    met, noise = timing.stop_rule(xs, 0.005, 10)
    assert not met and noise == 0.0
    assert timing.stop_rule(xs + [5.0], 0.005, 10) == (True, 0.0)


@pytest.mark.parametrize("xs", [[], [1.0], [1.0, 2.0]])
def test_noise_none_below_3_samples(xs):
    assert timing.stop_rule(xs, 0.5, 1) == (False, None)


def test_zero_median_gives_no_noise_not_nan():
    assert timing.stop_rule([0.0, 0.0, 0.0, 1.0], 0.5, 1) == (False, None)


def test_non_finite_samples_refused():
    with pytest.raises(ValueError):
        timing.stop_rule([1.0, float("nan"), 1.0], 0.5, 1)


def test_median_ci_ranks():
    # n = 100: ranks floor(50 - 9.8) = 40 and ceil(51 + 9.8) = 61 (1-based), on 1..100.
    lo, med, hi = timing.median_ci([float(i) for i in range(1, 101)])
    assert (lo, med, hi) == (40.0, 50.5, 61.0)
    # small n: clamped to the sample
    assert timing.median_ci([3.0, 1.0, 2.0]) == (1.0, 2.0, 3.0)


def test_noise_shrinks_like_one_over_sqrt_n():
    r = random.Random(3)
    noise = {}
    for n in (100, 10_000):
        noise[n] = timing.stop_rule([r.gauss(100, 5) for _ in range(n)], 0.0, 1)[1]
    assert 5 < noise[100] / noise[10_000] < 20  # 10 expected


# --- time_host -----------------------------------------------------------------------------------


def test_host_measures_a_2ms_sleep():
    # time_limit_s bounds the sampling even short of min_samples: 10 s leaves a multi-second stall room for 5
    # samples (a quiet machine meets the stop rule in a few ms and stops there)
    t = timing.time_host(lambda: time.sleep(0.002), time_limit_s=10.0)
    q = t.quantiles()
    # a sleep never returns early: no sample is under it. It overshoots by the timer slack (~50-100 us on Linux),
    # and on a loaded machine by however long the wake-up waits for a core, in any number of samples (issue 16):
    # so the fastest sample, not the median, is held near 2 ms (a units or per-call error is off by 1000x or reps)
    assert 1950 <= q["min"] <= t.median_us and q["min"] <= 3000, q
    assert t.timer == "host" and t.cache == "warm" and t.reps_per_sample == 1
    assert len(t.samples_us) >= 5


def test_host_reps_make_a_sample_last_target_sample_s(monkeypatch):
    """The calibration: reps per sample = target_sample_s / the warm-up's time per call. Checked on a clock that
    advances exactly 1 us per call (the real clock on a busy machine mis-estimated a call 10x while another test
    suite ran beside it: issue 16, no test may fail on a busy machine), then a real-clock sanity check."""
    from robocache.bench.timing import host

    class FakeTime:
        ns = 0

        @classmethod
        def perf_counter_ns(cls) -> int:
            return cls.ns

        @classmethod
        def perf_counter(cls) -> float:
            return cls.ns / 1e9

    def call() -> None:
        FakeTime.ns += 1000  # 1 us per call

    monkeypatch.setattr(host, "time", FakeTime)
    t = timing.time_host(call, time_limit_s=0.3, target_sample_s=1e-3, warmup_s=0.01)
    assert t.reps_per_sample == 1000  # 1 ms / 1 us
    assert t.samples_us and all(x == pytest.approx(1.0) for x in t.samples_us)
    assert t.median_us * t.reps_per_sample == pytest.approx(1e3)  # a sample lasts target_sample_s
    t = timing.time_host(call, time_limit_s=0.3, target_sample_s=2e-4, warmup_s=0.01)
    assert t.reps_per_sample == 200
    monkeypatch.undo()
    # the real clock: a ~1 us call gets many reps per sample (a 100x slower machine still > 10). The estimate is the
    # warm-up's mean time per call, so a stall of the whole process early in one warm-up (a loaded machine's
    # scheduler, issue 16) can inflate it past that: the best of three calibrations is held to it
    reps = [timing.time_host(lambda: sum(range(50)), time_limit_s=0.3, target_sample_s=1e-3).reps_per_sample
            for _ in range(3)]
    assert max(reps) > 10, reps


def test_host_honours_time_limit_when_target_unreachable():
    r = random.Random(4)

    def noisy():
        time.sleep(r.random() * 3e-4)

    t0 = time.perf_counter()
    t = timing.time_host(noisy, noise_target=1e-9, max_samples=10**7, time_limit_s=0.3, warmup_s=0.02)
    wall = time.perf_counter() - t0
    assert not t.noise_target_met
    assert t.noise is not None and t.noise > 1e-9
    # the limit is honoured (10**7 samples would take over 20 minutes); the bound leaves a machine far slower than a
    # quiet one room, as test_host_loop_stop_rule_and_time_limit's does (issue 16: 2.56 s was seen there under load,
    # past the 2.48 s this bound once was)
    assert 0.3 <= wall < 20.0, wall
    assert t.method()["noise_target_met"] is False


def test_host_stops_at_max_samples():
    # the time limit only as a bound: it must not end the sampling first, even on a stalled machine (issue 16)
    t = timing.time_host(lambda: None, noise_target=0.0, max_samples=7, min_samples=5, time_limit_s=60.0,
                        warmup_s=0.0)
    assert len(t.samples_us) == 7


def test_quantiles_ordered_and_method_matches_schema():
    t = timing.time_host(lambda: sum(range(200)), time_limit_s=0.3)
    q = t.quantiles()
    assert set(q) == {"p20", "p50", "p80", "min", "max", "mean"}
    assert q["min"] <= q["p20"] <= q["p50"] <= q["p80"] <= q["max"]
    assert q["min"] <= q["mean"] <= q["max"]
    assert all(math.isfinite(v) and v > 0 for v in q.values())
    assert q["p50"] == t.median_us
    msgspec.convert(q, schema.Quantiles)
    m = t.method()
    # every Method field but input_sets, which the worker adds (the timer does not rotate inputs)
    assert set(m) == set(schema.Method.__annotations__) - {"input_sets"}
    msgspec.convert(m, schema.Method)
    assert m["samples"] == len(t.samples_us)


# --- time_host_loop (dispatch cases) ------------------------------------------------------------


class _Queue:
    """A fake device: calls enqueue work, ``sync`` drains it; records how deep the queue got."""

    def __init__(self) -> None:
        self.pending = self.deepest = self.syncs = 0
        self.sync_at: list[int] = []
        self.calls = 0

    def call(self) -> None:
        self.calls += 1
        self.pending += 1
        self.deepest = max(self.deepest, self.pending)
        time.sleep(2e-5)

    def sync(self) -> None:
        self.syncs += 1
        self.pending = 0


def test_host_loop_drains_between_loops_and_caps_the_loop():
    q = _Queue()
    t = timing.time_host_loop(q.call, sync=q.sync, time_limit_s=0.3, max_calls_per_loop=16, warmup_s=0.02)
    assert t.timer == "host_loop" and t.cache == "warm"
    assert 1 <= t.reps_per_sample <= 16 and q.deepest <= 16  # a loop never outgrows the launch queue
    assert q.syncs >= len(t.samples_us)  # the queue is drained before every loop
    qs = t.quantiles()
    # the 20 us sleep plus its slack: never under it; the fastest loop near it (a loaded machine delays the wake-ups
    # of any number of loops, so the median is not held to it: issue 16)
    assert 20 <= qs["min"] <= t.median_us and qs["min"] <= 2000, qs
    msgspec.convert(t.method(), schema.Method)


def test_host_loop_sample_is_many_calls_of_target_length():
    # calls far shorter than a sample's target (well under 1 us against 10 ms, so still >= 50x short on a machine
    # twenty times slower): capped at the launch-queue bound. The estimate is the warm-up's mean, which a stall of
    # the process in its first calls inflates (issue 16): the best of three calibrations is held to it
    reps = [timing.time_host_loop(lambda: None, time_limit_s=0.3, target_sample_s=1e-2).reps_per_sample
            for _ in range(3)]
    assert max(reps) == 200, reps
    t = timing.time_host_loop(lambda: time.sleep(1e-3), time_limit_s=0.3, target_sample_s=1e-3)
    q = t.quantiles()
    assert t.reps_per_sample == 1 and 950 <= q["min"] <= t.median_us and q["min"] <= 3000, q  # as above


def test_host_loop_keeps_the_garbage_collector_on():
    seen = []
    timing.time_host_loop(lambda: seen.append(gc.isenabled()), time_limit_s=0.05, warmup_s=0.0)
    assert all(seen)


def test_host_loop_stop_rule_and_time_limit():
    t = timing.time_host_loop(lambda: None, noise_target=0.0, max_samples=7, min_samples=5, time_limit_s=60.0,
                             warmup_s=0.0)  # the time limit never first, as in test_host_stops_at_max_samples
    assert len(t.samples_us) == 7
    r = random.Random(5)
    t0 = time.perf_counter()
    t = timing.time_host_loop(lambda: time.sleep(r.random() * 3e-4), noise_target=1e-9, max_samples=10**7,
                             time_limit_s=0.3, warmup_s=0.02)
    # the limit is honoured (without it 10**7 samples would take minutes); the bound leaves a machine far slower
    # than a quiet one room (CI shares its cores: 1.03 s was seen under load, 2.56 s with two CI runs beside it)
    assert not t.noise_target_met and 0.3 <= time.perf_counter() - t0 < 20.0


@pytest.mark.parametrize("kw", [{"noise_target": -1.0}, {"min_samples": 0}, {"time_limit_s": 0.0},
                                {"max_calls_per_loop": 0}])
def test_host_loop_bad_arguments_refused(kw):
    with pytest.raises(ValueError):
        timing.time_host_loop(lambda: None, **kw)
    with pytest.raises(TypeError):
        timing.time_host_loop(None)  # type: ignore[arg-type]


def test_empty_timing_is_finite():
    t = timing.Timing(timer="cuda_event", cache="cold", samples_us=[], reps_per_sample=1, warmup_s=0.0,
                     noise=None, noise_target=0.005, noise_target_met=False, time_limit_s=1.0)
    assert t.median_us == 0.0
    msgspec.convert(t.quantiles(), schema.Quantiles)
    msgspec.convert(t.method(), schema.Method)


@pytest.mark.parametrize("kw", [{"noise_target": -1.0}, {"noise_target": float("nan")}, {"min_samples": 0},
                                {"min_samples": 10, "max_samples": 5}, {"time_limit_s": 0.0},
                                {"warmup_s": float("inf")}, {"target_sample_s": 0.0}])
def test_bad_arguments_refused(kw):
    with pytest.raises(ValueError):
        timing.time_host(lambda: None, **kw)


def test_time_gpu_argument_errors_before_any_device_use():
    with pytest.raises(ValueError):
        timing.time_gpu(lambda: None, method="wallclock")
    with pytest.raises(ValueError):
        timing.time_gpu(lambda: None, cache="lukewarm")
    with pytest.raises(TypeError):
        timing.time_gpu(None)  # type: ignore[arg-type]


def test_time_gpu_without_cuda_says_so():
    torch = pytest.importorskip("torch")
    if torch.cuda.is_available():
        pytest.skip("a CUDA device is present")
    with pytest.raises(RuntimeError, match="CUDA"):
        timing.time_gpu(lambda: None)
    with pytest.raises(RuntimeError, match="CUDA"):
        timing.copy_ceiling(1 << 20)


def test_import_has_no_side_effects():
    code = "import sys, robocache.bench.timing; print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
