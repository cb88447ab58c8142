"""Pure table builders over the dashboard frame (DataFrame in, DataFrame out; no Streamlit).

Speedups follow the CLI report's rule: ratios of medians measured side by side in one run on one
machine, with the same timer, cache mode and dtype; never across runs or machines.
"""
from __future__ import annotations

import json
from typing import Any

import pandas as pd

from robocache import providers
from robocache.bench import frame
from robocache.bench.columns import Row, dispatch_case
from robocache.bench.views import kernels as report_kernels

KEYS = ["machine", "arch", "op", "timer", "cache", "case_id", "dtype"]
OURS = providers.OURS


def side_by_side(df: pd.DataFrame) -> pd.DataFrame:
    """Per case (and machine, timer, cache, dtype): the latest run's p50 of every provider, one column each.

    Only ``ok`` records count. The run chosen for a case is its newest one that measured robocache,
    or the newest one at all when no run did. Columns: the keys, ``run_id``, ``created``, one p50
    column per provider, ``best`` (the fastest provider) and ``best_p50``.
    """
    ok = df[(df["status"] == "ok") & df["p50"].notna()]
    if ok.empty:
        return pd.DataFrame(columns=[*KEYS, "run_id", "created", "best", "best_p50"])
    idx = [*KEYS, "run_id"]
    wide = ok.pivot_table(index=idx, columns="provider", values="p50", aggfunc="median", observed=True)
    wide.columns = [str(c) for c in wide.columns]
    when = ok.groupby(idx, observed=True)["created"].max()
    wide = wide.join(when).reset_index()
    has_ours = wide[OURS].notna() if OURS in wide.columns else pd.Series(False, index=wide.index)
    wide = wide.assign(_ours=has_ours).sort_values(["_ours", "created"], kind="stable")
    wide = wide.drop_duplicates(KEYS, keep="last").drop(columns="_ours")
    prov = [c for c in wide.columns if c not in (*idx, "created")]
    wide = wide.dropna(subset=prov, how="all")
    wide["best"] = wide[prov].idxmin(axis=1)
    wide["best_p50"] = wide[prov].min(axis=1)
    for c in KEYS + ["run_id"]:
        wide[c] = wide[c].astype(str)
    return wide.sort_values(KEYS, kind="stable").reset_index(drop=True)


def providers_in(wide: pd.DataFrame) -> list[str]:
    """The provider columns of a :func:`side_by_side` table."""
    fixed = {*KEYS, "run_id", "created", "best", "best_p50"}
    return [c for c in wide.columns if c not in fixed]


def speedups(wide: pd.DataFrame) -> pd.DataFrame:
    """Long table: robocache's speedup over each peer (peer p50 / robocache p50) per case.

    Kernel versions (``robocache@vN``) are not peers and are left out (the Kernels page compares them).

    Columns: the keys, ``peer`` and ``speedup`` (> 1: robocache is faster). Cases without a robocache
    or peer figure are left out.
    """
    provs = providers_in(wide)
    if OURS not in provs or wide.empty:
        return pd.DataFrame(columns=[*KEYS, "run_id", "peer", "speedup"])
    peers = [p for p in provs if providers.role(p) == "peer"]  # versions: the Kernels page; call cost: not peers
    long = wide.melt(id_vars=[*KEYS, "run_id", OURS], value_vars=peers, var_name="peer", value_name="peer_p50")
    long = long.dropna(subset=[OURS, "peer_p50"])
    long["speedup"] = long["peer_p50"] / long[OURS]
    return long[[*KEYS, "run_id", "peer", "speedup"]].reset_index(drop=True)


def health_counts(df: pd.DataFrame) -> dict[str, int]:
    """Counts of records flagged throttled / contended / noisy, failed (not ok, not skipped) and skipped."""
    st = df["status"].astype(str)
    return {
        "records": int(len(df)),
        "failed": int((~st.isin(["ok", "skipped"])).sum()),
        "skipped": int((st == "skipped").sum()),
        "throttled": int(df["throttled"].sum()),
        "contended": int(df["contended"].sum()),
        "noisy": int(df["noisy"].sum()),
    }


# --- the report's own tables (one definition: robocache.bench.views), over the frame's rows -------------

def series_ids(df: pd.DataFrame) -> pd.Series:
    """Each row's series (:func:`robocache.bench.schema.series_key`, the one definition that ``compare``, ``check``
    and the report use) as its 12-hex fingerprint: the id an alert names. Index-aligned with ``df``."""
    return df["series"].astype(object)  # a column of the frame (robocache.bench.frame), computed from the record


