"""The Sampled page's pure parts (DataFrame in, DataFrame or figure out; no Streamlit): the sampled suite's
points and summary are the report's own (:mod:`robocache.bench.views.sampled`), fed from the dashboard's frame.
"""
from __future__ import annotations


import pandas as pd
import plotly.graph_objects as go

from dashboard import charts
from robocache import providers
from robocache.bench import frame
from robocache.bench.views import sampled as report_sampled

# the peer a point's speedup is taken against: column of :func:`points` -> its label
PEER_COLUMNS = {"ratio": "torch.compile (faster mode)", "vs_torch_eager": providers.label("torch_eager"),
                "vs_cupy": providers.label("cupy")}
# the x axes: column -> axis title
AXES = {"bytes": "bytes moved (robocache's record: the inputs' minimal traffic)",
        "features": "features (resample D, fuse sum of D, voxelize channels)"}


def sampled_frame(df: pd.DataFrame) -> pd.DataFrame:
    """The frame's rows of sampled points (``params.kind == "sampled"``), single-GPU and timed."""
    if df.empty:
        return df
    mask = df["params"].astype(str).str.contains('"kind":"sampled"', regex=False)
    if "world_size" in df.columns:
        mask &= df["world_size"].isna()
    return df[mask]


def points(df: pd.DataFrame) -> pd.DataFrame:
    """:func:`robocache.bench.views.sampled.point_rows` over the frame's sampled rows: the public API's points
    (``robocache``) only. A kernel version's (``robocache@vN``) are the report's (``report --sampled``): the page's
    tables and charts have no provider axis, so they would read as the public API's."""
    pts = pd.DataFrame(report_sampled.point_rows(frame.rows_of(sampled_frame(df))))
    return pts[pts["provider"] == report_sampled.OURS].reset_index(drop=True) if "provider" in pts.columns else pts


def summary(pts: pd.DataFrame) -> pd.DataFrame:
    """:func:`robocache.bench.views.sampled.summary` over :func:`points`."""
    if pts.empty:
        return pd.DataFrame()
    return pd.DataFrame(report_sampled.summary(pts.to_dict("records")))


def speedup_scatter(pts: pd.DataFrame, x: str = "bytes", peer: str = "ratio", title: str = "") -> go.Figure:
    """robocache's speedup over ``peer`` (a :data:`PEER_COLUMNS` column) against ``x`` (an :data:`AXES` column), one
    colour per GPU (machine), log-log, the 1x line dotted; the case, dtype and torch.compile mode in the hover."""
    name = PEER_COLUMNS.get(peer, peer)
    title = title or f"robocache over {name} against {x}"
    d = pts.dropna(subset=[x, peer]) if not pts.empty and {x, peer} <= set(pts.columns) else pd.DataFrame()
    if d.empty:
        fig = go.Figure()
        fig.update_layout(title=charts.plain(title + " (no points)"), height=300)
        return fig
    d = d.assign(_who=charts.plain_col(d["arch"].astype(str) + " (" + d["machine"].astype(str) + ")"))
    fig = go.Figure()
    for who, g in d.groupby("_who", sort=True):
        fig.add_trace(go.Scatter(
            x=g[x], y=g[peer], mode="markers", name=charts.plain(who),
            customdata=list(zip(charts.plain_col(g["case"]), charts.plain_col(g["dtype"]),
                                charts.plain_col(g["compile_mode"]))),
            hovertemplate="%{customdata[0]} %{customdata[1]}<br>" + f"{x}: " + "%{x:.3s}<br>%{y:.2f}x"
                          + (" (torch.compile %{customdata[2]})" if peer == "ratio" else "")
                          + "<extra>%{fullData.name}</extra>"))
    fig.add_hline(y=1.0, line_dash="dot", line_color="gray")
    fig.update_layout(title=charts.plain(title), xaxis_type="log", yaxis_type="log",
                      xaxis_title=AXES.get(x, x), yaxis_title=f"{name} p50 / robocache p50",
                      legend_title="GPU (machine)", height=450)
    return charts.ratio_axis(fig, d[peer])
