"""``confirm(first, rerun)``: which alerts a fresh rerun of their cases, tested alone, reproduces (see the
package doc)."""
from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Callable, Iterable
from typing import Any

import numpy as np

from ..schema import fingerprint, series_key
from .changepoints import FDR_Q, SCREEN_MIN_BEFORE, Change, CheckResult, Drift
from .memory import Memory
from .noise import CALL_RATIO, LEVEL_Q, prior_pool
from .records import FLOOR, call_ratio, check_floor, p50, safe_exp, unhealthy

CONFIRM_P = 0.001  # the confirmation's one-sided p-value bound
CONFIRM_RUNS = 3  # fresh measurements of each alerted case; every one of them must be slower beyond the floor
# A change that has held: at least HELD_NIGHTS nights after it, their median slower beyond the floor, the nights' own
# one-sided p <= HELD_P. Its rerun is held to CONFIRM_P_HELD instead of CONFIRM_P (the two independent pieces of
# evidence together still <= 1e-8; a step of 3x the noise is beyond what two reruns can show at 0.001).
HELD_NIGHTS = 3
HELD_P = 1e-6
CONFIRM_P_HELD = 0.01
# Sequential confirmation: when an alert's CONFIRM_RUNS reruns are consistent with it (their mean beyond the floor)
# but not conclusive, CONFIRM_MORE more are measured and all CONFIRM_RUNS_MAX are tested again by the same rule at the
# same level (a second look: Bonferroni's bound over the two looks is twice the level; the A/A rate this allows is
# measured in tests/test_regress_quality.py over every rerun the real noise pools allow, both looks, exactly).
CONFIRM_MORE = 2
CONFIRM_RUNS_MAX = CONFIRM_RUNS + CONFIRM_MORE
RERUN_SPARE = 1  # of CONFIRM_RUNS_MAX reruns, this many may fall short of the bars (all of CONFIRM_RUNS must pass)


# The floor of the spent level (issue 27's review): a change point's looks from the SPENT_LOOKS-th on are all tested at
# spent(p_max, SPENT_LOOKS), never lower. Without it the level fell under what the series-tails check can ever show,
# (0.5 / (n + 1)) ** runs with n nights before the change: a real step refuted on a few noisy nights could never be
# confirmed again (a 10-night reference, 3 reruns: from look 5 on). 2: a third of the level, what 5 reruns (the
# second look) reach from 6 nights before the change (tails floor 1.2e-4 <= 3.3e-4) and 3 reruns from 7 (2.4e-4; at 6
# nights it is 3.6e-4, above every floor but 1, which is no memory); the held rescue keeps 0.01 / 3.
SPENT_LOOKS = 2


def spent(p_max: float, looks: int) -> float:
    """The level of a change point's ``looks``-th confirmation (1: its first night): ``p_max * 2 / (k (k + 1))``
    with ``k = min(looks, SPENT_LOOKS)``.

    A change point the reruns refuted is proposed again the next night from the same history (the same level
    before it, the same nights after): the nights' evidence did not change, and the reference's error is common
    to every night's test. Tested afresh each night at ``p_max``, a false change whose reference drew low is
    confirmed with the same chance every night, and over a week likely (issue 27: an A/A torch.compile series,
    its first ten nights 6.7% low, sent to the rerun on 7 nights at 0.14-0.18 each). Spent over the looks, the
    first look keeps ``p_max`` (the night a step lands), the later ones 2 / (k (k + 1)) of it down to the floor
    (SPENT_LOOKS: a third), which every look after keeps: the series-tails check cannot go below
    (0.5 / (n + 1)) ** runs, and a level under it would never confirm a real step again. Over L looks the tests
    together are bounded by 2 p_max (1 + (L - 1) / 3) (two tests a night, the first reruns and the second look),
    growing with L: the floor trades the bound for keeping real steps confirmable (docs/regressions.md)."""
    k = min(max(int(looks), 1), SPENT_LOOKS)
    return p_max * 2.0 / (k * (k + 1))


def change_looks(c: Change, looked: Memory | None) -> int:
    """Sets ``c.looks`` from ``looked`` (the change points refuted before, :class:`.memory.Memory`: the same change
    point re-proposed one night earlier or later is the same; None: no memory); returns it."""
    c.looks = looked.looks(c) if looked is not None else 1
    return c.looks