def _dispatch_rows(df: pd.DataFrame) -> pd.Series:
    """Rows of call-cost (dispatch) cases, by the report's own rule
    (:func:`robocache.bench.columns.dispatch_case`)."""
    maybe = df["case_id"].astype(str).str.contains("dispatch", regex=False) | df["params"].astype(str).str.contains(
        "dispatch", regex=False)
    out = pd.Series(False, index=df.index)
    if maybe.any():
        out[maybe] = [dispatch_case(str(c), json.loads(p) if isinstance(p, str) else None)
                      for c, p in zip(df["case_id"][maybe], df["params"][maybe])]
    return out


def kernel_rows(df: pd.DataFrame) -> list[Row]:
    """The frame's rows the kernel tables read: single-GPU device-time rows of robocache (and its versions) and
    torch.compile (every mode), of the runs :func:`robocache.bench.views.records.runs_per_op` can pick.

    The runs are narrowed first (a page shows one op of a few machines, the frame holds every run): per
    machine, op and robocache provider only the run the report's rule would pick for it (a nightly run first,
    then the newest) is kept. That is a superset of every run the report can choose, so its choice is unchanged.
    """
    if df.empty:
        return []
    prov = df["provider"].astype(str)
    keep = prov.eq(OURS) | prov.str.startswith(providers.VERSION_PREFIX) | prov.str.startswith(providers.COMPILE)
    if "world_size" in df.columns:
        keep &= df["world_size"].isna()
    d = df[keep]
    d = d[~_dispatch_rows(d)] if not d.empty else d
    if d.empty:
        return []
    keys = ["machine", "op", "run_id"]
    runs = d.groupby(keys, observed=True).agg(
        nightly=("suite", lambda x: bool((x.astype(str) == "nightly").any())), created=("created", "max"))
    ours = d[~d["provider"].astype(str).str.startswith(providers.COMPILE)]
    cand = ours[[*keys, "provider"]].drop_duplicates().astype(str).merge(
        runs.reset_index().astype({k: str for k in keys}), on=keys)
    cand = cand.sort_values(["nightly", "created", "run_id"], kind="stable")
    chosen = cand.drop_duplicates(["machine", "op", "provider"], keep="last")[keys].drop_duplicates()
    picked = pd.MultiIndex.from_frame(chosen)
    mine = pd.MultiIndex.from_frame(d[keys].astype(str))
    return frame.rows_of(d[mine.isin(picked)])


def journey(rows: list[Row]) -> pd.DataFrame:
    """:func:`robocache.bench.views.kernels.journey_rows` over :func:`kernel_rows`, as a DataFrame."""
    return pd.DataFrame(report_kernels.journey_rows(rows))


