"""The dashboard's columnar load cache (dashboard.frame.load_table): the JSON records stay the source of truth.

The cache must give the very frame a load from JSON gives, read again only the files whose key (size, mtime_ns,
ctime_ns, inode) changed, drop the rows of files that went, report every bad file exactly as the store does (a
file that became bad included), and rebuild (never trust) a cache file that is not whole. No timing is
asserted here: scripts/bench_load.py measures the speed.
"""
from __future__ import annotations

import importlib.util
import json
import os
import time
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("pyarrow")

import pandas as pd  # noqa: E402

from robocache.bench import frame  # noqa: E402
from robocache.bench import store  # noqa: E402
from tests.test_store import make_doc  # noqa: E402


def _write(path: Path, doc: dict[str, Any]) -> None:
    path.write_text(json.dumps(doc), encoding="utf-8")


def _folder(tmp_path: Path) -> Path:
    d = tmp_path / "res"
    (d / "sub").mkdir(parents=True)
    _write(d / "a.records.json", make_doc(3, run_id="run-a"))
    _write(d / "b.records.json", make_doc(2, run_id="run-b"))
    _write(d / "sub" / "c.records.json", make_doc(4, run_id="run-c"))
    return d


def _fresh(dirs: list[str]) -> tuple[pd.DataFrame, list[tuple[str, str]]]:
    """The frame and bad files straight from the JSON, through the store's own load."""
    res = store.load(*dirs)
    return frame.build_frame(res.records), res.bad


def _via_cache(dirs: list[str], cache: Path) -> tuple[pd.DataFrame, list[tuple[str, str]]]:
    table, bad = frame.load_table(dirs, cache)
    return frame.to_frame(table), bad


