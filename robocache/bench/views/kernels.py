"""Kernel views over records of any number of runs and machines (one measurement per machine and op,
:func:`~.records.runs_per_op`): the kernel versions' optimisation journey, robocache against torch.compile at its
best, and the call cost (host time per tiny call)."""
from __future__ import annotations

import functools
import math
import statistics
from collections import defaultdict
from collections.abc import Iterable
from typing import Any

from ... import providers
from ...providers import OURS, label, version_number, version_of
from .. import ops, specs
from .pipelines import latest_pipeline_runs, pipelines
from ..columns import Row, as_rows
from .records import compile_best, flagged, index, ok_time, runs_per_op
from .tables import Section, code, esc, fmt_us, fmt_x, render, table


def _geomean(xs: list[float]) -> float | None:
    return math.exp(sum(math.log(x) for x in xs) / len(xs)) if xs else None


def _versions(records: Iterable[Row], op: str) -> list[str]:
    return sorted({r.provider for r in records
                   if r.op == op and version_of(r.provider)}, key=version_number)


@functools.lru_cache(maxsize=1)
def _grid_ids() -> dict[str, int]:
    """Case id -> its position in the grid (ops and shapes in the order specs declares them)."""
    out: dict[str, int] = {}
    for pt in specs.POINTS:
        out.setdefault(f"{pt.op}/{pt.tag}", len(out))
    return out


def _grid_order(key: tuple[str, str]) -> tuple[int, int, str, str]:
    """Sort key of a (case id, dtype): grid order, then dtype order, unknown cases last."""
    ids = _grid_ids()
    cid, dt = key
    return (ids.get(cid, len(ids)),
            specs.GPU_DTYPES.index(dt) if dt in specs.GPU_DTYPES else 9, cid, dt)


def representative(records: Iterable[Any], op: str) -> tuple[str, str] | None:
    """The (case id, dtype) an op's journey is read on: the first of the op's ``representative`` that every version
    measured, else the case in grid order that the most versions measured (``ok``)."""
    records = as_rows(records)
    vers = _versions(records, op)
    ok: dict[tuple[str, str], set[str]] = defaultdict(set)
    for r in records:
        if r.op == op and r.status == "ok" and r.provider in vers and r.p50:
            ok[(r.case_id, r.dtype)].add(r.provider)
    if not ok:
        return None
    for key in (ops.get(op).representative if op in ops.names() else ()):
        if ok.get(key) == set(vers):
            return key
    return min(ok, key=lambda k: (-len(ok[k]), _grid_order(k)))


def journey_rows(records: Iterable[Row]) -> list[dict[str, Any]]:
    """The optimisation journey: per machine (one run each), op and kernel version, one row.

    Columns: ``machine, arch, gpu, run_id, op, version, provider, case, dtype, p50_us, gb_per_s,
    pct_of_ceiling, speedup_vs_v1`` (on the representative case), ``vs_compile`` (torch.compile at its best
    / this version, ``compile_mode`` the mode that won), ``geomean_vs_v1`` with ``cases_vs_v1``, ``min_vs_v1``,
    ``max_vs_v1`` (over every case and dtype of the run both measured), ``flagged``. A last row per op,
    ``version == "public"``, is the public API (``robocache``) on the same case. The first version measured
    is the base (v1 when it ran).
    """
    rows: list[dict[str, Any]] = []
    single = [r for r in as_rows(records) if r.timed]
    for (machine, arch, gpu), op, rid, rs in runs_per_op(single, lambda r: version_of(r.provider)):
        idx = index(rs)
        vers = _versions(rs, op)
        rep = representative(rs, op)
        base = vers[0]
        keys = sorted({(r.case_id, r.dtype) for r in rs if r.op == op})
        for prov in vers + ([OURS] if any(r.provider == OURS and r.op == op
                                          for r in rs) else []):
            row: dict[str, Any] = {"machine": machine, "arch": arch, "gpu": gpu, "run_id": rid, "op": op,
                                   "version": version_of(prov) or "public", "provider": prov,
                                   "case": rep[0] if rep else None, "dtype": rep[1] if rep else None}
            row.update(_journey_on_case(idx, rep, prov, base))
            row.update(_journey_vs_base(idx, keys, prov, base))
            rows.append(row)
    return rows


