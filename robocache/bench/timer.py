"""The project's one timer: device time of a GPU callable, host time of a CPU one.

Every front end (asv, pytest-benchmark, the CLI, the nightly job) goes through
:func:`time_gpu` / :func:`time_host`; :func:`copy_ceiling` measures the bandwidth
ceiling a memory-bound kernel is judged against in the same run.

How a GPU sample is taken (DESIGN.md section 5; triton's ``do_bench`` read first):

* warm-up sized by wall time (at least two calls), which also estimates the
  per-call device time and the host's time to enqueue one call;
* ``reps_per_sample`` calls per sample so a sample lasts about ``target_sample_s``
  (one call, after an L2 flush, in cold mode);
* samples are taken in batches of about 50 ms. Before a batch the stream is blocked
  with ``torch.cuda._sleep`` sized to outlast the host's enqueueing of the whole
  batch, then each sample is ``start event, reps calls, end event``, back to back.
  So the GPU never waits for a launch inside a sample: the events measure the
  device, not Python. Whether the sleep really outlasted the enqueueing is checked
  (an event recorded after the sleep must still be pending when the host is done);
  a batch where it did not is discarded and the next sleep is longer (and the batch, or
  failing that the reps per sample, shorter: the launch queue holds ~1000 launches).
  A callable that itself waits for the GPU (a synchronize, a pageable copy, ``.item()``)
  cannot be pre-blocked; that is detected before sampling, it is timed without sleeps,
  and ``Timing.uncovered_batches`` counts every batch that was not covered;
* ``cuda_graph``: the same with ``reps`` calls captured into one CUDA graph and
  one ``replay()`` per sample, the timers' self-check;
* sampling stops when the median's 95% interval is narrower than the noise target
  (:func:`stop_rule`), or at the time limit, or at ``max_samples``; the record says
  which (``noise_target_met``).

The call cost of a tiny call (the ``dispatch`` cases) is host time, not device time:
:func:`time_host_loop` times calls in a tight loop with the GPU drained between loops, and
:class:`BareLaunch` is the floor it is judged against (a bare CuPy RawKernel launch with
precomputed arguments), as :func:`copy_ceiling` is the ceiling of a memory-bound kernel.

Nothing here runs at import time: torch is imported inside the functions.
"""
from __future__ import annotations

import gc
import math
import time
import warnings
from dataclasses import dataclass
from typing import Any, Callable

# Host enqueue and GPU time aimed at per batch: long enough that the per-batch cost (a sleep
# kernel and a synchronize) is small, short enough that the sleep covering the enqueueing stays
# a few tens of ms.
_BATCH_S = 0.05
# Operations (kernel launches, event records) enqueued per batch while the stream is blocked.
# The driver's launch queue holds about a thousand; past that cudaLaunchKernel blocks until the
# GPU drains it, which no pre-blocking can cover. Halved whenever a batch turns out uncovered.
_QUEUE_SLOTS = 768
_MAX_REPS = 256  # one sample must fit in the launch queue with room to spare
_SLEEP_FACTOR = 1.5  # sleep = factor * expected enqueue time + margin
_SLEEP_FACTOR_MAX = 16.0
_SLEEP_MARGIN_S = 1e-3  # absorbs host jitter (a context switch is ~0.1-1 ms)
_MAX_SLEEP_S = 0.2
_GIVE_UP_AFTER = 4  # consecutive uncovered batches before pre-blocking is given up (bounds the waste)
_HOST_S_PER_LAUNCH = 5e-6
_FLUSH_MIN_BYTES = 256 << 20
_Z95 = 1.96


class GraphUnavailable(RuntimeError):
    """``fn`` cannot be captured into a CUDA graph (host copies, syncs, work on another stream)."""


# A lockstep sample whose host enqueue time is at least this fraction of its GPU time was paced by the host.
HOST_BOUND_FRACTION = 0.8


