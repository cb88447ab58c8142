"""The confirmation's memory (issue 27): a change point refuted on earlier nights is tested at a spent level.

The same change point, proposed night after night from the same history, shares one level over its looks
(``confirmation.spent``): each refutation counts, and the next night's check reads them back from the previous
night's ``check --json`` (``--refuted-before``).
Records here are synthetic fixtures (``"synthetic": True`` via ``test_store.make_record``).
"""
from __future__ import annotations

import json
import math

import numpy as np
import pytest
from test_regress import _noisy, series
from test_regress_reruns import _check, _rerun, stepped  # noqa: F401  (the fixture)
from test_store import make_env

from robocache.bench import regressions as regress
from robocache.bench import schema, store
from robocache.bench.regressions import confirmation
from robocache.bench.regressions.memory import Memory


def test_the_looks_at_one_change_point_share_one_level_down_to_a_floor():
    p = regress.CONFIRM_P
    assert confirmation.spent(p, 1) == p  # the night a step lands keeps the whole level
    assert confirmation.spent(p, 2) == pytest.approx(p / 3)
    floor = confirmation.spent(p, confirmation.SPENT_LOOKS)
    assert all(confirmation.spent(p, k + 1) <= confirmation.spent(p, k) for k in range(1, 50))
    assert all(confirmation.spent(p, k) == floor for k in range(confirmation.SPENT_LOOKS, 1000))
    # the floor stays above what the series-tails check can show with 5 reruns (one spare) from 6 nights before the
    # change and with 3 reruns from 7, (0.5 / (n + 1)) ** runs; and the held rescue keeps a floor too
    from scipy import stats
    assert stats.binom.sf(3, 5, 0.5 / 7) <= floor and (0.5 / 8) ** 3 <= floor
    assert confirmation.spent(regress.CONFIRM_P_HELD, 10**6) >= floor


def test_a_strong_step_refuted_many_times_still_confirms(monkeypatch):
    """The spent level's floor (issue 27's review): a real +10% step on a 2% series, 8 nights before it, whose
    reruns were refuted on 29 nights, is still confirmed at its 30th look by reruns at its level. Spent without a
    floor, its level (2e-6) fell under the least the series-tails check can show, (0.5 / 9) ** 3 = 1.7e-4 with 3
    reruns: it could never be confirmed again."""
    c, ref, sigma = _strong_step()
    assert not confirmation._held(c, ref, regress.FLOOR)
    assert _p_confirm(c, ref, sigma, 1) > 0.95
    assert _p_confirm(c, ref, sigma, 30) > 0.95
    monkeypatch.setattr(confirmation, "SPENT_LOOKS", 10**6)  # the level spent without a floor
    assert _p_confirm(c, ref, sigma, 30) == 0.0


def _strong_step() -> tuple[regress.Change, float, float]:
    """8 nights of a 2%-noise series, then 3 nights +10%: the alert, its level before (log), the noise."""
    vals = _noisy(5, n=8, sigma=0.02) + [v * 1.10 for v in _noisy(6, n=3, sigma=0.02)]
    res = regress.check(series(vals, provider="numpy"), screen=regress.SCREEN_P)
    assert len(res.alerts) == 1
    c = res.alerts[0]
    return c, confirmation._ref(c), 0.02


def _p_confirm(c: regress.Change, ref: float, sigma: float, looks: int) -> float:
    """The chance that reruns at the step's level (its noise, both looks as check --confirm measures) confirm it."""
    rng = np.random.default_rng(0)
    c.looks = looks
    first = ref + math.log(1.10) + rng.normal(0.0, sigma, (4000, regress.CONFIRM_RUNS))
    ok = confirmation.rerun_test(c, first)[0]
    more = confirmation.rerun_more(c, first, ok=ok)
    extra = ref + math.log(1.10) + rng.normal(0.0, sigma, (int(more.sum()), regress.CONFIRM_MORE))
    ok[more] = confirmation.rerun_test(c, np.concatenate([first[more], extra], axis=1))[0]
    return float(ok.mean())


