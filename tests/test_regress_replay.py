"""The out-of-sample replay of the nightly check (issue 27), at CI's reduced size.

``robocache.bench.regressions.replay``: the nightly job's own calls (``changepoints.check`` with the CLI's screen,
then ``confirmation.confirm_alerts`` with reruns drawn at the series' true level) over the full nightly grid's
templates (both GPUs, every provider), nights drawn from the committed records' real run-to-run ratios of the
*other* fold of cases than the priors were fitted on. The full size and its figures: docs/regressions.md
("Quality out of sample"), ``python -m robocache.bench.regressions replay``.

The reduced size (``replay.SIZES["ci"]``: CI_REPLICATES = 4 independent replicates of a third of the templates,
only the targets' step sizes and slope; the first 4 of the 8 it had, at half the CPU) is seeded. One replicate's
A/A rate is heavy-tailed: most replicates measure 0.01-0.04 per 1,000, and now and then one series' false change,
sent to the rerun night after night, weighs 0.1-0.3 alone. The mean of a few such draws has no usable normal
bound, so the A/A test holds robust statistics of the replicates (it says which); the detection targets are
loosened by what a draw of this size can miss, and each still fails on a method that misses its target badly.

The power kept at 4 replicates (binomial, at the counts these seeds draw: 94 series in the +10% cell, 25 in the
+5% cell, 14 drifts; docs/regressions.md, "The CI size and its spread"): a method that finds +10% the night it
lands in 65% of series passes the 75% bar with probability 0.02 (0.0015 at 8 replicates); +5% within two nights
at 40% passes the 60% bar with 0.03 (0.003); drifts at 30% pass with 0.008 (0.0004). The confirmed count's
bound is 5 over 16,113 A/A series-nights: a method at 4 times the target passes it with 0.89 (0.70 at 8), so the
trimmed mean carries the A/A test: its bar is the issue's target, a third of it is measured here, so a method must
get about three times worse in false alerts to fail it. Measured, not only computed (docs/regressions.md has the
figures): the confirmation's p bound 200 times looser fails the A/A test (trimmed mean 0.082, largest 0.56), 50
times looser passes (0.047: still under the target); a screen thirty times stricter (SCREEN_P 0.001) fails the
detection test (+10% the night it lands: 68% of 94).

The call-cost series whose committed records carry the interleaved ratio are replayed on ratio nights (their
records carry ``dispatch.interleaved``, so the check judges the ratio, as at night): their own tests run them
alone, over more replicates than the CI size holds of them (one or two a replicate): the check's documents say
``measure: call_ratio``, a planted +10% ratio step is found, and A/A on ratio nights stays within the Poisson
99.9% bound at the target over its series-nights.
"""
from __future__ import annotations

import math

import numpy as np
import pytest

from robocache.bench import schema
from robocache.bench.regressions import changepoints, confirmation, noise, replay
from robocache.bench.regressions.records import synthetic, synthetic_env


CI_REPLICATES = replay.SIZES["ci"]["replicates"]
AA_TARGET_PER_1000 = 1000 * replay.AA_TARGET  # the A/A target: 0.05 confirmed per 1,000 series-nights
# the heaviest replicate's bound, in targets: one series' burst of false alerts may weigh this much in one replicate
AA_MAX_REPLICATE_TARGETS = 10


@pytest.fixture(scope="module")
def committed_world() -> dict:
    """The replay's world from the committed records (templates, each fold's pools and priors): built once for
    the module's tests that read it (each build loads and fits every committed record)."""
    return replay.world()


@pytest.fixture(scope="module")
def ci_run() -> dict:
    # two processes (the replicates are independent; one process would take twice the wall time)
    return replay.run("ci", jobs=2)


