"""Can the alerts be trusted? ``regress.check`` + ``regress.confirm`` as the nightly job runs them, on nights
whose noise is bootstrapped from the real run-to-run ratios of the committed records, per provider
(tests/regress_sim.py; the simulated records are synthetic, the noise is measured).

One simulation (module fixture, about a minute on 2 cores): the 216 series of the nightly grid with their real
H200 medians; per provider a quarter left alone (A/A), the rest given a step of +5%, +10% or +20% at night 20;
12 copies of quiet series (noise <= 0.5%) drifting +0.5%/night and 6 drifting +1%/night from night 20; 12 two-state
series (100/108 alternating, or the slow state 30% of the nights). The nightly check (with the confirmation
rerun, tested alone) runs after nights 8, 10, ..., 20 and every night 21 to 32.

Measured and printed per provider (run with ``-s``): confirmed false alerts per 1,000 series-nights (A/A), the
share of steps found within one, two and ten nights by step size and noise band, the change point on the right
commit, drift nights-to-report, two-state false alerts. docs/regressions.md has the table of this commit.
The asserts hold the rates measured at this commit (with a margin), and the issue's targets are printed next
to them: a target that is not met is reported, not hidden.
"""
from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import pytest

from robocache.bench import regress

import regress_sim as sim

NIGHTS, START = 32, 20
CHECKS = [8, 10, 12, 14, 16, 18, 20] + list(range(START + 1, NIGHTS + 1))
SIZES = (0.05, 0.10, 0.20)


def _copy(s: sim.Series, tag: str, **kw) -> sim.Series:
    case = {**s.case, "id": f"{s.case['id']}-{tag}"}
    return replace(s, case=case, **kw)


@pytest.fixture(scope="module")
def world():
    pl = sim.pools()
    grid = sim.nightly_series(pl)
    assert len(grid) >= 200, "the committed H200 nightly asv records should cover the nightly grid"
    series: list[sim.Series] = []
    by_prov: dict[str, int] = {}
    for s in grid:
        i = by_prov[s.provider] = by_prov.get(s.provider, -1) + 1
        if i % 4 == 0:
            series.append(s)
        else:
            series.append(replace(s, kind="step", step=SIZES[i % 3], start=START))
    quiet = [s for s in grid if s.noise <= 0.005]
    assert len(quiet) >= 6, "quiet series (noise <= 0.5%) to drift"
    for k in range(12):
        series.append(_copy(quiet[k % len(quiet)], f"drift{k}", kind="drift", slope=0.005, start=START))
    for k in range(6):
        series.append(_copy(quiet[k % len(quiet)], f"drift1pc{k}", kind="drift", slope=0.01, start=START))
    for k in range(12):
        series.append(_copy(quiet[k % len(quiet)], f"two{k}", kind="twostate", state_p=0.5 if k < 6 else 0.3))
    rng = np.random.default_rng(20261124)
    return series, sim.run_nights(series, NIGHTS, CHECKS, rng)


def _aa_nights(series, results):
    """(series-nights, confirmed false alerts, raw false alerts) per provider over the A/A states."""
    out: dict[str, list[int]] = {}
    for s in series:
        if s.kind == "drift" or s.kind == "twostate":
            continue
        row = out.setdefault(s.provider, [0, 0, 0])
        for r in results:
            if r.night > s.start or s.fingerprint not in r.checked:
                continue
            row[0] += 1
            row[1] += (s.fingerprint in r.kept) + (s.fingerprint in r.drifts)
            row[2] += s.fingerprint in r.raw
    return out


def test_aa_false_alerts_per_provider(world):
    series, results = world
    rows = _aa_nights(series, results)
    total = [sum(v[i] for v in rows.values()) for i in range(3)]
    print(f"\nA/A (real-noise bootstrap): {total[0]} series-nights, {total[1]} confirmed false alerts "
          f"({1000 * total[1] / total[0]:.2f} per 1,000; Poisson 95% upper bound "
          f"{1000 * _upper(total[1]) / total[0]:.2f}), {total[2]} before confirmation; target <= 0.05 per 1,000")
    for s in series:  # what the false alerts looked like
        for r in results:
            if s.kind in ("aa", "step") and r.night <= s.start and s.fingerprint in r.kept:
                c = r.kept[s.fingerprint]
                print(f"  false: {s.key} night {r.night} x{c.ratio:.3f} noise {c.sigma:.4f} n_before {c.n_before} "
                      f"{c.kind}; {c.confirm_note}")
    for p, (n, kept, raw) in rows.items():
        print(f"  {p:14s} {n:5d} series-nights: {kept} confirmed ({1000 * kept / n:.2f}/1,000), {raw} raw")
    assert total[0] >= 2000
    # measured 0 at this commit; 2184 series-nights can only bound the rate by 1.4 per 1,000 (95%), not show
    # the target of 0.05 (that takes ~60,000 series-nights: 20 minutes here)
    assert total[1] <= 1, "confirmed false alerts on unchanged series"


def _upper(k: int) -> float:
    """Poisson 95% upper bound of a count of k (exact, chi-square)."""
    from scipy import stats

    return float(stats.chi2.ppf(0.95, 2 * (k + 1)) / 2)


def _detections(series, results):
    """Per step series: (nights to the first confirmed alert or None, placed on the right commit)."""
    out = []
    for s in series:
        if s.kind != "step":
            continue
        got = None
        for r in results:
            if r.night > s.start and s.fingerprint in r.kept:
                got = (r.night - s.start, r.kept[s.fingerprint].after.commit == sim.commit(s.start))
                break
        out.append((s, got))
    return out