class _Reads:
    """Counts the files the loader parses (store.read_file), to tell a cache hit from a re-read."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.paths: list[str] = []
        real = store.read_file

        def counting(path: str) -> Any:
            self.paths.append(os.path.basename(path))
            return real(path)

        monkeypatch.setattr(store, "read_file", counting)

    def take(self) -> list[str]:
        out, self.paths = sorted(self.paths), []
        return out

    def fresh(self, dirs: list[str]) -> tuple[pd.DataFrame, list[tuple[str, str]]]:
        """:func:`_fresh`, its reads not counted."""
        before = list(self.paths)
        got = _fresh(dirs)
        self.paths = before
        return got


def _bump() -> None:
    """Let the clock move on before a rewrite, so the file's ctime differs from the one cached (file times tick
    coarsely); a pause, nothing timed."""
    time.sleep(0.05)


def test_committed_records_through_the_cache_equal_the_json_load(tmp_path: Path) -> None:
    dirs = [str(frame.REPO / "results")]
    want, want_bad = _fresh(dirs)
    assert len(want) > 100  # the committed records are there
    cache = tmp_path / "cache"
    built, bad1 = _via_cache(dirs, cache)  # no cache yet: built from the JSON and written
    assert len(list(cache.glob("frame-*.parquet"))) == 1
    again, bad2 = _via_cache(dirs, cache)  # read from the cache
    pd.testing.assert_frame_equal(built, want)
    pd.testing.assert_frame_equal(again, want)
    assert bad1 == bad2 == want_bad
    # the harness's entry point, and the dashboard's, give the same frame
    df, bad = frame.load(dirs, cache=cache)
    pd.testing.assert_frame_equal(df, want)
    assert bad == want_bad
    if importlib.util.find_spec("streamlit") is not None:
        from dashboard import data

        df, bad = data.load_frame(dirs, cache=cache)
        pd.testing.assert_frame_equal(df, want)
        assert bad == [(store.display_path(p), w) for p, w in want_bad]


def test_only_changed_files_are_read_again(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    d = _folder(tmp_path)
    cache = tmp_path / "cache"
    reads = _Reads(monkeypatch)
    _via_cache([str(d)], cache)
    assert reads.take() == ["a.records.json", "b.records.json", "c.records.json"]
    df, bad = _via_cache([str(d)], cache)
    assert reads.take() == [] and not bad and len(df) == 9  # all from the cache

    _bump()
    _write(d / "a.records.json", make_doc(5, run_id="run-a2"))  # changed
    (d / "b.records.json").unlink()  # removed
    _write(d / "sub" / "new.records.json", make_doc(1, run_id="run-new"))  # added
    df, bad = _via_cache([str(d)], cache)
    assert reads.take() == ["a.records.json", "new.records.json"]
    want, want_bad = reads.fresh([str(d)])
    pd.testing.assert_frame_equal(df, want)
    assert bad == want_bad == []
    assert set(df["run_id"].astype(str)) == {"run-a2", "run-c", "run-new"} and len(df) == 10
    # and the rewritten cache holds the new state: nothing is read on the next load
    df2, _ = _via_cache([str(d)], cache)
    assert reads.take() == []
    pd.testing.assert_frame_equal(df2, want)


def test_a_file_that_became_bad_is_reported_never_hidden(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    d = _folder(tmp_path)
    cache = tmp_path / "cache"
    _via_cache([str(d)], cache)
    target = d / "b.records.json"
    before = target.stat()
    _bump()
    # corrupt it in place keeping its size and mtime (only its ctime moves): still caught
    raw = bytearray(target.read_bytes())
    raw[0:1] = b"["
    target.write_bytes(bytes(raw))
    os.utime(target, ns=(before.st_atime_ns, before.st_mtime_ns))
    assert target.stat().st_size == before.st_size and target.stat().st_mtime_ns == before.st_mtime_ns
    reads = _Reads(monkeypatch)
    df, bad = _via_cache([str(d)], cache)
    want, want_bad = reads.fresh([str(d)])
    assert len(want_bad) == 1 and want_bad[0][0] == str(target)
    assert bad == want_bad  # the store's own reason, in its order
    pd.testing.assert_frame_equal(df, want)
    assert "run-b" not in set(df["run_id"].astype(str))
    # a bad file is never cached: read (and reported) again on every load
    df, bad = _via_cache([str(d)], cache)
    assert reads.take() == ["b.records.json", "b.records.json"]
    assert bad == want_bad
    # mended, it comes back
    _write(target, make_doc(2, run_id="run-b"))
    df, bad = _via_cache([str(d)], cache)
    assert not bad and "run-b" in set(df["run_id"].astype(str))


def test_bad_files_and_missing_folders_listed_as_the_store_lists_them(tmp_path: Path) -> None:
    d = _folder(tmp_path)
    (d / "zz.records.json").write_text("{not json", encoding="utf-8")
    _write(d / "aa.records.json", {"schema_version": 1, "kind": "robocache-bench/records"})
    dirs = [str(tmp_path / "nowhere"), str(d)]
    want, want_bad = _fresh(dirs)
    assert [os.path.basename(p) for p, _ in want_bad] == ["nowhere", "aa.records.json", "zz.records.json"]
    cache = tmp_path / "cache"
    for _ in range(2):  # building the cache, then from it
        df, bad = _via_cache(dirs, cache)
        assert bad == want_bad
        pd.testing.assert_frame_equal(df, want)


@pytest.mark.parametrize("damage", ["truncate", "garbage", "flip", "not-ours", "wrong-rows"])
def test_a_damaged_cache_is_rebuilt_not_trusted(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, damage: str) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    d = _folder(tmp_path)
    cache = tmp_path / "cache"
    _via_cache([str(d)], cache)
    (path,) = cache.glob("frame-*.parquet")
    raw = path.read_bytes()
    if damage == "truncate":
        path.write_bytes(raw[: len(raw) // 2])
    elif damage == "garbage":
        path.write_bytes(b"PAR1" + os.urandom(200) + b"PAR1")
    elif damage == "flip":  # the last byte of p50's column chunk, inside a data page: its page checksum catches it
        col = pq.ParquetFile(path).metadata.row_group(0).column(frame.COLUMNS.index("p50"))
        start = col.dictionary_page_offset if col.has_dictionary_page else col.data_page_offset
        at = start + col.total_compressed_size - 1
        flipped = bytearray(raw)
        flipped[at] ^= 0xFF
        path.write_bytes(bytes(flipped))
    elif damage == "not-ours":  # a valid Parquet file this code did not write (no manifest)
        pq.write_table(pa.table({"run_id": ["forged"]}), path)
    else:  # whole, but its manifest does not count its rows
        t = pq.read_table(path)
        meta = json.loads(t.schema.metadata[b"robocache.frames"])
        meta["files"][0][2] += 1
        pq.write_table(t.replace_schema_metadata({b"robocache.frames": json.dumps(meta).encode()}), path)
    reads = _Reads(monkeypatch)
    want, _ = reads.fresh([str(d)])
    with pytest.warns(UserWarning, match="not used, rebuilt"):
        df, bad = _via_cache([str(d)], cache)
    assert reads.take() == ["a.records.json", "b.records.json", "c.records.json"]  # all read from the JSON
    pd.testing.assert_frame_equal(df, want)
    assert not bad
    # rewritten whole: the next load trusts it again and reads nothing
    df, _ = _via_cache([str(d)], cache)
    assert reads.take() == []
    pd.testing.assert_frame_equal(df, want)


def test_cache_written_atomically_in_its_folder_and_off_switch(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    d = _folder(tmp_path)
    cache = tmp_path / "cache"
    _via_cache([str(d)], cache)
    assert [p.name for p in cache.iterdir() if p.name.startswith(store.TMP_PREFIX)] == []  # no temporaries left
    assert frame.cache_dir({frame.CACHE_ENV_VAR: "off"}) is None
    assert frame.cache_dir({frame.CACHE_ENV_VAR: str(cache)}) == cache
    assert frame.cache_dir({}) == frame.DEFAULT_CACHE_DIR
    # the default folder is one git ignores
    ignored = (frame.REPO / ".gitignore").read_text(encoding="utf-8").split()
    assert "/.cache/" in ignored and frame.DEFAULT_CACHE_DIR.relative_to(frame.REPO).parts[0] == ".cache"
    # no cache: the same frame, nothing written
    table, bad = frame.load_table([str(d)], None)
    pd.testing.assert_frame_equal(frame.to_frame(table), _fresh([str(d)])[0])


def test_a_cache_folder_that_cannot_be_written_only_warns(tmp_path: Path) -> None:
    d = _folder(tmp_path)
    blocker = tmp_path / "file-not-folder"
    blocker.write_text("x", encoding="utf-8")
    with pytest.warns(UserWarning, match="could not write the load cache"):
        df, bad = _via_cache([str(d)], blocker / "cache")
    pd.testing.assert_frame_equal(df, _fresh([str(d)])[0])
    assert not bad


def test_changed_derivation_code_rebuilds_the_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The cache's identity covers the code that derives rows and validates files (robocache/bench/frame.py, the store,
    the record schema) and the schema version: after a change to any of them every file is read again, never
    served from rows an older derivation wrote."""
    d = _folder(tmp_path)
    cache = tmp_path / "cache"
    reads = _Reads(monkeypatch)
    _via_cache([str(d)], cache)
    assert len(reads.take()) == 3
    _via_cache([str(d)], cache)
    assert reads.take() == []  # a hit
    ident = frame.cache_identity()
    assert ident == frame._SCHEMA_ID
    from robocache.bench import schema as rschema

    monkeypatch.setattr(rschema, "SCHEMA_VERSION", rschema.SCHEMA_VERSION + 1)
    assert frame.cache_identity() != ident  # the record schema's version is part of it
    monkeypatch.setattr(rschema, "SCHEMA_VERSION", rschema.SCHEMA_VERSION - 1)
    edited = tmp_path / "frame_edited.py"  # stands for this module after a code change
    edited.write_text(Path(frame.__file__).read_text(encoding="utf-8") + "\n# a changed derivation\n", encoding="utf-8")
    monkeypatch.setattr(frame, "__file__", str(edited))
    monkeypatch.setattr(frame, "_SCHEMA_ID", frame.cache_identity())
    assert frame._SCHEMA_ID != ident
    df, bad = _via_cache([str(d)], cache)
    assert reads.take() == ["a.records.json", "b.records.json", "c.records.json"] and not bad and len(df) == 9