def _journey_on_case(idx: dict[Any, Any], rep: tuple[str, str] | None, prov: str, base: str) -> dict[str, Any]:
    """A journey row's figures on the representative case ``rep``: status, time, bandwidth, speed-up over ``base``,
    torch.compile's best over it, flagged."""
    r = idx.get((rep[0], rep[1], prov)) if rep else None
    ok = r is not None and r.status == "ok"
    t = r.p50 if ok else None
    t1 = ok_time(idx, rep[0], rep[1], base) if rep else None
    best = compile_best(idx, rep[0], rep[1]) if rep else None
    return dict(status=r.status if r is not None else "not measured", p50_us=t,
                gb_per_s=r.gb_per_s if ok else None, pct_of_ceiling=r.pct_of_ceiling if ok else None,
                speedup_vs_v1=t1 / t if t and t1 else None,
                vs_compile=best[0] / t if t and best else None,
                compile_mode=best[1] if t and best else None,
                flagged=flagged(r, idx.get((rep[0], rep[1], base)) if rep else None, best[2] if best else None))


def _journey_vs_base(idx: dict[Any, Any], keys: list[tuple[str, str]], prov: str, base: str) -> dict[str, Any]:
    """A journey row's speed-up over ``base`` on every case and dtype both measured: geomean, count, min, max."""
    ratios = []
    for cid, dt in keys:
        a, b = ok_time(idx, cid, dt, base), ok_time(idx, cid, dt, prov)
        if a and b:
            ratios.append(a / b)
    return dict(base=version_of(base), geomean_vs_v1=_geomean(ratios), cases_vs_v1=len(ratios),
                min_vs_v1=min(ratios) if ratios else None, max_vs_v1=max(ratios) if ratios else None)


def _pct(v: float | None) -> str:
    return "-" if v is None else f"{v:.1f}%"


def journey(records: Iterable[Row]) -> str:
    """Markdown: one optimisation-journey table per op and GPU (the seed's table, from our records)."""
    rows = journey_rows(records)
    if not rows:
        return "_No kernel versions (providers robocache@v1, robocache@v2, ...) in these records._"
    out = []
    groups: dict[tuple, list[dict[str, Any]]] = defaultdict(list)
    for r in rows:
        groups[(r["machine"], r["arch"], r["gpu"], r["run_id"], r["op"])].append(r)
    for (machine, arch, gpu, rid, op), rs in groups.items():
        case = next((r["case"] for r in rs if r["case"]), None)
        dtype = next((r["dtype"] for r in rs if r["dtype"]), None)
        base = rs[0]["base"]
        out.append(f"**{esc(op)}** on {esc(arch)} (`{code(machine)}`, {esc(gpu)}), run `{code(rid)}`; "
                   f"representative case {esc(case or 'none')} {esc(dtype or '')}")
        body = []
        for r in rs:
            vs = fmt_x(r["vs_compile"]) + (f" ({r['compile_mode']})" if r["compile_mode"] else "")
            geo = "-" if r["geomean_vs_v1"] is None else (
                f"{r['geomean_vs_v1']:.2f}x over {r['cases_vs_v1']} cases ({r['min_vs_v1']:.2f}-{r['max_vs_v1']:.2f}x)")
            name = r["version"] if r["version"] != "public" else "public API (robocache)"
            body.append([name, r["status"] if r["status"] != "ok" else fmt_us(r["p50_us"]),
                         "-" if r["gb_per_s"] is None else f"{r['gb_per_s']:.0f}", _pct(r["pct_of_ceiling"]),
                         fmt_x(r["speedup_vs_v1"]), vs, geo, "flagged" if r["flagged"] else "-"])
        out.append(table(["version", "p50 us", "GB/s", "% of copy ceiling", f"speedup vs {base}",
                          "vs torch.compile (best mode)", f"geomean speedup vs {base} (range)", "flags"], body))
    return ("Kernel versions measured side by side in one run per GPU (providers `robocache@vN`; the public API "
            "calls the best). Speedups are medians' ratios; vs torch.compile = torch.compile's faster mode / this "
            "version (above 1: robocache faster); the geomean is over every case and dtype of the run both "
            "versions measured.\n\n" + "\n\n".join(out))


