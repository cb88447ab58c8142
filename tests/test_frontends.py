"""asv and pytest-benchmark front ends: same grid, same measurement path, records in our store."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from robocache.bench import frontend, schema, specs, store
from tests import typed

ROOT = Path(__file__).resolve().parent.parent


def _env(tmp_path, **extra):
    path = os.pathsep.join([str(ROOT)] + ([os.environ["PYTHONPATH"]] if os.environ.get("PYTHONPATH") else []))
    # asv drops PYTHONPATH for its benchmark processes unless ASV_PYTHONPATH says it (packages installed with
    # --target, as on the GPU machine, live there)
    return {**os.environ, "PYTHONPATH": path, "ASV_PYTHONPATH": path, "ROBOCACHE_RESULTS": str(tmp_path / "records"),
            "ROBOCACHE_DEVICE": "cpu", **extra}


_DISCOVER = "import sys; from asv_runner.discovery import _discover; _discover(sys.argv[1:])"


def _discover(tmp_path, name, **env):
    """asv's own discovery (what `asv run` writes to results/asv/benchmarks.json), in a fresh process as asv runs
    it, under the given environment; the list of benchmarks it found."""
    out = tmp_path / f"{name}.json"
    e = {k: v for k, v in _env(tmp_path).items() if k not in ("ROBOCACHE_SUITE", "ROBOCACHE_PROVIDERS",
                                                                "ROBOCACHE_DTYPES", "ROBOCACHE_WALL_PROVIDERS")}
    run = subprocess.run([sys.executable, "-c", _DISCOVER, str(ROOT / "benchmarks"), str(out)], cwd=tmp_path,
                         env={**e, **env}, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr[-3000:]
    return json.loads(out.read_text())


def test_asv_discovery_is_the_same_on_every_device_and_suite(tmp_path):
    """The bug: params were built from the discovering machine, so a CPU `asv run` rewrote benchmarks.json and
    dropped every GPU series. Discovery on a CPU-only machine and on a (simulated) GPU machine, and under each
    suite and filter, gives the same benchmarks: the grid over both devices, split parameters, and only
    lower-is-better figures."""
    cpu = _discover(tmp_path, "cpu", ROBOCACHE_DEVICE="cpu")
    # (the GPU machine is the multigpu suite's discovery below: a device that changed the list would change it
    # there too; one process of discovery, ~20 s on the loaded 2-core machine, less)
    assert _discover(tmp_path, "cpu-quick", ROBOCACHE_DEVICE="cpu", ROBOCACHE_SUITE="quick",
                     ROBOCACHE_PROVIDERS="numpy", ROBOCACHE_WALL_PROVIDERS="cupy") == cpu
    assert _discover(tmp_path, "gpu-multi", ROBOCACHE_DEVICE="gpu", ROBOCACHE_SUITE="multigpu") == cpu
    byname = {b["name"]: b for b in cpu}
    for op in ("resample", "fuse", "voxelize"):
        cls = op.capitalize()
        assert {n.split(".", 1)[1] for n in byname if n.startswith(f"bench_{op}.")} == {
            f"{cls}.time_device", f"{cls}Wall.time_wall", f"{cls}CallCost.time_host",
            f"{cls}CallCost.track_device_us_per_call", f"{cls}MultiGPU.time_step"}
        dev = byname[f"bench_{op}.{cls}.time_device"]
        assert dev["param_names"] == ["case", "dtype", "provider"] and dev["version"] == f"robocache-grid-{specs.GRID_VERSION}"
        tags, dtypes, provs = (sorted(x.strip("'") for x in p) for p in dev["params"])
        # both devices' cases are there, whichever machine discovered them
        keys = {c.key for d in ("gpu", "cpu") for s in ("quick", "nightly") for c in specs.cases(s, device=d, ops=[op])
                if not c.dispatch}
        assert {k.split("/")[1] for k in keys} == set(tags) and {k.split("/")[2] for k in keys} == set(dtypes)
        assert {k.split("/")[3] for k in keys} == set(provs) and {"cupy", "robocache", "numpy"} <= set(provs)
        assert dev["type"] == "time" and dev["unit"] == "seconds" and dev["number"] == 1 and dev["rounds"] == 1
    # nothing higher-is-better reaches asv: every benchmark is a time, or a device time per call (us)
    assert all(b["type"] == "time" or b["name"].endswith("track_device_us_per_call") for b in cpu)
    assert not any("gb_per_s" in b["name"] or "pct" in b["name"] or "efficiency" in b["name"] for b in cpu)
    # the base classes (benchmarks/common.py) are abstract: asv finds no benchmark there
    assert not any(b["name"].startswith("common.") for b in cpu)
    # the committed results/asv/benchmarks.json (what `asv publish` reads beside the committed results) is this
    # discovery: a grid change that is not rediscovered would leave asv's site on a stale grid. (The committed
    # file was written by asv on the H100 of 2026-11-24; regenerate it with `asv run` or this discovery.)
    committed = json.loads((ROOT / "results" / "asv" / "benchmarks.json").read_text())
    assert {k: v for k, v in committed.items() if k != "version"} == byname, \
        "results/asv/benchmarks.json is stale: rerun asv's discovery (docs/harness.md, asv section)"


def test_asv_skips_what_this_machine_suite_or_filter_does_not_run(monkeypatch):
    from benchmarks import common

    for v in ("ROBOCACHE_SUITE", "ROBOCACHE_PROVIDERS", "ROBOCACHE_DTYPES", "ROBOCACHE_WALL_PROVIDERS"):
        monkeypatch.delenv(v, raising=False)
    monkeypatch.setenv("ROBOCACHE_DEVICE", "cpu")
    frontend.device_here.cache_clear()
    monkeypatch.setattr(common, "measured", lambda key, timing=None: pytest.fail(f"{key} was measured"))
    try:
        class Resample(common.DeviceTime):
            op = "resample"

        class ResampleWall(common.WallTime):
            op = "resample"

        tag = "B256-S100-T50-D32"
        with pytest.raises(NotImplementedError, match="robocache needs a CUDA GPU"):
            Resample().setup(tag, "float32", "robocache")
        with pytest.raises(NotImplementedError, match="not a point of the grid"):
            Resample().setup(tag, "float16", "numpy")  # NumPy runs float32 only: a product of the params
        with pytest.raises(NotImplementedError, match="needs a CUDA GPU"):
            ResampleWall().setup(tag, "bfloat16", "cupy")
        with pytest.raises(NotImplementedError, match="wall-time benchmark covers robocache, torch_compile, numpy"):
            ResampleWall().setup(tag, "float32", "torch_eager")
        monkeypatch.setenv("ROBOCACHE_PROVIDERS", "torch_eager")
        with pytest.raises(NotImplementedError, match="filtered out"):
            Resample().setup(tag, "float32", "numpy")
        monkeypatch.setenv("ROBOCACHE_SUITE", "multigpu")
        with pytest.raises(NotImplementedError, match="runs in the quick and nightly suite"):
            Resample().setup(tag, "float32", "torch_eager")
        monkeypatch.setenv("ROBOCACHE_SUITE", "quick")
        monkeypatch.delenv("ROBOCACHE_PROVIDERS")
        nightly_only = next(c for c in specs.cases("nightly", device="cpu", ops=["resample"])
                            if "quick" not in c.suites)
        with pytest.raises(NotImplementedError, match="not in the quick suite on a cpu machine"):
            Resample().setup(nightly_only.tag, nightly_only.dtype, nightly_only.provider)
    finally:
        frontend.device_here.cache_clear()


def test_dispatch_cases_feed_only_host_time_benchmarks(monkeypatch):
    """On a GPU grid the call-cost cases go to <Op>CallCost (host time) and never to the device-time
    benchmarks; kernel versions and torch.compile max-autotune are ordinary device-time cases."""
    from benchmarks import common

    for v in ("ROBOCACHE_SUITE", "ROBOCACHE_PROVIDERS", "ROBOCACHE_DTYPES"):
        monkeypatch.delenv(v, raising=False)
    monkeypatch.setenv("ROBOCACHE_DEVICE", "gpu")
    frontend.device_here.cache_clear()
    try:
        dev, disp = frontend.device_cases("resample"), frontend.dispatch_cases("resample")
        assert disp and sorted(k.rsplit("/", 1)[1] for k in disp) == sorted(specs.DISPATCH_PROVIDERS)
        assert not set(dev) & set(disp) and set(dev) | set(disp) == set(frontend.suite_cases("resample"))
        assert set(disp) == common.grid_keys("resample", "dispatch")
        assert not set(disp) & common.grid_keys("resample", "device")
        assert not set(disp) & common.grid_keys("resample", "wall")
        provs = {k.rsplit("/", 1)[1] for k in common.grid_keys("resample", "device")}
        assert {"robocache@v1", "torch_compile@max-autotune"} <= provs and "bare_launch" not in provs
        assert frontend.gpu_only("robocache@v2") and frontend.gpu_only("bare_launch")
        assert not frontend.gpu_only("torch_compile@max-autotune")
        d_tag, d_dt, d_prov = disp[0].split("/")[1:]
        with pytest.raises(NotImplementedError, match="not a point of the grid"):
            class Resample(common.DeviceTime):
                op = "resample"
            Resample().setup(d_tag, d_dt, d_prov)
        # the real measured() returns a typed record (a dict here was the fake's, never the harness's)
        rec = typed.measured(disp[0], dispatch=schema.Dispatch(device_us=2.5, gpu_keeps_up=True))
        monkeypatch.setattr(common, "measured", lambda key, timing=None: (rec, [7.0, 7.5]))

        class ResampleCallCost(common.CallCost):
            op = "resample"

        cc = ResampleCallCost()
        cc.setup(d_tag, d_dt, d_prov)
        assert cc.track_device_us_per_call(d_tag, d_dt, d_prov) == 2.5 and cc.repeat[:2] == (2, 2)
    finally:
        frontend.device_here.cache_clear()


_ASV_SAMPLES = r"""
import json, sys
from asv_runner.discovery import get_benchmark_from_name
from benchmarks import common
from tests import typed
asked = []
def measured(key, timing=None):
    asked.append([key, common.msgspec.to_builtins(timing)])
    return typed.measured(key), [10.0, 11.0, 12.0, 13.0, 50.0]
