"""A bisection reaches its change's issue: scripts/alerts_to_issues.py --bisect, against the fake GitHub API of
tests/test_alerts_to_issues.py. The bisection documents are made by robocache.bench.bisect from a simulated
bisection (tests/test_bisect.py's measurer), keyed to the SYNTHETIC alert's change as the nightly keys them."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from robocache.bench import bisect as B
from tests.test_alerts_to_issues import LABEL, alert, ati, env, fake, write  # noqa: F401 - fixtures (env uses fake)
from tests.test_bisect import A, run, state, step_levels


def bisection(tmp_path: Path, a: dict, status: str = "found", name: str = "b") -> str:
    st, _ = run(step_levels(8, 6, {A: 2.0}), state(8, cases=(A,)), sigma=0.05, seed=1)
    st.alert = {"key": ati.change_key(a), "change_ids": [], "fingerprints": [a["fingerprint"]], "ratio": a["ratio"]}
    st.cases[0].series = dict(a["series"], grid_version=2, frontend="cli", input_sets=1)
    st.link_base = "https://dash.example"
    st.status = status
    doc = B.document(st)
    path = tmp_path / f"{name}.bisect.json"
    path.write_text(json.dumps(doc))
    return str(path)


def test_a_new_issue_carries_the_bisection_with_the_culprit_link(env, tmp_path: Path) -> None:  # noqa: F811
    fake = env  # noqa: F811 - the fake GitHub the env fixture set up
    a = alert("a1b2c3d4e5f6")
    rc = ati.main([write(tmp_path, [a]), "--bisect", bisection(tmp_path, a)])
    assert rc == 0
    body = fake.issues[0]["body"]
    assert "<!-- robocache-series: a1b2c3d4e5f6 -->" in body and "SYNTHETIC alert body" in body
    assert "### Bisection: culprit `" + f"{6:040x}"[:12] in body
    assert "<!-- robocache-bisect: 0123456789ab -->" in body
    assert "https://dash.example/history?" in body and f"culprit={6:040x}" in body
    assert fake.comments == {}


def test_an_open_issue_gets_the_bisection_in_tonights_comment(env, tmp_path: Path) -> None:  # noqa: F811
    fake = env  # noqa: F811 - the fake GitHub the env fixture set up
    fake.labels.add(LABEL)
    n = fake.add_issue("old", "text\n<!-- robocache-series: a1b2c3d4e5f6 -->\nmore")
    a = alert("a1b2c3d4e5f6")
    assert ati.main([write(tmp_path, [a]), "--bisect", bisection(tmp_path, a)]) == 0
    assert len(fake.issues) == 1 and len(fake.comments[n]) == 1
    c = fake.comments[n][0]
    assert c.startswith("Still slower on") and "### Bisection: culprit" in c


def test_other_changes_running_and_hand_run_bisections_are_left_out(env, tmp_path: Path) -> None:  # noqa: F811
    fake = env  # noqa: F811 - the fake GitHub the env fixture set up
    a, other = alert("a1b2c3d4e5f6"), alert("0f0f0f0f0f0f", commit="1234123412341234")
    running = bisection(tmp_path, a, status="running", name="running")
    doc = json.loads(Path(bisection(tmp_path, a, name="byhand")).read_text())
    doc["alert"] = None
    (tmp_path / "byhand.bisect.json").write_text(json.dumps(doc))
    rc = ati.main([write(tmp_path, [a]), "--bisect", running, str(tmp_path / "byhand.bisect.json"),
                   bisection(tmp_path, other, name="other")])
    assert rc == 0 and "Bisection" not in fake.issues[0]["body"]


@pytest.mark.parametrize("change, msg", [
    ({"schema": "robocache-bisect/9"}, "not a robocache-bisect/1 document"),
    ({"status": "fine"}, "is not a bisection status"),
    ({"markdown": ""}, "markdown must be a non-empty string"),
    ({"alert": {"key": "../x"}}, "key must be 12 lowercase hex digits"),
    ({"id": "<script>"}, "id must be 12 lowercase hex digits"),
])
def test_a_bad_bisection_file_stops_everything_before_any_call(env, tmp_path: Path, capsys, change: dict,  # noqa: F811
                                                               msg: str) -> None:
    fake = env  # noqa: F811 - the fake GitHub the env fixture set up
    a = alert("a1b2c3d4e5f6")
    path = Path(bisection(tmp_path, a))
    path.write_text(json.dumps({**json.loads(path.read_text()), **change}))
    assert ati.main([write(tmp_path, [a]), "--bisect", str(path)]) == 2
    assert msg in capsys.readouterr().err and fake.calls == []


def test_dry_run_says_a_bisection_would_be_added(tmp_path: Path, capsys) -> None:
    a = alert("a1b2c3d4e5f6")
    assert ati.main([write(tmp_path, [a]), "--dry-run", "--bisect", bisection(tmp_path, a)]) == 0
    assert "with 1 bisection(s)" in capsys.readouterr().out
