"""Selecting and indexing records for the views: runs, one measurement per machine and op, record kinds
(call cost, multi-GPU, pipelines), a case's median and flags, torch.compile at its best.

The across-runs views (kernels, sampled) read the frame's rows (:class:`robocache.bench.columns.Row`); the one-run
views (``show``, ``report``, the multi-GPU and pipeline tables) read loaded records
(:class:`robocache.bench.schema.Record`, typed: attribute access only). Each helper reads one of the two: the
comparisons inside one run or measurement (:func:`index`, :func:`ok_time`, :func:`compile_best`, :func:`flagged`)
read rows (a one-run view reads its records as rows for them, :func:`robocache.bench.columns.as_rows`); the rest
read records (a row carries the same facts as fields: ``provider``, ``p50``, ``flags``, ``where``, ``is_dispatch``,
``is_multigpu``, ``pipeline``, ``timed``). Only :func:`runs` and :func:`pick_run`, which read the run id and the
creation time, take either (:data:`Item`)."""
from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from typing import Any

from ...providers import OURS, OURS_CPU, compile_mode
from .. import ops
from ..columns import Row, as_rows, dispatch_case, pipeline_kind_of, where_of
from ..schema import Env, Record

Item = Record | Row  # a loaded record or a frame row: what runs() and pick_run() take

# the env of a record without one (a hand-built record): every field unknown
NO_ENV = Env(**dict.fromkeys(Env.__struct_fields__))


def env_of(r: Record) -> Env:
    """The record's env, or :data:`NO_ENV` (every field None) when it carries none."""
    return r.env if r.env is not None else NO_ENV


def ours(records: Iterable[Record]) -> str:
    """The provider robocache's figures are read from in these records: its public API on the GPU (``robocache``)
    where the records have it, else the same API on NumPy arrays (``robocache@numpy``, a run without a GPU), else
    ``robocache`` (whose absence the views then show)."""
    seen = {r.case.provider for r in records}
    return OURS if OURS in seen or OURS_CPU not in seen else OURS_CPU


def is_dispatch(r: Record) -> bool:
    """A call-cost ("dispatch") case: host time per call of a tiny call in a tight loop.

    Recognised by its case id (``<op>/dispatch...``) or its params (``kind``/``mode`` == ``"dispatch"`` or a
    true ``dispatch`` key), so the rest of the report can leave these host-time figures out of device-time
    comparisons whatever the final field names are (a row's ``is_dispatch``).
    """
    return dispatch_case(r.case.id, r.case.params)


def runs(records: Iterable[Item]) -> dict[str, list[Item]]:
    """Records grouped by run id, in the order of their creation."""
    out: dict[str, list[Item]] = defaultdict(list)
    for r in records:
        out[r.run_id].append(r)
    return dict(sorted(out.items(), key=lambda kv: min(r.created for r in kv[1])))


def pick_run(records: list[Item], run_id: str | None = None) -> tuple[str, list[Item]]:
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


def p50(r: Record) -> float | None:
    """The record's median time (a row's ``p50``), None without metrics."""
    return r.metrics.time_us.p50 if r.metrics is not None else None


def flags(r: Record) -> str:
    """``throttled,contended,noisy`` as flagged, ``-`` for none (a row's ``flags``)."""
    h = r.health
    return ",".join(k for k, v in (("throttled", h.throttled), ("contended", h.contended), ("noisy", h.noisy))
                    if v) or "-"


def flagged(*rows: Row | None) -> bool:
    """Any of ``rows`` (None: absent) flagged throttled, contended or noisy."""
    return any(r.flags != "-" for r in rows if r)


def index(rows: Iterable[Row]) -> dict[tuple[str, str, str], Row]:
    """(case id, dtype, provider) -> the row (the last one of a key)."""
    return {(r.case_id, r.dtype, r.provider): r for r in rows}


def ok_time(idx: dict[tuple[str, str, str], Row], cid: str, dtype: str, prov: str) -> float | None:
    """The median of the ``ok`` row of (``cid``, ``dtype``, ``prov``) in ``idx``, else None."""
    r = idx.get((cid, dtype, prov))
    return r.p50 if r and r.status == "ok" else None


def compile_best(idx: dict[tuple[str, str, str], Row], cid: str, dtype: str) -> tuple[float, str, Row] | None:
    """torch.compile at its best on one case: (median, mode, row) of the fastest ``ok`` compile mode.

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


def is_multigpu(r: Record) -> bool:
    """A record of a multi-GPU case (its params name the world size; a row's ``is_multigpu``)."""
    return "world_size" in r.case.params


def machine(r: Record) -> tuple[str, str, str]:
    """(machine, arch, GPU name) from the record's env; ``?`` where unknown (a row's ``where``)."""
    return where_of(r.env)


def timed(records: Iterable[Record]) -> list[Record]:
    """Single-GPU device-time records: multi-GPU, call-cost (dispatch) and pipeline cases left out (the rows whose
    ``timed`` holds)."""
    return [r for r in records if not is_multigpu(r) and not is_dispatch(r) and not is_pipeline(r)]


def pipeline_kind(r: Record) -> str | None:
    """``dataload``, ``train``, ``infer`` or ``profile`` for a record of the pipelines or profile suites (its
    section's kind; a failed or skipped case without the section: from its suite and case), None otherwise (a
    row's ``pipeline``)."""
    return pipeline_kind_of(r.pipeline.kind if r.pipeline is not None else None, r.suite, r.case.op)


def is_pipeline(r: Record) -> bool:
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
