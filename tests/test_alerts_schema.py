"""The alerts format (``robocache-alerts/1``, :class:`robocache.bench.schema.AlertsDoc`): what ``check`` writes
validates and is written as before; files of every earlier /1 writer load in every reader (the dashboard,
``bisect --alerts``, scripts/alerts_to_issues.py); bad files get a one-line reason; the issue script's
standard-library check (its job installs nothing) names the fields of the same type. Documents are SYNTHETIC."""
from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import pytest

from robocache.bench import bisect as B
from robocache.bench import schema
from robocache.bench.regressions import alerts as A
from robocache.bench.regressions.changepoints import Break, Change, CheckResult, Drift, Point

ROOT = Path(__file__).resolve().parent.parent
_spec = importlib.util.spec_from_file_location("alerts_to_issues", ROOT / "scripts" / "alerts_to_issues.py")
ati = importlib.util.module_from_spec(_spec)
sys.modules.setdefault("alerts_to_issues", ati)  # dataclasses look their module up
_spec.loader.exec_module(ati)

SERIES = {"machine": "gpu-h100", "op": "resample", "case_id": "resample/B8-S100-T50-D32", "provider": "robocache",
          "dtype": "float32", "timer": "cuda_event", "cache": "warm", "grid_version": 2, "frontend": "cli",
          "input_sets": 4, "method_version": 1, "arch": "H100"}
FP = schema.fingerprint(SERIES)
KEY = "resample/B8-S100-T50-D32/float32/robocache"


def point(n: int) -> Point:
    return Point(run_id=f"run-{n}", commit=f"{n:040x}", created=f"2030-01-{n:02d}T03:00:00+00:00", log_t=0.0,
                 within=0.01, suite="quick")


def result() -> CheckResult:
    step = Change(series=SERIES, fingerprint=FP, index=9, n_before=9, n_after=2, ratio=1.21, ratio_ci=(1.15, 1.27),
                  p_value=1e-5, before=point(9), after=point(10), latest=True, sigma=0.012, key=KEY, q_value=2e-4,
                  confirmed=True, confirm_note="rerun x1.20", reruns=2, place_p=0.9)
    faster = Change(series=SERIES, fingerprint=FP, index=4, n_before=4, n_after=6, ratio=0.8, ratio_ci=(0.75, 0.85),
                    p_value=1e-4, before=point(4), after=point(5), latest=True, sigma=0.012, key=KEY)
    drift = Drift(series=SERIES, fingerprint=FP, key=KEY, slope=0.01, slope_ci=(0.005, 0.015), total=0.1, window=10,
                  tau=0.7, p_value=1e-3, first=point(1), last=point(10), q_value=0.01)
    brk = Break(series=SERIES, fingerprint=FP, kind="environment", detail="host_id: a -> b", run_id="run-3",
                created="2030-01-03T03:00:00+00:00")
    return CheckResult(changes=[step, faster], alerts=[step], improvements=[faster], drifts=[drift], breaks=[brk],
                       checked=[FP], series=3, series_checked=1, series_stale=1, candidates=4)


# The first robocache-alerts/1 writer (a663ca6): no change ids, links, confirmation, drifts, breaks or `checked`,
# a summary without the later counts; and a file from a dashboard fixture (a break only, nothing else).
FIRST = {"schema": "robocache-alerts/1", "generated": "2026-11-01T04:00:00+00:00",
         "alerts": [{"fingerprint": FP, "series": {k: v for k, v in SERIES.items() if k != "method_version"},
                     "title": "resample/B8 float32 robocache +21.0% slower on H100 (gpu-h100) since 0000000a",
                     "direction": "slower", "ratio": 1.21, "ratio_ci": [1.15, 1.27], "q_value": 0.0002,
                     "p_value": 1e-5, "noise": 0.012, "n_before": 9, "n_after": 2,
                     "before": {"commit": "9" * 40, "run_id": "r9", "created": "2026-10-31T03:00:00+00:00"},
                     "after": {"commit": "a" * 40, "run_id": "r10", "created": "2026-11-01T03:00:00+00:00"},
                     "case_key": KEY, "reproduce": "robocache-bench run ...", "markdown": "### slower\n"}],
         "improvements": [],
         "summary": {"series": 3, "series_checked": 2, "candidates": 4, "significant_changes": 1, "alerts": 1,
                     "improvements": 0, "excluded_points": 0, "excluded_reasons": {}, "floor": 0.03, "fdr_q": 0.05}}
BREAK_ONLY = {"schema": "robocache-alerts/1", "alerts": [], "breaks": [
    {"fingerprint": FP, "kind": "method", "series": {"machine": "m"}, "detail": "measured another way",
     "run_id": "r", "created": "c", "ratio": None}]}


def test_what_check_writes_is_the_type_and_the_same_text() -> None:
    doc = A.alerts_json(result(), dashboard_url="https://dash.example/")
    doc["refuted"], doc["confirm_asked"] = [], True  # as `check --json` adds them (cli._check_outputs)
    doc["refuted_looks"] = [{"change_id": "c" * 12, "fingerprint": FP, "looks": 2}]
    typed = schema.alerts_doc(doc)
    assert typed.alerts[0].change_id == result().alerts[0].change_id and typed.alerts[0].before.commit == "9".zfill(40)
    assert typed.improvements[0].direction == "faster" and typed.drifts[0].kind == "drift"
    assert typed.breaks[0].kind == "environment" and typed.summary.status == "regression" and typed.checked == [FP]
    # every field the writer writes is a field of the type, in the writer's order (nothing dropped on a round trip)
    for part, cls in (("alerts", schema.StepAlert), ("drifts", schema.DriftAlert), ("breaks", schema.BreakNote)):
        assert list(doc[part][0]) == [f for f in cls.__struct_fields__ if f in doc[part][0]]
    assert set(doc["summary"]) == set(schema.AlertsSummary.__struct_fields__)
    assert set(doc) == set(schema.AlertsDoc.__struct_fields__)
    text = schema.encode_alerts(doc)
    assert text == json.dumps(doc, indent=1, allow_nan=False)  # the file as before the format was typed
    assert schema.parse_alerts_bytes(text.encode()) == typed