def vs_compile_cases(records: Iterable[Row], provider: str = OURS) -> list[dict[str, Any]]:
    """Per machine (one run each), op, case and dtype: torch.compile at its best / ``provider`` (both ``ok``).

    Columns: ``machine, arch, gpu, run_id, op, case, dtype, ours_us, compile_us, compile_mode, ratio,
    flagged``. Ratio above 1: ``provider`` is faster.
    """
    out = []
    single = [r for r in as_rows(records) if r.timed]
    want = (lambda r: r.provider == provider)  # noqa: E731
    for (machine, arch, gpu), _op, rid, rs in runs_per_op(single, want):
        idx = index(rs)
        for cid, dt in sorted({(r.case_id, r.dtype) for r in rs}, key=_grid_order):
            ours = ok_time(idx, cid, dt, provider)
            best = compile_best(idx, cid, dt)
            if not ours or not best:
                continue
            out.append({"machine": machine, "arch": arch, "gpu": gpu, "run_id": rid, "op": idx[(cid, dt, provider)].op,
                        "case": cid, "dtype": dt, "ours_us": ours, "compile_us": best[0],
                        "compile_mode": best[1], "ratio": best[0] / ours,
                        "flagged": flagged(idx.get((cid, dt, provider)), best[2])})
    return out


