"""Pure chart builders: DataFrame in, plotly Figure out (no Streamlit here, so each is unit-testable).

Plotly renders a subset of HTML in every piece of text it draws (titles, axis tick labels, legend
entries, hover text, annotations: ``<b>``, ``<i>``, ``<br>``, ``<sub>``, ``<sup>``, ``<span style>``,
``<a href>``). Record text (case ids, providers, dtypes, machines, architectures, run ids, commits, and
the page titles built from them) therefore passes through :func:`plain` before it reaches a figure:
``&``, ``<`` and ``>`` become entities, which plotly draws as the characters typed.
"""
from __future__ import annotations

from typing import Any

import pandas as pd
import plotly.graph_objects as go

from robocache import providers

METRICS = {
    "p50": ("median time per call (us)", True),
    "items_per_s": ("items per second", True),
    "gb_per_s": ("bandwidth (GB/s)", True),
    "pct_of_ceiling": ("% of the copy ceiling", False),
    # a call-cost case's interleaved ratio (records.call_ratio: public call / bare launch, timed ABAB in one
    # process): what the check judges such a series by; History only (history_data.RATIO_METRIC)
    "call_ratio": ("interleaved call ratio, public / bare launch", False),
}


DASHES = ("solid", "dash", "dot", "dashdot", "longdash", "longdashdot")


def dtype_dash(dtype: Any) -> str:
    """A dtype's line dash, the same on every chart whatever other dtypes it shows: float32 solid, float16 dashed,
    bfloat16 dotted (the grid's order), any other dtype one of the rest picked by its name."""
    from robocache.bench.ops.base import GPU_DTYPES

    t = str(dtype)
    if t in GPU_DTYPES:
        return DASHES[GPU_DTYPES.index(t) % len(DASHES)]
    return providers.stable_pick(t, DASHES[len(GPU_DTYPES):] or DASHES)


def provider_color(provider: Any) -> str:
    """The provider's colour, the same on every page and every run: the provider table's
    (:func:`robocache.providers.color`; unknown names get a stable one from their name)."""
    return providers.color(str(provider))


def provider_label(provider: Any) -> str:
    """The provider's readable name (``robocache@v2`` -> ``robocache v2``; the provider table's)."""
    return providers.label(str(provider))


def provider_name(provider: Any) -> str:
    """The provider's readable legend label, escaped for plotly."""
    return plain(provider_label(provider))


def plain(text: Any) -> str:
    """Record text made inert for plotly: its markup characters as entities, so it shows as typed."""
    return str(text).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def plain_col(col: pd.Series) -> pd.Series:
    """:func:`plain` over a column (categories and missing values become strings first)."""
    return col.astype(str).str.replace("&", "&amp;", regex=False).str.replace(
        "<", "&lt;", regex=False).str.replace(">", "&gt;", regex=False)


# 1-2-5 steps per decade: the ticks of every ratio axis, labelled as ratios ("0.2x", "0.5x", "1x", "2x", ...).
_RATIO_STEPS = (1.0, 2.0, 5.0)


def ratio_label(v: float) -> str:
    """A ratio as its tick label: ``0.2`` -> ``"0.2x"``, ``1`` -> ``"1x"``, ``2000`` -> ``"2000x"``."""
    return f"{v:g}x"


def ratio_ticks(values: Any) -> tuple[list[float], list[str]]:
    """Tick values (1-2-5 per decade, always including 1x) and their labels covering ``values`` on a log axis."""
    import math

    vs = [float(v) for v in pd.Series(values, dtype="float64").dropna() if float(v) > 0 and math.isfinite(float(v))]
    lo, hi = (min(vs + [1.0]), max(vs + [1.0]))
    ticks = [m * 10.0 ** e for e in range(math.floor(math.log10(lo)) - 1, math.ceil(math.log10(hi)) + 1)
             for m in _RATIO_STEPS]
    ticks = [round(t, 12) for t in ticks if lo / 1.5 <= t <= hi * 1.5]  # a tick just past each end
    if len(ticks) < 3:  # a narrow range (e.g. versions within 1-1.4x of each other): finer steps, never "1x" alone
        fine = [m * 10.0 ** e for e in range(math.floor(math.log10(lo)) - 1, math.ceil(math.log10(hi)) + 1)
                for m in (1, 1.1, 1.2, 1.3, 1.5, 1.7, 2, 2.5, 3, 4, 5, 6, 7, 8, 9)]
        ticks = [round(t, 12) for t in fine if lo / 1.15 <= t <= hi * 1.15]
    return ticks, [ratio_label(t) for t in ticks]


