"""Where robocache wins: per machine, a heat map over the grid (case x dtype) coloured by robocache's speedup over
the strongest peer measured in the same run (log scale, diverging at 1x), and the cases worst first. Single-GPU
records; the selections live in the URL."""
import pandas as pd
import streamlit as st

from dashboard import charts, data, tables

EVERY_OP = "every op"


def body(df: pd.DataFrame) -> None:
    df = df[df["world_size"].isna() & (df["status"] == "ok")]
    c = st.columns(4)
    machine = data.bound(c[0].selectbox, "machine", data.options(df, "machine"), "machine",
                         default=data.preferred(df, "machine"))
    d = df[df["machine"] == machine]
    op = data.bound(c[1].selectbox, "op", [EVERY_OP, *data.options(d, "op")], "op")
    if op != EVERY_OP:
        d = d[d["op"] == op]
    _, _, d = data.pick_method(d, c[2], c[3])
    w = tables.wins(tables.side_by_side(d))
    if w.empty:
        st.info("No case here has robocache and a peer measured in the same run.")
        return
    st.caption("Speedup = the fastest peer's median / robocache's median, both from the same run on this machine "
               "(kernel versions are not peers); above 1x (blue): robocache wins; below (red): the peer named in "
               "the hover is faster.")
    cols = st.columns(3)
    cols[0].metric("cases and dtypes", len(w))
    cols[1].metric("robocache faster", int((w["speedup"] >= 1.0).sum()))
    cols[2].metric("median speedup", charts.ratio_label(round(float(w["speedup"].median()), 2)))
    st.plotly_chart(charts.wins_heatmap(w, title=f"{machine}: robocache over the strongest peer"), width="stretch")
    st.subheader("Every case, worst first (click a header to sort)")
    styled, config = tables.readable(w[["case_id", "dtype", "speedup", "peer", "robocache_p50", "peer_p50",
                                           "run_id"]],
                                     extra={"robocache_p50": "robocache median (us)",
                                            "peer_p50": "strongest peer median (us)", "peer": "strongest peer"})
    st.dataframe(styled, column_config=config, hide_index=True, width="stretch", placeholder=tables.MISSING)


data.frame_page("Where robocache wins", body)