def vs_compile(rows: list[Row], provider: str = OURS) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(per-case ratios, per machine and op summary): :func:`robocache.bench.views.kernels.vs_compile_cases` and
    :func:`~robocache.bench.views.kernels.vs_compile_summary` over :func:`kernel_rows`."""
    cases = report_kernels.vs_compile_cases(rows, provider)
    return pd.DataFrame(cases), pd.DataFrame(report_kernels.vs_compile_summary(cases))


def call_cost(df: pd.DataFrame) -> pd.DataFrame:
    """:func:`robocache.bench.views.kernels.call_cost_rows` over the frame (empty without dispatch cases)."""
    if df.empty:
        return pd.DataFrame()
    return pd.DataFrame(report_kernels.call_cost_rows(frame.rows_of(df[_dispatch_rows(df)])))


def machine_ratio(df: pd.DataFrame, base: str, other: str) -> pd.DataFrame:
    """The same cases on two machines: per (case, dtype, provider, timer, cache) the latest p50 on each, and
    ``ratio`` = base p50 / other p50 (above 1: ``other`` is faster), with each machine's % of its own copy
    ceiling. Only ``ok`` single-GPU records."""
    cols = ["case_id", "dtype", "provider", "timer", "cache"]
    ok = df[(df["status"] == "ok") & df["p50"].notna()]
    if "world_size" in ok.columns:
        ok = ok[ok["world_size"].isna()]
    ok = ok.sort_values("created", kind="stable")
    sides = []
    for who, tag in ((base, "base"), (other, "other")):
        d = ok[ok["machine"].astype(str) == who].drop_duplicates(cols, keep="last")
        d = d[cols + ["p50", "pct_of_ceiling", "ceiling_gb_per_s", "run_id"]].copy()
        for c in cols:
            d[c] = d[c].astype(str)
        sides.append(d.rename(columns={"p50": f"{tag}_p50", "pct_of_ceiling": f"{tag}_pct_of_ceiling",
                                       "ceiling_gb_per_s": f"{tag}_ceiling_gb_per_s", "run_id": f"{tag}_run_id"}))
    both = sides[0].merge(sides[1], on=cols, how="inner")
    both["ratio"] = both["base_p50"] / both["other_p50"]
    return both.sort_values(["case_id", "dtype", "provider"], kind="stable").reset_index(drop=True)


def machine_pair(df: pd.DataFrame, order: tuple[str, ...] = ("A100", "H100", "H200", "B200")
                 ) -> tuple[str, str] | None:
    """Two machines to compare by default: one single-GPU-record machine of each of the first two architectures
    present (in ``order``, then by name; H100 before H200), the pair whose ``ok`` robocache records share the most
    cases (case and dtype), then the one with the most ``ok`` records, then by name; with one architecture, the two
    machines with the most records; None with fewer than two machines (or no two distinct ones across the two
    architectures). (A two-GPU machine that ran only sampled seeds of its own shares no case with the other
    architecture, so it does not displace the one-GPU machine that does: pass every record, not the newest runs
    alone, whose fresh seeds may share nothing.)"""
    ok = df[df["status"] == "ok"]
    if "world_size" in ok.columns:
        ok = ok[ok["world_size"].isna()]
    if ok.empty:
        return None
    counts = ok.groupby(["arch", "machine"], observed=True).size().reset_index(name="n")
    counts = counts[counts["n"] > 0]
    counts["arch"] = counts["arch"].astype(str)
    counts["machine"] = counts["machine"].astype(str)
    if counts["machine"].nunique() < 2:
        return None
    arches = sorted(counts["arch"].unique(), key=lambda a: (order.index(a) if a in order else len(order), a))
    if len(arches) < 2:
        top = counts.sort_values(["n", "machine"], ascending=[False, True])["machine"].tolist()
        return top[0], top[1]
    ours = ok[ok["provider"].astype(str) == OURS] if "provider" in ok.columns else ok.iloc[0:0]
    cases = {m: set(zip(g["case_id"].astype(str), g["dtype"].astype(str)))
             for m, g in ours.groupby(ours["machine"].astype(str), observed=True)}
    n = dict(zip(counts["machine"], counts["n"]))
    firsts = counts[counts["arch"] == arches[0]]["machine"].tolist()
    seconds = counts[counts["arch"] == arches[1]]["machine"].tolist()
    pairs = [(a, b) for a in firsts for b in seconds if a != b]  # a machine under both: never against itself
    if not pairs:
        return None
    return min(pairs, key=lambda p: (-len(cases.get(p[0], set()) & cases.get(p[1], set())), -(n[p[0]] + n[p[1]]),
                                     p))


# --- readable tables: units in the headers, short commits, no "None" ------------------------------------

HEADERS = {
    "run_id": "run", "created": "run time (UTC)", "git_commit": "commit", "case_id": "case", "op": "op",
    "provider": "provider", "dtype": "dtype", "machine": "machine", "arch": "GPU", "gpu_name": "GPU name",
    "status": "status", "reason": "reason", "timer": "timer", "cache": "cache", "frontend": "front end",
    "input_sets": "input sets", "p20": "p20 (us)", "p50": "median (us)", "p80": "p80 (us)", "best_p50": "best median (us)",
    "best": "fastest", "items_per_s": "items/s", "gb_per_s": "GB/s", "ceiling_gb_per_s": "copy ceiling (GB/s)",
    "pct_of_ceiling": "% of copy ceiling", "throttled": "throttled", "contended": "contended", "noisy": "noisy",
    "speedup": "speedup (x)", "peer": "peer", "ratio": "ratio (x)",
    "base_p50": "baseline median (us)", "other_p50": "compared median (us)",
    "base_pct_of_ceiling": "baseline % of ceiling", "other_pct_of_ceiling": "compared % of ceiling",
    "base_ceiling_gb_per_s": "baseline ceiling (GB/s)", "other_ceiling_gb_per_s": "compared ceiling (GB/s)",
    "base_run_id": "baseline run", "other_run_id": "compared run",
}
SHORT_COMMIT = 10
# A missing figure as a table shows it. Not "": Streamlit draws an empty display value as "None".
MISSING = "-"


def number(v: Any) -> str:
    """A figure as a table shows it: thousands separated, about four significant digits, missing as :data:`MISSING`."""
    if v is None or isinstance(v, bool):
        return MISSING if v is None else ("yes" if v else "no")
    try:
        f = float(v)
    except (TypeError, ValueError):
        return str(v)
    if f != f:
        return MISSING
    a = abs(f)
    if a >= 1000:
        return f"{f:,.0f}"
    if a >= 100:
        return f"{f:.1f}" if not f.is_integer() else f"{int(f)}"  # a batch of 256 is "256", not "256.0"
    if a >= 1 or a == 0:
        return f"{f:.2f}".rstrip("0").rstrip(".") if f != int(f) else f"{int(f)}"
    return f"{f:.3g}"


def commit(v: Any) -> str:
    """A commit hash shortened to :data:`SHORT_COMMIT` hex digits; missing as :data:`MISSING`."""
    return MISSING if v is None or (isinstance(v, float) and v != v) else str(v)[:SHORT_COMMIT]


def text(v: Any) -> str:
    """A cell as text, missing (None, NaN, NaT, "") as :data:`MISSING`."""
    return MISSING if v is None or v is pd.NaT or (isinstance(v, float) and v != v) or v == "" else str(v)


def readable(df: pd.DataFrame, extra: dict[str, str] | None = None, provider_cols: Any = ()
             ) -> tuple[Any, dict[str, Any]]:
    """``(styler, column_config)`` for ``st.dataframe``: the frame with readable headers (units in them:
    :data:`HEADERS`, provider columns by their label), numbers formatted (:func:`number`), commits short
    (:func:`commit`; the header's tooltip says so and where the full hash is), missing values as ``-``, never
    ``None``; ``provider_cols`` (a :func:`side_by_side` table's p50 columns) headed by the provider's label. The underlying values stay numbers, so
    columns still sort as numbers. Record text stays data: a dataframe cell is never rendered as markup."""
    names = {**HEADERS, **(extra or {})}
    provs = {c: providers.label(str(c)) + " median (us)" for c in provider_cols}
    rename = {c: provs.get(c, names.get(c, c)) for c in df.columns}
    out = df.rename(columns=rename)
    fmt: dict[str, Any] = {}
    for orig, new in rename.items():
        col = df[orig]
        if orig == "git_commit" or orig.endswith("_commit"):
            fmt[new] = commit
        elif orig in ("provider", "peer", "best"):  # the provider table's readable name; the value stays the key
            fmt[new] = lambda v: MISSING if v is None or v != v else providers.label(str(v))
        elif pd.api.types.is_bool_dtype(col):
            fmt[new] = lambda v: "yes" if v else "no"
        elif pd.api.types.is_numeric_dtype(col):
            fmt[new] = number
        elif pd.api.types.is_datetime64_any_dtype(col):
            fmt[new] = lambda v: MISSING if pd.isna(v) else v.strftime("%Y-%m-%d %H:%M")
        else:
            fmt[new] = text
    config: dict[str, Any] = {}
    if "git_commit" in rename:
        import streamlit as st  # the column config only; the builder stays testable without a page

        config[rename["git_commit"]] = st.column_config.TextColumn(
            rename["git_commit"], help=f"first {SHORT_COMMIT} hex digits of the commit; the Runs page shows "
                                       "the full hash")
    return out.style.format(fmt, na_rep=MISSING), config


def wins(wide: pd.DataFrame) -> pd.DataFrame:
    """Per case of a :func:`side_by_side` table (one run per case, machine, timer, cache and dtype): robocache's
    speedup over the strongest peer of that same run, ``speedup`` = the fastest peer's p50 / robocache's p50
    (above 1: robocache wins). Kernel versions are not peers. Cases without robocache or without any peer are
    left out. Columns: the keys, ``run_id``, ``robocache_p50``, ``peer``, ``peer_p50``, ``speedup``; worst first."""
    cols = [*KEYS, "run_id", "robocache_p50", "peer", "peer_p50", "speedup"]
    provs = providers_in(wide)
    peers = [p for p in provs if providers.role(p) == "peer"]  # not versions, call-cost variants, the launch floor
    if wide.empty or OURS not in provs or not peers:
        return pd.DataFrame(columns=cols)
    d = wide.dropna(subset=[OURS]).dropna(subset=peers, how="all")
    if d.empty:
        return pd.DataFrame(columns=cols)
    d = d.assign(robocache_p50=d[OURS], peer=d[peers].idxmin(axis=1), peer_p50=d[peers].min(axis=1))
    d["speedup"] = d["peer_p50"] / d["robocache_p50"]
    if "created" in d.columns:  # when the run measured it: the morning page's provenance
        cols.append("created")
    return d[cols].sort_values(["speedup", "case_id", "dtype"], kind="stable").reset_index(drop=True)


def strongest_peer(df: pd.DataFrame) -> str | None:
    """The peer to beat in ``df`` (rows of one machine and method): the strongest peer of the most cases and dtypes
    in their newest run with robocache (:func:`wins`), ties to the one robocache leads by least; None without a
    case where robocache and a peer were measured side by side."""
    w = wins(side_by_side(df))
    if w.empty:
        return None
    by = w.groupby("peer", observed=True)["speedup"].agg(["size", "median"])
    return str(by.sort_values(["size", "median"], ascending=[False, True]).index[0])


# --- the morning page (Overview): the newest run per machine, its headline, H100 against H200 ------------------

def newest_runs(df: pd.DataFrame, timers: tuple[str, ...] = ("cuda_event", "host_loop", "host")) -> pd.DataFrame:
    """The ``ok`` single-GPU rows of, per machine and op, the newest run that measured robocache and at least one
    peer side by side: with the machine's first timer of ``timers`` that such a run used (the device timer of the
    kernel grid before the host timers) and its warm cache mode (else its first), and of the harness's own front
    end (``cli``, the nightly job's) when one such run has it: asv and pytest-benchmark measure a few cases each
    for their own tools. Every figure of the morning page comes from these rows, so each ratio is within one run."""
    # masks first and a narrow copy to group: the frame is ~60 columns wide, and a copy of 100,000 rows of it (or a
    # text copy of its categorical columns) costs more than the grouping
    keys = ["machine", "op", "run_id", "frontend", "timer", "cache"]
    mask = (df["status"] == "ok") & df["p50"].notna()
    if "world_size" in df.columns:
        mask &= df["world_size"].isna()
    if not mask.any():
        return df.iloc[0:0]
    k = df.loc[mask, [*keys, "created", "provider"]]
    prov = k["provider"]
    peers = [p for p in prov.dropna().unique() if providers.role(str(p)) == "peer"]
    k = k.assign(_ours=(prov == OURS).to_numpy(), _peer=prov.isin(peers).to_numpy())
    runs = k.groupby(keys, observed=True, sort=False).agg(ours=("_ours", "any"), peer=("_peer", "any"),
                                                         created=("created", "max"))
    runs = runs[runs["ours"] & runs["peer"]].reset_index()
    if runs.empty:
        return df.iloc[0:0]
    runs[keys] = runs[keys].astype(str)

    def method(g: pd.DataFrame) -> tuple[str, str]:
        ts = list(dict.fromkeys(g["timer"]))
        timer = next((t for t in timers if t in ts), sorted(ts)[0])
        caches = sorted(set(g.loc[g["timer"] == timer, "cache"]))
        return timer, "warm" if "warm" in caches else caches[0]

    chosen = []
    for _machine, g in runs.groupby("machine", sort=False):
        timer, cache = method(g)
        g = g[(g["timer"] == timer) & (g["cache"] == cache)].assign(_cli=lambda x: x["frontend"] == "cli")
        chosen.append(g.sort_values(["_cli", "created", "run_id"], kind="stable").drop_duplicates("op", keep="last"))
    pick = pd.concat(chosen)[["machine", "op", "run_id", "timer", "cache"]]
    mine = df[mask & df["run_id"].isin(set(pick["run_id"]))]  # those runs' rows, then their op and method
    hit = pd.MultiIndex.from_frame(mine[list(pick.columns)].astype(str)).isin(pd.MultiIndex.from_frame(pick))
    return mine[hit]


HEADLINE_COLUMNS = ["machine", "arch", "runs", "created", "cases", "wins", "median", "worst", "worst_case",
                    "worst_peer", "peers"]


def headline(w: pd.DataFrame, by: tuple[str, ...] = ("machine", "arch")) -> pd.DataFrame:
    """The headline of :func:`wins` rows (robocache against the strongest peer of the same run) per ``by``:
    ``cases`` (cases and dtypes), ``wins`` (robocache at least as fast), ``median`` and ``worst`` speedup, the
    worst case (``worst_case``: case and dtype; ``worst_peer``), the peers that were strongest somewhere
    (``peers``), the runs (``runs``) and the newest run's time (``created``)."""
    cols = [*by, *[c for c in HEADLINE_COLUMNS if c not in by]]
    if w.empty:
        return pd.DataFrame(columns=cols)
    rows = []
    for key, g in w.groupby(list(by), observed=True, sort=True):
        worst = g.loc[g["speedup"].idxmin()]
        row = dict(zip(by, key if isinstance(key, tuple) else (key,)))
        row.update(runs=", ".join(sorted(g["run_id"].astype(str).unique())),
                   created=g["created"].max() if "created" in g.columns else None,
                   cases=len(g), wins=int((g["speedup"] >= 1.0).sum()), median=float(g["speedup"].median()),
                   worst=float(worst["speedup"]), worst_case=f"{worst['case_id']} {worst['dtype']}",
                   worst_peer=str(worst["peer"]),
                   peers=", ".join(providers.label(p) for p in sorted(g["peer"].astype(str).unique(),
                                                                     key=providers.order)))
        rows.append(row)
    return pd.DataFrame(rows, columns=cols)


def pair_runs(df: pd.DataFrame, base: str, other: str,
              timers: tuple[str, ...] = ("cuda_event", "host_loop", "host")) -> pd.DataFrame:
    """The rows :func:`pair_glance` compares: per op, the two machines' newest runs (:func:`newest_runs`) of the
    most recent suite in which both measured robocache cases in common. The newest runs alone may share none (a
    sampled run with a fresh seed draws shapes of its own), so each op falls back suite by suite, newest first."""
    d = df[df["machine"].astype(str).isin([base, other])]
    if d.empty or "suite" not in d.columns:
        return d.iloc[0:0]
    # the ops and each machine's timer and cache mode of its newest runs (the kernel grid's device timer): a suite
    # timed otherwise (the pipelines' host timer) is never compared against another's device times
    newest = newest_runs(d, timers)
    keys = ["machine", "timer", "cache"]
    methods = pd.MultiIndex.from_frame(newest[keys].astype(str).drop_duplicates())
    d = d[pd.MultiIndex.from_frame(d[keys].astype(str)).isin(methods) & d["op"].astype(str).isin(
        set(newest["op"].astype(str)))]
    suites = d.groupby(d["suite"].astype(str), observed=True)["created"].max().sort_values(ascending=False).index
    parts, done = [], set()
    for s in suites:
        rows = newest_runs(d[d["suite"].astype(str) == s], timers)
        new = [op for op in pair_glance(rows, base, other)["op"] if op not in done] if not rows.empty else []
        if new:
            parts.append(rows[rows["op"].astype(str).isin(new)])
            done.update(new)
    return pd.concat(parts) if parts else d.iloc[0:0]


def pair_glance(rows: pd.DataFrame, base: str, other: str, provider: str = OURS) -> pd.DataFrame:
    """Two machines at a glance over the same cases (:func:`machine_ratio` of ``provider``), per op: ``cases``
    measured on both, the ``median``, ``low`` and ``high`` of base p50 / other p50 (above 1: ``other`` faster),
    and each machine's copy ceiling (the median over those cases' runs), whose ratio a bandwidth-bound kernel
    should follow."""
    cols = ["op", "cases", "median", "low", "high", "base_ceiling", "other_ceiling"]
    r = machine_ratio(rows[rows["provider"].astype(str) == provider], base, other) if not rows.empty else rows
    if r.empty:
        return pd.DataFrame(columns=cols)
    r = r.assign(op=r["case_id"].str.split("/").str[0])
    out = r.groupby("op", sort=False).agg(cases=("ratio", "size"), median=("ratio", "median"), low=("ratio", "min"),
                                          high=("ratio", "max"), base_ceiling=("base_ceiling_gb_per_s", "median"),
                                          other_ceiling=("other_ceiling_gb_per_s", "median")).reset_index()
    from robocache.bench import ops

    return out.sort_values("op", key=lambda s: s.map(ops.order), kind="stable")[cols].reset_index(drop=True)