def ratio_axis(fig: go.Figure, values: Any, axis: str = "yaxis") -> go.Figure:
    """Make ``axis`` a log ratio axis with ticks labelled as ratios (plotly's own log ticks label 0.2 and
    0.5 as "2" and "5")."""
    import math

    vals, text = ratio_ticks(values)
    vs = [float(v) for v in pd.Series(values, dtype="float64").dropna() if float(v) > 0 and math.isfinite(float(v))]
    # the range set, 1x always inside: plotly's autorange of bars based at 1 on a log axis starts at 1x and hides
    # every bar below it (a peer faster than robocache)
    lo, hi = min(vs + [1.0]) / 1.25, max(vs + [1.0]) * 1.25
    fig.update_layout(**{axis: dict(type="log", tickvals=vals, ticktext=text, range=[math.log10(lo), math.log10(hi)])})
    return fig


def ratio_bar(fig: go.Figure, x: Any, ratio: Any, name: str, hovertemplate: str, extra: dict[str, Any] | None = None,
              **kw: Any) -> go.Figure:
    """Add one trace of bars to a log ratio axis, each drawn from the 1x line to its ratio: plotly draws a bar
    from ``base`` to ``base + y``, so the bars get base 1 and length ``ratio - 1`` (a 0.5x bar points down from
    1x, a 2x bar up; with plotly's default base a log axis starts every bar at the bottom of the chart, and a
    0.5x bar looks like a gain). The ratio is ``customdata[0]`` (the hover's ``%{customdata[0]:.2f}x``), the
    columns of ``extra`` follow it in order."""
    r = pd.Series(ratio, dtype="float64").reset_index(drop=True)
    cd = pd.DataFrame({"_ratio": r, **{k: pd.Series(v).reset_index(drop=True) for k, v in (extra or {}).items()}})
    if kw.get("orientation") == "h":  # horizontal: the categories on y, the bars along x from 1x
        fig.add_bar(y=x, x=r - 1.0, base=1.0, name=name, customdata=cd, hovertemplate=hovertemplate, **kw)
    else:
        fig.add_bar(x=x, y=r - 1.0, base=1.0, name=name, customdata=cd, hovertemplate=hovertemplate, **kw)
    return fig


def _case_labels(g: pd.DataFrame) -> pd.Series:
    """The x category of a bar: case id and dtype, escaped."""
    return plain_col(g["case_id"].astype(str) + " " + g["dtype"].astype(str))


def _empty(title: str) -> go.Figure:
    fig = go.Figure()
    fig.update_layout(title=plain(title), annotations=[dict(text="no data", showarrow=False, x=0.5, y=0.5,
                                                     xref="paper", yref="paper")])
    return fig


def ranked_bars(w: pd.DataFrame, title: str = "", prefix_machine: bool = False) -> go.Figure:
    """Horizontal bars over :func:`dashboard.tables.wins` rows: one per case and dtype (``prefix_machine``: and its
    GPU), ranked by robocache's speedup over the strongest peer of the same run, the worst at the top, each drawn
    from the 1x line and labelled with its ratio and peer (readable however short the bar); one colour per peer;
    a log axis labelled in ratios, ranging over these rows only (a 0.9x loss is no sliver under a 20x axis).
    Horizontal, so the case names read level at 1280 px instead of rotated."""
    d = w.dropna(subset=["speedup"]) if not w.empty else w
    d = d[d["speedup"] > 0] if not d.empty else d
    if d.empty:
        return _empty(title or "robocache against the strongest peer (no case with both)")
    d = d.sort_values(["speedup", "case_id", "dtype"], kind="stable")
    label = d["case_id"].astype(str) + " " + d["dtype"].astype(str)
    if prefix_machine:
        several = d.groupby("arch", observed=True)["machine"].nunique().gt(1).any()
        who = d["machine"].astype(str) if several else d["arch"].astype(str)
        label = who + " " + label
    d = d.assign(_y=plain_col(label), _peer=[provider_label(p) for p in d["peer"].astype(str)])
    fig = go.Figure()
    for peer, g in sorted(d.groupby("peer", observed=True), key=lambda kv: providers.order(str(kv[0]))):
        ratio_bar(fig, g["_y"], g["speedup"], provider_name(peer), orientation="h",
                  marker_color=provider_color(peer),
                  text=[f"{v:.2f}x" for v in g["speedup"]],  # the peer: its colour, the legend, the hover
                  textposition="outside", cliponaxis=False,
                  extra={"run": plain_col(g["run_id"])},
                  hovertemplate="%{y}<br>%{customdata[0]:.2f}x vs %{fullData.name}<br>run %{customdata[1]}"
                                "<extra></extra>")
    fig.add_vline(x=1.0, line_dash="dot", line_color="gray")
    n = len(d)
    fig.update_layout(title=plain(title or "robocache against the strongest peer"), barmode="overlay",
                      xaxis_title="speedup (strongest peer p50 / robocache p50; below 1x the peer is faster)",
                      yaxis=dict(categoryorder="array", categoryarray=d["_y"].tolist(), autorange="reversed",
                                 automargin=True),
                      legend_title="strongest peer", legend=dict(orientation="h", yanchor="bottom", y=1.0, x=0),
                      showlegend=True,  # the peer's name, even when one peer is the strongest everywhere
                      height=int(max(260, min(2400, 140 + 26 * n))), margin=dict(r=120))
    # the axis spans these bars and the 1x line, with a little room past the longest bars for their labels: a
    # chart of losses alone spans ~0.8x-1.1x, where a 0.93x loss is a quarter of the width, not a sliver
    import math

    lo = min(float(d["speedup"].min()), 1.0) / 1.12
    hi = max(float(d["speedup"].max()), 1.0) * 1.12
    vals, text = ratio_ticks([lo, hi])
    keep = [i for i, v in enumerate(vals) if lo <= v <= hi]
    fig.update_layout(xaxis=dict(type="log", tickvals=[vals[i] for i in keep], ticktext=[text[i] for i in keep],
                                 range=[math.log10(lo), math.log10(hi)]))
    return fig


