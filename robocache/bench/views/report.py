"""One run's views: ``show`` (every case) and ``report`` (the write-up's tables, markdown).

The report's header says which GPU, run and commit the records came from.
"""
from __future__ import annotations

import statistics
from collections import defaultdict
from typing import Any

from ... import providers
from ...providers import OURS, compile_mode, label, version_of
from .. import ops, specs
from ..columns import Row, as_rows
from ..schema import Record
from .kernels import call_cost, journey, vs_compile, vs_compile_cases
from .multigpu import multigpu
from .pipelines import pipeline_sections
from .records import (compile_best, env_of, flagged, flags, index, is_dispatch, is_multigpu, is_pipeline, ok_time,
                      ours, p50, timed)
from .tables import Section, code, esc, fmt_num, fmt_sig, fmt_us, render, table


def case_rows(records: list[Record]) -> list[dict[str, Any]]:
    """Every case of one run as plain values (what ``show`` prints, and ``show --format json`` writes)."""
    rows = []
    for r in sorted(records, key=lambda r: (r.case.op, r.case.id, r.case.dtype, r.case.provider)):
        c, m, f = r.case, r.metrics, flags(r)
        rows.append({"case": c.id, "op": c.op, "dtype": c.dtype, "provider": c.provider, "status": r.status,
                     "p50_us": p50(r), "items_per_s": m.items_per_s if m else None,
                     "gb_per_s": m.gb_per_s if m else None, "pct_of_ceiling": m.pct_of_ceiling if m else None,
                     "flags": [] if f == "-" else f.split(","),
                     "reason": r.reason.splitlines()[0] if r.status != "ok" and r.reason else None})
    return rows


def show(records: list[Record], rows: list[dict[str, Any]] | None = None) -> str:
    """Every case of one run: status, median time, throughput, bandwidth, % of ceiling, flags."""
    cells = [[c["case"], c["dtype"], c["provider"], c["status"], fmt_us(c["p50_us"]), fmt_num(c["items_per_s"], "/s"),
              fmt_num(c["gb_per_s"] and c["gb_per_s"] * 1e9, "B/s"),
              f"{c['pct_of_ceiling']:.1f}%" if c["pct_of_ceiling"] is not None else "-",
              ",".join(c["flags"]) or "-", (c["reason"] or "")[:70]]
             for c in (case_rows(records) if rows is None else rows)]
    return header(records) + "\n\n" + table(
        ["case", "dtype", "provider", "status", "p50 us", "items/s", "bandwidth", "% ceiling", "flags", "reason"],
        cells)


# the runner's facts run_facts gives (and libs)
ENV_FACTS = ("machine", "device", "gpu_name", "arch", "compute_capability", "sm_count", "gpu_count", "driver", "cuda",
             "cpu", "python")


def _ceiling(records: list[Record]) -> float | None:
    """The copy ceiling of the run: the first timed record's."""
    m0 = next((r.metrics for r in records if r.metrics is not None), None)
    return m0.ceiling_gb_per_s if m0 is not None else None


def run_facts(rows: list[Row]) -> dict[str, Any]:
    """The facts of :func:`header` as plain values: run, suite, front end, commit, device, copy ceiling, of the
    frame's rows of one run (a run's loaded records through :func:`robocache.bench.columns.as_rows`)."""
    r0 = rows[0]
    env = {k: r0.env.get(k) for k in ENV_FACTS} | {"libs": dict(r0.env.get("libs") or {})}
    ceiling = next((r.ceiling_gb_per_s for r in rows if r.p50 is not None), None)  # the first with metrics
    return {"run_id": r0.run_id, "suite": r0.suite, "frontend": r0.frontend,
            "created": min(r.created for r in rows), "git_commit": r0.git_commit, "git_dirty": r0.git_dirty,
            "synthetic": any(r.synthetic for r in rows), "ceiling_gb_per_s": ceiling, "env": env}


