"""asv and pytest-benchmark front ends: same grid, same measurement path, records in our store."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from robocache.bench import frontend, specs, store

ROOT = Path(__file__).resolve().parent.parent


def _env(tmp_path, **extra):
    path = os.pathsep.join([str(ROOT)] + ([os.environ["PYTHONPATH"]] if os.environ.get("PYTHONPATH") else []))
    # asv drops PYTHONPATH for its benchmark processes unless ASV_PYTHONPATH says it (packages installed with
    # --target, as on the GPU machine, live there)
    return {**os.environ, "PYTHONPATH": path, "ASV_PYTHONPATH": path, "ROBOCACHE_RESULTS": str(tmp_path / "records"),
            "ROBOCACHE_DEVICE": "cpu", **extra}


_ASV_CLASSES = r"""
import json
import benchmarks.bench_fuse as bf, benchmarks.bench_resample as br, benchmarks.bench_voxelize as bv
out = {}
for mod, op in ((br, "Resample"), (bf, "Fuse"), (bv, "Voxelize")):
    cc = getattr(mod, op + "CallCost", None)
    out[op] = {"params": getattr(mod, op).params, "ceiling": getattr(mod, op + "Ceiling").params,
               "wall": getattr(mod, op + "Wall").params, "version": getattr(mod, op).version,
               "unit": getattr(mod, op).track_device_us.unit, "callcost": cc.params if cc else None}
