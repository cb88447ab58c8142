"""Host timers: the wall time per call of a CPU callable (:func:`time_host`, timer ``host``) and the host's
time per call of a tiny GPU call in a tight loop (:func:`time_host_loop`, timer ``host_loop``: the dispatch
cases' call cost), sharing one sampling loop and the stop rule of :mod:`.stats`."""
from __future__ import annotations

import gc
import time
from collections.abc import Callable
from typing import Any

from .stats import Timing, check_args, stop_rule

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
    check_args(noise_target, min_samples, max_samples, time_limit_s, warmup_s, target_sample_s)
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
    check_args(noise_target, min_samples, max_samples, time_limit_s, warmup_s, target_sample_s)
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