def drift_change(d: Drift) -> Change:
    """A drift as the confirmation tests it: a change from the level before its window (``d.before_levels``) to
    tonight, measured again like a step (:func:`rerun_test`: the reruns alone, beyond the floor, the nights' 90th
    percentile and the tails). A drift found over six nights can be a few outlying nights at the end of a noisy
    series (the replay's false drifts: +25-46% "over six nights" on 1.6-12% series); fresh reruns at tonight's
    level are not."""
    ref = float(np.median(d.before_levels)) if d.before_levels else 0.0
    now = float(np.mean(d.window_levels[-2:])) if d.window_levels else ref
    return Change(series=d.series, fingerprint=d.fingerprint, index=0, n_before=len(d.before_levels),
                  n_after=d.window, ratio=safe_exp(now - ref), ratio_ci=(1 + d.slope_ci[0], 1 + d.slope_ci[1]),
                  p_value=d.p_value, before=d.before or d.first, after=d.first, latest=True, sigma=d.sigma, key=d.key,
                  before_level=float(np.mean(d.before_levels)) if d.before_levels else ref, q_value=d.q_value,
                  kind="drift", dof=d.dof, after_levels=list(d.window_levels), before_levels=list(d.before_levels),
                  p_one=d.p_value, strict=True, tonight=d.last, drift=d)


def to_confirm(first: CheckResult, looked: Memory | None = None) -> list[Change]:
    """What a confirmation measures again: every alert, and every drift as a change (:func:`drift_change`); each
    with its looks (:func:`change_looks`: how many nights' reruns refuted the same change point before, in
    ``looked``)."""
    items = list(first.alerts) + [drift_change(d) for d in first.drifts if d.direction == "slower"]
    for c in items:
        change_looks(c, looked)
    return items


def confirm(first: CheckResult, rerun: Iterable[Any], *, floor: float = FLOOR, p_max: float = CONFIRM_P,
            measurable: Iterable[str] | None = None, not_measured: dict[str, str] | None = None,
            items: list[Change] | None = None) -> tuple[list[Change], list[Change], list[Change]]:
    """Which alerts of ``first`` the confirmation rerun reproduces: (kept, refuted, unconfirmable).

    Independent evidence: the rerun's median times of the series *alone* (the nights that raised the alert
    are not counted again; ``check --confirm`` measures CONFIRM_RUNS times, and CONFIRM_MORE more where
    ``Change.wants_more``, then calls this again with all of them: :func:`rerun_more`) must be slower than the level
    before the change, their mean one-sided p <= ``p_max`` with the series' noise, and every one of them
    beyond the floor (one outlying rerun, as the real run-to-run ratios have, confirms nothing); else the
    alert is refuted. An alert whose series the rerun did
    not measure healthily (crashed, throttled, another machine, a provider that is not registered:
    ``measurable`` lists the fingerprints this machine could rerun, ``not_measured`` says why not) is
    *unconfirmable*: it is still raised, marked unconfirmed, never dropped because the check could not
    measure, when it is significant at the check's own level (``strict``); one only the screen called
    (``check(screen=...)``) is listed among the refuted with that reason (without a rerun it is no alert).
    Kept alerts are marked confirmed. ``items``: what is judged (:func:`to_confirm`'s list; None: the alerts
    alone, as before drifts were confirmed too)."""
    check_floor(floor)
    got: dict[str, list[float]] = defaultdict(list)
    got_ratio: dict[str, list[float]] = defaultdict(list)  # call-cost series judged by their interleaved ratio
    for r in rerun:
        if unhealthy(r):
            continue
        fp = fingerprint(series_key(r))
        got[fp].append(math.log(p50(r)))
        cr = call_ratio(r)
        if cr is not None:
            got_ratio[fp].append(math.log(cr[0]))
    can = set(measurable) if measurable is not None else None
    why_not = not_measured or {}
    kept, refuted, unconfirmable = [], [], []
    for c in (first.alerts if items is None else items):
        xs = (got_ratio if c.series.get("measure") == CALL_RATIO else got).get(c.fingerprint)
        if not xs or (can is not None and c.fingerprint not in can):
            c.confirmed = False
            c.confirm_note = why_not.get(c.fingerprint, "the case could not be measured again here")
            if not xs and got.get(c.fingerprint) and c.fingerprint not in why_not:  # measured, but no ratio
                c.confirm_note = (f"its {len(got[c.fingerprint])} rerun(s) carry no interleaved call ratio, the "
                                  "quantity this alert is judged by")
            if c.strict:
                unconfirmable.append(c)
            else:  # only the screen called it: without a rerun it is no alert (the nights alone are not enough)
                c.confirm_note += (f"; the nights alone are not significant at the check's own level "
                                   f"(q = {c.q_value:.2g} > {FDR_Q}): not raised without a rerun")
                refuted.append(c)
            continue
        xs = xs[:CONFIRM_RUNS_MAX]
        # a step refuted on earlier nights: their reruns pooled with tonight's (the evidence grows with its looks)
        pooled = list(c.pooled) if c.drift is None else []
        ok, p, ratio, low = rerun_test(c, np.array([pooled + xs]), floor=floor, p_max=p_max, pooled=len(pooled))
        c.reruns = len(xs)
        c.rerun_logs = list(xs)
        c.wants_more = bool(rerun_more(c, np.array([xs]), floor=floor, ok=ok)[0])
        c.confirm_note = (f"rerun x{ratio[0]:.3f} of the level before (one-sided p = {p[0]:.2g}, {len(xs)} run(s)"
                          + (f" and {len(pooled)} of the nights that refuted it before" if pooled else "")
                          + f", the lowest counted x{low[0]:.3f})"
                          + (f"; look {c.looks} at this change point (refuted on {c.looks - 1} night(s) before): "
                             f"tested at {spent(1.0, c.looks):.3g} of the level" if c.looks > 1 else "")
                          + (f"; consistent with the change, not conclusive: {CONFIRM_MORE} more rerun(s) asked"
                             if c.wants_more else ""))
        if ok[0]:
            c.confirmed = True
            kept.append(c)
        else:
            refuted.append(c)
    return kept, refuted, unconfirmable