print(json.dumps(out))
"""


def test_asv_params_come_from_the_grid(tmp_path):
    # Imported in a fresh process, as asv does: on a GPU machine the benchmark modules preload torch and
    # refuse a process where CUDA is already initialized (as this test process is after the GPU tests).
    if any(os.environ.get(v) for v in ("ROBOCACHE_SUITE", "ROBOCACHE_PROVIDERS", "ROBOCACHE_WALL_PROVIDERS")):
        pytest.skip("suite/provider filters set in the environment")
    dev = frontend.device_here()
    env = {k: v for k, v in _env(tmp_path).items() if k != "ROBOCACHE_DEVICE"}
    out = subprocess.run([sys.executable, "-c", _ASV_CLASSES], cwd=ROOT, env=env, capture_output=True, text=True,
                         timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    got = json.loads(out.stdout.strip().splitlines()[-1])
    for op, classes in got.items():
        name = op.lower()
        every = specs.cases("nightly", device=dev, ops=[name])
        nightly = [c.key for c in every if not c.dispatch]  # call-cost cases never feed device-time benchmarks
        quick = [c.key for c in specs.cases("quick", device=dev, ops=[name]) if not c.dispatch]
        assert classes["params"] == [nightly]
        assert classes["ceiling"] == [nightly]
        wall = [k for k in quick if k.rsplit("/", 1)[1] in frontend.WALL_PROVIDERS]
        assert wall and "torch_compile" in {k.rsplit("/", 1)[1] for k in wall}
        assert classes["wall"] == [wall]
        dispatch = [c.key for c in every if c.dispatch]  # GPU only: no CallCost class on a CPU machine
        assert classes["callcost"] == ([dispatch] if dispatch else None)
        assert classes["version"] == f"robocache-grid-{specs.GRID_VERSION}"
        assert classes["unit"] == "us"


def test_gpu_case_without_gpu_is_asv_skip(monkeypatch, tmp_path):
    monkeypatch.setenv("ROBOCACHE_DEVICE", "cpu")
    monkeypatch.setenv("ROBOCACHE_RESULTS", str(tmp_path))
    frontend.device_here.cache_clear()
    try:
        bench = frontend.DeviceBenchmark()
        with pytest.raises(NotImplementedError, match="needs a CUDA GPU"):
            bench.setup("resample/B256-S100-T50-D32/float32/robocache")
        with pytest.raises(NotImplementedError):
            frontend.WallBenchmark().setup("resample/B256-S100-T50-D32/bfloat16/cupy")
    finally:
        frontend.device_here.cache_clear()


def test_dispatch_cases_feed_only_host_time_benchmarks(monkeypatch):
    """On a GPU grid the call-cost cases go to <Op>CallCost (host time) and never to the device-time or
    %-of-ceiling benchmarks; kernel versions and torch.compile max-autotune are ordinary device-time cases."""
    for v in ("ROBOCACHE_SUITE", "ROBOCACHE_PROVIDERS", "ROBOCACHE_DTYPES"):
        monkeypatch.delenv(v, raising=False)
    monkeypatch.setenv("ROBOCACHE_DEVICE", "gpu")
    frontend.device_here.cache_clear()
    try:
        dev, disp = frontend.device_cases("resample"), frontend.dispatch_cases("resample")
        assert disp and sorted(k.rsplit("/", 1)[1] for k in disp) == sorted(specs.DISPATCH_PROVIDERS)
        assert not set(dev) & set(disp) and set(dev) | set(disp) == set(frontend.suite_cases("resample"))
        provs = {k.rsplit("/", 1)[1] for k in dev}
        assert {"robocache@v1", "torch_compile@max-autotune"} <= provs and "bare_launch" not in provs
        assert not any(specs.find(k).dispatch for k in frontend.wall_cases("resample"))
        assert frontend.gpu_only("robocache@v2") and frontend.gpu_only("bare_launch")
        assert not frontend.gpu_only("torch_compile@max-autotune")
        # a dispatch record never reaches a device-time figure, whichever class is asked
        rec = {"status": "ok", "method": {"timer": "host_loop"}, "dispatch": {"device_us": 2.5},
               "metrics": {"time_us": {"p50": 7.0}, "gb_per_s": 0.1, "pct_of_ceiling": None}}
        monkeypatch.setattr(frontend, "asv_record", lambda key: rec)
        for cls in (frontend.DeviceBenchmark, frontend.CeilingBenchmark):
            with pytest.raises(NotImplementedError, match="call-cost"):
                cls().setup(disp[0])
        cc = frontend.CallCostBenchmark()
        cc.setup(disp[0])
        assert cc.track_host_us(disp[0]) == 7.0 and cc.track_device_us_per_call(disp[0]) == 2.5
        with pytest.raises(NotImplementedError, match="not a call-cost"):
            cc.setup(dev[0])
    finally:
        frontend.device_here.cache_clear()


@pytest.mark.slow
def test_asv_run_and_compare_end_to_end(tmp_path):
    """asv run --python=same on two commit hashes (CPU numpy cases), then asv compare prints a table."""
    conf = json.loads("\n".join(l for l in (ROOT / "asv.conf.json").read_text().splitlines()
                                if not l.strip().startswith("//")))
    conf.update(results_dir=str(tmp_path / "asv"), html_dir=str(tmp_path / "html"), repo=str(ROOT))
    conf["benchmark_dir"] = str(ROOT / "benchmarks")
    cfg = tmp_path / "asv.conf.json"
    cfg.write_text(json.dumps(conf))
    env = _env(tmp_path, ROBOCACHE_SUITE="quick", ROBOCACHE_PROVIDERS="numpy")
    asv = [sys.executable, "-m", "asv"]
    subprocess.run(asv + ["machine", "--config", str(cfg), "--machine", "ci-test", "--yes"], env=env,
                   capture_output=True, check=True, timeout=120)
    # asv resolves --set-commit-hash in the repo: two real commits (the newest two)
    hashes = subprocess.run(["git", "rev-list", "--max-count=2", "HEAD"], cwd=ROOT, capture_output=True,
                            text=True).stdout.split()
    if len(hashes) < 2:
        pytest.skip("needs a git checkout with two commits (asv resolves commit hashes)")
    hashes = hashes[::-1]
    for h in hashes:
        run = subprocess.run(asv + ["run", "--config", str(cfg), "--python=same", "--machine", "ci-test",
                                    "--set-commit-hash", h, "--bench", r"Resample\."], env=env,
                             capture_output=True, text=True, timeout=600)
        assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-2000:]
    cmp = subprocess.run(asv + ["compare", "--config", str(cfg), "--machine", "ci-test", *hashes], env=env,
                         capture_output=True, text=True, timeout=120)
    assert cmp.returncode == 0, cmp.stderr
    assert "track_device_us('resample/B256-S100-T50-D32/float32/numpy')" in cmp.stdout
    assert "Ratio" in cmp.stdout
    # the same measurements landed as our records, tagged asv, one file per asv invocation
    loaded = store.load(tmp_path / "records")
    assert loaded.bad == []
    recs = [r for r in loaded.records if r["frontend"] == "asv"]
    assert {r["case"]["provider"] for r in recs} == {"numpy"} and len(recs) == 4  # 2 cases x 2 runs
    assert len({r["run_id"] for r in recs}) == 2


def test_pytest_benchmark_saves_device_samples(tmp_path):
    """pytest --benchmark-save stores the harness's samples as pytest-benchmark stats; record lands too."""
    env = _env(tmp_path, ROBOCACHE_SUITE="quick", ROBOCACHE_PROVIDERS="numpy")
    storage = tmp_path / "pytest"
    run = subprocess.run([sys.executable, "-m", "pytest", str(ROOT / "benchmarks"), "-q", "-k", "B32",
                          "--benchmark-save=smoke", f"--benchmark-storage=file://{storage}", "-p",
                          "no:cacheprovider"], env=env, capture_output=True, text=True, timeout=600, cwd=ROOT)
    assert run.returncode == 0, run.stdout[-3000:]
    saved = list(storage.rglob("*smoke.json"))
    assert len(saved) == 1
    data = json.loads(saved[0].read_text())
    (bench,) = data["benchmarks"]
    rec = [r for r in store.load(tmp_path / "records").records if r["frontend"] == "pytest-benchmark"]
    assert len(rec) == 1
    # pytest-benchmark's stats are the harness's device/host-timer samples, not its own host timing
    assert bench["stats"]["rounds"] == rec[0]["method"]["samples"]
    assert abs(bench["stats"]["median"] * 1e6 - rec[0]["metrics"]["time_us"]["p50"]) < 1e-6 * 1e6 + 1e-3
    assert bench["extra_info"]["timer"] == "host" and bench["extra_info"]["provider"] == "numpy"
    # machine_info carries the GPU facts (benchmarks/conftest.py's pytest_benchmark_update_machine_info hook):
    # on this CPU run (ROBOCACHE_DEVICE=cpu), "no GPU"
    gpu = data["machine_info"]["gpu"]
    assert gpu["device"] == "cpu" and gpu["name"] == "no GPU" and gpu["count"] == 0
    assert {"driver", "cuda", "sm_mhz", "sm_mhz_max", "mem_mhz", "machine"} <= set(gpu)