@pytest.mark.parametrize("argv", [
    ["check", "{d}"], ["check", "{d}", "--frontend", "all", "--floor", "0.01", "--json", "{t}/a.json"],
    ["check", "{d}", "--machine", "nope"], ["check", "{d}/bad.records.json"],
])
def test_check_reads_through_the_frame_as_through_the_store(tmp_path, monkeypatch, capsys, argv):
    """The CLI's check reads the frame's columns through the columnar cache (built, then read back: no records
    file parsed again) and gives the very output, files, warnings and exit code of the store's load (cli._Loaded,
    its fallback without pandas)."""
    from robocache.bench import cli

    d = _history_folder(tmp_path)
    argv = [a.format(d=d, t=tmp_path) for a in argv]
    monkeypatch.setenv(frame.CACHE_ENV_VAR, str(tmp_path / "cache"))
    reads = _Reads(monkeypatch)

    def run() -> tuple[int, str, str, str]:
        rc = cli.main(argv)
        out, err = capsys.readouterr()
        written = (tmp_path / "a.json").read_text() if "--json" in argv else ""
        return rc, out, err, json.dumps({**json.loads(written), "generated": ""}) if written else ""

    via_frame = [run()]
    assert reads.take()  # the cache built from the files ...
    via_frame.append(run())
    assert set(reads.take()) <= {"bad.records.json"}  # ... then read back (a bad file is read every time)
    monkeypatch.setattr(cli, "_check_rows", cli._Loaded)
    via_store = run()
    assert via_frame[0] == via_frame[1] == via_store