def _held(c: Change, ref: float, floor: float) -> bool:
    """The change has held: HELD_NIGHTS nights after it or more, their median beyond the floor, their p <= HELD_P."""
    # the nights' evidence as the screen measured it (without the series' outlying nights: p_core)
    return (c.n_after >= HELD_NIGHTS and min(c.p_one, c.p_core) <= HELD_P and bool(c.after_levels)
            and float(np.median(c.after_levels)) - ref >= math.log1p(floor))


def _levels(c: Change, floor: float = FLOOR) -> list[float]:
    """The nights the confirmation compares its reruns with: the level before the change, or, where that level is
    too short to pin a noisy series down (its median uncertain by more than half the floor: sigma sqrt(pi / 2n)),
    the WIDE_REF nights before the change across PELT's boundaries when their median is the higher. A short
    segment of a noisy series is often one PELT cut because its nights drew low, and the reruns, at the series'
    true level, then look slow (the replay: an A/A torch.compile series at 12% whose five-night segment drew
    low was confirmed with probability 0.97)."""
    levels = c.before_levels
    if (levels and c.wide_levels and len(c.wide_levels) > len(levels)
            and c.sigma * math.sqrt(math.pi / (2 * len(levels))) > floor / 2
            and float(np.median(c.wide_levels)) > float(np.median(levels))):
        return c.wide_levels
    return levels


def _ref(c: Change, floor: float = FLOOR) -> float:
    """The level before the change, robustly: the median of its runs (:func:`_levels`)."""
    levels = _levels(c, floor)
    return float(np.median(levels)) if levels else c.before_level


def rerun_more(c: Change, xs: np.ndarray, *, floor: float = FLOOR, ok: np.ndarray | None = None) -> np.ndarray:
    """Per rerun set (rows of ``xs``, log-times): does it call for CONFIRM_MORE more reruns? When the first
    CONFIRM_RUNS reruns did not confirm alert ``c`` (``ok``, else :func:`rerun_test`'s) but are consistent with
    it: their mean beyond the floor above the level before. What a maintainer does when two fresh runs of a
    noisy case point the same way as the nights but do not settle it: measure more (never a third look)."""
    xs = np.atleast_2d(np.asarray(xs, dtype=float))
    if xs.shape[1] >= CONFIRM_RUNS_MAX:
        return np.zeros(len(xs), dtype=bool)
    ref = _ref(c, floor)
    if ok is None:
        ok = rerun_test(c, xs, floor=floor)[0]
    # the median, not the mean: one outlying rerun of three (a -24% night of a few-microsecond case) must not keep
    # two reruns at the step's level from their second look
    return ~ok & (np.median(xs, axis=1) - ref >= math.log1p(floor))


