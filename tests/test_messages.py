"""Typed messages between the harness's processes and the run context they share (robocache.bench.messages,
robocache.bench.context): a misspelt field fails where it is written, a record the schema refuses fails where
it arrives, and every way of running cases writes the same folder and file."""
from __future__ import annotations

import math
from pathlib import Path

import msgspec
import pytest

from robocache.bench import messages, runner, specs, store, worker
from robocache.bench.context import LaunchTask, RunContext
from robocache.bench.messages import Baseline, CaseDone, Ceiling, Progress, Task, TimingOptions
from robocache.bench.schema import Metrics, Quantiles, Record, SchemaError

from tests.test_store import make_env

KEY = "resample/B32-S100-T50-D32/float32/numpy"
FAST = {"time_limit_s": 0.2, "noise_target": 0.05, "warmup_s": 0.01}


def _run(tmp_path: Path, **kw) -> RunContext:
    return RunContext.start(suite="quick", device="cpu", frontend="test", out_dir=tmp_path, env=make_env("ci-msg"),
                            git=("abc", False), **kw)


def _gpu_env() -> dict:
    return {**make_env("gpu box/1"), "device": "gpu", "arch": "H200", "gpu_name": "NVIDIA H200"}


# --- a misspelt field fails at construction ------------------------------------------------------------

def test_task_is_built_by_the_run_context_and_refuses_misspelt_fields(tmp_path):
    run = _run(tmp_path)
    task = run.task(KEY, cache="cold", seed=3, timing=FAST)
    assert task == Task(run_id=run.run_id, suite="quick", frontend="test", device="cpu", git_commit="abc",
                        git_dirty=False, case_key=KEY, cache="cold", seed=3, timing=TimingOptions(**FAST))
    assert task.timing.kwargs() == FAST and task.timing.kwargs("time_limit_s") == {"time_limit_s": 0.2}
    with pytest.raises(TypeError, match="cahce"):
        run.task(KEY, cahce="cold")
    with pytest.raises(TypeError, match="sede"):
        Task(run_id="r", suite="quick", frontend="test", device="cpu", sede=1)
    with pytest.raises(ValueError, match="time_limt_s"):
        run.task(KEY, timing={"time_limt_s": 1.0})
    with pytest.raises(ValueError, match="noise_target"):
        run.task(KEY, timing={"noise_target": "low"})
    with pytest.raises(AttributeError):  # frozen: a task is what was sent, never changed on the way
        task.seed = 4  # type: ignore[misc]


def test_worker_record_is_a_struct_that_refuses_misspelt_fields(tmp_path):
    task = _run(tmp_path).task(KEY, timing=FAST)
    rec = worker.base_record(task, specs.find(KEY))
    assert isinstance(rec, Record) and rec.status == "error" and rec.synthetic is False
    with pytest.raises(AttributeError):
        rec.statuss = "ok"  # type: ignore[attr-defined]
    with pytest.raises(TypeError):
        rec["statuss"] = "ok"


def test_records_are_read_by_attribute_never_by_key(tmp_path):
    """A record is a Struct, not a mapping (issue 28 removed the dict-style access): reading it by key fails loudly
    instead of working on some records and not on others."""
    rec = worker.base_record(_run(tmp_path).task(KEY, timing=FAST), specs.find(KEY))
    assert rec.case.id and rec.status == "error"
    with pytest.raises(TypeError):
        rec["case"]  # noqa: B018
    with pytest.raises(TypeError):
        rec.case["id"]  # noqa: B018
    with pytest.raises(TypeError):
        rec["status"] = "ok"
    with pytest.raises(TypeError):
        "case" in rec  # noqa: B015
    # the series of a record is taken from the typed record only: a dict as written is refused, not read by key
    from robocache.bench import schema

    assert schema.series_key(rec).case_id == rec.case.id
    with pytest.raises(TypeError, match="typed Record"):
        schema.series_key(msgspec.to_builtins(rec))
    with pytest.raises(TypeError):
        dict(rec)
    assert not hasattr(rec, "get") and not hasattr(rec, "keys")
    with pytest.raises(TypeError, match="gb_per_sec"):
        Metrics(time_us=Quantiles(p20=1, p50=1, p80=1, min=1, max=1, mean=1), items_per_s=1.0, gb_per_sec=1.0,
                ceiling_gb_per_s=None, pct_of_ceiling=None, graph_time_us=None, event_vs_graph=None)
    with pytest.raises(TypeError, match="statuss"):
        msgspec.structs.replace(rec, statuss="ok")


def test_measured_record_crosses_a_process_boundary_unchanged(tmp_path):
    rec = worker.measure(_run(tmp_path, synthetic=True).task(KEY, timing=FAST))
    assert isinstance(rec, Record) and rec.status == "ok", rec.reason
    assert isinstance(rec.metrics, Metrics) and rec.synthetic is True
    assert messages.unpack(messages.pack(rec), Record) == rec


