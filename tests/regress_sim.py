"""A noise model fitted to real H200 measurements, and nightly histories simulated from it (synthetic).

Fit (``fit_noise_model``): the quick cases measured by several runs of one commit on the H200 (kernel and
provider code identical: differences are noise): per case the sample sd of log(median time); the model
sigma(t) = hypot(rel, abs_us / t) by least squares on log(sd / model); the per-case ratios sd / model are
kept as the model's spread (some cases are 3-8x noisier than their size predicts: CuPy's per-row launches).

Simulate (``simulate``): every case of the nightly GPU grid with its real H200 median (from the full asv run),
a per-case sigma = model(t) x a ratio drawn from the fitted ones (at least the case's own within-run
uncertainty from that run), and per night a Student-t (4 dof, scaled to
that sigma) deviation: heavier tails than Gaussian, as measured. Records are plain dicts with the fields
``regress.check`` reads, marked synthetic.
"""
from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from robocache.bench import store

REPO = Path(__file__).resolve().parents[1]
H200 = REPO / "results" / "h200-nvidia-h200"
# Runs of commit c700059 (kernels unchanged since 059146c): two CLI quick runs, the pytest-benchmark quick
# run, and the three asv calls of the nightly run.
SAME_CODE_RUNS = ("20261121T024954Z-ed53d9-quick", "20261121T025130Z-509d8a-quick",
                  "20261121T024859Z-a0934e-pytest-benchmark", "20261121T023145Z-60b414-asv",
                  "20261121T023425Z-6400a3-asv", "20261121T023747Z-ec8ae0-asv")
NIGHTLY_RUNS = SAME_CODE_RUNS[3:]  # the nightly grid's medians


@dataclass
class NoiseModel:
    rel: float
    abs_us: float
    spread: np.ndarray  # sd / model(t) per fitted case
    cases: int

    def sigma(self, t_us: float) -> float:
        return math.hypot(self.rel, self.abs_us / t_us)


def _load(names) -> list:
    recs = []
    for n in names:
        loaded = store.load(H200 / f"{n}{store.RECORDS_SUFFIX}")
        assert not loaded.bad, loaded.bad
        recs += loaded.records
    return recs


def fit_noise_model() -> NoiseModel:
    by = defaultdict(list)
    for r in _load(SAME_CODE_RUNS):
        if r["status"] == "ok":
            by[(r["case"]["id"], r["case"]["dtype"], r["case"]["provider"])].append(r["metrics"]["time_us"]["p50"])
    sd, t = [], []
    for v in by.values():
        if len(v) >= 3:
            lv = np.log(v)
            sd.append(max(float(np.std(lv, ddof=1)), 1e-4))
            t.append(float(np.exp(lv.mean())))
    sd_a, t_a = np.array(sd), np.array(t)
    best = None
    for rel in np.linspace(0.002, 0.04, 77):
        for ab in np.linspace(0.0, 0.5, 51):
            z = sd_a / np.hypot(rel, ab / t_a)
            score = float(np.mean(np.log(z) ** 2))
            if best is None or score < best[0]:
                best = (score, rel, ab)
    _, rel, ab = best
    return NoiseModel(rel=float(rel), abs_us=float(ab), spread=sd_a / np.hypot(rel, ab / t_a), cases=len(sd))


def nightly_cases() -> list[dict]:
    """(case dict, env dict, median us) for every ok case of the H200 nightly asv run."""
    out = []
    for r in _load(NIGHTLY_RUNS):
        if r["status"] == "ok":
            out.append({"case": {k: r["case"][k] for k in ("id", "op", "provider", "dtype", "grid_version")},
                        "t_us": r["metrics"]["time_us"]["p50"], "method_noise": r["method"]["noise"] or 0.005})
    return out


def _record(c: dict, t: float, night: int, thr: bool, machine: str, rerun: bool = False) -> dict:
    commit = f"{night:04d}" + "c" * 36
    run_id = f"2026{1 + night // 28:02d}{1 + night % 28:02d}T0{4 if rerun else 3}0000Z-sim{night:03d}"
    created = f"2026-{1 + night // 28:02d}-{1 + night % 28:02d}T0{4 if rerun else 3}:00:00+00:00"
    return {
        "run_id": run_id, "created": created, "git_commit": commit, "suite": "nightly", "frontend": "cli",
        "case": c["case"], "status": "ok", "synthetic": True,
        "method": {"timer": "cuda_event", "cache": "warm", "noise": c["method_noise"]},
        "metrics": {"time_us": {"p50": t}},
        "health": {"throttled": thr, "contended": False, "noisy": False,
                   "reasons": ["sm clock below max (synthetic)"] if thr else []},
        "env": {"machine": machine, "arch": "H200"},
    }


def _draw(c: dict, sigma: float, rng: np.random.Generator) -> float:
    return c["t_us"] * math.exp(sigma * float(rng.standard_t(4)) / math.sqrt(2.0))  # t4 has variance 2


def simulate(model: NoiseModel, cases: list[dict], nights: int, rng: np.random.Generator, *,
             inject: dict[int, tuple[int, float]] | None = None, throttled: dict[int, set[int]] | None = None,
             throttle_factor: float = 1.3, machine: str = "sim-h200") -> tuple[list[dict], list[float]]:
    """Records of ``nights`` nightly runs (one commit each) of ``cases``.

    ``inject``: case index -> (first night, slowdown) from that night on, e.g. {3: (18, 0.10)}.
    ``throttled``: night -> case indexes measured throttled that night (slowed by ``throttle_factor`` and
    flagged, as NVML would). Returns the records and each case's sigma.
    """
    inject = inject or {}
    throttled = throttled or {}
    # never quieter between runs than the case's own median is uncertain within one run (measured)
    sig = [max(model.sigma(c["t_us"]) * float(rng.choice(model.spread)), c["method_noise"] / 1.96) for c in cases]
    recs = []
    for night in range(nights):
        for i, c in enumerate(cases):
            t = _draw(c, sig[i], rng)
            if i in inject and night >= inject[i][0]:
                t *= 1 + inject[i][1]
            thr = i in throttled.get(night, set())
            recs.append(_record(c, t * (throttle_factor if thr else 1.0), night, thr, machine))
    return recs, sig


def rerun(cases: list[dict], sig: list[float], keys: set[str], night: int, rng: np.random.Generator, *,
          inject: dict[int, tuple[int, float]] | None = None, machine: str = "sim-h200") -> list[dict]:
    """The confirmation rerun of ``night``: the cases with these harness keys measured once more."""
    inject = inject or {}
    out = []
    for i, c in enumerate(cases):
        key = f"{c['case']['id']}/{c['case']['dtype']}/{c['case']['provider']}"
        if key in keys:
            t = _draw(c, sig[i], rng)
            if i in inject and night >= inject[i][0]:
                t *= 1 + inject[i][1]
            out.append(_record(c, t, night, False, machine, rerun=True))
    return out