def header(records: list[Record]) -> str:
    r0 = records[0]
    env = env_of(r0)
    ceiling = _ceiling(records)
    gpu = f"{env.gpu_name} ({env.arch}, sm {env.compute_capability}, {env.sm_count} SMs)" \
        if env.device == "gpu" else f"CPU only ({env.cpu or 'unknown CPU'}): host timer, no GPU"
    commit = r0.git_commit or "unknown"
    dirty = " (uncommitted changes)" if r0.git_dirty else ""
    synthetic = "\n\n**SYNTHETIC records (generated fixtures), not measurements.**" if any(
        r.synthetic for r in records) else ""
    drivers = (f"; driver {esc(env.driver)}, CUDA {esc(env.cuda)}" if env.device == "gpu"
               else "")  # a CPU run has neither: "driver None" said nothing
    lines = [
        f"- **device**: {esc(gpu)}{drivers}; machine `{code(env.machine)}`",
        f"- **run** `{code(r0.run_id)}`, suite `{code(r0.suite)}`, front end {esc(r0.frontend)}, "
        f"{esc(min(r.created for r in records))}; **commit** `{code(commit)}`{dirty}",
        f"- **copy ceiling** measured in this run: {fmt_num(ceiling * 1e9, 'B/s') if ceiling else 'not measured'}"
        " (device-to-device copy, bytes read + written)",
        "- libraries: " + ", ".join(f"{esc(k)} {esc(v)}" for k, v in sorted((env.libs or {}).items())),
    ]
    view = dashboard_links(r0.run_id, env.machine)
    if view:
        lines.append(view)
    return "\n".join(lines) + synthetic


def dashboard_links(run_id: str, machine: str | None) -> str | None:
    """The dashboard's views of this run (its Runs page, and the machine's wins heat map and History),
    base URL from ``$ROBOCACHE_DASHBOARD_URL`` (else ``make run``'s http://127.0.0.1:8501): one markdown line.
    The query values are URL-encoded by :mod:`links`; a bad base URL leaves the line out (the report still
    prints) rather than printing a link that could break out of the markdown."""
    from .. import links

    try:
        m = {"machine": machine} if machine else {}
        parts = [("this run", links.run_url(run_id)), ("where robocache wins", links.page_url("wins", m)),
                 ("history", links.page_url(links.HISTORY_PAGE, m))]
    except ValueError:
        return None
    return "- **dashboard**: " + ", ".join(f"[{t}]({u})" for t, u in parts)


def _speed(ours: float | None, theirs: float | None) -> str:
    return f"{theirs / ours:.2f}x" if ours and theirs else "-"


def _providers(records: list[Record]) -> list[str]:
    """The providers present, in :func:`providers.order`."""
    return sorted({r.case.provider for r in records}, key=providers.order)


def headline_case() -> tuple[str, str] | None:
    """(title, case id) of the report's headline: the first registered op's that declares one (resample's
    classic case: B256, 100 -> 50, D32)."""
    return next((op.headline for op in ops.registered() if op.headline), None)


# A p20-p80 spread beyond this share of the median marks a case "wide": single calls vary by more than about +-12%,
# which a quiet GPU case never does (its spread is a few %) and a CPU case on a busy host often does
SPREAD_WIDE = 0.25


def spread(r: Record) -> float | None:
    """(p80 - p20) / p50 of a timed record, None without timing."""
    if r.metrics is None or not r.metrics.time_us.p50:
        return None
    t = r.metrics.time_us
    return (t.p80 - t.p20) / t.p50


def _row_flags(r: Record) -> str:
    f = flags(r)
    s = spread(r)
    if s is not None and s > SPREAD_WIDE:
        f = "wide" if f == "-" else f + ",wide"
    return f


