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
                                                    "q_value": "q (Benjamini-Hochberg)", "rests_on": "rests on", **extra})
    config["History"] = st.column_config.LinkColumn("History", display_text="open History")
    return styled, config


def verdict_box(state: str, text: str) -> None:
    """The check's verdict, three-valued: green only for a question answered (every current series tested, no
    alert); a neutral box while series cannot be tested; a warning for open alerts and for a document that
    cannot tell."""
    if state == "pass":
        st.success(text)
    elif state in ("partial", "untested"):
        st.info(text)
    else:  # alerts (listed below), or a document that cannot tell
        st.warning(text)


def machines_table(docs: dict) -> None:
    """The verdict of each machine's own check (what its nightly job decides), one row each."""
    status = history_data.machine_status(docs)
    st.dataframe(status.drop(columns="state").rename(columns={"tested": "series tested", "alerts": "open alerts"}),
                 hide_index=True, width="stretch", placeholder=tables.MISSING,
                 column_config={"series tested": st.column_config.TextColumn(
                     "series tested", help="of the series measured in the newest run of its suite on the machine")})


def body(df: pd.DataFrame) -> None:
    given = history_data.given_alerts()
    frontend = None
    if given is None:
        fronts = [str(f) for f in data.options(df, "frontend")]
        pick = data.bound(st.selectbox, "front end (check --frontend)", [*fronts, history_data.EVERY_FRONTEND],
                          "frontend", default="cli" if "cli" in fronts else None)
        frontend = None if pick == history_data.EVERY_FRONTEND else pick
        machines = [str(m) for m in data.options(df, "machine")]
        docs = history_data.check_docs(frontend, machines)
        doc = history_data.merge_docs(list(docs.values()))
        source = history_data.computed_source(frontend, machines, data.results_dirs())
    else:
        (doc, source), docs = given, {}
    summ = doc.summary
    floor = regressions.FLOOR if summ is None or summ.floor is None else summ.floor
    computed = "" if given is not None else (
        " Computed here, machine by machine, as `check` without `--confirm`: the nightly job also reruns each "
        "alerted case and raises only what the rerun confirms, so for what it raised open its alerts.json "
        "(`-- --alerts FILE` or `ROBOCACHE_ALERTS_JSON`).")
    st.caption(f"The alerts {source}: the document `check --json` writes to alerts.json (schema "
               f"robocache-alerts/1). An alert is a significant slowdown beyond the {100 * float(floor):.3g}% floor "
               "that still holds at the newest run of its suite on its machine; method and environment changes are breaks, never "
               "alerts." + computed)
    ev = history_data.events(doc)
    alerts = ev[ev["kind"] == "alert"]
    state, text = history_data.verdict(summ, len(alerts))
    cols = st.columns(5)
    cols[0].metric("open alerts", len(alerts))
    cols[1].metric("drifts", int((ev["kind"] == "drift").sum()))
    cols[2].metric("improvements", int((ev["kind"] == "improvement").sum()))
    cols[3].metric("breaks", int(ev["kind"].isin(["method", "environment"]).sum()))
    tested = history_data.machine_status({"all": doc})["tested"].iloc[0]
    cols[4].metric("series tested", tested, help="of the series measured in the newest run of its suite on each machine")
    verdict_box(state, text)
    if len(docs) > 1:
        machines_table(docs)

    st.subheader(f"Open alerts ({len(alerts)})")
    if not alerts.empty:
        # one commit range can move many series on several machines: the ranges first, then every series
        by = alerts.groupby(["before_commit", "after_commit"], dropna=False, sort=False)
        ranges = pd.DataFrame([{"commit range": history_data.commit_range(*k),
                                "series": len(g), "machines": ", ".join(sorted(g["machine"].astype(str).unique())),
                                "worst": f"{(g['ratio'].max() - 1) * 100:+.1f}%"} for k, g in by])
        st.dataframe(ranges, hide_index=True, width="stretch", placeholder=tables.MISSING)
        data.show_table(_table(alerts, ["case_id", "provider", "dtype", "change", "interval", "link", "since",
                                        "where", "rests_on", "q_value", "confirmed", "timer", "cache", "frontend"]),
                        hide_index=True, width="stretch")
    else:
        st.caption("None.")
    drifts = ev[ev["kind"] == "drift"]
    if not drifts.empty:
        st.subheader(f"Drifts ({len(drifts)}): a trend over the newest nights, no single commit blamed")
        data.show_table(_table(drifts, ["case_id", "provider", "dtype", "where", "change", "detail", "since", "link",
                                        "rests_on", "q_value"], change="over the window", since="window (first -> last commit)"),
                        hide_index=True, width="stretch")
    imp = ev[ev["kind"] == "improvement"]
    if not imp.empty:
        st.subheader(f"Recent improvements ({len(imp)})")
        data.show_table(_table(imp, ["case_id", "provider", "dtype", "where", "change", "interval", "since", "link",
                                     "rests_on", "q_value"]), hide_index=True, width="stretch")
    brk = ev[ev["kind"].isin(["method", "environment"])]
    if not brk.empty:
        st.subheader(f"Method and environment changes ({len(brk)}): not regressions")
        data.show_table(_table(brk, ["kind", "case_id", "provider", "dtype", "where", "link", "change", "after_run",
                                     "detail"], after_run="from run"), hide_index=True, width="stretch")
    bisect_view.regressions_section()  # each bisection's state: running, found, not reproducible (robocache-bench bisect)


data.frame_page("Regressions", body)
