"""Regressions: what ``robocache-bench check`` reports over the loaded history (or a written alerts.json): the
open alerts (what moved, by how much with its 95% interval, since which commit range, on which machines), drifts,
recent improvements and method/environment breaks, each with the link to its History view."""
import pandas as pd
import streamlit as st

from dashboard import bisect_view, data, history_data, tables
from robocache.bench import regressions


def _table(ev: pd.DataFrame, cols: list[str], **extra: str):
    t = history_data.readable_events(ev)
    styled, config = tables.readable(t[cols], extra={"case_id": "case", "where": "machine", "link": "History",
                                                    "since": "commits (before -> after)",
                                                    "change": "median time", "interval": "95% interval",
                                                    "q_value": "q (Benjamini-Hochberg)", **extra})
    config["History"] = st.column_config.LinkColumn("History", display_text="open History")
    return styled, config


def body(df: pd.DataFrame) -> None:
    given = history_data.alerts_file()
    frontend = None
    if not given:
        fronts = [str(f) for f in data.options(df, "frontend")]
        pick = data.bound(st.selectbox, "front end (check --frontend)", [*fronts, history_data.EVERY_FRONTEND],
                          "frontend", default="cli" if "cli" in fronts else None)
        frontend = None if pick == history_data.EVERY_FRONTEND else pick
    doc, source = history_data.check_doc(frontend, [str(m) for m in data.options(df, "machine")])
    summ = doc.get("summary") or {}
    floor = summ.get("floor", regressions.FLOOR)
    computed = "" if given else (
        " Computed here, machine by machine, as `check` without `--confirm`: the nightly job also reruns each "
        "alerted case and raises only what the rerun confirms, so for what it raised open its alerts.json "
        "(`-- --alerts FILE` or `ROBOCACHE_ALERTS_JSON`).")
    st.caption(f"The alerts {source}: the document `check --json` writes to alerts.json (schema "
               f"robocache-alerts/1). An alert is a significant slowdown beyond the {100 * float(floor):.3g}% floor "
               "that still holds at its machine's newest run; method and environment changes are breaks, never "
               "alerts." + computed)
    ev = history_data.events(doc)
    cols = st.columns(5)
    cols[0].metric("open alerts", int((ev["kind"] == "alert").sum()))
    cols[1].metric("drifts", int((ev["kind"] == "drift").sum()))
    cols[2].metric("improvements", int((ev["kind"] == "improvement").sum()))
    cols[3].metric("breaks", int(ev["kind"].isin(["method", "environment"]).sum()))
    cols[4].metric("series tested", f"{summ.get('series_checked', '?')} of {summ.get('series', '?')}")

    alerts = ev[ev["kind"] == "alert"]
    st.subheader(f"Open alerts ({len(alerts)})")
    if alerts.empty:
        checked = summ.get("series_checked")
        if checked is None:  # a file without its summary: unknown, never a pass
            st.warning("This alerts file does not say how many series were tested: no alert in it, but no pass "
                       "either.")
        elif checked:
            st.success("No open performance regression in the series tested.")
        else:  # nothing was tested: not a pass
            st.info(f"Nothing tested: no series has the {regressions.MIN_HISTORY} healthy runs a test needs (the "
                    "newest in its machine's newest run), so no regression can be found or ruled out yet.")
    else:
        # one commit range can move many series on several machines: the ranges first, then every series
        by = alerts.groupby(["before_commit", "after_commit"], dropna=False, sort=False)
        ranges = pd.DataFrame([{"commit range": history_data.commit_range(*k),
                                "series": len(g), "machines": ", ".join(sorted(g["machine"].astype(str).unique())),
                                "worst": f"{(g['ratio'].max() - 1) * 100:+.1f}%"} for k, g in by])
        st.dataframe(ranges, hide_index=True, width="stretch", placeholder=tables.MISSING)
        data.show_table(_table(alerts, ["case_id", "provider", "dtype", "change", "interval", "link", "since",
                                        "where", "q_value", "confirmed", "timer", "cache", "frontend"]),
                        hide_index=True, width="stretch")
    drifts = ev[ev["kind"] == "drift"]
    if not drifts.empty:
        st.subheader(f"Drifts ({len(drifts)}): a trend over the newest nights, no single commit blamed")
        data.show_table(_table(drifts, ["case_id", "provider", "dtype", "where", "change", "detail", "since", "link",
                                        "q_value"], change="over the window", since="window (first -> last commit)"),
                        hide_index=True, width="stretch")
    imp = ev[ev["kind"] == "improvement"]
    if not imp.empty:
        st.subheader(f"Recent improvements ({len(imp)})")
        data.show_table(_table(imp, ["case_id", "provider", "dtype", "where", "change", "interval", "since", "link",
                                     "q_value"]), hide_index=True, width="stretch")
    brk = ev[ev["kind"].isin(["method", "environment"])]
    if not brk.empty:
        st.subheader(f"Method and environment changes ({len(brk)}): not regressions")
        data.show_table(_table(brk, ["kind", "case_id", "provider", "dtype", "where", "link", "change", "after_run",
                                     "detail"], after_run="from run"), hide_index=True, width="stretch")
    bisect_view.regressions_section()  # each bisection's state: running, found, not reproducible (robocache-bench bisect)


data.frame_page("Regressions", body)