common.measured = measured
extra = json.loads(sys.argv[2])
b = get_benchmark_from_name(sys.argv[1], "bench_resample.Resample.time_device", extra_params=extra)
b.set_param_idx(b.params[0].index("'B256-S100-T50-D32'") * len(b.params[1]) * len(b.params[2])
                + b.params[2].index("'numpy'"))
print("params", b._current_params, file=sys.stderr)
assert not b.do_setup()
res = b.run(*b._current_params)
print(json.dumps({"samples": res["samples"], "number": res["number"], "asked": asked}))
"""


@pytest.mark.parametrize("extra", [{}, {"number": 1, "repeat": 1, "warmup_time": 0, "rounds": 1}],
                         ids=["asv-run", "asv-run-quick"])
def test_asv_samples_are_the_harness_samples(tmp_path, extra):
    """Through asv_runner's own sampling loop (its TimeBenchmark, as `asv run` drives it): asv's samples are the
    harness's per-call samples, every one once, in order (so asv's median, quartiles and confidence interval are
    the harness's); with --quick (asv's extra attributes) asv takes one and the harness is asked for one."""
    env = {**_env(tmp_path), "ROBOCACHE_SUITE": "quick"}
    env.pop("ROBOCACHE_PROVIDERS", None)
    out = subprocess.run([sys.executable, "-c", _ASV_SAMPLES, str(ROOT / "benchmarks"), json.dumps(extra)],
                         cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    got = json.loads(out.stdout.strip().splitlines()[-1])
    want = [10e-6, 11e-6, 12e-6, 13e-6, 50e-6]
    ((key, timing),) = got["asked"][:1]
    assert key == "resample/B256-S100-T50-D32/float32/numpy" and got["number"] == 1
    if extra:
        assert got["samples"] == pytest.approx(want[:1])
        assert timing["max_samples"] == 1 and timing["time_limit_s"] <= 0.2
    else:
        assert got["samples"] == pytest.approx(want)
        assert "max_samples" not in timing  # the front ends' defaults: noise-based stopping


def test_asv_sampling_requests_bound_the_harness():
    from benchmarks.common import asv_requested, timing_options

    assert asv_requested() == {}  # outside asv: nothing asked
    default = timing_options({})
    assert default == timing_options({"repeat": 0}) and default.max_samples is None  # noise-based stopping
    quick = timing_options({"number": 1, "repeat": 1, "warmup_time": 0, "rounds": 1})  # asv run --quick
    assert (quick.min_samples, quick.max_samples) == (1, 1) and quick.time_limit_s <= 0.2 and quick.warmup_s == 0.01
    many = timing_options({"repeat": (5, 40, 60.0)})  # asv run -a repeat='(5, 40, 60.0)'
    assert (many.min_samples, many.max_samples) == (40, 40) and many.time_limit_s == default.time_limit_s


def test_replay_clock_never_repeats_a_sample():
    from benchmarks.common import ReplayClock

    clock = ReplayClock()
    clock.load("k", [1.0, 2.0])
    t0 = clock()
    clock.tick()
    clock.load("k", [9.0])  # asv reruns setup between samples: the same case keeps its place
    clock.tick()
    assert clock() - t0 == pytest.approx(3e-6)
    with pytest.raises(RuntimeError, match="more than the harness's 2 samples"):
        clock.tick()
    with pytest.raises(RuntimeError, match="no samples"):
        clock.load("other", [])


def test_a_reused_pid_is_another_session(tmp_path):
    """A front end's session is keyed by its process's pid and start time: a later process that gets an earlier
    one's pid does not take that session's run id and measured records (CI, 2026-11-28: two asv invocations
    shared one session, the second rewrote the first's records file)."""
    def fake(start: int) -> Path:
        root = tmp_path / str(start)
        (root / "4242").mkdir(parents=True)
        # the name may hold spaces and parentheses: the fields are counted after its last ")"
        rest = " ".join(["S"] + [str(i) for i in range(4, 22)] + [str(start)] + ["0"] * 20)
        (root / "4242" / "stat").write_text(f"4242 (python (x) y) {rest}\n")
        return root

    a, b = frontend.process_key(4242, fake(1000)), frontend.process_key(4242, fake(2000))
    assert a == "4242-1000" and b == "4242-2000"
    assert frontend.process_key(4242, tmp_path / "none") == "4242"  # no /proc: the pid alone
    me = frontend.process_key(os.getpid())
    if Path("/proc/self/stat").exists():
        assert me.startswith(f"{os.getpid()}-") and me == frontend.process_key(os.getpid())  # stable in a process


def test_asv_run_and_compare_end_to_end(tmp_path):
    """asv run --python=same on two commit hashes (CPU numpy cases, quick suite), then asv compare prints each
    case with its spread (``±``) from the harness's samples, and the machine's GPU facts are in machine.json."""
    conf = json.loads("\n".join(ln for ln in (ROOT / "asv.conf.json").read_text().splitlines()
                                if not ln.strip().startswith("//")))
    conf.update(results_dir=str(tmp_path / "asv"), html_dir=str(tmp_path / "html"), repo=str(ROOT))
    conf["benchmark_dir"] = str(ROOT / "benchmarks")
    cfg = tmp_path / "asv.conf.json"
    cfg.write_text(json.dumps(conf))
    # 0.2 s of samples a case (the front end's default is 1 s): compare's spread needs samples, not many
    env = _env(tmp_path, ROBOCACHE_SUITE="quick", ROBOCACHE_PROVIDERS="numpy", HOME=str(tmp_path),
               ROBOCACHE_TIME_LIMIT="0.2")
    asv = [sys.executable, "-m", "asv"]
    mach = subprocess.run([sys.executable, "-m", "benchmarks.machine", "--machine", "ci-test"], env=env, cwd=ROOT,
                          capture_output=True, text=True, timeout=300)
    assert mach.returncode == 0, mach.stderr[-2000:]
    # asv resolves --set-commit-hash in the repo: two real commits (the newest two)
    hashes = subprocess.run(["git", "rev-list", "--max-count=2", "HEAD"], cwd=ROOT, capture_output=True,
                            text=True).stdout.split()
    if len(hashes) < 2:
        pytest.skip("needs a git checkout with two commits (asv resolves commit hashes)")
    hashes = hashes[::-1]
    # only the float32 NumPy combinations (asv matches --bench against "name(param, ...)"): asv runs every selected
    # parameter combination in a process of its own, and the whole grid is ~1950, all but two skipped by setup
    # (n/a); that was 75 s of this test (68 CPU-s) on this 2-core machine at load 2-3, 22 s (16 CPU-s) with this filter. The
    # other float32 NumPy shapes are still selected and skipped (not in the quick suite); skipping the rest of the
    # grid is test_asv_skips_what_this_machine_suite_or_filter_does_not_run's
    bench = r"Resample\.time_device\(.*, 'float32', 'numpy'\)"
    for h in hashes:
        run = subprocess.run(asv + ["run", "--config", str(cfg), "--python=same", "--machine", "ci-test",
                                    "--set-commit-hash", h, "--bench", bench], env=env,
                             capture_output=True, text=True, timeout=600)
        assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-2000:]
    machine = json.loads((tmp_path / "asv" / "ci-test" / "machine.json").read_text())
    assert machine["gpu"] == "no GPU" and {"gpu_driver", "cuda"} <= set(machine)
    cmp = subprocess.run(asv + ["compare", "--config", str(cfg), "--machine", "ci-test", *hashes], env=env,
                         capture_output=True, text=True, timeout=120)
    assert cmp.returncode == 0, cmp.stderr
    want = "Resample.time_device('B256-S100-T50-D32', 'float32', 'numpy')"
    rows = [ln for ln in cmp.stdout.splitlines() if want in ln]
    assert len(rows) == 1 and rows[0].count("±") == 2, cmp.stdout[-3000:]
    # the same measurements landed as our records, tagged asv, one file per asv invocation
    loaded = store.load(tmp_path / "records")
    assert loaded.bad == []
    recs = [r for r in loaded.records if r.frontend == "asv"]
    assert {r.case.provider for r in recs} == {"numpy"} and len(recs) == 4  # 2 cases x 2 runs
    assert len({r.run_id for r in recs}) == 2


