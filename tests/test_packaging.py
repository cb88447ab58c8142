"""Packaging: the wheel's only core dependency is NumPy, and with NumPy alone every op's CPU path runs.

The wheel is built from this checkout (hatchling, the build backend pyproject.toml names, without build isolation:
offline), installed with ``--no-deps`` into a temporary folder, and run by ``python -I -S`` (no site-packages, no
PYTHONPATH) with only that folder and a folder holding NumPy on ``sys.path``: a core dependency missing from
pyproject.toml, or an import of the harness's libraries on the CPU path, fails here. When the wheel cannot be
built here (no hatchling or ``build`` in this environment and no network for an isolated build) the test is
skipped with the reason.

Also: pyproject.toml's extras are all pinned in requirements/dev.lock, within their ranges (a dependency added
without `make lock` fails here).
"""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parent.parent

# The same inputs and calls in the isolated interpreter and here (the checkout's robocache): each op's CPU path on
# NumPy arrays, the results saved as .npy (NumPy only).
_OPS = r'''
import numpy as np
import robocache

def run_ops():
    rng = np.random.default_rng(17)
    B, S, T, D = 3, 40, 25, 4
    src = np.sort(rng.uniform(0.0, 1.0, (B, S)), axis=1)
    tgt = np.sort(rng.uniform(-0.1, 1.1, (B, T)), axis=1)
    vals = rng.standard_normal((B, S, D)).astype(np.float32)
    out = {"resample": robocache.resample(vals, src, tgt)}
    src2 = np.sort(rng.uniform(0.0, 1.0, (B, 17)), axis=1)
    vals2 = rng.standard_normal((B, 17, 2)).astype(np.float32)
    out["fuse"] = robocache.fuse([(vals, src), (vals2, src2)], tgt)
    pts = rng.uniform(-2.5, 2.5, (2, 500, 3)).astype(np.float32)
    feats = rng.standard_normal((2, 500, 3)).astype(np.float32)
    bounds = ((-2.0, -2.0, -2.0), (2.0, 2.0, 2.0))
    for mode in ("count", "occupancy", "mean"):
        out["voxelize-" + mode] = robocache.voxelize(pts, feats if mode == "mean" else None, (8, 8, 8), bounds, mode)
    return out
'''

_ISOLATED = _OPS + r'''
import json, sys
results = run_ops()
for name, arr in results.items():
    assert isinstance(arr, np.ndarray), (name, type(arr))
    np.save(f"{sys.argv[1]}/{name}.npy", arr)
blocked = {}
for mod in ("scipy", "torch", "msgspec", "cupy", "pandas", "tqdm"):
    try:
        __import__(mod)
        blocked[mod] = "importable"
    except ImportError as e:
        blocked[mod] = "ImportError"
import sysconfig
std = tuple(sysconfig.get_paths()[k] for k in ("stdlib", "platstdlib"))
# every module loaded from a file came from the standard library, the wheel or NumPy's folder
files = sorted({f for m in list(sys.modules.values()) if (f := getattr(m, "__file__", None))})
elsewhere = [f for f in files if not f.startswith(std + tuple(sys.path[:2]))]
print(json.dumps({"robocache": robocache.__file__, "numpy": np.__file__, "blocked": blocked,
                  "elsewhere": elsewhere, "version": robocache.__version__}))
'''


def _build_wheel(out: Path) -> Path:
    """The wheel of this checkout, built offline (no build isolation) when hatchling is here."""
    try:
        import build  # noqa: F401
        import hatchling  # noqa: F401
    except ImportError as e:
        pytest.skip(f"*** cannot build the wheel offline: {e} (install the [dev] extra: `make setup`)")
    run = subprocess.run([sys.executable, "-m", "build", "--wheel", "--no-isolation", "--outdir", str(out), str(ROOT)],
                         capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-2000:]
    (wheel,) = out.glob("robocache-*.whl")
    return wheel


@pytest.fixture(scope="module")
def wheel(tmp_path_factory):
    return _build_wheel(tmp_path_factory.mktemp("wheel"))


def test_wheel_requires_numpy_only_and_ships_the_kernels(wheel):
    with zipfile.ZipFile(wheel) as z:
        names = z.namelist()
        meta = z.read(next(n for n in names if n.endswith(".dist-info/METADATA"))).decode()
    reqs = [line.split(":", 1)[1].strip() for line in meta.splitlines() if line.startswith("Requires-Dist:")]
    core = [r for r in reqs if "extra ==" not in r]
    assert [re.split(r"[<>=!~ ;\[]", r, maxsplit=1)[0] for r in core] == ["numpy"], core
    extras = {line.split(":", 1)[1].strip() for line in meta.splitlines() if line.startswith("Provides-Extra:")}
    assert {"bench", "dashboard", "cu12", "cu13", "dev"} <= extras
    # the CUDA sources the ops compile on first use travel in the wheel
    cu = {Path(n).name for n in names if n.startswith("robocache/_kernels/") and n.endswith(".cu")}
    assert cu == {p.name for p in (ROOT / "kernels").glob("*.cu")} and cu
    # the launch tables tuned on each GPU (robocache/_tune.py reads them beside the package)
    tables = {Path(n).name for n in names if n.startswith("robocache/tuned/") and n.endswith(".json")}
    assert tables == {p.name for p in (ROOT / "robocache" / "tuned").glob("*.json")}


