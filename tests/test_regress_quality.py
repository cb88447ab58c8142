"""Can the alerts be trusted? Quality of ``regress.check`` on histories simulated from a noise model fitted to
real H200 measurements (tests/regress_sim.py; the simulated records are synthetic, the model is not).

- A/A: 20 nights of the full nightly grid with no change raise no alert on any night.
- Injected slowdowns of 5%, 10%, 20% in 24 random series at once (x3 seeds): detection rates within one and
  two nights, by the series' noise (sigma per run); asserted: 10% and more always within one night where
  sigma <= 1% and 90% within two nights where sigma is 1-2%; 5% always within two nights where sigma <= 1%;
  false alerts on the untouched series at most 5% of the true ones (Benjamini-Hochberg controls the false
  discovery rate; many true discoveries at once relax its threshold for the rest).
- Every night's check runs as the nightly job does: alerts, then a confirmation rerun of the alerted cases.
- The change point is placed at the commit that made the change, or one off (at least 97% of detections).
- Throttled runs never alert, even when they are the newest.
Run with ``-s`` to see the measured rates.
"""
from __future__ import annotations

import numpy as np
import pytest

from robocache.bench import regress

import regress_sim as sim

NIGHTS = 20


@pytest.fixture(scope="module")
def model():
    return sim.fit_noise_model()


@pytest.fixture(scope="module")
def cases():
    c = sim.nightly_cases()
    assert len(c) >= 200, "the committed H200 nightly asv records should cover the nightly grid"
    return c


def test_noise_model_fitted_from_h200_and_prior_is_not_optimistic(model):
    assert model.cases >= 40
    assert 0.002 < model.rel < 0.04
    print(f"\nnoise model from {model.cases} H200 cases: sigma(t) = hypot({model.rel:.4f}, {model.abs_us:.3f} us / t); "
          f"spread sd/model p50 {np.median(model.spread):.2f}, p90 {np.percentile(model.spread, 90):.2f}, "
          f"max {model.spread.max():.2f}")
    # compare()'s prior must not claim the machine is quieter than measured
    assert regress.PRIOR_REL >= model.rel
    assert regress.prior_noise(5.0) >= model.sigma(5.0)


def _night(records, n: int, cases, sig, rng, inject=None):
    """The nightly check after night ``n`` (nights 0..n-1 in the store): without and with the confirmation
    rerun of the alerted cases (as ``robocache-bench check --confirm`` does)."""
    upto = [r for r in records if int(r["run_id"][-3:]) < n]
    first = regress.check(upto)
    if not first.alerts:
        return first, []
    extra = sim.rerun(cases, sig, {c.key for c in first.alerts}, n - 1, rng, inject=inject)
    kept, _, unconfirmable = regress.confirm(first, extra)
    assert not unconfirmable  # the simulated rerun always measures
    return first, kept


def test_aa_twenty_nights_full_grid_no_alert(model, cases):
    rng = np.random.default_rng(20261121)
    recs, sig = sim.simulate(model, cases, NIGHTS, rng)
    raw = confirmed = changes = 0
    for n in range(regress.MIN_HISTORY + 1, NIGHTS + 1):
        first, kept = _night(recs, n, cases, sig, rng)
        raw += len(first.alerts)
        confirmed += len(kept)
        changes += len(first.changes)
    print(f"\nA/A: {len(cases)} series x {NIGHTS} nights, {NIGHTS - regress.MIN_HISTORY} nightly checks: "
          f"{raw} alerts before confirmation, {confirmed} after; {changes} significant changes in any direction")
    assert confirmed == 0
    assert raw <= 3, "the check alone should already be nearly silent on identical runs"


def _fp(c: dict) -> str:
    return regress.fingerprint({"machine": "sim-h200", "case_id": c["case"]["id"], "provider": c["case"]["provider"],
                                "dtype": c["case"]["dtype"], "timer": "cuda_event", "cache": "warm",
                                "grid_version": c["case"]["grid_version"], "frontend": "cli",
                                "input_sets": 1})


