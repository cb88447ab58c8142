"""Multi-GPU arithmetic: a group's step time, aggregate throughput, scaling efficiency, collective bandwidth.

Pure functions over numbers (no torch, no I/O), so every formula is unit-tested on its own.

* **Step time**: every rank runs its shard and the group's step is done when the last rank is, so the
  group's step time is the *largest* of the per-rank medians (not their mean: one slow GPU slows the step).
* **Aggregate throughput**: the group's items (all shards) over that step time.
* **Efficiency** against the one-rank case of the same run (1.0 = perfect scaling):
  weak scaling (fixed batch per rank) ``(aggregate(k) / k) / aggregate(1)``, which is ``t(1) / t(k)``;
  strong scaling (fixed total batch) ``t(1) / (k * t(k))``. Both equal ``aggregate(k) / (k * aggregate(1))``.
* **Bandwidth** as nccl-tests reports it: the algorithm bandwidth ``algbw = bytes / time`` with ``bytes``
  the size of the gathered result (world size x each rank's part), and for ``all_gather`` the bus
  bandwidth ``busbw = algbw * (k - 1) / k``, the rate each link carries, comparable across world sizes
  and with the hardware's peak.
"""
from __future__ import annotations

import math
from collections.abc import Sequence


def _positive(name: str, x: float) -> None:
    if not (isinstance(x, (int, float)) and math.isfinite(x) and x > 0):
        raise ValueError(f"{name} must be a positive finite number, got {x!r}")


def step_time_us(per_rank_us: Sequence[float]) -> float:
    """The group's step time: the slowest rank's median (microseconds)."""
    if not per_rank_us:
        raise ValueError("no per-rank times")
    for t in per_rank_us:
        _positive("a per-rank time", t)
    return float(max(per_rank_us))


def slowest_rank(per_rank_us: Sequence[float]) -> int:
    """Index of the rank whose median sets the step time (the first one on a tie)."""
    step = step_time_us(per_rank_us)
    return next(i for i, t in enumerate(per_rank_us) if t == step)


def aggregate_items_per_s(total_items: int, per_rank_us: Sequence[float]) -> float:
    """Items of the whole group per second: ``total_items / step time``."""
    if total_items < 0:
        raise ValueError(f"total_items must be >= 0, got {total_items}")
    return total_items / (step_time_us(per_rank_us) * 1e-6)


def weak_efficiency(aggregate_k: float, k: int, aggregate_1: float) -> float:
    """Weak scaling (fixed batch per rank): ``(aggregate(k) / k) / aggregate(1)``."""
    _positive("aggregate(1)", aggregate_1)
    if k < 1:
        raise ValueError(f"k must be >= 1, got {k}")
    return (aggregate_k / k) / aggregate_1


def strong_efficiency(t1_us: float, k: int, tk_us: float) -> float:
    """Strong scaling (fixed total batch): ``t(1) / (k * t(k))`` with step times."""
    _positive("t(1)", t1_us)
    _positive("t(k)", tk_us)
    if k < 1:
        raise ValueError(f"k must be >= 1, got {k}")
    return t1_us / (k * tk_us)


def efficiency(scaling: str, k: int, *, step_us: float, items: int, baseline_step_us: float | None,
               baseline_items: int | None) -> float | None:
    """Scaling efficiency of a k-rank case against its one-rank case; None without that baseline.

    ``items`` and ``baseline_items`` are the items of the whole group per step (k-rank case and one-rank
    case). Weak scaling needs ``items == k * baseline_items``, strong scaling ``items == baseline_items``;
    a mismatch means the baseline is not this case's one-rank case, and raises.
    """
    if baseline_step_us is None or baseline_items is None:
        return None
    if scaling == "weak":
        if items != k * baseline_items:
            raise ValueError(f"weak scaling: {items} items on {k} ranks is not {k} x {baseline_items}")
        return weak_efficiency(items / (step_us * 1e-6), k, baseline_items / (baseline_step_us * 1e-6))
    if scaling == "strong":
        if items != baseline_items:
            raise ValueError(f"strong scaling: {items} items on {k} ranks, {baseline_items} on one")
        return strong_efficiency(baseline_step_us, k, step_us)
    raise ValueError(f"scaling must be 'weak' or 'strong', got {scaling!r}")


def algbw_gb_per_s(nbytes: int, time_us: float) -> float:
    """Algorithm bandwidth in GB/s (1e9 bytes): ``nbytes / time``."""
    if nbytes < 0:
        raise ValueError(f"nbytes must be >= 0, got {nbytes}")
    _positive("time_us", time_us)
    return nbytes / (time_us * 1e-6) / 1e9


def allgather_busbw_gb_per_s(algbw: float, k: int) -> float:
    """nccl-tests' bus bandwidth of an all_gather: ``algbw * (k - 1) / k`` (0 for one rank)."""
    if k < 1:
        raise ValueError(f"k must be >= 1, got {k}")
    return algbw * (k - 1) / k