@dataclass
class Timing:
    """Per-call times of one measurement and how they were taken (schema ``Method``)."""

    timer: str  # "cuda_event" | "cuda_graph" | "host" | "host_loop"
    cache: str  # "warm" | "cold"
    samples_us: list[float]  # per-call time of each sample, microseconds
    reps_per_sample: int
    warmup_s: float  # wall time actually spent warming up (and calibrating / capturing)
    noise: float | None  # relative half-width of the median's distribution-free 95% CI
    noise_target: float
    noise_target_met: bool
    time_limit_s: float
    batches: int = 0  # sampling batches kept (GPU) or samples (host)
    uncovered_batches: int = 0  # GPU batches whose pre-blocking sleep ended before the enqueueing did
    launch_us: float | None = None  # time_lockstep on a GPU: median host time per call to enqueue the work

    @property
    def median_us(self) -> float:
        """Median per-call time (0.0 when there are no samples)."""
        return _quantile(sorted(self.samples_us), 0.5)

    def quantiles(self) -> dict[str, float]:
        """Schema ``Quantiles`` in microseconds per call (zeros when there are no samples)."""
        xs = sorted(self.samples_us)
        mean = math.fsum(xs) / len(xs) if xs else 0.0
        return {"p20": _quantile(xs, 0.2), "p50": _quantile(xs, 0.5), "p80": _quantile(xs, 0.8),
                "min": xs[0] if xs else 0.0, "max": xs[-1] if xs else 0.0, "mean": mean}

    def method(self) -> dict[str, Any]:
        """Schema ``Method`` dict."""
        return {"timer": self.timer, "cache": self.cache, "warmup_s": float(self.warmup_s),
                "samples": len(self.samples_us), "reps_per_sample": int(self.reps_per_sample),
                "noise_target": float(self.noise_target), "noise": self.noise,
                "noise_target_met": bool(self.noise_target_met), "time_limit_s": float(self.time_limit_s),
                "version": _method_version()}


def _method_version() -> int:
    from .schema import METHOD_VERSION  # the measuring method's version: part of every series (schema.series_key)

    return METHOD_VERSION


# --- statistics ---------------------------------------------------------------------------------

def _quantile(xs: list[float], q: float) -> float:
    """Linear-interpolation quantile of sorted ``xs`` (NumPy's default); 0.0 when empty."""
    if not xs:
        return 0.0
    pos = q * (len(xs) - 1)
    lo = int(math.floor(pos))
    hi = min(lo + 1, len(xs) - 1)
    return xs[lo] + (xs[hi] - xs[lo]) * (pos - lo)


def median_ci(samples: list[float]) -> tuple[float, float, float]:
    """(low, median, high): a distribution-free 95% confidence interval of the median.

    Order statistics at ranks floor(n/2 - 0.98 sqrt(n)) and ceil(n/2 + 1 + 0.98 sqrt(n))
    (1-based; Le Boudec, *Performance Evaluation of Computer and Communication Systems*,
    Thm 2.1), clamped to the sample; no assumption on the distribution, which for kernel
    times is skewed with a long right tail.
    """
    xs = sorted(samples)
    n = len(xs)
    if n == 0:
        raise ValueError("no samples")
    half = _Z95 * math.sqrt(n) / 2
    j = max(1, math.floor(n / 2 - half))
    k = min(n, math.ceil(n / 2 + 1 + half))
    return xs[j - 1], _quantile(xs, 0.5), xs[k - 1]


def stop_rule(samples: list[float], noise_target: float, min_samples: int) -> tuple[bool, float | None]:
    """(met, noise): noise is the 95% CI half-width of the median over the median.

    ``met`` when noise <= ``noise_target`` and there are at least ``min_samples`` samples.
    ``noise`` is None with fewer than 3 samples, or when the median is not positive (a relative
    width is then undefined); ``met`` is False then. Samples must be finite.
    """
    if any(not math.isfinite(x) for x in samples):
        raise ValueError("stop_rule: samples must be finite")
    if len(samples) < 3:
        return False, None
    lo, med, hi = median_ci(samples)
    if med <= 0:
        return False, None
    noise = (hi - lo) / 2 / med
    return (noise <= noise_target and len(samples) >= min_samples), noise


