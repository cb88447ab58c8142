"""Architectures: every GPU architecture present, side by side on the same cases, in absolute terms
and as % of each GPU's own copy ceiling (measured in the same run as the case), a bandwidth roofline per GPU, and
two machines compared case by case."""
import pandas as pd
import streamlit as st

from dashboard import charts, data, tables
from robocache import providers


def body(df: pd.DataFrame) -> None:
    df = df[df["world_size"].isna()]  # single-GPU cases; multi-GPU ones have their own page
    present = data.options(df, "arch")
    missing = [a for a in data.EXPECTED_ARCHES if a not in present]
    for a in missing:
        st.info(f"No {a} results yet: none of these records was measured on an {a} (figures are only ever "
                f"measured, never entered by hand). To compare an {a}, run `robocache-bench run` on an {a} machine "
                "and pass its results folder to the dashboard (`-- --results DIR`), or commit its records to results/.")
    c = st.columns(5)
    op = data.bound(c[0].selectbox, "op", data.options(df, "op"), "op")
    d = df[(df["op"] == op) & (df["status"] == "ok")]
    provider = data.bound(c[1].selectbox, "provider", data.options(d, "provider"), "provider", default=providers.OURS,
                          format_func=charts.provider_label)
    d = d[d["provider"] == provider]
    dtype = data.bound(c[2].selectbox, "dtype", data.options(d, "dtype"), "dtype")
    d = d[d["dtype"] == dtype]
    timer, cache, d = data.pick_method(d, c[3], c[4])
    d = data.latest(d)
    n_arch = d["arch"].nunique()
    if n_arch < 2:
        st.caption(f"Only {n_arch} architecture has results for this selection; the others join it here once measured.")
    else:
        which = data.bound(st.radio, "cases", ["measured on every architecture shown", "all"], "cases",
                           horizontal=True)
        if which != "all":
            both = d.groupby(["case_id", "dtype"], observed=True)["arch"].transform("nunique") == n_arch
            d = d[both]
            if d.empty:
                st.info("No case of this selection was measured on every architecture; choose 'all' to see each.")
                return
    st.plotly_chart(charts.arch_bars(d, "p50", title=f"{op} {provider} {dtype}: median time"), width="stretch")
    st.plotly_chart(charts.arch_bars(d, "pct_of_ceiling", title="% of each GPU's own copy ceiling"), width="stretch")
    styled, config = tables.readable(d[["arch", "machine", "gpu_name", "case_id", "p50", "gb_per_s", "ceiling_gb_per_s",
                                        "pct_of_ceiling", "run_id"]].sort_values(["case_id", "arch"]))
    st.dataframe(styled, column_config=config, hide_index=True, width="stretch", placeholder=tables.MISSING)
    rooflines(df[(df["status"] == "ok") & (df["provider"] == provider) & (df["timer"] == timer)
                 & (df["cache"] == cache)], provider)
    two_gpus(df[(df["op"] == op) & (df["dtype"] == dtype) & (df["timer"] == timer) & (df["cache"] == cache)],
             provider)


def rooflines(d: pd.DataFrame, provider: str) -> None:
    """One bandwidth roofline per GPU machine (every op and dtype of the provider, newest record of each case): the
    achieved GB/s against bytes per item, under the GPU's own copy ceiling measured in the same runs."""
    st.subheader("Roofline per GPU")
    d = data.latest(d[d["device"].astype(str) == "gpu"])
    machines = [m for m in data.preferred_machines(d) if (d["machine"].astype(str) == m).any()]
    if not machines:
        st.info("No GPU records with bandwidth for this provider and method.")
        return
    st.caption(f"{charts.provider_label(provider)}, every op and dtype; bytes per item = bytes moved / items (a "
               "trajectory, a point). The dashed roof is the copy ceiling measured in the same runs: a case on it is "
               "bandwidth-bound; one far below is bound by launch, latency or atomics.")
    cols = st.columns(min(2, len(machines)))
    for i, m in enumerate(machines):
        g = d[d["machine"].astype(str) == m]
        arch = str(g["arch"].iloc[0])
        cols[i % len(cols)].plotly_chart(charts.roofline(g, title=f"{arch} ({m})"), width="stretch")


def two_gpus(d: pd.DataFrame, provider: str) -> None:
    """Two machines side by side on the same cases (by default one H100 and one H200 when both have records):
    the speedup of one over the other per case, and each one's % of its own copy ceiling."""
    st.subheader("Two GPUs side by side")
    pair = tables.machine_pair(d)
    machines = data.options(d[d["status"] == "ok"], "machine")
    if pair is None:
        st.caption("One machine has results for this selection; a second one (an H100 beside the H200, say) "
                   "joins it here once its records are committed.")
        return
    c = st.columns(3)
    base = data.bound(c[0].selectbox, "baseline machine", machines, "base", default=pair[0])
    other = data.bound(c[1].selectbox, "compared machine", machines, "other", default=pair[1])
    provs = data.options(d, "provider")
    chosen = data.bound_multi(c[2].multiselect, "providers", provs, "pair_provider",
                              default=[provider] if provider in provs else provs[:1], format_func=charts.provider_label)
    ratio = tables.machine_ratio(d[d["provider"].isin(chosen)], base, other)
    if ratio.empty:
        st.info("No case of this selection was measured on both machines.")
        return
    st.caption("Latest record of each series on each machine; ratio = baseline p50 / compared p50 (above 1: the "
               "compared machine is faster). A bandwidth-bound kernel runs about as much faster as the copy "
               "ceilings differ.")
    st.plotly_chart(charts.machine_ratio_bars(ratio, base, other), width="stretch")
    styled, config = tables.readable(ratio)
    st.dataframe(styled, column_config=config, hide_index=True, width="stretch", placeholder=tables.MISSING)


data.frame_page("Architectures", body)
