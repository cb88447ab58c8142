"""The sampled suite's views (issue 25): robocache against its peers on shapes drawn from a seeded
distribution over what users pass, per op, seed and GPU, and the summary the issue's note quotes.

Definitions (exact; :func:`summary` computes them, ``robocache-bench report --sampled`` prints them, the
dashboard's Sampled page shows them):

- a **point** is one sampled case id and dtype (``case.params.kind == "sampled"``) of one measurement (one run per
  machine, op, seed and robocache provider: :func:`~.records.runs_per_op` over that seed's records, among the runs
  that measured that provider and torch.compile) where the robocache provider and at least one ``torch.compile``
  mode are ``ok``. The robocache providers (:func:`ours_providers`) are ``robocache`` (the public API) and each
  kernel version ``robocache@vN`` (a kernel-version run, ``--providers robocache@v2,robocache@v3,torch_compile``,
  has no ``robocache`` record): each is a point of its own, its row naming it (``provider``);
- its **ratio** is torch.compile's faster mode's median / that robocache provider's median (above 1: robocache
  faster); the ratios against torch eager and CuPy are the same with their medians, where they are ``ok``;
- **share >= 1.0x**: points whose ratio is at least 1.0, over all points; **worst** and **median**: of the ratios;
- **large points**: points whose robocache record moved at least :data:`LARGE_BYTES` (``case.bytes``, the minimal
  traffic of the inputs timed, decimal MB); **share at >= 80% of ceiling**: large points whose robocache record's
  ``pct_of_ceiling`` is at least 80, over the large points that carry one;
- **slow-compile points**: points where torch.compile's faster mode reached less than 60% of the copy ceiling;
  **share >= 1.5x** of them.
"""
from __future__ import annotations

import statistics
from collections import defaultdict
from collections.abc import Iterable
from typing import Any

from ... import providers
from ...providers import OURS
from .. import ops
from ..columns import Row, as_rows
from .records import compile_best, compile_mode, flagged, index, ok_time, runs_per_op
from .tables import Section, fmt_num, fmt_us, fmt_x, render, table

LARGE_BYTES = 256 * 10**6  # "moving >= 256 MB" (decimal, as every MB the report prints)
CEILING_SHARE = 80.0  # % of the copy ceiling a large point must reach
SLOW_COMPILE = 60.0  # % of the copy ceiling below which torch.compile is "slow" on a point
OTHER_PEERS = ("torch_eager", "cupy")


def is_sampled(r: Row) -> bool:
    """A row of a sampled point (its params say ``kind: sampled``)."""
    return r.params.get("kind") == "sampled"


def seed_of(r: Row) -> int | None:
    """The sample seed of a sampled row (None when its params do not carry one)."""
    s = r.params.get("sample_seed")
    return s if isinstance(s, int) and not isinstance(s, bool) else None


def features(op: str, p: dict[str, Any]) -> int | None:
    """The feature width a point is plotted against (the op's :meth:`~robocache.bench.ops.base.Op.features`);
    None for an op the registry does not hold."""
    return ops.get(op).features(p) if op in ops.names() else None


def ours_providers(records: Iterable[Any]) -> list[str]:
    """The robocache providers among ``records`` (``robocache`` and its kernel versions ``robocache@vN``: the
    provider table's roles ``ours`` and ``version``, :func:`robocache.providers.role`), in the table's order."""
    found = {r.provider for r in as_rows(records)}
    return sorted((p for p in found if providers.role(p) in ("ours", "version")), key=providers.order)


def _label(op: str, provider: str) -> str:
    """The op cell of a point's row: the op, and the robocache provider when it is a kernel version."""
    return op if provider == OURS else f"{op} ({provider})"


def _pct(r: Row | None) -> float | None:
    return r.pct_of_ceiling if r is not None and r.status == "ok" else None