def headline(records: list[Record]) -> str:
    """The headline case (:func:`headline_case`) named, then per dtype and provider its median, p20-p80 spread,
    throughput and bandwidth (3 significant digits) and robocache's speedup (the public API on the GPU, its NumPy
    path on a CPU run: :func:`records.ours`); a run whose rows are flagged (contended, throttled, noisy, a wide
    spread) says first that its figures are unreliable, and why."""
    as_row = dict(zip(map(id, records), as_rows(records)))  # each record's row (the comparisons read rows)
    idx = index(as_row.values())
    title, cid = headline_case() or ("", "")
    mine = ours(records)
    rows, shown = [], []
    for r in sorted((r for r in records if r.case.id == cid),
                    key=lambda r: (specs.GPU_DTYPES.index(r.case.dtype) if r.case.dtype in specs.GPU_DTYPES else 9,
                                   _providers(records).index(r.case.provider))):
        m, dtype, prov = r.metrics, r.case.dtype, r.case.provider
        ours_t = ok_time(idx, cid, dtype, mine)
        best = compile_best(idx, cid, dtype) if compile_mode(prov) else None
        both = sum(1 for p in _providers(records) if compile_mode(p)) > 1
        name = label(prov) + (" (faster mode)" if both and best and best[2] is as_row[id(r)] else "")
        rows.append([dtype, name, r.status, fmt_us(p50(r)),
                     f"{fmt_us(m.time_us.p20)}-{fmt_us(m.time_us.p80)}" if m else "-",
                     fmt_num(m.items_per_s if m else None, " traj/s"), fmt_sig(m.gb_per_s if m else None),
                     f"{m.pct_of_ceiling:.1f}%" if m and m.pct_of_ceiling is not None else "-",
                     "1.00x" if prov == mine else _speed(ours_t, p50(r)), _row_flags(r)])
        shown.append(r)
    grid = _headline_grid(records, mine)
    if not rows:
        return "_The classic case is not in this run._" + grid
    name = f"Case `{code(cid)}`: {esc(title)}" + ("" if any(r.case.provider == mine for r in shown) else
                                                  f"; {esc(label(mine))} is not in this run: no speedup to show")
    return (name + "\n\n" + _reliability(shown)
            + table(["dtype", "provider", "status", "p50 us", "p20-p80 us", "throughput", "GB/s", "% ceiling",
                     "robocache speedup", "flags"], rows) + grid)


def _reliability(rows: list[Record]) -> str:
    """A warning before a headline whose rows are flagged: how many, and the reasons the records give (the load
    average that made a CPU case contended, the noise target not met), or ""."""
    bad = [r for r in rows if _row_flags(r) != "-"]
    if not bad:
        return ""
    why: dict[str, str] = {}  # one reason per kind, the first row's (the load differs a little between cases)
    for r in bad:
        for reason in r.health.reasons:
            kind = reason.split(":")[0]
            if kind in ("contended", "throttled", "noisy"):
                why.setdefault(kind, reason.split(" (")[0])
        s = spread(r)
        if s is not None and s > SPREAD_WIDE:
            why.setdefault("wide", f"wide: p20-p80 spread beyond {SPREAD_WIDE:.0%} of the median")
    return (f"**Unreliable figures**: {len(bad)} of {len(rows)} rows flagged ({esc('; '.join(why.values()))}). "
            "On a busy or noisy machine a median can move several-fold between runs: rerun on an idle machine "
            "before reading these numbers.\n\n")


def _headline_grid(records: list[Record], provider: str = OURS) -> str:
    """The headline's grid-wide line: per GPU, the median and the worst ratio torch.compile at its faster mode /
    robocache over every case and dtype of the run that measured both (:func:`vs_compile_cases`, the kernels
    report's own computation), so one case never stands for the grid. Empty without torch.compile."""
    cases = vs_compile_cases(records, provider)
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
        lines.append(f"- {esc(arch)} ({esc(machine)}), {len(cs)} cases and dtypes: median {med:.2f}x, worst "
                     f"{worst['ratio']:.2f}x ({esc(worst['case'])} {esc(worst['dtype'])}, torch.compile "
                     f"{esc(worst['compile_mode'])}); robocache faster on {wins} of {len(cs)}")
    return ("\n\nAcross the grid, torch.compile at its faster mode / robocache (above 1: robocache faster):\n\n"
            + "\n".join(lines))


def dtypes(records: list[Record], provider: str = OURS) -> str:
    """Each case measured in several dtypes: median per dtype and the speedup of 16-bit over float32."""
    idx = index(as_rows(records))
    by_case: dict[str, set[str]] = defaultdict(set)
    for r in records:
        if r.case.provider == provider and r.status == "ok":
            by_case[r.case.id].add(r.case.dtype)
    rows = []
    for cid in sorted(c for c, d in by_case.items() if len(d) > 1):
        t = {dt: ok_time(idx, cid, dt, provider) for dt in specs.GPU_DTYPES}
        rows.append([cid] + [fmt_us(t[dt]) for dt in specs.GPU_DTYPES]
                    + [_speed(t["float16"], t["float32"]), _speed(t["bfloat16"], t["float32"])])
    if not rows:
        return f"_No case with several dtypes for {provider} in this run._"
    return table(["case"] + [f"{dt} p50 us" for dt in specs.GPU_DTYPES]
                 + ["float16 vs float32", "bfloat16 vs float32"], rows)