def _check_args(noise_target: float, min_samples: int, max_samples: int, time_limit_s: float,
                warmup_s: float, target_sample_s: float) -> None:
    if not (math.isfinite(noise_target) and noise_target >= 0):
        raise ValueError(f"noise_target must be finite and >= 0, got {noise_target!r}")
    if min_samples < 1 or max_samples < min_samples:
        raise ValueError(f"need 1 <= min_samples <= max_samples, got {min_samples}, {max_samples}")
    if not (math.isfinite(time_limit_s) and time_limit_s > 0):
        raise ValueError(f"time_limit_s must be finite and > 0, got {time_limit_s!r}")
    if not (math.isfinite(warmup_s) and warmup_s >= 0):
        raise ValueError(f"warmup_s must be finite and >= 0, got {warmup_s!r}")
    if not (math.isfinite(target_sample_s) and target_sample_s > 0):
        raise ValueError(f"target_sample_s must be finite and > 0, got {target_sample_s!r}")


# --- host timer ---------------------------------------------------------------------------------

def time_host(fn: Callable[[], Any], *, noise_target: float = 0.01, min_samples: int = 5,
              max_samples: int = 1000, time_limit_s: float = 2.0, warmup_s: float = 0.05,
              target_sample_s: float = 1e-3) -> Timing:
    """Wall time per call of a CPU callable (NumPy, PyTorch CPU), labelled timer "host".

    ``time.perf_counter_ns`` around ``reps`` calls per sample; the same stop rule as the GPU
    timer. ``time_limit_s`` bounds the sampling (warm-up excluded). The garbage collector is
    paused while sampling, as ``timeit`` does, so a collection does not land in one sample.
    """
    if not callable(fn):
        raise TypeError("fn must be a zero-argument callable")
    _check_args(noise_target, min_samples, max_samples, time_limit_s, warmup_s, target_sample_s)
    clock = time.perf_counter_ns
    t0 = time.perf_counter()
    fn()  # the first call may import, allocate or compile: not in the estimate
    calls, later_ns = 1, 0
    while calls < 2 or time.perf_counter() - t0 < warmup_s:
        a = clock()
        fn()
        later_ns += clock() - a
        calls += 1
    warm = time.perf_counter() - t0
    per_call_s = later_ns / (calls - 1) / 1e9
    reps = 1 if per_call_s <= 0 else max(1, min(10**6, round(target_sample_s / per_call_s)))
    gc_was_on = gc.isenabled()
    gc.disable()
    try:
        samples, met, noise = _sample_loops(fn, reps, noise_target, min_samples, max_samples, time_limit_s)
    finally:
        if gc_was_on:
            gc.enable()
    return Timing(timer="host", cache="warm", samples_us=samples, reps_per_sample=reps, warmup_s=warm,
                  noise=noise, noise_target=noise_target, noise_target_met=met, time_limit_s=time_limit_s,
                  batches=len(samples))


def _sample_loops(fn: Callable[[], Any], reps: int, noise_target: float, min_samples: int, max_samples: int,
                  time_limit_s: float, before: Callable[[], Any] | None = None
                  ) -> tuple[list[float], bool, float | None]:
    """The host timers' sampling: ``perf_counter_ns`` around ``reps`` calls per sample (us per call), until
    the stop rule is met, ``max_samples`` or ``time_limit_s``; ``before`` runs ahead of each loop, unclocked."""
    clock = time.perf_counter_ns
    samples: list[float] = []
    met, noise = False, None
    start = time.perf_counter()
    while True:
        if before is not None:
            before()
        a = clock()
        for _ in range(reps):
            fn()
        samples.append((clock() - a) / 1e3 / reps)
        met, noise = stop_rule(samples, noise_target, min_samples)
        if met or len(samples) >= max_samples or time.perf_counter() - start >= time_limit_s:
            return samples, met, noise


# --- host cost per call (dispatch cases) ---------------------------------------------------------

# Calls per loop at most: each call enqueues one to a few operations (an output zeroing, a launch),
# and a loop must fit in the driver's launch queue (~1000) so the host never blocks on a full queue.
_LOOP_MAX_CALLS = 200