def vs_compile_summary(cases: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per machine and op over :func:`vs_compile_cases`: worst (named), median and best ratio, cases >= 1.0x,
    how often each torch.compile mode was the faster one, and how many ratios involve a flagged record."""
    groups: dict[tuple, list[dict[str, Any]]] = defaultdict(list)
    for c in cases:
        groups[(c["machine"], c["arch"], c["gpu"], c["run_id"], c["op"])].append(c)
    out = []
    for (machine, arch, gpu, rid, op), cs in sorted(groups.items(), key=lambda kv: (
            kv[0][0], ops.order(kv[0][4]), kv[0][4])):
        cs = sorted(cs, key=lambda c: c["ratio"])
        modes: dict[str, int] = defaultdict(int)
        for c in cs:
            modes[c["compile_mode"]] += 1
        out.append({"machine": machine, "arch": arch, "gpu": gpu, "run_id": rid, "op": op, "cases": len(cs),
                    "worst": cs[0]["ratio"], "worst_case": f"{cs[0]['case']} {cs[0]['dtype']}",
                    "median": statistics.median(c["ratio"] for c in cs), "best": cs[-1]["ratio"],
                    "best_case": f"{cs[-1]['case']} {cs[-1]['dtype']}",
                    "at_least_1x": sum(1 for c in cs if c["ratio"] >= 1.0),
                    "compile_modes": ", ".join(f"{m} {n}" for m, n in sorted(modes.items())),
                    "flagged": sum(1 for c in cs if c["flagged"])})
    return out


def vs_compile(records: Iterable[Row], provider: str = OURS) -> str:
    """Markdown: per op and GPU, robocache against torch.compile at its best over every case of the run."""
    rows = vs_compile_summary(vs_compile_cases(records, provider))
    if not rows:
        return f"_No case with both {esc(label(provider))} and torch.compile measured._"
    body = [[r["op"], f"{r['arch']} ({r['machine']})", r["run_id"], r["cases"],
             f"{r['worst']:.2f}x ({r['worst_case']})", f"{r['median']:.2f}x", f"{r['best']:.2f}x ({r['best_case']})",
             f"{r['at_least_1x']} of {r['cases']}", r["compile_modes"], r["flagged"]] for r in rows]
    return ("Ratio = torch.compile's faster mode / robocache, per case and dtype of one run per GPU (above 1: "
            "robocache faster); \"faster mode\" counts how often each torch.compile mode won.\n\n"
            + table(["op", "GPU (machine)", "run", "cases", "worst", "median", "best", "cases >= 1.0x",
                     "faster mode", "flagged"], body))


def _is_bare(provider: str) -> bool:
    """A provider timing a bare kernel launch (the call-cost floor): the table's role ``floor``."""
    return providers.role(provider) == "floor"


def call_cost_rows(records: Iterable[Row]) -> list[dict[str, Any]]:
    """Call-cost (dispatch) cases: host time per call of a tiny call, per machine (one run each), case and
    provider; ``vs_bare`` = this / the bare-launch provider of the case when one ran (the provider table's role
    ``floor``). Empty when the records carry no dispatch case."""
    out = []
    disp = [r for r in as_rows(records) if r.is_dispatch and not r.is_multigpu]
    for (machine, arch, _gpu), _op, rid, rs in _call_cost_runs(disp):
        by: dict[tuple[str, str], list[Row]] = defaultdict(list)
        for r in rs:
            by[(r.case_id, r.dtype)].append(r)
        for (cid, dt), group in sorted(by.items()):
            out += _call_cost_case(group, {"machine": machine, "arch": arch, "run_id": rid, "case": cid, "dtype": dt})
    return out


def _call_cost_runs(disp: list[Row]) -> list[Any]:
    """One run per machine and op of the dispatch records (:func:`runs_per_op`): a measurement with the launch floor
    beside the public call (a run narrowed to some providers may hold the public call alone); any measurement where
    none has one."""
    floor = list(runs_per_op(disp, want=lambda r: _is_bare(r.provider)))
    seen = {(m, op) for m, op, _, _ in floor}
    return floor + [x for x in runs_per_op(disp) if (x[0], x[1]) not in seen]


def _call_cost_case(group: list[Row], where: dict[str, Any]) -> list[dict[str, Any]]:
    """The call-cost rows of one case and dtype of one run (``where``: its machine, arch, run, case and dtype), one
    per provider in the provider table's order, each against the case's bare launch."""
    bare = [r for r in group if r.status == "ok" and r.p50 and _is_bare(r.provider)]
    floor = min((r.p50 for r in bare), default=None)
    ours = next((r.interleaved for r in group if r.provider == OURS and r.status == "ok"), None)
    out = []
    for r in sorted(group, key=lambda r: providers.order(r.provider)):
        t = r.p50 if r.status == "ok" else None
        # schema v3: the GPU's own time per call, and whether it kept up
        out.append({**where, "provider": r.provider, "status": r.status, "timer": r.timer,
                    "us_per_call": t, "vs_bare": t / floor if t and floor else None,
                    "device_us": r.dispatch_device_us, "gpu_keeps_up": r.dispatch_gpu_keeps_up,
                    **_interleaved_cells(ours, r.provider, r.interleaved if r.status == "ok" else None),
                    "flagged": flagged(r)})
    return out


# the interleaved ratio (schema Interleaved) each call-cost provider's row shows when its own record has none
# (records before issue 27 measured it on the public API's record only): the public call on torch tensors on
# robocache's row, on CuPy arrays on robocache@cupy's
_INTERLEAVED_OF = {OURS: "ratio", f"{OURS}@cupy": "cupy_ratio"}


def _interleaved_cells(inter: Any, provider: str, own: Any = None) -> dict[str, Any]:
    """``interleaved_p20/p50/p80`` (the public call / the bare launch, timed interleaved in one process: issue
    25) and ``interleaved_rounds`` for ``provider``'s row of a call-cost case: the row's own record's ratio
    (``own``; its public call is the row's), else the public API's record's (``inter``) figure for this provider;
    None where not measured."""
    if own is not None:
        inter, key = own, "ratio"
    else:
        key = _INTERLEAVED_OF.get(provider)
    if inter is None or key is None:
        return {"interleaved_p20": None, "interleaved_p50": None, "interleaved_p80": None, "interleaved_rounds": None}
    return {"interleaved_p20": inter[f"{key}_p20"], "interleaved_p50": inter[f"{key}_p50"],
            "interleaved_p80": inter[f"{key}_p80"], "interleaved_rounds": inter["rounds"]}


def _interleaved_text(r: dict[str, Any]) -> str:
    if r["interleaved_p50"] is None:
        return "-"
    return (f"{r['interleaved_p50']:.2f}x ({r['interleaved_p20']:.2f}-{r['interleaved_p80']:.2f}, "
            f"{r['interleaved_rounds']} rounds)")


def call_cost(records: Iterable[Row]) -> str:
    """Markdown: the call-cost table, or a line saying the records carry no dispatch case."""
    rows = call_cost_rows(records)
    if not rows:
        return "_No call-cost (dispatch) case in these records._"
    body = [[f"{r['arch']} ({r['machine']})", r["case"], r["dtype"], label(r["provider"]), r["timer"] or "-",
             r["status"] if r["status"] != "ok" else fmt_us(r["us_per_call"]), fmt_x(r["vs_bare"]),
             _interleaved_text(r), fmt_us(r["device_us"]),
             {True: "yes", False: "no"}.get(r["gpu_keeps_up"], "-"), "flagged" if r["flagged"] else "-"]
            for r in rows]
    return ("Host time per call of a tiny call in a tight loop (what a training loop pays per call); "
            "x bare launch = this / a bare kernel launch measured in the same run (separate processes); "
            "interleaved = the public call / the bare launch timed in one process, loops alternating round after "
            "round, median of the per-round ratios (p20-p80, rounds): the figure the call-cost target (<= 2x) is "
            "judged by; device us = the GPU's own time per call where recorded (the host cost only counts when "
            "the GPU keeps up).\n\n"
            + table(["GPU (machine)", "case", "dtype", "provider", "timer", "us per call", "x bare launch",
                     "interleaved x bare (p20-p80)", "device us", "GPU keeps up", "flags"], body))


def kernels_sections(records: Iterable[Any], pipeline_records: Iterable[Any] | None = None) -> list[Section]:
    """The sections of :func:`kernels`, each rendered on demand. ``records``: the frame's rows (or loaded
    records, read as rows); the end-to-end section reads the pipeline runs' records in full: ``pipeline_records``
    (those of the runs :func:`~.pipelines.latest_pipeline_runs` picks of the rows), else ``records`` when they are
    loaded records."""
    items = list(records)
    records = as_rows(items)
    if pipeline_records is None:
        pipeline_records = () if records is items else items
    pipe = latest_pipeline_runs(pipeline_records)
    return [("##", "Optimisation journey", lambda: journey(records)),
            ("##", "Against torch.compile at its best", lambda: vs_compile(records)),
            ("##", "Call cost", lambda: call_cost(records)),
            *([("#", "End-to-end pipelines (the newest run per machine)", lambda: pipelines(pipe))] if pipe else [])]


def kernels(records: Iterable[Any], pipeline_records: Iterable[Any] | None = None) -> str:
    """Markdown over rows (or records) of any number of runs and machines (one run per machine and op, see
    :func:`runs_per_op`): the journey, robocache vs torch.compile at its best, the call cost, and the end-to-end
    pipelines (:func:`kernels_sections`)."""
    return render("robocache kernels: journey and torch.compile at its best", None,
                  kernels_sections(records, pipeline_records))