@pytest.mark.parametrize("doc", [FIRST, BREAK_ONLY, {"schema": "robocache-alerts/1", "alerts": []}],
                         ids=["first-writer", "break-only", "empty"])
def test_earlier_files_load_in_every_reader(tmp_path: Path, doc: dict) -> None:
    path = tmp_path / "alerts.json"
    path.write_text(json.dumps(doc))
    typed = schema.parse_alerts_bytes(path.read_bytes())
    assert len(typed.alerts) == len(doc.get("alerts", [])) and typed.drifts == [] and typed.checked is None
    assert schema.load_alerts(path) == typed  # the one loader: bisect and the dashboard read its typed document
    assert B.read_alerts(path) == typed
    got = ati.load_doc(str(path))  # the issue script's own (standard-library) check
    assert got["alerts"] == doc.get("alerts", []) and got["checked"] is None
    if doc is FIRST:
        assert typed.alerts[0].change_id is None and typed.alerts[0].confirmed is None
        assert typed.summary.series_stale is None and typed.summary.status is None
        assert "measure" not in typed.alerts[0].series  # written before call-cost series were judged on ratios
        assert [g.key for g in B.groups(typed.alerts)] == [ati.change_key(doc["alerts"][0])]


@pytest.mark.parametrize("text, says", [
    ('{"schema": "robocache-alerts/2", "alerts": []}', "schema: 'robocache-alerts/2' is not 'robocache-alerts/1'"),
    ('{"schema": "robocache-alerts/1", "alerts": {}}', "alerts: must be a list, got an object"),
    ('{"schema": "robocache-alerts/1", "alerts": [], "extra": 1}', "unknown field `extra`"),
    (json.dumps({**FIRST, "alerts": [{**FIRST["alerts"][0], "ratio": "big"}]}),
     "alerts[0].ratio: must be a number or null, got a string"),
    (json.dumps({**FIRST, "alerts": [{**FIRST["alerts"][0], "fingerprint": "a1b2c3d4e5f6 -->"}]}),
     "alerts[0].fingerprint: must be 12 lowercase hex digits"),
    (json.dumps(FIRST).replace('"ratio": 1.21', '"ratio": NaN'), "not JSON"),
    (json.dumps({**FIRST, "checked": ["nothex"]}), "checked[0]: must be 12 lowercase hex digits"),
    ('{"alerts": []}', "missing required field `schema`"),
    ('{"schema": "robocache-alerts/1"}', "missing required field `alerts`"),
    ("[1]", "must be an object, got a list"),
    ("", "empty file"),
])
def test_bad_files_get_one_line_reasons(text: str, says: str) -> None:
    with pytest.raises(schema.AlertsError) as e:
        schema.parse_alerts_bytes(text.encode())
    assert says in str(e.value) and "\n" not in str(e.value)


def test_nan_read_by_json_load_is_refused_too() -> None:
    bad = {**FIRST, "alerts": [{**FIRST["alerts"][0], "ratio": float("nan")}]}
    with pytest.raises(schema.AlertsError, match=r"alerts\[0\]\.ratio: must be a finite number"):
        schema.alerts_doc(bad)
    with pytest.raises(schema.AlertsError, match="expected a JSON object, got list"):
        schema.alerts_doc([])


def test_readers_report_the_typed_reason(tmp_path: Path) -> None:
    path = tmp_path / "alerts.json"
    path.write_text('{"schema": "robocache-alerts/2", "alerts": []}')
    with pytest.raises(B.SetupError, match="not a robocache-alerts/1 document.*robocache-alerts/2"):
        B.read_alerts(path)
    path.write_text(json.dumps({**FIRST, "alerts": [{k: v for k, v in FIRST["alerts"][0].items() if k != "case_key"}]}))
    with pytest.raises(B.SetupError, match=r"alerts\[0\] lacks series, case_key"):
        B.read_alerts(path)  # valid in the format (case_key is optional), not enough for bisect


def test_the_issue_scripts_check_names_the_types_fields() -> None:
    """scripts/alerts_to_issues.py cannot import robocache (its job installs nothing): its own check asks for
    fields of the same type, and what it requires of an alert and a drift is what an issue needs."""
    assert ati.SCHEMA == schema.ALERTS_SCHEMA
    assert set(ati.REQUIRED) <= set(schema.StepAlert.__struct_fields__)
    assert set(ati.DRIFT_REQUIRED) <= set(schema.DriftAlert.__struct_fields__)
    assert ati.FINGERPRINT_RE.pattern == "^[0-9a-f]{12}$"
    # the type's required fields are required by the script too
    import msgspec

    for cls, need in ((schema.StepAlert, ati.REQUIRED), (schema.DriftAlert, ati.DRIFT_REQUIRED)):
        assert {f.name for f in msgspec.structs.fields(cls) if f.required} <= set(need)