# --- show, report and compare read through the frame (frame.History); the store's load is their fallback ---------

def _history_folder(tmp_path: Path) -> Path:
    """Five runs over six files (one run split over two), a throttled and a failed record, times that differ per
    run and per file, and a bad file."""
    d = tmp_path / "hist"
    d.mkdir()
    for n in range(5):
        doc = make_doc(6, run_id=f"20260101T0{n}0000Z-run{n}")
        for i, r in enumerate(doc["records"]):
            r["created"] = f"2026-01-0{1 + n}T0{n}:00:00Z"
            r["metrics"]["time_us"]["p50"] *= 1 + 0.01 * ((n * 7 + i * 3) % 5)
        doc["records"][1]["health"]["throttled"] = n == 2
        if n == 3:
            doc["records"][2].update(status="crash", metrics=None, reason="boom")
        if n == 1:  # a run in two files
            _write(d / "b1.records.json", {**doc, "records": doc["records"][3:]})
            doc["records"] = doc["records"][:3]
        _write(d / f"a{n}.records.json", doc)
    (d / "bad.records.json").write_text("{", encoding="utf-8")
    return d


@pytest.mark.parametrize("argv", [
    ["show", "{d}"], ["show", "{d}", "--run", "20260101T020000Z", "--format", "json"],
    ["report", "{d}", "--run", "20260101T010000Z-run1"], ["report", "{d}", "--headline", "--format", "json"],
    ["report", "{d}", "--run", "2026"],
    ["compare", "20260101T000000Z-run0", "20260101T040000Z-run4", "--results", "{d}"],
    ["compare", "20260101T010000Z-run1", "{d}/a3.records.json", "--results", "{d}", "--format", "json"],
    ["compare", "{d}/a0.records.json", "{d}/a4.records.json", "--history", "{d}"],
])
def test_show_report_compare_read_through_the_frame_as_through_the_store(tmp_path, monkeypatch, capsys, argv):
    """The CLI's show, report and compare through frame.History (the columnar cache: built, then read back) give
    the very output, warnings and exit code of the store's load (cli._Loaded, their fallback without pandas)."""
    from robocache.bench import cli

    d = _history_folder(tmp_path)
    argv = [a.format(d=d) for a in argv]
    monkeypatch.setenv(frame.CACHE_ENV_VAR, str(tmp_path / "cache"))

    def run() -> tuple[int, str, str]:
        rc = cli.main(argv)
        out, err = capsys.readouterr()
        return rc, out, err

    via_frame = [run(), run()]  # builds the cache, then reads it
    monkeypatch.setattr(cli, "_history", cli._Loaded)
    via_store = run()
    assert via_frame[0] == via_frame[1] == via_store
    assert "skipped bad results file" in via_store[2] or argv[0] == "compare"


