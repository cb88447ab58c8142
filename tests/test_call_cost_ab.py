"""scripts/call_cost_ab.py on the CPU: its usage errors, and another tree imported beside this one (the GPU timing
itself runs only on a GPU)."""
from __future__ import annotations

import importlib.util
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "scripts" / "call_cost_ab.py"


def _module():
    spec = importlib.util.spec_from_file_location("call_cost_ab", SCRIPT)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_a_base_without_a_tree_is_a_usage_error(tmp_path):
    r = subprocess.run([sys.executable, str(SCRIPT), "--base", str(tmp_path)], capture_output=True, text=True,
                       check=False)
    assert r.returncode == 2 and "has no robocache/__init__.py and kernels/" in r.stderr
    r = subprocess.run([sys.executable, str(SCRIPT), "--base", str(tmp_path), "--repeats", "0"], capture_output=True,
                       text=True, check=False)
    assert r.returncode == 2 and "--repeats" in r.stderr
    r = subprocess.run([sys.executable, str(SCRIPT), "--base", str(ROOT), "--arrays", "numpy"], capture_output=True,
                       text=True, check=False)
    assert r.returncode == 2 and "--arrays" in r.stderr


def test_the_base_tree_is_its_own_package(tmp_path, monkeypatch):
    """A copy of this tree loads as robocache_base: its modules, plan caches and kernels folder are its own."""
    import robocache
    from robocache import _cuda

    shutil.copytree(ROOT / "robocache", tmp_path / "robocache", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copytree(ROOT / "kernels", tmp_path / "kernels")
    monkeypatch.delitem(sys.modules, "robocache_base", raising=False)
    base = _module().load_base(tmp_path)
    try:
        assert base.__file__ == str(tmp_path / "robocache" / "__init__.py")
        assert sys.modules["robocache_base.voxelize"] is not sys.modules["robocache.voxelize"]
        assert sys.modules["robocache_base.voxelize"]._PLANS is not sys.modules["robocache.voxelize"]._PLANS
        assert sys.modules["robocache_base._cuda"].kernel_dir() == tmp_path / "kernels"
        assert _cuda.kernel_dir() == ROOT / "kernels" and callable(robocache.voxelize)
    finally:
        for name in [m for m in sys.modules if m == "robocache_base" or m.startswith("robocache_base.")]:
            del sys.modules[name]


def test_bad_ops_and_json_folders_are_usage_errors_that_leave_nothing(tmp_path):
    import tempfile

    before = set(Path(tempfile.gettempdir()).glob("rc_call_cost_ab_*"))
    for extra, want in ((["--ops", "resample,bogus"], "--ops: unknown bogus"),
                        (["--json", str(tmp_path / "no" / "x.json")], "--json: no folder")):
        r = subprocess.run([sys.executable, str(SCRIPT), "--base", str(ROOT), *extra], capture_output=True, text=True,
                           check=False)
        assert r.returncode == 2 and want in r.stderr, r.stderr
    assert set(Path(tempfile.gettempdir()).glob("rc_call_cost_ab_*")) == before
