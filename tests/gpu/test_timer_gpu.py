"""The GPU timer against kernels of known behaviour (skipped, loudly, without a GPU).

Each test prints its figures (``pytest -s`` shows them): they are the timer's own
self-check on the machine it ran on.
"""
from __future__ import annotations

import math
import time

import pytest

from robocache.bench import timing

from robocache.bench import schema

# what Timing.method() must give: the schema's Method fields (a timer writes every one it knows; input_sets is
# the harness's, written by the worker); checked by msgspec as the worker's record would be
METHOD_KEYS = set(schema.Method.__struct_fields__) - {"input_sets"}


@pytest.fixture(scope="module")
def torch():
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("PyTorch sees no CUDA device")
    return torch


def _finite(t: timing.Timing) -> None:
    q = t.quantiles()
    assert all(math.isfinite(v) and v >= 0 for v in q.values()), q
    assert q["min"] <= q["p20"] <= q["p50"] <= q["p80"] <= q["max"]
    m = t.method()
    assert set(m) == METHOD_KEYS
    import msgspec

    msgspec.convert(m, schema.Method)  # valid as a record's method
    assert m["noise"] is None or math.isfinite(m["noise"])


def _show(label: str, t: timing.Timing) -> None:
    q = t.quantiles()
    print(f"\n{label}: {t.timer}/{t.cache} p50 {q['p50']:.3f} us (p20 {q['p20']:.3f}, p80 {q['p80']:.3f}), "
          f"reps {t.reps_per_sample}, samples {len(t.samples_us)}, noise {t.noise}, met {t.noise_target_met}, "
          f"batches {t.batches}, uncovered {t.uncovered_batches}, warm-up {t.warmup_s:.3f} s")


def test_event_and_graph_agree_on_a_kernel_of_known_length(torch):
    torch.cuda._sleep(100_000_000)  # ~50 ms of load first, so the clock is up when it is calibrated
    rate = timing.device._sleep_cycles_per_s(torch)
    cycles = int(300e-6 * rate)  # ~300 us: launch gaps (~1 us) are well under the 3% allowed
    expected_us = cycles / rate * 1e6

    def fn():
        torch.cuda._sleep(cycles)

    ev = timing.time_gpu(fn, method="cuda_event")
    gr = timing.time_gpu(fn, method="cuda_graph")
    _show(f"sleep kernel, expected {expected_us:.1f} us", ev)
    _show(f"sleep kernel, expected {expected_us:.1f} us", gr)
    rel = (ev.median_us - gr.median_us) / gr.median_us
    print(f"event vs graph: {100 * rel:+.2f}%")
    _finite(ev)
    _finite(gr)
    assert abs(rel) < 0.03
    assert 0.8 * expected_us < ev.median_us < 1.25 * expected_us
    assert ev.reps_per_sample >= 2 and gr.reps_per_sample >= 2
    assert ev.noise_target_met  # a sleep kernel is as steady as a kernel gets


def test_launch_bound_kernel_is_covered(torch):
    """A tiny kernel, far shorter than its launch: the pre-blocked stream is what makes it honest."""
    x = torch.ones(256, device="cuda")

    def fn():
        x.mul_(1.0)

    ev = timing.time_gpu(fn, method="cuda_event")
    gr = timing.time_gpu(fn, method="cuda_graph")
    _show("tiny mul_", ev)
    _show("tiny mul_", gr)
    print(f"event vs graph: {100 * (ev.median_us - gr.median_us) / gr.median_us:+.2f}%")
    _finite(ev)
    _finite(gr)
    assert ev.median_us < 20  # a 256-element kernel is a few us; Python's launch time is not in it


def test_cold_is_not_faster_than_warm_for_an_l2_resident_copy(torch):
    src = torch.rand(1 << 20, device="cuda")  # 4 MiB in, 4 MiB out: fits H200's L2
    dst = torch.empty_like(src)

    def fn():
        dst.copy_(src)

    warm = timing.time_gpu(fn, cache="warm")
    cold = timing.time_gpu(fn, cache="cold")
    _show("4 MiB copy", warm)
    _show("4 MiB copy", cold)
    _finite(warm)
    _finite(cold)
    assert cold.cache == "cold" and cold.reps_per_sample == 1
    assert cold.median_us >= 0.97 * warm.median_us
    # the flush is outside the events: a cold 4 MiB copy is microseconds, not a 256 MiB memset
    assert cold.median_us < 50


def test_copy_ceiling_is_plausible(torch):
    res = timing.copy_ceiling()
    print(f"\ncopy ceiling: {res}")
    for k in ("gb_per_s", "gb_per_s_max", "time_us"):
        assert math.isfinite(res[k]) and res[k] > 0, res
    assert res["noise"] is None or math.isfinite(res["noise"])
    assert res["gb_per_s"] > 100
    assert res["gb_per_s_max"] >= res["gb_per_s"]
    assert res["timer"] == "cuda_event" and res["bytes"] > 0


