"""Hostile results folders (issue 16): a file name that is not UTF-8 and a link pointing outside the folder.

The dashboard's loader must keep every page up (the cache key and every path shown are text Streamlit can
encode) and list the odd file; the store must never load a file outside the folder it walks as that folder's
results, nor echo such a file's content in a skip reason.
"""
from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

from robocache.bench import store
from tests.test_store import make_doc

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="POSIX file names and links")


def _write(path: Path | bytes, doc: dict) -> None:
    with open(path, "wb") as f:
        f.write(json.dumps(doc).encode())


def _folder_with_bad_name(tmp_path: Path) -> Path:
    d = tmp_path / "res"
    d.mkdir()
    _write(d / "good.records.json", make_doc(2, run_id="run-good"))
    _write(os.fsencode(d) + b"/bad-\xff\xfe.records.json", make_doc(3, run_id="run-latin1"))
    return d


def test_store_loads_a_non_utf8_name(tmp_path: Path) -> None:
    d = _folder_with_bad_name(tmp_path)
    res = store.load(d)
    assert not res.bad and len(res.records) == 5
    shown = [store.display_path(r.source) for r in res.records]
    assert all(s.encode("utf-8") for s in shown)  # printable everywhere
    assert any("\\xff\\xfe" in s for s in shown)


def test_dashboard_loader_with_a_non_utf8_name(tmp_path: Path) -> None:
    pytest.importorskip("streamlit")
    from dashboard import data

    d = _folder_with_bad_name(tmp_path)
    df, bad = data.load_frame([str(d)])  # was: UnicodeEncodeError hashing the cache key, every page down
    assert len(df) == 5 and not bad
    for s in df["source"]:
        s.encode("utf-8")  # every path the pages show can be sent to the browser
    assert df["run_id"].astype(str).str.contains("run-latin1").any()


def test_dashboard_bad_file_with_a_non_utf8_name_is_listed(tmp_path: Path) -> None:
    pytest.importorskip("streamlit")
    from dashboard import data

    d = tmp_path / "res"
    d.mkdir()
    _write(d / "good.records.json", make_doc(1))
    with open(os.fsencode(d) + b"/\xff.records.json", "wb") as f:
        f.write(b"{not json")
    df, bad = data.load_frame([str(d)])
    assert len(df) == 1 and len(bad) == 1
    path, _ = bad[0]
    assert path.encode("utf-8") and "\\xff" in path


def test_dashboard_runs_page_with_a_non_utf8_name(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("streamlit")
    from streamlit.testing.v1 import AppTest

    from dashboard import data

    d = _folder_with_bad_name(tmp_path)
    with open(os.fsencode(d) + b"/\xff.records.json", "wb") as f:
        f.write(b"{not json")
    monkeypatch.setenv(data.ENV_VAR, str(d))
    monkeypatch.setenv(data.NO_DEFAULT_ENV_VAR, "1")
    at = AppTest.from_file(str(Path(data.__file__).parent / "views" / "runs.py"), default_timeout=60).run()
    assert not at.exception, at.exception
    assert not at.error, [e.value for e in at.error]


def test_link_to_outside_the_folder_is_not_loaded(tmp_path: Path) -> None:
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    _write(outside / "theirs.records.json", make_doc(4, run_id="run-outside"))
    (outside / "secret.json").write_text(json.dumps({"aws_secret_access_key": "x", "token": "y"}))
    d = tmp_path / "res"
    d.mkdir()
    _write(d / "mine.records.json", make_doc(1, run_id="run-mine"))
    (d / "a.records.json").symlink_to(outside / "theirs.records.json")
    (d / "b.records.json").symlink_to(outside / "secret.json")
    (d / "inside.records.json").symlink_to(d / "mine.records.json")  # inside: the same file, loaded once
    res = store.load(d)
    assert {r.run_id for r in res.records} == {"run-mine"} and len(res.records) == 1
    reasons = dict(res.bad)
    assert set(reasons) == {str(d / "a.records.json"), str(d / "b.records.json")}
    for why in reasons.values():
        assert "outside" in why and "aws" not in why and "token" not in why
    # named explicitly, a link is the caller's choice: read
    assert {r.run_id for r in store.load(d / "a.records.json").records} == {"run-outside"}


def test_folder_reached_through_a_link_still_loads(tmp_path: Path) -> None:
    real = tmp_path / "real"
    real.mkdir()
    _write(real / "x.records.json", make_doc(2))
    (tmp_path / "alias").symlink_to(real, target_is_directory=True)
    res = store.load(tmp_path / "alias")
    assert not res.bad and len(res.records) == 2


def test_link_to_a_folder_outside_is_listed_not_walked(tmp_path: Path) -> None:
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    _write(outside / "theirs.records.json", make_doc(2, run_id="run-outside"))
    d = tmp_path / "res"
    d.mkdir()
    _write(d / "mine.records.json", make_doc(1, run_id="run-mine"))
    (d / "linked").symlink_to(outside, target_is_directory=True)
    res = store.load(d)
    assert {r.run_id for r in res.records} == {"run-mine"}
    assert [p for p, _ in res.bad] == [str(d / "linked")] and "not followed" in res.bad[0][1]
