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
from typing import Any

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


def _checksum(t) -> tuple[int, int, int]:
    """(size, sum, position-weighted sum) of a flat uint8 tensor: tells whether a peer's bytes arrived intact
    and in place without moving them (in chunks: bounded temporary memory)."""
    import torch

    n, s1, s2, chunk = t.numel(), 0, 0, 1 << 24
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
    """One case on this rank; returns (the record, the step samples) on the writer, (None, []) elsewhere."""
    from .. import env as envmod
    from .. import timing

    t_start = time.perf_counter()
    device = me.device
    task = lt.task
    seed = task.seed
    shard = case.shard(me.rank)
    opts = task.timing.kwargs()
    limit = float(opts.get("time_limit_s", 1.0))
    lock_limit = max(0.05, limit / 2)
    cache = task.cache
    gather = case.params["gather"]

    # 1. prepare + gate, locally; the outcome is exchanged whatever it is
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
    views = _all(local)
    rec = worker.base_record(task, case) if me.writer else None
    check = _combined_check(views)
    bad = _first_failure(views)
    if bad is not None or task.check_only:
        if rec is not None:
            rec.check = check
            _set_moved_bytes(rec, views)
            if bad is not None:
                r, v = bad
                rec.status, rec.reason = v["status"], f"rank {r}: {v.get('reason')}"
            else:
                rec.status, rec.reason = "ok", "correctness check only: not timed"
            rec.duration_s = time.perf_counter() - t_start
        return rec, []

    # 2. the op alone, each rank on its own (no collective inside: the adaptive timer is safe)
    # the group's other ranks are not contention (NVML may list a peer that maps this GPU's memory)
    sampler = envmod.ClockSampler(me.local_rank, ignore_pids=me.group_pids) if device == "gpu" else None
    if sampler is not None:
        sampler.start()
    summary: dict[str, Any] = {"status": "ok", "items": shard.items}
    try:
        _barrier(me)
        try:
            moved: list[int] = []
            call, n_sets = worker.rotating_call(shard, prep, device=device, cache=cache, seed=seed, moved=moved)
            if moved:  # bytes per call of this shard: the mean over the input sets the timer walks
                summary["moved_bytes"] = round(sum(moved) / len(moved))
            if device == "gpu":
                t_op = timing.time_gpu(call, method="cuda_event", cache=cache, **opts)
            else:
                t_op = timing.time_host(call, **opts)
            summary.update(op=_timing_summary(t_op), input_sets=n_sets)
        except Exception as e:  # noqa: BLE001
            summary = {"status": worker.classify(e), "reason": _tb(e)}
        bad = _first_failure(_all({"status": summary["status"], "reason": summary.get("reason")}))
        if bad is None and gather != "none":
            # 3. in lockstep: op + gather, the gather alone, the collective on a plain tensor of the same size
            import torch

            # local setup (buffers: k x the output on every rank for all_gather) may fail on one rank, e.g. out
            # of memory: a status for the whole group, exchanged before any collective of this phase
            try:
                out_bytes = _as_bytes(out)
                g, recv = _gatherer(gather, me, out_bytes)
                n = out_bytes.numel()
                plain = torch.zeros(n, dtype=torch.uint8, device=out_bytes.device)
                ag, _ = _gatherer("all", me, plain)
                sums = _checksum(out_bytes)
            except Exception as e:  # noqa: BLE001
                summary = {"status": worker.classify(e), "reason": _tb(e)}
            bad = _first_failure(_all({"status": summary["status"], "reason": summary.get("reason")}))
        if bad is None and gather != "none":
            g(out_bytes)  # the gather delivers every rank's bytes where they belong: checked on every receiver
            _sync(me)
            peers = _all(sums)
            if gather == "all":
                slots = range(me.world)
                lost = [r for r in slots if _checksum(recv[r * n:(r + 1) * n]) != tuple(peers[r])]
            else:
                lost = [r for r in range(me.world) if _checksum(recv[r]) != tuple(peers[r])] if me.rank == 0 else []
            delivered = not lost

            def step():
                g(_as_bytes(call()))

            def gather_only():
                g(out_bytes)

            def collective():
                ag(plain)
            noise = float(opts.get("noise_target", 0.005 if device == "gpu" else 0.01))
            t_step = _lockstep(me, step, lock_limit, noise)
            t_gather = _lockstep(me, gather_only, lock_limit, noise)
            t_coll = _lockstep(me, collective, lock_limit, noise)
            summary.update(step=_timing_summary(t_step), gather_us=t_gather.median_us, coll_us=t_coll.median_us,
                           out_bytes=n, delivered=delivered, lost=lost)
    finally:
        if sampler is not None:
            sampler.stop()
    if sampler is not None:
        summary["clocks"] = sampler.stats()
    if "op" in summary:
        summary["health"] = envmod.assess_health(summary.get("clocks"), summary["op"]["method"]["noise_target_met"])
    everyone = _all(summary)
    if not me.writer:
        return None, []
    rec.check = check
    bad = _first_failure(everyone)
    if bad is not None:
        r, v = bad
        rec.status, rec.reason = v["status"], f"rank {r}: {v.get('reason')}"
        rec.duration_s = time.perf_counter() - t_start
        return rec, []
    try:
        samples = build_record(rec, case, lt, me, everyone)
    except Exception as e:  # noqa: BLE001 - e.g. a zero time from a coarse clock: a status, not a crash
        rec.status, rec.reason, rec.metrics, rec.method, rec.distributed = "error", _tb(e), None, None, None
        samples = []
    rec.duration_s = time.perf_counter() - t_start
    return rec, samples


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
    k = me.world
    _set_moved_bytes(rec, everyone)
    gather = case.params["gather"]
    per_rank_op = [s["op"]["median_us"] for s in everyone]
    steps = [s["step"] if gather != "none" else s["op"] for s in everyone]
    per_rank_step = [s["median_us"] for s in steps]
    slow = scaling.slowest_rank(per_rank_step)
    step_us = scaling.step_time_us(per_rank_step)
    items_per_rank = [int(s["items"]) for s in everyone]
    total = sum(items_per_rank)
    if total != case.items:
        raise RuntimeError(f"the ranks' shards hold {total} items, the case {case.items}")
    agg = scaling.aggregate_items_per_s(total, per_rank_step)
    base_host_bound = False
    if k == 1:
        base_step, base_items = step_us, total
    else:
        base = lt.baselines.get(case.baseline_key or "")
        base_step, base_items = (base.step_us, base.items) if base else (None, None)
        base_host_bound = bool(base and base.host_bound)
    eff = scaling.efficiency(case.params["scaling"], k, step_us=step_us, items=total, baseline_step_us=base_step,
                             baseline_items=base_items)
    gather_bytes = gather_us = gather_gb = coll_us = coll_gb = busbw = None
    if gather != "none":
        n = int(everyone[0]["out_bytes"])
        gather_bytes = k * n
        gather_us = max(s["gather_us"] for s in everyone)
        coll_us = max(s["coll_us"] for s in everyone)
        gather_gb = scaling.algbw_gb_per_s(gather_bytes, gather_us)
        coll_gb = scaling.algbw_gb_per_s(gather_bytes, coll_us)
        busbw = scaling.allgather_busbw_gb_per_s(coll_gb, k)
        seen_by = [r for r, s in enumerate(everyone) if not s["delivered"]]
        if seen_by:
            lost = sorted({int(x) for s in everyone for x in s.get("lost") or []})
            rec.status = "incorrect"
            rec.reason = f"the gather did not deliver the bytes of rank(s) {lost} intact (checked on rank(s) {seen_by})"
            return []
    slow_step = steps[slow]
    rec.method = Method(**slow_step["method"], input_sets=int(everyone[slow].get("input_sets", 1)))
    rec.metrics = Metrics(time_us=Quantiles(**slow_step["quantiles"]), items_per_s=agg,
                          gb_per_s=rec.case.bytes / (step_us * 1e-6) / 1e9, ceiling_gb_per_s=None, pct_of_ceiling=None,
                          graph_time_us=None, event_vs_graph=None)
    clocks = everyone[slow].get("clocks") if me.device == "gpu" else None
    rec.clocks = Clocks(**clocks) if clocks is not None else None
    health = Health(throttled=False, contended=False, noisy=False, reasons=[])
    for r, s in enumerate(everyone):
        h = s["health"]
        for flag in ("throttled", "contended", "noisy"):
            health[flag] = health[flag] or bool(h[flag])
        reasons = [x for x in h["reasons"] if not (me.device == "cpu" and x.startswith("clocks unknown"))]
        health.reasons += [f"rank {r}: {x}" for x in reasons]
        if s["op"].get("uncovered"):
            health.noisy = True
            health.reasons.append(f"rank {r}: noisy: {s['op']['uncovered']} of {s['op']['batches']} batches "
                                     "could not be queued behind a blocked stream")
    if gather != "none" and me.device == "gpu":
        from ..timing import HOST_BOUND_FRACTION

        for r, s in enumerate(everyone):
            launch, t = s["step"].get("launch_us"), s["step"]["median_us"]
            gpu_side = s["op"]["median_us"] + s["gather_us"]
            # the host took (nearly) the whole step to enqueue it, and the step is well beyond the GPU's own work
            # (a host blocked by a GPU-limited call would also take the whole step, but not beyond the GPU's side)
            if launch is not None and t > 0 and launch >= HOST_BOUND_FRACTION * t and t > 1.2 * gpu_side:
                # no flag: the figure is what a Python loop of op + gather achieves, but not the GPU's limit
                health.reasons.append(
                    f"rank {r}: host-bound: enqueueing op + gather took {launch:.1f} of the step's {t:.1f} us per "
                    f"call; the GPU time of the op ({s['op']['median_us']:.1f} us) plus the gather alone "
                    f"({s['gather_us']:.1f} us) is the GPU's side")
    if base_host_bound and eff is not None:
        health.reasons.append(f"efficiency against a host-bound one-GPU step ({base_step:.1f} us, paced by the "
                                 "host's launches): overstated against the GPU's own one-GPU time")
    if gather != "none" and not slow_step["method"]["noise_target_met"]:
        health.noisy = True
        health.reasons.append(f"rank {slow}: noisy: the step's noise target was not met")
    rec.health = health
    rec.distributed = Distributed(
        world_size=k, nodes=me.nodes, backend=me.backend, scaling=case.params["scaling"], gather=gather,
        items_per_rank=items_per_rank, per_rank_us=per_rank_op, per_rank_step_us=per_rank_step, step_us=step_us,
        aggregate_items_per_s=agg, efficiency=eff, baseline_step_us=base_step, gather_bytes=gather_bytes,
        gather_us=gather_us, gather_gb_per_s=gather_gb, collective_us=coll_us, collective_gb_per_s=coll_gb,
        collective_busbw_gb_per_s=busbw)
    rec.status, rec.reason = "ok", None
    return list(slow_step["samples_us"])


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
