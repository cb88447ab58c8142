"""The readers of an alerts file (issue 28 item 6): one loader (``schema.load_alerts``) gives the typed document
or the reason it is not one, in one line; a bad file (another version, a missing field, not JSON, no file) is
said on the dashboard's pages while the rest of the page renders (the check computed over the records instead),
stops ``bisect --alerts`` with a usage error, and lets ``check --refuted-before`` run without its memory. A series
judged by its call ratio (``measure``) loads in every reader, the issue script's standard-library check
included. Documents are SYNTHETIC."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from robocache.bench import bisect as B
from robocache.bench import cli, schema
from robocache.bench.regressions.memory import Memory
from tests import history_rehearsal as hr
from tests.test_alerts_schema import FIRST, ati

pytest.importorskip("streamlit")
from streamlit.testing.v1 import AppTest

from dashboard import data, history_data

REPO = Path(__file__).resolve().parents[1]
CALL = {"machine": "m1", "op": "dispatch", "case_id": "dispatch/call", "provider": "robocache", "dtype": "float32",
        "timer": "host", "cache": "warm", "grid_version": 1, "frontend": "cli", "input_sets": 1, "method_version": 1,
        "measure": "call_ratio"}

BAD = {  # name: (file text, what the reason says)
    "wrong-version": ('{"schema": "robocache-alerts/2", "alerts": []}', "is not 'robocache-alerts/1'"),
    "missing-field": ('{"schema": "robocache-alerts/1"}', "missing required field `alerts`"),
    "missing-series": ('{"schema": "robocache-alerts/1", "alerts": [{"fingerprint": "aaaaaaaaaaaa"}]}',
                       "missing required field `series`"),
    "not-json": ('{"schema": "robocache-alerts/1", "alerts": [', "not JSON"),
}


def bad_file(tmp_path: Path, name: str) -> Path:
    path = tmp_path / f"{name}.json"
    if name == "folder":
        path.mkdir()
    else:
        path.write_text(BAD[name][0])
    return path


@pytest.mark.parametrize("name", [*BAD, "folder"])
def test_the_loader_gives_the_document_or_one_line(tmp_path: Path, name: str) -> None:
    path = bad_file(tmp_path, name)
    got = schema.load_alerts(path)
    assert isinstance(got, schema.AlertsError) and "\n" not in str(got)
    assert (name == "folder") == isinstance(got, schema.AlertsUnreadable)
    if name != "folder":
        assert BAD[name][1] in str(got)
    said = history_data.read_alerts(str(path))  # the pages' reason: where, then what
    assert isinstance(said, str) and "\n" not in said and said.endswith(str(got)) and path.name in said
    with pytest.raises(B.SetupError) as e:
        B.read_alerts(path)
    assert "\n" not in str(e.value) and str(path) in str(e.value)
    good = tmp_path / "good.json"
    good.write_text(json.dumps(FIRST))
    assert schema.load_alerts(good) == schema.parse_alerts_bytes(good.read_bytes())


@pytest.mark.parametrize("name", ["wrong-version", "missing-series", "not-json"])
def test_bisect_says_a_bad_file_in_one_line(tmp_path: Path, name: str, monkeypatch: pytest.MonkeyPatch,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    path = bad_file(tmp_path, name)
    monkeypatch.setattr(B, "_repo_root", lambda p: tmp_path)  # no git: the file is read before any commit is
    rc = cli.main(["bisect", "--alerts", str(path), "--all", "--out", str(tmp_path / "out")])
    err = capsys.readouterr().err.strip()
    assert rc == 2 and len(err.splitlines()) == 1 and str(path) in err, err
    assert BAD[name][1] in err or (name == "missing-series" and "lacks series" in err)


@pytest.mark.parametrize("name", [*BAD, "folder"])
def test_check_runs_without_the_memory_of_a_bad_file(tmp_path: Path, name: str,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    path = bad_file(tmp_path, name)
    if name == "folder":  # a folder is a usage error before the check (cli._refuted_before)
        with pytest.raises(ValueError, match="a folder"):
            cli._refuted_before(str(path))
        return
    memory = cli._refuted_before(str(path))
    err = capsys.readouterr().err.strip()
    assert isinstance(memory, Memory) and len(err.splitlines()) == 1 and BAD[name][1] in err


@pytest.fixture(scope="module")
def rehearsal(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return hr.write(tmp_path_factory.mktemp("rehearsal"))


def page(name: str, monkeypatch: pytest.MonkeyPatch, results: Path, alerts: Path, params: dict | None = None
         ) -> AppTest:
    monkeypatch.setenv(data.ENV_VAR, str(results))
    monkeypatch.setenv(data.NO_DEFAULT_ENV_VAR, "1")
    monkeypatch.setenv(history_data.ALERTS_ENV, str(alerts))
    at = AppTest.from_file(str(REPO / "dashboard" / "views" / f"{name}.py"), default_timeout=90)
    for k, v in (params or {}).items():
        at.query_params[k] = v
    return at.run()


@pytest.mark.parametrize("name", ["wrong-version", "missing-field", "not-json"])
def test_a_bad_file_is_one_line_on_the_page_and_the_rest_renders(rehearsal: Path, tmp_path: Path, name: str,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    path = bad_file(tmp_path, name)
    at = page("regressions", monkeypatch, rehearsal, path)
    assert not at.exception, [e.value for e in at.exception]
    errors = [e.value for e in at.error]
    assert len(errors) == 1 and errors[0].startswith("Alerts file not used: ") and "\n" not in errors[0]
    assert data.md_escape(BAD[name][1]) in errors[0]
    # the rest: the check computed over the records, its alert, tables and verdict
    assert {m.label: m.value for m in at.metric}["open alerts"] == "1"
    assert any("computed now" in c.value for c in at.caption)
    assert any(s.value.startswith("Open alerts (1)") for s in at.subheader)


@pytest.mark.parametrize("view", ["history", "overview"])
def test_the_other_pages_say_it_and_render(rehearsal: Path, tmp_path: Path, view: str,
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    path = bad_file(tmp_path, "not-json")
    params = {"machine": hr.MACHINE, "op": "resample", "case": hr.CASE} if view == "history" else None
    at = page(view, monkeypatch, rehearsal, path, params)
    assert not at.exception, [e.value for e in at.exception]
    assert [e.value.startswith("Alerts file not used: ") for e in at.error] == [True]
    if view == "history":
        assert at.get("plotly_chart") and any("computed now" in c.value for c in at.caption)
    else:
        assert any(s.value == "Last night's regression check" for s in at.subheader)


def test_a_call_ratio_series_loads_in_every_reader(tmp_path: Path) -> None:
    """``measure`` (main 0d62ced: a call-cost series judged by its interleaved ratio) is a field of the series,
    outside its fingerprint: it loads in the type, the pages, bisect and the issue script, and files without it
    (every file before it) still load."""
    fp = schema.fingerprint(CALL)
    assert fp == schema.fingerprint({k: v for k, v in CALL.items() if k != "measure"})
    alert = {**FIRST["alerts"][0], "fingerprint": fp, "series": CALL, "case_key": "dispatch/call/float32/robocache",
             "confirmed": True}
    drift = {"fingerprint": fp, "change_id": "d" * 12, "kind": "drift", "series": CALL, "title": "drifting",
             "direction": "slower", "markdown": "x", "last": {"commit": "e" * 40}, "total": 0.05}
    path = tmp_path / "alerts.json"
    path.write_text(json.dumps({**FIRST, "alerts": [alert], "drifts": [drift]}))
    doc = schema.load_alerts(path)
    assert isinstance(doc, schema.AlertsDoc)
    assert doc.alerts[0].series["measure"] == doc.drifts[0].series["measure"] == "call_ratio"
    assert history_data.read_alerts(str(path)) == doc
    ev = history_data.events(doc)
    assert list(ev["kind"]) == ["alert", "drift"] and set(ev["fingerprint"]) == {fp}
    (g,) = B.groups(B.read_alerts(path).alerts)
    assert g.cases[0].series["measure"] == "call_ratio" and g.cases[0].fingerprint == fp
    got = ati.load_doc(str(path))
    assert got["alerts"][0]["series"]["measure"] == "call_ratio"
    assert ati.change_key(got["alerts"][0]) == g.key


def test_every_field_the_issue_script_reads_is_the_types() -> None:
    """scripts/alerts_to_issues.py reads an alert or drift's fields by name (``a["ratio"]``, ``item.get("kind")``);
    each is a field of the type, so a field renamed in the type fails here before the nightly's issues job."""
    import re

    text = (REPO / "scripts" / "alerts_to_issues.py").read_text()
    read = set(re.findall(r"\b(?:a|d|x|item|alert)(?:\[\"(\w+)\"\]|\.get\(\"(\w+)\")", text))
    names = {n for pair in read for n in pair if n}
    assert {"fingerprint", "series", "ratio", "direction", "change_id", "markdown"} <= names  # the scan sees them
    fields = set(schema.StepAlert.__struct_fields__) | set(schema.DriftAlert.__struct_fields__)
    # the script's own documents (a bisection's ``alert`` and ``key``) are not alerts
    assert names - fields <= {"alert", "key"}, names - fields
    assert {"commit", "created"} <= set(schema.AlertPoint.__struct_fields__)  # before, after, last: .get("commit")
    assert "measure" not in fields  # a field of the series (an open object), not of the finding


def test_the_pages_read_no_dict_of_an_alerts_document() -> None:
    """After the loader the pages and bisect read the typed document: no ``doc.get(...)``/``a["..."]`` on it."""
    import re

    for f in ("dashboard/history_data.py", "dashboard/views/regressions.py", "dashboard/views/history.py",
              "dashboard/views/overview.py"):
        text = (REPO / f).read_text()
        assert not re.search(r"\b(?:doc|summ|a|d|b|f)\.get\(\"", text), f
    text = (REPO / "robocache/bench/bisect.py").read_text()
    start = text.index("# ---------------------------------------------------------------------------------------------"
                       "--- alerts")
    assert not re.search(r"\ba\.get\(|\ba\[\"|doc\[\"", text[start:])
