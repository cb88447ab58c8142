"""History of a call-cost series (timer ``host_loop``): drawn as its interleaved call ratio (public call / bare
launch, ``dispatch.interleaved``), the quantity ``check`` judges it by, with a ratio alert's marker on the ratio
and never on the host time, whose +-60% night-to-night moves the ratio cancels (issue 27).

Records built here are synthetic fixtures (tests/test_regress_call_cost.py's ``call``): a series whose host time
moves +-60% a night and whose ratio steps +20% on the last night; bare_launch beside it (never timed interleaved).
"""
from __future__ import annotations

import copy
import json
from pathlib import Path
from urllib.parse import parse_qs, urlparse

import pandas as pd
import pytest

pytest.importorskip("streamlit")
pytest.importorskip("plotly")
from streamlit.testing.v1 import AppTest
from test_dashboard import UNESCAPED_LT, assert_no_markup
from test_regress_call_cost import HOST, RATIO, call, history
from test_store import make_env

from dashboard import charts, data, history_charts, history_data
from robocache.bench import links, schema, store
from robocache.bench import regressions as regress
from robocache.bench.regressions import noise, records

PAGES = Path(__file__).resolve().parents[1] / "dashboard" / "views"
NIGHTS = 13
LACKING = 2  # the series' first nights carry no ratio (records older than the interleaved timing)
STEP = 1.2


def write(folder: Path, *, bare: bool = True) -> list[schema.Record]:
    """The call-cost series (its first LACKING nights without the ratio, +20% on the ratio tonight) and, with
    ``bare``, bare_launch's own host-time series beside it; one file per run and provider."""
    recs = history(HOST[:NIGHTS], RATIO[:NIGHTS - 1] + [1.70 * STEP], lacking=LACKING)
    if bare:
        recs += [call(7.0, None, provider="bare_launch", run=f"n{i:03d}", night=i) for i in range(NIGHTS)]
    for r in recs:
        store.write_records(folder, make_env(), [copy.deepcopy(r)], name=f"{r.run_id}-{r.case.provider}")
    return recs


def view(folder: Path) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """History's inputs over ``folder``: its rows, commit order, the check's findings and method breaks."""
    res = regress.check(store.load(str(folder)).records)
    assert [a.series.get("measure") for a in res.alerts] == [noise.CALL_RATIO]
    ev = history_data.events(history_data.validate_doc(json.loads(json.dumps(regress.alerts_json(res))), "doc"))
    df, _ = data.load_frame([str(folder)], cache=None)
    order = history_data.commit_order(df)
    rows = history_data.history_rows(df, order)
    return rows, order, ev, history_data.method_breaks(rows)


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    f = tmp_path_factory.mktemp("call-ratio")
    write(f)
    return f


def lines(fig) -> list:
    return [t for t in fig.data if t.mode == "lines+markers"]


# ---------------------------------------------------------------- the rows and the figure

def test_rows_carry_the_checks_ratio_from_the_frames_column(folder: Path) -> None:
    """Each row's ratio is the one the check judges (records.call_ratio of the same record), p20/p80 its rounds'
    own; rows without one (older nights, bare_launch) are NaN, never their host time."""
    rows, _, _, _ = view(folder)
    want = {r.run_id: r for r in store.load(str(folder)).records if r.case.provider == "robocache"}
    ours = rows[rows["provider"] == "robocache"]
    for run, got, lo, hi in zip(ours["run_id"].astype(str), ours["call_ratio"], ours["call_ratio_p20"],
                                ours["call_ratio_p80"]):
        cr = records.call_ratio(want[run])
        if cr is None:
            assert pd.isna(got) and pd.isna(lo) and pd.isna(hi)
        else:
            il = want[run].dispatch.interleaved
            assert (got, lo, hi) == (cr[0], il.ratio_p20, il.ratio_p80)
    assert ours["call_ratio"].notna().sum() == NIGHTS - LACKING
    assert rows.loc[rows["provider"] == "bare_launch", "call_ratio"].isna().all()


