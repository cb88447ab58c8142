"""Overview, the morning page: per GPU, robocache's public API against the strongest peer (median, worst,
wins/total, from the newest run per machine and op), last night's regression check per machine (tested N of M,
open alerts), two GPUs at a glance (H100 against H200), the cases robocache loses worst first; then one GPU and op
in detail (health counts, every case ranked, the best provider per case, the latest results). Single-GPU records
only (the Multi-GPU page has the others); every selection lives in the URL. Each section is its own function."""
import os

import pandas as pd
import streamlit as st

from dashboard import charts, data, history_data, tables
from robocache.bench import frame

REGRESSIONS = "regressions"  # the Regressions page's path (app.py)


def _ratio(v: float) -> str:
    return f"{v:.2f}x"


def headline(rows: pd.DataFrame, w: pd.DataFrame) -> None:
    """Per GPU machine: robocache against the strongest peer of the same run (median, worst, wins/total) as metrics,
    then per op with the run each figure comes from."""
    st.subheader("robocache against the strongest peer")
    if w.empty:
        st.info("No run in these results measured robocache beside a peer, so there is no speedup to show yet. "
                "`robocache-bench run` measures robocache and its peers side by side.")
        return
    per_gpu = tables.headline(w)
    order = {m: i for i, m in enumerate(data.preferred_machines(rows))}
    per_gpu = per_gpu.sort_values("machine", key=lambda s: s.map(lambda m: order.get(m, len(order))))
    for _, h in per_gpu.iterrows():
        cols = st.columns([3, 2, 2, 2])
        cols[0].markdown(f"**{data.md_escape(h['arch'])}** · {data.md_escape(h['machine'])}  \n"
                         f"newest run{'s' if ',' in h['runs'] else ''} to {h['created']:%Y-%m-%d %H:%M} UTC")
        cols[1].metric("median speedup", _ratio(h["median"]), help="strongest peer p50 / robocache p50, per case and "
                       "dtype, both measured in the same run")
        cols[2].metric("worst", _ratio(h["worst"]),
                       help=f"{h['worst_case']} against {charts.provider_label(h['worst_peer'])}")
        cols[3].metric("robocache faster", f"{h['wins']} of {h['cases']}", help="cases and dtypes where robocache's "
                       "median is at most the strongest peer's")
    per_op = tables.headline(w, by=("machine", "arch", "op"))
    table = per_op.assign(wins=[f"{a} of {b}" for a, b in zip(per_op["wins"], per_op["cases"])],
                          worst_peer=[charts.provider_label(p) for p in per_op["worst_peer"]])
    styled, config = tables.readable(
        table[["arch", "machine", "op", "wins", "median", "worst", "worst_case", "worst_peer", "peers", "runs",
               "created"]],
        extra={"wins": "robocache faster", "median": "median speedup (x)", "worst": "worst speedup (x)",
               "worst_case": "worst case", "worst_peer": "against", "peers": "strongest peers", "runs": "run",
               "created": "run time (UTC)"})
    st.dataframe(styled, column_config=config, hide_index=True, width="stretch", placeholder=tables.MISSING)
    st.caption("Per machine and op, its newest run that measured robocache (the public API) beside at least one "
               "peer, with the device timer and warm caches; the nightly job's front end (cli) first. Speedup = the "
               "fastest peer's median / robocache's, both from that run; kernel versions are not peers.")


def regression_status(df: pd.DataFrame) -> None:
    """Last night's check per machine, as each machine's nightly job decides it: series tested of those its newest
    run measured, open alerts, drifts, the verdict (green only when every series was tested)."""
    st.subheader("Last night's regression check")
    given = history_data.given_alerts()
    if given is not None:
        doc, source = given
        status = history_data.machine_status({"all machines": doc})
        st.caption(f"The alerts {source}.")
    else:
        fronts = [str(f) for f in data.options(df, "frontend")]
        frontend = "cli" if "cli" in fronts else None
        machines = [str(m) for m in data.preferred_machines(df)]
        status = history_data.machine_status(history_data.check_docs(frontend, machines))
        arch = df.groupby(df["machine"].astype(str), observed=True)["arch"].first().astype(str)
        status.insert(1, "GPU", status["machine"].map(arch))
        st.caption(f"`robocache-bench check --machine M --frontend {frontend or 'all'}` over these records, without "
                   f"the nightly job's confirming rerun; the [Regressions]({REGRESSIONS}) page has the details.")
    states = set(status["state"])
    if "alert" in states:
        st.warning(f"{int(status['alerts'].sum())} open alert(s): see the Regressions page.")
    elif "unknown" in states:
        st.warning("The alerts document does not say how many series were tested: no alert in it, but no pass either.")
    elif states == {"pass"}:
        st.success("No open performance regression: every series measured in the newest run of its suite on each machine was tested.")
    elif states == {"untested"}:
        st.info("Not enough history yet: no series has the healthy runs a test needs, so no regression can be found "
                "or ruled out.")
    else:
        st.info("No open alert among the series tested, but not every series could be tested yet (series tested, "
                "N of M, below): no verdict on the rest.")
    st.dataframe(status.drop(columns="state").rename(columns={"tested": "series tested", "alerts": "open alerts"}),
                 hide_index=True, width="stretch", placeholder=tables.MISSING)


