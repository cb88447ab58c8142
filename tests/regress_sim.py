"""Nightly histories whose noise is bootstrapped from the real run-to-run ratios of the committed records.

The noise (``pools``): ``regress.fit_priors`` over ``results/`` (every healthy group of runs of one commit,
series, front end and input rotation: each run's deviation from its group's mean log-time) per provider and
median-time bucket, the pool ``regress.prior_noise`` would use for the case (the bucket when it has at least
``regress.PRIOR_MIN_N`` deviations, else the provider's, else every provider's). A night's time is the case's
real median times ``exp(e)`` with ``e`` drawn from that pool, with replacement: the tails are the measured
ones (a robocache dispatch case 14.3 vs 20.0 us, CuPy 20% apart), not a Gaussian's or a Student t's.

The cases (``nightly_series``): every ok case of the H200 nightly asv run (the nightly grid, 216 series, four
providers), with its real median. Records are typed (``records.synthetic``: the fields ``regress.check`` reads),
marked synthetic.
"""
from __future__ import annotations

import math
import zlib
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

import committed
import numpy as np

from robocache.bench import regressions as regress
from robocache.bench import schema, store
from robocache.bench.regressions import confirmation, noise
from robocache.bench.regressions.memory import Memory
from robocache.bench.regressions.records import synthetic, synthetic_env
from robocache.bench.schema import fingerprint

REPO = Path(__file__).resolve().parents[1]
H200 = REPO / "results" / "h200-nvidia-h200"
NIGHTLY_RUNS = ("20261121T023145Z-60b414-asv", "20261121T023425Z-6400a3-asv", "20261121T023747Z-ec8ae0-asv")
MACHINE = "sim-h200"
ENV = synthetic_env(MACHINE, arch="H200")  # every simulated record's


def pools() -> dict[str, dict[str, np.ndarray]]:
    """provider -> bucket (and "*") -> the real deviations (log-time), fitted from the committed records."""
    fit = regress.fit_priors(committed.load().records)  # the committed runs, never results/local/
    return {p: {b: np.array(v["deviations"]) for b, v in per.items()} for p, per in fit.items()}


def pool_for(pl: dict[str, dict[str, np.ndarray]], provider: str, t_us: float) -> np.ndarray:
    """The pool regress.prior_noise picks for this provider and median time."""
    for name in (provider, provider.split("@")[0], "all"):
        per = pl.get(name)
        if not per:
            continue
        b = per.get(noise._bucket(t_us))
        if b is not None and len(b) >= regress.PRIOR_MIN_N:
            return b
        if len(per.get("*", ())) >= regress.PRIOR_MIN_N:
            return per["*"]
    raise KeyError(provider)


def band(pool: np.ndarray) -> float:
    """A pool's noise (one run's sigma): the Gaussian-equivalent of its 90th percentile, as the prior."""
    return float(np.quantile(np.abs(pool), 0.9)) / 1.645


@dataclass
class Series:
    case: schema.Case
    t_us: float
    pool: np.ndarray
    kind: str = "aa"  # "aa" | "step" | "drift" | "twostate"
    step: float = 0.0  # relative step from night `start` on
    start: int = 10 ** 9
    slope: float = 0.0  # relative change per night from `start` on (drift)
    state_p: float = 0.5  # two-state: probability of the slow state (alternating when 0.5)
    method_noise: float = 0.005
    extra: dict = field(default_factory=dict)

    @property
    def provider(self) -> str:
        return self.case.provider

    @property
    def noise(self) -> float:
        return band(self.pool)

    @property
    def key(self) -> str:
        return f"{self.case.id}/{self.case.dtype}/{self.case.provider}"

    @property
    def fingerprint(self) -> str:
        return fingerprint({"machine": MACHINE, "case_id": self.case.id, "provider": self.provider,
                                    "dtype": self.case.dtype, "timer": "cuda_event", "cache": "warm",
                                    "grid_version": self.case.grid_version, "frontend": "cli",
                                    "input_sets": 1})


def nightly_series(pl: dict[str, dict[str, np.ndarray]]) -> list[Series]:
    out = []
    for n in NIGHTLY_RUNS:
        loaded = store.load(H200 / f"{n}{store.RECORDS_SUFFIX}")
        assert not loaded.bad, loaded.bad
        for r in loaded.records:
            if r.status != "ok":
                continue
            t = r.metrics.time_us.p50
            out.append(Series(case=r.case, t_us=t, pool=pool_for(pl, r.case.provider, t),
                              method_noise=r.method.noise or 0.005))
    return out


