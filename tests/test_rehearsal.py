"""The local rehearsal of the nightly alert (scripts/rehearse_regression.py) runs and every step holds: a
throwaway git history, a commit that makes NumPy's resample slower, the nightly steps on the CPU providers,
``robocache-bench check --confirm``, one issue opened for the change, updated the next night, closed on
recovery; a runner change and a method change reported as such, opening no issue. A few minutes."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def test_rehearsal_raises_the_expected_alert(tmp_path):
    out = subprocess.run([sys.executable, str(REPO / "scripts" / "rehearse_regression.py"), "--json",
                          str(tmp_path / "alerts.json")], capture_output=True, text=True, timeout=900)
    failed = [ln.strip() for ln in out.stdout.splitlines() if ln.strip().startswith("FAILED: ")]
    assert out.returncode == 0, ("failed steps:\n" + "\n".join(failed) + "\n\n"  # first: CI cuts long output
                                 + out.stdout[-4000:] + out.stderr[-2000:])
    assert "rehearsal OK" in out.stdout and "performance regression" in out.stdout
    doc = json.loads((tmp_path / "alerts.json").read_text())
    assert sorted(a["case_key"] for a in doc["alerts"]) == ["resample/B256-S100-T50-D32/float32/numpy",
                                                           "resample/B32-S100-T50-D32/float32/numpy"]
    assert all(a["direction"] == "slower" and a["ratio"] > 1.5 for a in doc["alerts"])
    assert all(a["confirmed"] is True for a in doc["alerts"])
    for step in ("one issue opened for the change", "the same issue updated", "the issue closed with a 'Recovered'",
                 "a runner change: reported as an environment change", "a method change: every series restarts"):
        assert any(ln.strip().startswith("ok: ") and step in ln for ln in out.stdout.splitlines()), step
    assert "FAILED:" not in out.stdout
