"""Data-parallel training (DDP) of the pipelines suite, through the harness's torchrun launcher.

:func:`run_ddp` starts one launch per rank count (``python -m torch.distributed.run ... -m
robocache.bench.pipelines.ddp --task TASK.json``, :func:`robocache.bench.multigpu.launch.torchrun_command`) under
:func:`robocache.bench.multigpu.launch.run_torchrun`'s watchdog (case timeout, a dead rank, no process left behind). The task
is a :class:`DDPTask`: the harness's :class:`~robocache.bench.context.LaunchTask` (the run's context, the cases,
the collective timeout, the one-rank baselines) plus what the training needs (the dataset, the steps, the
points). Every rank runs the harness's rank loop (:func:`robocache.bench.multigpu.rank.rank_main`: ``Rank``,
``_init`` with NCCL on GPUs, one per rank, Gloo processes on the CPU; the pid, progress, case and failure files
the launcher watches, all typed :mod:`robocache.bench.messages`) with this module's case, :func:`train_case`.

Every rank reads its own shard of the seeded episode order (weak scaling: the batch per rank is fixed), trains a
``DistributedDataParallel`` model from each data-loading pipeline (the EpisodeCache: a resident cache of the
rank's shard, built on the rank), and the writer (rank 0) builds one record per
(model, pipeline) with the ``distributed`` section (per-rank step medians, the group's step = the slowest rank's,
aggregate trajectories/s, efficiency against the one-rank launch of the same run) and the run context writes it
into ``<run id>-pipelines-ddp-g<k>.records.json``. The gate: on every rank, the robocache pipeline's loss curve
matches the CPU workers' (same seed, same shard).
"""
from __future__ import annotations

import argparse
import sys
import tempfile
import time
import traceback
from pathlib import Path
from typing import Any

import msgspec

from .. import messages
from ..context import LaunchTask, RunContext
from ..messages import Baseline, Message, Task
from ..schema import Record
from . import common

MODULE = "robocache.bench.pipelines.ddp"  # what every rank runs (python -m MODULE --task TASK.json)


class Point(Message):
    """One DDP training case: a training point of the suite's grid at one rank count."""

    tag: str  # the training point's tag, ending in -ddp-g<k>
    provider: str  # the data-loading pipeline: cpu_workers | robocache
    params: dict[str, Any]  # the training point's, with ranks
    reason: str
    baseline_key: str  # the same point's key at any rank count: its one-rank figures are the efficiency's base

    @property
    def key(self) -> str:
        """The case key the launcher's progress and case files carry: ``train/<tag>/<provider>``."""
        return f"train/{self.tag}/{self.provider}"

    def case(self, k: int) -> dict[str, Any]:
        return common.case("train", self.tag, self.provider, self.params, self.params["B"] * k, "trajectories",
                           self.reason)


class DDPTask(Message):
    """What every rank of one DDP launch runs: the harness's launch task and the training's own inputs."""

    launch: LaunchTask  # its task.seed seeds the episode order and the models; its cases are the points' keys
    dataset: str
    episodes: int
    train_steps: int
    train_warmup: int
    points: list[Point]  # in the order of launch.cases


# --- one rank ------------------------------------------------------------------------------------------

