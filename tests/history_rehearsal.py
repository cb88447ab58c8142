"""A rehearsed nightly history for the History and Regressions tests: one H200-like machine, 20 nights (one commit
each), the classic resample case measured by robocache and torch eager. The measuring method changes at night
``METHOD_NIGHT`` (method version 1 -> 2: the same kernels read 1.5x slower, a new series, never a regression) and
robocache's kernel gets ``STEP`` slower at night ``STEP_NIGHT``; torch eager is the control. Small, seeded noise
(0.3% per run). Records are synthetic (``"synthetic": True``) and written through the store, as runs are.
"""
from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import numpy as np

from robocache.bench.store import write_records
from tests.test_store import make_env, make_record

MACHINE = "rehearsal-h200"
CASE = "resample/B256-S100-T50-D32"
NIGHTS = 20
METHOD_NIGHT = 6
STEP_NIGHT = 14
STEP = 0.10
BASE_US = {"robocache": 10.0, "torch_eager": 40.0}


def commit(night: int) -> str:
    return f"{night:02d}" + "ab" * 19


def run_id(night: int) -> str:
    return f"20260201T{night:02d}0000Z-rehearsal"


def env() -> dict[str, Any]:
    e = make_env(MACHINE)
    e.update(device="gpu", gpu_name="NVIDIA H200 (synthetic)", arch="H200", compute_capability="9.0", gpu_count=1,
             gpu_memory_gb=141.0, sm_count=132, l2_mb=60.0, driver="0.0", cuda="13.0", nvml="unknown: synthetic")
    return e


def records(night: int, rng: np.random.Generator) -> list[dict[str, Any]]:
    out = []
    for provider, base in BASE_US.items():
        r = make_record(256, run_id=run_id(night))
        r["created"] = f"2026-02-{night + 1:02d}T03:00:00Z"
        r["git_commit"] = commit(night)
        r["suite"] = "nightly"
        r["frontend"] = "cli"
        r["case"].update(id=CASE, provider=provider, params={"B": 256, "S": 100, "T": 50, "D": 32})
        r["method"].update(timer="cuda_event", cache="warm", noise=0.005,
                           version=1 if night < METHOD_NIGHT else 2)
        t = base * (1.0 if night < METHOD_NIGHT else 1.5)
        if provider == "robocache" and night >= STEP_NIGHT:
            t *= 1 + STEP
        t *= float(np.exp(rng.normal(0.0, 0.003)))
        r["metrics"]["time_us"] = {"p20": t * 0.99, "p50": t, "p80": t * 1.01, "min": t * 0.98, "max": t * 1.05,
                                   "mean": t}
        r["metrics"]["gb_per_s"] = 1e6 / t / 1e3
        r["metrics"]["items_per_s"] = 256 / t * 1e6
        out.append(r)
    return out


def write(folder: Path, seed: int = 15) -> Path:
    """The history as one records file per night under ``folder``; returns ``folder``."""
    rng = np.random.default_rng(seed)
    for n in range(NIGHTS):
        write_records(folder, env(), copy.deepcopy(records(n, rng)), name=f"night{n:02d}")
    return folder
