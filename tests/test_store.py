"""The results store: atomic writes, safe names, a loader that survives bad files and stays fast.

All records here are synthetic fixtures (``"synthetic": True``); nothing touches a GPU.
"""
from __future__ import annotations

import json
import math
import multiprocessing as mp
import os
import random
import re
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from robocache.bench import store
from robocache.bench.schema import SCHEMA_VERSION, SchemaError, to_dict
from robocache.bench.store import (RECORDS_SUFFIX, load, orphaned_temporaries, safe_component,
                                   write_records)

REPO = Path(__file__).resolve().parents[1]
SAFE_NAME = re.compile(r"[A-Za-z0-9._-]+")


# ---------------------------------------------------------------- factory

def make_env(machine: str = "ci-synthetic") -> dict[str, Any]:
    """A valid Env: a CPU-only machine, unknown GPU fields None (never guessed)."""
    return {
        "hostname": "ci-host", "machine": machine, "device": "cpu", "gpu_name": None, "arch": None,
        "compute_capability": None, "gpu_count": None, "gpu_memory_gb": None, "sm_count": None,
        "l2_mb": None, "driver": None, "cuda": None, "cpu": "synthetic-cpu", "python": "3.11.7",
        "libs": {"numpy": "2.4.6", "msgspec": "0.22.0"}, "nvml": "unknown: synthetic fixture",
    }


def make_record(i: int = 0, run_id: str = "run-0") -> dict[str, Any]:
    """A complete, valid Record (every optional section filled, as a real GPU record would be)."""
    t = 10.0 + (i % 97) * 0.125
    return {
        "run_id": run_id,
        "created": "2026-01-01T00:00:00Z",
        "git_commit": "0123456789abcdef0123456789abcdef01234567",
        "git_dirty": False,
        "suite": "synthetic",
        "frontend": "test",
        "case": {
            "id": f"resample/B{i}-S100-T50-D32", "op": "resample", "provider": "numpy", "dtype": "float32",
            "params": {"B": i, "S": 100, "T": 50, "D": 32, "shape": [[1, 2], [3, 4]], "scale": 0.5},
            "grid_version": 1, "bytes": 1_000_000 + i, "items": 256, "items_unit": "trajectories",
            "reason": "synthetic fixture",
        },
        "method": {
            "timer": "host", "cache": "warm", "warmup_s": 0.1, "samples": 30, "reps_per_sample": 10,
            "noise_target": 0.02, "noise": 0.01, "noise_target_met": True, "time_limit_s": 5.0, "input_sets": 1, "version": 1,
        },
        "metrics": {
            "time_us": {"p20": t - 0.5, "p50": t, "p80": t + 0.5, "min": t - 1.0, "max": t + 2.0, "mean": t + 0.1},
            "items_per_s": 256 / t * 1e6, "gb_per_s": 1e6 / t / 1e3, "ceiling_gb_per_s": None,
            "pct_of_ceiling": None, "graph_time_us": None, "event_vs_graph": None,
        },
        "check": {"passed": True, "max_abs_err": 1e-7, "max_rel_err": 1e-6, "tolerance": 1e-5, "bad_fraction": 0.0},
        "clocks": {
            "sm_mhz_min": None, "sm_mhz_median": None, "sm_mhz_max_supported": None, "mem_mhz_median": None,
            "temperature_c_max": None, "power_w_max": None, "throttle_reasons": [], "other_processes": None,
            "samples": 0,
        },
        "health": {"throttled": False, "contended": False, "noisy": False, "reasons": []},
        "status": "ok",
        "reason": None,
        "duration_s": 1.5,
        "synthetic": True,
    }


def make_doc(n: int, run_id: str = "run-0", **over: Any) -> dict[str, Any]:
    doc = {"schema_version": 1, "kind": "robocache-bench/records", "env": make_env(),
           "records": [make_record(i, run_id) for i in range(n)]}
    doc.update(over)
    return doc


def listing(d: Path) -> list[str]:
    return sorted(p.name for p in d.iterdir())


# ---------------------------------------------------------------- 1. round trip and validation on write