def train_case(pt: Point, dt: DDPTask, me: Any, results: dict[tuple[str, str], dict[str, Any]]
               ) -> tuple[Record | None, list[float]]:
    """One (model, pipeline) on this rank; every rank calls the same collectives (DDP's all-reduce, one
    ``all_gather_object``). Returns (the record, the slowest rank's step samples) on the writer, (None, [])
    elsewhere. A rank-local failure raises: DDP's collectives may be broken, the launch ends."""
    import torch

    from ..multigpu import rank as dist_mod
    from ..multigpu import scaling
    from . import loading, training

    t0 = time.perf_counter()
    task = dt.launch.task
    p, prov, k = pt.params, pt.provider, me.world
    b, w, model = p["B"], p["workers"], p["model"]
    warm = loading.steady_warmup(w, dt.train_warmup)
    n = warm + dt.train_steps
    try:
        order = loading.sample_indices(dt.episodes, n * b * k, task.seed + 1)
        pipe = loading.make_pipeline(prov, dt.dataset, batch=b, workers=w, device=task.device,
                                     indices=order[me.rank::k])
        kw = {"device_ids": [me.local_rank]} if task.device == "gpu" else {}
        r = training.train(pipe, model, steps=dt.train_steps, warmup=warm, seed=task.seed,
                           wrap=lambda net: torch.nn.parallel.DistributedDataParallel(net, **kw))
        del pipe
    except Exception as e:  # a rank-local error; the collectives may be broken: re-raise
        traceback.print_exc()
        raise RuntimeError(f"{pt.key}: {type(e).__name__}: {e}") from e
    results[(model, prov)] = r
    ref = results.get((model, "cpu_workers"))
    chk = training.curves_agree(ref["loss"] if ref else r["loss"], r["loss"])
    per_rank = dist_mod._all({"step_us": 1e6 * common.quantile(r["per_s"], 0.5),
                              "data_share": sum(r["data_s"]) / max(sum(r["per_s"]), 1e-12),
                              "passed": chk["passed"], "max_rel_err": chk["max_rel_err"], "per_s": r["per_s"]})
    if not me.writer:
        return None, []
    case = pt.case(k)
    try:
        per_rank_us = [x["step_us"] for x in per_rank]
        slow = scaling.slowest_rank(per_rank_us)
        step_us = scaling.step_time_us(per_rank_us)
        agg = scaling.aggregate_items_per_s(b * k, per_rank_us)
        # the one-rank case is its own reference (as the harness's multi-GPU cases)
        base = Baseline(step_us=step_us, items=b) if k == 1 else dt.launch.baselines.get(pt.baseline_key)
        eff = scaling.efficiency("weak", k, step_us=step_us, items=b * k,
                                 baseline_step_us=base.step_us if base else None,
                                 baseline_items=base.items if base else None)
    except ValueError as e:  # e.g. a zero step time from a coarse clock: a status, not a crash of the group
        return common.record(task, case, status="error", reason=f"{type(e).__name__}: {e}",
                             duration_s=time.perf_counter() - t0), []
    passed = all(x["passed"] for x in per_rank)
    worst = max((x["max_rel_err"] or 0.0) for x in per_rank)
    check = {"passed": passed, "max_abs_err": None, "max_rel_err": worst, "tolerance": training.LOSS_RTOL,
             "bad_fraction": 0.0 if passed else None}
    pipeline = {"kind": "train", "resample_on": common.p_resample_on(prov, task.device),
                "figures": {"steps_per_s": 1e6 / step_us, "traj_per_s": agg,
                            "data_wait_share": max(x["data_share"] for x in per_rank), "ranks": float(k),
                            "final_loss": r["loss"][-1] if r["loss"] else None},
                "loss": r["loss"],
                "notes": [f"DDP over {k} rank(s) ({me.backend}), {b} trajectories per rank per step (weak scaling); "
                          "the step and its samples are the slowest rank's; data share is the largest over the ranks",
                          "loss: rank 0's curve; the gate compares every rank's against its CPU-workers curve"]}
    samples = [x * 1e6 for x in per_rank[slow]["per_s"]]
    distributed = {
        "world_size": k, "nodes": me.nodes, "backend": me.backend, "scaling": "weak", "gather": "none",
        "items_per_rank": [b] * k, "per_rank_us": per_rank_us, "per_rank_step_us": per_rank_us, "step_us": step_us,
        "aggregate_items_per_s": agg, "efficiency": eff, "baseline_step_us": base.step_us if base else None,
        "gather_bytes": None, "gather_us": None, "gather_gb_per_s": None, "collective_us": None,
        "collective_gb_per_s": None, "collective_busbw_gb_per_s": None}
    status, reason = "ok", None
    if not passed:
        status, reason = "incorrect", (f"a rank's loss curve differs from its CPU workers' curve: max rel diff "
                                       f"{worst} > {training.LOSS_RTOL}")
    # checked in common.record: a record the launcher could not decode raises here
    return common.record(task, case, status=status, reason=reason, t=common.timing(samples, r["warmup_s"]),
                         items=b * k, check=check, pipeline=pipeline, distributed=distributed,
                         duration_s=time.perf_counter() - t0), samples


def main(argv: list[str] | None = None) -> int:
    from ..multigpu import rank as distributed

    p = argparse.ArgumentParser(allow_abbrev=False, prog=f"python -m {MODULE}",
                                description="One rank of the pipelines suite's DDP launch (started by torchrun).")
    p.add_argument("--task", required=True, help="the DDPTask JSON written by run_ddp")
    args = p.parse_args(argv)
    with open(args.task, "rb") as f:
        dt = msgspec.json.decode(f.read(), type=DDPTask)
    points = {pt.key: pt for pt in dt.points}
    results: dict[tuple[str, str], dict[str, Any]] = {}  # this rank's curves: the gate's CPU-workers reference
    return distributed.rank_main(dt.launch, lambda key, lt, me: train_case(points[key], dt, me, results))


