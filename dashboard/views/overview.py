"""Overview: per architecture and op, the latest results, the best provider, robocache's speedups,
% of the copy ceiling and the health flags as counts. Single-GPU records only (the Multi-GPU page has the
others); the first screen is the newest GPU with robocache records (:func:`dashboard.data.preferred`); every
selection lives in the URL."""
import pandas as pd
import streamlit as st

from dashboard import charts, data, tables


def body(df: pd.DataFrame) -> None:
    df = df[df["world_size"].isna()]  # single-GPU records; multi-GPU ones never mix into these views
    c1, c2, c3, c4 = st.columns(4)
    arch = data.bound(c1.selectbox, "architecture", data.options(df, "arch"), "arch",
                      default=data.preferred(df, "arch"))
    d = df[df["arch"] == arch]
    op = data.bound(c2.selectbox, "op", data.options(d, "op"), "op")
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
    provs = tables.providers_in(wide)
    best = wide[["case_id", "dtype", "best", "best_p50", *provs, "machine", "timer", "cache", "run_id", "created"]]
    styled, config = tables.readable(best, provider_cols=provs)
    st.dataframe(styled, column_config=config, hide_index=True, width="stretch", placeholder=tables.MISSING)

    st.subheader("% of the copy ceiling")
    st.plotly_chart(charts.ceiling_bars(lat[lat["status"] == "ok"]), width="stretch")

    st.subheader("Latest results")
    show = ["case_id", "provider", "dtype", "machine", "status", "p50", "items_per_s", "gb_per_s", "pct_of_ceiling",
            "throttled", "contended", "noisy", "run_id", "git_commit", "created", "reason"]
    styled, config = tables.readable(lat[show].sort_values(["case_id", "dtype", "provider"]))
    st.dataframe(styled, column_config=config, hide_index=True, width="stretch", placeholder=tables.MISSING)


data.frame_page("Overview", body)