def test_pytest_benchmark_saves_device_samples(tmp_path):
    """pytest --benchmark-save stores the harness's samples as pytest-benchmark stats; record lands too."""
    env = _env(tmp_path, ROBOCACHE_SUITE="quick", ROBOCACHE_PROVIDERS="numpy")
    storage = tmp_path / "pytest"
    run = subprocess.run([sys.executable, "-m", "pytest", str(ROOT / "benchmarks"), "-q", "-k", "B32",
                          "--benchmark-save=smoke", f"--benchmark-storage=file://{storage}", "-p",
                          "no:cacheprovider"], env=env, capture_output=True, text=True, timeout=600, cwd=ROOT)
    assert run.returncode == 0, run.stdout[-3000:]
    saved = list(storage.rglob("*.json"))
    assert [p.name for p in saved] == ["0001_cpu_smoke.json"]  # the GPU (here: none) in the saved run's name
    data = json.loads(saved[0].read_text())
    (bench,) = data["benchmarks"]
    rec = [r for r in store.load(tmp_path / "records").records if r.frontend == "pytest-benchmark"]
    assert len(rec) == 1
    # pytest-benchmark's stats are the harness's device/host-timer samples, not its own host timing
    assert bench["stats"]["rounds"] == rec[0].method.samples
    assert abs(bench["stats"]["median"] * 1e6 - rec[0].metrics.time_us.p50) < 1e-6 * 1e6 + 1e-3
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
    monkeypatch.setattr(bconf, "_ENV", None)
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


