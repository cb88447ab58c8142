"""Bisections on the dashboard: the ``robocache-bench bisect`` documents (``*.bisect.json``, ``robocache-bisect/1``)
in the folders the dashboard loads. History marks a bisected culprit on its series (:func:`mark_history`),
Regressions lists every bisection with its state: running, found, not reproducible, ... (:func:`regressions_section`).
Each page calls one of them in one line. The documents are validated on load (msgspec,
:func:`robocache.bench.schema.parse_bisect_bytes`); a bad one is reported, never shown; record and git text reaches
plotly through :func:`dashboard.charts.plain` and tables as data, never as markup.

The nightly job bisects each confirmed alert whose range has more than one commit and commits the documents to the
results branch (``bisect/``); a dashboard over that branch's checkout finds them.
"""
from __future__ import annotations

import os
from collections.abc import Sequence
from datetime import datetime, UTC
from typing import Any

import pandas as pd
import plotly.graph_objects as go
import streamlit as st

from robocache.bench import bisect as bis
from robocache.bench import links, schema

from . import data, tables
from .charts import plain

CULPRIT_COLOR = "purple"
STALE_S = 2 * 3600  # a "running" document not rewritten for this long: its bisection was stopped
STATE = {**bis.STATUS_TEXT, "found": "found"}


def _stamp(dirs: Sequence[str]) -> tuple:
    """What the cached load is keyed by: every document's path, size and mtime."""
    out = []
    for d in dirs:
        if os.path.isdir(d):
            for dirpath, dirnames, files in os.walk(d):
                dirnames.sort()
                for f in sorted(files):
                    if f.endswith(bis.DOC_SUFFIX) and not f.startswith("."):
                        p = os.path.join(dirpath, f)
                        try:
                            s = os.stat(p)
                        except OSError:
                            continue
                        out.append((p, s.st_size, s.st_mtime_ns))
    return tuple(out)


@st.cache_data(show_spinner=False, max_entries=8)
def _load(dirs: tuple[str, ...], stamp: tuple) -> tuple[list[dict[str, Any]], list[tuple[str, str]]]:
    docs, bad = bis.load_docs(*dirs)
    return [schema.to_dict(d) for d in docs], bad


def bisections(dirs: Sequence[str] | None = None) -> tuple[list[dict[str, Any]], list[tuple[str, str]]]:
    """Every valid bisection document in ``dirs`` (default: the dashboard's results folders), newest first, and
    the bad ones as (path, reason)."""
    ds = tuple(dirs if dirs is not None else data.results_dirs())
    docs, bad = _load(ds, _stamp(ds))
    return sorted(docs, key=lambda d: d["updated"], reverse=True), bad


def _fingerprints(doc: dict[str, Any]) -> set[str]:
    fps = {c["fingerprint"] for c in doc["cases"] if c.get("fingerprint")}
    return fps | set((doc.get("alert") or {}).get("fingerprints") or [])


def culprit_markers(docs: Sequence[dict[str, Any]], rows: pd.DataFrame, order: pd.DataFrame,
                    metric: str) -> list[dict[str, Any]]:
    """Where each found culprit goes on History's figure: on the series the bisection measured that are drawn
    (``rows``), at the culprit's commit when the nightly measured it, else half a step before the first commit
    measured after it (the bisection's bad endpoint: the culprit lies between the two nightly points). The star sits
    on the line of ``metric`` (a call-cost series under ``call_ratio``: its ratio); a series with no value of it
    gets none."""
    if rows.empty or not docs:
        return []
    xmap = dict(zip(order["commit"].astype(str), order["x"]))
    # the series drawn under ``metric``: a series without it (bare_launch under the interleaved call ratio) has no
    # line to put a star on (its y would be NaN: an invisible star, and a dotted line and a caption for nothing)
    shown = set(rows.dropna(subset=[metric])["series"])
    out = []
    for doc in docs:
        cul = doc.get("culprit")
        hit = sorted(_fingerprints(doc) & shown)
        if doc["status"] != "found" or not cul or not hit:
            continue
        bad = str(doc["bad"]["commit"])
        at = rows[(rows["series"] == hit[0]) & (rows["commit"].astype(str) == bad)].dropna(subset=[metric])
        if cul["commit"] in xmap:
            x = float(xmap[cul["commit"]])
        elif bad in xmap:
            x = float(xmap[bad]) - 0.5
        else:
            continue
        y = float(at[metric].iloc[0]) if not at.empty else float(rows[rows["series"] == hit[0]][metric].median())
        text = [f"bisected culprit {cul['commit'][:12]} ({str(cul.get('subject') or '')[:80]})",
                f"{len(doc['commits']) - 1} commits after {doc['good']['commit'][:12]} up to {bad[:12]}; "
                f"{len(doc['evidence'])} decisions, {len(doc['untestable'])} untestable; {doc['time']['wall_s']:.0f} s"]
        out.append({"x": x, "y": y, "commit": cul["commit"], "series": hit[0], "id": doc["id"], "text": text})
    return out


