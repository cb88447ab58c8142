"""History's figure: series over commits, with the check's change points, drifts and breaks drawn on them.

Built from :func:`dashboard.history_data.history_rows` (points), :func:`~dashboard.history_data.events` (the
check's document) and :func:`~dashboard.history_data.method_breaks`. Record text reaches plotly only through
:func:`dashboard.charts.plain` (shown as typed, never markup).
"""
from __future__ import annotations

from typing import Any

import pandas as pd
import plotly.graph_objects as go

from robocache import providers
from robocache.bench.regressions.records import ENV_FIELDS

from .charts import (
    METRICS,
    dtype_dash,
    legend_extras,
    legend_name,
    log_axis,
    plain,
    plain_col,
    provider_color,
)
from .history_data import MEASURE_WORDS, RATIO_METRIC, given, metric_measure

MAX_TICKS = 12  # commit labels on the axis (short hashes; every point's commit and date are in its hover)
ALERT_COLOR = "crimson"  # marker colours (a provider's colour comes from the provider table)
IMPROVEMENT_COLOR = "seagreen"
DRIFT_COLOR = "darkorange"
BREAK_COLOR = "gray"


def series_names(rows: pd.DataFrame) -> dict[str, str]:
    """Each series' legend name: provider label and dtype, plus what tells apart the series of one provider and
    dtype (front end, input sets, method version, grid version) where they differ (as ``charts.history_lines``)."""
    first = rows.groupby("series", sort=False).first()
    extras = legend_extras(first)
    return {k: legend_name(first, k, extras) for k in first.index}


def _ratio(v: Any) -> str:
    return f"x{float(v):.3f}" if given(v) else "?"


def _short(c: Any) -> str:
    return str(c)[:8] if given(c) else "?"