def point_rows(records: Iterable[Row]) -> list[dict[str, Any]]:
    """Every point (see the module's definitions), one row each: ``machine, arch, gpu, run_id, op, provider, seed,
    case, dtype, stratum, bytes, features, ours_us, compile_us, compile_mode, ratio, pct_of_ceiling, compile_pct,
    flagged, launch, vs_torch_eager, vs_cupy`` (``launch``: robocache's tuned launch, :func:`columns.launch_text`),
    per seed and robocache provider in grid order of the index."""
    sampled = [r for r in as_rows(records) if r.timed and is_sampled(r) and seed_of(r) is not None]
    by_seed: dict[int, list[Row]] = defaultdict(list)
    for r in sampled:
        by_seed[seed_of(r)].append(r)
    # the runs (and op) with an ok torch.compile record: a point's measurement must hold one
    with_compile = {(r.run_id, r.op) for r in sampled
                    if compile_mode(r.provider) is not None and r.status == "ok"}
    out = []
    for seed in sorted(by_seed):
        for mine_p in ours_providers(by_seed[seed]):
            out += _points_of(by_seed[seed], seed, mine_p, lambda r, p=mine_p: r.provider == p and (
                r.run_id, r.op) in with_compile)
    return out


def _points_of(records: list[Row], seed: int, mine_p: str, want: Any) -> list[dict[str, Any]]:
    """The points of one seed and robocache provider ``mine_p``: one measurement per machine and op (``want``: its
    runs measured ``mine_p`` and torch.compile)."""
    out = []
    for (machine, arch, gpu), op, rid, rs in runs_per_op(records, want):
        idx = index(rs)
        keys = sorted({(r.case_id, r.dtype) for r in rs},
                      key=lambda k: (_sample_index(idx.get((k[0], k[1], mine_p))), k))
        for cid, dt in keys:
            ours = ok_time(idx, cid, dt, mine_p)
            best = compile_best(idx, cid, dt)
            if not ours or not best:
                continue
            mine = idx[(cid, dt, mine_p)]
            p = mine.params
            row = {"machine": machine, "arch": arch, "gpu": gpu, "run_id": rid, "op": op, "provider": mine_p,
                   "seed": seed, "case": cid, "dtype": dt, "stratum": p.get("stratum", "base"),
                   "bytes": mine.bytes, "features": features(op, p), "ours_us": ours,
                   "compile_us": best[0], "compile_mode": best[1], "ratio": best[0] / ours,
                   "pct_of_ceiling": _pct(mine), "compile_pct": _pct(best[2]), "flagged": flagged(mine, best[2]),
                   "launch": mine.launch}
            for peer in OTHER_PEERS:
                t = ok_time(idx, cid, dt, peer)
                row[f"vs_{peer}"] = t / ours if t else None
            out.append(row)
    return out


def _sample_index(r: Row | None) -> Any:
    """A sampled point's place in its sample (its params' ``sample_index``; unknown: last)."""
    return (r.params if r is not None else {}).get("sample_index", 1 << 30)


def _share(n: int, of: int) -> float | None:
    return n / of if of else None


