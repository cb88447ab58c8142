"""The runner's compile pre-pass (``robocache-bench run --precompile-jobs N``) on the CPU.

It compiles each torch.compile case once in parallel processes so the timing process loads the compiled code
from Inductor's on-disk cache; a failure in it is counted and never stops the run.
"""
from __future__ import annotations

import pytest

from robocache.bench import runner, specs
from robocache.bench.context import RunContext
from tests.test_store import make_env

FAST = {"time_limit_s": 0.3, "noise_target": 0.05, "warmup_s": 0.01}
BASE = "resample/B32-S100-T50-D32/float32/"


def test_compiles_selects_torch_compile_providers():
    assert runner.compiles("torch_compile") and runner.compiles("torch_compile@max-autotune")
    assert runner.compiles("precompile_providers:TORCH_COMPILE_ABORT_IN_PREPASS")
    assert not any(runner.compiles(p) for p in ("robocache", "robocache@v1", "torch_eager", "cupy", "numpy",
                                                "fault_providers:ABORT"))


def test_prepass_failures_never_stop_the_run(tmp_path):
    """An abort and an exception in the pre-pass are counted; the timing pass runs every case as without it."""
    keys = ["precompile_providers:TORCH_COMPILE_ABORT_IN_PREPASS",
            "precompile_providers:TORCH_COMPILE_RAISE_IN_PREPASS", "numpy"]
    cases = [specs.find(BASE + k) for k in keys]
    res = runner.run_suite("quick", device="cpu", cases=cases, out_dir=tmp_path, timing=FAST, timeout_s=60,
                           progress=False, precompile_jobs=2)
    pre = res.precompile
    assert pre["cases"] == 2 and pre["ok"] == 0  # numpy is not pre-compiled
    failed = {f["case"].rsplit(":", 1)[1]: f for f in pre["failed"]}
    assert failed["TORCH_COMPILE_ABORT_IN_PREPASS"]["status"] == "crash"
    assert failed["TORCH_COMPILE_RAISE_IN_PREPASS"]["status"] == "error"
    assert "compile failed in the pre-pass" in failed["TORCH_COMPILE_RAISE_IN_PREPASS"]["reason"]
    assert [r.status for r in res.records] == ["ok"] * 3, [(r.status, r.reason) for r in res.records]
    assert not res.failed


def test_prepass_error_never_stops_the_run(tmp_path, monkeypatch):
    def broken(*args, **kwargs):
        raise OSError("no room for temporary files")

    monkeypatch.setattr(runner, "precompile", broken)
    cases = [specs.find(BASE + "numpy")]
    res = runner.run_suite("quick", device="cpu", cases=cases, out_dir=tmp_path, timing=FAST, progress=False,
                           precompile_jobs=3)
    assert res.precompile == {"jobs": 3, "error": "OSError: no room for temporary files"}
    assert [r.status for r in res.records] == ["ok"]


def test_prepass_off_by_default(tmp_path):
    cases = [specs.find(BASE + "precompile_providers:TORCH_COMPILE_RAISE_IN_PREPASS")]
    res = runner.run_suite("quick", device="cpu", cases=cases, out_dir=tmp_path, timing=FAST, progress=False)
    assert res.precompile is None and res.records[0].status == "ok"


def test_prepass_fills_the_cache_the_next_compile_hits(tmp_path):
    """A real torch.compile case: the pre-pass compiles it; the run's own pre-pass, a second compile in a fresh
    process, hits the FX graph cache the first one filled and misses nothing (the timing process loads from it the
    same way), and the timed run is ok. (The run's pre-pass is that second compile: a separate ``precompile`` call
    before it compiled the case once more for the same two counts.)"""
    pytest.importorskip("torch")
    case = specs.find(BASE + "torch_compile")
    base = RunContext.start(suite="quick", device="cpu", out_dir=tmp_path, env=make_env(), git=(None, None))
    first = runner.precompile([case], base, jobs=1, timeout_s=600, seed=0)
    if first["failed"] and "BackendCompilerFailed" in (first["failed"][0]["reason"] or ""):
        pytest.skip(f"torch.compile cannot compile on this machine: {first['failed'][0]['reason']}")
    assert first["ok"] == 1 and first["cases"] == 1, first
    res = runner.run_suite("quick", device="cpu", cases=[case], out_dir=tmp_path, timing=FAST, progress=False,
                           precompile_jobs=1)
    pre = res.precompile
    assert pre["ok"] == 1 and pre["fxgraph_cache_hit"] == 1 and pre["fxgraph_cache_miss"] == 0, pre
    assert res.records[0].status == "ok", res.records[0].reason


def test_cli_precompile_jobs_option(tmp_path, capsys):
    from robocache.bench import cli

    with pytest.raises(SystemExit) as e:
        cli.main(["run", "--precompile-jobs", "-1"])
    assert e.value.code == 2 and "expected an integer >= 0" in capsys.readouterr().err
    code = cli.main(["run", "--device", "cpu", "--cases",
                     BASE + "precompile_providers:TORCH_COMPILE_RAISE_IN_PREPASS", "--out", str(tmp_path),
                     "--no-progress", "--time-limit", "0.3", "--noise-target", "0.05", "--precompile-jobs", "2"])
    out = capsys.readouterr().out
    assert code == 0 and "precompile: 0 of 1 torch.compile cases" in out and ": error" in out