def _scaling(records: list[Record], op: str, axis: str, fixed: dict[str, int], dtype: str) -> str:
    idx = index(as_rows(records))
    provs = _providers(records)
    mine = ours(records)
    pts = {}
    for r in records:
        p = r.case.params
        if r.case.op != op or r.case.dtype != dtype or p.get("time_dtype", "float32") != "float32":
            continue
        if all(p.get(k) == v(p) if callable(v) else p.get(k) == v for k, v in fixed.items()):
            pts[p[axis]] = r.case.id
    if len(pts) < 2:
        return f"_Not enough points in this run for {axis} scaling ({dtype})._"
    rows = []
    for x in sorted(pts):
        cid = pts[x]
        m = idx.get((cid, dtype, mine))
        row = [x] + [fmt_us(ok_time(idx, cid, dtype, p)) for p in provs]
        row += [fmt_sig(m.gb_per_s) if m and m.gb_per_s else "-",
                f"{m.pct_of_ceiling:.1f}%" if m and m.pct_of_ceiling is not None else "-"]
        rows.append(row)
    return table([axis] + [f"{label(p)} p50 us" for p in provs] + [f"{label(mine)} GB/s", "% ceiling"], rows)


def peers(records: list[Record]) -> str:
    """Every case: robocache's median and its speedup over each peer (peer time / robocache time).

    torch.compile is one column at its best: the faster of its measured modes on that case, named.
    Kernel versions (``robocache@vN``) are not peers; the optimisation journey compares them.
    """
    idx = index(as_rows(records))
    mine = ours(records)
    provs = [p for p in _providers(records) if providers.role(p) == "peer" and not compile_mode(p)]
    has_compile = any(compile_mode(p) for p in _providers(records))
    keys = sorted({(r.case.id, r.case.dtype) for r in records})
    rows = []

    def cell(ours: float | None, theirs: float | None, mine: Any, other: Any, suffix: str = "") -> str:
        s = _speed(ours, theirs)
        if s == "-":
            return s
        s += suffix
        if flagged(mine, other):
            s += " (flagged)"  # throttled, contended or noisy on either side: read with care
        return s

    for cid, dt in keys:
        ours_t = ok_time(idx, cid, dt, mine)
        best = compile_best(idx, cid, dt) if has_compile else None
        if ours_t is None and best is None and not any(ok_time(idx, cid, dt, p) for p in provs):
            continue
        mine_r = idx.get((cid, dt, mine))
        cells = []
        if has_compile:
            cells.append(cell(ours_t, best[0], mine_r, best[2], f" ({best[1]})") if best else "-")
        cells += [cell(ours_t, ok_time(idx, cid, dt, p), mine_r, idx.get((cid, dt, p))) for p in provs]
        rows.append([cid, dt, fmt_us(ours_t)] + cells)
    head = ["case", "dtype", f"{label(mine)} p50 us"] + (["vs torch.compile (best mode)"] if has_compile else []) \
        + [f"vs {label(p)}" for p in provs]
    return ("Speedups marked (flagged) involve a record flagged throttled, contended or noisy (see Health). "
            "torch.compile is judged at its best: the faster of its measured modes on each case, named in "
            "brackets.\n\n" + table(head, rows))


def roofline(records: list[Record], provider: str = OURS) -> str:
    """Bytes each case must move, the bandwidth reached, and % of the copy ceiling of this run."""
    rows = []
    for r in sorted((r for r in records if r.case.provider == provider and r.status == "ok"),
                    key=lambda r: -(r.metrics.pct_of_ceiling or r.metrics.gb_per_s)):
        m = r.metrics
        rows.append([r.case.id, r.case.dtype, fmt_num(r.case.bytes, "B"), fmt_us(m.time_us.p50), fmt_sig(m.gb_per_s),
                     f"{m.pct_of_ceiling:.1f}%" if m.pct_of_ceiling is not None else "-"])
    if not rows:
        return f"_No successful {provider} results in this run._"
    return table(["case", "dtype", "bytes moved", "p50 us", "GB/s", "% of copy ceiling"], rows)


