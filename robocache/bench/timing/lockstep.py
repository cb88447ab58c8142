"""The lockstep timer: work with collectives inside (an op and its gather, the collective alone), timed over
a call count every rank of a group agrees on in advance (:func:`lockstep_plan`), never stopped by noise or
wall time, which differ between ranks."""
from __future__ import annotations

import gc
import math
import time
from collections.abc import Callable
from typing import Any

from .device import MAX_REPS, torch_cuda
from .stats import Timing, quantile, stop_rule

# A lockstep sample whose host enqueue time is at least this fraction of its GPU time was paced by the host.
HOST_BOUND_FRACTION = 0.8
# The plan: samples of about this long, at least/at most this many.
_TARGET_SAMPLE_S = 1e-3
_MIN_SAMPLES, _MAX_SAMPLES = 10, 200


def lockstep_plan(per_call_s: float, *, time_limit_s: float = 0.5) -> tuple[int, int]:
    """(reps per sample, samples) for :func:`time_lockstep`: samples of about 1 ms (at most ``MAX_REPS`` calls),
    as many as fit in ``time_limit_s`` (10 to 200).

    Every rank of a group must compute the same plan, so pass the same ``per_call_s`` on every rank (the
    largest of the ranks' estimates, all-gathered).
    """
    if not (math.isfinite(per_call_s) and per_call_s >= 0):
        raise ValueError(f"per_call_s must be finite and >= 0, got {per_call_s!r}")
    per_call_s = max(per_call_s, 1e-7)
    reps = max(1, min(MAX_REPS, round(_TARGET_SAMPLE_S / per_call_s)))
    samples = int(time_limit_s / (reps * per_call_s))
    return reps, max(_MIN_SAMPLES, min(_MAX_SAMPLES, samples))


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
        torch = torch_cuda()
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
        launch = quantile(sorted(host), 0.5)
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

