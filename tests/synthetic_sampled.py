"""SYNTHETIC records of the sampled suite (made-up times on two made-up machines named like the lent ones, every
record marked ``"synthetic": True``; not measurements), built so that every figure of the sampled summary can be
computed by hand (tests/test_sampled.py writes the expected values out).

Copy ceiling 1000 GB/s on both machines: a record moving ``b`` bytes in ``t`` us is at ``b / (t * 1e4)`` % of it.

resample, seed 2, on the H200 (robocache, torch.compile default and max-autotune, torch eager, CuPy; us):

====  ===========  =========  =====  ===========  ======  ====  ==========================================
pt    bytes        robocache  tc     tc-max-aut.  eager   cupy  what it tests
====  ===========  =========  =====  ===========  ======  ====  ==========================================
p0    1e6          8          10     12           80      16    ratio 1.25; compile at 10% (slow), < 1.5x
p1    1e6          10         9      9.5          20      -     ratio 0.9 (worst); noisy: flagged
p2    400e6        500        1000   failed       5000    -     large at exactly 80%; slow at 2.0x
p3    300e6        500        700    600          -       -     large at 60%; max-autotune wins; 1.2x
p4    2e6          4          -      -            10      -     no torch.compile: not a point
====  ===========  =========  =====  ===========  ======  ====  ==========================================

The H100 run has the same points with robocache 1.4x slower on p2 (700 us) and 1.2x on p3 (600 us), and every
other time 1.3x; a second H200 run of seed 7 has one point; a nightly (not sampled) record sits in the H200 run.
"""
from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

from robocache.bench.store import write_records
from tests.synthetic_kernels import gpu_env, record

CEILING = 1000.0
SCRIPT = "<script>alert(1)</script>"
# point -> (bytes, {provider: us or "failed"}, D)
POINTS: dict[str, tuple[int, dict[str, Any], int]] = {
    "p0": (10**6, {"robocache": 8.0, "torch_compile": 10.0, "torch_compile@max-autotune": 12.0, "torch_eager": 80.0,
                   "cupy": 16.0}, 7),
    "p1": (10**6, {"robocache": 10.0, "torch_compile": 9.0, "torch_compile@max-autotune": 9.5, "torch_eager": 20.0},
           64),
    "p2": (400 * 10**6, {"robocache": 500.0, "torch_compile": 1000.0, "torch_compile@max-autotune": "failed",
                         "torch_eager": 5000.0}, 512),
    "p3": (300 * 10**6, {"robocache": 500.0, "torch_compile": 700.0, "torch_compile@max-autotune": 600.0}, 1023),
    "p4": (2 * 10**6, {"robocache": 4.0, "torch_eager": 10.0}, 1),
}
H100_ROBOCACHE = {"p2": 700.0, "p3": 600.0}  # others: every time x 1.3


def case_id(seed: int, i: int, name: str) -> str:
    return f"resample/s{seed}-{i:02d}-B4-S10-T5-D{POINTS[name][2]}-{name}"


def sampled_record(seed: int, i: int, name: str, provider: str, t: Any, *, run: str, created: str,
                   suite: str = "sampled") -> dict[str, Any]:
    """One SYNTHETIC sampled record (``t`` us, or a failed one for ``"failed"``)."""
    nbytes, _, d = POINTS[name]
    params = {"B": 4, "S": 10, "T": 5, "D": d, "time_dtype": "float32", "rate_hz": 100.0, "t0": 0.0,
              "kind": "sampled", "stratum": "large" if nbytes >= 256 * 10**6 else "base", "sample_seed": seed,
              "sample_index": i}
    r = record(case_id(seed, i, name), "resample", "float32", params, provider, 1.0 if t == "failed" else t,
               run=run, created=created, suite=suite, ceiling=CEILING)
    r["case"]["bytes"] = nbytes
    if t == "failed":
        r.update(status="crash", reason="synthetic crash", metrics=None, check=None)
        return r
    gbs = nbytes / (t * 1e-6) / 1e9
    r["metrics"].update(gb_per_s=gbs, pct_of_ceiling=100 * gbs / CEILING)
    if name == "p1" and provider == "robocache":
        r["health"].update(noisy=True, reasons=["noisy: synthetic"])
    if provider == "robocache" and name in LAUNCHES:  # robocache's tuned launch (record.launches)
        config, source = LAUNCHES[name]
        r["launches"] = [{"device": 0, "bucket": f"resample|float32|float32|{name}", "config": config,
                          "source": source}]
    return r


# the tuned launch of some robocache points: the column split tuned now, a shipped table's choice, the rule's own
LAUNCHES = {"p0": ({"unroll": 1, "lg_shift": 0, "cs": 2}, "tuned"),
            "p2": ({"unroll": 1, "vunroll": 0, "lg_shift": 1, "tpg": 4, "block": 0}, "shipped"),
            "p3": ({"unroll": 1, "vunroll": 0, "lg_shift": 0, "tpg": 0, "block": 0}, "cache")}


def h200_records(run: str = "synthetic-h200-sampled", created: str = "2026-03-01T00:00:00Z") -> list[dict[str, Any]]:
    recs = [sampled_record(2, i, name, prov, t, run=run, created=created)
            for i, (name, (_, times, _)) in enumerate(POINTS.items()) for prov, t in times.items()]
    # a record of the grid's declared points in the same run: not sampled, never a point
    recs.append(record("resample/B256-S100-T50-D32", "resample", "float32", {"B": 256, "S": 100, "T": 50, "D": 32},
                       "robocache", 5.0, run=run, created=created, suite="sampled", ceiling=CEILING))
    return recs


def h100_records(run: str = "synthetic-h100-sampled", created: str = "2026-03-01T00:00:00Z") -> list[dict[str, Any]]:
    recs = []
    for i, (name, (_, times, _)) in enumerate(POINTS.items()):
        for prov, t in times.items():
            if t != "failed":
                t = H100_ROBOCACHE[name] if prov == "robocache" and name in H100_ROBOCACHE else t * 1.3
            recs.append(sampled_record(2, i, name, prov, t, run=run, created=created))
    return recs


def seed7_records(run: str = "synthetic-h200-seed7", created: str = "2026-03-02T00:00:00Z") -> list[dict[str, Any]]:
    """A fresh seed's run on the H200: one point (ratio 3.0), its own row of the summary."""
    return [sampled_record(7, 0, "p0", prov, t, run=run, created=created)
            for prov, t in (("robocache", 5.0), ("torch_compile", 15.0), ("torch_compile@max-autotune", 20.0))]


def write_fixture(out: Path, *, evil: bool = False) -> Path:
    """The H100 and H200 runs of seed 2 and the H200 run of seed 7; ``evil``: machine names carry markup."""
    h100, h200 = ("nvidia-h100-x1", "nvidia-h200") if not evil else (f"h100-{SCRIPT}", f"h200-{SCRIPT}")
    write_records(out, gpu_env("H100", h100), h100_records(), name="h100-sampled")
    write_records(out, gpu_env("H200", h200), h200_records(), name="h200-sampled")
    write_records(out, gpu_env("H200", h200), copy.deepcopy(seed7_records()), name="h200-seed7")
    return out