def test_replay_covers_the_full_nightly_grid_out_of_sample(committed_world):
    w = committed_world
    tpls = w["templates"]
    machines = {t.machine for t in tpls}
    providers = {t.case.provider for t in tpls}
    assert machines == {"nvidia-h100-x1", "nvidia-h200"}
    assert {"robocache", "torch_compile", "torch_eager", "cupy", "robocache@v1"} <= providers
    assert len(tpls) >= 500
    # out of sample: a fold's priors are fitted on the other fold's cases alone (their deviations and the fold's own
    # make up every deviation of the committed records), its nights drawn from its own cases' runs
    every = replay.load(replay.committed_dirs())
    whole = noise.fit_priors(every)
    for f in range(replay.FOLDS):
        own = noise.fit_priors([r for r in every if replay.fold_of(r.case) == f])
        for prov, per in whole.items():
            n_other = w["priors"][f].get(prov, {}).get("*", {}).get("n", 0)
            n_own = own.get(prov, {}).get("*", {}).get("n", 0)
            assert n_other + n_own == per["*"]["n"], prov
        # (a call-cost case's ratio cell names its provider "<provider>|host-ratio": the case is the provider's)
        ours = {(c[2], c[3], c[4].removesuffix(noise.RATIO_SUFFIX)) for c in w["pools"][f] if c[0] == "case"}
        assert ours and all(replay.fold_of(_case(i, d, p)) == f for i, d, p in ours)
    # every template draws from a pool of at least POOL_MIN real deviations, symmetric (pairs of runs both ways)
    for t in tpls[::25]:
        pool, _cell = replay.pool_for(w["pools"][t.fold], t)
        assert len(pool) >= replay.POOL_MIN and math.isclose(float(pool.sum()), 0.0, abs_tol=1e-9)


def test_replay_runs_the_nightly_jobs_own_calls(monkeypatch, committed_world):
    """The replay measures what `check --confirm` runs: changepoints.check with the CLI's screen, then the
    one confirmation loop the CLI calls (confirmation.confirm_alerts)."""
    calls = {"check": [], "confirm": 0}
    check, confirm_alerts = changepoints.check, confirmation.confirm_alerts

    def spy_check(*a, **k):
        calls["check"].append(k)
        return check(*a, **k)

    def spy_confirm(*a, **k):
        calls["confirm"] += 1
        return confirm_alerts(*a, **k)

    monkeypatch.setattr(changepoints, "check", spy_check)
    monkeypatch.setattr(confirmation, "confirm_alerts", spy_confirm)
    w = {**committed_world, "templates": committed_world["templates"][::40]}
    out = replay.replicate(w, 1, 1.0, 50)
    assert out and calls["check"] and calls["confirm"] == len(calls["check"])
    assert all(k["screen"] == changepoints.SCREEN_P and k["frontend"] == "cli" and k["machine"] for k in calls["check"])


def test_replay_aa_rate_at_ci_size(ci_run):
    """A/A: the expected confirmed false alerts (each alert sent to the rerun times its probability of being
    confirmed) per 1,000 series-nights, per replicate. Held: the mean of the replicates without the largest one (a
    trimmed mean) to the issue's target, 0.05 (a method at twice the target in most replicates fails; the heavy
    tail of one series is the next bound's); the largest replicate to AA_MAX_REPLICATE_TARGETS targets; the observed
    confirmed count to the Poisson 99.9% quantile at the target over these series-nights. The plain mean is printed
    (a single heavy replicate moves it by 0.04 at these seeds: 0.055 against a trimmed 0.015) and measured at full
    size by the documented command."""
    from scipy import stats

    t, sp = ci_run["targets"], ci_run["aa_spread"]
    print(f"\n{replay.markdown(ci_run)}")
    rates = sorted(sp["per_replicate_per_1000"])
    assert ci_run["replicates"] == CI_REPLICATES == len(rates) >= 4
    assert len({r["seed"] for r in ci_run["per_replicate"]}) == CI_REPLICATES  # independent: a seed each
    assert t["aa_series_nights"] >= 3000 * CI_REPLICATES // 2 and t["aa_sent"] >= 10 * CI_REPLICATES
    trimmed = sum(rates[:-1]) / (len(rates) - 1)
    assert trimmed <= AA_TARGET_PER_1000, (round(trimmed, 4), sp)
    assert rates[-1] <= AA_MAX_REPLICATE_TARGETS * AA_TARGET_PER_1000, sp
    # observed: at most the 99.9% quantile of a Poisson count at the target rate over these series-nights
    assert t["aa_confirmed"] <= stats.poisson.ppf(0.999, replay.AA_TARGET * t["aa_series_nights"]), t