def test_a_later_look_needs_stronger_reruns():
    """Reruns that confirm a change point at its first look do not at its tenth, when nine nights' reruns refuted
    it (nothing about the nights changed, the level is shared, at its floor from the second look on); far slower
    reruns still do."""
    c, ref, _ = _strong_step()
    ratios = np.linspace(1.0, 1.3, 301)
    xs = ref + np.log(ratios)[:, None] + np.array([[-0.004, 0.0, 0.004]])
    c.looks = 1
    first = confirmation.rerun_test(c, xs)[0]
    c.looks = 10
    tenth = confirmation.rerun_test(c, xs)[0]
    assert first.any() and tenth.any() and not (tenth & ~first).any()
    assert ratios[first.argmax()] < ratios[tenth.argmax()]  # the smallest rerun ratio confirmed is larger


def test_confirm_alerts_counts_the_looks_that_refuted(stepped):  # noqa: F811
    hist_dir, hist, ref = stepped
    looked = Memory()

    def at(ratio):
        def measure(items, times):
            return [_rerun(hist, math.exp(ref) * ratio, k) for k in range(times)]
        return measure

    for night in (1, 2, 3):
        res = regress.check(store.load(hist_dir).records, screen=regress.SCREEN_P)
        refuted = confirmation.confirm_alerts(res, at(1.0), machine=None, looked=looked)
        assert len(refuted) == 1 and refuted[0].looks == night
        assert [(e.change_id, e.looks) for e in looked.entries] == [(refuted[0].change_id, night)]
        assert (f"look {night} at this change point" in refuted[0].confirm_note) is (night > 1)
    # without a memory every night is a first look, and a kept alert adds nothing to it
    res = regress.check(store.load(hist_dir).records, screen=regress.SCREEN_P)
    assert confirmation.confirm_alerts(res, at(1.0), machine=None)[0].looks == 1
    res = regress.check(store.load(hist_dir).records, screen=regress.SCREEN_P)
    assert not confirmation.confirm_alerts(res, at(1.12), machine=None, looked=(mem := Memory()))
    assert res.alerts[0].confirmed and not mem.entries


def test_check_carries_the_memory_from_night_to_night(stepped, tmp_path, capsys):  # noqa: F811
    """--refuted-before reads the previous night's --json: its refuted change points are at a later look tonight,
    and tonight's --json carries the memory on (for the series still checked)."""
    hist_dir, hist, ref = stepped
    d = tmp_path / "r"
    for k in (1, 2, 3):
        store.write_records(d, make_env(), [_rerun(hist, math.exp(ref) * 1.0, k)], name=f"confirm-{k}")
    rc, doc, _ = _check(capsys, str(hist_dir), "--reruns", str(d))
    assert rc == 0 and len(doc["refuted"]) == 1
    (first,) = doc["refuted_looks"]
    assert first["looks"] == 1 and first["fingerprint"] == doc["refuted"][0]
    prev = tmp_path / "night1.json"
    prev.write_text(json.dumps(doc))
    rc, doc2, _ = _check(capsys, str(hist_dir), "--reruns", str(d), "--refuted-before", str(prev))
    # (the same reruns read again stand for a second night's: pooled with the first night's, which the memory kept)
    assert len(first["rerun_us"]) == regress.CONFIRM_RUNS
    assert rc == 0 and doc2["refuted_looks"] == [{**first, "looks": 2, "rerun_us": first["rerun_us"] * 2}]
    # a change point of a series not checked tonight is forgotten; one of a checked series not alerted is kept
    gone = {"change_id": "a" * 12, "fingerprint": "b" * 12, "looks": 4}
    kept = {"change_id": "c" * 12, "fingerprint": first["fingerprint"], "looks": 3}
    prev.write_text(json.dumps({**doc, "refuted_looks": [gone, kept, first]}))
    rc, doc3, _ = _check(capsys, str(hist_dir), "--reruns", str(d), "--refuted-before", str(prev))
    assert sorted(x["change_id"] for x in doc3["refuted_looks"]) == [first["change_id"], "c" * 12]
    schema.alerts_doc(doc3)