def test_a_record_the_schema_refuses_fails_where_it_arrives(tmp_path):
    rec = worker.measure(_run(tmp_path).task(KEY, timing=FAST))
    rec.metrics.gb_per_s = math.nan  # MessagePack keeps the NaN: the finite bound refuses it on decode
    with pytest.raises(msgspec.ValidationError, match="gb_per_s"):
        messages.unpack(messages.pack(rec), Record)
    rec.metrics.gb_per_s = 1.0
    rec.status = "fine"  # not a status
    with pytest.raises(msgspec.ValidationError, match="status"):
        messages.unpack(messages.pack(rec), Record)


def test_runner_records_a_worker_answer_the_schema_refuses(tmp_path, monkeypatch):
    """A case process whose answer does not decode as a Record: the case is an ``error`` saying why."""
    monkeypatch.setattr(runner, "_context", lambda: _Inline())
    task = _run(tmp_path).task(KEY, timing=FAST)
    outcome, rec, detail = runner.run_in_process(task, 60)
    assert outcome == "ok" and isinstance(rec, Record) and rec.status == "ok"
    _Inline.mangle = True
    try:
        outcome, rec, detail = runner.run_in_process(task, 60)
    finally:
        _Inline.mangle = False
    assert outcome == "invalid" and rec is None and "record is invalid" in detail and "status" in detail


class _Inline:
    """A multiprocessing context whose processes run their target in this process (optionally mangling the
    answer the target wrote, as a broken worker would)."""

    mangle = False

    def Process(self, target, args, daemon):  # noqa: N802 - multiprocessing's name
        return _InlineProcess(target, args)


class _InlineProcess:
    def __init__(self, target, args):
        self.target, self.args, self.pid, self.exitcode = target, args, None, None

    def start(self):
        data, path = self.args
        task = messages.unpack(data, Task)
        rec = worker.measure(task)
        if _Inline.mangle:
            rec.status = "fine"
        Path(path).write_bytes(messages.pack(rec))
        self.exitcode = 0

    def join(self, timeout=None):
        pass

    def is_alive(self):
        return False


# --- the run context ---------------------------------------------------------------------------------

def test_results_folder_rule_and_run_file(tmp_path):
    cpu = _run(tmp_path)
    assert cpu.machine == "ci-msg" and cpu.folder == tmp_path / "cpu-ci-msg"
    assert cpu.path() == tmp_path / "cpu-ci-msg" / f"{cpu.run_id}-quick{store.RECORDS_SUFFIX}"
    gpu = RunContext.start(suite="nightly", device="gpu", out_dir=tmp_path, env=_gpu_env(), git=(None, None),
                           name="r1-asv")
    assert gpu.folder == tmp_path / "h200-gpu-box-1" and gpu.path().name == "r1-asv.records.json"
    unknown = RunContext.start(suite="nightly", device="gpu", out_dir=tmp_path, env={**_gpu_env(), "arch": None},
                               git=(None, None))
    assert unknown.folder.name == "gpu-gpu-box-1"
    with pytest.raises(msgspec.ValidationError):  # the environment is checked when the run starts
        RunContext.start(suite="quick", device="cpu", out_dir=tmp_path, env={**make_env(), "gpu": "x"}, git=(None, None))


def test_append_adds_to_the_run_file_and_refuses_a_bad_one(tmp_path):
    run = _run(tmp_path)
    case = specs.find(KEY)
    first = worker.base_record(run.task(KEY), case, "skipped", "first")
    second = worker.base_record(run.task(KEY), case, "skipped", "second")
    assert run.records() == []
    path = run.append([first])
    assert run.append([second]) == path == run.path()
    loaded = store.load(path)
    assert loaded.bad == [] and [r.reason for r in loaded.records] == ["first", "second"]
    assert all(r.env.machine == "ci-msg" and r.git_commit == "abc" for r in loaded.records)
    path.write_text("{not json")
    with pytest.raises(SchemaError, match="does not load"):  # never silently started afresh
        run.append([second])


def test_launch_task_round_trip(tmp_path):
    run = _run(tmp_path, synthetic=True)
    lt = LaunchTask(task=run.task(timing=FAST), run=run, records_name="x-g2", cases=["a", "b"], world_size=2,
                    workdir=str(tmp_path), collective_timeout_s=120.0,
                    baselines={"k": Baseline(step_us=3.5, items=64, host_bound=True)})
    messages.write_json(tmp_path / "task.json", lt)
    assert msgspec.json.decode((tmp_path / "task.json").read_bytes(), type=LaunchTask) == lt
    assert messages.read_json(tmp_path / "task.json", Progress) is None  # another message: refused, not misread
    assert messages.read_json(tmp_path / "absent.json", Progress) is None


def test_case_done_and_ceiling_messages(tmp_path):
    rec = worker.base_record(_run(tmp_path).task(KEY), specs.find(KEY), "crash", "boom")
    messages.write_json(tmp_path / "case-0.json", CaseDone(key=KEY, record=rec, samples_us=[1.0, 2.0]))
    got = messages.read_json(tmp_path / "case-0.json", CaseDone)
    assert got is not None and got.record == rec and got.samples_us == [1.0, 2.0]
    c = Ceiling(status="ok", gb_per_s=3000.0, bytes=1 << 20)
    assert messages.unpack(messages.pack(c), Ceiling) == c
    assert Baseline.of(rec) is None  # not ok: no baseline
