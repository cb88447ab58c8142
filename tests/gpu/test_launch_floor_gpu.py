"""The call-cost floor timed interleaved on a GPU (issue 25, item 5): the public API's dispatch record of every op
carries the public call and the bare launch timed round after round in one process, and the ratio's spread.
Prints the figures the target (public call <= 2x the bare launch) is judged by; asserts no time."""
from __future__ import annotations

import math

import pytest


@pytest.fixture(scope="module")
def torch():
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("PyTorch sees no CUDA device")
    return torch


@pytest.mark.parametrize("provider", ["robocache", "robocache@cupy"])
def test_public_dispatch_records_carry_the_interleaved_ratio(torch, provider):
    """The public API's records, on torch tensors and (issue 27) on CuPy arrays: each its own call's ratio."""
    from robocache.bench import specs, worker
    from robocache.bench.messages import Task, TimingOptions

    for case in (c for c in specs.cases("quick", device="gpu") if c.dispatch and c.provider == provider):
        rec = worker.measure(Task(run_id="gpu-test", suite="quick", frontend="test", device="gpu", case_key=case.key,
                                  timing=TimingOptions(time_limit_s=1.0)))
        assert rec.status == "ok", (case.key, rec.status, rec.reason)
        inter = rec.dispatch.interleaved
        assert inter is not None, rec.health.reasons
        assert inter.rounds >= 15 and 1 <= inter.calls_per_loop <= 200
        for key in ("ratio", "cupy_ratio"):
            q = [getattr(inter, f"{key}_p20"), getattr(inter, f"{key}_p50"), getattr(inter, f"{key}_p80")]
            assert all(math.isfinite(x) and x > 0 for x in q) and q == sorted(q), (case.op, key, q)
        assert inter.bare_us > 0 and inter.public_us > 0 and inter.public_cupy_us > 0
        print(f"\n{case.op}: interleaved over {inter.rounds} rounds of {inter.calls_per_loop} calls: bare "
              f"{inter.bare_us:.2f} us, public torch {inter.public_us:.2f} us "
              f"({inter.ratio_p50:.2f}x, p20-p80 {inter.ratio_p20:.2f}-{inter.ratio_p80:.2f}), public cupy "
              f"{inter.public_cupy_us:.2f} us ({inter.cupy_ratio_p50:.2f}x, "
              f"{inter.cupy_ratio_p20:.2f}-{inter.cupy_ratio_p80:.2f}); target <= 2x; "
              f"noise target met: {inter.noise_target_met}")


def test_other_dispatch_records_do_not(torch):
    """The floor's own record does not carry it (the bare launch is what the ratios divide by)."""
    from robocache.bench import specs, worker
    from robocache.bench.messages import Task, TimingOptions

    case = next(c for c in specs.cases("quick", device="gpu") if c.dispatch and c.provider == "bare_launch")
    rec = worker.measure(Task(run_id="gpu-test", suite="quick", frontend="test", device="gpu", case_key=case.key,
                              timing=TimingOptions(time_limit_s=0.3)))
    assert rec.status == "ok" and rec.dispatch.interleaved is None