def test_a_night_without_confirmation_carries_the_memory_on(stepped, tmp_path, capsys):  # noqa: F811
    """A check without --confirm or --reruns looks at nothing again: the memory goes on into its --json unchanged
    (a manual nightly run without CONFIRM must not wipe what the nights before it refuted from the results branch);
    a change point of a series not checked is still not carried on."""
    hist_dir, hist, ref = stepped
    _, doc, _ = _check(capsys, str(hist_dir))
    fp = doc["checked"][0]
    prev = tmp_path / "night1.json"
    prev.write_text(json.dumps({"schema": "robocache-alerts/1", "alerts": [], "refuted_looks": [
        {"change_id": "c" * 12, "fingerprint": fp, "looks": 3}, {"change_id": "a" * 12, "fingerprint": "b" * 12,
                                                                 "looks": 2}]}))
    rc, doc, err = _check(capsys, str(hist_dir), "--refuted-before", str(prev))
    assert rc == 1 and doc["refuted_looks"] == [{"change_id": "c" * 12, "fingerprint": fp, "looks": 3}], err
    assert doc["confirm_asked"] is False


def test_refuted_before_errors(stepped, tmp_path, capsys):  # noqa: F811
    hist_dir, _, _ = stepped
    js = hist_dir.parent / "alerts.json"
    (tmp_path / "r").mkdir()
    # a path that is not there, or a folder: a usage error before anything is written
    for bad, why in ((tmp_path / "missing.json", "no such file"), (hist_dir, "a folder")):
        rc, _, err = _check(capsys, str(hist_dir), "--reruns", str(tmp_path / "r"), "--refuted-before", str(bad))
        last = err.strip().splitlines()[-1]
        assert rc == 2 and "--refuted-before" in last and why in last, err
        assert not js.exists()
    # a document of an older writer (no refuted_looks) is an empty memory
    old = tmp_path / "old.json"
    old.write_text(json.dumps({"schema": "robocache-alerts/1", "alerts": []}))
    rc, doc, _ = _check(capsys, str(hist_dir), "--reruns", str(tmp_path / "r"), "--refuted-before", str(old))
    assert rc == 1 and doc["refuted_looks"] == []


@pytest.mark.parametrize("text", [
    '{"schema": "robocache-alerts/1", "alerts": [], "refuted_looks": [{"looks": 0}]}',  # invalid entry
    '{"schema": "robocache-alerts/1", "alerts": [',  # truncated (a half-written or cut-off file)
    "",  # empty
    '{"schema": "robocache-alerts/2", "alerts": [], "refuted_looks": []}',  # a newer writer's
    "[1, 2]",
])
def test_an_unreadable_memory_is_warned_about_and_the_check_runs(stepped, tmp_path, capsys, text):  # noqa: F811
    """The nightly job passes the newest alerts.json of the results branch: a check that refused to run on a bad
    one would write no alerts.json, leave that file the newest and fail every night after. One warning line, the
    check runs with every change point at its first look, and tonight's --json starts the memory again."""
    hist_dir, hist, ref = stepped
    d = tmp_path / "r"
    for k in (1, 2, 3):
        store.write_records(d, make_env(), [_rerun(hist, math.exp(ref) * 1.0, k)], name=f"confirm-{k}")
    bad = tmp_path / "bad.json"
    bad.write_text(text)
    rc, doc, err = _check(capsys, str(hist_dir), "--reruns", str(d), "--refuted-before", str(bad))
    warned = [line for line in err.splitlines() if "--refuted-before" in line]
    assert rc == 0 and len(warned) == 1 and warned[0].startswith("warning:"), err
    assert "without the confirmation's memory" in warned[0]
    assert len(doc["refuted"]) == 1 and [x["looks"] for x in doc["refuted_looks"]] == [1]


def test_memory_of_series_not_checked_tonight_is_reported(stepped, tmp_path, capsys):  # noqa: F811
    """Another machine's file (or another suite's): its change points match no series checked here; the check says
    so in one line instead of dropping them silently."""
    hist_dir, hist, ref = stepped
    d = tmp_path / "r"
    for k in (1, 2, 3):
        store.write_records(d, make_env(), [_rerun(hist, math.exp(ref) * 1.0, k)], name=f"confirm-{k}")
    other = tmp_path / "other.json"
    other.write_text(json.dumps({"schema": "robocache-alerts/1", "alerts": [], "refuted_looks": [
        {"change_id": "a" * 12, "fingerprint": "b" * 12, "looks": 4},
        {"change_id": "c" * 12, "fingerprint": "b" * 12, "looks": 2}]}))
    rc, doc, err = _check(capsys, str(hist_dir), "--reruns", str(d), "--refuted-before", str(other))
    said = [line for line in err.splitlines() if "not checked tonight" in line]
    assert rc == 0 and len(said) == 1 and "2 of 2 remembered change point(s) are of 1 series" in said[0], err
    assert [x["looks"] for x in doc["refuted_looks"]] == [1]


