"""One rank of a multi-GPU launch: ``torchrun ... -m robocache.bench.multigpu.rank --task TASK.json``.

:mod:`robocache.bench.multigpu.launch` writes the task (a :class:`~robocache.bench.context.LaunchTask`: the cases of
one world size, their options, the collective timeout, and the run's context, which says where records go)
and starts ``torchrun``; every rank runs this module. Per case, all ranks go
through the same sequence of collectives, whatever happens locally, so a local failure becomes a status
instead of a hang:

1. **gate**: each rank builds its own shard (:meth:`specs.Case.shard`: the per-rank batch, its own seeded
   inputs), calls the provider once and checks its output against the NumPy reference of that shard
   (:func:`worker.gate`); the ranks exchange their outcomes, and any failure (skipped, incorrect, error)
   ends the case on every rank with that status, untimed;
2. **op**: after a barrier each rank times its own op with the project's timer (CUDA events on a GPU,
   the host timer on the CPU), independently: no collective inside, so the noise-based stop may differ
   between ranks;
3. **gather** (gather modes ``all`` and ``one``): op + gather end to end, the gather alone, and an
   ``all_gather`` of a plain uint8 tensor of the same size (the collective's own bandwidth, measured in
   the same run), each with :func:`timing.time_lockstep` (a call count agreed by all ranks: a rank that
   called a collective more often than its peers would wait forever);
4. **record**: the ranks' summaries are gathered; the writer (local rank 0 of node rank 0, which is global
   rank 0 on one machine) builds the record with :mod:`robocache.bench.multigpu.scaling` and writes it through the
   store (validated, atomic) before the next case. Nothing is written for a case that did not finish on
   every rank: a dead rank makes the other ranks' next collective fail (or torchrun's agent stops them),
   and the launcher records the case as ``crash``.

A failure inside a collective (a dead or hung peer: the process group's timeout) is fatal to this process:
it prints the traceback and exits with code 1, without tearing down a process group that may hang.
"""
from __future__ import annotations

import argparse
import os
import sys
import time
import traceback
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import Any, NamedTuple

import msgspec

from .. import messages, specs, worker
from ..context import LaunchTask
from ..messages import CaseDone, Progress, RankFailure, RankPid
from . import scaling
from ..schema import Check, Clocks, Distributed, Health, Method, Metrics, Quantiles, Record


