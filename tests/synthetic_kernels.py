"""SYNTHETIC records for the kernel tables (journey, torch.compile at its best, call cost): made-up times on
two made-up machines named like the lent ones, every record marked ``"synthetic": True``. Not measurements.

The times follow :data:`CASES` and :data:`FACTORS` so a test can compute every expected ratio by hand.
"""
from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

from robocache.bench.store import write_records
from tests.test_store import make_env, make_record

SCRIPT = "<script>alert(1)</script>"
# (case id, op, dtype, params, base time in us on the H200)
CASES: list[tuple[str, str, str, dict[str, Any], float]] = [
    ("resample/B256-S100-T50-D32", "resample", "bfloat16", {"B": 256, "S": 100, "T": 50, "D": 32}, 4.0),
    ("resample/B256-S100-T50-D32", "resample", "float32", {"B": 256, "S": 100, "T": 50, "D": 32}, 5.0),
    ("resample/B4096-S100-T50-D32", "resample", "bfloat16", {"B": 4096, "S": 100, "T": 50, "D": 32}, 40.0),
    ("resample/B16384-S100-T50-D32", "resample", "float32", {"B": 16384, "S": 100, "T": 50, "D": 32}, 160.0),
    (f"resample/B8-{SCRIPT}", "resample", "float32", {"B": 8, "S": 100, "T": 50, "D": 32}, 3.0),
    ("fuse/robot-B256-T100", "fuse", "bfloat16", {"B": 256, "T": 100, "mix": "robot"}, 20.0),
    ("fuse/robot-B32-T100", "fuse", "float32", {"B": 32, "T": 100, "mix": "robot"}, 10.0),
    ("voxelize/B4-N100000-G64-count-uniform", "voxelize", "float32",
     {"B": 4, "N": 100000, "mode": "count", "cloud": "uniform"}, 30.0),
    ("voxelize/B4-N100000-G64-mean-clustered-C4", "voxelize", "float32",
     {"B": 4, "N": 100000, "mode": "mean", "cloud": "clustered"}, 50.0),
]
# provider -> time factor over the case's base time, per case index (robocache = the best version, v2)
FACTORS: dict[str, list[float]] = {
    "robocache": [1.0] * len(CASES),
    "robocache@v2": [1.0] * len(CASES),
    "robocache@v1": [2.0, 2.0, 4.0, 3.0, 1.5, 2.0, 1.0, 1.25, 1.0],
    "torch_compile": [1.2, 0.9, 0.5, 0.8, 1.1, 2.5, 0.7, 4.0, 2.0],
    "torch_compile@max-autotune": [1.5, 1.1, 0.4, 0.9, 1.0, 3.0, 0.8, 5.0, 1.5],
    "torch_eager": [10.0] * len(CASES),
}
MACHINES = (("H100", "nvidia-h100-x1", 1.4, 3000.0), ("H200", "nvidia-h200", 1.0, 4300.0))
# the call-cost case: the public call on torch tensors and on CuPy arrays, an old version, the bare launch
DISPATCH = ("resample/dispatch-B1-S4-T2-D1",
            {"robocache": 9.0, "robocache@cupy": 7.0, "robocache@v1": 45.0, "bare_launch": 5.0})


def gpu_env(arch: str, machine: str) -> dict[str, Any]:
    """A SYNTHETIC GPU env (every value made up)."""
    env = make_env(machine)
    env.update(device="gpu", gpu_name=f"NVIDIA {arch} (synthetic)", arch=arch, compute_capability="9.0",
               gpu_count=1, gpu_memory_gb=80.0, sm_count=132, l2_mb=50.0, driver="0.0", cuda="13.0",
               nvml="unknown: synthetic fixture")
    return env


def record(case_id: str, op: str, dtype: str, params: dict[str, Any], provider: str, t: float, *, run: str,
           created: str, suite: str, ceiling: float, timer: str = "cuda_event") -> dict[str, Any]:
    """One SYNTHETIC ok record of ``t`` us."""
    r = make_record(0, run_id=run)
    r.update(created=created, suite=suite, frontend="cli")
    r["case"].update(id=case_id, op=op, provider=provider, dtype=dtype, params=dict(params), bytes=1_000_000)
    r["method"]["timer"] = timer
    r["metrics"]["time_us"] = {"p20": t * 0.99, "p50": t, "p80": t * 1.01, "min": t * 0.98, "max": t * 1.05,
                               "mean": t}
    gbs = 1_000_000 / (t * 1e-6) / 1e9
    r["metrics"].update(gb_per_s=gbs, ceiling_gb_per_s=ceiling, pct_of_ceiling=100 * gbs / ceiling,
                        items_per_s=256 / t * 1e6)
    return r


def nightly_records(scale: float, ceiling: float, run: str, created: str = "2026-03-01T00:00:00Z",
                    with_dispatch: bool = True) -> list[dict[str, Any]]:
    """One machine's SYNTHETIC nightly run: every case x provider of :data:`CASES`/:data:`FACTORS`, and the
    dispatch case (host timer) when ``with_dispatch``."""
    recs = []
    for i, (cid, op, dt, params, base) in enumerate(CASES):
        for prov, f in FACTORS.items():
            recs.append(record(cid, op, dt, params, prov, base * scale * f[i], run=run, created=created,
                               suite="nightly", ceiling=ceiling))
    if with_dispatch:
        cid, times = DISPATCH
        for prov, t in times.items():
            recs.append(record(cid, "resample", "float32", {"B": 1, "S": 4, "T": 2, "D": 1, "kind": "dispatch"},
                               prov, t, run=run, created=created, suite="nightly", ceiling=ceiling, timer="host"))
    return recs


def write_fixture(out: Path) -> Path:
    """Both machines' nightly runs, plus a newer quick run on the H200 with other (slower) times that the kernel
    tables must not pick (a nightly run is preferred), and a failed v1 record in it."""
    for arch, machine, scale, ceiling in MACHINES:
        write_records(out, gpu_env(arch, machine), nightly_records(scale, ceiling, f"synthetic-{machine}-nightly"),
                      name=f"{machine}-nightly")
    quick = [r for r in nightly_records(3.0, 4300.0, "synthetic-nvidia-h200-quick", "2026-03-02T00:00:00Z",
                                        with_dispatch=False) if r["case"]["id"] == CASES[0][0]]
    for r in quick:
        r["suite"] = "quick"
    bad = copy.deepcopy(quick[0])
    bad["case"]["provider"] = "robocache@v1"
    bad.update(status="crash", reason="worker died with SIGSEGV", metrics=None, check=None)
    quick = [r for r in quick if r["case"]["provider"] != "robocache@v1"] + [bad]
    write_records(out, gpu_env("H200", "nvidia-h200"), quick, name="nvidia-h200-quick")
    return out
