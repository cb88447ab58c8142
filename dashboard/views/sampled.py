"""Sampled: robocache against its peers on the sampled suite (shapes drawn from a seeded distribution over what
users pass, issue 25): per GPU, the speedup over the strongest peer (torch.compile at its faster mode; or torch
eager, or CuPy) against the bytes moved and against the feature width, and the per-op summary the CLI prints
(``robocache-bench report --sampled``: the report's own computation, fed from the dashboard's frame)."""
import pandas as pd
import streamlit as st

from dashboard import data, sampled, tables

SUMMARY_COLUMNS = {"op": "op", "arch": "GPU", "machine": "machine", "seed": "seed", "points": "points",
                   "share_1x": "share >= 1.0x", "worst": "worst", "worst_case": "worst case", "median": "median",
                   "large": "large points", "share_large_at_80": "large at >= 80% of ceiling",
                   "slow_compile": "slow-compile points", "share_slow_1_5x": "slow-compile at >= 1.5x",
                   "median_vs_torch_eager": "median vs torch eager", "median_vs_cupy": "median vs CuPy",
                   "flagged": "flagged", "run_id": "run"}
POINT_COLUMNS = {"op": "op", "arch": "GPU", "machine": "machine", "case": "case", "dtype": "dtype",
                 "stratum": "stratum", "bytes": "bytes moved", "features": "features", "ours_us": "robocache p50 us",
                 "compile_us": "torch.compile p50 us", "compile_mode": "torch.compile mode",
                 "ratio": "vs torch.compile", "pct_of_ceiling": "% of ceiling", "compile_pct": "torch.compile % of ceiling",
                 "vs_torch_eager": "vs torch eager", "vs_cupy": "vs CuPy", "flagged": "flagged", "run_id": "run"}


def _show(df: pd.DataFrame, columns: dict[str, str]) -> None:
    """A table with readable column names (record text stays data in a dataframe)."""
    st.dataframe(df[[c for c in columns if c in df.columns]].rename(columns=columns), hide_index=True,
                 width="stretch", placeholder=tables.MISSING)


def body(df: pd.DataFrame) -> None:
    pts = sampled.points(df)
    if pts.empty:
        st.info("No sampled point with robocache and torch.compile measured yet. `robocache-bench run --suite "
                "sampled` measures the suite (`--sample-seed N` a fresh draw).")
        return
    c = st.columns([3, 2, 1, 2, 2])
    machines = data.options(pts, "machine")
    chosen = data.bound_multi(c[0].multiselect, "machines", machines, "machine")
    d = pts[pts["machine"].isin(chosen)]
    op = data.bound(c[1].selectbox, "op", data.options(d, "op"), "op")
    d = d[d["op"] == op]
    seed = data.bound(c[2].selectbox, "seed", data.options(d, "seed"), "seed")
    d = d[d["seed"] == seed]
    peer = data.bound(c[3].selectbox, "peer", list(sampled.PEER_COLUMNS), "peer", format_func=sampled.PEER_COLUMNS.get)
    st.caption("Speedup = the peer's median / robocache's median on one sampled point, both from one run on that "
               "GPU (above 1: robocache faster). torch.compile is judged at its faster mode on each point. One run "
               "per machine, op and seed.")

    st.header("Summary")
    _show(sampled.summary(d), SUMMARY_COLUMNS)
    st.caption("Large points move at least 256 MB (the record's minimal traffic); slow-compile points are those "
               "where torch.compile's faster mode reached less than 60% of the copy ceiling.")

    st.header("Speedup against bytes moved and feature width")
    for x in sampled.AXES:
        st.plotly_chart(sampled.speedup_scatter(d, x=x, peer=peer, title=f"{op}: robocache over "
                                                f"{sampled.PEER_COLUMNS[peer]} against {x}"), width="stretch")

    with st.expander("every point"):
        _show(d.sort_values("ratio"), POINT_COLUMNS)


data.frame_page("Sampled", body)