def test_steps_found_per_size_noise_band_and_provider(world):
    series, results = world
    det = _detections(series, results)
    print("\nsteps at night 20 (confirmed alerts; found within 1 / 2 / 10 nights, of n):")
    for p, items in sim.per_provider(det, lambda d: d[0].provider).items():
        cells = []
        for size in SIZES:
            xs = [g for s, g in items if s.step == size]
            f = [sum(1 for g in xs if g and g[0] <= k) for k in (1, 2, 10)]
            cells.append(f"+{size:.0%}: {f[0]}/{f[1]}/{f[2]} of {len(xs)}")
        print(f"  {p:14s} noise {np.median([s.noise for s, _ in items]) * 100:.2f}% " + "; ".join(cells))
    bands = {"<= 1%": lambda s: s.noise <= 0.01, "<= 2%": lambda s: s.noise <= 0.02,
             "> 2%": lambda s: s.noise > 0.02}
    for name, sel in bands.items():
        for size in SIZES:
            xs = [g for s, g in det if s.step == size and sel(s)]
            if xs:
                f = [sum(1 for g in xs if g and g[0] <= k) for k in (1, 2, 10)]
                print(f"  noise {name:5s} +{size:.0%}: within one night {f[0]}/{len(xs)}, two {f[1]}/{len(xs)}, "
                      f"ten {f[2]}/{len(xs)}")
    found = [g for _, g in det if g]
    placed = sum(1 for g in found if g[1])
    big = [(s, g) for s, g in det if s.step >= 3 * s.noise]
    big_found = sum(1 for _, g in big if g and g[0] <= 10)
    print(f"  change point on the right commit: {placed}/{len(found)} detections (target >= 95%)")
    print(f"  steps of at least 3x the series' noise found within 10 nights: {big_found}/{len(big)} (target: all)")
    ten2 = [g for s, g in det if s.step == 0.10 and s.noise <= 0.02]
    five1 = [g for s, g in det if s.step == 0.05 and s.noise <= 0.01]
    r10 = sum(1 for g in ten2 if g and g[0] <= 1) / max(len(ten2), 1)
    r5 = sum(1 for g in five1 if g and g[0] <= 2) / max(len(five1), 1)
    print(f"  +10% within one night where noise <= 2%: {r10:.0%} (target >= 90%); "
          f"+5% within two nights where noise <= 1%: {r5:.0%} (target >= 80%)")
    # what this commit achieves (84/100 placed, +10% 62% in one night where noise <= 2%, +5% 100% in two where
    # noise <= 1%, 87/104 of 3-sigma steps within ten nights; pools refit with main's runs of 2026-11-24, before
    # which it was 88/99 placed and 85/95), with a margin; the targets are printed above and the gaps stated in
    # docs/regressions.md
    assert placed >= 0.8 * len(found)
    assert r10 >= 0.5 and r5 >= 0.8
    assert big_found >= 0.8 * len(big)


def test_drift_reported_before_five_percent_and_not_blamed_on_a_commit(world):
    series, results = world
    rows = []
    for s in series:
        if s.kind != "drift":
            continue
        first = next((r.night - s.start for r in results if r.night > s.start and s.fingerprint in r.drifts), None)
        blamed = next((r.night - s.start for r in results if r.night > s.start and s.fingerprint in r.kept), None)
        rows.append((s, first, blamed))
    for slope in (0.005, 0.01):
        xs = [(f, b) for s, f, b in rows if s.slope == slope]
        early = sum(1 for f, _ in xs if f is not None and (1 + slope) ** f - 1 < 0.05)
        blamed_first = sum(1 for f, b in xs if b is not None and (f is None or b < f))
        nights = sorted(f for f, _ in xs if f is not None)
        print(f"\ndrift +{slope:.1%}/night (noise <= 0.5%): reported in {len(nights)}/{len(xs)} series, after "
              f"{nights} nights; before +5% in all: {early}/{len(xs)} (target: all at +0.5%); blamed on a commit "
              f"before the drift was reported: {blamed_first}/{len(xs)}")
    half = [(f, b) for s, f, b in rows if s.slope == 0.005]
    assert sum(1 for f, _ in half if f is not None and 1.005 ** f - 1 < 0.05) >= 0.75 * len(half)


def test_two_state_series_raise_nothing(world):
    series, results = world
    two = [s for s in series if s.kind == "twostate"]
    n = sum(1 for s in two for r in results if s.fingerprint in r.checked)
    false = [(s.case["id"], r.night) for s in two for r in results if s.fingerprint in r.kept or s.fingerprint in r.drifts]
    raw = sum(1 for s in two for r in results if s.fingerprint in r.raw)
    print(f"\ntwo-state series (100/108 us): {n} series-nights, {len(false)} confirmed alerts or drifts, {raw} raw")
    assert n >= 100 and false == []


def test_priors_are_fitted_per_provider_and_not_optimistic():
    pl = sim.pools()
    for p in ("cupy", "torch_compile", "torch_eager", "robocache"):
        pool = pl[p]["*"]
        print(f"\n{p}: {len(pool)} real deviations, sigma (90th pct) {sim.band(pool) * 100:.2f}%, "
              f"rms {math.sqrt(float(np.mean(pool ** 2))) * 100:.2f}%")
        assert regress.prior_noise(500.0, p) >= 0.9 * sim.band(sim.pool_for(pl, p, 500.0))
    # CuPy and torch.compile are measured several times noisier than robocache's kernels (issue 14)
    assert regress.prior_noise(500.0, "cupy") > 3 * regress.prior_noise(50.0, "robocache")
