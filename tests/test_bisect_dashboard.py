"""Bisections on the dashboard (dashboard/bisect_view.py, AppTest): History marks the culprit a bisection found
on its series, Regressions lists every bisection with its state.

Over the rehearsed history of tests/history_rehearsal.py (robocache +10% at night 14, synthetic records) and
bisection documents written by robocache.bench.bisect for it: a found culprit between the nights 13 and 14 (two
commits the nightly never measured), a running one and a not reproducible one.
"""
from __future__ import annotations

import json
import os
from pathlib import Path
from urllib.parse import parse_qs, urlparse

import pandas as pd
import pytest

pytest.importorskip("streamlit")
pytest.importorskip("plotly")
from streamlit.testing.v1 import AppTest

from dashboard import bisect_view, data
from robocache.bench import bisect as B
from robocache.bench import links, schema, store
from tests import history_rehearsal as hr
from tests.test_dashboard import assert_no_markup
from datetime import UTC

PAGES = Path(__file__).resolve().parents[1] / "dashboard" / "views"
MID = ["c0ffee" + f"{i:034x}" for i in (1, 2)]  # two commits between night 13 and night 14, never measured nightly
SUBJECT = "<script>alert(1)</script> make the kernel slower"


def series_of(folder: Path) -> dict:
    rec = next(r for r in store.load(folder).records
               if r.case.provider == "robocache" and r.git_commit == hr.commit(hr.STEP_NIGHT))
    return schema.series_key(rec)._asdict()


def doc_for(folder: Path, status: str, culprit: int | None, ident: str, series: dict) -> Path:
    commits = [B.Commit(hr.commit(hr.STEP_NIGHT - 1), 0, "night 13"), B.Commit(MID[0], 1, "a harmless change"),
               B.Commit(MID[1], 2, SUBJECT), B.Commit(hr.commit(hr.STEP_NIGHT), 3, "night 14")]
    key = f"{hr.CASE}/float32/robocache"
    st = B.State(id=ident, machine=hr.MACHINE, commits=commits,
                 cases=[B.CaseSpec(key, "warm", schema.fingerprint(series), series)], settings=B.Settings(),
                 expect={key: 1.1}, created="2026-02-21T03:00:00+00:00", status=status, reason=f"SYNTHETIC {status}")
    st.culprit, st.lo, st.hi = culprit, (culprit or 1) - 1, culprit or 3
    st.evidence = {3: {"commit": commits[3].sha, "index": 3, "role": "endpoints", "verdict": "reproduced",
                       "samples": 10, "rounds": 1, "seconds": 30.0},
                   1: {"commit": MID[0], "index": 1, "role": "candidate", "verdict": "good", "samples": 10,
                       "rounds": 1, "seconds": 30.0, "p_vs_good": 0.6, "p_vs_bad": 1e-6}}
    st.order = [3, 1]
    return B.write_doc(st, folder)


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    f = hr.write(tmp_path_factory.mktemp("rehearsal"))
    s = series_of(f)
    doc_for(f / "bisect", "found", 2, "aaaaaaaaaaaa", s)
    doc_for(f / "bisect", "running", None, "bbbbbbbbbbbb", s)
    doc_for(f / "bisect", "not_reproducible", None, "cccccccccccc", s)
    return f


def page(name: str, monkeypatch: pytest.MonkeyPatch, folder: Path, params: dict | None = None) -> AppTest:
    monkeypatch.setenv(data.ENV_VAR, str(folder))
    monkeypatch.setenv(data.NO_DEFAULT_ENV_VAR, "1")
    at = AppTest.from_file(str(PAGES / f"{name}.py"), default_timeout=90)
    for k, v in (params or {}).items():
        at.query_params[k] = v
    return at.run()


def params_of(url: str) -> dict:
    q = parse_qs(urlparse(url).query, keep_blank_values=True)
    return {k: v if len(v) > 1 else v[0] for k, v in q.items()}