def test_pytest_benchmark_saved_names_carry_the_gpu():
    from benchmarks import conftest as bconf

    h200 = {"device": "gpu", "arch": "H200", "gpu_count": 1}
    assert bconf.gpu_slug(h200) == "h200" and bconf.gpu_slug({**h200, "gpu_count": 4}) == "h200-x4"
    assert bconf.gpu_slug({"device": "gpu", "arch": None, "gpu_count": 1}) == "gpu"
    assert bconf.gpu_slug({"device": "cpu", "arch": "H200"}) == "cpu"
    assert bconf.save_name("nightly", "h100") == "h100_nightly"
    assert bconf.save_name("h200-quick", "h200") == "h200-quick"  # already starts with it
    assert bconf.save_name("h200-x2-multigpu", "h200-x2") == "h200-x2-multigpu"
    assert bconf.save_name("nvidia-h200-quick", "h200") == "h200_nvidia-h200-quick"  # the GPU first, always
    # what pytest-benchmark compare shows of a saved run's file name: the GPU is in it
    from pytest_benchmark.utils import name_formatter_normal

    label = name_formatter_normal({"name": "t", "source": f"Linux-CPython-3.12-64bit/0003_{bconf.save_name('quick', 'h100')}"})
    assert "0003_h100_qu" in label, label
    auto = bconf.save_name(None, "cpu")  # --benchmark-autosave: the GPU, then pytest-benchmark's tag (commit, time)
    assert auto.startswith("cpu_") and len(auto) > len("cpu_")


