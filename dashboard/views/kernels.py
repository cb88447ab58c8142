"""Kernels: the optimisation journey (kernel versions robocache@v1, v2, ... side by side, per op and GPU),
robocache against torch.compile at its best (the faster of its modes on each case), and the call cost of tiny
calls. The tables are the CLI report's own (``robocache.bench.views``), fed from the dashboard's frame."""
import pandas as pd
import streamlit as st

from dashboard import charts, data, tables
from robocache import providers

JOURNEY_COLUMNS = {"arch": "GPU", "machine": "machine", "version": "version", "case": "case", "dtype": "dtype",
                   "status": "status", "p50_us": "p50 us", "gb_per_s": "GB/s", "pct_of_ceiling": "% of copy ceiling",
                   "speedup_vs_v1": "speedup vs first", "vs_compile": "vs torch.compile (best)",
                   "compile_mode": "torch.compile mode", "geomean_vs_v1": "geomean vs first",
                   "cases_vs_v1": "cases", "min_vs_v1": "min vs first", "max_vs_v1": "max vs first",
                   "flagged": "flagged", "run_id": "run"}
SUMMARY_COLUMNS = {"op": "op", "arch": "GPU", "machine": "machine", "cases": "cases", "worst": "worst",
                   "worst_case": "worst case", "median": "median", "best": "best (x)", "best_case": "best case",
                   "at_least_1x": "cases >= 1.0x", "compile_modes": "faster mode (count)", "flagged": "flagged",
                   "run_id": "run"}

CASES_COLUMNS = {"arch": "GPU", "machine": "machine", "case": "case", "dtype": "dtype", "ours_us": "robocache p50 us",
                 "compile_us": "torch.compile p50 us", "compile_mode": "torch.compile mode", "ratio": "ratio",
                 "flagged": "flagged", "run_id": "run"}
COST_COLUMNS = {"arch": "GPU", "machine": "machine", "case": "case", "dtype": "dtype", "provider": "provider",
                "status": "status", "timer": "timer", "us_per_call": "host us per call", "vs_bare": "x bare launch",
                "device_us": "device us per call", "gpu_keeps_up": "GPU keeps up", "flagged": "flagged",
                "run_id": "run"}


def _show(df: pd.DataFrame, columns: dict[str, str] | None = None) -> None:
    """A report table with readable column names and figures to about four significant digits (``tables.readable``;
    the values stay numbers underneath, so columns sort as numbers); record text stays data in a dataframe."""
    if columns is not None:
        df = df[[c for c in columns if c in df.columns]].rename(columns=columns)
    data.show_table(tables.readable(df), hide_index=True, width="stretch")


def body(df: pd.DataFrame) -> None:
    c = st.columns([3, 2, 2])  # the machines multiselect holds the long names (readable at 1280 px)
    machines = data.options(df, "machine")
    chosen = data.bound_multi(c[0].multiselect, "machines", machines, "machine")
    d = df[df["machine"].isin(chosen)]
    op = data.bound(c[1].selectbox, "op", data.options(d, "op"), "op")
    d = d[d["op"] == op]
    st.caption("One run per machine and op: its nightly run if there is one, else its newest; every ratio is "
               "between medians measured side by side in that run.")

    st.header("Optimisation journey")
    recs = tables.kernel_rows(d)
    journey = tables.journey(recs)
    if journey.empty:
        st.info("No kernel versions (providers robocache@v1, robocache@v2, ...) measured for this op yet. "
                "`robocache-bench run` measures them with the rest of the grid.")
    else:
        st.caption("Rows: kernel versions; the public API (robocache) calls the best. Speedups and the "
                   "torch.compile ratio on the representative case; the geomean over every case and dtype the run "
                   "measured with both versions. Above 1: faster.")
        _show(journey, JOURNEY_COLUMNS)
        st.plotly_chart(charts.journey_bars(journey, title=f"{op}: geomean speedup of each kernel version"),
                        width="stretch")

    st.header("Against torch.compile at its best")
    provs = [p for p in data.options(d, "provider") if providers.role(str(p)) in ("ours", "version")]
    if not provs:
        st.info("No robocache records for this op in the chosen machines.")
        return
    ours = data.bound(c[2].selectbox, "robocache provider", provs, "provider", default=tables.OURS,
                      format_func=charts.provider_label)
    cases, summary = tables.vs_compile(recs, ours)
    if summary.empty:
        st.info("No case with both robocache and torch.compile measured for this op.")
    else:
        st.caption("Ratio = torch.compile's faster mode (default or max-autotune) / robocache, per case and dtype; "
                   "above 1: robocache faster.")
        _show(summary, SUMMARY_COLUMNS)
        st.plotly_chart(charts.ratio_bars(cases, title=f"{op}: torch.compile at its best / {charts.provider_label(ours)}"),
                        width="stretch")
        with st.expander("every case"):
            _show(cases, CASES_COLUMNS)

    st.header("Call cost")
    cost = tables.call_cost(df[df["machine"].isin(chosen)])
    if cost.empty:
        st.caption("No call-cost (dispatch) cases in these records yet.")
    else:
        st.caption("Host time per call of a tiny call in a tight loop; x bare launch = this / a bare kernel launch "
                   "of the same run.")
        _show(cost, COST_COLUMNS)


data.frame_page("Kernels", body)