def test_round_trip(tmp_path: Path) -> None:
    env = make_env()
    recs = [make_record(i, "run-rt") for i in range(5)]
    path = write_records(tmp_path / "out", env, recs, name="round trip")
    assert path.resolve().parent == (tmp_path / "out").resolve()
    assert path.name.endswith(RECORDS_SUFFIX) and path.name.startswith("round-trip-")
    assert not orphaned_temporaries(tmp_path / "out")

    res = load(tmp_path / "out")
    assert res.bad == [] and res.files == 1
    assert len(res.records) == 5
    for got, want in zip(res.records, recs):
        assert to_dict(got.env) == env
        assert got.source == str(path)
        plain = to_dict(got)
        assert {k: v for k, v in plain.items() if k not in ("env", "source")} == want
    # env is attached by reference: one dict per file, not a copy per record
    assert all(r.env is res.records[0].env for r in res.records)


def test_loaded_records_can_be_written_again(tmp_path: Path) -> None:
    """The loader's "env"/"source" keys are stripped on write, so load -> write round-trips."""
    write_records(tmp_path / "a", make_env(), [make_record(1)], name="first")
    res = load(tmp_path / "a")
    write_records(tmp_path / "b", make_env(), res.records, name="again")
    again = load(tmp_path / "b")
    assert again.bad == [] and len(again.records) == 1
    assert again.records[0].case == res.records[0].case


def test_checkpoint_rewrite_in_place(tmp_path: Path) -> None:
    """unique=False (the runner's checkpoints): one file, each rewrite atomically replaces the last."""
    paths = {write_records(tmp_path, make_env(), [make_record(i) for i in range(n)], name="run-1/quick",
                           unique=False) for n in (1, 2, 3)}
    assert [p.name for p in paths] == [f"run-1-quick{RECORDS_SUFFIX}"]
    res = load(tmp_path)
    assert res.files == 1 and len(res.records) == 3 and not orphaned_temporaries(tmp_path)


def _nan_metric(r: dict) -> None:
    r["metrics"]["gb_per_s"] = math.nan


def _inf_metric(r: dict) -> None:
    r["metrics"]["time_us"]["p50"] = math.inf


def _unknown_field(r: dict) -> None:
    r["flops"] = 1.0


def _unknown_nested(r: dict) -> None:
    r["case"]["colour"] = "red"


def _bad_status(r: dict) -> None:
    r["status"] = "passed"


def _missing_field(r: dict) -> None:
    del r["health"]


def _wrong_type(r: dict) -> None:
    r["method"]["samples"] = "ten"


def _negative_time(r: dict) -> None:
    r["metrics"]["time_us"]["min"] = -1.0


def _local_time(r: dict) -> None:
    r["created"] = "2026-01-01T09:00:00+09:00"  # the history orders runs by this text: UTC only


def _not_a_time(r: dict) -> None:
    r["created"] = "yesterday"


@pytest.mark.parametrize("breaker", [_nan_metric, _inf_metric, _unknown_field, _unknown_nested, _bad_status,
                                     _missing_field, _wrong_type, _negative_time, _local_time, _not_a_time])
def test_bad_records_refused_before_writing(tmp_path: Path, breaker) -> None:
    out = tmp_path / "out"
    out.mkdir()
    recs = [make_record(i) for i in range(3)]
    breaker(recs[1])  # one bad record among good ones: the whole write is refused
    with pytest.raises(SchemaError):
        write_records(out, make_env(), recs, name="bad")
    assert listing(out) == []  # no result, no temporary


def test_created_in_utc_loads_and_another_offset_is_a_bad_file(tmp_path: Path) -> None:
    """Both UTC spellings (with or without fractions of a second) load; a file with a local offset is reported as
    bad, naming the field, and the other files still load."""
    good = make_doc(3)
    for r, when in zip(good["records"], ("2026-01-01T00:00:00+00:00", "2026-01-01T00:00:01Z",
                                          "2026-01-01T00:00:02.250000+00:00")):
        r["created"] = when
    (tmp_path / f"good{RECORDS_SUFFIX}").write_text(json.dumps(good))
    bad = make_doc(2, run_id="run-1")
    bad["records"][1]["created"] = "2026-01-01T09:00:03+09:00"
    (tmp_path / f"bad{RECORDS_SUFFIX}").write_text(json.dumps(bad))
    loaded = load(tmp_path)
    assert len(loaded.records) == 3 and len(loaded.bad) == 1
    assert "created" in loaded.bad[0][1] and "bad" in str(loaded.bad[0][0])


def test_bad_env_refused_and_no_folder_created(tmp_path: Path) -> None:
    env = make_env()
    env["device"] = "tpu"
    with pytest.raises(SchemaError):
        write_records(tmp_path / "never", env, [make_record()], name="x")
    assert not (tmp_path / "never").exists()  # validation comes before mkdir