def test_replay_detection_at_ci_size(ci_run):
    """The targets, loosened by what a draw of this size can miss: the counts held here are what the power in the
    module's doc is computed at (a smaller draw would make the bars weaker than it says)."""
    t = ci_run["targets"]
    # +10% the night it lands (noise <= 2%) and +5% within two nights (noise <= 1%): targets 90% and 80%
    assert t["ten_n"] >= 80 and t["ten_night_it_lands"] >= 0.75, t
    assert t["five_n"] >= 20 and t["five_within_two"] >= 0.6, t
    # drift +0.5%/night flagged before it totals +5% (noise <= 0.5%): target 90%
    assert t["drift_n"] >= 12 and t["drift_before_5pc"] >= 0.6, t
    # placement where the noise allows it: every step series carries its nights either side of the step, and the
    # report's counts are those nights' (replay.placeable). Where noise <= 2% most confirmed steps are placeable
    # (PLACEABLE_MIN of tests/test_regress_quality.py; nights taken against a wrong level leave few): measured at
    # these seeds 163 of 169, 160 of them placed right (docs/regressions.md)
    steps = [s for s in ci_run["every_series"] if s["kind"] == "step"]
    assert steps and all(isinstance(s["around"][0], float) for s in steps)
    near = [s for s in steps if s["noise"] <= 0.02 and any(x[0] - 1 >= s["start"] and x[2] for x in s["seen"])]
    can = [s for s in near if replay.placeable_around(s["around"], s["step"])]
    rows = [v for k, v in ci_run["measures"]["steps"].items() if replay._in(k.split("|")[1], 0.02)]
    assert [sum(r[k] for r in rows) for k in (6, 7)] == [len(near), len(can)]
    assert len(can) >= 0.85 * len(near), (len(can), len(near))


def test_the_oracle_power_is_a_reference_that_a_known_noise_sets():
    # a Gaussian pool of 1%: +10% on one night and five reruns (mean of six, 0.41% sd) is far beyond the A/A
    # target's quantile (3.9 sd = 1.6%): power ~1; +1% is not
    pool = np.random.default_rng(0).normal(0.0, 0.01, 4000)
    pool = np.concatenate([pool, -pool])
    assert replay.bounds(pool, 0.10, 1, 5) > 0.99
    assert replay.bounds(pool, 0.01, 1, 5) < 0.5


def _case(case_id: str, dtype: str = "float32", provider: str = "robocache") -> schema.Case:
    return schema.Case(id=case_id, op="resample", provider=provider, dtype=dtype, params={}, grid_version=2,
                       bytes=0, items=0, items_unit="trajectories")


def _rec(case_id: str, timer: str, t_us: float, run: int, commit: str = "a" * 40) -> schema.Record:
    r = synthetic(run_id=f"20260101T0{run}0000Z-aaaaaa", created=f"2026-01-01T0{run}:00:00+00:00", git_commit=commit,
                  case=_case(case_id), t_us=t_us, noise=0.01, timer=timer, env=synthetic_env("nvidia-h100-x1"),
                  suite="quick")
    r.synthetic = False  # stands for a measured record: the pools leave synthetic ones out
    return r


