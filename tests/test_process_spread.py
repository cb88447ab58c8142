"""scripts/process_spread.py's arithmetic (the script itself runs cases in processes: a GPU dev aid)."""
from __future__ import annotations

import importlib.util
import math
from pathlib import Path

import pytest

_spec = importlib.util.spec_from_file_location(
    "process_spread", Path(__file__).resolve().parents[1] / "scripts" / "process_spread.py")
ps = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(ps)


def test_the_spread_and_the_expected_aa_move_of_k_processes():
    s = ps.summarize([4.0, 4.1, 3.9, 4.0], [0.005, 0.004, 0.006, 0.005])
    assert s["n"] == 4 and s["median_us"] == 4.0
    assert s["spread"] == pytest.approx(0.2 / 4.0)
    sd = 0.08164965809277261 / 4.0  # statistics.stdev of the four, over their mean
    assert s["between_sd"] == pytest.approx(sd)
    assert s["within_sd"] == pytest.approx(0.005 / 1.96)  # method.noise: a 95% half-width
    # the 90th percentile of |mean_A - mean_B| for k processes a side: 1.645 sqrt(2) sd / sqrt(k), falling as 1/sqrt(k)
    assert s["aa_move_p90"][1] == pytest.approx(1.645 * math.sqrt(2) * sd)
    assert s["aa_move_p90"][4] == pytest.approx(s["aa_move_p90"][1] / 2)


def test_one_process_is_refused_and_no_noise_is_none():
    with pytest.raises(ValueError, match="two processes"):
        ps.summarize([4.0], [])
    assert ps.summarize([4.0, 4.2], [])["within_sd"] is None


def test_the_default_cases_are_the_aa_pairs_robocache_rows():
    keys = ps.default_cases("gpu")
    assert keys and all(k.endswith("/robocache") and "dispatch" not in k for k in keys)
    assert {k.split("/")[0] for k in keys} == {"resample", "fuse", "voxelize"}