def test_history_noise_over_the_frame_is_the_records(tmp_path):
    """frame.History.noise is verdicts.history_noise of the same records (each series' sigma and dof)."""
    from robocache.bench.regressions.verdicts import history_noise
    from robocache.bench.views.records import runs

    d = _history_folder(tmp_path)
    got = frame.History([str(d)], cache=None)
    recs = store.load(str(d)).records
    for skip in ((), ("20260101T040000Z-run4",)):
        want = history_noise(recs, skip)
        assert want and got.noise(skip) == want
    assert got.run_ids() == list(runs(recs))
    assert got.records_of(["20260101T010000Z-run1"]) == [r for r in recs if r.run_id == "20260101T010000Z-run1"]



def test_show_report_compare_fall_back_to_the_store_without_pandas(monkeypatch) -> None:
    """frame.py imports neither pandas nor pyarrow at module level, so its import alone proves nothing: without
    pandas (pyarrow present) show, report and compare read the store's load, never a half-built frame."""
    import sys

    from robocache.bench import cli

    repo = Path(__file__).resolve().parents[1]
    monkeypatch.setitem(sys.modules, "pandas", None)  # `import pandas` raises ImportError
    h = cli._history([str(repo / "results" / "h200-nvidia-h200-x4")])
    assert type(h).__name__ == "_Loaded" and h.records and not h.bad


# --- the across-runs views' rows (columns.Row): from the frame as from the records --------------------------------

def test_rows_of_the_frame_are_the_rows_of_the_records(tmp_path) -> None:
    """One read model: the rows ``report --kernels``/``--sampled`` and the dashboard's Kernels and Sampled pages
    read, taken from the Arrow table (through the cache), from the pandas frame, or built from the loaded records
    (the CLI without pandas), are equal, field by field, over the committed records."""
    from robocache.bench import columns

    dirs = [str(frame.REPO / "results")]
    recs = store.load(*dirs).records
    want = columns.of_records(recs)
    assert len(want) > 100 and any(r.interleaved for r in want) and any(r.pipeline for r in want)
    assert any(r.bytes for r in want) and all(isinstance(r.params, dict) for r in want)
    table, _ = frame.load_table(dirs, tmp_path / "cache")
    assert frame.rows_of(table) == want
    table, _ = frame.load_table(dirs, tmp_path / "cache")  # read back from the cache
    assert frame.rows_of(table) == want
    assert frame.rows_of(frame.to_frame(table)) == want
    assert frame.History(dirs, cache=None).rows() == want


@pytest.mark.parametrize("argv", [
    ["report", "{k}", "--kernels"], ["report", "{k}", "{s}", "--kernels", "--format", "json"],
    ["report", "{s}", "--sampled"], ["report", "{k}", "{s}", "--sampled", "--format", "json"],
])
def test_report_kernels_and_sampled_read_the_frame_as_the_store(tmp_path, monkeypatch, capsys, argv) -> None:
    """``report --kernels`` and ``--sampled`` read the frame's rows (frame.History.rows, through the columnar
    cache: built, then read back) and give the very output of the rows built from the store's load (cli._Loaded,
    their fallback without pandas). SYNTHETIC records (tests/synthetic_kernels.py, tests/synthetic_sampled.py)."""
    from robocache.bench import cli
    from tests import synthetic_kernels, synthetic_sampled

    k = synthetic_kernels.write_fixture(tmp_path / "kernels")
    s = synthetic_sampled.write_fixture(tmp_path / "sampled")
    argv = [a.format(k=k, s=s) for a in argv]
    monkeypatch.setenv(frame.CACHE_ENV_VAR, str(tmp_path / "cache"))

    def run() -> tuple[int, str, str]:
        rc = cli.main(argv)
        out, err = capsys.readouterr()
        return rc, out, err

    via_frame = [run(), run()]
    assert type(cli._history([str(k)])).__name__ == "History"
    monkeypatch.setattr(cli, "_history", cli._Loaded)
    via_store = run()
    assert via_frame[0] == via_frame[1] == via_store and via_store[0] == 0
    assert "|---|" in via_store[1] or '"sections"' in via_store[1]  # tables, in markdown or JSON
