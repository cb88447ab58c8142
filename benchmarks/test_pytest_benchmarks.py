"""pytest-benchmark suite over the harness's grid (robocache.bench.specs); no case list of its own.

    pytest benchmarks --benchmark-save=NAME          # GPU device times into results/pytest/
    pytest benchmarks --benchmark-compare            # against the last saved run
    pytest-benchmark compare --group-by=group ...    # its own comparison tool
    pytest benchmarks --benchmark-disable            # as tests: the correctness gate only (CI)

Each case is measured by the harness (correctness gate, then the device timer: CUDA events behind a
blocked stream, noise-based stopping) and its per-call device-time samples are fed to pytest-benchmark
through a virtual clock, so pytest-benchmark's stats, saved JSON and comparisons are GPU device times,
not host times. The record also lands in our store (front end "pytest-benchmark"); extra_info carries
GB/s, % of the copy ceiling and the timer used. Suite: ``ROBOCACHE_SUITE`` (default quick).

The call-cost ("dispatch") cases are the exception, by design: their samples are host time per call in a
tight loop (timer ``host_loop``), and extra_info says so (``kind: dispatch``, the host p50, the device time per
call beside it) instead of GB/s and a % of the ceiling, which a host time must never feed.

``ROBOCACHE_SUITE=multigpu``: the multi-GPU cases, each through the same torchrun path as ``robocache-bench run
--suite multigpu`` (a child launch of as many processes as the case has ranks; skipped with fewer GPUs than that
or without torch.distributed); the samples are the slowest rank's step (the group's step time), and
extra_info adds the ranks, aggregate throughput, scaling efficiency and gather/collective bandwidth.
"""
from __future__ import annotations

import os

import pytest

from robocache.bench import frontend, specs

SUITE = os.environ.get("ROBOCACHE_SUITE", "quick")
KEYS = frontend.suite_cases(suite=SUITE)


class VirtualClock:
    """A timer for pytest-benchmark whose time advances by the harness's device-time samples."""

    def __init__(self) -> None:
        self.now = 0.0
        self.samples: list[float] = []

    def __call__(self) -> float:
        return self.now

    def feed(self, samples_us: list[float]) -> None:
        self.samples = list(samples_us)

    def tick(self) -> None:
        self.now += self.samples.pop(0) * 1e-6


CLOCK = VirtualClock()


@pytest.mark.benchmark(timer=CLOCK, disable_gc=False, warmup=False)
@pytest.mark.parametrize("key", KEYS)
def test_case(benchmark, rcb_session, key):
    case = specs.find(key)
    benchmark.group = f"{case.id} {case.dtype}"
    if benchmark.disabled:  # running as a test: the correctness gate, no timing
        try:  # (pedantic only calls the target once when disabled)
            rec = benchmark.pedantic(frontend.measure, args=(key, rcb_session),
                                     kwargs={"suite": SUITE, "check_only": True})
        except frontend.Unavailable as e:
            pytest.skip(str(e))
        assert rec.status == "ok", rec.reason
        assert rec.check.passed
        return
    extras: dict = {}
    try:
        rec = frontend.measure(key, rcb_session, suite=SUITE, extras=extras)
    except frontend.Unavailable as e:
        pytest.skip(str(e))
    assert rec.status == "ok", f"{rec.status}: {rec.reason}"
    m = rec.metrics
    common = {"timer": rec.method.timer, "provider": case.provider, "dtype": case.dtype, "run_id": rec.run_id,
              "flags": [k for k in ("throttled", "contended", "noisy") if getattr(rec.health, k)]}
    if case.dispatch:  # call cost: the samples are host time per call in a tight loop, not device time
        dsp = rec.dispatch
        benchmark.extra_info.update({**common, "kind": "dispatch", "host_time_us_p50": m.time_us.p50,
                                     "device_us_per_call": dsp.device_us if dsp is not None else None,
                                     "gpu_keeps_up": dsp.gpu_keeps_up if dsp is not None else None})
    else:
        benchmark.extra_info.update({
            **common, "cache": rec.method.cache, "device_time_us_p50": m.time_us.p50,
            "gb_per_s": m.gb_per_s, "pct_of_ceiling": m.pct_of_ceiling, "items_per_s": m.items_per_s})
    d = rec.distributed
    if d is not None:
        benchmark.extra_info.update({k: getattr(d, k) for k in (
            "world_size", "nodes", "backend", "scaling", "gather", "per_rank_us", "step_us", "aggregate_items_per_s",
            "efficiency", "gather_gb_per_s", "collective_gb_per_s", "collective_busbw_gb_per_s")})
    samples = extras["timing"].samples_us
    CLOCK.feed(samples)
    benchmark.pedantic(CLOCK.tick, rounds=len(samples), iterations=1)