def rerun_test(c: Change, xs: np.ndarray, *, floor: float = FLOOR, p_max: float = CONFIRM_P,
               pooled: int = 0) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The confirmation's decision for alert ``c`` on rerun sets ``xs`` (shape (sets, runs), log-times): each
    set alone against the level before the change, one-sided, with the series' noise. Returns per set
    (confirmed, p, the reruns' mean ratio, the lowest rerun's ratio). Vectorized: the quality tests compute
    the exact confirmation probability of a false alert over every rerun their noise pool allows. A change that
    has held (HELD_NIGHTS nights, their median beyond the floor, their p <= HELD_P) needs p <= CONFIRM_P_HELD.
    A set of CONFIRM_RUNS_MAX reruns (the second look, :func:`rerun_more`) is judged by the same bars with one
    spare (RERUN_SPARE): all but the lowest rerun beyond them, the tails' chance binomial."""
    from scipy import special

    every = np.atleast_2d(np.asarray(xs, dtype=float))
    # ``pooled``: the first columns are earlier nights' reruns that refuted this change point (Change.pooled): they
    # enter the mean's test (growing evidence over the looks); the bars on single reruns below are tonight's alone
    xs = every[:, pooled:]
    # the level before, robustly: the median of its runs (a PELT segment of 3 runs can hold an outlying
    # night that would make every later run look slower; the median's variance is pi/2 the mean's)
    levels = _levels(c, floor)
    ref = _ref(c, floor)
    d = every.mean(axis=1) - ref
    # the noise without the series' outlying nights where the screen measured it (their tails are judged below)
    sigma = c.sigma_core or c.sigma
    n_ref = len(levels) if levels is not c.before_levels else c.n_before
    se = sigma * math.sqrt((math.pi / 2 if levels else 1.0) / n_ref + 1.0 / every.shape[1])
    p = special.stdtr(max(c.dof, 1.0), -d / se)
    # the reruns that must each be beyond the bars below: all of CONFIRM_RUNS; of CONFIRM_RUNS_MAX (the second look,
    # rerun_more) all but one (one outlying rerun among four neither confirms nor refutes; the tails below count it)
    spare = RERUN_SPARE if xs.shape[1] >= CONFIRM_RUNS_MAX else 0
    low_log = np.sort(xs, axis=1)[:, spare] - ref
    if _held(c, ref, floor):
        p_max = max(p_max, CONFIRM_P_HELD)
    # a change point refuted on earlier nights is tested at what is left of its level (spent: the looks share it)
    p_max = spent(p_max, c.looks)
    ok = (p <= p_max) & (low_log >= math.log1p(floor))
    # and beyond the floor above 90% of the nights before the change, whatever their distribution: a series with
    # a second state (100/108 us, the slow one a tenth of the nights or more) whose reruns both land in it has
    # shown that level before, which no step does
    if len(levels) >= SCREEN_MIN_BEFORE:
        # (the m-th slowest night, one more than a tenth of them and at least two, about the 90th percentile where
        # there are twenty nights or more: one outlying night among a short history's eight, which the interpolated
        # 90th percentile sat near, is no second state, and kept a +10% step on a few-microsecond case from its
        # confirmation; the tails below count it)
        m = max(2, math.floor((1 - LEVEL_Q) * len(levels) + 1e-9) + 1)  # (1 - 0.9) * 20 is 1.999...
        ok &= low_log + ref - float(np.sort(levels)[-m]) >= math.log1p(floor)
    # and beyond the provider's measured run-to-run tails: the chance that the provider's real deviations (drawn
    # as often as there are reruns) put as many runs as slow as the counted rerun (all of them, or all but the
    # spare: the binomial tail), at most p_max (a provider whose runs of one commit moved 20% now and then
    # confirms nothing with two +12% reruns, whatever the series' quieter sigma says)
    pool = prior_pool(safe_exp(ref), c.series.get("provider"), c.series.get("timer"), c.series.get("measure"))
    tail = np.zeros(len(xs))
    if pool is not None:
        tail = (len(pool) - np.searchsorted(pool, low_log, side="left")) / len(pool)
    # and beyond the series' own tails, where they are heavier than the provider's: the share of the nights before
    # the change at least as slow as the counted rerun (a case whose own runs moved +20% now and then, or that has
    # a second state, confirms nothing with reruns that slow, whatever the other cases of its provider showed: the
    # out-of-sample replay's false alerts were such series, their provider's pool fitted on other cases)
    if len(levels) >= SCREEN_MIN_BEFORE:
        # (k + 1/2) / (n + 1): the series' k of n nights, half a night more than was seen, so that a clean history
        # of a few nights does not vouch for tails it is too short to show (a second state seen once in six nights
        # is a 21% tail, not the 9% that counting the provider's pool as ten more nights made it: the replay's
        # two-state series were then half its false alerts)
        nights = np.sort(np.asarray(levels, dtype=float) - ref)
        seen = len(nights) - np.searchsorted(nights, low_log, side="left")
        tail = np.maximum(tail, (seen + 0.5) / (len(nights) + 1))
    if pool is not None or len(levels) >= SCREEN_MIN_BEFORE:
        from scipy import stats

        k = xs.shape[1]
        ok &= stats.binom.sf(k - spare - 1, k, tail) <= p_max
    return ok, p, np.exp(np.clip(d, -700, 700)), np.exp(np.clip(low_log, -700, 700))