def time_host_loop(fn: Callable[[], Any], *, sync: Callable[[], Any] | None = None, noise_target: float = 0.01,
                   min_samples: int = 10, max_samples: int = 2000, time_limit_s: float = 2.0,
                   warmup_s: float = 0.05, target_sample_s: float = 1e-3,
                   max_calls_per_loop: int = _LOOP_MAX_CALLS) -> Timing:
    """Host time per call of ``fn`` called in a tight loop (timer ``host_loop``): what a training loop
    pays to issue a small call, validation, allocation and launch included.

    Each sample is ``perf_counter_ns`` around ``calls`` back-to-back calls (``reps_per_sample``; about
    ``target_sample_s``, at most ``max_calls_per_loop``), divided by ``calls``. ``sync`` (the device's
    synchronize) runs before every loop, outside the clock, so the launch queue starts empty and never
    fills: a full queue would block the host and time the GPU instead. The garbage collector stays on
    (unlike :func:`time_host`): the collections a call's allocations trigger are part of what it costs;
    one collection runs before sampling so an old debt does not land in the samples. The stop rule is
    the other timers' (:func:`stop_rule`); ``time_limit_s`` bounds the sampling.
    """
    if not callable(fn):
        raise TypeError("fn must be a zero-argument callable")
    _check_args(noise_target, min_samples, max_samples, time_limit_s, warmup_s, target_sample_s)
    if max_calls_per_loop < 1:
        raise ValueError(f"max_calls_per_loop must be >= 1, got {max_calls_per_loop}")
    drain = sync if sync is not None else (lambda: None)
    clock = time.perf_counter_ns
    t0 = time.perf_counter()
    fn()  # the first call may import, compile or allocate a cache: not in the estimate
    drain()
    calls, ns, chunk = 0, 0, 1
    while calls < 2 or time.perf_counter() - t0 < warmup_s:
        a = clock()
        for _ in range(chunk):
            fn()
        ns += clock() - a
        calls += chunk
        drain()
        chunk = min(2 * chunk, max_calls_per_loop)
    per_call_s = ns / calls / 1e9
    reps = max(1, min(max_calls_per_loop, round(target_sample_s / per_call_s) if per_call_s > 0 else 1))
    gc.collect()
    warm = time.perf_counter() - t0
    samples, met, noise = _sample_loops(fn, reps, noise_target, min_samples, max_samples, time_limit_s,
                                        before=drain)
    drain()
    return Timing(timer="host_loop", cache="warm", samples_us=samples, reps_per_sample=reps, warmup_s=warm,
                  noise=noise, noise_target=noise_target, noise_target_met=met, time_limit_s=time_limit_s,
                  batches=len(samples))


# Each op's entry point's argument list (kernels/<op>.cu, v1: what the wrappers pass) is the op's
# ``launch_floor_args`` (robocache/bench/ops/<op>.py), for the bare launch: "ptr" a device pointer (uint64),
# "out" the one-element int32 output, "i32"/"i64" integers, "f32" floats. The launch cost grows with the
# argument count, so the floor keeps the same count.
def _launch_floor_args() -> dict[str, tuple[str, ...]]:
    from . import ops

    return {op.name: op.launch_floor_args for op in ops.registered() if op.launch_floor_args}


def __getattr__(name: str) -> Any:
    if name == "LAUNCH_FLOOR_ARGS":  # the registered ops' argument lists, op -> kinds
        return _launch_floor_args()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


_C_TYPE = {"ptr": "const void*", "out": "int*", "i32": "int", "i64": "long long", "f32": "float"}


def launch_floor_source(op: str) -> str:
    """CUDA source of the bare kernel for ``op``: the op's argument list; thread 0 of block 0 writes the sum
    of the integer arguments to the output (so a launch can be checked), nothing else."""
    kinds = _launch_floor_args()[op]
    params = ", ".join(f"{_C_TYPE[k]} a{i}" for i, k in enumerate(kinds))
    out = next(f"a{i}" for i, k in enumerate(kinds) if k == "out")
    total = " + ".join(f"(int)a{i}" for i, k in enumerate(kinds) if k in ("i32", "i64")) or "0"
    return (f'extern "C" __global__ void rc_launch_floor_{op}({params}) {{\n'
            f"    if (blockIdx.x == 0 && threadIdx.x == 0) {{ *{out} = {total}; }}\n}}\n")


