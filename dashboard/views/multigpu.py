"""Multi-GPU: scaling efficiency and aggregate throughput against the GPU count, per architecture, and the
gather's bandwidth next to the collective's own; from records carrying ``distributed`` (suite multigpu)."""
import pandas as pd
import streamlit as st

from dashboard import charts, data, tables

TABLE = ["machine", "arch", "op", "case_id", "provider", "dtype", "world_size", "nodes", "scaling", "gather", "status",
         "step_us", "per_rank_us", "aggregate_items_per_s", "efficiency", "gather_gb_per_s", "collective_gb_per_s",
         "collective_busbw_gb_per_s", "backend", "run_id", "reason"]


def body(df: pd.DataFrame) -> None:
    # A multi-GPU record is one of the multigpu suite: its params name the world size (failed ones have no
    # "distributed" section, so the suite is the test).
    multi = df[(df["suite"] == "multigpu") | df["world_size"].notna()]
    if multi.empty:
        st.info("No multi-GPU results yet. Cases spanning several GPUs show here once `robocache-bench run --suite "
                "multigpu` has recorded them on a machine with two or more GPUs.")
        return
    c = st.columns(3)
    op = data.bound(c[0].selectbox, "op", data.options(multi, "op"), "op")
    metric = data.bound(c[1].selectbox, "metric", list(charts.MULTI_METRICS), "metric", format_func=lambda m: charts.MULTI_METRICS[m][0])
    d = multi[multi["op"] == op]
    scalings = data.options(d, "scaling")
    scaling = data.bound(c[2].selectbox, "scaling", ["weak and strong", *scalings], "scaling")
    if scaling != "weak and strong":
        d = d[d["scaling"] == scaling]
    # newest record per case and machine, whatever its timer: a failed record has none, and must hide an older
    # ok one rather than stand beside it
    latest = data.latest(d, keys=[c for c in data.LATEST_KEYS if c not in ("timer", "cache")])
    ok = latest[latest["status"] == "ok"]
    st.caption("Each rank times its own shard; the group's step is its slowest rank's median; efficiency is "
               "against the one-GPU case of the same run (weak: t1/tk, strong: t1/(k tk)). Gather bars: cases over "
               "several GPUs (a one-GPU gather is a local copy); steps marked host-bound in the table's reason were "
               "paced by Python's launches, not the GPU.")
    for arch in data.options(ok, "arch"):
        a = ok[ok["arch"] == arch]
        st.subheader(data.md_escape(f"{arch}: {op}"))
        st.plotly_chart(charts.scaling_lines(a, metric, title=f"{op} on {arch}: {charts.MULTI_METRICS[metric][0]} "
                                                               "vs GPUs"), width="stretch")
        g = a.dropna(subset=["gather_gb_per_s"])
        if not g.empty:
            st.plotly_chart(charts.gather_bars(g, title=f"{op} on {arch}: the gather next to the collective's own"),
                            width="stretch")
    if ok.empty:
        st.info("No successful multi-GPU result for this selection; the table lists what was recorded.")
    failed = latest[latest["status"] != "ok"]
    if not failed.empty:
        st.warning(f"{len(failed)} multi-GPU case(s) failed (the table says why); failed cases carry no aggregate.")
    data.show_table(tables.readable(latest[TABLE].sort_values(["machine", "case_id", "provider", "world_size"])),
                    hide_index=True, width="stretch")


data.frame_page("Multi-GPU", body)
