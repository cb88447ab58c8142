"""Sweeps: p50 time, items/s or GB/s against one shape parameter (B, S, D, N, G, ...) or the dtype, one line (or bar)
per provider, every other parameter held fixed.

A parameter the op's scaling views (``Op.scaling_views``, the report's scaling tables) tie to the axis follows it:
resample's length sweep moves T with S (T = S/2), so "S" draws the length scaling the report shows.
"""
import json
from typing import Any

import pandas as pd
import streamlit as st

from dashboard import charts, data, tables
from robocache.bench import ops

AXIS_NAMES = {"B": "batch", "S": "length", "T": "target length", "D": "dimension", "N": "points", "G": "grid side",
              "dtype": "dtype"}


def followers(op: str, x: str) -> dict[str, Any]:
    """The parameters the op's scaling views derive from ``x`` (resample: T follows S), with their rule."""
    try:
        views = ops.get(op).scaling_views
    except KeyError:
        return {}
    return {k: v for _title, axis, fixed in views if axis == x for k, v in fixed.items() if callable(v)}


def slice_key(params: str, x: str, follow: dict[str, Any] | None = None) -> str:
    """The case's other parameters (all but ``x``, and a follower that keeps its rule): points of one line share
    them. ``x == "dtype"``: every parameter (the line is one case across dtypes)."""
    orig = json.loads(params)
    p = dict(orig)
    if x == "G":
        p.pop("grid", None)
    p.pop(x, None)
    for k, rule in (follow or {}).items():
        try:
            keeps = k in p and p[k] == rule(orig)
        except Exception:  # noqa: BLE001 - a rule that does not fit this case: the parameter stays in the key
            keeps = False
        if keeps:
            p[k] = f"follows {x}"
    return ", ".join(f"{k}={p[k]}" for k in sorted(p))


EVERY_RUN = "every run (one line each)"


def runs_of(d: pd.DataFrame, x: str) -> pd.DataFrame:
    """The runs that measured rows of ``d``, newest first: ``points`` (distinct values of ``x``), ``created``,
    ``suite``, ``frontend``."""
    runs = d.groupby("run_id", observed=True).agg(points=(x, "nunique"), created=("created", "max"),
                                                  suite=("suite", "first"), frontend=("frontend", "first"))
    return runs.sort_values("created", ascending=False, kind="stable")


def pick_run(col, d: pd.DataFrame, x: str, every: bool = True) -> pd.DataFrame:
    """The run the sweep is read from (bound to the URL's ``run``): by default the newest run that measured at
    least two points of it, or (``every``) every run, one line each; a line never joins two runs
    (charts.LINE_KEYS). The rows of that choice, the newest record of each case, provider and dtype in each run."""
    runs = runs_of(d, x)
    swept = runs[runs["points"] >= 2]
    default = (swept if not swept.empty else runs).index[0] if not runs.empty else None
    names = [str(r) for r in runs.index]

    def label(r: str) -> str:
        if r == EVERY_RUN:
            return r
        row = runs.loc[r]
        return (f"{r} ({row['created']:%Y-%m-%d}, {row['suite']} {row['frontend']}, {row['points']} "
                f"{'dtypes' if x == 'dtype' else 'points'})")

    run = data.bound(col.selectbox, "run", [*names, *([EVERY_RUN] if every else [])], "run", default=default,
                     format_func=label)
    if run != EVERY_RUN:
        d = d[d["run_id"].astype(str) == run]
    return data.latest(d, [*data.LATEST_KEYS, "run_id"])


def body(df: pd.DataFrame) -> None:
    c = st.columns(5)
    op = data.bound(c[0].selectbox, "op", data.options(df, "op"), "op")
    d = df[(df["op"] == op) & (df["status"] == "ok") & df["world_size"].isna()]
    machine = data.bound(c[1].selectbox, "machine", data.options(d, "machine"), "machine",
                         default=data.preferred(d, "machine"))
    d = d[d["machine"] == machine]
    _, _, d = data.pick_method(d, c[2], c[3])
    metric = data.bound(c[4].selectbox, "metric", ["p50", "items_per_s", "gb_per_s"], "metric",
                        format_func=lambda m: charts.METRICS[m][0])
    # a parameter that follows another one along the op's scaling views (resample's T follows S) is not an axis
    # of its own: its sweep is the other one's
    followed = {k for a in data.SHAPE_PARAMS for k in followers(op, a)}
    axes = [p for p in data.SHAPE_PARAMS if d[p].nunique() > 1 and p not in followed]
    several_dtypes = bool(len(d)) and int(d.groupby("case_id")["dtype"].nunique().max()) > 1
    if several_dtypes:
        axes.append("dtype")
    if not axes:
        st.info("No sweep here: no shape parameter (and no dtype) takes more than one value for this selection.")
        return
    x = data.bound(st.radio, "against", axes, "against", horizontal=True,
                   format_func=lambda a: f"{a} ({AXIS_NAMES[a]})" if a in AXIS_NAMES and a != "dtype" else a)
    c2 = st.columns([1, 3, 3])
    if x == "dtype":
        dtype = None
    else:
        dtype = data.bound(c2[0].selectbox, "dtype", data.options(d, "dtype"), "dtype")
        d = d[d["dtype"] == dtype].dropna(subset=[x])
    follow = followers(op, x) if x != "dtype" else {}
    keys = d["params"].map(lambda s: slice_key(s, x, follow))
    # points of a line: the distinct values of the axis one run measured under each key (the slices with most
    # points first)
    counts = d.assign(_k=keys.values, _x=d[x].astype(str)).groupby(["_k", "run_id"], observed=True)["_x"].nunique()
    counts = counts.groupby(level=0).max().sort_values(ascending=False, kind="stable")
    slices = counts.index.tolist()
    if not slices:
        st.info(f"No case of this selection has {x} set.")
        return
    fixed = data.bound(c2[1].selectbox, "case" if x == "dtype" else "other parameters fixed at", slices, "fixed",
                       format_func=lambda k: f"{k}  ({counts[k]} {'dtypes' if x == 'dtype' else 'points'})")
    d = d[(keys == fixed).to_numpy()]
    d = pick_run(c2[2], d, x, every=x != "dtype")  # bars of one dtype from two runs would stand on each other
    st.caption("One run per line: every point of a line was measured in the same run, side by side with the other "
               "providers of that run (its run, date, commit and machine are in each point's hover). Another run, "
               "or every run as lines of their own, from the run box.")
    if follow:
        st.caption(f"{', '.join(sorted(follow))} follow{'s' if len(follow) == 1 else ''} {x} along this sweep, as "
                   "the op's scaling view defines it (the report's scaling table).")
    if x == "dtype":
        st.plotly_chart(charts.dtype_bars(d, metric, title=f"{op}: {charts.METRICS[metric][0]} by dtype"),
                        width="stretch")
        cols = ["case_id", "provider", "dtype", "p50", "items_per_s", "gb_per_s", "run_id", "created", "git_commit"]
        order = ["dtype", "provider"]
    else:
        st.plotly_chart(charts.sweep_lines(d, x, metric, title=f"{op} {dtype}: {charts.METRICS[metric][0]} vs "
                                                                   f"{x} ({AXIS_NAMES.get(x, x)})"),
                        width="stretch")
        cols = ["case_id", "provider", x, "p50", "items_per_s", "gb_per_s", "run_id", "created", "git_commit"]
        order = [x, "provider", "created"]
    styled, config = tables.readable(d[cols].sort_values(order))
    st.dataframe(styled, column_config=config, hide_index=True, width="stretch", placeholder=tables.MISSING)


data.frame_page("Sweeps", body)