def test_figure_under_the_ratio_draws_the_ratios_and_the_marker_on_them(folder: Path) -> None:
    rows, order, ev, breaks = view(folder)
    fig = history_charts.history_commits(rows, order, ev, breaks, history_data.RATIO_METRIC)
    (line,) = lines(fig)  # bare_launch has no ratio: not drawn under it
    ours = rows[(rows["provider"] == "robocache") & rows["call_ratio"].notna()]
    assert list(line.y) == ours["call_ratio"].tolist() and list(line.x) == ours["x"].tolist()
    assert list(line.y) != ours["p50"].tolist()
    # the rounds' p20..p80 as asymmetric error bars around each ratio
    assert list(line.error_y.array) == pytest.approx((ours["call_ratio_p80"] - ours["call_ratio"]).tolist())
    assert list(line.error_y.arrayminus) == pytest.approx((ours["call_ratio"] - ours["call_ratio_p20"]).tolist())
    assert fig.layout.yaxis.title.text == "interleaved call ratio, public / bare launch"
    assert fig.layout.yaxis.type == "linear"
    (marker,) = [t for t in fig.data if str(t.meta).startswith("alert:")]
    # the marker sits on the ratio line at tonight's commit, and its +x% is the ratio's step
    assert marker.y[0] == dict(zip(line.x, line.y))[marker.x[0]] == pytest.approx(1.70 * STEP)
    assert marker.text[0] == "+19.9%" or marker.text[0] == "+20.0%", marker.text
    assert "interleaved call ratio" in " ".join(marker.hovertext) and "median time" not in " ".join(marker.hovertext)
    assert "host time per call" in line.hovertemplate and "p20 to p80" in line.hovertemplate


def test_under_the_host_time_a_ratio_alert_is_no_marker_on_the_line(folder: Path) -> None:
    """Its +20% is not the host time's (which moved +-60% a night): no marker on that line; its commit range is
    shaded and named instead."""
    rows, order, ev, breaks = view(folder)
    fig = history_charts.history_commits(rows, order, ev, breaks, "p50")
    assert len(lines(fig)) == 2  # robocache and bare_launch, as host times
    assert not [t for t in fig.data if str(t.meta).startswith(("alert:", "improvement:", "drift:"))]
    notes = [a.text for a in fig.layout.annotations]
    assert any(n.startswith("alert of the interleaved call ratio +") for n in notes), notes
    assert sum(1 for s in fig.layout.shapes if s.type == "rect") == 1


def test_a_time_finding_under_the_ratio_is_not_put_on_the_ratio(folder: Path) -> None:
    rows, order, ev, breaks = view(folder)
    timed = ev.assign(measure="time")  # the same finding, as if about the median time
    fig = history_charts.history_commits(rows, order, timed, breaks, history_data.RATIO_METRIC)
    assert not [t for t in fig.data if str(t.meta).startswith("alert:")]
    assert any(a.text.startswith("alert of the median time") for a in fig.layout.annotations)
    fig = history_charts.history_commits(rows, order, timed, breaks, "p50")
    assert [t for t in fig.data if str(t.meta).startswith("alert:")]


def test_rows_without_the_ratio_are_counted_and_said_why(folder: Path) -> None:
    rows, _, _, _ = view(folder)
    text = history_data.ratio_left_out(rows)
    n_bare = NIGHTS
    assert text.startswith(f"{n_bare + LACKING} of {len(rows)} records are not drawn under the interleaved call ratio")
    assert f"bare\\_launch {n_bare}" in text and f"robocache {LACKING}" in text
    assert "bare\\_launch rows are never timed interleaved" in text and "older than the interleaved timing" in text
    ours = history_data.ratio_left_out(rows[rows["provider"] == "robocache"])
    assert "bare_launch" not in ours and "older than the interleaved timing" in ours  # only what applies
    # a section the check reads as no ratio (p50 above its own p80) is counted apart, not drawn
    bad = rows.copy()
    i = bad.index[bad["call_ratio"].notna()][0]
    il = json.loads(bad.at[i, "interleaved"])
    il["ratio_p50"] = il["ratio_p80"] * 2
    bad["interleaved"] = bad["interleaved"].astype(object)
    bad.at[i, "interleaved"] = json.dumps(il)
    again = history_data.history_rows(bad.drop(columns=list(history_data.RATIO_COLUMNS)), history_data.commit_order(bad))
    assert again["call_ratio"].notna().sum() == NIGHTS - LACKING - 1
    assert "1 carry one without a usable ratio (robocache 1)" in history_data.ratio_left_out(again)
    only = rows[rows["call_ratio"].notna()]
    assert history_data.ratio_left_out(only) is None


def test_record_text_is_escaped_under_the_ratio(folder: Path) -> None:
    rows, order, ev, breaks = view(folder)
    evil = "<img src=x onerror=alert(1)>*x*"
    rows = rows.assign(run_id=rows["run_id"].astype(object), provider=rows["provider"].astype(object),
                       machine=rows["machine"].astype(object))
    rows.loc[rows["provider"] == "robocache", "machine"] = evil
    rows.loc[rows["provider"] == "bare_launch", "provider"] = evil
    fig = history_charts.history_commits(rows, order, ev, breaks, history_data.RATIO_METRIC)
    (line,) = lines(fig)
    cells = [str(c) for row in line.customdata for c in row]
    assert "&lt;img src=x onerror=alert(1)&gt;*x*" in cells and not any("<img" in c for c in cells)
    text = history_data.ratio_left_out(rows)
    assert not UNESCAPED_LT.search(text) and "\\<img" in text and "\\*x\\*" in text