def timer_check(records: list[Record], min_us: float = 25.0) -> str:
    """How far CUDA-event timing and CUDA-graph replay agree, per provider (cases of ``min_us`` and more).

    Graph replay removes the GPU-side gap between back-to-back launches, so providers that issue many
    kernels per call (torch eager) differ more than single-kernel ones; the table shows it per provider.
    """
    by: dict[str, list[tuple]] = defaultdict(list)
    for r in records:
        m = r.metrics
        if r.status == "ok" and m and m.event_vs_graph is not None and m.time_us.p50 >= min_us:
            by[r.case.provider].append((abs(m.event_vs_graph), m.event_vs_graph, r.case.id, r.case.dtype))
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


def health(records: list[Record]) -> str:
    counts: dict[str, int] = defaultdict(int)
    for r in records:
        counts[r.status] += 1
    lines = ["Statuses: " + ", ".join(f"{k} {v}" for k, v in sorted(counts.items())) + "."]
    for flag in ("throttled", "contended", "noisy"):
        n = sum(1 for r in records if flag in flags(r).split(","))
        if n:
            lines.append(f"{n} case(s) flagged {flag}.")
    bad = [r for r in records if r.status not in ("ok", "skipped")]
    if bad:
        lines.append("")
        lines.append(table(["case", "dtype", "provider", "status", "reason"],
                           [[r.case.id, r.case.dtype, r.case.provider, r.status,
                             (r.reason or "").splitlines()[0][:120]] for r in bad]))
    return "\n".join(lines)


def report_sections(records: list[Record]) -> list[Section]:
    """The sections of :func:`report` (after its header), each rendered on demand."""
    first_dtype = "float32"
    everything = records
    records = timed(everything)
    multi = [r for r in everything if is_multigpu(r)]
    dispatch = [r for r in everything if is_dispatch(r) and not is_multigpu(r)]
    pipe = [r for r in everything if is_pipeline(r)]
    health_ = ("##", "Health", lambda: health(everything))
    if pipe and not records and not multi and not dispatch:  # a pipelines run: its own tables
        return [*pipeline_sections(pipe), health_]
    if multi and not records:  # a multi-GPU run: its own table, the single-GPU sections would be empty
        return [("##", "Multi-GPU scaling", lambda: multigpu(multi)), health_]

    def scaling(op_name: str, axis: str, fixed: dict[str, int]):
        return lambda: _scaling(records, op_name, axis, fixed, first_dtype)

    return [
        ("##", f"Headline: {(headline_case() or ('no headline case', ''))[0]}", lambda: headline(records)),
        ("##", "Dtype comparison (robocache; speedup = float32 median / 16-bit median)",
         lambda: dtypes(records, ours(records))),
        *(("##", title, scaling(op.name, axis, fixed)) for op in ops.registered()
          for title, axis, fixed in op.scaling_views),
        ("##", "Against the peers (speedup = peer median / robocache median, same run, same GPU)",
         lambda: peers(records)),
        *([("##", "Optimisation journey (kernel versions, this run)", lambda: journey(records))]
          if any(version_of(r.case.provider) for r in records) else []),
        *([("##", "Against torch.compile at its best (per op, over every case of this run)",
            lambda: vs_compile(records))]
          if any(compile_mode(r.case.provider) for r in records) else []),
        *([("##", "Call cost (host time per tiny call)", lambda: call_cost(dispatch))] if dispatch else []),
        ("##", "Roofline view (robocache)", lambda: roofline(records, ours(records))),
        ("##", "Timer self-check", lambda: timer_check(records)),
        *([("##", "Multi-GPU scaling", lambda: multigpu(multi))] if multi else []),
        *([("#", "End-to-end pipelines", lambda: "This run's end-to-end pipeline cases (suite `pipelines`).")]
          if pipe else []),
        *(pipeline_sections(pipe) if pipe else []),
        health_,
    ]


def report(records: list[Record]) -> str:
    """The markdown report of one run."""
    return render("robocache-bench report", header(records), report_sections(records))