# ------------------------------------------------------------------ the memory's key (series and runs, not change id)

def _pt(night: int) -> regress.changepoints.Point:
    return regress.changepoints.Point(run_id=f"run{night:03d}", commit=f"{night:04d}" + "c" * 36,
                                      created=f"2026-01-{night + 1:02d}T03:00:00+00:00", log_t=0.0, within=0.01,
                                      suite="nightly")


def _change(after: int, tonight: int, fp: str = "f" * 12, drift: bool = False) -> regress.Change:
    """A change point between nights after-1 and after, checked on night ``tonight`` (synthetic)."""
    return regress.Change(series={}, fingerprint=fp, index=after, n_before=after, n_after=tonight - after + 1,
                          ratio=1.1, ratio_ci=(1.05, 1.15), p_value=1e-4, before=_pt(after - 1), after=_pt(after),
                          latest=True, sigma=0.01, key="k", tonight=_pt(tonight), drift=object() if drift else None)


def _refute(m: Memory, c: regress.Change) -> regress.Change:
    confirmation.change_looks(c, m)
    m.refuted(c)
    return c


def test_a_change_point_moved_by_one_night_keeps_its_looks():
    """Issue 27's review: the change id (series and commit range) moved with the estimated location in 7% of
    re-proposals, and each move reset the spent budget. The memory matches the series and the runs around the
    change point: a re-proposal one night earlier or later is the same change point (its change id is not)."""
    m = Memory()
    first = _refute(m, _change(10, 12))
    later = _change(11, 13)  # the location moved one night later; tonight (13) is not its first run after
    assert later.change_id != first.change_id and confirmation.change_looks(later, m) == 2
    m.refuted(later)
    earlier = _change(10, 14)  # and back
    assert confirmation.change_looks(earlier, m) == 3 and len(m) == 1
    m.refuted(earlier)
    assert confirmation.change_looks(_change(9, 15), m) == 4  # one night earlier again
    # two nights off is another change point; another series is another series
    assert confirmation.change_looks(_change(12, 15), m) == 1
    assert confirmation.change_looks(_change(10, 15, fp="e" * 12), m) == 1


def test_a_step_landing_tonight_next_to_a_refuted_one_is_a_first_look():
    """A false change refuted on the newest night, then a real step the night after: the step's change point is one
    night later and shares a run with the refuted one, but its first run after is tonight's newest, which no
    earlier night saw: it keeps the whole level (the night a step lands)."""
    m = Memory()
    _refute(m, _change(12, 12))
    assert confirmation.change_looks(_change(13, 13), m) == 1
    assert confirmation.change_looks(_change(12, 13), m) == 2  # the same place, one night on


def test_a_drift_matches_only_its_own_window_start():
    m = Memory()
    d = _refute(m, _change(8, 20, drift=True))
    assert confirmation.change_looks(_change(8, 21, drift=True), m) == 2
    assert confirmation.change_looks(_change(9, 21, drift=True), m) == 1  # the window slid: another window
    assert confirmation.change_looks(_change(8, 21), m) == 1  # a step at that place is not the drift
    assert d.looks == 1


def test_an_older_writers_entry_matches_its_change_id():
    c = _change(10, 12)
    m, notes = Memory.from_json([{"change_id": c.change_id, "fingerprint": c.fingerprint, "looks": 2}])
    assert not notes and confirmation.change_looks(c, m) == 3
    assert confirmation.change_looks(_change(11, 13), m) == 1  # no runs to match a moved location on
    m.refuted(c)
    (e,) = m.to_json()
    assert e == {"change_id": c.change_id, "fingerprint": c.fingerprint, "looks": 3, "kind": "step",
                 "before": "run009", "after": "run010"}
    doc = {"schema": "robocache-alerts/1", "alerts": [], "refuted_looks": m.to_json()}
    assert schema.alerts_doc(doc).refuted_looks[0].after == "run010"
    back, _ = Memory.from_json(schema.to_dict(r) for r in schema.alerts_doc(doc).refuted_looks)
    assert confirmation.change_looks(_change(11, 13), back) == 4