@pytest.mark.parametrize("section", [
    {"ratio_p20": 1.6, "ratio_p50": 1.7, "ratio_p80": 1.8, "rounds": 20},
    {"ratio_p20": 1.8, "ratio_p50": 1.7, "ratio_p80": 1.6, "rounds": 20},  # inverted
    {"ratio_p20": 1.6, "ratio_p50": 1.7, "ratio_p80": 1.8, "rounds": float("inf")},
    {"ratio_p20": 0.0, "ratio_p50": 1.7, "ratio_p80": 1.8, "rounds": 20},
    [1, 2, 3]])
def test_the_drawn_band_is_where_the_check_has_a_ratio(section) -> None:
    text = json.dumps(section)
    ratio, band = records.call_ratio_of_json("host_loop", text), records.call_ratio_band_of_json("host_loop", text)
    assert (ratio is None) == (band is None)
    if band is not None:
        assert band == (section["ratio_p20"], ratio[0], section["ratio_p80"])
    assert records.call_ratio_band_of_json("cuda_event", text) is None


# ---------------------------------------------------------------- the link and the page

def test_a_ratio_findings_link_names_the_ratio_metric() -> None:
    s = {"machine": "m", "op": "resample", "case_id": "resample/x", "provider": "robocache", "dtype": "float32",
         "timer": "host_loop", "cache": "warm", "grid_version": 1, "frontend": "cli", "input_sets": 1}
    q = parse_qs(urlparse(links.history_url({**s, "measure": noise.CALL_RATIO}, "")).query)
    assert q["metric"] == [noise.CALL_RATIO] == [history_data.RATIO_METRIC] == [links.RATIO_METRIC]
    assert noise.CALL_RATIO in charts.METRICS
    assert "metric" not in parse_qs(urlparse(links.history_url(s, "")).query)  # a time finding: as before
    assert q["series"] == [schema.fingerprint(s)]  # the measure stays outside the series' identity


def test_default_metric_follows_the_findings(folder: Path) -> None:
    _, _, ev, _ = view(folder)
    fp = ev["fingerprint"].iloc[0]
    assert history_data.default_metric(ev, fp) == history_data.default_metric(ev, None) == "call_ratio"
    assert history_data.default_metric(ev, "0" * 12) == "p50"  # another series linked: its own findings decide
    assert history_data.default_metric(ev.assign(measure="time"), fp) == "p50"
    assert history_data.default_metric(ev.iloc[0:0], None) == "p50"


def page(folder: Path, monkeypatch: pytest.MonkeyPatch, params: dict) -> AppTest:
    monkeypatch.setenv(data.ENV_VAR, str(folder))
    monkeypatch.setenv(data.NO_DEFAULT_ENV_VAR, "1")
    at = AppTest.from_file(str(PAGES / "history.py"), default_timeout=90)
    for k, v in params.items():
        at.query_params[k] = v
    return at.run()


