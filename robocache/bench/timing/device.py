"""The device timer: :func:`time_gpu` (CUDA events behind a pre-blocked stream, or CUDA-graph replay) and
:func:`copy_ceiling`, the copy bandwidth a memory-bound kernel is judged against (the package docstring says
how a sample is taken)."""
from __future__ import annotations

import time
import warnings
from collections.abc import Callable
from typing import Any

from .stats import Timing, check_args, stop_rule

# Host enqueue and GPU time aimed at per batch: long enough that the per-batch cost (a sleep
# kernel and a synchronize) is small, short enough that the sleep covering the enqueueing stays
# a few tens of ms.
_BATCH_S = 0.05
# Operations (kernel launches, event records) enqueued per batch while the stream is blocked.
# The driver's launch queue holds about a thousand; past that cudaLaunchKernel blocks until the
# GPU drains it, which no pre-blocking can cover. Halved whenever a batch turns out uncovered.
_QUEUE_SLOTS = 768
MAX_REPS = 256  # one sample must fit in the launch queue with room to spare
_SLEEP_FACTOR = 1.5  # sleep = factor * expected enqueue time + margin
_SLEEP_FACTOR_MAX = 16.0
_SLEEP_MARGIN_S = 1e-3  # absorbs host jitter (a context switch is ~0.1-1 ms)
_MAX_SLEEP_S = 0.2
_GIVE_UP_AFTER = 4  # consecutive uncovered batches before pre-blocking is given up (bounds the waste)
_HOST_S_PER_LAUNCH = 5e-6
_FLUSH_MIN_BYTES = 256 << 20


class GraphUnavailable(RuntimeError):
    """``fn`` cannot be captured into a CUDA graph (host copies, syncs, work on another stream)."""


def torch_cuda():
    """torch, with a CUDA device it can use (``RuntimeError`` otherwise)."""
    import torch

    if not torch.cuda.is_available():
        raise RuntimeError("time_gpu needs a CUDA device that PyTorch can use")
    return torch