def test_unserializable_string_writes_nothing(tmp_path: Path) -> None:
    rec = make_record()
    rec["reason"] = "lone surrogate \ud800"  # valid str in Python, not encodable as UTF-8
    out = tmp_path / "out"
    out.mkdir()
    with pytest.raises(SchemaError):
        write_records(out, make_env(), [rec], name="x")
    assert listing(out) == []


def test_failed_write_removes_temporary(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    out = tmp_path / "out"

    def boom(*a: Any) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(store.os, "replace", boom)
    with pytest.raises(OSError):
        write_records(out, make_env(), [make_record()], name="x")
    assert listing(out) == []


# ---------------------------------------------------------------- 2. corrupt corpus

def test_corrupt_corpus(tmp_path: Path) -> None:
    d = tmp_path / "results"
    sub = d / "machine-a"
    sub.mkdir(parents=True)
    good_text = json.dumps(make_doc(3, "good"))
    want_records = 0
    for i in range(50):
        doc = make_doc(3, f"good-{i}")
        for j, r in enumerate(doc["records"]):
            r["case"]["id"] = f"good/{i}/{j}"
        (sub if i % 2 else d).joinpath(f"good-{i:02d}{RECORDS_SUFFIX}").write_text(json.dumps(doc))
        want_records += 3

    def wrong_type() -> str:
        doc = make_doc(3)
        doc["records"][2]["method"]["samples"] = "ten"
        return json.dumps(doc)

    def with_value(path: tuple, value: float) -> str:
        doc = make_doc(2)
        node = doc["records"][1]
        for k in path[:-1]:
            node = node[k]
        node[path[-1]] = value
        return json.dumps(doc, allow_nan=True)  # writes the raw tokens NaN / Infinity

    def missing(key: str) -> str:
        doc = make_doc(2)
        del doc["records"][0][key]
        return json.dumps(doc)

    bad_texts: list[bytes] = []
    bad_texts += [good_text[: len(good_text) * k // 7].encode() for k in range(1, 7)]  # truncated mid-file
    bad_texts += [b"", b"   \n\t ", b"\n"]  # empty
    bad_texts += [wrong_type().encode(), json.dumps(make_doc(1, env={"hostname": 3})).encode()]
    bad_texts += [json.dumps(make_doc(3, schema_version=SCHEMA_VERSION + 1)).encode() for _ in range(3)]  # newer
    bad_texts += [with_value(("metrics", "gb_per_s"), math.nan).encode(),
                  with_value(("metrics", "time_us", "p50"), math.nan).encode(),
                  with_value(("case", "params", "scale"), math.nan).encode(),
                  with_value(("metrics", "items_per_s"), math.inf).encode(),
                  with_value(("metrics", "event_vs_graph"), -math.inf).encode()]
    bad_texts += [json.dumps([make_doc(1)]).encode(), b"null", b"42", b'"a string"']  # not an object
    bad_texts += [bytes(random.Random(7).randrange(256) for _ in range(4096)), b"\x00" * 64, b"\xff\xfe\xfd"]
    bad_texts += [missing("status").encode(), json.dumps(make_doc(1, kind="asv/benchmarks")).encode(),
                  json.dumps(make_doc(1, records={"a": 1})).encode(),
                  b"[" * 100_000]  # hostile nesting must not blow the recursion limit
    assert len(bad_texts) == 30
    bad_paths = []
    for i, data in enumerate(bad_texts):
        p = (sub if i % 3 else d) / f"bad-{i:02d}{RECORDS_SUFFIX}"
        p.write_bytes(data)
        bad_paths.append(str(p))

    res = load(d)  # must not raise
    assert res.files == 80
    assert len(res.records) == want_records
    assert {r.run_id for r in res.records} == {f"good-{i}" for i in range(50)}
    assert all(r.run_id.startswith("good-") for r in res.records)
    assert sorted(p for p, _ in res.bad) == sorted(bad_paths)
    reasons = dict(res.bad)
    assert all(reason.strip() and len(reason) <= 300 for reason in reasons.values())
    for i in (11, 12, 13):
        assert "newer" in reasons[bad_paths[i]], reasons[bad_paths[i]]
    assert reasons[bad_paths[6]] == "empty file"
    # stable order: by file path, then file order
    sources = [r.source for r in res.records]
    assert sources == sorted(sources)
    for src in set(sources):
        ids = [r.case.id for r in res.records if r.source == src]
        assert [i.rsplit("/", 1)[1] for i in ids] == ["0", "1", "2"]


# ---------------------------------------------------------------- 3. a writer killed mid-write

_WRITER = """
import sys
sys.path[:0] = [{repo!r}, {tests!r}]
from test_store import make_env, make_record
from robocache.bench.store import write_records
env = make_env()
recs = [make_record(i, "killed") for i in range(2000)]
print("ready", flush=True)
n = 0
while True:
    write_records({out!r}, env, recs, name="killed-writer")
    n += 1
    print("wrote", flush=True)
"""


def test_killed_writer_leaves_no_partial_file(tmp_path: Path) -> None:
    rnd = random.Random(20261120)
    complete = orphans = 0
    for trial in range(10):
        out = tmp_path / f"trial-{trial}"  # one folder per trial keeps each load small
        out.mkdir()
        code = _WRITER.format(repo=str(REPO), tests=str(REPO / "tests"), out=str(out))
        child = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, cwd=REPO)
        try:
            assert child.stdout is not None
            assert child.stdout.readline().strip() == b"ready"  # imports done: the kill lands in writes
            if trial % 5 == 4:  # a complete file exists however slow the machine is: the test never proves nothing
                assert child.stdout.readline().strip() == b"wrote"
            time.sleep(rnd.uniform(0.0, 0.3))
        finally:
            child.send_signal(signal.SIGKILL)
            child.wait()
            if child.stdout:
                child.stdout.close()
        res = load(out)
        assert res.bad == [], res.bad  # every *.records.json present is complete and valid
        files = list(out.glob("*" + RECORDS_SUFFIX))
        assert res.files == len(files) and len(res.records) == 2000 * len(files)
        # orphans, if any, are exactly the .tmp-* files, and never counted as results
        tmps = orphaned_temporaries(out)
        assert tmps == sorted(p for p in out.iterdir() if p.name.startswith(".tmp-"))
        complete += len(files)
        orphans += len(tmps)
    assert complete, "the writer never finished a file: the test proves nothing"
    print(f"\nkilled writer: {complete} complete files, {orphans} orphaned temporaries over 10 kills")


_SELF_KILL = """
import os, signal, sys
sys.path[:0] = [{repo!r}, {tests!r}]
from test_store import make_env, make_record
from robocache.bench import store
real = getattr(store.os, {hook!r})
calls = []
def dying(*a, **k):
    calls.append(1)
    if len(calls) == {nth}:  # die at the worst moment: the temporary exists, the rename has not happened
        os.kill(os.getpid(), signal.SIGKILL)
    return real(*a, **k)
setattr(store.os, {hook!r}, dying)
store.write_records({out!r}, make_env(), [make_record(i) for i in range(500)], name="first")
store.write_records({out!r}, make_env(), [make_record(i) for i in range(500)], name="second")
"""


@pytest.mark.parametrize("hook,nth", [("fsync", 3), ("replace", 2)])
def test_writer_killed_inside_write(tmp_path: Path, hook: str, nth: int) -> None:
    """Deterministic companion of the random kills: SIGKILL after the temporary is written, before the rename
    (the first write completes; fsync's 2nd call is the first write's folder fsync)."""
    out = tmp_path / "out"
    code = _SELF_KILL.format(repo=str(REPO), tests=str(REPO / "tests"), out=str(out), hook=hook, nth=nth)
    # a bound on a hang, not a speed test: the child's imports alone can take tens of seconds on a loaded machine
    proc = subprocess.run([sys.executable, "-c", code], cwd=REPO, timeout=600)
    assert proc.returncode == -signal.SIGKILL
    res = load(out)
    assert res.bad == [] and res.files == 1 and len(res.records) == 500
    assert res.records[0].source.endswith(RECORDS_SUFFIX) and "/first-" in res.records[0].source
    tmps = orphaned_temporaries(out)
    assert len(tmps) == 1 and tmps[0].name.startswith(".tmp-") and tmps[0].stat().st_size > 0


# ---------------------------------------------------------------- 4. concurrent writers

def _concurrent_writer(out: str, w: int) -> None:
    env = make_env(f"writer-{w}")
    for i in range(100):
        write_records(out, env, [make_record(i, f"w{w}-r{i}")], name="concurrent")


def test_concurrent_writers_lose_nothing(tmp_path: Path) -> None:
    out = tmp_path / "out"
    ctx = mp.get_context("spawn")  # no fork of pytest's state; the same start method on every OS
    procs = [ctx.Process(target=_concurrent_writer, args=(str(out), w)) for w in range(8)]
    for p in procs:
        p.start()
    # a generous bound, not a speed test: each child imports this module (spawn) before writing, which took over
    # 60 s on CI's shared 2-core machine under load (exit code None: still running)
    deadline = time.monotonic() + 600
    for p in procs:
        p.join(max(1.0, deadline - time.monotonic()))
    hung = [p.pid for p in procs if p.exitcode is None]
    for p in procs:
        if p.exitcode is None:
            p.kill()
            p.join()
    assert not hung, f"writers still running after 600 s: {hung}"
    assert [p.exitcode for p in procs] == [0] * 8
    res = load(out)
    assert res.bad == []
    assert res.files == 800
    assert len(res.records) == 800
    assert len({r.run_id for r in res.records}) == 800
    assert not orphaned_temporaries(out)


# ---------------------------------------------------------------- 5. hostile names

HOSTILE = ["..", "../../etc/passwd", "/abs/path", "a/b\\c", "x" * 5000, "y" * 5000, "con\x00trol\n\t\x1b[31m",
           "", ".", "ünïcødé", "...", "-rf", "C:\\Windows\\system32", "~/.ssh/id_rsa", "a\u202eb", "\ud800"]


def test_hostile_names_stay_inside(tmp_path: Path) -> None:
    out = tmp_path / "inner" / "out"
    out.mkdir(parents=True)
    before = listing(tmp_path / "inner")
    before_tmp = listing(tmp_path)
    written = []
    for name in HOSTILE:
        p = write_records(out, make_env(), [make_record()], name=name)
        assert p.resolve().parent == out.resolve(), (name, p)
        assert SAFE_NAME.fullmatch(p.name), (name, p.name)
        assert not p.name.startswith((".", "-"))
        assert len(p.name) < 255
        written.append(p)
    assert listing(tmp_path / "inner") == before == ["out"]
    assert listing(tmp_path) == before_tmp
    assert len(set(written)) == len(HOSTILE)
    assert sorted(p.name for p in written) == listing(out)
    res = load(out)
    assert res.bad == [] and len(res.records) == len(HOSTILE)


def test_safe_component() -> None:
    for name in HOSTILE:
        s = safe_component(name)
        assert SAFE_NAME.fullmatch(s) and s not in ("", ".", "..") and len(s) <= 80, (name, s)
        assert not s.startswith((".", "-")) and "--" not in s
    assert safe_component("resample/B256 S100") == "resample-B256-S100"
    assert safe_component("ünïcødé").startswith("unic")
    assert safe_component("") == safe_component(".") == safe_component("..") == "unnamed"
    assert safe_component("ok_name-1.2") == "ok_name-1.2"
    # long names: cut to max_len, distinct originals stay distinct (hash of the original)
    a, b = safe_component("x" * 5000), safe_component("x" * 4999 + "y")
    assert a != b and len(a) == len(b) == 80
    assert safe_component("z" * 200, max_len=40) != safe_component("z" * 201, max_len=40)
    assert len(safe_component("z" * 200, max_len=40)) <= 40


# ---------------------------------------------------------------- 6. load speed

# The load of 100,000 records is timed by scripts/bench_load.py (a benchmark: figures in docs/harness.md), never
# asserted here: a busy machine must not fail a test.


# ---------------------------------------------------------------- 7. missing paths and foreign JSON

def test_missing_path_and_foreign_json(tmp_path: Path) -> None:
    results = tmp_path / "results"
    (results / "asv").mkdir(parents=True)
    (results / "pytest").mkdir()
    (results / "asv" / "benchmarks.json").write_text(json.dumps({"version": 2, "benchmarks": {}}))
    (results / "pytest" / "0001_run.json").write_text("not even json")
    (results / "notes.txt").write_text("hello")
    good = write_records(results / "h200", make_env(), [make_record()], name="real")
    # an in-flight temporary (another writer mid-write) is never read as a result
    (results / "h200" / f".tmp-abc{RECORDS_SUFFIX}").write_text("{truncated")
    (results / "h200" / ".tmp-xyz").write_text("{truncated")

    missing = tmp_path / "nope" / f"gone{RECORDS_SUFFIX}"
    res = load(results, missing)
    assert res.bad == [(str(missing), "no such file or directory")]
    assert len(res.records) == 1 and res.records[0].source == str(good)
    assert res.files == 2
    assert len(orphaned_temporaries(results)) == 2

    only_missing = load(tmp_path / "also-missing")
    assert only_missing.records == [] and len(only_missing.bad) == 1 and only_missing.files == 1
    empty = load()
    assert empty.records == [] and empty.bad == [] and empty.files == 0
    assert orphaned_temporaries(tmp_path / "no-such-dir") == []


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="POSIX only")
def test_special_files_do_not_block(tmp_path: Path) -> None:
    write_records(tmp_path, make_env(), [make_record()], name="good")
    os.mkfifo(tmp_path / f"pipe{RECORDS_SUFFIX}")  # open() on it would block forever
    (tmp_path / f"dangling{RECORDS_SUFFIX}").symlink_to(tmp_path / "nowhere")
    res = load(tmp_path, tmp_path / f"pipe{RECORDS_SUFFIX}")  # via the folder and named explicitly
    assert len(res.records) == 1
    assert sorted((Path(p).name, r) for p, r in res.bad) == [
        (f"dangling{RECORDS_SUFFIX}", "no such file or directory"), (f"pipe{RECORDS_SUFFIX}", "not a regular file")]


def test_non_recursive_and_duplicates(tmp_path: Path) -> None:
    top = write_records(tmp_path, make_env(), [make_record(0, "top")], name="top")
    write_records(tmp_path / "sub", make_env(), [make_record(0, "sub")], name="sub")
    assert [r.run_id for r in load(tmp_path, recursive=False).records] == ["top"]
    assert sorted(r.run_id for r in load(tmp_path).records) == ["sub", "top"]
    # the same file reached twice (its folder and itself) loads once
    assert len(load(tmp_path, top).records) == 2


def test_env_is_shared_not_copied(tmp_path: Path) -> None:
    write_records(tmp_path, make_env(), [make_record(i) for i in range(10)], name="a")
    write_records(tmp_path, make_env("other"), [make_record(i) for i in range(10)], name="b")
    res = load(tmp_path)
    envs = {id(r.env) for r in res.records}
    assert len(envs) == 2  # one env object per file
    assert {r.env.machine for r in res.records} == {"ci-synthetic", "other"}


def test_atomic_write_replaces_whole_or_not_at_all(tmp_path, monkeypatch):
    """Every file the commands write (reports, comparisons, alerts) goes through store.atomic_write: a reader
    sees the old content or the new, and a write that fails leaves the old file and no temporary behind."""
    target = tmp_path / "alerts.json"
    store.atomic_write(target, '{"old": 1}')
    assert target.read_text() == '{"old": 1}'
    store.atomic_write(target, b'{"new": 2}')
    assert target.read_text() == '{"new": 2}'

    def boom(src, dst):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(store.os, "replace", boom)
    with pytest.raises(OSError):
        store.atomic_write(target, '{"lost": 3}')
    assert target.read_text() == '{"new": 2}'
    assert sorted(p.name for p in tmp_path.iterdir()) == ["alerts.json"]


def test_typed_records_are_encoded_once_and_checked_as_read(tmp_path: Path) -> None:
    """``write_records`` of typed structs (what the harness writes) encodes them once and checks the bytes as a
    reader decodes them: the same file as from the equal dicts; a constraint a struct built in code never checked,
    and a NaN (msgspec would write null), are SchemaErrors and nothing is written; the loader's env and source
    are never stored."""
    import msgspec

    from robocache.bench.schema import Env, Record

    env = make_env("typed")
    dicts = [make_record(i) for i in range(3)]
    typed = [msgspec.convert(r, Record) for r in dicts]
    a = store.write_records(tmp_path / "a", msgspec.convert(env, Env), typed, name="run")
    b = store.write_records(tmp_path / "b", env, dicts, name="run")
    assert a.read_bytes() == b.read_bytes()
    loaded = store.load(a).records
    assert [store.to_plain(r) for r in loaded] == [store.to_plain(r) for r in typed]
    again = store.write_records(tmp_path / "c", loaded[0].env, loaded, name="run")  # env and source attached
    assert b'"source"' not in again.read_bytes() and again.read_bytes() == a.read_bytes()
    bad = msgspec.structs.replace(typed[0], duration_s=-1.0)
    with pytest.raises(SchemaError, match=r"duration_s"):
        store.write_records(tmp_path / "d", msgspec.convert(env, Env), [bad], name="run")
    nan = msgspec.structs.replace(typed[1], case=msgspec.structs.replace(typed[1].case, params={"B": float("nan")}))
    with pytest.raises(SchemaError, match="cannot serialize"):
        store.write_records(tmp_path / "d", msgspec.convert(env, Env), [nan], name="run")
    assert not (tmp_path / "d").exists() or not list((tmp_path / "d").iterdir())
