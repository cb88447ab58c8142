"""Data-parallel training (DDP) of the pipelines suite, through the harness's torchrun launcher.

:func:`run_ddp` starts one launch per rank count (``python -m torch.distributed.run ... -m
robocache.bench.pipelines.ddp --task TASK.json``) under :func:`robocache.bench.launch._launch`'s watchdog (case
timeout, a dead rank, no process left behind); each rank is set up by :mod:`robocache.bench.distributed`
(``Rank``, ``_init``: NCCL on GPUs, one per rank; Gloo processes on the CPU). Every rank reads its own shard of
the seeded episode order (weak scaling: the batch per rank is fixed), trains a ``DistributedDataParallel``
model from each data-loading pipeline, and rank 0 writes one record per (model, pipeline) with the
``distributed`` section (per-rank step medians, the group's step = the slowest rank's, aggregate trajectories/s,
efficiency against the one-rank launch of the same run) into ``<run id>-pipelines-ddp-g<k>.records.json``.
The gate: on every rank, the robocache pipeline's loss curve matches the CPU workers' (same seed, same shard).
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
import traceback
from pathlib import Path
from typing import Any

from .. import store


def _train_case(pt: dict[str, Any], task: dict[str, Any], me, results: dict) -> dict[str, Any]:
    import torch

    from .. import distributed as dist_mod
    from . import common, loading, training
    from .run import p_resample_on

    t0 = time.perf_counter()
    p = pt["params"]
    b, w, model, prov, k = p["B"], p["workers"], p["model"], pt["provider"], me.world
    n = task["train_warmup"] + task["train_steps"]
    order = loading.sample_indices(task["episodes"], n * b * k, task["seed"] + 1)
    pipe = loading.make_pipeline(prov, task["dataset"], batch=b, workers=w, device=task["device"],
                                 indices=order[me.rank::k])
    kw = {"device_ids": [me.local_rank]} if task["device"] == "gpu" else {}
    r = training.train(pipe, model, steps=task["train_steps"], warmup=task["train_warmup"], seed=task["seed"],
                       wrap=lambda net: torch.nn.parallel.DistributedDataParallel(net, **kw))
    del pipe
    results[(model, prov)] = r
    ref = results.get((model, "cpu_workers"))
    chk = training.curves_agree(ref["loss"] if ref else r["loss"], r["loss"])
    per_rank = dist_mod._all({"step_us": 1e6 * common.quantile(r["per_s"], 0.5),
                              "data_share": sum(r["data_s"]) / max(sum(r["per_s"]), 1e-12),
                              "passed": chk["passed"], "max_rel_err": chk["max_rel_err"], "per_s": r["per_s"]})
    if not me.writer:
        return {}
    step_us = max(x["step_us"] for x in per_rank)
    agg = b * k / (step_us * 1e-6) if step_us > 0 else 0.0
    base = task.get("baselines", {}).get(f"{model}/{prov}")
    passed = all(x["passed"] for x in per_rank)
    worst = max((x["max_rel_err"] or 0.0) for x in per_rank)
    check = {"passed": passed, "max_abs_err": None, "max_rel_err": worst, "tolerance": training.LOSS_RTOL,
             "bad_fraction": 0.0 if passed else None}
    pipeline = {"kind": "train", "resample_on": p_resample_on(prov, task["device"]),
                "figures": {"steps_per_s": 1e6 / step_us if step_us else None, "traj_per_s": agg,
                            "data_wait_share": max(x["data_share"] for x in per_rank), "ranks": float(k),
                            "final_loss": r["loss"][-1] if r["loss"] else None},
                "loss": r["loss"],
                "notes": [f"DDP over {k} rank(s) ({me.backend}), {b} trajectories per rank per step (weak scaling); "
                          "the step is the slowest rank's median; data share is the largest over the ranks",
                          "loss: rank 0's curve; the gate compares every rank's against its CPU-workers curve"]}
    ctx = {**task, "device": task["device"]}
    case = common.case("train", pt["tag"], prov, p, b * k, "trajectories", pt["reason"])
    t = common.timing([x * 1e6 for x in per_rank[0]["per_s"]], r["warmup_s"])
    rec = common.record(ctx, case, t=t, items=b * k, check=check, pipeline=pipeline,
                        duration_s=time.perf_counter() - t0)
    rec["distributed"] = {
        "world_size": k, "nodes": 1, "backend": me.backend, "scaling": "weak", "gather": "none",
        "items_per_rank": [b] * k, "per_rank_us": [x["step_us"] for x in per_rank],
        "per_rank_step_us": [x["step_us"] for x in per_rank], "step_us": step_us, "aggregate_items_per_s": agg,
        "efficiency": base["step_us"] / step_us if base and step_us else None,
        "baseline_step_us": base["step_us"] if base else None, "gather_bytes": None, "gather_us": None,
        "gather_gb_per_s": None, "collective_us": None, "collective_gb_per_s": None,
        "collective_busbw_gb_per_s": None}
    if not passed:
        rec.update(status="incorrect", reason=f"a rank's loss curve differs from its CPU workers' curve: max rel diff "
                                              f"{worst} > {training.LOSS_RTOL}")
    return rec


def rank_main(task: dict[str, Any]) -> int:
    from .. import distributed as dist_mod

    me = dist_mod.Rank(task)
    work = Path(task["workdir"])
    if work.is_dir():
        dist_mod._write_json(work / f"pid-{me.rank}.json", {"pid": os.getpid(), "rank": me.rank})
    dist_mod._init(task, me)
    records: list[dict[str, Any]] = []
    results: dict = {}
    folder, name = Path(task["records_folder"]), task["records_name"]
    for i, pt in enumerate(task["points"]):
        if me.local_rank == 0:
            dist_mod._write_json(work / "progress.json", {"index": i, "key": pt["tag"], "state": "start",
                                                          "time": time.time()})
        try:
            rec = _train_case(pt, task, me, results)
        except Exception as e:  # noqa: BLE001 - a rank-local error; the collectives may be broken: re-raise
            traceback.print_exc()
            raise RuntimeError(f"{pt['tag']} {pt['provider']}: {type(e).__name__}: {e}") from e
        if me.writer:
            records.append(rec)
            store.write_records(folder, task["env"], records, name=name, unique=False)
            dist_mod._write_json(work / f"case-{i}.json", {"key": pt["tag"], "record": rec})
        if me.local_rank == 0:
            dist_mod._write_json(work / "progress.json", {"index": i, "key": pt["tag"], "state": "done",
                                                          "time": time.time()})
    dist_mod._barrier(me)
    dist_mod._dist().destroy_process_group()
    return 0


def run_ddp(cfg, ctx: dict[str, Any], env: dict[str, Any], folder: Path, dataset: str, info: dict[str, Any],
            pts: list[dict[str, Any]], *, collective_timeout_s: float = 120.0, case_timeout_s: float = 600.0,
            log=None) -> list[dict[str, Any]]:
    """One torchrun launch per rank count in ``cfg.ddp_ranks`` (ascending: the one-rank launch first, the
    efficiency's reference); returns the records (also written, one file per rank count)."""
    from .. import launch

    say = log or (lambda s: None)
    ok, why = launch.available(cfg.device)
    if not ok:
        raise RuntimeError(why)
    out: list[dict[str, Any]] = []
    baselines: dict[str, dict[str, float]] = {}
    child_env = {**os.environ, "NCCL_NVLS_ENABLE": os.environ.get("NCCL_NVLS_ENABLE", "0"),
                 "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "1"), "PYTHONUNBUFFERED": "1"}
    for k in sorted(set(cfg.ddp_ranks)):
        mine = [dict(pt, tag=f"{pt['tag']}-ddp-g{k}", params={**pt["params"], "ranks": k}) for pt in pts]
        name = f"{ctx['run_id']}-pipelines-ddp-g{k}"
        with tempfile.TemporaryDirectory(prefix="rcb-ddp-") as tmp:
            work = Path(tmp)
            task = {**ctx, "suite": "pipelines", "env": env, "points": mine, "world_size": k, "workdir": str(work),
                    "records_folder": str(folder), "records_name": name, "dataset": dataset,
                    "episodes": info["episodes"], "seed": cfg.seed, "train_steps": cfg.train_steps,
                    "train_warmup": cfg.train_warmup, "collective_timeout": collective_timeout_s,
                    "cases": [p["tag"] + "/" + p["provider"] for p in mine], "check_only": False, "timing": {},
                    "lockstep_time_limit_s": None, "baselines": baselines, "node_rank": 0}
            (work / "task.json").write_text(json.dumps(task))
            cmd = launch.torchrun_command(k, work / "task.json")
            cmd[cmd.index("robocache.bench.distributed")] = "robocache.bench.pipelines.ddp"
            say(f"ddp: {k} rank(s) ({'NCCL' if cfg.device == 'gpu' else 'Gloo'}), {len(mine)} case(s)")
            got = launch._launch(cmd, work, k=k, n_cases=len(mine), case_timeout_s=case_timeout_s,
                                 collective_timeout_s=collective_timeout_s, env=child_env, on_case=None)
            recs = [d["record"] for d in got.done]
            if len(recs) < len(mine):  # the launch died or timed out: the cases without a record say why
                why = got.detail or launch.root_cause(got.log) or launch._last_error(got.log) or f"exit {got.rc}"
                from .common import case as mk_case, record

                for pt in mine[len(recs):]:
                    recs.append(record(ctx, mk_case("train", pt["tag"], pt["provider"], pt["params"],
                                                    pt["params"]["B"] * k, "trajectories", pt["reason"]),
                                       status=got.status or "crash", reason=f"DDP launch of {k} rank(s): {why}"))
                store.write_records(folder, env, recs, name=name, unique=False)
        for r in recs:
            if k == 1 and r["status"] == "ok" and r.get("distributed"):
                baselines[f"{r['case']['params']['model']}/{r['case']['provider']}"] = {
                    "step_us": r["distributed"]["step_us"]}
        out += recs
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m robocache.bench.pipelines.ddp",
                                description="One rank of the pipelines suite's DDP launch (started by torchrun).")
    p.add_argument("--task", required=True)
    args = p.parse_args(argv)
    with open(args.task) as f:
        task = json.load(f)
    try:
        return rank_main(task)
    except BaseException as e:  # noqa: BLE001 - a broken group: report and leave without tearing it down
        traceback.print_exc()
        sys.stdout.flush()
        sys.stderr.flush()
        work = Path(task.get("workdir", ""))
        if work.is_dir():
            try:
                from .. import distributed as dist_mod

                rank = int(os.environ.get("RANK", "-1"))
                dist_mod._write_json(work / f"fail-{rank}.json", {"rank": rank, "error": f"{type(e).__name__}: {e}"})
            except Exception:  # noqa: BLE001
                pass
        os._exit(1)


if __name__ == "__main__":
    sys.exit(main())
