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

The package, one module per kind of timer, and what each holds:

* :mod:`.stats`: :class:`Timing` (what every timer returns), quantiles, :func:`median_ci`, :func:`stop_rule`;
* :mod:`.device`: :func:`time_gpu` (``cuda_event``, ``cuda_graph``), :func:`copy_ceiling`, :class:`GraphUnavailable`;
* :mod:`.host`: :func:`time_host` (``host``) and :func:`time_host_loop` (``host_loop``);
* :mod:`.lockstep`: :func:`lockstep_plan` and :func:`time_lockstep` (multi-GPU work with collectives inside);
* :mod:`.launch_floor`: :class:`BareLaunch` and :func:`launch_floor_source` (the dispatch cases' floor), and
  :func:`time_interleaved` / :func:`interleaved_call_cost` (the public call and the floor timed interleaved).

Import the timers from here (``from robocache.bench import timing``; ``timing.time_gpu(...)``).
"""
from __future__ import annotations

from typing import Any

from .device import GraphUnavailable, copy_ceiling, time_gpu
from .host import time_host, time_host_loop
from .launch_floor import BareLaunch, interleaved_call_cost, launch_floor_source, time_interleaved
from .lockstep import HOST_BOUND_FRACTION, lockstep_plan, time_lockstep
from .stats import Timing, median_ci, stop_rule

__all__ = ["BareLaunch", "GraphUnavailable", "HOST_BOUND_FRACTION", "LAUNCH_FLOOR_ARGS", "Timing", "copy_ceiling",
           "interleaved_call_cost", "launch_floor_source", "lockstep_plan", "median_ci", "stop_rule", "time_gpu",
           "time_host", "time_host_loop", "time_interleaved", "time_lockstep"]


def __getattr__(name: str) -> Any:
    if name == "LAUNCH_FLOOR_ARGS":  # the registered ops' argument lists, op -> kinds (read when asked)
        from . import launch_floor

        return launch_floor.LAUNCH_FLOOR_ARGS
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