def history_commits(rows: pd.DataFrame, order: pd.DataFrame, ev: pd.DataFrame, breaks: pd.DataFrame,
                    metric: str = "p50", title: str = "", highlight: str | None = None) -> go.Figure:
    """One line per series over commit order (x: commits in the order first measured, labelled by short hash; the
    date in the hover), a series cut where its runner or a peer's library changed (separate traces, never joined:
    :func:`dashboard.history_data.history_rows`); a series measured
    another way is another trace, its start marked as a break. The check's alerts and improvements are markers at
    the first commit after the change with a band over the commit range, drifts a dotted line over their window,
    breaks dashed verticals. A finding is drawn on the line only under a metric of its own measure
    (:func:`dashboard.history_data.metric_measure`): under ``call_ratio`` (a call-cost series' interleaved ratio,
    the rounds' p20..p80 as error bars; records without one are not drawn) a call-ratio alert sits on the ratio;
    under another metric it is its commit range alone, named. Every point's hover: run, commit, date, health flags;
    its customdata[1] is the run id (the page links it to the Runs page). ``highlight``: a series fingerprint
    drawn thicker."""
    label, log_y = METRICS[metric]
    fig = go.Figure()
    d = rows.dropna(subset=[metric])
    if d.empty:
        fig.update_layout(title=plain(title or label), annotations=[dict(text="no data", showarrow=False)])
        return fig
    names = series_names(d)
    first = d.groupby("series", sort=False).first()
    keys = sorted(first.index, key=lambda k: (providers.order(str(first.at[k, "provider"])), names[k]))
    for k in keys:
        _series_lines(fig, d[d["series"] == k], k, names[k], first.loc[k], metric, highlight)
    xmap = dict(zip(order["commit"], order["x"]))
    e = ev[ev["fingerprint"].isin(set(keys))] if not ev.empty else ev
    for _, a in e.iterrows():
        k = a["fingerprint"]
        g = d[d["series"] == k]
        if a["kind"] in ("alert", "improvement", "drift") and _measure(a) != metric_measure(metric):
            # a finding on another quantity (a call-ratio alert under the host time, a time alert under the
            # ratio): its commit range only, named; a marker on this line would give its size to a line it is not of
            _elsewhere_band(fig, a, xmap)
        elif a["kind"] in ("alert", "improvement"):
            _change_marker(fig, a, g, xmap, names[k], metric)
        elif a["kind"] == "drift":
            _drift_line(fig, a, g, xmap, names[k], metric)
        else:  # a method or environment break reported by the check
            _break_line(fig, a, g)
    _restart_lines(fig, d, breaks)
    ticks = _ticks(order, d, xmap, e)
    # the legend under the chart, as wide as the page: beside it, long series names were clipped at 1280 px
    fig.update_layout(title=plain(title or label), xaxis_title="commit (in the order first measured; its date in the hover)",
                      yaxis_title=label, legend_title="series", yaxis_type="log" if log_y else "linear",
                      xaxis=dict(tickmode="array", tickvals=ticks["x"].tolist(),
                                 ticktext=plain_col(ticks["label"]).tolist(),
                                 tickangle=-45),
                      legend=dict(orientation="h", yanchor="top", y=-0.3, xanchor="left", x=0),
                      height=520 + 24 * -(-len(keys) // 3), margin=dict(b=40),
                      hovermode="closest", clickmode="event+select")
    return log_axis(fig, d[metric]) if log_y else fig


def _series_lines(fig: go.Figure, g: pd.DataFrame, k: str, name: str, first: pd.Series, metric: str,
                  highlight: str | None) -> None:
    """One series' traces, one per segment (cut where its runner or a peer's library changed), one legend entry."""
    prov, dtype = str(first["provider"]), str(first["dtype"])
    for i, (seg, s) in enumerate(g.groupby("segment", sort=True)):
        cd = pd.DataFrame({"c": plain_col(s["commit"].astype(str).str[:12]), "r": plain_col(s["run_id"]),
                           "d": s["created"].dt.strftime("%Y-%m-%d %H:%M").fillna("?"),
                           "h": plain_col(s["health"]), "s": k,
                           "e": plain_col(s["env_change"].where(s["env_change"] != "", "-")),
                           "m": plain_col(s["machine"])})
        extra: dict[str, Any] = {}
        value = "<br>%{y:.4g}"
        if metric == RATIO_METRIC:  # the rounds' spread as bars; the host time per call beside it, for reference
            mid = s[metric].astype(float)
            extra["error_y"] = dict(type="data", symmetric=False, array=(s["call_ratio_p80"] - mid).tolist(),
                                    arrayminus=(mid - s["call_ratio_p20"]).tolist(), thickness=1, width=3)
            cd["q"] = [f"{lo:.3f} to {hi:.3f}" for lo, hi in zip(s["call_ratio_p20"], s["call_ratio_p80"])]
            cd["t"] = [f"{t:.4g} us" if given(t) else "?" for t in s["p50"]]
            value = ("<br>public / bare launch x%{y:.3f} (rounds' p20 to p80: %{customdata[7]})"
                     "<br>host time per call %{customdata[8]}")
        fig.add_scatter(
            x=s["x"].tolist(), y=s[metric].tolist(), mode="lines+markers", name=plain(name), legendgroup=k,
            showlegend=i == 0, line_color=provider_color(prov),
            line_dash=dtype_dash(dtype), line_width=4 if k == highlight else 2,
            customdata=cd, meta=k,
            hovertemplate="commit %{customdata[0]} (%{customdata[2]} UTC) on %{customdata[6]}<br>"
                          "run %{customdata[1]}<br>"
                          "health: %{customdata[3]}<br>series %{customdata[4]}"
                          + ("<br>changed here: %{customdata[5]}" if seg else "")
                          + value + "<extra>%{fullData.name}</extra>", **extra)


def _measure(a: pd.Series) -> str:
    """A finding's measure (its series' ``measure``: ``call_ratio``, else the median ``time``)."""
    m = a.get("measure")
    return str(m) if given(m) and m else "time"


def _elsewhere_band(fig: go.Figure, a: pd.Series, xmap: dict[Any, Any]) -> None:
    """A finding of another measure than the metric drawn: its commit range (a drift's window) shaded and named
    by what moved and by how much, with no marker on a line that is not of its quantity."""
    x0, x1 = xmap.get(a["before_commit"]), xmap.get(a["after_commit"])
    if x0 is None and x1 is None:
        return
    x0, x1 = (x1 if x0 is None else x0), (x0 if x1 is None else x1)
    color = {"alert": ALERT_COLOR, "improvement": IMPROVEMENT_COLOR}.get(a["kind"], DRIFT_COLOR)
    size = f" {(a['ratio'] - 1) * 100:+.1f}%" if given(a["ratio"]) else ""
    what = MEASURE_WORDS.get(_measure(a), "median time")
    fig.add_vrect(x0=x0 - (0.5 if x0 == x1 else 0), x1=x1 + (0.5 if x0 == x1 else 0), fillcolor=color,
                  opacity=0.08, line_width=0, layer="below",
                  annotation_text=plain(f"{a['kind']} of the {what}{size}: see that metric"),
                  annotation_position="top left", annotation_font_color=color)


def _change_marker(fig: go.Figure, a: pd.Series, g: pd.DataFrame, xmap: dict[Any, Any], name: str,
                   metric: str) -> None:
    """An alert (red triangle up) or improvement (green, down) at the first commit after the change, its commit range
    a band."""
    xa, xb = xmap.get(a["after_commit"]), xmap.get(a["before_commit"])
    at = g[g["run_id"].astype(str) == str(a["after_run"])]
    if xa is None or at.empty:
        return
    color = ALERT_COLOR if a["kind"] == "alert" else IMPROVEMENT_COLOR
    if xb is not None:
        fig.add_vrect(x0=xb, x1=xa, fillcolor=color, opacity=0.12, line_width=0, layer="below")
    size = f"{(a['ratio'] - 1) * 100:+.1f}%" if given(a["ratio"]) else "?"
    q = a["q_value"]
    text = "<br>".join(plain(t) for t in (
        f"{a['kind']}: {MEASURE_WORDS.get(a.get('measure'), 'median time')} {_ratio(a['ratio'])} (95% interval {_ratio(a['ratio_lo'])} to "
        f"{_ratio(a['ratio_hi'])})" + (f", q = {q:.2g}" if given(q) else ""),
        f"last commit before {_short(a['before_commit'])} (run {a['before_run']})",
        f"first commit after {_short(a['after_commit'])} (run {a['after_run']})"))
    k = a["fingerprint"]
    fig.add_scatter(x=[xa], y=[float(at[metric].iloc[0])], mode="markers+text", name=plain(f"{name} {a['kind']} {size}"),
                    legendgroup=k, showlegend=False, meta=f"{a['kind']}:{k}",
                    marker=dict(symbol="triangle-up" if a["kind"] == "alert" else "triangle-down", size=16,
                                color=color, line=dict(width=1, color="black")),
                    text=[plain(size)], textposition="top center", hovertext=[text],
                    hoverinfo="text")


def _drift_line(fig: go.Figure, a: pd.Series, g: pd.DataFrame, xmap: dict[Any, Any], name: str, metric: str) -> None:
    """A drift: a dotted line over its window, from the series' first to its last point there."""
    x0, x1 = xmap.get(a["before_commit"]), xmap.get(a["after_commit"])
    if x0 is None or x1 is None:
        return
    w = g[(g["x"] >= x0) & (g["x"] <= x1)]
    if w.empty:
        return
    k = a["fingerprint"]
    fig.add_scatter(x=[x0, x1], y=[float(w[metric].iloc[0]), float(w[metric].iloc[-1])], mode="lines",
                    name=plain(f"{name} drift"), legendgroup=k, showlegend=False, meta=f"drift:{k}",
                    line=dict(color=DRIFT_COLOR, dash="dot", width=3),
                    hovertext=plain(f"drift: {a['title'] or ''} {a['detail'] or ''}"), hoverinfo="text")


def _break_line(fig: go.Figure, a: pd.Series, g: pd.DataFrame) -> None:
    """A method or environment break the check reported: a dashed vertical before its first run."""
    at = g[g["run_id"].astype(str) == str(a["after_run"])]
    if at.empty:
        return
    fig.add_vline(x=float(at["x"].iloc[0]) - 0.5, line_dash="dash", line_color=BREAK_COLOR,
                  annotation_text=plain(f"{a['kind']} change"), annotation_position="top left")


def _restart_lines(fig: go.Figure, d: pd.DataFrame, breaks: pd.DataFrame) -> None:
    """Verticals where a line stops or is cut: another method version or input rotation begins (dashed; ``breaks``,
    of the providers and dtypes drawn), and where a segment starts (dotted): the runner (GPU, driver, CUDA, ...)
    or, for a peer, the library it runs on (another torch, CuPy) changed."""
    for _, b in breaks.iterrows():
        if not ((d["provider"] == b["provider"]) & (d["dtype"] == b["dtype"])).any():
            continue
        fig.add_vline(x=float(b["x"]) - 0.5, line_dash="dash", line_color=BREAK_COLOR,
                      annotation_text=plain("method change"), annotation_position="top right")
    for s_ in d.loc[d["segment"] > 0].groupby(["series", "segment"]).head(1).itertuples():
        runner = any(part.split(":")[0] in ENV_FIELDS for part in str(s_.env_change).split("; "))
        fig.add_vline(x=float(s_.x) - 0.5, line_dash="dot", line_color=BREAK_COLOR,
                      annotation_text="runner changed" if runner else "peer changed",
                      annotation_position="bottom right")


def _ticks(order: pd.DataFrame, d: pd.DataFrame, xmap: dict[Any, Any], e: pd.DataFrame) -> pd.DataFrame:
    """The commits labelled on the axis: at most about MAX_TICKS, evenly spaced from the newest, labels that stay
    apart; a finding's commit takes its neighbours' slots (every point keeps its commit in the hover)."""
    ticks = order[order["x"].isin(d["x"].unique())].reset_index(drop=True)
    if len(ticks) <= MAX_TICKS:
        return ticks
    step = -(-len(ticks) // MAX_TICKS)
    keep = list(range(len(ticks) - 1, -1, -step))  # evenly spaced from the newest commit
    marked = {xmap.get(c) for c in e["after_commit"]} if not e.empty else set()
    for m in [i for i, x in enumerate(ticks["x"]) if x in marked]:
        keep = [i for i in keep if abs(i - m) >= step or i == m] + ([] if m in keep else [m])
    return ticks.iloc[sorted(keep)]
