"""Selecting and indexing records for the views: runs, one measurement per machine and op, record kinds
(call cost, multi-GPU, pipelines), a case's median and flags, torch.compile at its best.

The across-runs views (kernels, sampled) read the frame's rows (:class:`robocache.bench.columns.Row`); the one-run
views still read loaded records. The helpers both use take either."""
from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from typing import Any

from ...providers import OURS, OURS_CPU, compile_mode
from .. import ops
from ..columns import Row, as_rows, dispatch_case, pipeline_kind_of, where_of


def ours(records: Iterable[dict[str, Any]]) -> str:
    """The provider robocache's figures are read from in these records: its public API on the GPU (``robocache``)
    where the records have it, else the same API on NumPy arrays (``robocache@numpy``, a run without a GPU), else
    ``robocache`` (whose absence the views then show)."""
    seen = {r.provider if isinstance(r, Row) else r["case"]["provider"] for r in records}
    return OURS if OURS in seen or OURS_CPU not in seen else OURS_CPU


def is_dispatch(r: dict[str, Any]) -> bool:
    """A call-cost ("dispatch") case: host time per call of a tiny call in a tight loop.

    Recognised by its case id (``<op>/dispatch...``) or its params (``kind``/``mode`` == ``"dispatch"`` or a
    true ``dispatch`` key), so the rest of the report can leave these host-time figures out of device-time
    comparisons whatever the final field names are.
    """
    if isinstance(r, Row):
        return r.is_dispatch
    return dispatch_case(r["case"]["id"], r["case"].get("params"))