def test_call_cost_deviations_never_enter_the_device_pools():
    """One A/A pair's call-cost cases (host_loop) moved 23-33% between runs; pooled with the device times of the
    same provider and bucket, they gave quiet kernels' series false alerts in the replay (issue 27). Their pools
    are apart, as the priors are (noise.HOST_TIMERS); a host-timed template draws from them first."""
    dev, host = "resample/B4-S100-T50-D32", "resample/dispatch-B1-S4-T2-D1"
    recs = [_rec(dev, "cuda_event", 10.0, 1), _rec(dev, "cuda_event", 10.1, 2),
            _rec(host, "host_loop", 10.0, 1), _rec(host, "host_loop", 13.0, 2)]
    cells = {}
    for f in range(replay.FOLDS):
        cells.update(replay.pools(recs, f))
    b = noise._bucket(10.0)
    d_dev, d_host = abs(math.log(10.1 / 10.0)) / math.sqrt(2), abs(math.log(13.0 / 10.0)) / math.sqrt(2)
    for cell in [("machine", "nvidia-h100-x1", "robocache", b), ("bucket", "robocache", b), ("all",)]:
        assert np.allclose(np.abs(cells[cell]), d_dev), cell  # the device case's pair alone
    for cell in [("machine", "nvidia-h100-x1", "robocache|host", b), ("provider", "robocache|host"), ("all|host",)]:
        assert np.allclose(np.abs(cells[cell]), d_host), cell
    host_tpl = replay.Template("nvidia-h100-x1", _case(host), 10.0, 0.01, "host_loop")
    cs = replay._cells(host_tpl.machine, host, "float32", "robocache", host_tpl.t_us, host_tpl.timer)
    assert cs[1] == ("machine", "nvidia-h100-x1", "robocache|host", b) and cs[-1] == ("all",)
    dev_cells = replay._cells("nvidia-h100-x1", dev, "float32", "robocache", 10.0, "cuda_event")
    assert not any("|host" in str(x) for c in dev_cells for x in c)


def test_records_of_k_processes_give_no_replay_deviations():
    """The replay draws one-process nights (the check's priors are one-process fits; noise.fit_priors keeps
    K-process runs apart): a run timed in K processes (run --processes K) forms no run-to-run ratio, neither with
    a one-process run of its commit nor with another K-process run."""
    case = "resample/B4-S100-T50-D32"
    one = [_rec(case, "cuda_event", 10.0, 1), _rec(case, "cuda_event", 10.1, 2)]
    three = [_rec(case, "cuda_event", t, n) for t, n in ((12.0, 3), (12.5, 4))]
    for r in three:
        r.processes = [r.metrics.time_us.p50] * 3
    cells = {}
    for f in range(replay.FOLDS):
        cells.update(replay.pools(one + three, f))
    d_one = abs(math.log(10.1 / 10.0)) / math.sqrt(2)
    assert cells and all(np.allclose(np.abs(v), d_one) for v in cells.values())  # the one-process pair alone


def test_aa_spread_is_per_replicate_and_names_the_heaviest_series():
    """The A/A estimate's spread: each replicate's expected rate over its own A/A series-nights (the nights before
    a series' change), their mean and standard deviation, and the series that weigh most."""
    def series(key, start, pcs, sent):
        return {"machine": "m", "key": key, "cell": "case", "noise": 0.01, "two_state": False, "start": start,
                "seen": [[n, s, False, False, False, pc] for n, (pc, s) in enumerate(zip(pcs, sent), start=6)]}

    quiet = series("a", 10 ** 6, [0.0] * 1000, [False] * 1000)  # 1,000 A/A series-nights, nothing sent
    heavy = series("b", 10 ** 6, [0.0] * 997 + [0.2, 0.3, 0.5], [False] * 997 + [True] * 3)
    changed = series("c", 10, [0.9] * 20, [True] * 20)  # a step at night 10: its 5 nights before it count, not after
    sp = replay.aa_spread([[quiet, changed], [heavy, quiet]])
    # replicate 0: 1,005 A/A nights, expected 0.9 * 5 = 4.5; replicate 1: 2,000 nights, expected 1.0
    assert sp["per_replicate_per_1000"] == [round(1000 * 4.5 / 1005, 4), 0.5]
    assert math.isclose(sp["mean_per_1000"], (1000 * 4.5 / 1005 + 0.5) / 2)
    assert math.isclose(sp["sd_per_1000"], float(np.std([1000 * 4.5 / 1005, 0.5], ddof=1)))
    assert [(h["key"], h["sent"], h["expected"]) for h in sp["heaviest"]] == [("c", 5, 4.5), ("b", 3, 1.0)]
    assert replay.aa_spread([[quiet]])["sd_per_1000"] is None  # one replicate: no spread (and valid JSON)