def _bar_height(df: pd.DataFrame) -> int:
    """Taller bar charts for many cases: their rotated case labels otherwise squeeze the bars flat."""
    n = df[["case_id", "dtype"]].drop_duplicates().shape[0] if {"case_id", "dtype"} <= set(df.columns) else 0
    return int(max(450, min(800, 300 + 10 * n)))


# What one line of a sweep may join: points of one run (so one machine, front end, environment and peer
# implementation: a run measures each provider once, side by side) of one provider and one measuring method. Points
# of other runs, or another method version, are other lines, never joined (issue 24: a CuPy line read 110 us at
# B=256, 17,365 us at B=1024 from an older CuPy peer's run, 416 us at B=4096).
LINE_KEYS = ("provider", "run_id", "method_version")


def provenance(g: pd.DataFrame) -> pd.DataFrame:
    """Each point's provenance for its hover: run id, run date (UTC), short commit and machine, escaped."""
    when = g["created"].dt.strftime("%Y-%m-%d %H:%M") if "created" in g.columns else pd.Series("?", index=g.index)
    commit = g["git_commit"].astype(object).where(g["git_commit"].notna(), "unknown") if "git_commit" in g.columns \
        else pd.Series("unknown", index=g.index)
    return pd.DataFrame({"run": plain_col(g["run_id"]), "date": when.fillna("?").astype(str),
                         "commit": plain_col(commit.astype(str).str[:10]), "machine": plain_col(g["machine"])},
                        index=g.index)


PROVENANCE_HOVER = ("run %{customdata[1]} (%{customdata[2]} UTC)<br>commit %{customdata[3]} on "
                    "%{customdata[4]}")


def sweep_lines(df: pd.DataFrame, x: str, metric: str = "p50", title: str = "") -> go.Figure:
    """``metric`` against the shape parameter ``x``, log-log: one line per provider, run and method version
    (:data:`LINE_KEYS`: a line never joins points of two runs); the legend names the run when one provider has
    lines from several runs. Every point's hover: case, run, date, commit, machine."""
    label, log_y = METRICS[metric]
    d = df.dropna(subset=[x, metric]).sort_values(x)
    if d.empty:
        return _empty(title or f"{label} vs {x}")
    # rows without provenance (a frame built by hand) still draw: one line per provider
    missing = {c: None for c in ("run_id", "method_version", "git_commit", "machine") if c not in d.columns}
    if "created" not in d.columns:
        missing["created"] = pd.Series(pd.NaT, index=d.index, dtype="datetime64[ns, UTC]")
    d = d.assign(**missing)
    d = d.assign(_line=d[list(LINE_KEYS)].astype(str).agg("|".join, axis=1))
    first = d.groupby("_line", sort=False).agg(provider=("provider", "first"), run=("run_id", "first"),
                                              when=("created", "min"), mv=("method_version", "first"))
    per_provider = first.groupby("provider", observed=True).size()
    versions = d["method_version"].nunique()
    # a provider's newest line solid, its older ones dotted (the legend names each one's run)
    rank = first.groupby("provider", observed=True)["when"].rank(method="first", ascending=False)
    fig = go.Figure()
    for line in sorted(first.index, key=lambda k: (providers.order(str(first.at[k, "provider"])), first.at[k, "when"])):
        g = d[d["_line"] == line]
        prov = str(first.at[line, "provider"])
        name = provider_label(prov)
        if per_provider.get(prov, 0) > 1:  # this provider has lines of several runs (or methods): say which
            when = first.at[line, "when"]
            name += f" (run {first.at[line, 'run']}{', ' + when.strftime('%Y-%m-%d') if pd.notna(when) else ''}"
            name += f", method v{whole(first.at[line, 'mv'])})" if versions > 1 else ")"
        cd = pd.concat([plain_col(g["case_id"]).rename("case"), provenance(g)], axis=1)
        fig.add_scatter(x=g[x], y=g[metric], mode="lines+markers", name=plain(name),
                        line_color=provider_color(prov), line_dash="dot" if rank[line] > 1 else "solid",
                        customdata=cd, meta=plain(str(first.at[line, "run"])),
                        hovertemplate="%{customdata[0]}<br>" + plain(x) + "=%{x}<br>%{y:.4g}<br>" + PROVENANCE_HOVER
                                      + "<extra>%{fullData.name}</extra>")
    fig.update_layout(title=plain(title or f"{label} vs {x}"), xaxis_title=plain(x), yaxis_title=label,
                      legend_title="provider", xaxis_type="log", yaxis_type="log" if log_y else "linear")
    value_axis(fig, d[x])
    return log_axis(fig, d[metric]) if log_y else fig