def test_each_op_runs_on_the_cpu_with_numpy_alone(wheel, tmp_path):
    target, numpy_only, outs = tmp_path / "site", tmp_path / "numpy-only", tmp_path / "out"
    numpy_only.mkdir()
    outs.mkdir()
    inst = subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-index", "--no-compile",
                           "--target", str(target), str(wheel)], capture_output=True, text=True, timeout=120)
    assert inst.returncode == 0, inst.stderr[-2000:]
    # a folder with NumPy and nothing else (NumPy's own bundled libraries beside it, as in site-packages)
    site = Path(np.__file__).resolve().parent.parent
    for name in ("numpy", "numpy.libs"):
        if (site / name).exists():
            (numpy_only / name).symlink_to(site / name)
    code = f"import sys; sys.path[:0] = [{str(target)!r}, {str(numpy_only)!r}]\n" + _ISOLATED
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "ROBOCACHE_"))}
    run = subprocess.run([sys.executable, "-I", "-S", "-c", code, str(outs)], capture_output=True, text=True,
                         timeout=120, cwd=tmp_path, env=env)
    assert run.returncode == 0, run.stderr[-3000:]
    got = json.loads(run.stdout.strip().splitlines()[-1])
    assert got["robocache"].startswith(str(target)) and got["numpy"].startswith(str(numpy_only))
    # nothing else was importable there, so the ops above ran with NumPy alone; and they imported nothing else
    assert set(got["blocked"].values()) == {"ImportError"}, got["blocked"]
    assert got["elsewhere"] == [], got["elsewhere"]
    # the installed wheel computes what this checkout computes
    ns: dict = {}
    exec(compile(_OPS, "ops", "exec"), ns)
    want = ns["run_ops"]()
    assert {p.stem for p in outs.glob("*.npy")} == set(want)
    for name, arr in want.items():
        saved = np.load(outs / f"{name}.npy")
        assert saved.dtype == arr.dtype and saved.shape == arr.shape, name
        assert np.array_equal(saved, arr, equal_nan=True), name


def _name(req: str) -> str:
    return re.split(r"[<>=!~ ;\[]", req, maxsplit=1)[0].lower().replace("_", "-").replace(".", "-")


def _pins(name: str) -> dict:
    from packaging.version import Version

    pins = {}
    for line in (ROOT / "requirements" / name).read_text().splitlines():
        m = re.match(r"^([A-Za-z0-9_.\-]+)==([^\s;]+)", line)
        if m:
            pins[_name(m.group(1))] = Version(m.group(2))
    return pins


@pytest.mark.parametrize("lock_name, top", [("dev.lock", ["dev"]), ("cu13.lock", ["cu13", "bench"])])
def test_every_dependency_is_pinned_in_the_lock_within_its_range(lock_name, top):
    from packaging.requirements import Requirement

    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    lock = _pins(lock_name)
    extras = project["optional-dependencies"]
    seen, todo = set(), list(top)  # with the extras they name (robocache[...])
    reqs = list(project["dependencies"])
    while todo:
        extra = todo.pop()
        if extra in seen:
            continue
        seen.add(extra)
        for r in extras[extra]:
            req = Requirement(r)
            if _name(req.name) == "robocache":
                todo += sorted(req.extras)
            else:
                reqs.append(r)
    assert seen == {"dev.lock": {"dev", "bench", "dashboard"}, "cu13.lock": {"cu13", "bench"}}[lock_name]
    bad = []
    for r in reqs:
        req = Requirement(r)
        pinned = lock.get(_name(req.name))
        if pinned is None or not req.specifier.contains(pinned, prereleases=True):
            bad.append(f"{r}: lock has {pinned}")
    assert not bad, f"requirements/{lock_name} is out of date with pyproject.toml (run `make lock`):\n" + "\n".join(bad)


def test_the_gpu_lock_runs_the_versions_ci_runs():
    """requirements/cu13.lock (a GPU machine) pins every package it shares with dev.lock (CI) at the same
    version; torch is the same release, the CUDA 13 build instead of the CPU one."""
    dev, gpu = _pins("dev.lock"), _pins("cu13.lock")
    shared = set(dev) & set(gpu)
    assert {"numpy", "torch", "scipy", "msgspec"} <= shared
    differ = {n: (str(dev[n]), str(gpu[n])) for n in shared if dev[n].public != gpu[n].public}
    assert not differ, differ
    assert dev["torch"].local == "cpu" and gpu["torch"].local is None


def test_version_flag():
    run = subprocess.run([sys.executable, "-m", "robocache.bench.cli", "--version"], capture_output=True, text=True,
                         timeout=60, cwd=ROOT)
    assert run.returncode == 0, run.stderr
    assert re.match(r"robocache \d+\.\d+\.\d+", run.stdout), run.stdout