def _gpu_warmup(torch, fn: Callable[[], Any], warmup_s: float) -> tuple[float, float]:
    """Call ``fn`` for ``warmup_s`` (at least twice). Returns (device s per call, host enqueue s per call).

    Calls go in chunks that double, each between two events and synchronized, so the wall clock
    is checked without letting the host run far ahead of the GPU. The device estimate includes
    any launch gaps, so it errs long (fewer reps), never short.
    """
    Event = torch.cuda.Event
    t0 = time.perf_counter()
    fn()
    torch.cuda.synchronize()  # the first call: lazy init, module loads, compilation
    e0, e1 = Event(enable_timing=True), Event(enable_timing=True)
    chunk = 1
    while True:
        e0.record()
        h0 = time.perf_counter()
        for _ in range(chunk):
            fn()
        host_s = (time.perf_counter() - h0) / chunk
        e1.record()
        torch.cuda.synchronize()
        dev_s = max(e0.elapsed_time(e1) * 1e-3 / chunk, 1e-9)
        done = time.perf_counter() - t0
        if done >= warmup_s:
            return dev_s, host_s
        fill = (warmup_s - done) / max(dev_s, host_s, 1e-9)
        chunk = max(1, int(min(chunk * 2, fill, _QUEUE_SLOTS // 2)))


def _sleep_cycles_per_s(torch) -> float:
    """Calibrate ``torch.cuda._sleep``: SM clock cycles per second, measured now (~3 ms).

    The sleep kernel counts SM cycles, so its length in seconds follows the clock. The highest
    of three readings is kept: a rate on the high side makes the sleeps longer, never too short,
    when the clock was still ramping up during the first reading.
    """
    Event = torch.cuda.Event
    torch.cuda._sleep(1000)  # loads the kernel
    e0, e1 = Event(enable_timing=True), Event(enable_timing=True)
    cycles = 1_000_000  # ~0.5 ms at H200's 1.98 GHz
    rate = 0.0
    for _ in range(3):
        e0.record()
        torch.cuda._sleep(cycles)
        e1.record()
        torch.cuda.synchronize()
        s = e0.elapsed_time(e1) * 1e-3
        if s > 0:
            rate = max(rate, cycles / s)
    return rate if rate > 0 else 2e9


def _capture(torch, fn: Callable[[], Any], reps: int):
    """``reps`` calls of ``fn`` captured into a CUDA graph, or ``GraphUnavailable``."""
    prev = torch.cuda.current_stream()
    try:
        # Warm up on a side stream before capture, as the torch CUDA-graph docs require.
        side = torch.cuda.Stream()
        side.wait_stream(prev)
        with torch.cuda.stream(side):
            for _ in range(3):
                fn()
        prev.wait_stream(side)
        torch.cuda.synchronize()
        g = torch.cuda.CUDAGraph()
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            with torch.cuda.graph(g):
                for _ in range(reps):
                    fn()
    except Exception as e:  # noqa: BLE001 - any failure of capture means: no graph for this fn
        # A failing capture_end skips torch.cuda.graph's stream restore: put the caller's stream back.
        torch.cuda.set_stream(prev)
        try:
            torch.cuda.synchronize()
        except Exception:  # noqa: BLE001
            pass
        msg = (str(e).strip().splitlines() or [""])[0][:300]
        raise GraphUnavailable(f"CUDA graph capture failed: {type(e).__name__}: {msg}") from e
    for w in caught:
        if "graph is empty" in str(w.message).lower():
            # fn's work went to another stream (e.g. a CuPy non-default stream) and ran eagerly.
            raise GraphUnavailable("captured CUDA graph is empty: fn enqueues no work on torch's current stream")
        warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)
    return g


def _blocks_host(torch, fn: Callable[[], Any], rate: float, host_s: float) -> bool:
    """Whether a call of ``fn`` waits for the GPU (a synchronize, a pageable copy, ``.item()``).

    The stream is blocked by a sleep far longer than the call's host time; if the sleep is already
    over when the call returns, the call waited for it. Such a callable cannot be pre-blocked.
    """
    sleep_s = min(_MAX_SLEEP_S, max(5e-3, 4 * host_s))
    mark = torch.cuda.Event()
    torch.cuda._sleep(max(1, int(sleep_s * rate)))
    mark.record()
    fn()
    blocked = bool(mark.query())
    torch.cuda.synchronize()
    return blocked


class _Batches:
    """Samples taken in pre-blocked batches; see the module docstring."""

    def __init__(self, torch, call: Callable[[], Any], pre: Callable[[], Any] | None, ops_per_sample: int,
                 rate: float, blocking: bool):
        self.torch = torch
        self.call, self.pre = call, pre
        self.ops = ops_per_sample  # launches and event records per sample (an estimate)
        self.rate = rate
        self.slots = _QUEUE_SLOTS
        self.factor = _SLEEP_FACTOR
        self.pool: list[Any] = []
        self.mark = torch.cuda.Event(enable_timing=True)
        self.host_s = 0.0  # host enqueue time per sample, last measured
        self.gpu_s = 0.0  # device time per sample (gaps and flushes included), last measured
        self.uncovered = 0
        self.consecutive = 0
        # A callable that waits for the GPU cannot be pre-blocked: sample without sleeps, keep
        # every batch, and let uncovered_batches say so.
        self.give_up = blocking

    def _events(self, n: int) -> list[Any]:
        while len(self.pool) < 2 * n:
            self.pool.append(self.torch.cuda.Event(enable_timing=True))
        return self.pool

    def plan(self, remaining: int) -> int:
        """Samples in the next batch: ~_BATCH_S of GPU and of host time, within the launch queue."""
        n = min(_BATCH_S / max(self.gpu_s, 1e-9), _BATCH_S / max(self.host_s, 1e-9),
                self.slots // max(self.ops, 1), remaining)
        return max(1, int(n))

    def run(self, n: int) -> list[float] | None:
        """One batch of ``n`` samples: the elapsed ms of each, or None if uncovered (discarded)."""
        torch = self.torch
        ev = self._events(n)
        if not self.give_up:
            sleep_s = min(_MAX_SLEEP_S, self.factor * n * self.host_s + _SLEEP_MARGIN_S)
            torch.cuda._sleep(max(1, int(sleep_s * self.rate)))
        self.mark.record()
        h0 = time.perf_counter()
        call, pre = self.call, self.pre
        for i in range(n):
            if pre is not None:
                pre()
            ev[2 * i].record()
            call()
            ev[2 * i + 1].record()
        host = time.perf_counter() - h0
        covered = not self.mark.query()  # the sleep outlasted the enqueueing: no launch gap possible
        torch.cuda.synchronize()
        ms = [ev[2 * i].elapsed_time(ev[2 * i + 1]) for i in range(n)]
        self.host_s = host / n
        self.gpu_s = max(self.mark.elapsed_time(ev[2 * n - 1]) * 1e-3 / n, 1e-9)
        if covered:
            self.consecutive = 0
            return ms
        self.uncovered += 1
        if self.give_up:
            return ms
        # Host jitter (the sleep was too short) or a full launch queue (the batch was too long):
        # longer sleeps, shorter batches. Bounded: past _GIVE_UP_AFTER in a row, keep what comes.
        self.consecutive += 1
        self.factor = min(self.factor * 2, _SLEEP_FACTOR_MAX)
        self.slots = max(1, self.slots // 2)
        if self.consecutive >= _GIVE_UP_AFTER:
            self.give_up = True
        return None


def time_gpu(fn: Callable[[], Any], *, method: str = "cuda_event", cache: str = "warm",
             noise_target: float = 0.005, min_samples: int = 10, max_samples: int = 2000,
             time_limit_s: float = 2.0, warmup_s: float = 0.05, target_sample_s: float = 1e-3) -> Timing:
    """Device time per call of ``fn``, a zero-argument callable enqueueing work on torch's current stream.

    ``method``: "cuda_event" (events around back-to-back calls on a pre-blocked stream) or
    "cuda_graph" (``reps`` calls captured in a CUDA graph, one replay per sample; raises
    :class:`GraphUnavailable` if ``fn`` cannot be captured). ``cache``: "warm", or "cold" (L2
    flushed by writing a buffer of max(2 x L2, 256 MiB) before every sampled call, one call per
    sample, the flush outside the events). ``time_limit_s`` bounds the sampling phase (warm-up,
    calibration and capture excluded; the last batch may overrun it by up to ~50 ms).
    """
    if not callable(fn):
        raise TypeError("fn must be a zero-argument callable")
    if method not in ("cuda_event", "cuda_graph"):
        raise ValueError(f"method must be 'cuda_event' or 'cuda_graph', got {method!r}")
    if cache not in ("warm", "cold"):
        raise ValueError(f"cache must be 'warm' or 'cold', got {cache!r}")
    check_args(noise_target, min_samples, max_samples, time_limit_s, warmup_s, target_sample_s)
    torch = torch_cuda()

    t0 = time.perf_counter()
    dev_s, host_s = _gpu_warmup(torch, fn, warmup_s)
    rate = _sleep_cycles_per_s(torch)
    # Launches per call, an upper estimate: a launch costs the host at least ~5 us from Python
    # (torch op dispatch or a CuPy kernel call). One sample's launches must fit in the queue.
    launches = max(1, round(host_s / _HOST_S_PER_LAUNCH))
    reps = 1 if cache == "cold" else max(1, min(MAX_REPS, (_QUEUE_SLOTS // 2) // launches,
                                                round(target_sample_s / dev_s)))
    cold = int(cache == "cold")

    graph = None
    try:
        pre = None
        if cold:
            l2_bytes = int(torch.cuda.get_device_properties(torch.cuda.current_device()).L2_cache_size)
            flush = torch.empty(max(2 * l2_bytes, _FLUSH_MIN_BYTES), dtype=torch.uint8, device="cuda")
            pre = flush.zero_
        blocking = False
        if method == "cuda_graph":
            graph = _capture(torch, fn, reps)
            call = graph.replay
            ops = 1 + 2 + cold  # one graph launch, two event records, the flush
            graph.replay()  # the first replay uploads the graph
            torch.cuda.synchronize()
        else:
            def call() -> None:
                for _ in range(reps):  # late binding: follows reps when it is lowered below
                    fn()
            ops = reps * launches + 2 + cold
            blocking = _blocks_host(torch, fn, rate, host_s)

        b = _Batches(torch, call, pre, ops, rate, blocking)
        # Probe batch (discarded, counted as warm-up): measures host and device time per sample in
        # the exact configuration, from warm-up estimates deliberately on the long side.
        b.host_s = reps * host_s + 20e-6 if method == "cuda_event" else 50e-6
        b.gpu_s = reps * dev_s
        b.factor = 2 * _SLEEP_FACTOR
        b.run(max(1, min(3, b.plan(3))))
        b.factor, b.uncovered, b.consecutive = _SLEEP_FACTOR, 0, 0
        warm = time.perf_counter() - t0

        samples: list[float] = []
        met, noise, kept = False, None, 0
        start = time.perf_counter()
        while True:
            n = b.plan(max_samples - len(samples))
            ms = b.run(n)
            if ms is not None:
                samples.extend(x * 1e3 / reps for x in ms)
                kept += 1
            elif n == 1 and reps > 1 and method == "cuda_event":
                # One sample alone was not covered: it may overflow the launch queue (fn launches
                # more kernels than estimated). Fewer calls per sample; the series restarts so that
                # every sample has the same reps.
                reps = max(1, reps // 2)
                b.ops = reps * launches + 2 + cold
                samples.clear()
                kept = 0
            met, noise = stop_rule(samples, noise_target, min_samples)
            if met or len(samples) >= max_samples or time.perf_counter() - start >= time_limit_s:
                break
    finally:
        if graph is not None:
            graph.reset()  # frees the graph's private memory pool now, not at garbage collection
    return Timing(timer=method, cache=cache, samples_us=samples, reps_per_sample=reps, warmup_s=warm,
                  noise=noise, noise_target=noise_target, noise_target_met=met, time_limit_s=time_limit_s,
                  batches=kept, uncovered_batches=b.uncovered)


def copy_ceiling(nbytes: int = 2**31, *, noise_target: float = 0.005, time_limit_s: float = 2.0) -> dict[str, Any]:
    """Device-to-device copy bandwidth of this GPU, now: ``dst.copy_(src)`` on uint8 buffers.

    GB/s counts bytes read plus bytes written (2 x ``bytes``) over the median time
    (``gb_per_s``) and over the fastest sample (``gb_per_s_max``). ``nbytes`` is halved until
    both buffers fit in 80% of the free memory; ``bytes`` is the size actually copied.
    """
    torch = torch_cuda()
    nbytes = int(nbytes)
    if nbytes < 1:
        raise ValueError(f"nbytes must be positive, got {nbytes}")
    free, _total = torch.cuda.mem_get_info()
    while 2 * nbytes > 0.8 * free and nbytes > 1 << 20:
        nbytes //= 2
    # Plain device memory is not compressed, so the byte pattern does not matter; written anyway
    # so the source is initialized memory.
    src = torch.full((nbytes,), 0x5A, dtype=torch.uint8, device="cuda")
    dst = torch.empty_like(src)
    t = time_gpu(lambda: dst.copy_(src), method="cuda_event", cache="warm", noise_target=noise_target,
                 time_limit_s=time_limit_s)
    q = t.quantiles()
    moved = 2 * nbytes
    return {"gb_per_s": moved / (q["p50"] * 1e3) if q["p50"] > 0 else 0.0,
            "gb_per_s_max": moved / (q["min"] * 1e3) if q["min"] > 0 else 0.0,
            "bytes": nbytes, "time_us": q["p50"], "noise": t.noise, "timer": t.timer,
            "noise_target_met": t.noise_target_met}

