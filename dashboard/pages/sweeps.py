"""Sweeps: p50 time, items/s or GB/s against one shape parameter (B, S, D, ...), one line per provider."""
import json

import pandas as pd
import streamlit as st

from dashboard import charts, data


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
    op = c[0].selectbox("op", data.options(df, "op"))
    d = df[(df["op"] == op) & (df["status"] == "ok")]
    machine = c[1].selectbox("machine", data.options(d, "machine"))
    d = d[d["machine"] == machine]
    dtype = c[2].selectbox("dtype", data.options(d, "dtype"))
    d = d[d["dtype"] == dtype]
    _, _, d = data.pick_method(d, c[3], c[4])
    metric = c[5].selectbox("metric", ["p50", "items_per_s", "gb_per_s"],
                            format_func=lambda m: charts.METRICS[m][0])
    axes = [p for p in data.SHAPE_PARAMS if d[p].nunique() > 1]
    if not axes:
        st.info("No sweep here: no shape parameter takes more than one value for this selection.")
        return
    x = st.radio("against", axes, horizontal=True)
    d = data.latest(d.dropna(subset=[x]))
    keys = d["params"].map(lambda s: _slice_key(s, x))
    counts = pd.Series(keys).groupby(keys.values).size().sort_values(ascending=False)
    slices = counts.index.tolist()
    fixed = st.selectbox("other parameters fixed at", slices,
                         format_func=lambda k: f"{k}  ({counts[k]} points)")
    d = d[keys == fixed]
    st.plotly_chart(charts.sweep_lines(d, x, metric, title=f"{op} {dtype}: {charts.METRICS[metric][0]} vs {x}"),
                    width="stretch")
    st.dataframe(d[["case_id", "provider", x, "p50", "items_per_s", "gb_per_s", "run_id"]].sort_values([x, "provider"]),
                 hide_index=True, width="stretch")


data.run_page("Sweeps", body)
