"""Overview: per architecture and op, the latest results, the best provider, robocache's speedups,
% of the copy ceiling and the health flags as counts."""
import streamlit as st

from dashboard import charts, data, tables


def body() -> None:
    got = data.loaded()
    if got is None:
        return
    df, _ = got
    c1, c2, c3, c4 = st.columns(4)
    arch = c1.selectbox("architecture", data.options(df, "arch"))
    d = df[df["arch"] == arch]
    op = c2.selectbox("op", data.options(d, "op"))
    d = d[d["op"] == op]
    # one timer and one cache mode at a time: series never mix them
    _, _, d = data.pick_method(d, c3, c4)

    lat = data.latest(d)
    counts = tables.health_counts(lat)  # of the latest record of each series: the state now
    cols = st.columns(len(counts))
    for col, (k, v) in zip(cols, counts.items()):
        col.metric(k, v)

    wide = tables.side_by_side(d)
    speed = tables.speedups(wide)
    st.subheader("robocache speedup over each peer")
    st.caption("Ratios of medians measured side by side in the same run on the same machine; above 1: robocache is faster.")
    st.plotly_chart(charts.speedup_bars(speed), width="stretch")

    st.subheader("Best provider per case")
    st.dataframe(wide, hide_index=True, width="stretch")

    st.subheader("% of the copy ceiling")
    st.plotly_chart(charts.ceiling_bars(lat[lat["status"] == "ok"]), width="stretch")

    st.subheader("Latest results")
    show = ["case_id", "provider", "dtype", "machine", "status", "p50", "items_per_s", "gb_per_s", "pct_of_ceiling",
            "throttled", "contended", "noisy", "run_id", "git_commit", "created", "reason"]
    st.dataframe(lat[show].sort_values(["case_id", "dtype", "provider"]), hide_index=True, width="stretch")


data.run_page("Overview", body)