def arch_bars(df: pd.DataFrame, metric: str = "p50", title: str = "") -> go.Figure:
    """Grouped bars: the same cases side by side, one colour per architecture (machine in the name)."""
    label, log_y = METRICS[metric]
    d = df.dropna(subset=[metric])
    if d.empty:
        return _empty(title or label)
    fig = go.Figure()
    for (arch, machine), g in d.groupby(["arch", "machine"], sort=True, observed=True):
        fig.add_bar(x=_case_labels(g), y=g[metric], name=plain(f"{arch} ({machine})"))
    fig.update_layout(title=plain(title or label), barmode="group", yaxis_title=label, legend_title="architecture",
                      yaxis_type="log" if log_y else "linear")
    return log_axis(fig, d[metric]) if log_y else fig


# What tells two series of one provider and dtype apart in a legend, when they differ in it.
SERIES_EXTRAS = (("frontend", "{}"), ("input_sets", "{} input sets"), ("method_version", "method v{}"),
                 ("grid_version", "grid v{}"))


def whole(v: Any) -> Any:
    """A float that holds a whole number (a frame column with gaps) as the int it is: ``21.0`` -> ``21``."""
    return int(v) if isinstance(v, float) and v.is_integer() else v


def legend_extras(first: pd.DataFrame) -> list[tuple[str, str]]:
    """Of :data:`SERIES_EXTRAS`, those that tell apart series of one provider and dtype in ``first`` (one row
    per series)."""
    groups = first.assign(**{c: first[c].astype(str) for c, _ in SERIES_EXTRAS if c in first.columns}).groupby(
        ["provider", "dtype"], observed=True)
    return [(c, fmt) for c, fmt in SERIES_EXTRAS if c in first.columns and int(groups[c].nunique().max()) > 1]


def legend_name(first: pd.DataFrame, key: Any, extras: list[tuple[str, str]]) -> str:
    """Series ``key``'s legend name: provider label, dtype and its ``extras``."""
    return " ".join([provider_label(str(first.at[key, "provider"])), str(first.at[key, "dtype"]),
                     *(fmt.format(whole(first.at[key, c])) for c, fmt in extras)])


def history_lines(df: pd.DataFrame, metric: str = "p50", title: str = "") -> go.Figure:
    """One line per series (:func:`robocache.bench.schema.series_key`: provider, dtype, front end, input sets,
    grid version, ... within the rows given) over time, one point per record, with the commit in the hover; a
    line never joins points of two series."""
    from . import tables

    label, log_y = METRICS[metric]
    d = df.dropna(subset=[metric, "created"]).sort_values("created")
    if d.empty:
        return _empty(title or label)
    d = d.assign(_series=tables.series_ids(d))
    fig = go.Figure()
    first = d.groupby("_series", sort=False).first()
    extras = legend_extras(first)  # a legend names what tells apart the series of one provider and dtype
    order = sorted(first.index, key=lambda k: (providers.order(str(first.at[k, "provider"])),
                                               str(first.at[k, "dtype"]), *(str(first.at[k, c]) for c, _ in extras)))
    for key in order:
        g = d[d["_series"] == key]
        prov, dtype = str(first.at[key, "provider"]), str(first.at[key, "dtype"])
        name = legend_name(first, key, extras)
        commit = plain_col(g["git_commit"].fillna("unknown").astype(str).str[:10])
        fig.add_scatter(x=g["created"], y=g[metric], mode="lines+markers", name=plain(name),
                        line_color=provider_color(prov), line_dash=dtype_dash(dtype),
                        customdata=pd.DataFrame({"c": commit, "r": plain_col(g["run_id"]), "s": key}),
                        hovertemplate="%{x}<br>commit %{customdata[0]}<br>run %{customdata[1]}<br>series "
                                      "%{customdata[2]}<br>%{y:.4g}<extra>%{fullData.name}</extra>")
    fig.update_layout(title=plain(title or label), xaxis_title="run time (UTC)", yaxis_title=label,
                      legend_title="series", yaxis_type="log" if log_y else "linear")
    return fig


