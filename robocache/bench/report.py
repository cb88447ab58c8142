"""Tables from records: ``show`` (one run, every case) and ``report`` (the write-up's tables, markdown).

Every table is built from the records alone and the report's header says which
GPU, run and commit they came from. Speedups are ratios of medians measured side
by side in one run on one GPU; bandwidth is judged against the copy ceiling
measured in that same run.
"""
from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from typing import Any

from . import specs

PEERS = ("torch_compile", "torch_eager", "cupy", "numpy")
LABEL = {"robocache": "robocache", "torch_eager": "torch eager", "torch_compile": "torch.compile", "cupy": "CuPy",
         "numpy": "NumPy (CPU)"}
CLASSIC = {"B": 256, "S": 100, "T": 50, "D": 32}


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


def table(header: list[str], rows: list[list[Any]]) -> str:
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

def show(records: list[dict[str, Any]]) -> str:
    """Every case of one run: status, median time, throughput, bandwidth, % of ceiling, flags."""
    rows = []
    for r in sorted(records, key=lambda r: (r["case"]["op"], r["case"]["id"], r["case"]["dtype"],
                                            r["case"]["provider"])):
        m = r.get("metrics") or {}
        rows.append([r["case"]["id"], r["case"]["dtype"], r["case"]["provider"], r["status"], _us(_p50(r)),
                     _num(m.get("items_per_s"), "/s"), _num(m.get("gb_per_s") and m["gb_per_s"] * 1e9, "B/s"),
                     f"{m['pct_of_ceiling']:.1f}%" if m.get("pct_of_ceiling") is not None else "-", _flags(r),
                     (r.get("reason") or "").splitlines()[0][:70] if r["status"] != "ok" else ""])
    return header(records) + "\n\n" + table(
        ["case", "dtype", "provider", "status", "p50 us", "items/s", "bandwidth", "% ceiling", "flags", "reason"],
        rows)


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
    return "\n".join(lines) + synthetic


# --- report -----------------------------------------------------------------------------------------

def _index(records: list[dict[str, Any]]) -> dict[tuple[str, str, str], dict[str, Any]]:
    return {(r["case"]["id"], r["case"]["dtype"], r["case"]["provider"]): r for r in records}


def _ok_time(idx, cid: str, dtype: str, prov: str) -> float | None:
    r = idx.get((cid, dtype, prov))
    return _p50(r) if r and r["status"] == "ok" else None


def _speed(ours: float | None, theirs: float | None) -> str:
    return f"{theirs / ours:.2f}x" if ours and theirs else "-"


def _providers(records) -> list[str]:
    present = {r["case"]["provider"] for r in records}
    return [p for p in ("robocache",) + PEERS if p in present] + sorted(present - set(LABEL))


def headline(records: list[dict[str, Any]]) -> str:
    """The classic case (B256, 100 -> 50, D32) per dtype and provider, with robocache's speedup."""
    idx = _index(records)
    cid = "resample/B256-S100-T50-D32"
    rows = []
    for r in sorted((r for r in records if r["case"]["id"] == cid),
                    key=lambda r: (specs.GPU_DTYPES.index(r["case"]["dtype"]) if r["case"]["dtype"] in
                                   specs.GPU_DTYPES else 9, _providers(records).index(r["case"]["provider"]))):
        m = r.get("metrics") or {}
        ours = _ok_time(idx, cid, r["case"]["dtype"], "robocache")
        rows.append([r["case"]["dtype"], LABEL.get(r["case"]["provider"], r["case"]["provider"]), r["status"],
                     _us(_p50(r)), _num(m.get("items_per_s"), " traj/s"),
                     f"{m['gb_per_s']:.0f}" if m.get("gb_per_s") is not None else "-",
                     f"{m['pct_of_ceiling']:.1f}%" if m.get("pct_of_ceiling") is not None else "-",
                     "1.00x" if r["case"]["provider"] == "robocache" else _speed(ours, _p50(r)), _flags(r)])
    if not rows:
        return "_The classic case is not in this run._"
    return table(["dtype", "provider", "status", "p50 us", "throughput", "GB/s", "% ceiling",
                  "robocache speedup", "flags"], rows)