def summary(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per machine, op, robocache provider and seed over :func:`point_rows`: ``points``, ``at_least_1x`` (count) and ``share_1x``,
    ``worst`` (and ``worst_case``), ``median``, ``large`` points, ``large_with_ceiling`` (those carrying a % of
    ceiling), ``large_at_80`` and ``share_large_at_80``, ``slow_compile`` points, ``slow_at_1_5x`` and
    ``share_slow_1_5x``, the medians against torch eager and CuPy (``median_vs_torch_eager``,
    ``median_vs_cupy``, over the points where they ran), ``flagged`` (ratios involving a flagged record)."""
    groups: dict[tuple, list[dict[str, Any]]] = defaultdict(list)
    for r in rows:
        groups[(r["machine"], r["arch"], r["gpu"], r["run_id"], r["op"], r["seed"], r["provider"])].append(r)
    out = []
    for (machine, arch, gpu, rid, op, seed, prov), rs in sorted(groups.items(), key=lambda kv: (
            kv[0][0], ops.order(kv[0][4]), kv[0][4], providers.order(kv[0][6]), kv[0][5])):
        ratios = [r["ratio"] for r in rs]
        worst = min(rs, key=lambda r: r["ratio"])
        large = [r for r in rs if (r["bytes"] or 0) >= LARGE_BYTES]
        large_pct = [r for r in large if r["pct_of_ceiling"] is not None]
        at80 = sum(1 for r in large_pct if r["pct_of_ceiling"] >= CEILING_SHARE)
        slow = [r for r in rs if r["compile_pct"] is not None and r["compile_pct"] < SLOW_COMPILE]
        slow15 = sum(1 for r in slow if r["ratio"] >= 1.5)
        n1 = sum(1 for x in ratios if x >= 1.0)
        row = {"machine": machine, "arch": arch, "gpu": gpu, "run_id": rid, "op": op, "provider": prov, "seed": seed,
               "points": len(rs), "at_least_1x": n1, "share_1x": _share(n1, len(rs)), "worst": worst["ratio"],
               "worst_case": f"{worst['case']} {worst['dtype']}", "median": statistics.median(ratios),
               "large": len(large), "large_with_ceiling": len(large_pct), "large_at_80": at80,
               "share_large_at_80": _share(at80, len(large_pct)), "slow_compile": len(slow), "slow_at_1_5x": slow15,
               "share_slow_1_5x": _share(slow15, len(slow)), "flagged": sum(1 for r in rs if r["flagged"])}
        for peer in OTHER_PEERS:
            xs = [r[f"vs_{peer}"] for r in rs if r[f"vs_{peer}"] is not None]
            row[f"median_vs_{peer}"] = statistics.median(xs) if xs else None
            row[f"points_vs_{peer}"] = len(xs)
        out.append(row)
    return out


def gpu_pairs(rows: list[dict[str, Any]], min_bytes: int = LARGE_BYTES) -> list[dict[str, Any]]:
    """robocache on two GPUs over the same points (op, seed, case, dtype) moving at least ``min_bytes`` on both:
    per op, seed and pair of machines of different architectures (ordered by architecture name, so ``H100`` then
    ``H200``), ``ratio`` = the first's median / the second's (above 1: the second faster): ``points``, ``worst``,
    ``median``, ``at_least_1_3x``."""
    by: dict[tuple, dict[tuple[str, str], dict[str, Any]]] = defaultdict(dict)
    for r in rows:
        if (r["bytes"] or 0) >= min_bytes:
            by[(r["op"], r["provider"], r["seed"], r["case"], r["dtype"])][(r["arch"], r["machine"])] = r
    groups: dict[tuple, list[float]] = defaultdict(list)
    for (op, prov, seed, _cid, _dt), per in by.items():
        machines = sorted(per)
        for i, a in enumerate(machines):
            for b in machines[i + 1:]:
                if a[0] != b[0]:
                    groups[(op, prov, seed, a, b)].append(per[a]["ours_us"] / per[b]["ours_us"])
    out = []
    for (op, prov, seed, a, b), xs in sorted(groups.items(), key=lambda kv: (
            ops.order(kv[0][0]), kv[0][0], providers.order(kv[0][1]), kv[0][2:])):
        out.append({"op": op, "provider": prov, "seed": seed, "first": f"{a[0]} ({a[1]})", "second": f"{b[0]} ({b[1]})",
                    "points": len(xs), "worst": min(xs), "median": statistics.median(xs),
                    "at_least_1_3x": sum(1 for x in xs if x >= 1.3)})
    return out


def _share_text(n: int, of: int) -> str:
    return f"{n} of {of} ({100 * n / of:.0f}%)" if of else "-"


def summary_table(records: Iterable[Row]) -> str:
    """Markdown: the per-op summary (share >= 1.0x, worst, median, large points at >= 80% of the ceiling, ...)."""
    rows = summary(point_rows(records))
    if not rows:
        return ("_No sampled point with both robocache and torch.compile measured (`robocache-bench run --suite "
                "sampled`)._")
    body = [[_label(r["op"], r["provider"]), f"{r['arch']} ({r['machine']})", r["seed"], r["run_id"], r["points"],
             _share_text(r["at_least_1x"], r["points"]), f"{r['worst']:.2f}x ({r['worst_case']})",
             f"{r['median']:.2f}x", _share_text(r["large_at_80"], r["large_with_ceiling"]),
             _share_text(r["slow_at_1_5x"], r["slow_compile"]),
             fmt_x(r["median_vs_torch_eager"]), fmt_x(r["median_vs_cupy"]), r["flagged"]] for r in rows]
    return (f"Ratio = torch.compile's faster mode / robocache per sampled point (above 1: robocache faster). Large "
            f"points move at least {LARGE_BYTES // 10**6} MB (the record's minimal traffic); slow-compile points are "
            f"those where torch.compile's faster mode reached less than {SLOW_COMPILE:.0f}% of the copy ceiling. "
            "Medians against torch eager and CuPy are over the points where they ran.\n\n"
            + table(["op", "GPU (machine)", "seed", "run", "points", ">= 1.0x", "worst", "median",
                     f"large at >= {CEILING_SHARE:.0f}% of ceiling", "slow-compile at >= 1.5x",
                     "median vs torch eager", "median vs CuPy", "flagged"], body))


def pairs_table(records: Iterable[Row]) -> str:
    """Markdown: robocache's time on one GPU over another on the large points both measured."""
    rows = gpu_pairs(point_rows(records))
    if not rows:
        return f"_No large sampled point (>= {LARGE_BYTES // 10**6} MB) measured on two GPU architectures._"
    body = [[_label(r["op"], r["provider"]), r["seed"], r["first"], r["second"], r["points"], f"{r['worst']:.2f}x", f"{r['median']:.2f}x",
             _share_text(r["at_least_1_3x"], r["points"])] for r in rows]
    return ("robocache's median on the first GPU / on the second, per large point both measured (above 1: the "
            "second faster).\n\n" + table(["op", "seed", "first GPU", "second GPU", "points", "worst", "median",
                                           ">= 1.3x"], body))


def points_table(records: Iterable[Row]) -> str:
    """Markdown: every point, worst ratio first."""
    rows = sorted(point_rows(records), key=lambda r: (r["machine"], ops.order(r["op"]), providers.order(r["provider"]),
                                                      r["seed"], r["ratio"]))
    if not rows:
        return "_No sampled points._"
    body = [[_label(r["op"], r["provider"]), f"{r['arch']} ({r['machine']})", r["seed"], r["case"], r["dtype"],
             fmt_num(r["bytes"], "B"), r["features"] if r["features"] is not None else "-", fmt_us(r["ours_us"]),
             fmt_us(r["compile_us"]), f"{r['ratio']:.2f}x ({r['compile_mode']})",
             "-" if r["pct_of_ceiling"] is None else f"{r['pct_of_ceiling']:.0f}%",
             fmt_x(r["vs_torch_eager"]), fmt_x(r["vs_cupy"]), r["launch"] or "-", "flagged" if r["flagged"] else "-"]
            for r in rows]
    return table(["op", "GPU (machine)", "seed", "case", "dtype", "bytes moved", "features", "robocache p50 us",
                  "torch.compile p50 us", "vs torch.compile (mode)", "% of ceiling", "vs torch eager", "vs CuPy",
                  "robocache's launch (source)", "flags"], body)


def sampled_sections(records: Iterable[Any]) -> list[Section]:
    """The sections of :func:`sampled`, each rendered on demand (over the frame's rows, or loaded records read as
    rows)."""
    records = as_rows(records)
    return [("##", "Summary per op", lambda: summary_table(records)),
            ("##", "GPU over GPU on the large points", lambda: pairs_table(records)),
            ("##", "Every point, worst first", lambda: points_table(records))]


def sampled(records: Iterable[Any]) -> str:
    """Markdown over rows (or records) of any number of runs and machines (one measurement per machine, op and seed)."""
    return render("robocache on sampled shapes: against its peers", None, sampled_sections(records))