def two_gpus(rows: pd.DataFrame, both: pd.DataFrame, pair: tuple[str, str] | None) -> None:
    """Two GPUs at a glance (H100 against H200 when both are present): robocache's median ratio per op over the
    cases both machines' newest runs of one suite measured (:func:`dashboard.tables.pair_runs`), beside their copy
    ceilings. ``pair``: :func:`dashboard.tables.machine_pair` over every record, not only the newest runs."""
    if pair is None:
        return
    base, other = pair
    arch = rows.groupby(rows["machine"].astype(str), observed=True)["arch"].first().astype(str)
    a, b = arch.get(base, base), arch.get(other, other)
    st.subheader(data.md_escape(f"{a} against {b}"))
    g = tables.pair_glance(both, base, other)
    if g.empty:
        st.info(data.md_escape(f"No run of {base} and {other} shares a robocache case yet."))
        return
    suite = both.groupby(both["op"].astype(str), observed=True)["suite"].first().astype(str)
    g = g.assign(suite=g["op"].map(suite))
    table = g.assign(median=[f"{m:.2f}x" for m in g["median"]],
                     range=[f"{lo:.2f}x to {hi:.2f}x" for lo, hi in zip(g["low"], g["high"])],
                     ceilings=[f"{x:,.0f} -> {y:,.0f} GB/s ({y / x:.2f}x)" if x == x and y == y else tables.MISSING
                               for x, y in zip(g["base_ceiling"], g["other_ceiling"])])
    styled, config = tables.readable(table[["op", "suite", "cases", "median", "range", "ceilings"]],
                                     extra={"median": f"{b} speedup over {a} (median)", "range": "range",
                                            "cases": "cases on both", "ceilings": f"copy ceiling {a} -> {b}"})
    st.dataframe(styled, column_config=config, hide_index=True, width="stretch", placeholder=tables.MISSING)
    st.caption(data.md_escape(f"robocache's median time on {base} / on {other}, per case and dtype measured by both "
                              "machines' newest runs of the suite named (the newest suite in which both measured "
                              "the op's cases; above 1x the second is faster). A bandwidth-bound kernel should move by "
                              "about the ratio of the copy ceilings, measured in the same runs."))


def losses(w: pd.DataFrame) -> None:
    """The cases robocache loses to a peer, worst first, every GPU: horizontal bars labelled with their ratio."""
    lost = w[w["speedup"] < 1.0] if not w.empty else w
    if w.empty:
        return
    st.subheader(f"Where robocache loses, worst first ({len(lost)})")
    if lost.empty:
        st.caption("None: robocache is at least as fast as the strongest peer in every case of the newest runs.")
        return
    st.plotly_chart(charts.ranked_bars(lost, title="robocache slower than the strongest peer", prefix_machine=True),
                    width="stretch")


def details(df: pd.DataFrame) -> None:
    """One architecture, op, timer and cache mode in detail: health counts of the newest records, every case ranked
    against the strongest peer, the best provider per case and the latest results."""
    st.header("In detail: one architecture and op")
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
    w = tables.wins(wide)
    if w.empty:
        st.info(data.md_escape(f"No {op} case on {arch} has robocache and a peer measured in the same run, so "
                               "there is no speedup to draw."))
    else:
        several = w["machine"].nunique() > 1
        st.plotly_chart(charts.ranked_bars(w, title=f"{op} on {arch}: every case, worst first", prefix_machine=several),
                        width="stretch")
        st.caption("Each case's newest run with robocache; the bar's peer is the fastest of that run (every peer's "
                   "median is in the next table).")

    st.subheader("Best provider per case")
    provs = tables.providers_in(wide)
    best = wide[["case_id", "dtype", "best", "best_p50", *provs, "machine", "timer", "cache", "run_id", "created"]]
    styled, config = tables.readable(best, provider_cols=provs)
    st.dataframe(styled, column_config=config, hide_index=True, width="stretch", placeholder=tables.MISSING)

    st.subheader("Latest results")
    show = ["case_id", "provider", "dtype", "machine", "status", "p50", "items_per_s", "gb_per_s", "pct_of_ceiling",
            "throttled", "contended", "noisy", "run_id", "git_commit", "created", "reason"]
    styled, config = tables.readable(lat[show].sort_values(["case_id", "dtype", "provider"]))
    st.dataframe(styled, column_config=config, hide_index=True, width="stretch", placeholder=tables.MISSING)


@st.cache_data(show_spinner=False, max_entries=8)
def morning(dirs: tuple[bytes, ...], fingerprint: str) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame,
                                                                 tuple[str, str] | None]:
    """The newest run per machine and op (:func:`dashboard.tables.newest_runs`), robocache against its strongest
    peer in them (:func:`dashboard.tables.wins`) and the two GPUs' rows to compare (:func:`dashboard.tables.pair_runs`),
    cached by the results files as they are (a rerun of the page costs ~1 s at 100,000 records otherwise); the frame
    itself through the one loader. The pair is chosen over every record: the machines' newest runs may be sampled
    draws of their own that share no case, while older runs of both still do (what :func:`dashboard.tables.pair_runs`
    falls back to)."""
    del fingerprint  # part of the cache key only
    df, _ = data.load_frame([os.fsdecode(d) for d in dirs])
    rows = tables.newest_runs(df, data.TIMER_ORDER)  # single-GPU rows only
    pair = tables.machine_pair(df)
    both = tables.pair_runs(df, *pair, data.TIMER_ORDER) if pair else rows.iloc[0:0]
    return rows, tables.wins(tables.side_by_side(rows)), both, pair


def body(df: pd.DataFrame) -> None:
    single = df[df["world_size"].isna()]  # single-GPU records; multi-GPU ones never mix into these views
    dirs = data.results_dirs()
    rows, w, both, pair = morning(tuple(os.fsencode(d) for d in dirs), frame.files_fingerprint(dirs))
    headline(rows, w)
    regression_status(df)
    two_gpus(rows, both, pair)
    losses(w)
    details(single)


data.frame_page("Overview", body)