# ------------------------------------------------------------------ pruning and bounds

def test_the_memory_is_pruned_to_what_can_match_again():
    """Entries that can never be matched again are dropped when the memory is written: a series not checked
    tonight, a change point whose first run after left its series' checked window (or is gone), a drift whose
    window start is farther back than the longest drift window reaches from tomorrow's night."""
    from robocache.bench.regressions import memory

    m = Memory()
    _refute(m, _change(10, 12))  # kept: in the window
    _refute(m, _change(3, 12, fp="a" * 12))  # its first run after left the window below
    _refute(m, _change(20, 40, fp="b" * 12, drift=True))  # 20 nights back from night 40 (the window's last): dropped
    _refute(m, _change(25, 40, fp="c" * 12, drift=True))  # 15 back: a 20-night window reaches it tomorrow
    _refute(m, _change(10, 12, fp="d" * 12))  # a series not checked tonight
    old, _ = Memory.from_json([{"change_id": "e" * 12, "fingerprint": "f" * 12, "looks": 2}])  # an older writer's
    m.entries += old.entries
    window = lambda lo, hi: [f"run{k:03d}" for k in range(lo, hi + 1)]  # noqa: E731
    dropped = m.prune({"f" * 12: window(0, 12), "a" * 12: window(5, 12), "b" * 12: window(0, 40),
                       "c" * 12: window(0, 40)})
    assert sorted((e.fingerprint, why) for e, why in dropped) == [
        ("a" * 12, memory.OUT_OF_WINDOW), ("b" * 12, memory.OLD_DRIFT), ("d" * 12, memory.NOT_CHECKED)]
    assert sorted((e.fingerprint, e.after or "") for e in m.entries) == [("c" * 12, "run025"), ("f" * 12, ""),
                                                                        ("f" * 12, "run010")]


@pytest.mark.parametrize("looks, kept", [(0, None), (-5, None), (2, 2), (10**9, 3660)])
def test_looks_read_back_are_bounded(looks, kept):
    """A remembered count below 1 is no look: dropped, said; one no night could reach is clamped (every count from
    SPENT_LOOKS on is tested alike: the clamp changes no decision), said."""
    from robocache.bench.regressions import memory

    assert memory.MAX_LOOKS == 3660 and memory.MAX_LOOKS >= confirmation.SPENT_LOOKS
    m, notes = Memory.from_json([{"change_id": "c" * 12, "fingerprint": "f" * 12, "looks": looks}])
    assert [e.looks for e in m.entries] == ([] if kept is None else [kept])
    assert len(notes) == (looks != kept) and all(str(looks) in n for n in notes)


def test_check_prunes_and_bounds_the_memory_it_reads(stepped, tmp_path, capsys):  # noqa: F811
    """One bad entry costs that entry (said), not the night's memory; entries that can never match again are said
    and not carried on."""
    hist_dir, hist, ref = stepped
    _, doc, _ = _check(capsys, str(hist_dir))
    fp = doc["checked"][0]
    prev = tmp_path / "night1.json"
    prev.write_text(json.dumps({"schema": "robocache-alerts/1", "alerts": [], "refuted_looks": [
        {"change_id": "c" * 12, "fingerprint": fp, "looks": 3},
        {"change_id": "d" * 12, "fingerprint": fp, "looks": 0},
        {"change_id": "a" * 12, "fingerprint": fp, "looks": 10**12, "kind": "step", "before": "x", "after": "gone"},
    ]}))
    rc, doc, err = _check(capsys, str(hist_dir), "--refuted-before", str(prev))
    warned = [line for line in err.splitlines() if line.startswith("warning: --refuted-before")]
    assert rc == 1 and len(warned) == 2 and "looks 0 < 1, dropped" in warned[0] and "clamped" in warned[1], err
    assert "1 of 2 remembered change point(s) not carried on: 1 no longer in their series' checked window" in err
    assert doc["refuted_looks"] == [{"change_id": "c" * 12, "fingerprint": fp, "looks": 3}]
    # an integer beyond 64 bits is read (Python's int) and clamped like any other
    prev.write_text('{"schema": "robocache-alerts/1", "alerts": [], "refuted_looks": [{"change_id": "' + "c" * 12
                    + f'", "fingerprint": "{fp}", "looks": {10**40}}}]}}')
    rc, doc, err = _check(capsys, str(hist_dir), "--refuted-before", str(prev))
    assert rc == 1 and "clamped to 3660" in err and [x["looks"] for x in doc["refuted_looks"]] == [3660], err