def runs(records: Iterable[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    """Records grouped by run id, in the order of their creation."""
    out: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for r in records:
        out[r.run_id if isinstance(r, Row) else r["run_id"]].append(r)
    return dict(sorted(out.items(), key=lambda kv: min(r.created if isinstance(r, Row) else r["created"]
                                                       for r in kv[1])))


def pick_run(records: list[dict[str, Any]], run_id: str | None = None) -> tuple[str, list[dict[str, Any]]]:
    """The records of ``run_id`` (a unique prefix is enough), or of the latest run."""
    by = runs(records)
    rid = pick_run_id(list(by), run_id)
    return rid, by[rid]


def pick_run_id(run_ids: list[str], run_id: str | None = None) -> str:
    """``run_id`` among ``run_ids`` (in :func:`runs`' order; a unique prefix is enough), or the latest run."""
    if not run_ids:
        raise ValueError("no records found; run `robocache-bench run` first or point at a results folder")
    if run_id is None:
        return run_ids[-1]
    hits = [r for r in run_ids if r.startswith(run_id)]
    if len(hits) != 1:
        raise ValueError(f"run {run_id!r} matches {len(hits)} runs; known runs: {', '.join(run_ids[-10:])}")
    return hits[0]


def p50(r: dict[str, Any]) -> float | None:
    if isinstance(r, Row):
        return r.p50
    m = r.get("metrics")
    return m["time_us"]["p50"] if m else None


def flags(r: dict[str, Any]) -> str:
    if isinstance(r, Row):
        return r.flags
    h = r.get("health") or {}
    f = [k for k in ("throttled", "contended", "noisy") if h.get(k)]
    return ",".join(f) or "-"


def flagged(*recs: Any) -> bool:
    return any(flags(r) != "-" for r in recs if r)


def index(records: list[dict[str, Any]]) -> dict[tuple[str, str, str], dict[str, Any]]:
    return {(r.case_id, r.dtype, r.provider) if isinstance(r, Row) else
            (r["case"]["id"], r["case"]["dtype"], r["case"]["provider"]): r for r in records}


def ok_time(idx, cid: str, dtype: str, prov: str) -> float | None:
    r = idx.get((cid, dtype, prov))
    return p50(r) if r and (r.status if isinstance(r, Row) else r["status"]) == "ok" else None


def compile_best(idx: dict[tuple[str, str, str], dict[str, Any]], cid: str, dtype: str
                 ) -> tuple[float, str, dict[str, Any]] | None:
    """torch.compile at its best on one case: (median, mode, record) of the fastest ``ok`` compile mode.

    Every ``torch_compile`` / ``torch_compile@<mode>`` record of the case competes; None when none is ``ok``.
    """
    best = None
    for (c, dt, prov), r in idx.items():
        if c != cid or dt != dtype or compile_mode(prov) is None:
            continue
        t = ok_time(idx, cid, dtype, prov)
        if t is not None and (best is None or t < best[0]):
            best = (t, compile_mode(prov), r)
    return best


def is_multigpu(r: dict[str, Any]) -> bool:
    """A record of a multi-GPU case (its params name the world size)."""
    return r.is_multigpu if isinstance(r, Row) else "world_size" in (r["case"]["params"] or {})


def machine(r: dict[str, Any]) -> tuple[str, str, str]:
    """(machine, arch, GPU name) from the record's env; ``?`` where unknown."""
    if isinstance(r, Row):
        return r.where
    return where_of(r.get("env"))


def timed(records: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """Single-GPU device-time records: multi-GPU, call-cost (dispatch) and pipeline cases left out."""
    records = list(records)
    if records and isinstance(records[0], Row):  # the frame's rows: their kinds are fields
        return [r for r in records if not (r.is_multigpu or r.is_dispatch or r.pipeline)]
    return [r for r in records if not is_multigpu(r) and not is_dispatch(r) and not is_pipeline(r)]


def pipeline_kind(r: dict[str, Any]) -> str | None:
    """``dataload``, ``train``, ``infer`` or ``profile`` for a record of the pipelines or profile suites (its
    section's kind; a failed or skipped case without the section: from its suite and case), None otherwise."""
    if isinstance(r, Row):
        return r.pipeline
    sec = r.get("pipeline")
    return pipeline_kind_of(sec["kind"] if sec is not None else None, r.get("suite"), r["case"]["op"])


def is_pipeline(r: dict[str, Any]) -> bool:
    """A record of the end-to-end suites (data loading, training step, inference, Nsight Compute profile)."""
    return pipeline_kind(r) is not None


def runs_per_op(rows: Iterable[Row], want: Any = None) -> list[tuple[tuple[str, str, str], str, str, list[Row]]]:
    """One measurement per machine and op: ``[((machine, arch, gpu), op, run label, its rows of op), ...]``.

    Ratios are only taken inside one measurement of one commit on one GPU, so each machine and op
    contributes one: the runs of one suite and front end at one git commit count as one measurement (a
    suite split over several invocations: asv's nightly pass runs each op in its own, and a run cut short
    by a device lease is finished with ``run --cases``), its label the run ids joined by ``+``, each series
    (:func:`robocache.bench.schema.series_key`) from its newest run. Among those with a row of the op for
    which ``want(row)`` holds (any when ``want`` is None): a ``nightly`` one (the whole grid) before any
    other, then the newest. Rows without a commit are their own run. Machines sorted, ops in grid order.
    Loaded records are read as rows (:func:`robocache.bench.columns.as_rows`).
    """
    by: dict[tuple, dict[tuple, list[Row]]] = defaultdict(lambda: defaultdict(list))
    for r in as_rows(rows):
        # one front end's runs: a figure of asv and one of the CLI are two series, never one measurement's ratio
        group = (r.suite, r.frontend, r.git_commit) if r.git_commit else (r.suite, None, r.run_id)
        by[(r.where, r.op)][group].append(r)
    out = []
    for mach, op in sorted(by, key=lambda k: (k[0], ops.order(k[1]), k[1])):
        cands = [rs for rs in by[(mach, op)].values() if want is None or any(want(r) for r in rs)]
        if not cands:
            continue
        rs = max(cands, key=lambda rs: (any(r.suite == "nightly" for r in rs), max(r.created for r in rs),
                                        max(r.run_id for r in rs)))
        newest: dict[str, Row] = {}
        for r in sorted(rs, key=lambda r: (r.created, r.run_id)):
            newest[r.series] = r
        rids = sorted({r.run_id for r in newest.values()})
        out.append((mach, op, "+".join(rids), sorted(newest.values(), key=lambda r: (r.created, r.run_id))))
    return out
