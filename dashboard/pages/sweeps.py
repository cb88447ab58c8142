"""Sweeps: p50 time, items/s or GB/s against one shape parameter (B, S, D, ...), one line per provider."""
import json

import pandas as pd
import streamlit as st

from dashboard import charts, data, tables


def _slice_key(params: str, x: str) -> str:
    """The case's other parameters (all but ``x``): points of one line share them."""
    p = json.loads(params)
    p.pop(x, None)
    return ", ".join(f"{k}={p[k]}" for k in sorted(p))


def body() -> None:
    got = data.loaded()
    if got is None:
        return
    df, _ = got
    c = st.columns(6)
    op = data.bound(c[0].selectbox, "op", data.options(df, "op"), "op")
    d = df[(df["op"] == op) & (df["status"] == "ok") & df["world_size"].isna()]
    machine = data.bound(c[1].selectbox, "machine", data.options(d, "machine"), "machine",
                         default=data.preferred(d, "machine"))
    d = d[d["machine"] == machine]
    dtype = data.bound(c[2].selectbox, "dtype", data.options(d, "dtype"), "dtype")
    d = d[d["dtype"] == dtype]
    _, _, d = data.pick_method(d, c[3], c[4])
    metric = data.bound(c[5].selectbox, "metric", ["p50", "items_per_s", "gb_per_s"], "metric",
                         format_func=lambda m: charts.METRICS[m][0])
    axes = [p for p in data.SHAPE_PARAMS if d[p].nunique() > 1]
    if not axes:
        st.info("No sweep here: no shape parameter takes more than one value for this selection.")
        return
    x = data.bound(st.radio, "against", axes, "against", horizontal=True)
    d = data.latest(d.dropna(subset=[x]))
    keys = d["params"].map(lambda s: _slice_key(s, x))
    counts = pd.Series(keys).groupby(keys.values).size().sort_values(ascending=False)
    slices = counts.index.tolist()
    fixed = data.bound(st.selectbox, "other parameters fixed at", slices, "fixed",
                       format_func=lambda k: f"{k}  ({counts[k]} points)")
    d = d[keys == fixed]
    st.plotly_chart(charts.sweep_lines(d, x, metric, title=f"{op} {dtype}: {charts.METRICS[metric][0]} vs {x}"),
                    width="stretch")
    styled, config = tables.readable(
        d[["case_id", "provider", x, "p50", "items_per_s", "gb_per_s", "run_id"]].sort_values([x, "provider"]))
    st.dataframe(styled, column_config=config, hide_index=True, width="stretch")


data.run_page("Sweeps", body)
