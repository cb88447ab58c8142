"""The multi-GPU scaling table: per world size the group's step, aggregate throughput, efficiency, and the
gather's bandwidth beside the collective's own; and the DDP training rows (the pipelines suite's training step
over several GPUs: steps/s per GPU and the share of the step spent waiting for data, per loader and rank count)."""
from __future__ import annotations

from typing import Any

from .. import ops, specs
from ..schema import Record
from .records import flags, is_multigpu, machine
from .tables import fmt_num, fmt_us, table

_UNIT = {"trajectories": "traj", "points": "pts"}


def _gb(x: float | None) -> str:
    return "-" if x is None else f"{x:.3g}"


def _mg_flags(r: Record) -> str:
    f = [] if flags(r) == "-" else [flags(r)]
    reasons = r.health.reasons
    if any(": host-bound:" in x for x in reasons):
        f.append("host-bound")
    if any("host-bound one-GPU step" in x for x in reasons):
        f.append("host-bound baseline")
    return ",".join(f) or "-"


def multigpu(records: list[Record]) -> str:
    """Multi-GPU cases: per world size the group's step (slowest rank), aggregate throughput, efficiency
    against the one-rank case of the run, and the gather's bandwidth beside the collective's own."""
    rows = []

    def order(r: Record) -> tuple:
        p = r.case.params
        return (ops.order(r.case.op), r.case.provider,
                p.get("scaling", ""), specs.GATHER_MODES.index(p["gather"]) if p.get("gather") in specs.GATHER_MODES
                else 9, p.get("B", 0), p.get("world_size", 0))
    for r in sorted((r for r in records if is_multigpu(r)), key=order):
        p, d = r.case.params, r.distributed
        ranks = d.per_rank_us if d is not None else []
        spread = f"{min(ranks):.1f}-{max(ranks):.1f}" if len(ranks) > 1 else (fmt_us(ranks[0]) if ranks else "-")
        nodes = f" ({d.nodes} nodes)" if d is not None and d.nodes > 1 else ""
        unit = f" {_UNIT.get(r.case.items_unit, 'items')}/s"
        rows.append([r.case.id, r.case.provider, f"{p.get('world_size')}{nodes}", p.get("scaling"), p.get("gather"),
                     r.status, fmt_us(d.step_us if d else None), spread,
                     fmt_num(d.aggregate_items_per_s if d else None, unit),
                     f"{d.efficiency:.2f}" if d and d.efficiency is not None else "-",
                     _gb(d.gather_gb_per_s if d else None), _gb(d.collective_gb_per_s if d else None),
                     _gb(d.collective_busbw_gb_per_s if d else None), _mg_flags(r)])
    if not rows:
        return "_No multi-GPU case in this run._"
    return ("Step = the slowest rank's median (op, plus the gather when there is one); efficiency against the "
            "one-rank case of this run (weak: t1/tk, strong: t1/(k tk)); all_gather bandwidth of a plain tensor "
            "of the same size, measured in the same run (algbw and nccl-tests' busbw). host-bound: the host took "
            "most of the step to enqueue op + gather, so the step is Python's launch rate, not the GPU's; host-bound "
            "baseline: the one-GPU step the efficiency divides by was, so the efficiency is overstated.\n\n"
            + table(["case", "provider", "ranks", "scaling", "gather", "status", "step us", "op us per rank",
                     "aggregate", "efficiency", "gather GB/s", "all_gather algbw GB/s", "busbw GB/s", "flags"],
                    rows))


DDP_LOADERS = {"cpu_workers": "CPU workers (NumPy)", "robocache": "robocache.fuse", "episode_cache": "EpisodeCache"}


def is_ddp(r: Record) -> bool:
    """A DDP training record: the pipelines suite's training step with a ``distributed`` section, or its failure
    (case id ``...-ddp-g<k>``)."""
    return r.suite == "pipelines" and (r.distributed is not None or "-ddp-g" in r.case.id)