class BareLaunch:
    """The launch floor of one op: a bare CuPy RawKernel launch with precomputed arguments and a
    preallocated output, no validation and no allocation per call (what :meth:`launch` does is all a
    call costs). ``pointers``, ``ints`` and ``floats`` fill the op's ``launch_floor_args`` in order
    (the output pointer is this object's own); ``keep`` holds arrays they point into. The kernel is compiled once (CuPy's RawKernel cache) on the
    current CuPy device, launched as one block of 32 threads on CuPy's current stream.
    """

    def __init__(self, op: str, pointers: list[int], ints: list[int], floats: list[float] = (),
                 keep: list[Any] = ()) -> None:
        import numpy as np

        floor_args = _launch_floor_args()
        if op not in floor_args:
            raise ValueError(f"no bare launch for op {op!r}; expected one of {', '.join(floor_args)}")
        kinds = floor_args[op]
        want = {k: sum(1 for x in kinds if x in ks) for k, ks in (("ptr", ("ptr",)), ("int", ("i32", "i64")),
                                                                   ("f32", ("f32",)))}
        if (len(pointers), len(ints), len(floats)) != (want["ptr"], want["int"], want["f32"]):
            raise ValueError(f"{op}: the bare launch takes {want['ptr']} pointers, {want['int']} integers and "
                             f"{want['f32']} floats, got {len(pointers)}, {len(ints)}, {len(floats)}")
        import cupy  # after the checks above, which need no GPU

        self.op = op
        self.keep = tuple(keep)  # device arrays the pointers point into (e.g. a stream table): kept alive
        self.out = cupy.zeros(1, dtype=cupy.int32)
        self.expected = int(np.int32(sum(int(np.int32(x)) for x in ints)))
        ps, is_, fs = iter(pointers), iter(ints), iter(floats)
        conv = {"ptr": lambda: np.uint64(next(ps)), "out": lambda: np.uint64(self.out.data.ptr),
                "i32": lambda: np.int32(next(is_)), "i64": lambda: np.int64(next(is_)),
                "f32": lambda: np.float32(next(fs))}
        self.args = tuple(conv[k]() for k in kinds)
        self.kernel = cupy.RawKernel(launch_floor_source(op), f"rc_launch_floor_{op}")
        kernel, args = self.kernel, self.args

        def launch() -> None:
            kernel((1,), (32,), args)
        self.launch = launch  # a closure over locals: no attribute lookups in the timed call

    def check(self) -> dict[str, Any]:
        """Launch once, synchronize, and check the output (schema ``Check``; exact, tolerance 0)."""
        import cupy

        self.out.fill(-1)
        self.launch()
        got = int(cupy.asnumpy(self.out)[0])
        diff = abs(got - self.expected)
        return {"passed": diff == 0, "max_abs_err": float(diff), "max_rel_err": None, "tolerance": 0.0,
                "bad_fraction": float(diff != 0)}


# --- GPU timer ----------------------------------------------------------------------------------