# --- the launcher's side -------------------------------------------------------------------------------

def run_ddp(cfg: Any, run: RunContext, dataset: str, info: dict[str, Any], pts: list[dict[str, Any]], *,
            collective_timeout_s: float = 120.0, case_timeout_s: float = 600.0, log=None) -> list[Record]:
    """One torchrun launch per rank count in ``cfg.ddp_ranks`` (ascending: the one-rank launch first, the
    efficiency's reference) over the training points ``pts``; returns the records (also written through ``run``,
    one file per rank count)."""
    from ..multigpu import launch

    say = log or (lambda s: None)
    ok, why = launch.available(cfg.device)
    if not ok:
        raise RuntimeError(why)
    # the EpisodeCache under DDP: each rank's own resident cache of its shard (a streamed cache's chunk-by-chunk
    # order is one process's, so its cases are single-GPU ones)
    pts = [pt for pt in pts if pt["params"].get("regime", "resident") == "resident"]
    task = run.task(seed=cfg.seed)
    out: list[Record] = []
    baselines: dict[str, Baseline] = {}
    for k in sorted(set(cfg.ddp_ranks)):
        mine = [Point(tag=f"{pt['tag']}-ddp-g{k}", provider=pt["provider"], params={**pt["params"], "ranks": k},
                      reason=pt["reason"], baseline_key=f"train/{pt['tag']}/{pt['provider']}") for pt in pts]
        name = f"{run.run_id}-{common.SUITE}-ddp-g{k}"
        with tempfile.TemporaryDirectory(prefix="rcb-ddp-") as tmp:
            work = Path(tmp)
            lt = LaunchTask(task=task, run=run, records_name=name, cases=[pt.key for pt in mine], world_size=k,
                            workdir=str(work), collective_timeout_s=float(collective_timeout_s),
                            baselines=dict(baselines))
            messages.write_json(work / "task.json", DDPTask(launch=lt, dataset=dataset, episodes=info["episodes"],
                                                            train_steps=cfg.train_steps,
                                                            train_warmup=cfg.train_warmup, points=mine))
            cmd = launch.torchrun_command(k, work / "task.json", module=MODULE)
            say(f"ddp: {k} rank(s) ({'NCCL' if cfg.device == 'gpu' else 'Gloo'}), {len(mine)} case(s)")
            got = launch.run_torchrun(cmd, work, k=k, n_cases=len(mine), case_timeout_s=case_timeout_s,
                                 collective_timeout_s=collective_timeout_s, env=launch.child_env(), on_case=None,
                                 margin_s=launch.launch_margin_s())
        recs: list[Record] = [d.record for d in got.done]
        if len(recs) < len(mine):  # the launch died or timed out: the cases without a record say why
            recs += _unfinished(got, k, mine[len(recs):], task)
            run.write(recs, name)  # after the launch has ended: one writer at a time
        if k == 1:
            for pt, r in zip(mine, recs):
                if (base := Baseline.of(r)) is not None:
                    baselines[pt.baseline_key] = base
        out += recs
    return out


def _unfinished(got: Any, k: int, left: list[Point], ctx: Task) -> list[Record]:
    """Records for the cases a failed launch did not finish: the one it ended on gets the failure (which rank
    died first, or the timeout), those after it ``skipped``; every case when it failed before its first."""
    from ..multigpu import launch

    first = left[0]
    n_done = len(got.done)
    started = got.progress is not None and got.progress.key == first.key and got.progress.index == n_done
    status, reason = launch.case_failure(got, "during the case" if started else "before the case started")
    if not started and n_done == 0:
        why = f"the DDP launch of {k} rank(s) failed before its first case: {reason}"
        return [common.record(ctx, pt.case(k), status=status, reason=why) for pt in left]
    return [common.record(ctx, first.case(k), status=status, reason=f"DDP launch of {k} rank(s): {reason}")] + [
        common.record(ctx, pt.case(k), status="skipped",
                      reason=f"not run: the DDP launch of {k} rank(s) ended at {first.key}") for pt in left[1:]]


if __name__ == "__main__":
    sys.exit(main())