def test_step_delays_pairs_one_replicate_step_by_step():
    """The memory's cost, measured on one replicate run twice (the same nights and reruns): per N the steps each
    run confirmed within N nights after landing, and the steps the first confirmed later or never."""
    def s(key, start, confirmed_at, kind="step"):
        seen = [[n, True, n == confirmed_at, False, False, 0.0, 0] for n in range(6, 30)]
        return {"machine": "m", "key": key, "kind": kind, "start": start, "step": 0.05, "noise": 0.01, "seen": seen}

    on = [s("a", 10, 11), s("b", 10, 20), s("c", 10, None), s("d", 10, None, kind="aa")]
    off = [s("a", 10, 11), s("b", 10, 12), s("c", 10, 15), s("d", 10, 7, kind="aa")]
    got = replay.step_delays(on, off, within=(1, 2, 5))
    assert got["steps"] == 3 and got["within"] == {1: [1, 1], 2: [1, 2], 5: [1, 3]}
    assert [(x["key"], x["a"], x["b"]) for x in got["later"]] == [("b", 10, 2)]
    assert [(x["key"], x["a"], x["b"]) for x in got["never"]] == [("c", None, 5)]
    with pytest.raises(ValueError, match="not one replicate"):
        replay.step_delays(on, off[:3])
    with pytest.raises(ValueError, match="not one replicate"):
        replay.step_delays(on, [s("a", 9, 11)] + off[1:])


def test_a_step_series_keeps_the_nights_either_side_of_its_step():
    """What the placement is judged on (replay.placeable, as tests/test_regress_quality.py's _nights_around): the
    last night before the step the check reads and the step's first night, as log-ratios to the level before. A
    night flagged contended is no point of the check's: skipped before the step; on the step's first night, no
    record of its commit is read, so the step cannot be placed."""
    tpl = replay.Template("nvidia-h100-x1", _case("resample/a"), 20.0, 0.01)
    pool = np.array([-0.01, 0.01] * 8)

    def plan(nights: dict[int, tuple[float, bool]], kind: str = "step") -> replay.Plan:
        p = replay.Plan(tpl=tpl, pool=pool, cell="case", kind=kind, start=10, step=0.10)
        for n, (x, flagged) in sorted(nights.items()):
            p.saw(n, 20.0 * math.exp(x), flagged)
        return p

    def placeable(p: replay.Plan) -> bool:
        return replay.placeable_around(p.around, p.step)

    mid = math.log1p(0.10) / 2  # 4.77%: each night on its own level's side of it
    on = math.log1p(0.10)
    ok = plan({8: (0.01, False), 9: (0.02, False), 10: (on - 0.03, False), 11: (0.5, False)})
    assert ok.around == pytest.approx([0.02, on - 0.03]) and placeable(ok) is True
    # the step's first night nearer the level before (under the midpoint): a neighbour is the likelier split
    assert placeable(plan({9: (0.0, False), 10: (mid - 0.005, False)})) is False
    # the last night before it nearer the step's level
    assert placeable(plan({9: (mid + 0.005, False), 10: (on, False)})) is False
    # a flagged night before the step is skipped (the check drops it): the night before it is the one read
    skipped = plan({8: (0.0, False), 9: (mid + 0.3, True), 10: (on, False)})
    assert skipped.around == pytest.approx([0.0, on]) and placeable(skipped) is True
    # the step's own first night flagged: no record of its commit, not placeable whatever its value
    gone = plan({9: (0.0, False), 10: (on, True), 11: (on, False)})
    assert gone.around[1] is None and placeable(gone) is False
    assert plan({9: (0.0, False)}, kind="aa").around == [None, None]  # only a step's nights are kept