def test_history_marks_the_culprit_between_the_nightly_points(folder: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    url = links.history_url(series_of(folder), culprit=MID[1])
    at = page("history", monkeypatch, folder, params_of(url))
    assert not at.exception and not at.error, [e.value for e in at.error]
    assert_no_markup(at)
    spec = json.loads(at.get("plotly_chart")[0].proto.spec)
    stars = [t for t in spec["data"] if str(t.get("meta", "")).startswith("culprit:")]
    assert [t["meta"] for t in stars] == [f"culprit:{MID[1]}"]  # the found one only: not the running or the other
    lines = [t for t in spec["data"] if t.get("mode") == "lines+markers"]
    xs = {c: x for t in lines for x, c in zip(t["x"], [d[0] for d in t["customdata"]])}
    x14 = xs[hr.commit(hr.STEP_NIGHT)[:12]]
    assert stars[0]["x"] == [x14 - 0.5]  # between night 13 and night 14, where the two commits lie
    assert "&lt;script&gt;" in stars[0]["hovertext"][0] and "<script>" not in json.dumps(stars[0])
    assert any(s.get("type") == "line" and s["x0"] == x14 - 0.5 for s in spec["layout"].get("shapes", []))
    assert any("culprit(s) that `robocache-bench bisect` found" in c.value for c in at.caption)
    assert not at.info


def test_history_says_when_the_linked_culprit_is_not_there(folder: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    params = params_of(links.history_url(series_of(folder), culprit="f" * 40))
    at = page("history", monkeypatch, folder, params)
    assert not at.exception and not at.error
    assert any("The linked culprit ffffffffffff is not on this view" in i.value for i in at.info)


def test_regressions_lists_each_bisection_with_its_state(folder: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    at = page("regressions", monkeypatch, folder)
    assert not at.exception and not at.error, [e.value for e in at.error]
    assert_no_markup(at)
    assert any(h.value == "Bisections (3)" for h in at.subheader)
    m = {x.label: x.value for x in at.metric}
    assert (m["running"], m["culprit found"], m["not reproducible"], m["other outcomes"]) == ("1", "1", "1", "0")
    t = next(d.value for d in at.dataframe if "state" in d.value.columns)
    by = {r["state"]: r for _, r in t.iterrows()}
    assert set(by) == {"found", "running", "not reproducible"}  # written just now: not stale
    found = by["found"]
    assert found["culprit"].startswith(MID[1][:12]) and "<script>" in found["culprit"]  # data, never markup
    assert found["History"] == links.history_url(series_of(folder), "", culprit=MID[1])
    assert found["range"].endswith("(3 commits)")


def test_a_running_bisection_is_said_stopped_when_stale() -> None:
    from datetime import datetime

    doc = {"status": "running", "updated": "2026-02-21T03:00:00+00:00"}
    assert bisect_view.state_text(doc, datetime(2026, 2, 21, 4, 0, tzinfo=UTC)) == "running"
    assert bisect_view.state_text(doc, datetime(2026, 2, 21, 9, 0, tzinfo=UTC)).startswith("running? (no")


def test_bad_documents_are_reported_not_shown(folder: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "x.bisect.json").write_text('{"schema": "robocache-bisect/1", "id": "<img src=x>"}')
    docs, bad = bisect_view.bisections([str(tmp_path)])
    assert docs == [] and len(bad) == 1
    culprits = bisect_view.culprit_markers([], pd.DataFrame(), pd.DataFrame(), "p50")
    assert culprits == []
    # beside the good documents: the page warns about it and still lists the three others
    (folder / "bisect" / "broken.bisect.json").write_text("{")
    try:
        at = page("regressions", monkeypatch, folder)
        assert not at.exception
        assert any("Skipped a bad bisection document" in w.value for w in at.warning)
        assert any(h.value == "Bisections (3)" for h in at.subheader)
    finally:
        os.unlink(folder / "bisect" / "broken.bisect.json")