# --- multi-GPU --------------------------------------------------------------------------------------

MULTI_METRICS = {
    "efficiency": ("scaling efficiency (1 = linear)", False),
    "aggregate_items_per_s": ("aggregate items per second", True),
    "step_us": ("step time, slowest rank (us)", True),
}


def multigpu_family(case_id: pd.Series) -> pd.Series:
    """A multi-GPU case id without its GPU count: the points of one scaling line share it
    (``resample/B4096-S100-T50-D32-weak-g4-allgather`` -> ``resample/B4096-S100-T50-D32-weak-allgather``)."""
    return case_id.astype(str).str.replace(r"-g\d+-", "-", regex=True)


def scaling_lines(df: pd.DataFrame, metric: str = "efficiency", title: str = "") -> go.Figure:
    """One line per op/shape/scaling/gather and provider (and machine, when there are several) of ``metric``
    against the GPU count; the 1x line marks linear scaling on the efficiency chart."""
    label, log_y = MULTI_METRICS[metric]
    d = df.dropna(subset=["world_size", metric]).sort_values("world_size")
    if d.empty:
        return _empty(title or f"{label} vs GPUs")
    d = d.assign(family=multigpu_family(d["case_id"]))
    several = d["machine"].astype(str).nunique() > 1
    fig = go.Figure()
    for (machine, family, prov), g in d.groupby(["machine", "family", "provider"], sort=True, observed=True):
        name = f"{family} {prov}" + (f" ({machine})" if several else "")
        fig.add_scatter(x=g["world_size"], y=g[metric], mode="lines+markers", name=plain(name),
                        customdata=plain_col(g["case_id"]),
                        hovertemplate="%{customdata}<br>%{x} GPUs<br>%{y:.4g}<extra>%{fullData.name}</extra>")
    if metric == "efficiency":
        fig.add_hline(y=1.0, line_dash="dot", line_color="gray")
    ks = sorted({int(k) for k in d["world_size"]})
    fig.update_layout(title=plain(title or f"{label} vs GPUs"), xaxis_title="GPUs (ranks)", yaxis_title=label,
                      legend_title="op/shape-scaling-gather, provider", yaxis_type="log" if log_y else "linear",
                      legend_orientation="h", legend_y=-0.2, legend_yanchor="top", height=520 + 22 * d["family"].nunique(),
                      xaxis=dict(type="log", tickvals=ks, ticktext=[str(k) for k in ks]))
    return fig


def gather_bars(df: pd.DataFrame, title: str = "") -> go.Figure:
    """The op's gather bandwidth next to the collective's own (an all_gather of a plain tensor of the same size,
    measured in the same launch; algbw and nccl-tests' busbw): one group of horizontal bars per gather case and
    machine. One-rank cases are left out: their "gather" is a local copy that crosses no link."""
    d = df.dropna(subset=["gather_gb_per_s"])
    d = d[d["world_size"].fillna(1).astype(float) > 1] if "world_size" in d.columns else d
    if d.empty:
        return _empty(title or "gather bandwidth (no gather case over several GPUs)")
    d = d.sort_values(["case_id", "world_size"], ascending=False)
    label = d["case_id"].astype(str) + " " + d["provider"].astype(str)
    if d["machine"].astype(str).nunique() > 1:  # the same case on several machines: one group each
        label = label + " (" + d["machine"].astype(str) + ")"
    y = plain_col(label)
    fig = go.Figure()
    for col, name in (("gather_gb_per_s", "the op's gather (algbw)"),
                      ("collective_gb_per_s", "all_gather alone (algbw)"),
                      ("collective_busbw_gb_per_s", "all_gather alone (busbw)")):
        fig.add_bar(y=y, x=d[col], name=name, orientation="h",
                    hovertemplate="%{y}<br>%{x:.4g} GB/s<extra>%{fullData.name}</extra>")
    fig.update_layout(title=plain(title or "gather bandwidth"), barmode="group", xaxis_title="GB/s",
                      yaxis_title=None, legend_title="measured", legend_orientation="h", legend_y=-0.15,
                      height=int(max(400, min(1400, 160 + 60 * len(d)))))
    return fig


# --- kernels: the optimisation journey and torch.compile at its best ----------------------------------

def _machine_names(d: pd.DataFrame) -> pd.Series:
    """``arch (machine)`` per row, the legend name of a machine."""
    return d["arch"].astype(str) + " (" + d["machine"].astype(str) + ")"


PUBLIC_LABEL = "public API"


