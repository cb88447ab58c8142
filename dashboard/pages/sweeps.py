"""Sweeps: p50 time, items/s or GB/s against one shape parameter (B, S, D, ...), one line per provider."""
import json
import sys
from pathlib import Path

_ROOT = str(Path(__file__).resolve().parents[2])
if _ROOT not in sys.path:
    sys.path.insert(0, _ROOT)

import pandas as pd  # noqa: E402
import streamlit as st  # noqa: E402

from dashboard import charts, data  # noqa: E402


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
    timer = c[3].selectbox("timer", data.options(d, "timer"))
    cache = c[4].selectbox("cache", data.options(d[d["timer"] == timer], "cache"))
    d = d[(d["timer"] == timer) & (d["cache"] == cache)]
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