def test_placement_is_reported_where_the_noise_allows_it():
    """measures() counts, per provider, band and size, the confirmed steps the noise lets be placed and those of them
    placed right; markdown() shows both next to the placement over every confirmed step."""
    on = math.log1p(0.10)

    def step(around, confirmed: bool, placed: bool) -> dict:
        seen = [[n, False, False, False, False, 0.0] for n in range(6, 11)]
        seen.append([11, confirmed, confirmed, False, placed, 0.0])  # the check right after the step's first night
        return {"machine": "m", "provider": "robocache", "key": "k", "noise": 0.008, "kind": "step", "step": 0.10,
                "slope": 0.0, "start": 10, "two_state": False, "contended": False, "bound": {}, "around": around,
                "seen": seen}

    series = [step([0.0, on - 0.01], True, True),  # placeable, placed right
              step([0.0, 0.02], True, False),  # the first night on the step under the midpoint: not placeable
              step([0.06, on], True, True),  # the night before over it: not placeable, placed right all the same
              step([0.01, on - 0.04], True, False),  # placeable, placed on a neighbour
              step([0.0, None], True, False),  # the step's first night dropped (contended): not placeable
              step([0.0, on], False, False)]  # not confirmed: not counted
    late = step([0.0, on - 0.01], False, False)  # confirmed (and placed) only AFTER + 2 nights after it landed
    late["seen"].append([10 + replay.AFTER + 2, True, True, False, True, 0.0])
    series.append(late)
    m = replay.measures(series)
    row = m["steps"]["robocache|0.5-1%|0.1"]
    assert row[0] == 7 and row[3] == 5 and row[4] == 3  # the existing counts: series, within AFTER, placed
    assert row[6:] == [6, 3, 2]  # confirmed, of them placeable, of those placed right
    doc = {"replicates": 1, "templates": 6, "share": 1.0, "seed": 0, "series": 6, "measures": m,
           "targets": replay.targets(m)}
    text = replay.markdown(doc)
    assert "| placed | placeable, of those confirmed | placed right among placeable |" in text
    # "placed" over the steps confirmed at all (the late one too), as the new columns
    assert "| +10% | 7 | 71% | 71% | 71% | 3/6 | 3/6 (50%) | 2/3 (67%) |" in text, text
    # a document written before these were counted (six counts a row) shows none, not zeros, and its old base
    old = {**m, "steps": {k: v[:6] for k, v in m["steps"].items()}}
    assert "| +10% | 7 | 71% | 71% | 71% | 3/5 | - | - |" in replay.markdown({**doc, "measures": old})


# ------------------------------------------------------------------ call-cost series on their interleaved ratio

@pytest.fixture(scope="module")
def ratio_world(committed_world) -> dict:
    """The replay's world restricted to the call-cost templates whose committed records carry the interleaved
    ratio (each check call then sees only them: the screen and the confirmation are per series, so their outcome
    is the full world's)."""
    w = committed_world
    tpls = [t for t in w["templates"] if t.ratio is not None]
    assert tpls and all(t.timer in noise.HOST_TIMERS for t in tpls)
    return {**w, "templates": tpls}


def test_a_call_cost_template_with_a_ratio_draws_ratio_nights(ratio_world):
    """Its pool is the run-to-run deviations of its interleaved ratio's p50 (pairs of runs of one commit, the
    template's own fold), and each night's record carries a schema-valid `dispatch.interleaved` whose ratio is the
    night's value, read back by records.call_ratio (the one reader of a record's ratio)."""
    import msgspec

    from robocache.bench.regressions import records

    w = ratio_world
    for t in w["templates"]:
        pool, cell = replay.pool_for(w["pools"][t.fold], t)
        assert cell.startswith("ratio") and len(pool) >= replay.POOL_MIN
        assert math.isclose(float(pool.sum()), 0.0, abs_tol=1e-9)
        # the ratio's pool, not the host time's: its deviations are a few percent, the host time's 20-70%
        host, host_cell = replay.pool_for(w["pools"][t.fold], replay.Template(t.machine, t.case, t.t_us, t.within,
                                                                              t.timer))
        assert not host_cell.startswith("ratio") and replay.band_sigma(pool) < replay.band_sigma(host) / 3
        p = replay.Plan(tpl=t, pool=pool, cell=cell)
        assert p.on_ratio and p.path == "ratio"
        r = replay.record(p, 1.1 * t.ratio, 3)
        msgspec.convert(schema.to_dict(r.dispatch), schema.Dispatch)  # the schema's constraints hold
        got, sigma = records.call_ratio(r)
        assert got == pytest.approx(1.1 * t.ratio) and 0 < sigma < 0.05
        assert r.metrics.time_us.p50 == pytest.approx(1.1 * t.t_us)  # the public call's host time moves with it
        # the same template without the ratio keeps the host-time path
        assert replay.Plan(tpl=replay.Template(t.machine, t.case, t.t_us, t.within, t.timer), pool=host,
                           cell=host_cell).path == "host"