def journey_bars(journey: pd.DataFrame, title: str = "") -> go.Figure:
    """Grouped bars over :func:`robocache.bench.views.kernels.journey_rows` rows of one op: per kernel version, its
    geometric-mean speedup over the first version across every case both measured, one colour per machine;
    the 1x line is the first version. The public API (``version == "public"``: what ``robocache`` calls, the best
    version) is the last bar, "public API": with only v1 and the public call measured it is the journey's end."""
    d = journey.dropna(subset=["geomean_vs_v1"]) if not journey.empty else journey
    if d.empty:
        return _empty(title or "kernel versions: geomean speedup (no versions measured)")
    fig = go.Figure()
    d = d.assign(_who=_machine_names(d), _v=d["version"].astype(str).replace({"public": PUBLIC_LABEL}))
    for who, g in d.groupby("_who", sort=True):
        ratio_bar(fig, plain_col(g["_v"]), g["geomean_vs_v1"], plain(who),
                  extra={c: g[c] for c in ("cases_vs_v1", "min_vs_v1", "max_vs_v1")},
                  hovertemplate="%{x}: %{customdata[0]:.2f}x over %{customdata[1]} cases (%{customdata[2]:.2f}-"
                                "%{customdata[3]:.2f}x)<extra>%{fullData.name}</extra>")
    fig.add_hline(y=1.0, line_dash="dot", line_color="gray")
    fig.update_layout(title=plain(title or "kernel versions: geomean speedup over the first version"),
                      barmode="group", xaxis_title="kernel version", yaxis_title="geomean speedup (x)",
                      legend_title="GPU (machine)")
    return ratio_axis(fig, d["geomean_vs_v1"])


def ratio_bars(cases: pd.DataFrame, title: str = "") -> go.Figure:
    """Bars over :func:`robocache.bench.views.kernels.vs_compile_cases` rows: per case and dtype, torch.compile at
    its best / robocache (above the 1x line: robocache faster), one colour per machine; log y. The winning
    torch.compile mode is in the hover."""
    if cases.empty:
        return _empty(title or "robocache vs torch.compile at its best (no case with both)")
    d = cases.assign(_who=_machine_names(cases), _x=plain_col(cases["case"].astype(str) + " " + cases["dtype"].astype(str)))
    fig = go.Figure()
    for who, g in d.groupby("_who", sort=True):
        ratio_bar(fig, g["_x"], g["ratio"], plain(who), extra={"mode": plain_col(g["compile_mode"])},
                  hovertemplate="%{x}<br>%{customdata[0]:.2f}x (torch.compile %{customdata[1]})"
                                "<extra>%{fullData.name}</extra>")
    fig.add_hline(y=1.0, line_dash="dot", line_color="gray")
    n = d["_x"].nunique()
    fig.update_layout(title=plain(title or "robocache vs torch.compile at its best"), barmode="group",
                      yaxis_type="log", yaxis_title="torch.compile (faster mode) p50 / robocache p50",
                      xaxis_title="case", legend_title="GPU (machine)", height=int(max(450, min(800, 300 + 10 * n))))
    return ratio_axis(fig, d["ratio"])


def machine_ratio_bars(ratio: pd.DataFrame, base: str, other: str, title: str = "") -> go.Figure:
    """Bars of a :func:`dashboard.tables.machine_ratio` table: per case, ``base`` p50 / ``other`` p50 (above 1:
    ``other`` faster), one colour per provider; the 1x line is parity."""
    d = ratio.dropna(subset=["ratio"]) if not ratio.empty else ratio
    if d.empty:
        return _empty(title or f"{base} vs {other} (no case measured on both)")
    fig = go.Figure()
    for prov, g in d.groupby("provider", sort=True, observed=True):
        ratio_bar(fig, _case_labels(g), g["ratio"], provider_name(prov), marker_color=provider_color(prov),
                  hovertemplate="%{x}<br>%{customdata[0]:.2f}x<extra>%{fullData.name}</extra>")
    fig.add_hline(y=1.0, line_dash="dot", line_color="gray")
    fig.update_layout(title=plain(title or f"{other} speedup over {base}"), barmode="group",
                      yaxis_title=plain(f"{base} p50 / {other} p50"), xaxis_title="case", legend_title="provider",
                      height=_bar_height(d))
    return ratio_axis(fig, d["ratio"])


# --- where robocache wins ------------------------------------------------------------------------------