def test_pytest_benchmark_machine_info_names_the_gpu(monkeypatch):
    """On a GPU the hook fills name, count, driver, CUDA and clocks from the harness's capture (simulated here:
    the environment capture and NVML's clock reading are replaced by fixed answers)."""
    from benchmarks import conftest as bconf
    from robocache.bench import context, env as envmod

    env = {"machine": "nvidia-h200-x4", "gpu_name": "NVIDIA H200", "gpu_count": 4, "arch": "H200",
           "compute_capability": "9.0", "gpu_memory_gb": 139.8, "sm_count": 132, "driver": "580.159.04",
           "cuda": "13.0", "nvml": "ok"}
    asked = []
    monkeypatch.setattr(context, "capture_env_in_child", lambda device, machine: asked.append(device) or env)
    monkeypatch.setattr(frontend, "device_here", lambda: "gpu")

    class Sampler:
        error = None

        def __init__(self, index):
            assert index == 0

        def start(self):
            pass

        def stop(self):
            pass

        def stats(self):
            return {"sm_mhz_median": 1980.0, "sm_mhz_max_supported": 1980.0, "mem_mhz_median": 3201.0}

    monkeypatch.setattr(envmod, "ClockSampler", Sampler)
    info = {"node": "x"}
    bconf.pytest_benchmark_update_machine_info(None, info)
    assert asked == ["gpu"] and info["node"] == "x"
    assert info["gpu"] == {"device": "gpu", "name": "NVIDIA H200", "count": 4, "machine": "nvidia-h200-x4",
                           "arch": "H200", "compute_capability": "9.0", "gpu_memory_gb": 139.8, "sm_count": 132,
                           "driver": "580.159.04", "cuda": "13.0", "nvml": "ok", "sm_mhz": 1980.0,
                           "sm_mhz_max": 1980.0, "mem_mhz": 3201.0}


def test_pytest_benchmark_tool_finds_the_saved_runs_without_options():
    """`pytest-benchmark list` from the repository root lists results/pytest (.benchmarks links there)."""
    assert (ROOT / ".benchmarks").is_symlink() and (ROOT / ".benchmarks").resolve() == (ROOT / "results" / "pytest")
    out = subprocess.run([sys.executable, "-c", "from pytest_benchmark.cli import main; main()", "list"], cwd=ROOT,
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    listed = {Path(line).name for line in out.stdout.split()}
    saved = {p.name for p in (ROOT / "results" / "pytest").rglob("*.json")}
    assert saved and listed == saved