def ddp_rows(records: list[Record]) -> list[dict[str, Any]]:
    """The newest DDP training run per machine, one row per (model, batch, loader, ranks): steps/s (every GPU
    steps at the group's rate: the slowest rank's), trajectories/s in all, the data-wait share (the largest over
    the ranks), the efficiency against the one-rank launch (weak scaling), the loss gate's status. Failed cases
    have None figures and their status."""
    mine = [r for r in records if is_ddp(r)]
    newest: dict[str, str] = {}
    for r in mine:
        m = machine(r)[0]
        newest[m] = max(newest.get(m, ""), r.run_id)
    rows = []
    for r in mine:
        m, arch, _ = machine(r)
        if r.run_id != newest[m]:
            continue
        p, d = r.case.params, r.distributed
        fig = r.pipeline.figures if r.pipeline is not None else {}
        ok = r.status == "ok"
        rows.append({"arch": arch, "machine": m, "model": p.get("model"), "B": p.get("B"),
                     "workers": p.get("workers"), "loader": r.case.provider,
                     "ranks": (d.world_size if d is not None else None) or p.get("ranks"),
                     "steps_per_s": fig.get("steps_per_s") if ok else None,
                     "traj_per_s": fig.get("traj_per_s") if ok else None,
                     "data_wait_share": fig.get("data_wait_share") if ok else None,
                     "efficiency": d.efficiency if ok and d is not None else None, "status": r.status,
                     "run_id": r.run_id, "reason": r.reason})
    order = list(DDP_LOADERS)
    rows.sort(key=lambda x: (x["arch"], x["machine"], str(x["model"]), x["B"] or 0,
                             order.index(x["loader"]) if x["loader"] in order else 9, x["ranks"] or 0))
    return rows


DDP_HEADER = ["machine", "model", "batch per GPU", "loader", "ranks", "steps/s per GPU", "traj/s in all",
              "data-wait share", "efficiency", "vs CPU workers", "status"]


def ddp_table_rows(records: list[Record]) -> list[list[Any]]:
    """:func:`ddp_rows` as the markdown table's rows (:data:`DDP_HEADER`), with each loader's steps/s over the CPU
    workers' at the same machine, model, batch and rank count (same run)."""
    rows = ddp_rows(records)
    base = {(x["machine"], x["model"], x["B"], x["ranks"]): x["steps_per_s"] for x in rows
            if x["loader"] == "cpu_workers" and x["steps_per_s"]}
    out = []
    for x in rows:
        b = base.get((x["machine"], x["model"], x["B"], x["ranks"]))
        vs = "-" if not (b and x["steps_per_s"]) or x["loader"] == "cpu_workers" else f"{x['steps_per_s'] / b:.2f}x"
        out.append([f"{x['arch']} ({x['machine']})", x["model"], x["B"], DDP_LOADERS.get(x["loader"], x["loader"]),
                    x["ranks"], "-" if x["steps_per_s"] is None else f"{x['steps_per_s']:.4g}",
                    fmt_num(x["traj_per_s"], " traj/s"),
                    "-" if x["data_wait_share"] is None else f"{100 * x['data_wait_share']:.0f}%",
                    "-" if x["efficiency"] is None else f"{x['efficiency']:.2f}", vs, x["status"]])
    return out


def ddp(records: list[Record]) -> str:
    """DDP training over GPUs (the pipelines suite's ``--ddp-ranks``), newest run per machine, as markdown."""
    rows = ddp_table_rows(records)
    if not rows:
        return "_No DDP training case in these records._"
    return ("Each rank trains the model under DistributedDataParallel on its own GPU from its own shard (weak "
            "scaling: the batch per GPU is fixed). Steps/s per GPU = the group's rate (the slowest rank's median "
            "step); data-wait share = the largest over the ranks; efficiency = the one-rank launch's step over this "
            "one's; vs CPU workers = steps/s over the CPU-worker loader's at the same rank count, same run.\n\n"
            + table(DDP_HEADER, rows))
