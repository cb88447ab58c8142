"""Tables from records: ``show`` (one run, every case) and ``report`` (the write-up's tables, markdown).

Every table is built from the records alone and the report's header says which
GPU, run and commit they came from. Speedups are ratios of medians measured side
by side in one run on one GPU; bandwidth is judged against the copy ceiling
measured in that same run.
"""
from __future__ import annotations

import contextlib
import contextvars
import functools
import math
import re
import statistics
from collections import defaultdict
from collections.abc import Iterable
from typing import Any

from .. import providers
from ..providers import OURS, compile_mode, label, version_of, version_number
from . import ops, specs
from .schema import Series, series_key
from .schema import PIPELINE_KINDS  # the pipelines suite's case kinds: dataload, train, infer

# What the report knows about providers is the provider table's (robocache.providers): labels, the order of
# columns and legends, which names are kernel versions and torch.compile modes.
provider_order = providers.order


def is_dispatch(r: dict[str, Any]) -> bool:
    """A call-cost ("dispatch") case: host time per call of a tiny call in a tight loop.

    Recognised by its case id (``<op>/dispatch...``) or its params (``kind``/``mode`` == ``"dispatch"`` or a
    true ``dispatch`` key), so the rest of the report can leave these host-time figures out of device-time
    comparisons whatever the final field names are.
    """
    c = r["case"]
    p = c.get("params") or {}
    tag = str(c["id"]).split("/", 1)[-1]
    return (tag.startswith("dispatch") or p.get("kind") == "dispatch" or p.get("mode") == "dispatch"
            or bool(p.get("dispatch")))