def mark_history(fig: go.Figure, rows: pd.DataFrame, order: pd.DataFrame, metric: str) -> None:
    """History's hook: a star at each bisected culprit of the series drawn, a dotted line through it, and a note
    when the page was opened for a culprit (``?culprit=``, the link a bisection's issue carries) it cannot show."""
    docs, bad = bisections()
    marks = culprit_markers(docs, rows, order, metric)
    for m in marks:
        fig.add_vline(x=m["x"], line_dash="dot", line_color=CULPRIT_COLOR)
        fig.add_scatter(x=[m["x"]], y=[m["y"]], mode="markers+text", showlegend=False, meta=f"culprit:{m['commit']}",
                        name=plain(f"culprit {m['commit'][:12]}"), text=[plain(f"culprit {m['commit'][:8]}")],
                        textposition="bottom center", hovertext=["<br>".join(plain(t) for t in m["text"])],
                        hoverinfo="text", marker=dict(symbol="star", size=18, color=CULPRIT_COLOR,
                                                      line=dict(width=1, color="black")))
    wanted = data.qp_get("culprit")
    if wanted and not any(m["commit"].startswith(wanted) for m in marks):
        st.info(f"The linked culprit {data.md_escape(wanted[:12])} is not on this view: no finished bisection among "
                "the loaded results names it for these series.")
    if marks:
        st.caption(f"Stars: {len(marks)} culprit(s) that `robocache-bench bisect` found, between the last commit "
                   "measured before the change and the first after it (or on the commit itself).")
    for path, why in bad[:3]:
        st.warning(f"Skipped a bad bisection document {data.md_escape(path)}: {data.md_escape(why)}")


def state_text(doc: dict[str, Any], now: datetime | None = None) -> str:
    """The state shown: the document's status, "running" said stale when it has not been rewritten for 2 hours."""
    s = STATE.get(doc["status"], doc["status"])
    if doc["status"] == "running":
        now = now or datetime.now(UTC)
        try:
            age = (now - datetime.fromisoformat(doc["updated"].replace("Z", "+00:00"))).total_seconds()
        except ValueError:
            age = 0.0
        if age > STALE_S:
            s = f"running? (no update for {age / 3600:.0f} h: stopped)"
    return s


def table(docs: Sequence[dict[str, Any]]) -> pd.DataFrame:
    """One row per bisection: state, machine, range, culprit, decisions, untestable commits, time, History link."""
    rows = []
    for d in docs:
        cul = d.get("culprit")
        first = next((c for c in d["cases"] if c.get("series")), None)
        link = (links.history_url(first["series"], "", culprit=cul["commit"] if cul else None) if first else None)
        rows.append({
            "state": state_text(d), "machine": d["machine"],
            "range": f"{d['good']['commit'][:8]} -> {d['bad']['commit'][:8]} ({len(d['commits']) - 1} commits)",
            "culprit": f"{cul['commit'][:12]} {str(cul.get('subject') or '')[:60]}".strip() if cul else "",
            "cases": ", ".join(c["key"] for c in d["cases"]),
            "decisions": sum(e["role"] == "candidate" and e["verdict"] != "untestable" for e in d["evidence"]),
            "untestable": len(d["untestable"]),
            "time": f"{d['time']['wall_s']:.0f} s of {d['settings']['budget_s']:.0f} s",
            "reason": d["reason"], "updated": d["updated"], "note": d.get("note") or "", "link": link})
    return pd.DataFrame(rows)


def regressions_section() -> None:
    """Regressions' hook: every bisection in the loaded folders with its state (running, found, not reproducible,
    spread, undecided, budget, untestable), its culprit and the link to History with the culprit marked."""
    docs, bad = bisections()
    st.subheader(f"Bisections ({len(docs)})")
    for path, why in bad[:5]:
        st.warning(f"Skipped a bad bisection document {data.md_escape(path)}: {data.md_escape(why)}")
    if not docs:
        st.caption("No bisection in the loaded folders (`*.bisect.json`): the nightly job bisects each confirmed "
                   "alert whose commit range has more than one commit (`robocache-bench bisect`, docs/regressions.md).")
        return
    cols = st.columns(4)
    cols[0].metric("running", sum(d["status"] == "running" for d in docs))
    cols[1].metric("culprit found", sum(d["status"] == "found" for d in docs))
    cols[2].metric("not reproducible", sum(d["status"] == "not_reproducible" for d in docs))
    cols[3].metric("other outcomes", sum(d["status"] not in ("running", "found", "not_reproducible") for d in docs))
    styled, config = tables.readable(table(docs), extra={"link": "History"})
    config["History"] = st.column_config.LinkColumn("History", display_text="culprit on History")
    data.show_table((styled, config), hide_index=True, width="stretch")