def _torch_cuda():
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
             time_limit_s: float = 2.0, warmup_s: float = 0.05, target_sample_s: float = 1e-3,
             l2_bytes: int | None = None) -> Timing:
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
    _check_args(noise_target, min_samples, max_samples, time_limit_s, warmup_s, target_sample_s)
    torch = _torch_cuda()

    t0 = time.perf_counter()
    dev_s, host_s = _gpu_warmup(torch, fn, warmup_s)
    rate = _sleep_cycles_per_s(torch)
    # Launches per call, an upper estimate: a launch costs the host at least ~5 us from Python
    # (torch op dispatch or a CuPy kernel call). One sample's launches must fit in the queue.
    launches = max(1, round(host_s / _HOST_S_PER_LAUNCH))
    reps = 1 if cache == "cold" else max(1, min(_MAX_REPS, (_QUEUE_SLOTS // 2) // launches,
                                                round(target_sample_s / dev_s)))
    cold = int(cache == "cold")

    graph = None
    try:
        pre = None
        if cold:
            if l2_bytes is None:
                l2_bytes = int(torch.cuda.get_device_properties(torch.cuda.current_device()).L2_cache_size)
            flush = torch.empty(max(2 * int(l2_bytes), _FLUSH_MIN_BYTES), dtype=torch.uint8, device="cuda")
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
    torch = _torch_cuda()
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


# --- lockstep timer (work with collectives inside) ----------------------------------------------

def lockstep_plan(per_call_s: float, *, time_limit_s: float = 0.5, target_sample_s: float = 1e-3,
                  min_samples: int = 10, max_samples: int = 200, max_reps: int = _MAX_REPS) -> tuple[int, int]:
    """(reps per sample, samples) for :func:`time_lockstep`: samples of about ``target_sample_s``, as many as
    fit in ``time_limit_s`` (within ``[min_samples, max_samples]``).

    Every rank of a group must compute the same plan, so pass the same ``per_call_s`` on every rank (the
    largest of the ranks' estimates, all-gathered).
    """
    if not (math.isfinite(per_call_s) and per_call_s >= 0):
        raise ValueError(f"per_call_s must be finite and >= 0, got {per_call_s!r}")
    if min_samples < 1 or max_samples < min_samples:
        raise ValueError(f"need 1 <= min_samples <= max_samples, got {min_samples}, {max_samples}")
    per_call_s = max(per_call_s, 1e-7)
    reps = max(1, min(max_reps, round(target_sample_s / per_call_s)))
    samples = int(time_limit_s / (reps * per_call_s))
    return reps, max(min_samples, min(max_samples, samples))


def time_lockstep(fn: Callable[[], Any], *, reps: int, samples: int, device: str, warmup_calls: int = 2,
                  noise_target: float = 0.005, min_samples: int = 10, time_limit_s: float = 0.5) -> Timing:
    """Per-call time of ``fn`` over exactly ``warmup_calls + reps * samples`` calls.

    For work that contains collectives (an op followed by its ``all_gather``, or the collective alone): every
    rank of the group must make the same number of calls, or the ranks that call more often wait forever for
    the others. :func:`time_gpu` and :func:`time_host` stop on noise and on wall time, which differ between
    ranks, so they cannot time such work; this timer takes a count fixed in advance (:func:`lockstep_plan`).

    ``device="gpu"``: CUDA events around the ``reps`` calls of each sample, synchronized after each sample so
    the ranks stay in step (no pre-blocked stream: a collective waits for its peers anyway, and a blocked
    stream on one rank would be a slow peer for the others); timer ``cuda_event``. ``device="cpu"``:
    ``perf_counter_ns`` around the calls; timer ``host``. The noise figure uses the same stop rule as the
    other timers but stops nothing (``noise_target_met`` says whether it would have been met).
    ``time_limit_s`` is the budget the plan was sized for (recorded, not enforced).

    Without a blocked stream the events time the host's launch rate when the host is the slower side: on a GPU
    the host time to enqueue each sample's calls is kept too (``Timing.launch_us``, median per call); a value
    close to the per-call time says the work was host-bound (see :data:`HOST_BOUND_FRACTION`).
    """
    if not callable(fn):
        raise TypeError("fn must be a zero-argument callable")
    if reps < 1 or samples < 1 or warmup_calls < 0:
        raise ValueError(f"need reps >= 1, samples >= 1, warmup_calls >= 0; got {reps}, {samples}, {warmup_calls}")
    if device not in ("gpu", "cpu"):
        raise ValueError(f"device must be 'gpu' or 'cpu', got {device!r}")
    t0 = time.perf_counter()
    out: list[float] = []
    launch = None
    if device == "gpu":
        torch = _torch_cuda()
        for _ in range(warmup_calls):
            fn()
        torch.cuda.synchronize()
        warm = time.perf_counter() - t0
        e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        host: list[float] = []
        for _ in range(samples):
            h0 = time.perf_counter()
            e0.record()
            for _ in range(reps):
                fn()
            e1.record()
            host.append((time.perf_counter() - h0) * 1e6 / reps)
            e1.synchronize()
            out.append(e0.elapsed_time(e1) * 1e3 / reps)
        timer_name = "cuda_event"
        launch = _quantile(sorted(host), 0.5)
    else:
        for _ in range(warmup_calls):
            fn()
        warm = time.perf_counter() - t0
        clock = time.perf_counter_ns
        gc_was_on = gc.isenabled()
        gc.disable()
        try:
            for _ in range(samples):
                a = clock()
                for _ in range(reps):
                    fn()
                out.append((clock() - a) / 1e3 / reps)
        finally:
            if gc_was_on:
                gc.enable()
        timer_name = "host"
    met, noise = stop_rule(out, noise_target, min(min_samples, samples))
    return Timing(timer=timer_name, cache="warm", samples_us=out, reps_per_sample=reps, warmup_s=warm,
                  noise=noise, noise_target=noise_target, noise_target_met=met, time_limit_s=time_limit_s,
                  batches=samples, launch_us=launch)
