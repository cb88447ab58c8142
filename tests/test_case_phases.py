"""scripts/case_phases.py without running a case: its usage errors (exit 2, one line, no process started)."""
import importlib.util
import re
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
spec = importlib.util.spec_from_file_location("case_phases", ROOT / "scripts" / "case_phases.py")
phases = importlib.util.module_from_spec(spec)
spec.loader.exec_module(phases)


@pytest.mark.parametrize("argv, why", [(["--limit", "0"], "--limit must be at least 1"),
                                       (["--device", "cpu", "--ops", "bogus"], "bogus"),
                                       (["--device", "cpu", "--suite", "quick", "--providers", "nobody"],
                                        "selects no case|nobody")])
def test_usage_errors(argv, why, monkeypatch, capsys):
    monkeypatch.setattr(sys, "argv", ["case_phases.py", *argv])
    monkeypatch.setattr(phases.runner, "_context", lambda *a, **k: pytest.fail("a process was to start"))
    try:
        code = phases.main()
    except SystemExit as e:
        code = e.code
    assert code == 2
    err = capsys.readouterr().err
    assert re.search(why, err), err