def test_history_opened_from_a_ratio_alert_shows_the_ratio(folder: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The alert's link opens History on the interleaved call ratio, the marker on the ratio line, the rows left
    out said; the user's choice of the host time keeps the finding off that line, and the choice is in the URL."""
    res = regress.check(store.load(str(folder)).records)
    (alert,) = res.alerts
    url = links.history_url(alert.series, "")
    params = {k: v[-1] for k, v in parse_qs(urlparse(url).query).items()}
    assert params["metric"] == "call_ratio"
    at = page(folder, monkeypatch, {**params, "provider": ["robocache", "bare_launch"]})
    assert not at.exception and not at.error, [e.value for e in at.error]
    assert_no_markup(at)
    assert at.radio[0].value == "call_ratio" and at.query_params["metric"] == "call_ratio"
    spec = json.loads(at.get("plotly_chart")[0].proto.spec)
    assert spec["layout"]["yaxis"]["title"]["text"] == "interleaved call ratio, public / bare launch"
    drawn = [t for t in spec["data"] if t.get("mode") == "lines+markers"]
    assert len(drawn) == 1 and drawn[0]["meta"] == alert.fingerprint
    (marker,) = [t for t in spec["data"] if str(t.get("meta", "")).startswith("alert:")]
    assert marker["y"][0] == dict(zip(drawn[0]["x"], drawn[0]["y"]))[marker["x"][0]]
    captions = " ".join(c.value for c in at.caption)
    assert f"{NIGHTS + LACKING} of {2 * NIGHTS} records are not drawn under the interleaved call ratio" in captions
    assert "interleaved call ratio" in at.dataframe[-1].value.columns
    # the host time chosen: no marker on it, the finding said to be on the ratio
    at = at.radio[0].set_value("p50").run()
    assert not at.exception and at.query_params["metric"] == "p50"
    spec = json.loads(at.get("plotly_chart")[0].proto.spec)
    assert not [t for t in spec["data"] if str(t.get("meta", "")).startswith("alert:")]
    assert any("about the interleaved call ratio, not this metric" in c.value for c in at.caption)
    assert any("the metric *interleaved call ratio, public / bare launch* draws it" in c.value for c in at.caption)
    # the same link without metric= (written before it): the linked series' ratio finding picks the ratio
    at = page(folder, monkeypatch, {k: v for k, v in params.items() if k != "metric"})
    assert not at.exception and at.radio[0].value == "call_ratio"


def test_a_case_without_any_ratio_offers_no_ratio_metric(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    recs = history(HOST[:4], [None] * 4)
    for r in recs:
        store.write_records(tmp_path, make_env(), [r], name=r.run_id)
    at = page(tmp_path, monkeypatch, {"metric": "call_ratio"})
    assert not at.exception and not at.error, [e.value for e in at.error]
    assert len(at.radio[0].options) == 4 and charts.METRICS["call_ratio"][0] not in at.radio[0].options
    assert at.radio[0].value == "p50"
    assert at.query_params["metric"] == "p50"


# ---------------------------------------------------------------- a bisected culprit under the ratio

def found_doc(rows: pd.DataFrame, provider: str, ident: str) -> dict:
    """A finished bisection (robocache.bench.bisect's document) of ``provider``'s series over its last two nights,
    its culprit a commit between them that the nightly never measured."""
    from robocache.bench import bisect as B

    ours = rows[rows["provider"] == provider].sort_values("x")
    good, bad = (str(c) for c in ours["git_commit"].iloc[-2:])
    fp = str(ours["series"].iloc[-1])
    commits = [B.Commit(good, 0, "before"), B.Commit("c0ffee" + "1" * 34, 1, "the culprit"), B.Commit(bad, 2, "after")]
    key = f"{ours['case_id'].iloc[-1]}/{ours['dtype'].iloc[-1]}/{provider}"
    st = B.State(id=ident, machine="m", commits=commits, cases=[B.CaseSpec(key, "warm", fp, {})],
                 settings=B.Settings(), expect={key: 1.1}, created="2026-11-28T00:00:00+00:00", status="found",
                 reason="SYNTHETIC")
    st.culprit, st.lo, st.hi = 1, 0, 1
    return schema.to_dict(schema.validate_bisect(B.document(st)))


def test_a_bisected_culprit_sits_on_the_line_drawn_under_each_metric(folder: Path) -> None:
    from dashboard import bisect_view

    rows, order, _, _ = view(folder)
    ratio_doc, bare_doc = found_doc(rows, "robocache", "aaaaaaaaaaaa"), found_doc(rows, "bare_launch", "bbbbbbbbbbbb")
    bad = ratio_doc["bad"]["commit"]
    at_bad = rows[(rows["provider"] == "robocache") & (rows["git_commit"].astype(str) == bad)].iloc[0]
    (m,) = bisect_view.culprit_markers([ratio_doc], rows, order, history_data.RATIO_METRIC)
    assert m["y"] == pytest.approx(at_bad["call_ratio"]) and m["x"] == at_bad["x"] - 0.5  # on the ratio line
    (m,) = bisect_view.culprit_markers([ratio_doc], rows, order, "p50")
    assert m["y"] == pytest.approx(at_bad["p50"])
    # bare_launch carries no ratio: under the ratio its line is not drawn, so its culprit is no (invisible) star
    assert bisect_view.culprit_markers([bare_doc], rows, order, history_data.RATIO_METRIC) == []
    assert len(bisect_view.culprit_markers([bare_doc], rows, order, "p50")) == 1


def test_an_unknown_or_hostile_metric_in_the_url_falls_back(folder: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    at = page(folder, monkeypatch, {"metric": "<img src=x onerror=alert(1)>", "provider": ["robocache"]})
    assert not at.exception and not at.error, [e.value for e in at.error]
    assert_no_markup(at)
    assert at.radio[0].value == "call_ratio"  # the view's ratio finding picks the default, as with no metric=
    assert at.query_params["metric"] == "call_ratio"
