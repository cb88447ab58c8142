"""Architectures: every GPU architecture present, side by side on the same cases, in absolute terms
and as % of each GPU's own copy ceiling."""
import sys
from pathlib import Path

_ROOT = str(Path(__file__).resolve().parents[2])
if _ROOT not in sys.path:
    sys.path.insert(0, _ROOT)

import streamlit as st  # noqa: E402

from dashboard import charts, data  # noqa: E402


def body() -> None:
    got = data.loaded()
    if got is None:
        return
    df, _ = got
    present = data.options(df, "arch")
    missing = [a for a in data.EXPECTED_ARCHES if a not in present]
    for a in missing:
        st.info(f"No {a} results yet: nobody here can measure an {a}, and no figure is ever written by hand. "
                f"Run `robocache-bench run` on an {a} machine and commit its records to show it here.")
    c = st.columns(5)
    op = c[0].selectbox("op", data.options(df, "op"))
    d = df[(df["op"] == op) & (df["status"] == "ok")]
    provider = c[1].selectbox("provider", data.options(d, "provider"),
                              index=data.options(d, "provider").index("robocache")
                              if "robocache" in data.options(d, "provider") else 0)
    d = d[d["provider"] == provider]
    dtype = c[2].selectbox("dtype", data.options(d, "dtype"))
    d = d[d["dtype"] == dtype]
    timer = c[3].selectbox("timer", data.options(d, "timer"))
    cache = c[4].selectbox("cache", data.options(d[d["timer"] == timer], "cache"))
    d = data.latest(d[(d["timer"] == timer) & (d["cache"] == cache)])
    n_arch = d["arch"].nunique()
    if n_arch < 2:
        st.caption(f"Only {n_arch} architecture has results for this selection; the others join it here once measured.")
    st.plotly_chart(charts.arch_bars(d, "p50", title=f"{op} {provider} {dtype}: median time"), width="stretch")
    st.plotly_chart(charts.arch_bars(d, "pct_of_ceiling", title="% of each GPU's own copy ceiling"), width="stretch")
    st.dataframe(d[["arch", "machine", "gpu_name", "case_id", "p50", "gb_per_s", "ceiling_gb_per_s", "pct_of_ceiling",
                    "run_id"]].sort_values(["case_id", "arch"]), hide_index=True, width="stretch")


data.run_page("Architectures", body)