class Rank:
    """This process's place in the group, from torchrun's environment."""

    def __init__(self, lt: LaunchTask):
        self.rank = int(os.environ.get("RANK", "0"))
        self.world = int(os.environ.get("WORLD_SIZE", "1"))
        self.local_rank = int(os.environ.get("LOCAL_RANK", "0"))
        self.local_world = int(os.environ.get("LOCAL_WORLD_SIZE", str(self.world)))
        self.nodes = int(os.environ.get("GROUP_WORLD_SIZE") or max(1, self.world // max(1, self.local_world)))
        self.device = lt.task.device
        self.backend = "nccl" if self.device == "gpu" else "gloo"
        # The writer is on the launcher's node that was given --node-rank 0 (torchrun's c10d rendezvous
        # numbers nodes in its own order, so global rank 0 may live on another node).
        self.writer = lt.node_rank == 0 and self.local_rank == 0
        self.group_pids: set[int] = set()  # every rank's pid (NVML's view of "other processes" leaves them out)


def _dist():
    import torch.distributed as dist

    return dist


# A peer that is still starting (importing torch, creating its CUDA context) is not a hung peer: the rendezvous
# and the agreement collectives below wait up to this long (or the collective timeout, if longer); the cases'
# collectives then get the collective timeout. On a loaded 2-core machine a rank's start alone took over 5 s.
STARTUP_TIMEOUT_S = 300.0


def _timeout_setter() -> Callable[[timedelta], None] | None:
    """What sets the default group's timeout after ``init_process_group`` (torch's ``_set_pg_timeout``, in
    torch since 2.3); None on a torch without it."""
    from torch.distributed import distributed_c10d as c10d

    setter = getattr(c10d, "_set_pg_timeout", None)
    return setter if callable(setter) else None


def _init(lt: LaunchTask, me: Rank) -> None:
    import torch

    dist = _dist()
    collective = timedelta(seconds=lt.collective_timeout_s)
    # without a way to change the group's timeout afterwards, the collective timeout holds from the start
    setter = _timeout_setter()
    timeout = max(collective, timedelta(seconds=STARTUP_TIMEOUT_S)) if setter else collective
    kw: dict[str, Any] = {}
    if me.device == "gpu":
        torch.cuda.set_device(me.local_rank)
        try:
            import cupy

            cupy.cuda.Device(me.local_rank).use()  # robocache's kernels launch through CuPy
        except Exception:  # noqa: BLE001 - CuPy is optional for the torch providers
            pass
        kw["device_id"] = torch.device("cuda", me.local_rank)  # binds the communicator eagerly
    try:
        dist.init_process_group(me.backend, timeout=timeout, **kw)
    except TypeError:  # a torch without device_id
        dist.init_process_group(me.backend, timeout=timeout)
    if dist.get_world_size() != lt.world_size:
        raise RuntimeError(f"torchrun started {dist.get_world_size()} ranks; the task's cases need {lt.world_size}")
    # everything that decides which collectives a rank calls must agree, or the ranks would pair different ones
    mine = {"cases": lt.cases, "check_only": lt.task.check_only, "timing": msgspec.to_builtins(lt.task.timing),
            "device": lt.task.device}
    everyone = _all(mine)
    me.group_pids = {int(p) for p in _all(os.getpid())}
    differ = sorted({key for other in everyone for key in mine if other[key] != mine[key]})
    if differ:
        raise RuntimeError(f"the nodes were given different {', '.join(differ)}: start every node's launcher with "
                           "the same arguments")
    if setter and timeout != collective:
        setter(collective)  # every rank has started: a peer that makes us wait longer is dead or hung


def _all(obj: Any) -> list[Any]:
    """Every rank's ``obj``, in rank order (a collective: every rank must call it)."""
    dist = _dist()
    out: list[Any] = [None] * dist.get_world_size()
    dist.all_gather_object(out, obj)
    return out


def _barrier(me: Rank) -> None:
    dist = _dist()
    if me.backend == "nccl":
        dist.barrier(device_ids=[me.local_rank])
    else:
        dist.barrier()


def _sync(me: Rank) -> None:
    if me.device == "gpu":
        import torch

        torch.cuda.synchronize()


def _as_bytes(x: Any):
    """The op's output as a flat uint8 tensor (no copy when it is contiguous): gathers move bytes, whatever
    the dtype (bfloat16, int32 counts, bool occupancy)."""
    import numpy as np
    import torch

    if isinstance(x, np.ndarray):
        t = torch.from_numpy(np.ascontiguousarray(x))
    elif isinstance(x, torch.Tensor):
        t = x
    else:  # CuPy and other DLPack producers
        t = torch.from_dlpack(x)
    return t.contiguous().reshape(-1).view(torch.uint8)


CHECKSUM_CHUNK = 1 << 24  # bytes a checksum widens to int64 at a time


def _checksum(t, chunk: int = CHECKSUM_CHUNK) -> tuple[int, int, int]:
    """(size, sum, position-weighted sum) of a flat uint8 tensor: tells whether a peer's bytes arrived intact
    and in place without moving them (in chunks of ``chunk`` bytes: bounded temporary memory)."""
    import torch

    n, s1, s2 = t.numel(), 0, 0
    for start in range(0, n, chunk):
        c = t[start:start + chunk].to(torch.int64)
        w = torch.arange(start, start + c.numel(), device=c.device, dtype=torch.int64) % 65521 + 1
        s1 += int(c.sum())
        s2 += int((c * w).sum())
    return n, s1, s2


def _gatherer(mode: str, me: Rank, like):
    """A function ``g(bytes_tensor)`` performing this case's gather into preallocated buffers, and the
    receive buffers (for the correctness check of the gather)."""
    import torch

    dist = _dist()
    n, k = like.numel(), me.world
    if mode == "all":
        recv = torch.empty(k * n, dtype=torch.uint8, device=like.device)
        into = getattr(dist, "all_gather_single", None) or dist.all_gather_into_tensor

        def g(t):
            into(recv, t)
        return g, recv
    if mode == "one":
        parts = [torch.empty(n, dtype=torch.uint8, device=like.device) for _ in range(k)] if me.rank == 0 else None

        def g(t):
            dist.gather(t, parts, dst=0)
        return g, parts
    raise ValueError(f"no gather for mode {mode!r}")


def _plan(me: Rank, fn, limit_s: float) -> tuple[int, int]:
    """Probe ``fn`` (3 calls, also its warm-up) and agree on one (reps, samples) on every rank."""
    from .. import timing

    _barrier(me)
    fn()
    _sync(me)
    t0 = time.perf_counter()
    for _ in range(2):
        fn()
    _sync(me)
    mine = ((time.perf_counter() - t0) / 2, limit_s)
    everyone = _all(mine)
    per_call = max(p for p, _ in everyone)
    return timing.lockstep_plan(per_call, time_limit_s=everyone[0][1])  # rank 0's budget: one plan for all


def _lockstep(me: Rank, fn, limit_s: float, noise_target: float):
    from .. import timing

    reps, samples = _plan(me, fn, limit_s)
    _barrier(me)
    return timing.time_lockstep(fn, reps=reps, samples=samples, device=me.device, warmup_calls=1,
                               time_limit_s=limit_s, noise_target=noise_target)


def _timing_summary(t) -> dict[str, Any]:
    return {"median_us": t.median_us, "quantiles": t.quantiles(), "method": t.method(), "samples_us": t.samples_us,
            "uncovered": getattr(t, "uncovered_batches", 0), "batches": t.batches,
            "launch_us": getattr(t, "launch_us", None)}


def _first_failure(views: list[dict[str, Any]]) -> tuple[int, dict[str, Any]] | None:
    for r, v in enumerate(views):
        if v["status"] != "ok":
            return r, v
    return None


def _combined_check(views: list[dict[str, Any]]) -> Check | None:
    checks: list[Check] = [v["check"] for v in views if v.get("check")]
    if not checks:
        return None

    def most(key):
        vals = [getattr(c, key) for c in checks if getattr(c, key) is not None]
        return max(vals) if vals else None
    return Check(passed=all(c.passed for c in checks) and len(checks) == len(views), max_abs_err=most("max_abs_err"),
                 max_rel_err=most("max_rel_err"), tolerance=checks[0].tolerance, bad_fraction=most("bad_fraction"))


def run_case(case: specs.Case, lt: LaunchTask, me: Rank) -> tuple[Record | None, list[float]]:
    """One case on this rank; returns (the record, the step samples) on the writer, (None, []) elsewhere.

    Every rank calls the same collectives in the same order, whatever happens locally: 1. prepare and gate (the
    outcome exchanged), 2. the op timed alone, 3. with a gather, its buffers set up (the outcome exchanged), then
    op + gather, the gather alone and the plain collective timed in lockstep; the summaries exchanged, the writer
    fills the record (:func:`build_record`)."""
    t_start = time.perf_counter()
    task = lt.task
    shard = case.shard(me.rank)
    local, prep, out = _prepare_and_gate(shard, me.device, task.seed)
    views = _all(local)
    rec = worker.base_record(task, case) if me.writer else None
    check = _combined_check(views)
    bad = _first_failure(views)
    if bad is not None or task.check_only:
        if rec is not None:
            _gate_only_record(rec, check, views, bad, t_start)
        return rec, []
    everyone = _all(_timed_summary(case, shard, prep, out, lt, me))
    if not me.writer:
        return None, []
    rec.check = check
    bad = _first_failure(everyone)
    samples: list[float] = []
    if bad is not None:
        r, v = bad
        rec.status, rec.reason = v["status"], f"rank {r}: {v.get('reason')}"
    else:
        try:
            samples = build_record(rec, case, lt, me, everyone)
        except Exception as e:  # noqa: BLE001 - e.g. a zero time from a coarse clock: a status, not a crash
            rec.status, rec.reason, rec.metrics, rec.method, rec.distributed = "error", _tb(e), None, None, None
    rec.duration_s = time.perf_counter() - t_start
    return rec, samples


def _prepare_and_gate(shard: specs.Case, device: str, seed: int) -> tuple[dict[str, Any], Any, Any]:
    """Step 1, locally: this rank's inputs and the correctness gate; ``(outcome, prepared, output)``, the outcome
    (status, reason, check, moved bytes) whatever happened, for every rank to see."""
    local: dict[str, Any] = {"status": "ok"}
    prep = out = None
    try:
        prep, skip = worker.prepare(shard, device, seed)
        if prep is None:
            local.update(status="skipped", reason=skip)
        else:
            local["moved_bytes"] = prep.moved_bytes  # this shard's minimum traffic (specs.moved_bytes)
            out, chk, failed = worker.gate(shard, prep)
            local["check"] = chk
            if failed:
                local.update(status="incorrect", reason=failed)
    except Exception as e:  # noqa: BLE001 - a provider failure is a status, the group goes on
        local.update(status=worker.classify(e), reason=_tb(e))
    return local, prep, out


def _gate_only_record(rec: Record, check: Check | None, views: list[dict[str, Any]],
                      bad: tuple[int, dict[str, Any]] | None, t_start: float) -> None:
    """The record of a case that ends at the gate: a rank failed it, or the run only checks correctness."""
    rec.check = check
    _set_moved_bytes(rec, views)
    if bad is not None:
        r, v = bad
        rec.status, rec.reason = v["status"], f"rank {r}: {v.get('reason')}"
    else:
        rec.status, rec.reason = "ok", "correctness check only: not timed"
    rec.duration_s = time.perf_counter() - t_start


def _timed_summary(case: specs.Case, shard: specs.Case, prep: Any, out: Any, lt: LaunchTask, me: Rank
                   ) -> dict[str, Any]:
    """Steps 2 and 3 on this rank, under the clock sampler: its summary (status, op timing, step, gather and
    collective times, what the gather delivered, clocks, health) for :func:`build_record`."""
    from .. import env as envmod

    # the group's other ranks are not contention (NVML may list a peer that maps this GPU's memory)
    sampler = envmod.ClockSampler(me.local_rank, ignore_pids=me.group_pids) if me.device == "gpu" else None
    if sampler is not None:
        sampler.start()
    try:
        _barrier(me)
        summary, call, n_sets = _time_op(shard, prep, lt, me)
        bad = _first_failure(_all({"status": summary["status"], "reason": summary.get("reason")}))
        gather = case.params["gather"]
        if bad is None and gather != "none":
            setup = _gather_setup(gather, me, out)
            if isinstance(setup, dict):  # a local failure, e.g. out of memory
                summary = setup
            bad = _first_failure(_all({"status": summary["status"], "reason": summary.get("reason")}))
            if bad is None:
                summary.update(_time_gather(gather, setup, call, lt, me))
    finally:
        if sampler is not None:
            sampler.stop()
    if sampler is not None:
        summary["clocks"] = sampler.stats()
    if "op" in summary:
        summary["health"] = envmod.assess_health(summary.get("clocks"), summary["op"]["method"]["noise_target_met"])
    return summary


def _time_op(shard: specs.Case, prep: Any, lt: LaunchTask, me: Rank) -> tuple[dict[str, Any], Any, int]:
    """Step 2: the op alone on this rank (no collective inside: the adaptive timer is safe); ``(summary, the
    timed call, its input sets)``."""
    from .. import timing

    task = lt.task
    opts = task.timing.kwargs()
    summary: dict[str, Any] = {"status": "ok", "items": shard.items}
    call, n_sets = None, 1
    try:
        moved: list[int] = []
        call, n_sets = worker.rotating_call(shard, prep, device=me.device, cache=task.cache, seed=task.seed,
                                            moved=moved)
        if moved:  # bytes per call of this shard: the mean over the input sets the timer walks
            summary["moved_bytes"] = round(sum(moved) / len(moved))
        if me.device == "gpu":
            t_op = timing.time_gpu(call, method="cuda_event", cache=task.cache, **opts)
        else:
            t_op = timing.time_host(call, **opts)
        summary.update(op=_timing_summary(t_op), input_sets=n_sets)
    except Exception as e:  # noqa: BLE001
        summary = {"status": worker.classify(e), "reason": _tb(e)}
    return summary, call, n_sets


class _GatherSetup(NamedTuple):
    gather: Callable[[Any], Any]  # the case's gather of a byte view
    recv: Any  # where it delivers
    all_gather: Callable[[Any], Any]  # the plain collective on a tensor of the same size
    plain: Any
    out_bytes: Any  # this rank's output as bytes
    n: int
    sums: tuple[int, int, int]  # its checksum, for the receivers


def _gather_setup(mode: str, me: Rank, out: Any) -> _GatherSetup | dict[str, Any]:
    """Step 3's local setup (buffers: k x the output on every rank for all_gather), or the failed summary: it may
    fail on one rank (out of memory), a status for the whole group exchanged before any collective of the phase."""
    import torch

    try:
        out_bytes = _as_bytes(out)
        g, recv = _gatherer(mode, me, out_bytes)
        n = out_bytes.numel()
        plain = torch.zeros(n, dtype=torch.uint8, device=out_bytes.device)
        ag, _ = _gatherer("all", me, plain)
        return _GatherSetup(g, recv, ag, plain, out_bytes, n, _checksum(out_bytes))
    except Exception as e:  # noqa: BLE001
        return {"status": worker.classify(e), "reason": _tb(e)}


def _time_gather(mode: str, s: _GatherSetup, call: Any, lt: LaunchTask, me: Rank) -> dict[str, Any]:
    """Step 3, in lockstep: what the gather delivered (checked on every receiver), then op + gather, the gather
    alone and the collective on a plain tensor of the same size."""
    s.gather(s.out_bytes)  # the gather delivers every rank's bytes where they belong
    _sync(me)
    peers = _all(s.sums)
    n = s.n
    if mode == "all":
        lost = [r for r in range(me.world) if _checksum(s.recv[r * n:(r + 1) * n]) != tuple(peers[r])]
    else:
        lost = [r for r in range(me.world) if _checksum(s.recv[r]) != tuple(peers[r])] if me.rank == 0 else []

    def step():
        s.gather(_as_bytes(call()))

    def gather_only():
        s.gather(s.out_bytes)

    def collective():
        s.all_gather(s.plain)
    opts = lt.task.timing.kwargs()
    limit = max(0.05, float(opts.get("time_limit_s", 1.0)) / 2)
    noise = float(opts.get("noise_target", 0.005 if me.device == "gpu" else 0.01))
    t_step = _lockstep(me, step, limit, noise)
    t_gather = _lockstep(me, gather_only, limit, noise)
    t_coll = _lockstep(me, collective, limit, noise)
    return dict(step=_timing_summary(t_step), gather_us=t_gather.median_us, coll_us=t_coll.median_us, out_bytes=n,
                delivered=not lost, lost=lost)


def _set_moved_bytes(rec: Record, views: list[dict[str, Any]]) -> None:
    """The record's bytes: the sum over ranks of each shard's :func:`specs.moved_bytes` (as a single-GPU record
    carries its inputs' minimum traffic); left at the params-only bound when a rank has none (it failed early)."""
    per_rank = [v.get("moved_bytes") for v in views]
    if per_rank and all(isinstance(b, int) for b in per_rank):
        rec.case.bytes = sum(per_rank)


def build_record(rec: Record, case: specs.Case, lt: LaunchTask, me: Rank, everyone: list[dict[str, Any]]
                 ) -> list[float]:
    """Fill ``rec`` from every rank's summary (the writer only); returns the slowest rank's step samples.
    Its bytes (and GB/s) are the ranks' moved bytes summed over the group's step."""
    _set_moved_bytes(rec, everyone)
    gather = case.params["gather"]
    fig = _scaling(case, lt, me.world, everyone)
    gathered = _gather_figures(me.world, everyone) if gather != "none" else {}
    lost = _lost_gather(everyone) if gather != "none" else None
    if lost is not None:
        rec.status, rec.reason = "incorrect", lost
        return []
    slow_step = fig.steps[fig.slow]
    rec.method = Method(**slow_step["method"], input_sets=int(everyone[fig.slow].get("input_sets", 1)))
    rec.metrics = Metrics(time_us=Quantiles(**slow_step["quantiles"]), items_per_s=fig.agg,
                          gb_per_s=rec.case.bytes / (fig.step_us * 1e-6) / 1e9, ceiling_gb_per_s=None,
                          pct_of_ceiling=None, graph_time_us=None, event_vs_graph=None)
    clocks = everyone[fig.slow].get("clocks") if me.device == "gpu" else None
    rec.clocks = Clocks(**clocks) if clocks is not None else None
    rec.health = _group_health(everyone, me.device, gather, fig)
    rec.distributed = Distributed(
        world_size=me.world, nodes=me.nodes, backend=me.backend, scaling=case.params["scaling"], gather=gather,
        items_per_rank=fig.items_per_rank, per_rank_us=fig.per_rank_op, per_rank_step_us=fig.per_rank_step,
        step_us=fig.step_us, aggregate_items_per_s=fig.agg, efficiency=fig.eff, baseline_step_us=fig.base_step,
        gather_bytes=gathered.get("gather_bytes"), gather_us=gathered.get("gather_us"),
        gather_gb_per_s=gathered.get("gather_gb_per_s"), collective_us=gathered.get("collective_us"),
        collective_gb_per_s=gathered.get("collective_gb_per_s"),
        collective_busbw_gb_per_s=gathered.get("collective_busbw_gb_per_s"))
    rec.status, rec.reason = "ok", None
    return list(slow_step["samples_us"])


class _Scaling(NamedTuple):
    """The group's figures from the ranks' summaries (:mod:`.scaling` holds the arithmetic)."""

    steps: list[dict[str, Any]]  # each rank's step timing (op + gather; the op alone without a gather)
    per_rank_op: list[float]
    per_rank_step: list[float]
    slow: int  # the slowest rank: its step is the group's
    step_us: float
    items_per_rank: list[int]
    agg: float  # the group's items per second
    eff: float | None  # against the 1-rank case of the run
    base_step: float | None
    base_host_bound: bool  # that 1-rank step was paced by the host's launches


def _scaling(case: specs.Case, lt: LaunchTask, k: int, everyone: list[dict[str, Any]]) -> _Scaling:
    steps = [s["step"] if case.params["gather"] != "none" else s["op"] for s in everyone]
    per_rank_step = [s["median_us"] for s in steps]
    step_us = scaling.step_time_us(per_rank_step)
    items_per_rank = [int(s["items"]) for s in everyone]
    total = sum(items_per_rank)
    if total != case.items:
        raise RuntimeError(f"the ranks' shards hold {total} items, the case {case.items}")
    base_host_bound = False
    if k == 1:
        base_step, base_items = step_us, total
    else:
        base = lt.baselines.get(case.baseline_key or "")
        base_step, base_items = (base.step_us, base.items) if base else (None, None)
        base_host_bound = bool(base and base.host_bound)
    eff = scaling.efficiency(case.params["scaling"], k, step_us=step_us, items=total, baseline_step_us=base_step,
                             baseline_items=base_items)
    return _Scaling(steps=steps, per_rank_op=[s["op"]["median_us"] for s in everyone], per_rank_step=per_rank_step,
                    slow=scaling.slowest_rank(per_rank_step), step_us=step_us, items_per_rank=items_per_rank,
                    agg=scaling.aggregate_items_per_s(total, per_rank_step), eff=eff, base_step=base_step,
                    base_host_bound=base_host_bound)


def _gather_figures(k: int, everyone: list[dict[str, Any]]) -> dict[str, Any]:
    """The gather's bytes, time and bandwidth, and the plain collective's (slowest rank's medians)."""
    gather_bytes = k * int(everyone[0]["out_bytes"])
    gather_us = max(s["gather_us"] for s in everyone)
    coll_us = max(s["coll_us"] for s in everyone)
    coll_gb = scaling.algbw_gb_per_s(gather_bytes, coll_us)
    return {"gather_bytes": gather_bytes, "gather_us": gather_us,
            "gather_gb_per_s": scaling.algbw_gb_per_s(gather_bytes, gather_us), "collective_us": coll_us,
            "collective_gb_per_s": coll_gb, "collective_busbw_gb_per_s": scaling.allgather_busbw_gb_per_s(coll_gb, k)}


def _lost_gather(everyone: list[dict[str, Any]]) -> str | None:
    """Why the case is incorrect when a receiver did not get every rank's bytes intact, else None."""
    seen_by = [r for r, s in enumerate(everyone) if not s["delivered"]]
    if not seen_by:
        return None
    lost = sorted({int(x) for s in everyone for x in s.get("lost") or []})
    return f"the gather did not deliver the bytes of rank(s) {lost} intact (checked on rank(s) {seen_by})"


def _group_health(everyone: list[dict[str, Any]], device: str, gather: str, fig: _Scaling) -> Health:
    """Every rank's health flags and reasons (``rank r: ...``), and the group's own notes."""
    health = Health(throttled=False, contended=False, noisy=False, reasons=[])
    for r, s in enumerate(everyone):
        h = s["health"]
        for flag in ("throttled", "contended", "noisy"):
            setattr(health, flag, getattr(health, flag) or bool(h[flag]))
        reasons = [x for x in h["reasons"] if not (device == "cpu" and x.startswith("clocks unknown"))]
        health.reasons += [f"rank {r}: {x}" for x in reasons]
        if s["op"].get("uncovered"):
            health.noisy = True
            health.reasons.append(f"rank {r}: noisy: {s['op']['uncovered']} of {s['op']['batches']} batches "
                                  "could not be queued behind a blocked stream")
    if gather != "none" and device == "gpu":
        health.reasons += _host_bound_notes(everyone)
    if fig.base_host_bound and fig.eff is not None:
        health.reasons.append(f"efficiency against a host-bound one-GPU step ({fig.base_step:.1f} us, paced by the "
                              "host's launches): overstated against the GPU's own one-GPU time")
    if gather != "none" and not fig.steps[fig.slow]["method"]["noise_target_met"]:
        health.noisy = True
        health.reasons.append(f"rank {fig.slow}: noisy: the step's noise target was not met")
    return health


def _host_bound_notes(everyone: list[dict[str, Any]]) -> list[str]:
    """The ranks whose host took (nearly) the whole step to enqueue op + gather, the step well beyond the GPU's own
    work (a host blocked by a GPU-limited call would also take the whole step, but not beyond the GPU's side). No
    flag: the figure is what a Python loop of op + gather achieves, but not the GPU's limit."""
    from ..timing import HOST_BOUND_FRACTION

    notes = []
    for r, s in enumerate(everyone):
        launch, t = s["step"].get("launch_us"), s["step"]["median_us"]
        gpu_side = s["op"]["median_us"] + s["gather_us"]
        if launch is not None and t > 0 and launch >= HOST_BOUND_FRACTION * t and t > 1.2 * gpu_side:
            notes.append(f"rank {r}: host-bound: enqueueing op + gather took {launch:.1f} of the step's {t:.1f} us "
                         f"per call; the GPU time of the op ({s['op']['median_us']:.1f} us) plus the gather alone "
                         f"({s['gather_us']:.1f} us) is the GPU's side")
    return notes


def _tb(e: BaseException) -> str:
    tb = traceback.format_exc(limit=6).strip().splitlines()
    return f"{type(e).__name__}: {str(e)[:800]}\n" + "\n".join(tb[-6:])


CaseRunner = Callable[[str, LaunchTask, Rank], tuple[Record | None, list[float]]]


def run_spec_case(key: str, lt: LaunchTask, me: Rank) -> tuple[Record | None, list[float]]:
    """A case of the grid (:func:`specs.find`), through :func:`run_case`."""
    return run_case(specs.find(key), lt, me)


def run(lt: LaunchTask, run_one: CaseRunner = run_spec_case) -> int:
    """Every case of the launch on this rank; the writer checkpoints the records file after each case.

    ``run_one(key, lt, me)``: one case on this rank, every rank calling the same collectives; it returns (the
    record, the step samples) on the writer, (None, []) elsewhere. The grid's cases by default; another suite
    (the pipelines' DDP training) passes its own and keeps this loop: the pid, progress and case files the
    launcher watches, the run file, the final barrier."""
    me = Rank(lt)
    work = Path(lt.workdir)
    if work.is_dir():  # the launcher's own node: it watches these files (other nodes have no such folder)
        messages.write_json(work / f"pid-{me.rank}.json", RankPid(pid=os.getpid(), rank=me.rank))
    _init(lt, me)
    # an earlier launch of this world size (before a failed case) may have written some already
    records: list[Record] = lt.run.records(lt.records_name) if me.writer else []
    watched = me.local_rank == 0 and work.is_dir()  # each node's launcher watches its local rank 0's progress
    for i, key in enumerate(lt.cases):
        if watched:
            messages.write_json(work / "progress.json", Progress(index=i, key=key, state="start", time=time.time()))
        rec, samples = run_one(key, lt, me)
        if me.writer:
            if rec is None:
                raise RuntimeError(f"{key}: the writer rank has no record for the case")
            records.append(rec)
            lt.run.write(records, lt.records_name)
            messages.write_json(work / f"case-{i}.json", CaseDone(key=key, record=rec, samples_us=samples))
        if watched:
            messages.write_json(work / "progress.json", Progress(index=i, key=key, state="done", time=time.time()))
    _barrier(me)
    _dist().destroy_process_group()
    return 0


def rank_main(lt: LaunchTask, run_one: CaseRunner = run_spec_case) -> int:
    """A rank's whole life: :func:`run`; on any failure the traceback goes to torchrun's log, a
    :class:`RankFailure` file tells the launcher (which tells the rank that died first from those that failed
    after it) and the process exits with code 1 without tearing down a process group that may hang."""
    try:
        return run(lt, run_one)
    except BaseException as e:  # noqa: BLE001 - a broken group: report and leave without tearing it down
        traceback.print_exc()
        sys.stdout.flush()
        sys.stderr.flush()
        work = Path(lt.workdir)
        if work.is_dir():
            try:
                rank = int(os.environ.get("RANK", "-1"))
                messages.write_json(work / f"fail-{rank}.json",
                                    RankFailure(rank=rank, error=f"{type(e).__name__}: {str(e)[:300]}"))
            except Exception:  # noqa: BLE001
                pass
        os._exit(1)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(allow_abbrev=False, prog="python -m robocache.bench.multigpu.rank",
                                description="One rank of a multi-GPU launch (started by torchrun; see "
                                            "robocache.bench.multigpu.launch).")
    p.add_argument("--task", required=True, help="the task JSON written by the launcher")
    args = p.parse_args(argv)
    with open(args.task, "rb") as f:
        lt = msgspec.json.decode(f.read(), type=LaunchTask)
    return rank_main(lt)

if __name__ == "__main__":
    sys.exit(main())