def dtypes(records: list[dict[str, Any]], provider: str = "robocache") -> str:
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
        ours_r = idx.get((cid, dtype, "robocache"))
        m = (ours_r or {}).get("metrics") or {}
        row = [x] + [_us(_ok_time(idx, cid, dtype, p)) for p in provs]
        row += [f"{m['gb_per_s']:.0f}" if m.get("gb_per_s") else "-",
                f"{m['pct_of_ceiling']:.1f}%" if m.get("pct_of_ceiling") is not None else "-"]
        rows.append(row)
    return table([axis] + [f"{LABEL.get(p, p)} p50 us" for p in provs] + ["robocache GB/s", "% ceiling"], rows)


def peers(records: list[dict[str, Any]]) -> str:
    """Every case: robocache's median and its speedup over each peer (peer time / robocache time)."""
    idx = _index(records)
    provs = [p for p in _providers(records) if p != "robocache"]
    keys = sorted({(r["case"]["id"], r["case"]["dtype"]) for r in records})
    rows = []
    for cid, dt in keys:
        ours = _ok_time(idx, cid, dt, "robocache")
        if ours is None and not any(_ok_time(idx, cid, dt, p) for p in provs):
            continue
        mine = idx.get((cid, dt, "robocache"))
        cells = []
        for p in provs:
            s = _speed(ours, _ok_time(idx, cid, dt, p))
            theirs = idx.get((cid, dt, p))
            if s != "-" and any(_flags(r) != "-" for r in (mine, theirs) if r):
                s += " (flagged)"  # throttled, contended or noisy on either side: read with care
            cells.append(s)
        rows.append([cid, dt, _us(ours)] + cells)
    return ("Speedups marked (flagged) involve a record flagged throttled, contended or noisy (see Health).\n\n"
            + table(["case", "dtype", "robocache p50 us"] + [f"vs {LABEL.get(p, p)}" for p in provs], rows))


def roofline(records: list[dict[str, Any]], provider: str = "robocache") -> str:
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
        rows.append([LABEL.get(prov, prov), len(d), f"{100 * d[len(d) // 2][0]:.2f}%",
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
        return (specs.OPS.index(r["case"]["op"]) if r["case"]["op"] in specs.OPS else 9, r["case"]["provider"],
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


def report(records: list[dict[str, Any]]) -> str:
    """The markdown report of one run."""
    first_dtype = "float32"
    everything = records
    records = [r for r in everything if not is_multigpu(r)]
    multi = [r for r in everything if is_multigpu(r)]
    if multi and not records:  # a multi-GPU run: its own table, the single-GPU sections would be empty
        return "\n\n".join(["# robocache-bench report", header(everything),
                             "## Multi-GPU scaling", multigpu(multi), "## Health", health(everything)]) + "\n"
    parts = [
        "# robocache-bench report", header(everything),
        "## Headline: the classic case (B=256, 100 -> 50 frames, 32 features)", headline(records),
        "## Dtype comparison (robocache; speedup = float32 median / 16-bit median)", dtypes(records),
        "## Batch scaling (resample, 100 -> 50, D=32, float32)",
        _scaling(records, "resample", "B", {"S": 100, "T": 50, "D": 32}, first_dtype),
        "## Length scaling (resample, B=256, T=S/2, D=32, float32)",
        _scaling(records, "resample", "S", {"B": 256, "D": 32, "T": lambda p: p["S"] // 2}, first_dtype),
        "## Dimension scaling (resample, B=256, 100 -> 50, float32)",
        _scaling(records, "resample", "D", {"B": 256, "S": 100, "T": 50}, first_dtype),
        "## Against the peers (speedup = peer median / robocache median, same run, same GPU)", peers(records),
        "## Roofline view (robocache)", roofline(records),
        "## Timer self-check", timer_check(records),
        *(["## Multi-GPU scaling", multigpu(multi)] if multi else []),
        "## Health", health(everything),
    ]
    return "\n\n".join(parts) + "\n"
