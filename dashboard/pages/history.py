"""History: each series over commits and dates (one machine, timer and cache mode at a time)."""
import streamlit as st

from dashboard import charts, data, tables


def body() -> None:
    got = data.loaded()
    if got is None:
        return
    df, _ = got
    st.info("Regression markers (change points, with the commit that moved a series) come with the regression issue; "
            "this page shows the raw series.")
    c = st.columns(5)
    machine = data.bound(c[0].selectbox, "machine", data.options(df, "machine"), "machine",
                         default=data.preferred(df, "machine"))
    d = df[(df["machine"] == machine) & (df["status"] == "ok")]
    op = data.bound(c[1].selectbox, "op", data.options(d, "op"), "op")
    d = d[d["op"] == op]
    case = data.bound(c[2].selectbox, "case", data.options(d, "case_id"), "case")
    d = d[d["case_id"] == case]
    _, _, d = data.pick_method(d, c[3], c[4])
    provs = data.options(d, "provider")
    chosen = data.bound_multi(st.multiselect, "providers", provs, "provider", format_func=charts.provider_label)
    d = d[d["provider"].isin(chosen)]
    metric = data.bound(st.radio, "metric", ["p50", "items_per_s", "gb_per_s", "pct_of_ceiling"], "metric",
                        horizontal=True, format_func=lambda m: charts.METRICS[m][0])
    if d["run_id"].nunique() < 2:
        st.caption("Only one run has measured this case so far: history starts with the second.")
    st.plotly_chart(charts.history_lines(d, metric, title=f"{case}: {charts.METRICS[metric][0]}"), width="stretch")
    st.caption("One line per series (provider, dtype, front end, input rotation, grid version: the series that "
               "`robocache-bench compare` and `check` compare); its id in the hover is the fingerprint an alert names.")
    styled, config = tables.readable(d[["created", "git_commit", "run_id", "provider", "dtype", "frontend", "input_sets",
                                        "p50", "gb_per_s", "throttled", "contended", "noisy"]].sort_values("created"))
    st.dataframe(styled, column_config=config, hide_index=True, width="stretch")


data.run_page("History", body)
