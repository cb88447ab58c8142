"""The profile suite on a GPU (issue 24): ncu's time of each profiled call agrees with the harness's device time of
the same case in the same run within ncu.AGREE (3x). Before units were carried, "ns" was read as "us" and the H100's
profile said 5,184 us for a kernel the harness timed at about 4.5 us. Skipped without a GPU (tests/gpu/conftest.py)
and without ncu on PATH."""
from __future__ import annotations

import shutil
from pathlib import Path

import pytest


def test_profile_times_agree_with_the_harness(tmp_path: Path) -> None:
    from robocache.bench import store
    from robocache.bench.pipelines import __main__ as pcli
    from robocache.bench.pipelines import ncu

    if shutil.which("ncu") is None:
        pytest.skip("ncu (Nsight Compute) is not on PATH")
    keys = ncu.default_cases()
    rc = pcli.main(["profile", "--device", "gpu", "--out", str(tmp_path), "--machine", "gpu-ncu-test"])
    loaded = store.load(tmp_path)
    assert not loaded.bad and len(loaded.records) == len(keys)
    for r in loaded.records:
        assert r.status == "ok", (r.case.id, r.status, r.reason)
        figs = r.pipeline.figures
        assert figs["harness_us"] and figs["ncu_call_us"], (r.case.id, r.pipeline.notes)
        assert 1 / ncu.AGREE <= figs["ncu_vs_harness"] <= ncu.AGREE, (r.case.id, figs, r.reason)
        assert r.reason is None
    assert rc == 0