def wins_heatmap(w: pd.DataFrame, title: str = "") -> go.Figure:
    """A heat map over :func:`dashboard.tables.wins` rows of one machine: case (y) x dtype (x), coloured by
    robocache's speedup over the strongest peer of the same run on a log scale, diverging around 1x (blue: robocache
    faster, red: slower); the colour bar is labelled in ratios and the hover names the peer."""
    import math

    d = w.dropna(subset=["speedup"]) if not w.empty else w
    d = d[d["speedup"] > 0] if not d.empty else d
    if d.empty:
        return _empty(title or "where robocache wins (no case with robocache and a peer)")
    cases = list(dict.fromkeys(d["case_id"].astype(str)))
    dtypes = sorted(d["dtype"].astype(str).unique())
    z = [[None] * len(dtypes) for _ in cases]
    text = [[""] * len(dtypes) for _ in cases]
    peer = [[""] * len(dtypes) for _ in cases]
    for r in d.itertuples(index=False):
        i, j = cases.index(str(r.case_id)), dtypes.index(str(r.dtype))
        z[i][j] = math.log10(float(r.speedup))
        text[i][j] = ratio_label(round(float(r.speedup), 2))
        peer[i][j] = provider_name(r.peer)
    # symmetric around 1x over the data (at least 0.5x..2x), so equal colours mean equal factors either way
    span = max(math.log10(2.0), *(abs(math.log10(float(v))) for v in d["speedup"]))
    vals, labels = ratio_ticks([10 ** -span, 10 ** span])
    keep = [i for i, v in enumerate(vals) if abs(math.log10(v)) <= span + 1e-9]
    vals, labels = [vals[i] for i in keep], [labels[i] for i in keep]
    fig = go.Figure(go.Heatmap(
        z=z, x=[plain(t) for t in dtypes], y=[plain(c) for c in cases], text=text, texttemplate="%{text}",
        customdata=peer, colorscale="RdBu", zmid=0.0, zmin=-span, zmax=span,
        colorbar=dict(title="speedup", tickvals=[math.log10(v) for v in vals], ticktext=labels),
        hovertemplate="%{y} %{x}<br>%{text} vs %{customdata} (the strongest peer)<extra></extra>"))
    fig.update_layout(title=plain(title or "robocache speedup over the strongest peer"), xaxis_title="dtype",
                      yaxis_title="case", yaxis_autorange="reversed", height=int(max(400, min(2400, 160 + 24 * len(cases)))))
    return fig


# --- sweeps and architectures (issue 15) --------------------------------------------------------------

def dtype_bars(df: pd.DataFrame, metric: str = "p50", title: str = "") -> go.Figure:
    """One case across its dtypes: grouped bars, x = dtype (float32, float16, bfloat16, then others), one colour per
    provider; log y for the log metrics."""
    from robocache.bench.ops.base import GPU_DTYPES

    label, log_y = METRICS[metric]
    d = df.dropna(subset=[metric])
    if d.empty:
        return _empty(title or f"{label} by dtype")
    known = [t for t in GPU_DTYPES if t in set(d["dtype"].astype(str))]
    order = known + sorted(set(d["dtype"].astype(str)) - set(known))
    fig = go.Figure()
    for prov, g in sorted(d.groupby("provider", observed=True), key=lambda kv: providers.order(str(kv[0]))):
        g = g.assign(_o=g["dtype"].astype(str).map(order.index)).sort_values("_o")
        fig.add_bar(x=plain_col(g["dtype"]), y=g[metric], name=provider_name(prov), marker_color=provider_color(prov),
                    customdata=pd.concat([plain_col(g["case_id"]).rename("case"), provenance(g)], axis=1),
                    hovertemplate="%{customdata[0]} %{x}<br>%{y:.4g}<br>" + PROVENANCE_HOVER
                                  + "<extra>%{fullData.name}</extra>")
    fig.update_layout(title=plain(title or f"{label} by dtype"), barmode="group", xaxis_title="dtype",
                      yaxis_title=label, legend_title="provider", yaxis_type="log" if log_y else "linear",
                      xaxis=dict(categoryorder="array", categoryarray=[plain(t) for t in order]))
    return fig


OP_SYMBOLS = ("circle", "square", "diamond", "triangle-up", "x", "cross")