def time_at(s: Series, night: int, rng: np.random.Generator) -> float:
    t = s.t_us * math.exp(float(rng.choice(s.pool)))
    if s.kind == "twostate":
        slow = (night % 2 == 1) if s.state_p == 0.5 else (rng.random() < s.state_p)
        t *= 1.08 if slow else 1.0
    if night >= s.start:
        t *= 1 + s.step
        t *= (1 + s.slope) ** (night - s.start + 1)
    return t


def commit(night: int) -> str:
    return f"{night:04d}" + "c" * 36


def record(s: Series, t: float, night: int, rerun: bool = False) -> schema.Record:
    run_id = f"2026{1 + night // 28:02d}{1 + night % 28:02d}T0{4 if rerun else 3}0000Z-sim{night:03d}"
    created = f"2026-{1 + night // 28:02d}-{1 + night % 28:02d}T0{4 if rerun else 3}:00:00+00:00"
    return synthetic(run_id=run_id, created=created, git_commit=commit(night), case=s.case, t_us=t,
                     noise=s.method_noise, env=ENV)


@dataclass
class NightResult:
    night: int  # the check after nights 0..night-1
    raw: dict[str, regress.Change]  # alerts and drifts (confirmation.drift_change) before confirmation, by fingerprint
    kept: dict[str, regress.Change]  # confirmed by the rerun, tested alone
    drifts: dict[str, regress.Drift]  # drifts confirmed by the rerun
    checked: set[str]


def run_nights(series: list[Series], nights: int, check_at: list[int], rng: np.random.Generator,
               times: dict[str, list[float]] | None = None) -> list[NightResult]:
    """Simulate ``nights`` nights and run the nightly check (with its confirmation rerun) after each night in
    ``check_at`` over the nights before it, as the nightly job does. ``times``, where given, receives each series'
    nightly times by fingerprint (what the nights drew: the placement's oracle reads them)."""
    by_night = [[record(s, time_at(s, n, rng), n) for s in series] for n in range(nights)]
    if times is not None:
        for i, s in enumerate(series):
            times[s.fingerprint] = [night[i].metrics.time_us.p50 for night in by_night]
    by_key = {s.key: s for s in series}
    # each series' reruns after night n come from their own stream: whether one alert is measured again, and
    # how often, does not redraw every other alert's reruns (variants of the confirmation compare on the same draws)
    base = int(rng.integers(2 ** 62))
    streams: dict[tuple[str, int], np.random.Generator] = {}

    def rerun(key: str, n: int) -> schema.Record:
        g = streams.setdefault((key, n), np.random.default_rng([base, n, zlib.crc32(key.encode())]))
        return record(by_key[key], time_at(by_key[key], n - 1, g), n - 1, rerun=True)

    out = []
    looked = Memory()  # the confirmation's memory, carried from night to night (check --refuted-before)
    for n in check_at:
        recs = [r for night in by_night[:n] for r in night]
        first = regress.check(recs, screen=regress.SCREEN_P)  # the nightly job: check --confirm
        # the alerts and the drifts it measures, each at its look (the change points earlier nights refuted)
        raw = {c.fingerprint: c for c in confirmation.to_confirm(first, looked)}
        # the confirmation as check --confirm runs it (confirmation.confirm_alerts: CONFIRM_RUNS reruns, CONFIRM_MORE
        # more where they ask for a second look, the drifts too), the reruns drawn instead of measured
        confirmation.confirm_alerts(first, lambda items, times, n=n: [rerun(c.key, n) for c in items
                                                                 for _ in range(times)], machine=MACHINE,
                                    looked=looked)
        assert all(c.confirmed for c in first.alerts)  # the simulated rerun always measures: none unconfirmable
        kept = {c.fingerprint: c for c in first.alerts}
        out.append(NightResult(n, raw, kept, {d.fingerprint: d for d in first.drifts}, set(first.checked)))
    return out


def per_provider(items, key) -> dict[str, list]:
    out: dict[str, list] = defaultdict(list)
    for it in items:
        out[key(it)].append(it)
    return dict(sorted(out.items()))
