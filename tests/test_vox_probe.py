"""scripts/vox_probe.py without a GPU: its variant grammar and its usage errors (exit 2, one line, nothing run)."""
import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "scripts" / "vox_probe.py"
spec = importlib.util.spec_from_file_location("vox_probe", SCRIPT)
probe = importlib.util.module_from_spec(spec)
spec.loader.exec_module(probe)


def test_variants_parse():
    got = probe.parse_variants("lib=; nohash=vox_hash=False ;x=-DA=1 -DB=2 vox_hash=True;flat=vox_flat=True;"
                               "hf=vox_flat=hash;list=vox_list=True;rule=vox_list=None vox_flat=True;dense=vox_list=False")
    d = {"vox_hash": None, "vox_flat": None, "vox_list": False}  # the library's defaults: the list path off
    from robocache import _launch

    assert d == _launch.TUNING
    assert got == [("lib", (), d), ("nohash", (), {**d, "vox_hash": False}),
                   ("x", ("-DA=1", "-DB=2"), {**d, "vox_hash": True}), ("flat", (), {**d, "vox_flat": True}),
                   ("hf", (), {**d, "vox_flat": "hash"}), ("list", (), {**d, "vox_list": True}),
                   ("rule", (), {**d, "vox_list": None, "vox_flat": True}), ("dense", (), {**d, "vox_list": False})]


@pytest.mark.parametrize("text, why", [("", "no variants"), ("lib", "expected name=TOKENS"),
                                       ("=-DA=1", "expected name=TOKENS"), ("a=;a=-DX=1", "must differ"),
                                       ("a=vox_hash=maybe", "neither"), ("a=--fast", "neither"),
                                       ("a=vox_other=True", "neither"),
                                       ("a=vox_hash=hash", "neither"), ("a=vox_list=hash", "neither"),
                                       ("a=vox_list=1", "neither")])
def test_bad_variants(text, why):
    with pytest.raises(ValueError, match=why):
        probe.parse_variants(text)


def test_peer_times(tmp_path):
    f = tmp_path / "r.json"
    f.write_text(json.dumps({"records": [
        {"case": {"id": "voxelize/a", "dtype": "float16", "provider": "torch_compile"},
         "metrics": {"time_us": {"p50": 12.5}}},
        {"case": {"id": "voxelize/a", "dtype": "float16", "provider": "robocache"}, "metrics": {"time_us": {"p50": 9.0}}},
        {"case": {"id": "voxelize/b", "dtype": "float32", "provider": "torch_compile"}, "metrics": None}]}))
    assert probe.peer_times([str(f)]) == {("voxelize/a", "float16"): 12.5}


@pytest.mark.parametrize("args", [["--variants", "a=;a="], ["--seeds", "x"], ["--peers", "/nonexistent.json"]])
def test_usage_errors_exit_2(args, tmp_path):
    out = tmp_path / "rows.json"
    r = subprocess.run([sys.executable, str(SCRIPT), *args, "--json", str(out)], capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 2, r.stderr
    assert r.stderr.startswith("vox_probe: ") and len(r.stderr.strip().splitlines()) == 1
    assert not out.exists()
