"""History: each series over commits (one machine, case, front end, timer and cache mode at a time), with
``robocache-bench check``'s change points, drifts and breaks drawn on it; the selections live in the URL (an
alert's link opens its view: robocache/bench/links.py)."""
import pandas as pd
import streamlit as st

from dashboard import bisect_view, charts, data, history_charts, history_data, tables
from robocache import providers
from robocache.bench import links, ops
from robocache.bench.regressions import changepoints


def body(df: pd.DataFrame) -> None:
    c = st.columns([3, 2, 5, 2, 2, 2])  # the machine and case names are the long ones (readable at 1280 px)
    machine = data.bound(c[0].selectbox, "machine", data.options(df, "machine"), "machine",
                         default=data.preferred(df, "machine"))
    dm = df[df["machine"] == machine]
    order = history_data.commit_order(dm)  # one commit axis per machine, whatever case is shown
    d = dm[dm["status"] == "ok"]
    op = data.bound(c[1].selectbox, "op", data.options(d, "op"), "op")
    d = d[d["op"] == op]
    case = data.bound(c[2].selectbox, "case", data.options(d, "case_id"), "case", default=classic_case(str(op)))
    d = d[d["case_id"] == case]
    fronts = data.options(d, "frontend")
    frontend = data.bound(c[3].selectbox, "front end", fronts, "frontend",
                          default="cli" if "cli" in [str(f) for f in fronts] else None)
    d = d[d["frontend"] == frontend]
    _, _, d = data.pick_method(d, c[4], c[5])
    provs = data.options(d, "provider")
    # by default the public API and the peer to beat: every provider, version and dtype at once drew 45 lines
    peer = tables.strongest_peer(d)
    shown = [p for p in (providers.OURS, peer) if p in provs] or None
    chosen = data.bound_multi(st.multiselect, "providers", provs, "provider", default=shown,
                              format_func=charts.provider_label)
    d = d[d["provider"].isin(chosen)]
    dts = data.options(d, "dtype")
    d = d[d["dtype"].isin(data.bound_multi(st.multiselect, "dtypes", dts, "dtype"))]

    doc, source = history_data.check_doc(None if frontend is None else str(frontend), [str(machine)])
    rows = history_data.history_rows(d, order)
    ev = history_data.events(doc)
    ev = ev[ev["fingerprint"].isin(set(rows["series"]))] if not rows.empty else ev.iloc[0:0]
    breaks = history_data.method_breaks(rows)
    want = data.qp_get("series")
    highlight = want if want in set(rows["series"]) else None
    # a call-cost case's records carrying the interleaved ratio offer it as a metric: the quantity the check
    # judges such a series by, opened by default from a ratio finding's link (links.history_params: metric=)
    metrics = ["p50", "items_per_s", "gb_per_s", "pct_of_ceiling"]
    ratio = history_data.RATIO_METRIC
    if rows["call_ratio"].notna().any():
        metrics.append(ratio)
    metric = data.bound(st.radio, "metric", metrics, "metric", horizontal=True,
                        default=history_data.default_metric(ev, highlight),
                        format_func=lambda m: charts.METRICS[m][0])
    if want is not None and highlight is None:  # another view was chosen since (or the series is gone): let go
        st.query_params.pop("series", None)
        st.info(f"The linked series {data.md_escape(want)} is not among the lines of this view.")
    if d["run_id"].nunique() < 2:
        st.caption("Only one run has measured this case so far: history starts with the second.")
    fig = history_charts.history_commits(rows, order, ev, breaks, metric, highlight=highlight,
                                         title=f"{case}: {charts.METRICS[metric][0]}")
    bisect_view.mark_history(fig, rows, order, metric)  # bisected culprits (robocache-bench bisect)
    event = st.plotly_chart(fig, width="stretch", key="history-chart", on_select="rerun", selection_mode="points")
    st.caption("x: commits in the order the runs first measured them (short hash; the date is in the hover). One "
               "line per series (`robocache.bench.schema.series_key`: provider, dtype, front end, input rotation, "
               "grid and method version): a series measured another way is a new line after a dashed *method "
               "change*, and a line is cut where its runner or a peer's library (torch, CuPy) changed, never joined "
               "across. One colour per provider, one dash per dtype (float32 solid, float16 dashed, bfloat16 "
               "dotted); by default robocache and the strongest peer of the newest run. Triangles: the check's "
               "alerts (red, slower) and improvements (green) at the first commit after the change, the shaded "
               "band its commit range; dotted orange: a drift over its window. Click a point to open its run. "
               f"Check result {source}.")
    if ratio in metrics and metric != ratio:
        st.caption("The check judges a call-cost series whose records carry it by its interleaved call ratio "
                   "(public call / bare launch), not by this host time, which moves by tens of percent between "
                   "runs of one commit: the metric *interleaved call ratio, public / bare launch* draws it.")
    if metric == ratio:
        st.caption("y: the interleaved call ratio, public call / bare launch timed alternately in one process "
                   "(`dispatch.interleaved`), its rounds' p20 to p80 as bars: what the check judges a call-cost "
                   "series by, since the host's state moves the time per call itself by tens of percent between "
                   "runs and cancels in the ratio. The host time per call is in each point's hover.")
        left = history_data.ratio_left_out(rows)
        if left:
            st.caption(left)
    other = ev[ev["kind"].isin(("alert", "improvement", "drift")).to_numpy()
               & (ev["measure"] != history_data.metric_measure(metric)).to_numpy()] if not ev.empty else ev
    if not other.empty:  # findings about another quantity than the one drawn: where their marker is
        theirs = ratio if history_data.metric_measure(metric) != ratio else "p50"
        shaded = other["fingerprint"].isin(set(rows.dropna(subset=[metric])["series"])).sum()
        st.caption(f"{len(other)} finding(s) of this view are about the "
                   f"{history_data.MEASURE_WORDS.get(theirs, 'median time')}, not this metric: their marker sits on "
                   f"their line under *{charts.METRICS[theirs][0]}*"
                   + (f"; here {shaded} of them shade their commit range, named, without a marker." if shaded else "."))
    picked = [p for p in ((event or {}).get("selection", {}) or {}).get("points", []) if p.get("customdata")]
    for p in picked[:5]:
        run = str(p["customdata"][1])
        st.markdown(f"Run {data.md_escape(run)}: [open on the Runs page]({links.run_url(_raw_run(d, run), '')})")

    if not ev.empty:
        st.subheader(f"The check's findings on this view ({len(ev)})")
        data.show_table(_events_table(ev), hide_index=True, width="stretch")
    elif doc.checked is not None and not rows.empty:
        tested = set(doc.checked) & set(rows["series"])
        st.caption(f"The check tested {len(tested)} of these {rows['series'].nunique()} series (a series needs "
                   f"{changepoints.MIN_HISTORY} healthy runs, the newest in the newest run of its suite on its machine) and found no "
                   "change, drift or break.")
    table = rows.assign(run=[links.run_url(r, "") for r in rows["run_id"].astype(str)])
    cols = ["created", "git_commit", "run_id", "provider", "dtype", "frontend", "method_version", "input_sets", "p50",
            *(["call_ratio"] if ratio in metrics else []), "gb_per_s", "health", "run", "series"]
    styled, config = tables.readable(table[cols].sort_values("created"),
                                     extra={"run": "Runs page", "method_version": "method version",
                                            "call_ratio": "interleaved call ratio"})
    config["Runs page"] = st.column_config.LinkColumn("Runs page", display_text="open run")
    st.dataframe(styled, column_config=config, hide_index=True, width="stretch", placeholder=tables.MISSING)


def classic_case(op: str) -> str | None:
    """The case History opens on for ``op``: the first of its representative cases (resample: the classic case,
    ``robocache.bench.ops.resample.CLASSIC``), not the alphabetically first."""
    try:
        rep = ops.get(op).representative
    except KeyError:
        return None
    return rep[0][0] if rep else None


def _raw_run(d, shown: str) -> str:
    """The run id behind a hover's escaped text (plotly's customdata is escaped for display)."""
    for r in d["run_id"].astype(str).unique():
        if charts.plain(r) == shown:
            return r
    return shown


def _events_table(ev):
    t = history_data.readable_events(ev)
    styled, config = tables.readable(t[["kind", "provider", "dtype", "change", "interval", "since", "link",
                                        "q_value", "detail"]],
                                     extra={"link": "History", "since": "commit range", "change": "change",
                                            "interval": "95% interval", "q_value": "q (Benjamini-Hochberg)"})
    config["History"] = st.column_config.LinkColumn("History", display_text="this view")
    return styled, config


data.frame_page("History", body)