def test_pytest_benchmark_tool_finds_the_saved_runs_without_options():
    """`pytest-benchmark list` from the repository root lists results/pytest (.benchmarks links there)."""
    assert (ROOT / ".benchmarks").is_symlink() and (ROOT / ".benchmarks").resolve() == (ROOT / "results" / "pytest")
    out = subprocess.run([sys.executable, "-c", "from pytest_benchmark.cli import main; main()", "list"], cwd=ROOT,
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    listed = {Path(line).name for line in out.stdout.split()}
    saved = {p.name for p in (ROOT / "results" / "pytest").rglob("*.json")}
    assert saved and listed == saved


@pytest.mark.skipif(not hasattr(os, "getuid"), reason="POSIX permissions")
def test_front_end_sessions_live_in_a_private_folder(tmp_path):
    """asv's and pytest-benchmark's session state (run id, environment, records) sits in a 0700 folder of this
    user, never a fixed /tmp path that another user could create first; a planted or open one is refused."""
    from robocache.bench import frontend

    d = frontend.private_dir(tmp_path)
    assert d.name == f"robocache-frontend-{os.getuid()}" and (d.stat().st_mode & 0o777) == 0o700
    assert frontend.private_dir(tmp_path) == d  # the same folder again
    d.chmod(0o777)  # someone made it open (or created it that way first)
    with pytest.raises(RuntimeError, match="not a private folder"):
        frontend.private_dir(tmp_path)
    d.chmod(0o700)
    other = tmp_path / "elsewhere"
    other.mkdir()
    d.rmdir()
    d.symlink_to(other, target_is_directory=True)  # a link planted under the name
    with pytest.raises(RuntimeError, match="not a private folder"):
        frontend.private_dir(tmp_path)