def confirm_alerts(first: CheckResult, measure: Callable[[list[Change], int], Iterable[Any]], *,
                   machine: str | None,
                   can_measure: Callable[[list[Change]], tuple[Iterable[str], dict[str, str]]] | None = None,
                   floor: float = FLOOR, looked: Memory | None = None) -> list[Change]:
    """The nightly confirmation, as ``check --confirm`` and ``check --reruns`` run it, and the replay
    (:mod:`.replay`, with simulated reruns): one path for all three.

    What :func:`to_confirm` lists (the alerts and the drifts) of ``machine`` (every machine's for None), those
    ``can_measure(items)`` allows (it returns the fingerprints it can measure and why not the others; None: all),
    measured CONFIRM_RUNS times by ``measure(items, times)`` (the records it returns: a fresh run of each case per
    time, or reruns measured elsewhere), :func:`confirm`; those whose reruns ask for more (:func:`rerun_more`)
    measured CONFIRM_MORE more times and every rerun tested again (the second look, never a third). Sets
    ``first.alerts`` and ``first.drifts`` to the kept and the unconfirmable ones (a drift's ``confirmed``,
    ``confirm_note`` and ``reruns`` from its confirmation); returns the refuted ones (a refuted drift as its
    :func:`drift_change`).

    ``looked``: the memory of earlier nights (:class:`.memory.Memory`: the change points whose reruns refuted them,
    keyed by their series and runs, not the change id, which moves with a one-night shift), read and updated in
    place: each item is tested at its look's level (:func:`spent`), and each one tonight's reruns
    refuted counts one look more. None: no memory (every change point at its first look)."""
    items = to_confirm(first, looked)
    mine = [c for c in items if machine is None or c.series.get("machine") == machine]
    can, why_not = ({c.fingerprint for c in mine}, {}) if can_measure is None else can_measure(mine)
    can = set(can) & {c.fingerprint for c in mine}
    kw = {"floor": floor, "measurable": can, "not_measured": why_not, "items": items}
    todo = [c for c in mine if c.fingerprint in can]
    again = list(measure(todo, CONFIRM_RUNS)) if todo else []
    kept, refuted, unconfirmable = confirm(first, again, **kw)
    more = [c for c in refuted if c.wants_more]
    if more:
        again += list(measure(more, CONFIRM_MORE))
        kept, refuted, unconfirmable = confirm(first, again, **kw)
    if looked is not None:
        for c in refuted:
            if c.reruns:  # measured and refuted (not: left unmeasured, which is no look)
                looked.refuted(c)
    raised = kept + unconfirmable
    for c in raised:
        if c.drift is not None:
            c.drift.confirmed, c.drift.confirm_note, c.drift.reruns = c.confirmed, c.confirm_note, c.reruns
    first.alerts = [c for c in raised if c.drift is None]
    first.drifts = [c.drift for c in raised if c.drift is not None]
    return refuted