def test_bare_launch_is_checked_and_is_the_floor(torch):
    """The launch floor of each op: the bare kernel writes its marker, and its host cost per call in a
    tight loop is a few microseconds (the issue measured ~5 us for a bare CuPy launch)."""
    cupy = pytest.importorskip("cupy")
    buf = cupy.ones(64, dtype=cupy.float32)
    ptr = buf.data.ptr
    args = {"resample": ([ptr, ptr, ptr], [4, 2, 1, 1], []), "fuse": ([ptr, ptr], [2, 2, 3, 1], []),
            "voxelize": ([ptr, 0], [1, 16, 4, 4, 4], [-2.0] * 3 + [2.0] * 3 + [1.0] * 3)}
    for op, (ptrs, ints, floats) in args.items():
        bare = timing.BareLaunch(op, ptrs, ints, floats)
        chk = bare.check()
        assert chk["passed"] and bare.expected == sum(ints), (op, chk)
        t = timing.time_host_loop(bare.launch, sync=torch.cuda.synchronize, time_limit_s=0.5)
        dev = timing.time_gpu(bare.launch, time_limit_s=0.3, noise_target=0.02)
        _show(f"bare launch {op} (host loop)", t)
        _show(f"bare launch {op} (device)", dev)
        _finite(t)
        assert t.timer == "host_loop" and 0.5 < t.median_us < 30


def test_dispatch_cases_measure_host_cost_per_call(torch):
    """The quick suite's dispatch cases through the worker: gated, timed as host_loop, device time beside;
    prints the issue's figure (public call vs bare launch, target <= 2x)."""
    from robocache.bench import specs, worker
    from robocache.bench.messages import Task, TimingOptions

    recs = {}
    for case in (c for c in specs.cases("quick", device="gpu") if c.dispatch):
        rec = worker.measure(Task(run_id="gpu-test", suite="quick", frontend="test", device="gpu", case_key=case.key,
                                  timing=TimingOptions(time_limit_s=1.0)))
        assert rec.status == "ok", (case.key, rec.status, rec.reason)
        assert rec.check.passed and rec.method.timer == "host_loop"
        d = rec.dispatch
        assert d.device_us is not None and d.device_us > 0 and d.gpu_keeps_up is not None
        recs[(case.op, case.provider)] = rec
    for op in specs.OPS:
        host = {p: recs[(op, p)].metrics.time_us.p50 for p in specs.DISPATCH_PROVIDERS}
        dev = {p: recs[(op, p)].dispatch.device_us for p in specs.DISPATCH_PROVIDERS}
        bare = host["bare_launch"]
        print(f"\n{op}: host cost per call: public torch {host['robocache']:.2f} us, public cupy "
              f"{host['robocache@cupy']:.2f} us, bare launch {bare:.2f} us; ratio "
              f"{host['robocache'] / bare:.2f}x / {host['robocache@cupy'] / bare:.2f}x (target <= 2x); "
              f"device per call {', '.join(f'{p} {v:.2f} us' for p, v in dev.items())}")
        assert host["robocache"] > 0.5 * bare and host["robocache@cupy"] > 0.5 * bare  # the floor is a floor
        assert recs[(op, "robocache")].dispatch.gpu_keeps_up  # a tiny call: the host is the bottleneck


def test_host_blocking_callable_and_graph_unavailable(torch):
    """Last in the file: a failed capture is the one thing here that can disturb the process."""
    host = torch.ones(1 << 16)  # pageable: the copy waits for the stream

    def fn():
        return host.to("cuda")

    ev = timing.time_gpu(fn, method="cuda_event", time_limit_s=0.5)
    _show("pageable H2D copy", ev)
    _finite(ev)
    assert ev.samples_us and ev.uncovered_batches >= 1  # said, not hidden

    with pytest.raises(timing.GraphUnavailable) as e:
        timing.time_gpu(fn, method="cuda_graph", time_limit_s=0.5)
    print(f"GraphUnavailable: {e.value}")
    # the caller's stream is back and the timer still works
    assert torch.cuda.current_stream() == torch.cuda.default_stream()
    t = timing.time_gpu(lambda: torch.cuda._sleep(100_000), time_limit_s=0.3)
    assert t.samples_us and t.median_us > 0


def test_lockstep_tells_host_bound_from_gpu_bound(torch):
    """time_lockstep (no blocked stream) keeps the host's enqueue time per call: close to the per-call time
    when the host paces the work, far below it when the GPU does."""
    torch.cuda._sleep(100_000_000)
    rate = timing.device._sleep_cycles_per_s(torch)
    long = int(500e-6 * rate)  # 500 us of GPU work per call, a few us to enqueue it

    gpu_bound = timing.time_lockstep(lambda: torch.cuda._sleep(long), reps=5, samples=10, device="gpu")

    def host_paced():  # ~200 us of host work per call around a 1 us kernel
        t_end = time.perf_counter() + 200e-6
        while time.perf_counter() < t_end:
            pass
        torch.cuda._sleep(1000)

    host_bound = timing.time_lockstep(host_paced, reps=5, samples=10, device="gpu")
    for label, t in (("gpu-bound", gpu_bound), ("host-bound", host_bound)):
        _show(label, t)
        print(f"{label}: launch {t.launch_us:.1f} us per call of {t.median_us:.1f} us")
        _finite(t)
    assert gpu_bound.launch_us < 0.2 * gpu_bound.median_us
    assert 400 < gpu_bound.median_us < 700  # the kernel's own 500 us
    assert host_bound.launch_us >= timing.HOST_BOUND_FRACTION * host_bound.median_us
    assert host_bound.median_us >= 190