# ------------------------------------------------------------------ the refuted nights' reruns, pooled

def test_a_refuted_steps_reruns_are_pooled_into_its_next_look(stepped):  # noqa: F811
    """Spending with growing evidence: a step's reruns on the nights that refuted it are kept (the newest
    MAX_POOLED) and tested with the next night's reruns as one set."""
    from robocache.bench.regressions import memory

    hist_dir, hist, ref = stepped
    looked = Memory()

    def measure(items, times):
        return [_rerun(hist, math.exp(ref), k) for k in range(times)]

    kept = []
    for night in range(1, 6):
        res = regress.check(store.load(hist_dir).records, screen=regress.SCREEN_P)
        (c,) = confirmation.confirm_alerts(res, measure, machine=None, looked=looked)
        pooled = min((night - 1) * regress.CONFIRM_RUNS, memory.MAX_POOLED)
        assert len(c.pooled) == pooled and (f"and {pooled} of the nights that refuted it" in c.confirm_note) == (
            pooled > 0), c.confirm_note
        kept.append(len(looked.entries[0].reruns))
    assert kept == [3, 6, 9, 10, 10]
    # a drift's level moves night to night: its reruns are never pooled
    d = _change(8, 20, drift=True)
    d.rerun_logs = [0.0] * 3
    m = Memory()
    m.refuted(d)
    assert m.entries[0].reruns == [] and (confirmation.change_looks(_change(8, 21, drift=True), m) == 2)


def test_pooled_rerun_times_read_back_are_bounded():
    from robocache.bench.regressions import memory

    m, notes = Memory.from_json([{"change_id": "c" * 12, "fingerprint": "f" * 12, "looks": 1, "kind": "step",
                                  "before": "a", "after": "b",
                                  "rerun_us": [0.0, -1.0, 10.0] + [11.0] * memory.MAX_POOLED}])
    (e,) = m.entries
    assert len(e.reruns) == memory.MAX_POOLED and e.reruns[-1] == pytest.approx(math.log(11.0))
    assert len(notes) == 1 and "2 rerun time(s) not finite and positive, 1 beyond the newest" in notes[0]


def test_pooled_reruns_enter_the_mean_not_the_single_rerun_bars():
    """The nights that refuted a change point were refuted for a reason: their reruns are the low ones. Pooled
    into the single-rerun bars (every rerun beyond the floor, the tails), they would hold a real step back night
    after night (the CI-size replay: of 800 step series, 34 confirmed later and 59 never); they enter the mean's test, and
    the bars judge tonight's reruns alone."""
    c, ref, _ = _strong_step()
    c.looks = 2
    tonight = ref + np.log([1.12, 1.121, 1.122])
    low = ref + np.log([1.0])  # an earlier night's rerun at the level before
    both = np.array([np.concatenate([low, tonight])])
    assert confirmation.rerun_test(c, np.array([tonight]))[0][0]
    assert not confirmation.rerun_test(c, both)[0][0]  # as four reruns of tonight: the low one fails the bars
    ok, p, ratio, _ = confirmation.rerun_test(c, both, pooled=1)
    assert ok[0] and ratio[0] == pytest.approx(math.exp(np.mean(both) - ref))  # the mean is over all four
    # and many earlier reruns at the level before outweigh tonight's: refuted by the mean's test
    many = np.array([np.concatenate([np.repeat(low, 10), tonight])])
    assert not confirmation.rerun_test(c, many, pooled=10)[0][0]