@pytest.mark.parametrize("size", [0.05, 0.10, 0.20])
def test_injected_slowdowns_found(model, cases, size):
    start, k = 15, 24
    classes = {"<=1%": [0, 0, 0], "1-2%": [0, 0, 0], ">2%": [0, 0, 0]}  # [one night, two nights, total]
    misplaced, false = [], []
    placed = [0, 0, 0]  # alerts whose first commit after is exact, one off, further
    for seed in range(3):
        rng = np.random.default_rng(1000 * seed + int(size * 100))
        hit = [int(i) for i in rng.choice(len(cases), size=k, replace=False)]
        inject = {i: (start, size) for i in hit}
        recs, sig = sim.simulate(model, cases, start + 2, rng, inject=inject)
        _, kept1 = _night(recs, start + 1, cases, sig, rng, inject)
        _, kept2 = _night(recs, start + 2, cases, sig, rng, inject)
        got1, got2 = {c.fingerprint: c for c in kept1}, {c.fingerprint: c for c in kept2}
        hit_fps = {_fp(cases[i]) for i in hit}
        false += [regress.alert_title(c) for c in kept1 + kept2 if c.fingerprint not in hit_fps]
        for i in hit:
            fp = _fp(cases[i])
            cls = "<=1%" if sig[i] <= 0.01 else "1-2%" if sig[i] <= 0.02 else ">2%"
            classes[cls][2] += 1
            classes[cls][0] += fp in got1
            classes[cls][1] += fp in got1 or fp in got2
            for a in (got1.get(fp), got2.get(fp)):
                if a is not None:
                    off = int(a.after.commit[:4]) - start
                    placed[min(abs(off), 2)] += 1
                    if abs(off) > 1:  # the issue asks for within one commit
                        misplaced.append((cases[i]["case"]["id"], a.before.commit[:4], a.after.commit[:4]))
    total = sum(v[2] for v in classes.values())
    one, two = sum(v[0] for v in classes.values()), sum(v[1] for v in classes.values())
    rates = "; ".join(f"sigma {k}: {v[0]}/{v[2]} in one night, {v[1]}/{v[2]} in two" for k, v in classes.items())
    print(f"\n+{size:.0%}: {one}/{total} found within one night, {two}/{total} within two ({rates})")
    print(f"  false alerts on the {3 * (len(cases) - k)} untouched series over the 6 checks: {len(false)} {false}")
    # FDR control, not zero: many true discoveries relax Benjamini-Hochberg's threshold for the rest
    assert len(false) <= max(1, 0.05 * two), false
    print(f"  change point placed: exact {placed[0]}, one commit off {placed[1]}, further {placed[2]} {misplaced}")
    # within one commit, but for heavy-tailed noise nights just before the change (measured: 2 of 93 at +10%)
    assert placed[2] <= 0.03 * sum(placed), misplaced
    quiet, mid = classes["<=1%"], classes["1-2%"]
    if size >= 0.10:  # 10% and more: always within one night where sigma <= 1%; sigma 1-2%: 90% in two
        assert quiet[0] == quiet[2] and mid[1] >= 0.9 * mid[2]
    else:  # 5%: always within two nights where sigma <= 1%
        assert quiet[1] == quiet[2]


def test_throttled_runs_never_alert(model, cases):
    rng = np.random.default_rng(7)
    n = len(cases)
    throttled = {night: {int(i) for i in rng.choice(n, size=n // 3, replace=False)} for night in (8, 12, 19)}
    recs, sig = sim.simulate(model, cases, NIGHTS, rng, throttled=throttled, throttle_factor=1.4)
    res, kept = _night(recs, NIGHTS, cases, sig, rng)
    assert kept == [], [regress.alert_title(c) for c in kept]
    assert res.excluded_reasons.get("throttled") == sum(len(v) for v in throttled.values())
    # the same slowdowns without the flag are found: the exclusion is what keeps them quiet
    for r in recs:
        r["health"]["throttled"] = False
    assert len(regress.check(recs).alerts) > 0