def roofline(df: pd.DataFrame, title: str = "") -> go.Figure:
    """A bandwidth roofline of one GPU: achieved GB/s (y) against bytes moved per item (x), both log, one marker
    per case and dtype, one colour per op; the roof is the GPU's own copy ceiling measured in the same runs (the
    median over them; its range in the hover when runs differ). A bandwidth-bound kernel sits on the roof; small
    items (or few of them) fall below it where launch and latency dominate."""
    d = df.dropna(subset=["gb_per_s", "items_per_s"]) if not df.empty else df
    d = d[(d["gb_per_s"] > 0) & (d["items_per_s"] > 0)] if not d.empty else d
    if d.empty:
        return _empty(title or "roofline (no case with bandwidth and items measured)")
    import math

    d = d.assign(_bpi=d["gb_per_s"] * 1e9 / d["items_per_s"])
    fig = go.Figure()
    op_names = list(dict.fromkeys(sorted(d["op"].astype(str), key=lambda o: (_op_order(o), o))))
    from plotly.colors import qualitative

    palette = qualitative.D3  # ops, not providers: a colour per op (the provider table's colours mean providers)
    for i, op in enumerate(op_names):
        g = d[d["op"].astype(str) == op]
        fig.add_scatter(x=g["_bpi"], y=g["gb_per_s"], mode="markers", name=plain(op),
                        marker=dict(color=palette[i % len(palette)], symbol=OP_SYMBOLS[i % len(OP_SYMBOLS)], size=9),
                        customdata=pd.DataFrame({"c": plain_col(g["case_id"]), "t": plain_col(g["dtype"]),
                                                 "p": g["pct_of_ceiling"].round(1).astype(str).replace("nan", "-")}),
                        hovertemplate="%{customdata[0]} %{customdata[1]}<br>%{x:.4g} bytes/item<br>%{y:.4g} GB/s "
                                      "(%{customdata[2]}% of the copy ceiling)<extra>%{fullData.name}</extra>")
    ceil = d["ceiling_gb_per_s"].dropna()
    if len(ceil):
        roof = float(ceil.median())
        span = f" (runs: {ceil.min():.0f} to {ceil.max():.0f})" if ceil.max() > ceil.min() * 1.01 else ""
        fig.add_hline(y=roof, line_dash="dash", line_color="black")
        # on a log axis an annotation's y is the exponent (add_hline's own annotation lands at 10^roof, off the chart)
        fig.add_annotation(text=f"copy ceiling {roof:.0f} GB/s{span}", showarrow=False, x=0, xref="x domain",
                           xanchor="left", y=math.log10(roof), yref="y", yanchor="bottom")
        top = max(roof, float(d["gb_per_s"].max()))
    else:
        top = float(d["gb_per_s"].max())
        fig.add_annotation(text="no copy ceiling measured in these runs", showarrow=False, x=0.5, y=1.02,
                           xref="paper", yref="paper")
    lo = float(d["gb_per_s"].min())
    fig.update_layout(title=plain(title or "roofline"), xaxis_title="bytes moved per item (log)",
                      yaxis_title="achieved bandwidth (GB/s, log)", legend_title="op", xaxis_type="log",
                      yaxis=dict(type="log", range=[math.log10(lo) - 0.2, math.log10(top) + 0.25]), height=500,
                      legend=dict(orientation="h", y=-0.22, yanchor="top"))
    log_axis(fig, [*d["_bpi"]], "xaxis")
    return log_axis(fig, [lo, top], "yaxis")


def _op_order(name: str) -> int:
    from robocache.bench import ops

    return ops.order(name)


def short_number(v: float) -> str:
    """A sweep value as a tick label: round thousands and millions from 10,000 on shortened (``10000`` -> ``"10k"``,
    ``4e6`` -> ``"4M"``), other values as they are (``16384`` -> ``"16384"``)."""
    v = float(v)
    for div, unit in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(v) >= max(div, 1e4) and (v / div * 10).is_integer():
            return f"{v / div:g}{unit}"
    return str(int(v)) if v.is_integer() else f"{v:g}"


def value_axis(fig: go.Figure, values: Any, axis: str = "xaxis") -> go.Figure:
    """Ticks at the values measured (a sweep's points: 1, 16, 64, 256, ...; 10k, 100k, 1M), never Plotly's bare "2"
    and "5" between the decades of a log axis; more than 12 values keep Plotly's own ticks."""
    vals = sorted({float(v) for v in pd.Series(values, dtype="float64").dropna()})
    if 1 < len(vals) <= 12:
        fig.update_layout(**{axis: dict(tickvals=vals, ticktext=[short_number(v) for v in vals])})
    return fig


def log_axis(fig: go.Figure, values: Any, axis: str = "yaxis") -> go.Figure:
    """A log axis with every tick labelled as the number it is (1-2-5 per decade, decades alone past four of them,
    finer under one): Plotly labels the minor ticks of a log axis with their first digit only, so 20 and 50 read
    as "2" and "5"."""
    import math

    vs = [float(v) for v in pd.Series(values, dtype="float64").dropna() if float(v) > 0 and math.isfinite(float(v))]
    if not vs:
        return fig
    lo, hi = min(vs), max(vs)
    decades = math.log10(hi / lo) if hi > lo else 0.0
    steps = (1.0,) if decades > 4 else (1.0, 2.0, 5.0) if decades >= 1 else (1.0, 1.5, 2.0, 3.0, 4.0, 5.0, 7.0)
    ticks = [round(m * 10.0 ** e, 12) for e in range(math.floor(math.log10(lo)) - 1, math.ceil(math.log10(hi)) + 1)
             for m in steps]
    ticks = [t for t in ticks if lo / 1.6 <= t <= hi * 1.6]
    fig.update_layout(**{axis: dict(type="log", tickvals=ticks, ticktext=[short_number(t) for t in ticks])})
    return fig