def runs(records: Iterable[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    """Records grouped by run id, in the order of their creation."""
    out: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for r in records:
        out[r["run_id"]].append(r)
    return dict(sorted(out.items(), key=lambda kv: min(r["created"] for r in kv[1])))


def pick_run(records: list[dict[str, Any]], run_id: str | None = None) -> tuple[str, list[dict[str, Any]]]:
    """The records of ``run_id`` (a unique prefix is enough), or of the latest run."""
    by = runs(records)
    if not by:
        raise ValueError("no records found; run `robocache-bench run` first or point at a results folder")
    if run_id is None:
        rid = list(by)[-1]
        return rid, by[rid]
    hits = [r for r in by if r.startswith(run_id)]
    if len(hits) != 1:
        raise ValueError(f"run {run_id!r} matches {len(hits)} runs; known runs: {', '.join(list(by)[-10:])}")
    return hits[0], by[hits[0]]


# --- formatting -------------------------------------------------------------------------------------

def _esc(x: Any) -> str:
    """Markdown-table-safe text (records are data, never markup)."""
    s = str(x)
    for ch in ("\\", "|", "<", ">", "`", "*", "_", "[", "]"):
        s = s.replace(ch, "\\" + ch)
    return s.replace("\n", " ")


def _us(x: float | None) -> str:
    if x is None:
        return "-"
    return f"{x:,.1f}" if x < 1e4 else f"{x:,.0f}"


def _num(x: float | None, unit: str = "") -> str:
    if x is None:
        return "-"
    for div, suf in ((1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(x) >= div:
            return f"{x / div:.3g}{suf}{unit}"
    return f"{x:.3g}{unit}"


# The tables of the text being rendered, unescaped, while :func:`capture_tables` is active: the JSON output of
# ``report`` is the same tables the markdown is built from (one computation, two renderings).
_CAPTURE: contextvars.ContextVar[list[dict[str, Any]] | None] = contextvars.ContextVar("robocache_tables",
                                                                                       default=None)


@contextlib.contextmanager
def capture_tables():
    """Collect every :func:`table` rendered inside the block as ``{"columns": [...], "rows": [[...]]}`` (the cells
    as displayed, as plain strings: no markdown escapes)."""
    got: list[dict[str, Any]] = []
    token = _CAPTURE.set(got)
    try:
        yield got
    finally:
        _CAPTURE.reset(token)


def table(header: list[str], rows: list[list[Any]]) -> str:
    got = _CAPTURE.get()
    if got is not None:
        got.append({"columns": [str(h) for h in header],
                    "rows": [[str(c).replace("\n", " ") for c in row] for row in rows]})
    out = ["| " + " | ".join(_esc(h) for h in header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    out += ["| " + " | ".join(_esc(c) for c in row) + " |" for row in rows]
    return "\n".join(out)


def _p50(r: dict[str, Any]) -> float | None:
    m = r.get("metrics")
    return m["time_us"]["p50"] if m else None


def _flags(r: dict[str, Any]) -> str:
    h = r.get("health") or {}
    f = [k for k in ("throttled", "contended", "noisy") if h.get(k)]
    return ",".join(f) or "-"


# --- show -------------------------------------------------------------------------------------------

def case_rows(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Every case of one run as plain values (what ``show`` prints, and ``show --format json`` writes)."""
    rows = []
    for r in sorted(records, key=lambda r: (r["case"]["op"], r["case"]["id"], r["case"]["dtype"],
                                            r["case"]["provider"])):
        m = r.get("metrics") or {}
        h = r.get("health") or {}
        rows.append({"case": r["case"]["id"], "op": r["case"]["op"], "dtype": r["case"]["dtype"],
                     "provider": r["case"]["provider"], "status": r["status"], "p50_us": _p50(r),
                     "items_per_s": m.get("items_per_s"), "gb_per_s": m.get("gb_per_s"),
                     "pct_of_ceiling": m.get("pct_of_ceiling"),
                     "flags": [k for k in ("throttled", "contended", "noisy") if h.get(k)],
                     "reason": (r.get("reason") or "").splitlines()[0] if r["status"] != "ok" and r.get("reason")
                     else None})
    return rows


def show(records: list[dict[str, Any]], rows: list[dict[str, Any]] | None = None) -> str:
    """Every case of one run: status, median time, throughput, bandwidth, % of ceiling, flags."""
    cells = [[c["case"], c["dtype"], c["provider"], c["status"], _us(c["p50_us"]), _num(c["items_per_s"], "/s"),
              _num(c["gb_per_s"] and c["gb_per_s"] * 1e9, "B/s"),
              f"{c['pct_of_ceiling']:.1f}%" if c["pct_of_ceiling"] is not None else "-",
              ",".join(c["flags"]) or "-", (c["reason"] or "")[:70]]
             for c in (case_rows(records) if rows is None else rows)]
    return header(records) + "\n\n" + table(
        ["case", "dtype", "provider", "status", "p50 us", "items/s", "bandwidth", "% ceiling", "flags", "reason"],
        cells)


def run_facts(records: list[dict[str, Any]]) -> dict[str, Any]:
    """The facts of :func:`header` as plain values: run, suite, front end, commit, device, copy ceiling."""
    r0 = records[0]
    env = r0.get("env") or {}
    m0 = next((r["metrics"] for r in records if r.get("metrics")), None)
    return {"run_id": r0["run_id"], "suite": r0["suite"], "frontend": r0["frontend"],
            "created": min(r["created"] for r in records), "git_commit": r0.get("git_commit"),
            "git_dirty": r0.get("git_dirty"), "synthetic": any(bool(r.get("synthetic")) for r in records),
            "ceiling_gb_per_s": m0.get("ceiling_gb_per_s") if m0 else None,
            "env": {k: env.get(k) for k in ("machine", "device", "gpu_name", "arch", "compute_capability",
                                            "sm_count", "gpu_count", "driver", "cuda", "cpu", "python")}
            | {"libs": dict(env.get("libs") or {})}}


def header(records: list[dict[str, Any]]) -> str:
    r0 = records[0]
    env = r0.get("env") or {}
    m0 = next((r["metrics"] for r in records if r.get("metrics")), None)
    ceiling = m0.get("ceiling_gb_per_s") if m0 else None
    gpu = f"{env.get('gpu_name')} ({env.get('arch')}, sm {env.get('compute_capability')}, {env.get('sm_count')} SMs)" \
        if env.get("device") == "gpu" else f"CPU only ({env.get('cpu') or 'unknown CPU'}): host timer, no GPU"
    commit = r0.get("git_commit") or "unknown"
    dirty = " (uncommitted changes)" if r0.get("git_dirty") else ""
    synthetic = "\n\n**SYNTHETIC records (generated fixtures), not measurements.**" if any(
        r.get("synthetic") for r in records) else ""
    lines = [
        f"- **device**: {_esc(gpu)}; driver {_esc(env.get('driver'))}, CUDA {_esc(env.get('cuda'))}; "
        f"machine `{_esc(env.get('machine'))}`",
        f"- **run** `{_esc(r0['run_id'])}`, suite `{_esc(r0['suite'])}`, front end {_esc(r0['frontend'])}, "
        f"{_esc(min(r['created'] for r in records))}; **commit** `{_esc(commit)}`{dirty}",
        f"- **copy ceiling** measured in this run: {_num(ceiling * 1e9, 'B/s') if ceiling else 'not measured'}"
        " (device-to-device copy, bytes read + written)",
        "- libraries: " + ", ".join(f"{_esc(k)} {_esc(v)}" for k, v in sorted((env.get("libs") or {}).items())),
    ]
    view = dashboard_links(r0["run_id"], env.get("machine"))
    if view:
        lines.append(view)
    return "\n".join(lines) + synthetic


def dashboard_links(run_id: str, machine: str | None) -> str | None:
    """The dashboard's views of this run (its Runs page, and the machine's wins heat map and History),
    base URL from ``$ROBOCACHE_DASHBOARD_URL`` (else ``make run``'s http://127.0.0.1:8501): one markdown line.
    The query values are URL-encoded by :mod:`links`; a bad base URL leaves the line out (the report still
    prints) rather than printing a link that could break out of the markdown."""
    from . import links

    try:
        m = {"machine": machine} if machine else {}
        parts = [("this run", links.run_url(run_id)), ("where robocache wins", links.page_url("wins", m)),
                 ("history", links.page_url(links.HISTORY_PAGE, m))]
    except ValueError:
        return None
    return "- **dashboard**: " + ", ".join(f"[{t}]({u})" for t, u in parts)


# --- report -----------------------------------------------------------------------------------------

def _index(records: list[dict[str, Any]]) -> dict[tuple[str, str, str], dict[str, Any]]:
    return {(r["case"]["id"], r["case"]["dtype"], r["case"]["provider"]): r for r in records}


def _ok_time(idx, cid: str, dtype: str, prov: str) -> float | None:
    r = idx.get((cid, dtype, prov))
    return _p50(r) if r and r["status"] == "ok" else None


def _speed(ours: float | None, theirs: float | None) -> str:
    return f"{theirs / ours:.2f}x" if ours and theirs else "-"


def _providers(records) -> list[str]:
    """The providers present, in :func:`provider_order`."""
    return sorted({r["case"]["provider"] for r in records}, key=provider_order)


def compile_best(idx: dict[tuple[str, str, str], dict[str, Any]], cid: str, dtype: str
                 ) -> tuple[float, str, dict[str, Any]] | None:
    """torch.compile at its best on one case: (median, mode, record) of the fastest ``ok`` compile mode.

    Every ``torch_compile`` / ``torch_compile@<mode>`` record of the case competes; None when none is ``ok``.
    """
    best = None
    for (c, dt, prov), r in idx.items():
        if c != cid or dt != dtype or compile_mode(prov) is None:
            continue
        t = _ok_time(idx, cid, dtype, prov)
        if t is not None and (best is None or t < best[0]):
            best = (t, compile_mode(prov), r)
    return best


def headline_case() -> tuple[str, str] | None:
    """(title, case id) of the report's headline: the first registered op's that declares one (resample's
    classic case: B256, 100 -> 50, D32)."""
    return next((op.headline for op in ops.registered() if op.headline), None)


def headline(records: list[dict[str, Any]]) -> str:
    """The headline case (:func:`headline_case`) per dtype and provider, with robocache's speedup."""
    idx = _index(records)
    cid = (headline_case() or ("", ""))[1]
    rows = []
    for r in sorted((r for r in records if r["case"]["id"] == cid),
                    key=lambda r: (specs.GPU_DTYPES.index(r["case"]["dtype"]) if r["case"]["dtype"] in
                                   specs.GPU_DTYPES else 9, _providers(records).index(r["case"]["provider"]))):
        m = r.get("metrics") or {}
        ours = _ok_time(idx, cid, r["case"]["dtype"], OURS)
        prov = r["case"]["provider"]
        best = compile_best(idx, cid, r["case"]["dtype"]) if compile_mode(prov) else None
        both = sum(1 for p in _providers(records) if compile_mode(p)) > 1
        name = label(prov) + (" (faster mode)" if both and best and best[2] is r else "")
        rows.append([r["case"]["dtype"], name, r["status"],
                     _us(_p50(r)), _num(m.get("items_per_s"), " traj/s"),
                     f"{m['gb_per_s']:.0f}" if m.get("gb_per_s") is not None else "-",
                     f"{m['pct_of_ceiling']:.1f}%" if m.get("pct_of_ceiling") is not None else "-",
                     "1.00x" if r["case"]["provider"] == OURS else _speed(ours, _p50(r)), _flags(r)])
    grid = _headline_grid(records)
    if not rows:
        return "_The classic case is not in this run._" + grid
    return table(["dtype", "provider", "status", "p50 us", "throughput", "GB/s", "% ceiling",
                  "robocache speedup", "flags"], rows) + grid


def _headline_grid(records: list[dict[str, Any]]) -> str:
    """The headline's grid-wide line: per GPU, the median and the worst ratio torch.compile at its faster mode /
    robocache over every case and dtype of the run that measured both (:func:`vs_compile_cases`, the kernels
    report's own computation), so one case never stands for the grid. Empty without torch.compile."""
    cases = vs_compile_cases(records)
    if not cases:
        return ""
    by: dict[tuple[str, str], list[dict[str, Any]]] = defaultdict(list)
    for c in cases:
        by[(c["arch"], c["machine"])].append(c)
    lines = []
    for (arch, machine), cs in sorted(by.items()):
        worst = min(cs, key=lambda c: c["ratio"])
        med = statistics.median(c["ratio"] for c in cs)
        wins = sum(1 for c in cs if c["ratio"] >= 1.0)
        lines.append(f"- {_esc(arch)} ({_esc(machine)}), {len(cs)} cases and dtypes: median {med:.2f}x, worst "
                     f"{worst['ratio']:.2f}x ({_esc(worst['case'])} {_esc(worst['dtype'])}, torch.compile "
                     f"{_esc(worst['compile_mode'])}); robocache faster on {wins} of {len(cs)}")
    return ("\n\nAcross the grid, torch.compile at its faster mode / robocache (above 1: robocache faster):\n\n"
            + "\n".join(lines))


def dtypes(records: list[dict[str, Any]], provider: str = OURS) -> str:
    """Each case measured in several dtypes: median per dtype and the speedup of 16-bit over float32."""
    idx = _index(records)
    by_case: dict[str, set[str]] = defaultdict(set)
    for r in records:
        if r["case"]["provider"] == provider and r["status"] == "ok":
            by_case[r["case"]["id"]].add(r["case"]["dtype"])
    rows = []
    for cid in sorted(c for c, d in by_case.items() if len(d) > 1):
        t = {dt: _ok_time(idx, cid, dt, provider) for dt in specs.GPU_DTYPES}
        rows.append([cid] + [_us(t[dt]) for dt in specs.GPU_DTYPES]
                    + [_speed(t["float16"], t["float32"]), _speed(t["bfloat16"], t["float32"])])
    if not rows:
        return f"_No case with several dtypes for {provider} in this run._"
    return table(["case"] + [f"{dt} p50 us" for dt in specs.GPU_DTYPES]
                 + ["float16 vs float32", "bfloat16 vs float32"], rows)


def _scaling(records, op: str, axis: str, fixed: dict[str, int], dtype: str) -> str:
    idx = _index(records)
    provs = _providers(records)
    pts = {}
    for r in records:
        p = r["case"]["params"]
        if r["case"]["op"] != op or r["case"]["dtype"] != dtype or p.get("time_dtype", "float32") != "float32":
            continue
        if all(p.get(k) == v(p) if callable(v) else p.get(k) == v for k, v in fixed.items()):
            pts[p[axis]] = r["case"]["id"]
    if len(pts) < 2:
        return f"_Not enough points in this run for {axis} scaling ({dtype})._"
    rows = []
    for x in sorted(pts):
        cid = pts[x]
        ours_r = idx.get((cid, dtype, OURS))
        m = (ours_r or {}).get("metrics") or {}
        row = [x] + [_us(_ok_time(idx, cid, dtype, p)) for p in provs]
        row += [f"{m['gb_per_s']:.0f}" if m.get("gb_per_s") else "-",
                f"{m['pct_of_ceiling']:.1f}%" if m.get("pct_of_ceiling") is not None else "-"]
        rows.append(row)
    return table([axis] + [f"{label(p)} p50 us" for p in provs] + ["robocache GB/s", "% ceiling"], rows)


def peers(records: list[dict[str, Any]]) -> str:
    """Every case: robocache's median and its speedup over each peer (peer time / robocache time).

    torch.compile is one column at its best: the faster of its measured modes on that case, named.
    Kernel versions (``robocache@vN``) are not peers; the optimisation journey compares them.
    """
    idx = _index(records)
    provs = [p for p in _providers(records) if providers.role(p) == "peer" and not compile_mode(p)]
    has_compile = any(compile_mode(p) for p in _providers(records))
    keys = sorted({(r["case"]["id"], r["case"]["dtype"]) for r in records})
    rows = []

    def cell(ours: float | None, theirs: float | None, mine: Any, other: Any, suffix: str = "") -> str:
        s = _speed(ours, theirs)
        if s == "-":
            return s
        s += suffix
        if any(_flags(r) != "-" for r in (mine, other) if r):
            s += " (flagged)"  # throttled, contended or noisy on either side: read with care
        return s

    for cid, dt in keys:
        ours = _ok_time(idx, cid, dt, OURS)
        best = compile_best(idx, cid, dt) if has_compile else None
        if ours is None and best is None and not any(_ok_time(idx, cid, dt, p) for p in provs):
            continue
        mine = idx.get((cid, dt, OURS))
        cells = []
        if has_compile:
            cells.append(cell(ours, best[0], mine, best[2], f" ({best[1]})") if best else "-")
        cells += [cell(ours, _ok_time(idx, cid, dt, p), mine, idx.get((cid, dt, p))) for p in provs]
        rows.append([cid, dt, _us(ours)] + cells)
    head = ["case", "dtype", "robocache p50 us"] + (["vs torch.compile (best mode)"] if has_compile else []) \
        + [f"vs {label(p)}" for p in provs]
    return ("Speedups marked (flagged) involve a record flagged throttled, contended or noisy (see Health). "
            "torch.compile is judged at its best: the faster of its measured modes on each case, named in "
            "brackets.\n\n" + table(head, rows))


def roofline(records: list[dict[str, Any]], provider: str = OURS) -> str:
    """Bytes each case must move, the bandwidth reached, and % of the copy ceiling of this run."""
    rows = []
    for r in sorted((r for r in records if r["case"]["provider"] == provider and r["status"] == "ok"),
                    key=lambda r: -(r["metrics"]["pct_of_ceiling"] or r["metrics"]["gb_per_s"])):
        m = r["metrics"]
        rows.append([r["case"]["id"], r["case"]["dtype"], _num(r["case"]["bytes"], "B"), _us(m["time_us"]["p50"]),
                     f"{m['gb_per_s']:.0f}",
                     f"{m['pct_of_ceiling']:.1f}%" if m["pct_of_ceiling"] is not None else "-"])
    if not rows:
        return f"_No successful {provider} results in this run._"
    return table(["case", "dtype", "bytes moved", "p50 us", "GB/s", "% of copy ceiling"], rows)


def timer_check(records: list[dict[str, Any]], min_us: float = 25.0) -> str:
    """How far CUDA-event timing and CUDA-graph replay agree, per provider (cases of ``min_us`` and more).

    Graph replay removes the GPU-side gap between back-to-back launches, so providers that issue many
    kernels per call (torch eager) differ more than single-kernel ones; the table shows it per provider.
    """
    by: dict[str, list[tuple]] = defaultdict(list)
    for r in records:
        m = r.get("metrics")
        if r["status"] == "ok" and m and m.get("event_vs_graph") is not None and m["time_us"]["p50"] >= min_us:
            by[r["case"]["provider"]].append((abs(m["event_vs_graph"]), m["event_vs_graph"], r["case"]["id"],
                                              r["case"]["dtype"]))
    if not by:
        return f"_No case of {min_us:g} us or more has both timers in this run._"
    rows = []
    for prov in [p for p in _providers(records) if p in by]:
        d = sorted(by[prov])
        worst = d[-1]
        rows.append([label(prov), len(d), f"{100 * d[len(d) // 2][0]:.2f}%",
                     f"{100 * worst[1]:+.2f}% ({worst[2]} {worst[3]})"])
    return (f"Cases of {min_us:g} us and more, (event - graph) / graph:\n\n"
            + table(["provider", "cases", "median |diff|", "worst"], rows))


def health(records: list[dict[str, Any]]) -> str:
    counts: dict[str, int] = defaultdict(int)
    for r in records:
        counts[r["status"]] += 1
    lines = ["Statuses: " + ", ".join(f"{k} {v}" for k, v in sorted(counts.items())) + "."]
    for flag in ("throttled", "contended", "noisy"):
        n = sum(1 for r in records if (r.get("health") or {}).get(flag))
        if n:
            lines.append(f"{n} case(s) flagged {flag}.")
    bad = [r for r in records if r["status"] not in ("ok", "skipped")]
    if bad:
        lines.append("")
        lines.append(table(["case", "dtype", "provider", "status", "reason"],
                           [[r["case"]["id"], r["case"]["dtype"], r["case"]["provider"], r["status"],
                             (r.get("reason") or "").splitlines()[0][:120]] for r in bad]))
    return "\n".join(lines)


def is_multigpu(r: dict[str, Any]) -> bool:
    """A record of a multi-GPU case (its params name the world size)."""
    return "world_size" in (r["case"]["params"] or {})


_UNIT = {"trajectories": "traj", "points": "pts"}


def _gb(x: float | None) -> str:
    return "-" if x is None else f"{x:.3g}"


def _mg_flags(r: dict[str, Any]) -> str:
    f = [] if _flags(r) == "-" else [_flags(r)]
    reasons = (r.get("health") or {}).get("reasons") or []
    if any(": host-bound:" in x for x in reasons):
        f.append("host-bound")
    if any("host-bound one-GPU step" in x for x in reasons):
        f.append("host-bound baseline")
    return ",".join(f) or "-"


def multigpu(records: list[dict[str, Any]]) -> str:
    """Multi-GPU cases: per world size the group's step (slowest rank), aggregate throughput, efficiency
    against the one-rank case of the run, and the gather's bandwidth beside the collective's own."""
    rows = []

    def order(r):
        p = r["case"]["params"]
        return (ops.order(r["case"]["op"]), r["case"]["provider"],
                p.get("scaling", ""), specs.GATHER_MODES.index(p["gather"]) if p.get("gather") in specs.GATHER_MODES
                else 9, p.get("B", 0), p.get("world_size", 0))
    for r in sorted((r for r in records if is_multigpu(r)), key=order):
        p = r["case"]["params"]
        d = r.get("distributed") or {}
        ranks = d.get("per_rank_us") or []
        spread = f"{min(ranks):.1f}-{max(ranks):.1f}" if len(ranks) > 1 else (_us(ranks[0]) if ranks else "-")
        nodes = f" ({d['nodes']} nodes)" if d.get("nodes", 1) > 1 else ""
        rows.append([r["case"]["id"], r["case"]["provider"], f"{p.get('world_size')}{nodes}", p.get("scaling"),
                     p.get("gather"), r["status"], _us(d.get("step_us")), spread,
                     _num(d.get("aggregate_items_per_s"), f" {_UNIT.get(r['case']['items_unit'], 'items')}/s"),
                     f"{d['efficiency']:.2f}" if d.get("efficiency") is not None else "-",
                     _gb(d.get("gather_gb_per_s")), _gb(d.get("collective_gb_per_s")),
                     _gb(d.get("collective_busbw_gb_per_s")), _mg_flags(r)])
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


# --- kernel versions and torch.compile at its best ---------------------------------------------------

def _machine(r: dict[str, Any]) -> tuple[str, str, str]:
    """(machine, arch, GPU name) from the record's env; ``?`` where unknown."""
    env = r.get("env") or {}
    arch = env.get("arch") or ("CPU" if env.get("device") == "cpu" else env.get("gpu_name")) or "?"
    return (str(env.get("machine") or "?"), str(arch), str(env.get("gpu_name") or env.get("cpu") or "?"))


def _timed(records: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """Single-GPU device-time records: multi-GPU, call-cost (dispatch) and pipeline cases left out."""
    return [r for r in records if not is_multigpu(r) and not is_dispatch(r) and not is_pipeline(r)]


# --- end-to-end pipelines (suite pipelines: docs/pipelines.md) ----------------------------------------

_PIPE_LABEL = {"cpu_workers": "CPU workers (NumPy)", "robocache": "robocache.fuse"}
_RESAMPLE_ON = {"cpu_workers": "CPU workers", "gpu": "GPU", "numpy_fallback": "NumPy fallback (no GPU)"}


def pipeline_kind(r: dict[str, Any]) -> str | None:
    """``dataload``, ``train``, ``infer`` or ``profile`` for a record of the pipelines or profile suites (its
    section's kind; a failed or skipped case without the section: from its suite and case), None otherwise."""
    sec = r.get("pipeline")
    if sec is not None:
        return sec["kind"]
    if r.get("suite") == "profile":
        return "profile"
    if r.get("suite") == "pipelines" and r["case"]["op"] in PIPELINE_KINDS:
        return r["case"]["op"]
    return None


def is_pipeline(r: dict[str, Any]) -> bool:
    """A record of the end-to-end suites (data loading, training step, inference, Nsight Compute profile)."""
    return pipeline_kind(r) is not None


def _fig(r: dict[str, Any] | None, key: str) -> float | None:
    return ((r or {}).get("pipeline") or {}).get("figures", {}).get(key) if r else None


def _f(x: float | None, fmt: str = "{:.3g}") -> str:
    return "-" if x is None else fmt.format(x)


def _pct_share(x: float | None) -> str:
    return "-" if x is None else f"{100 * x:.0f}%"


def _util(r: dict[str, Any] | None) -> str:
    p = (r or {}).get("pipeline") or {}
    if p.get("gpu_util_pct") is not None:
        return f"{p['gpu_util_pct']:.0f}%"
    return "n/a" if r else "-"


def pipeline_dataload_rows(records: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per (machine, dataset tag, B, workers): both pipelines' figures and the speedup (one run's records)."""
    pairs: dict[tuple, dict[str, Any]] = defaultdict(dict)
    for r in records:
        if pipeline_kind(r) == "dataload":
            pairs[(_machine(r), r["case"]["id"])][r["case"]["provider"]] = r
    rows = []
    for (mach, cid), by in pairs.items():
        base, ours = by.get("cpu_workers"), by.get("robocache")
        any_r = base or ours
        p = any_r["case"]["params"]
        tb, to = _fig(base, "traj_per_s"), _fig(ours, "traj_per_s")
        rows.append({"machine": mach[0], "arch": mach[1], "case": cid, "B": p.get("B"), "workers": p.get("workers"),
                     "base_tps": tb, "ours_tps": to, "speedup": to / tb if tb and to else None,
                     "base_p50": _fig(base, "ms_p50"), "base_p90": _fig(base, "ms_p90"),
                     "ours_p50": _fig(ours, "ms_p50"), "ours_p90": _fig(ours, "ms_p90"),
                     "base_util": _util(base), "ours_util": _util(ours),
                     "resample_on": _RESAMPLE_ON.get(((ours or {}).get("pipeline") or {}).get("resample_on"), "-"),
                     "status": "/".join(x["status"] for x in (base, ours) if x), "flagged": _flagged(base, ours)})
    return sorted(rows, key=lambda x: (x["machine"], x["B"] or 0, x["workers"] or 0, x["case"]))


def pipeline_dataload(records: Iterable[dict[str, Any]]) -> str:
    rows = pipeline_dataload_rows(records)
    if not rows:
        return "_No data-loading case in these records._"
    body = [[f"{r['arch']} ({r['machine']})", r["B"], r["workers"], _f(r["base_tps"], "{:,.1f}"),
             _f(r["ours_tps"], "{:,.1f}"), _x(r["speedup"]) + (" (flagged)" if r["flagged"] else ""),
             f"{_f(r['base_p50'], '{:.2f}')} / {_f(r['base_p90'], '{:.2f}')}",
             f"{_f(r['ours_p50'], '{:.2f}')} / {_f(r['ours_p90'], '{:.2f}')}", r["base_util"], r["ours_util"],
             r["resample_on"], r["status"]] for r in rows]
    return ("Trajectories per second through a DataLoader (same workers, batches, episodes; batches checked equal "
            "before timing); speedup = robocache / CPU workers; ms per batch p50 / p90 from the end of one batch "
            "to the next one ready on the device; GPU utilisation by NVML (n/a: unavailable).\n\n"
            + table(["machine", "batch", "workers", "CPU workers traj/s", "robocache traj/s", "speedup",
                     "CPU workers ms p50 / p90", "robocache ms p50 / p90", "GPU util (CPU workers)",
                     "GPU util (robocache)", "robocache resample on", "status"], body))


TRAINING_HEADER = ["machine", "model", "pipeline", "ranks", "batch", "workers", "steps/s", "data share",
                   "ms wait / transfer / resample / compute", "GPU util", "speedup", "loss gate", "status"]
INFERENCE_HEADER = ["machine", "batch", "backend", "p50 ms", "p99 ms", "speedup vs eager", "peak MB", "max rel err",
                    "flags", "status"]


def pipeline_training_rows(records: Iterable[dict[str, Any]]) -> list[list[Any]]:
    """The training table's rows (:data:`TRAINING_HEADER`)."""
    recs = sorted((r for r in records if pipeline_kind(r) == "train"),
                  key=lambda r: (_machine(r), r["case"]["id"], r["case"]["provider"]))
    body = []
    for r in recs:
        pipe = r.get("pipeline") or {}
        sp = pipe.get("split_ms") or {}
        chk = r.get("check") or {}
        body.append([f"{_machine(r)[1]} ({_machine(r)[0]})", r["case"]["params"].get("model"),
                     _PIPE_LABEL.get(r["case"]["provider"], r["case"]["provider"]),
                     r["case"]["params"].get("ranks", 1), r["case"]["params"].get("B"),
                     r["case"]["params"].get("workers"), _f(_fig(r, "steps_per_s"), "{:.2f}"),
                     _pct_share(_fig(r, "data_wait_share")),
                     " / ".join(_f(sp.get(k), "{:.2f}") for k in ("data_wait", "transfer", "resampling", "compute")),
                     _util(r), _x(_fig(r, "speedup_vs_baseline")),
                     "-" if chk.get("max_rel_err") is None else f"{chk['max_rel_err']:.1e}", r["status"]])
    return body


def pipeline_training(records: Iterable[dict[str, Any]]) -> str:
    body = pipeline_training_rows(records)
    if not body:
        return "_No training case in these records._"
    return ("Fixed optimizer steps from each pipeline; data share = time waiting for the batch, copying it and "
            "(robocache) resampling it, over the step; split per step in ms; loss gate = largest relative "
            "difference of the loss curve against the CPU workers' on the same seed.\n\n"
            + table(TRAINING_HEADER, body))


def pipeline_inference_rows(records: Iterable[dict[str, Any]]) -> list[list[Any]]:
    """The inference table's rows (:data:`INFERENCE_HEADER`)."""
    from .pipelines.kinds import INFER_BACKENDS

    order = {b: i for i, b in enumerate(INFER_BACKENDS)}
    recs = sorted((r for r in records if pipeline_kind(r) == "infer"),
                  key=lambda r: (_machine(r), r["case"]["params"].get("B", 0), order.get(r["case"]["provider"], 9)))
    return [[f"{_machine(r)[1]} ({_machine(r)[0]})", r["case"]["params"].get("B"), r["case"]["provider"],
             _f(_fig(r, "latency_ms_p50"), "{:.3f}"), _f(_fig(r, "latency_ms_p99"), "{:.3f}"),
             _x(_fig(r, "speedup_vs_eager")), _f(_fig(r, "peak_mem_mb"), "{:.1f}"),
             "-" if (r.get("check") or {}).get("max_rel_err") is None else f"{r['check']['max_rel_err']:.1e}",
             _flags(r), r["status"]] for r in recs]


def pipeline_inference(records: Iterable[dict[str, Any]]) -> str:
    body = pipeline_inference_rows(records)
    if not body:
        return "_No inference case in these records._"
    return ("Latency of one call of the transformer policy, device synchronized, p50 / p99; speedup = eager p50 / "
            "this p50; peak memory over the timed calls (GPU only); max rel err against eager's output.\n\n"
            + table(INFERENCE_HEADER, body))


def pipeline_kernels(records: Iterable[dict[str, Any]], top: int = 8) -> str:
    recs = [r for r in records if pipeline_kind(r) and (r.get("pipeline") or {}).get("kernels")]
    if not recs:
        return "_No profile in these records._"
    parts = []
    for r in sorted(recs, key=lambda r: (_machine(r), r["case"]["id"], r["case"]["provider"])):
        pipe = r["pipeline"]
        rows = [[k["name"][:90], f"{100 * k['share']:.1f}%", k["calls"], _us(k["avg_us"]), _us(k["total_us"])]
                for k in pipe["kernels"][:top]]
        trace = f"; trace `{_esc(pipe['trace_file'])}`" if pipe.get("trace_file") else ""
        parts.append(f"**{_esc(r['case']['id'])}** ({_esc(_PIPE_LABEL.get(r['case']['provider'], r['case']['provider']))}"
                     f", {_esc(_machine(r)[1])}){trace}\n\n"
                     + table(["kernel" if (r.get("env") or {}).get("device") == "gpu" else "operator (CPU run)",
                              "share", "calls", "avg us", "total us"], rows))
    return ("torch.profiler over a few training steps after the timed ones: share of the profiled GPU time per "
            "kernel (a CPU run: self CPU time per operator).\n\n" + "\n\n".join(parts))


PROFILE_HEADER = ["machine", "case", "dtype", "provider", "longest kernel", "its share of the call", "DRAM % of peak",
                  "SM % of peak", "achieved occupancy %", "L2 hit rate %", "registers", "status"]


def pipeline_profile_rows(records: Iterable[dict[str, Any]]) -> list[list[Any]]:
    """The Nsight Compute table's rows (:data:`PROFILE_HEADER`)."""
    recs = sorted((r for r in records if pipeline_kind(r) == "profile"),
                  key=lambda r: (_machine(r), ops.order(r["case"]["op"]), r["case"]["id"]))
    out = []
    for r in recs:
        ks = ((r.get("pipeline") or {}).get("kernels")) or []
        top = max(ks, key=lambda k: k.get("share") or 0.0) if ks else None
        out.append([f"{_machine(r)[1]} ({_machine(r)[0]})", r["case"]["id"], r["case"]["dtype"], r["case"]["provider"],
                    top["name"][:60] if top else "-", _f(top.get("share") if top else None, "{:.0%}"),
                    _f(_fig(r, "dram_pct_of_peak"), "{:.1f}"), _f(_fig(r, "sm_pct_of_peak"), "{:.1f}"),
                    _f(_fig(r, "achieved_occupancy_pct"), "{:.1f}"), _f(_fig(r, "l2_hit_rate_pct"), "{:.1f}"),
                    _f(_fig(r, "registers"), "{:.0f}"),
                    r["status"] + (f": {(r.get('reason') or '').splitlines()[0][:60]}" if r["status"] != "ok" else "")])
    return out


def latest_pipeline_runs(records: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """The pipeline records of the newest run per machine and kind (a run may hold only some of the kinds)."""
    def key(r: dict[str, Any]) -> tuple[str, str]:
        return str((r.get("env") or {}).get("machine", "?")), str(pipeline_kind(r))

    recs = [r for r in records if is_pipeline(r)]
    newest: dict[tuple[str, str], tuple[str, str]] = {}
    for r in recs:
        stamp = (r["created"], r["run_id"])
        if key(r) not in newest or stamp > newest[key(r)]:
            newest[key(r)] = stamp
    return [r for r in recs if newest[key(r)][1] == r["run_id"]]


def pipelines(records: Iterable[dict[str, Any]]) -> str:
    """The seed's four end-to-end tables from pipeline records (any number of runs and machines)."""
    records = list(records)
    prof = pipeline_profile_rows(records)
    return "\n\n".join(["## Data loading by batch size", pipeline_dataload(records),
                         "## Training step: where the time goes", pipeline_training(records),
                         "## Policy inference by backend", pipeline_inference(records),
                         "## Kernel breakdown of a training step", pipeline_kernels(records),
                         *(["## Nsight Compute: robocache's kernels",
                            "One profiled call per case under ncu (its first kernel's metrics).\n\n"
                            + table(PROFILE_HEADER, prof)] if prof else [])])


def runs_per_op(records: Iterable[dict[str, Any]], want: Any = None
                ) -> list[tuple[tuple[str, str, str], str, str, list[dict[str, Any]]]]:
    """One measurement per machine and op: ``[((machine, arch, gpu), op, run label, its records of op), ...]``.

    Ratios are only taken inside one measurement of one commit on one GPU, so each machine and op
    contributes one: the runs of one suite and front end at one git commit count as one measurement (a
    suite split over several invocations: asv's nightly pass runs each op in its own, and a run cut short
    by a device lease is finished with ``run --cases``), its label the run ids joined by ``+``, each series
    (:func:`robocache.bench.schema.series_key`) from its newest run. Among those with a record of the op for which ``want(record)``
    holds (any when ``want`` is None): a ``nightly`` one (the whole grid) before any other, then the
    newest. Records without a commit are their own run. Machines sorted, ops in grid order.
    """
    by: dict[tuple, dict[tuple, list[dict[str, Any]]]] = defaultdict(lambda: defaultdict(list))
    for r in records:
        commit = r.get("git_commit")
        # one front end's runs: a figure of asv and one of the CLI are two series, never one measurement's ratio
        group = (r["suite"], r.get("frontend"), commit) if commit else (r["suite"], None, r["run_id"])
        by[(_machine(r), r["case"]["op"])][group].append(r)
    out = []
    for mach, op in sorted(by, key=lambda k: (k[0], ops.order(k[1]), k[1])):
        cands = [rs for rs in by[(mach, op)].values() if want is None or any(want(r) for r in rs)]
        if not cands:
            continue
        rs = max(cands, key=lambda rs: (any(r["suite"] == "nightly" for r in rs),
                                        max(str(r["created"]) for r in rs), max(r["run_id"] for r in rs)))
        newest: dict[Series, dict[str, Any]] = {}
        for r in sorted(rs, key=lambda r: (str(r["created"]), r["run_id"])):
            newest[series_key(r)] = r
        rids = sorted({r["run_id"] for r in newest.values()})
        out.append((mach, op, "+".join(rids), sorted(newest.values(), key=lambda r: (str(r["created"]), r["run_id"]))))
    return out


def _geomean(xs: list[float]) -> float | None:
    return math.exp(sum(math.log(x) for x in xs) / len(xs)) if xs else None


def _flagged(*recs: Any) -> bool:
    return any(_flags(r) != "-" for r in recs if r)


def _versions(records: Iterable[dict[str, Any]], op: str) -> list[str]:
    return sorted({r["case"]["provider"] for r in records if r["case"]["op"] == op and version_of(r["case"]["provider"])},
                  key=version_number)


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


def representative(records: list[dict[str, Any]], op: str) -> tuple[str, str] | None:
    """The (case id, dtype) an op's journey is read on: the first of the op's ``representative`` that every version
    measured, else the case in grid order that the most versions measured (``ok``)."""
    vers = _versions(records, op)
    ok: dict[tuple[str, str], set[str]] = defaultdict(set)
    for r in records:
        if r["case"]["op"] == op and r["status"] == "ok" and r["case"]["provider"] in vers and _p50(r):
            ok[(r["case"]["id"], r["case"]["dtype"])].add(r["case"]["provider"])
    if not ok:
        return None
    for key in (ops.get(op).representative if op in ops.names() else ()):
        if ok.get(key) == set(vers):
            return key
    return min(ok, key=lambda k: (-len(ok[k]), _grid_order(k)))


def journey_rows(records: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """The optimisation journey: per machine (one run each), op and kernel version, one row.

    Columns: ``machine, arch, gpu, run_id, op, version, provider, case, dtype, p50_us, gb_per_s,
    pct_of_ceiling, speedup_vs_v1`` (on the representative case), ``vs_compile`` (torch.compile at its best
    / this version, ``compile_mode`` the mode that won), ``geomean_vs_v1`` with ``cases_vs_v1``, ``min_vs_v1``,
    ``max_vs_v1`` (over every case and dtype of the run both measured), ``flagged``. A last row per op,
    ``version == "public"``, is the public API (``robocache``) on the same case. The first version measured
    is the base (v1 when it ran).
    """
    rows: list[dict[str, Any]] = []
    timed = _timed(records)
    for (machine, arch, gpu), op, rid, rs in runs_per_op(timed, lambda r: version_of(r["case"]["provider"])):
        idx = _index(rs)
        vers = _versions(rs, op)
        rep = representative(rs, op)
        base = vers[0]
        keys = sorted({(r["case"]["id"], r["case"]["dtype"]) for r in rs if r["case"]["op"] == op})
        for prov in vers + ([OURS] if any(r["case"]["provider"] == OURS and r["case"]["op"] == op
                                          for r in rs) else []):
            row: dict[str, Any] = {"machine": machine, "arch": arch, "gpu": gpu, "run_id": rid, "op": op,
                                   "version": version_of(prov) or "public", "provider": prov,
                                   "case": rep[0] if rep else None, "dtype": rep[1] if rep else None}
            r = idx.get((rep[0], rep[1], prov)) if rep else None
            m = (r.get("metrics") or {}) if r is not None and r["status"] == "ok" else {}
            t = m["time_us"]["p50"] if m else None
            t1 = _ok_time(idx, rep[0], rep[1], base) if rep else None
            best = compile_best(idx, rep[0], rep[1]) if rep else None
            row.update(status=r["status"] if r is not None else "not measured", p50_us=t,
                       gb_per_s=m.get("gb_per_s"), pct_of_ceiling=m.get("pct_of_ceiling"),
                       speedup_vs_v1=t1 / t if t and t1 else None,
                       vs_compile=best[0] / t if t and best else None,
                       compile_mode=best[1] if t and best else None,
                       flagged=_flagged(r, idx.get((rep[0], rep[1], base)) if rep else None,
                                        best[2] if best else None))
            ratios = []
            for cid, dt in keys:
                a, b = _ok_time(idx, cid, dt, base), _ok_time(idx, cid, dt, prov)
                if a and b:
                    ratios.append(a / b)
            row.update(base=version_of(base), geomean_vs_v1=_geomean(ratios), cases_vs_v1=len(ratios),
                       min_vs_v1=min(ratios) if ratios else None, max_vs_v1=max(ratios) if ratios else None)
            rows.append(row)
    return rows


def _x(v: float | None) -> str:
    return "-" if v is None else f"{v:.2f}x"


def _pct(v: float | None) -> str:
    return "-" if v is None else f"{v:.1f}%"


def journey(records: Iterable[dict[str, Any]]) -> str:
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
        out.append(f"**{_esc(op)}** on {_esc(arch)} (`{_esc(machine)}`, {_esc(gpu)}), run `{_esc(rid)}`; "
                   f"representative case {_esc(case or 'none')} {_esc(dtype or '')}")
        body = []
        for r in rs:
            vs = _x(r["vs_compile"]) + (f" ({r['compile_mode']})" if r["compile_mode"] else "")
            geo = "-" if r["geomean_vs_v1"] is None else (
                f"{r['geomean_vs_v1']:.2f}x over {r['cases_vs_v1']} cases ({r['min_vs_v1']:.2f}-{r['max_vs_v1']:.2f}x)")
            name = r["version"] if r["version"] != "public" else "public API (robocache)"
            body.append([name, r["status"] if r["status"] != "ok" else _us(r["p50_us"]),
                         "-" if r["gb_per_s"] is None else f"{r['gb_per_s']:.0f}", _pct(r["pct_of_ceiling"]),
                         _x(r["speedup_vs_v1"]), vs, geo, "flagged" if r["flagged"] else "-"])
        out.append(table(["version", "p50 us", "GB/s", "% of copy ceiling", f"speedup vs {base}",
                          "vs torch.compile (best mode)", f"geomean speedup vs {base} (range)", "flags"], body))
    return ("Kernel versions measured side by side in one run per GPU (providers `robocache@vN`; the public API "
            "calls the best). Speedups are medians' ratios; vs torch.compile = torch.compile's faster mode / this "
            "version (above 1: robocache faster); the geomean is over every case and dtype of the run both "
            "versions measured.\n\n" + "\n\n".join(out))


def vs_compile_cases(records: Iterable[dict[str, Any]], provider: str = OURS) -> list[dict[str, Any]]:
    """Per machine (one run each), op, case and dtype: torch.compile at its best / ``provider`` (both ``ok``).

    Columns: ``machine, arch, gpu, run_id, op, case, dtype, ours_us, compile_us, compile_mode, ratio,
    flagged``. Ratio above 1: ``provider`` is faster.
    """
    out = []
    timed = _timed(records)
    want = (lambda r: r["case"]["provider"] == provider)  # noqa: E731
    for (machine, arch, gpu), _op, rid, rs in runs_per_op(timed, want):
        idx = _index(rs)
        for cid, dt in sorted({(r["case"]["id"], r["case"]["dtype"]) for r in rs}, key=_grid_order):
            ours = _ok_time(idx, cid, dt, provider)
            best = compile_best(idx, cid, dt)
            if not ours or not best:
                continue
            out.append({"machine": machine, "arch": arch, "gpu": gpu, "run_id": rid, "op": idx[(cid, dt, provider)]
                        ["case"]["op"], "case": cid, "dtype": dt, "ours_us": ours, "compile_us": best[0],
                        "compile_mode": best[1], "ratio": best[0] / ours,
                        "flagged": _flagged(idx.get((cid, dt, provider)), best[2])})
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


def vs_compile(records: Iterable[dict[str, Any]], provider: str = OURS) -> str:
    """Markdown: per op and GPU, robocache against torch.compile at its best over every case of the run."""
    rows = vs_compile_summary(vs_compile_cases(records, provider))
    if not rows:
        return f"_No case with both {_esc(label(provider))} and torch.compile measured._"
    body = [[r["op"], f"{r['arch']} ({r['machine']})", r["run_id"], r["cases"], f"{r['worst']:.2f}x ({r['worst_case']})",
             f"{r['median']:.2f}x", f"{r['best']:.2f}x ({r['best_case']})", f"{r['at_least_1x']} of {r['cases']}",
             r["compile_modes"], r["flagged"]] for r in rows]
    return ("Ratio = torch.compile's faster mode / robocache, per case and dtype of one run per GPU (above 1: "
            "robocache faster); \"faster mode\" counts how often each torch.compile mode won.\n\n"
            + table(["op", "GPU (machine)", "run", "cases", "worst", "median", "best", "cases >= 1.0x",
                     "faster mode", "flagged"], body))


def _is_bare(provider: str) -> bool:
    """A provider timing a bare kernel launch (the call-cost floor): the table's role ``floor``."""
    return providers.role(provider) == "floor"


def call_cost_rows(records: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """Call-cost (dispatch) cases: host time per call of a tiny call, per machine (one run each), case and
    provider; ``vs_bare`` = this / the bare-launch provider of the case when one ran (the provider table's role
    ``floor``). Empty when the records carry no dispatch case."""
    out = []
    disp = [r for r in records if is_dispatch(r) and not is_multigpu(r)]
    # a measurement with the launch floor beside the public call (a run narrowed to some providers may
    # hold the public call alone); any measurement when none has one
    floor = [x for x in runs_per_op(disp, want=lambda r: _is_bare(r["case"]["provider"]))]
    seen = {(m, op) for m, op, _, _ in floor}
    for (machine, arch, gpu), _op, rid, rs in floor + [x for x in runs_per_op(disp) if (x[0], x[1]) not in seen]:
        by: dict[tuple[str, str], list[dict[str, Any]]] = defaultdict(list)
        for r in rs:
            by[(r["case"]["id"], r["case"]["dtype"])].append(r)
        for (cid, dt), group in sorted(by.items()):
            bare = [r for r in group if r["status"] == "ok" and _p50(r)
                    and _is_bare(r["case"]["provider"])]
            floor = min((_p50(r) for r in bare), default=None)
            for r in sorted(group, key=lambda r: provider_order(r["case"]["provider"])):
                t = _p50(r) if r["status"] == "ok" else None
                m = r.get("method") or {}
                dsp = r.get("dispatch") or {}  # schema v3: the GPU's own time per call, and whether it kept up
                out.append({"machine": machine, "arch": arch, "run_id": rid, "case": cid, "dtype": dt,
                            "provider": r["case"]["provider"], "status": r["status"], "timer": m.get("timer"),
                            "us_per_call": t, "vs_bare": t / floor if t and floor else None,
                            "device_us": dsp.get("device_us"), "gpu_keeps_up": dsp.get("gpu_keeps_up"),
                            "flagged": _flagged(r)})
    return out


def call_cost(records: Iterable[dict[str, Any]]) -> str:
    """Markdown: the call-cost table, or a line saying the records carry no dispatch case."""
    rows = call_cost_rows(records)
    if not rows:
        return "_No call-cost (dispatch) case in these records._"
    body = [[f"{r['arch']} ({r['machine']})", r["case"], r["dtype"], label(r["provider"]), r["timer"] or "-",
             r["status"] if r["status"] != "ok" else _us(r["us_per_call"]), _x(r["vs_bare"]), _us(r["device_us"]),
             {True: "yes", False: "no"}.get(r["gpu_keeps_up"], "-"), "flagged" if r["flagged"] else "-"]
            for r in rows]
    return ("Host time per call of a tiny call in a tight loop (what a training loop pays per call); "
            "x bare launch = this / a bare kernel launch measured in the same run; device us = the GPU's own "
            "time per call where recorded (the host cost only counts when the GPU keeps up).\n\n"
            + table(["GPU (machine)", "case", "dtype", "provider", "timer", "us per call", "x bare launch",
                     "device us", "GPU keeps up", "flags"], body))


Section = tuple[str, str, Any]  # (markdown heading, title, a function that renders the section's body)


def kernels_sections(records: Iterable[dict[str, Any]]) -> list[Section]:
    """The sections of :func:`kernels`, each rendered on demand."""
    records = list(records)
    pipe = latest_pipeline_runs(records)
    return [("##", "Optimisation journey", lambda: journey(records)),
            ("##", "Against torch.compile at its best", lambda: vs_compile(records)),
            ("##", "Call cost", lambda: call_cost(records)),
            *([("#", "End-to-end pipelines (the newest run per machine)", lambda: pipelines(pipe))] if pipe else [])]


def kernels(records: Iterable[dict[str, Any]]) -> str:
    """Markdown over records of any number of runs and machines (one run per machine and op, see
    :func:`runs_per_op`): the journey, robocache vs torch.compile at its best, and the call cost."""
    return render("robocache kernels: journey and torch.compile at its best", None, kernels_sections(records))


def report_sections(records: list[dict[str, Any]]) -> list[Section]:
    """The sections of :func:`report` (after its header), each rendered on demand."""
    first_dtype = "float32"
    everything = records
    records = _timed(everything)
    multi = [r for r in everything if is_multigpu(r)]
    dispatch = [r for r in everything if is_dispatch(r) and not is_multigpu(r)]
    pipe = [r for r in everything if is_pipeline(r)]
    health_ = ("##", "Health", lambda: health(everything))
    if pipe and not records and not multi and not dispatch:  # a pipelines run: its own tables
        return [("", "", lambda: pipelines(pipe)), health_]
    if multi and not records:  # a multi-GPU run: its own table, the single-GPU sections would be empty
        return [("##", "Multi-GPU scaling", lambda: multigpu(multi)), health_]

    def scaling(op_name: str, axis: str, fixed: dict[str, int]):
        return lambda: _scaling(records, op_name, axis, fixed, first_dtype)

    return [
        ("##", f"Headline: {(headline_case() or ('no headline case', ''))[0]}", lambda: headline(records)),
        ("##", "Dtype comparison (robocache; speedup = float32 median / 16-bit median)", lambda: dtypes(records)),
        *(("##", title, scaling(op.name, axis, fixed)) for op in ops.registered()
          for title, axis, fixed in op.scaling_views),
        ("##", "Against the peers (speedup = peer median / robocache median, same run, same GPU)",
         lambda: peers(records)),
        *([("##", "Optimisation journey (kernel versions, this run)", lambda: journey(records))]
          if any(version_of(r["case"]["provider"]) for r in records) else []),
        *([("##", "Against torch.compile at its best (per op, over every case of this run)",
            lambda: vs_compile(records))]
          if any(compile_mode(r["case"]["provider"]) for r in records) else []),
        *([("##", "Call cost (host time per tiny call)", lambda: call_cost(dispatch))] if dispatch else []),
        ("##", "Roofline view (robocache)", lambda: roofline(records)),
        ("##", "Timer self-check", lambda: timer_check(records)),
        *([("##", "Multi-GPU scaling", lambda: multigpu(multi))] if multi else []),
        *([("#", "End-to-end pipelines", lambda: pipelines(pipe))] if pipe else []),
        health_,
    ]


def render(title: str, head: str | None, sections: list[Section]) -> str:
    """The markdown of a report: its title, the header (when given), then each section's heading and body."""
    parts = [f"# {title}", *([head] if head is not None else [])]
    for level, name, body in sections:
        parts += ([f"{level} {name}"] if name else []) + [body()]
    return "\n\n".join(parts) + "\n"


def sections_json(sections: list[Section]) -> list[dict[str, Any]]:
    """Each section's title and the tables its body is built from (cells as displayed, no markdown escapes); a
    section without a table (a note such as "not in this run", the health list) carries its text as ``note``,
    markdown undone."""
    out = []
    for _level, name, body in sections:
        with capture_tables() as tables:
            text = body()
        out.append({"title": name, "tables": tables,
                    "note": None if tables else _UNMARK.sub(lambda m: m.group(1) or "", text).strip()})
    return out


# markdown escapes undone, emphasis and backticks dropped (the note of a section without a table)
_UNMARK = re.compile(r"\\([\\|<>`*_\[\]])|\*\*|`|(?<![\w\\])_|_(?!\w)")


def report(records: list[dict[str, Any]]) -> str:
    """The markdown report of one run."""
    return render("robocache-bench report", header(records), report_sections(records))