def _spy_checks(monkeypatch) -> list:
    from robocache.bench.regressions import alerts

    docs: list = []
    check = changepoints.check

    def spy(*a, **k):
        res = check(*a, **k)
        docs.append(res)
        return res

    monkeypatch.setattr(changepoints, "check", spy)
    return [docs, alerts.alerts_json]


def test_a_planted_ratio_step_is_found_and_judged_on_the_ratio(ratio_world, monkeypatch):
    """+10% of the interleaved ratio, planted after 6-30 nights of ratio history on every call-cost series with a
    ratio pool (seeded): the check's document says the series is judged by its call ratio, and the step is
    confirmed within the ten nights measured in nearly every series (measured at these seeds: 29 of 30 within ten
    nights, 20 within two, 13 the night it lands: the series are 2.2% noise, past the +10% target's 2%). A replay
    that drew ratio nights into records without the ratio would be judged on time, and one that judged the ratio
    with the host time's prior (``replay.world(ratio_in_sample=False)``) finds none (0 of 24 at seeds 0-7)."""
    docs, alerts_json = _spy_checks(monkeypatch)
    series = []
    for seed in range(10):
        series += replay.replicate(ratio_world, seed, 1.0, 100, steps=(0.10,), kind="step")
    assert {s["path"] for s in series} == {"ratio"} and all(s["step"] == 0.10 for s in series)
    measures = {a["series"].get("measure") for res in docs for a in alerts_json(res)["alerts"]}
    assert measures == {noise.CALL_RATIO}, measures
    assert all(s["measures"] == [noise.CALL_RATIO] for s in series if s["measures"])
    m = replay.measures(series)
    n, one, two, ten, placed, ran = (sum(v[k] for v in m["steps"].values()) for k in range(6))
    assert n == len(series) >= 30 and ran == n
    assert ten >= 0.8 * n and two >= 0.5 * n and placed >= 0.7 * ten, m["steps"]


def test_aa_on_ratio_nights_stays_within_the_target(ratio_world, monkeypatch):
    """A/A on ratio nights (every call-cost series with a ratio pool unchanged, 40 seeded replicates: 4,188 A/A
    series-nights). Held: the expected confirmed false alerts (each alert sent to the rerun times its probability
    of being confirmed, the replay's A/A measure) per 1,000 series-nights at most the issue's target, 0.05, and the
    observed confirmed count (and false drifts) at most the Poisson 99.9% quantile at the target over these
    series-nights (3 here). Measured: 4 sent to the rerun, 0 confirmed, 0.005 expected (0.001 per 1,000). The
    expected rate is the test's teeth (a method whose expected rate over these nights is past the target fails
    it); the count alone passes a method
    at 0.5 per 1,000 with probability 0.84, at 2 per 1,000 with 0.03 (Poisson). A ratio prior ten times too narrow
    (0.32% for 3.21%: an experiment, not kept) measured 128 sent, 1 confirmed, 0.036 expected per 1,000: still
    under the target, as the confirmation's reruns and the series' own noise guard it, so it passes."""
    from scipy import stats

    docs, _ = _spy_checks(monkeypatch)
    series = []
    for seed in range(100, 140):
        series += replay.replicate(ratio_world, seed, 1.0, 200, kind="aa")
    assert {s["path"] for s in series} == {"ratio"} and {s["kind"] for s in series} == {"aa"}
    t = replay.targets(replay.measures(series))
    nights = t["aa_series_nights"]
    assert nights >= 4000
    bound = stats.poisson.ppf(0.999, replay.AA_TARGET * nights)
    assert t["aa_expected_per_1000"] <= AA_TARGET_PER_1000, t
    assert t["aa_confirmed"] + t["aa_false_drifts"] <= bound, t
    # the check judged these series on their ratio every night they were checked (none of them fell to time)
    checked = {fp for res in docs for fp in res.checked}
    assert checked and all(not any(b.kind == "method" for b in res.breaks) for res in docs)
