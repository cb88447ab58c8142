"""``check(records)``: change points, drifts and breaks over the history of every series (see the package doc)."""
from __future__ import annotations

import functools
import gc
import hashlib
import json
import math
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..schema import Series, fingerprint, series_key
from .noise import (CALL_RATIO, NOISE_MIN, PRIOR_DOF, prior_noise, prior_ratio_noise, series_sigma, shrink, sigma_floors,
                    within_floor)
from .records import (CALL_COST_TIMERS, FLOOR, call_ratio, call_ratio_of_json, case_key, check_floor, env_changes, env_fingerprint,
                      env_print, p50, processes_of, safe_exp, unhealthy, within_sigma)

FDR_Q = 0.01  # Benjamini-Hochberg level over all candidate change points of all series
RECENT = 5  # an improvement older than the newest RECENT runs is history, not news
MAX_HISTORY = 150  # the newest healthy points per series that a check looks at
MIN_HISTORY = 6  # healthy points a series needs before it can alert (fewer: its noise is a guess)
PELT_BETA = 8.0  # PELT penalty: beta * sigma^2 * log(n) on log-times (twice BIC's: few spurious splits)
DRIFT_WINDOWS = (6, 9, 12, 16, 20)  # nights a drift (a trend, not a step) is tested over, ending tonight
DRIFT_MIN = 12  # healthy points a series needs before it is tested for drift
DRIFT_Q = 0.001  # Benjamini-Hochberg level over the drift tests of all series
SCREEN_P = 0.03  # check --confirm: a series' one-sided p (Bonferroni over its candidates) that sends it to the rerun
SCREEN_MIN_BEFORE = 5  # check --confirm: a slower change departs from a level of at least this many runs (PELT's
# shortest segments on heavy-tailed series are two or three outlying nights, whose median is no reference)
SPIKE_K = 5.0  # a night beyond SPIKE_K sigmas from both neighbours, which agree with each other, is a spike
BLIP_MAX = 3  # an interior PELT segment of at most this many runs whose neighbours are one level is a blip, not a level
PLACE_RADIUS = 2  # a change's location is refined by maximum likelihood within this many runs of the tested split
WIDE_REF = 20  # the nights before a change the confirmation may compare with, across PELT's boundaries
MAX_REF = 30  # a drift's confirmation compares its reruns with at most this many nights before its window


@dataclass
class Point:
    run_id: str
    commit: str | None
    created: str
    log_t: float
    within: float
    suite: str
    env: dict[str, str] = field(default_factory=dict)  # env_fingerprint of the run
    # the fresh processes the run's median was taken over (records.processes_of: `run --processes K`; 1 for one):
    # an alert reproduces (alerts.reproduce_command) and reruns (check --confirm) its case as its newest run did
    processes: int = 1


@dataclass
class Change:
    series: dict[str, Any]
    fingerprint: str
    index: int  # first point after the change
    n_before: int
    n_after: int
    ratio: float
    ratio_ci: tuple[float, float]
    p_value: float
    before: Point
    after: Point
    latest: bool  # the after-segment reaches the newest point
    sigma: float
    key: str
    before_level: float = 0.0  # mean log-time of the segment before the change
    q_value: float = 1.0
    kind: str = "tail"  # "tail": the newest runs against the level before; "pelt": PELT's last change point;
    # "scan": the likeliest single split inside PELT's last segment (Bonferroni over the splits scanned)
    dof: float = 1.0
    after_levels: list[float] = field(default_factory=list)  # log-times after the change
    before_levels: list[float] = field(default_factory=list)  # log-times of the level before
    p_one: float = 1.0  # one-sided p (slower) of the tested candidate: the screen's evidence (check(screen=...))
    strict: bool = True  # significant at the check's own level (Benjamini-Hochberg), not only at the screen's
    n_tests: int = 1  # candidates tested in this series tonight (the screen's Bonferroni factor)
    segment: tuple[int, int] = (0, 0)  # the runs [lo, hi) the split was tested in
    confirmed: bool | None = None  # None: no confirmation asked; False: could not be measured again
    confirm_note: str = ""  # why it could not be measured again, or the rerun's own evidence
    reruns: int = 0  # fresh measurements the confirmation tested (CONFIRM_RUNS; CONFIRM_RUNS_MAX after rerun_more)
    wants_more: bool = False  # confirm(): the first reruns are consistent with the change but not conclusive
    cause: str = "code"  # "code"; "environment": the runner changed between the two runs (not the commit's fault)
    cause_detail: str = ""
    place_p: float = 1.0  # how sure the location is (_place_p): its likelihood's share among the neighbouring commits
    tonight: Point | None = None  # the series' newest point (the night alerted): a rerun must be newer, of its commit
    # the confirmation's looks at this change point (series and commit range), tonight's included: 1 + the nights
    # whose reruns refuted it before (confirmation.to_confirm, from the memory check --refuted-before reads)
    looks: int = 1
    # the confirmation's memory: the reruns (log-times) of earlier nights that refuted this change point, pooled into
    # tonight's test (confirmation.confirm; steps only), and tonight's own reruns (log-times) once tested
    pooled: list[float] = field(default_factory=list)
    rerun_logs: list[float] = field(default_factory=list)
    drift: Any = None  # the Drift this stands for in the confirmation (confirmation.to_confirm), else None
    # check(screen=...): the noise without the outlying nights (judged on a robust scale) and the one-sided p with it:
    # the screen's and the confirmation's (their tails are the confirmation's business), never the check's alone
    sigma_core: float = 0.0
    p_core: float = 1.0
    # the WIDE_REF nights before the change, across PELT's boundaries: the confirmation's level where the level
    # before is too short to pin the series down (confirmation._levels)
    wide_levels: list[float] = field(default_factory=list)

    @property
    def direction(self) -> str:
        return "slower" if self.ratio > 1 else "faster"

    @property
    def change_id(self) -> str:
        """12 hex digits per change: the series and the commit range (one change, however many nights it holds)."""
        text = f"{self.fingerprint}|{self.before.commit}|{self.after.commit}"
        return hashlib.sha256(text.encode()).hexdigest()[:12]


@dataclass
class Drift:
    """A trend over the newest nights (Mann-Kendall, Theil-Sen slope): no single commit is blamed."""
    series: dict[str, Any]
    fingerprint: str
    key: str
    slope: float  # relative change per night (Theil-Sen on log-time, exp(slope) - 1)
    slope_ci: tuple[float, float]  # its 95% interval
    total: float  # relative change over the window
    window: int  # nights in the window
    tau: float  # Kendall's tau of log-time against night
    p_value: float  # one-sided (slower), Mann-Kendall
    first: Point
    last: Point
    q_value: float = 1.0
    # what its confirmation (confirmation.confirm) tests fresh reruns against: the level before the window
    before_levels: list[float] = field(default_factory=list)  # log-times of the nights before the window
    window_levels: list[float] = field(default_factory=list)  # log-times of the window's nights
    sigma: float = 0.0  # the series' noise measured before the windows
    dof: float = 1.0
    before: Point | None = None  # the last night before the window
    confirmed: bool | None = None  # as Change.confirmed
    confirm_note: str = ""
    reruns: int = 0

    @property
    def direction(self) -> str:
        return "slower" if self.slope > 0 else "faster"


@dataclass
class Break:
    """A series moved or restarted because the way it is measured, or the runner, changed: not a regression."""
    series: dict[str, Any]
    fingerprint: str
    kind: str  # "method" | "environment"
    detail: str
    run_id: str
    created: str
    ratio: float | None = None  # the move across the break, when both sides have levels


@dataclass
class CheckResult:
    changes: list[Change] = field(default_factory=list)  # significant, beyond the floor
    alerts: list[Change] = field(default_factory=list)  # of those: current and slower, blamed on code
    improvements: list[Change] = field(default_factory=list)  # current and faster
    drifts: list[Drift] = field(default_factory=list)  # significant trends beyond the floor (slower)
    breaks: list[Break] = field(default_factory=list)  # method or environment changes (never an alert)
    checked: list[str] = field(default_factory=list)  # fingerprints of the series tested tonight
    # per series tested tonight (fingerprint): the run ids of the points it was tested on, oldest first (what the
    # confirmation's memory is pruned to: memory.Memory.prune)
    windows: dict[str, list[str]] = field(default_factory=dict)
    series: int = 0
    series_checked: int = 0  # current, with enough healthy history
    series_stale: int = 0  # no healthy point in the newest run of their suite on their machine: not tested tonight
    excluded_points: int = 0
    candidates: int = 0
    excluded_reasons: dict[str, int] = field(default_factory=dict)
    floor: float = FLOOR  # the check's own settings (check(floor=, q=)), reported as they were
    fdr_q: float = FDR_Q


def _series_dict(rec: Any) -> dict[str, Any]:
    """The record's series (:func:`schema.series_key`, method version included) as a dict, with the machine's
    architecture for the alert; its :func:`schema.fingerprint` is the alert's series id (method version 1, every
    record before the version existed, hashes as before)."""
    return {**series_key(rec)._asdict(), "arch": rec.env.arch if rec.env is not None else None}


def _siblings_key(k: Series) -> Series:
    """The case measured any way (any method version, any input rotation): a new series among its siblings
    started with a method change, a *break* in :func:`check`, not a regression."""
    return k._replace(method_version=None, input_sets=None)


def _segments(x: np.ndarray, sigma: float) -> list[int]:
    """PELT change points (indices where a new segment starts) on log-times, penalty in units of sigma^2."""
    import ruptures

    n = len(x)
    if n < 4:
        return []
    pen = PELT_BETA * sigma ** 2 * math.log(n)
    # the linear kernel's cost is the l2 cost (sum of squared deviations from the segment mean), and
    # KernelCPD runs PELT in ruptures' C code: the same change points as Pelt(model="l2"), ~1000x faster
    bkps = ruptures.KernelCPD(kernel="linear", min_size=2, jump=1).fit(x.reshape(-1, 1)).predict(pen=pen)
    return [int(b) for b in bkps if 0 < b < n]


def _spikes(x: np.ndarray, sigma: float) -> np.ndarray:
    """Which runs are not spikes: a spike is one night beyond SPIKE_K sigmas from both its neighbours, on the same
    side, while the neighbours agree (within half that): an outlying night (robocache's few-microsecond cases draw
    +-24% now and then, CuPy's and torch.compile's 15-20%). PELT runs without them, so an outlier in PELT's last
    segment does not start that segment (a step tonight was blamed on the outlier's night). The newest run has no
    neighbour after it and is never a spike: tonight's news is always tested."""
    keep = np.ones(len(x), dtype=bool)
    if len(x) < 3:
        return keep
    a, b, c = x[:-2], x[1:-1], x[2:]
    lim = SPIKE_K * sigma
    out = (np.minimum(b - a, b - c) > lim) | (np.minimum(a - b, c - b) > lim)
    keep[1:-1] = ~(out & (np.abs(a - c) <= lim / 2))
    return keep


def _robust_sigma(x: np.ndarray, within: np.ndarray) -> float:
    """One night's noise from the median absolute consecutive difference (1.4826 MAD / sqrt(2)): what the
    outlying nights are judged by (:func:`_spikes`), before any of them can inflate it; never below the runs' own
    within-run noise or NOISE_MIN."""
    d = np.abs(np.diff(x))
    if not len(d):
        return NOISE_MIN
    return max(1.4826 * float(np.median(d)) / math.sqrt(2), within_floor(x[:-2] if len(x) >= 7 else x, within),
               NOISE_MIN)


def _blips(x: np.ndarray, cps: list[int], sigma: float, keep: np.ndarray | None = None) -> tuple[list[int], np.ndarray]:
    """PELT's change points without the blips, and which runs are not in a blip.

    A blip is an interior segment of at most BLIP_MAX runs whose neighbouring segments are one level by PELT's
    own penalty (joining them would not cost more than the penalty): an isolated outlying night or two (the
    few-microsecond cases' +-24% nights), or a regression that was fixed. Neither is a level that tonight's runs
    should be compared with from its far side, nor part of the level around it: the tests leave blip runs out
    of both levels, so one outlying night no longer cuts the level before tonight to three runs (too few to be
    screened) or moves its mean by a tenth of the outlier."""
    n = len(x)
    keep = np.ones(n, dtype=bool) if keep is None else keep.copy()
    if len(cps) < 2:
        return list(cps), keep
    bounds = [0, *cps, n]
    pen = PELT_BETA * sigma ** 2 * math.log(n)
    drop: set[int] = set()
    start = 0  # where the level left of segment j starts (blips before it merged into it)
    for j in range(1, len(bounds) - 2):  # interior segments [bounds[j], bounds[j+1]): never the first or last
        a, b, hi = bounds[j], bounds[j + 1], bounds[j + 2]
        # a short segment whose right neighbour is short too (and not the last) is left alone: two adjacent
        # excursions could otherwise both go and take a step that holds with them
        if b - a > BLIP_MAX or (hi - b <= BLIP_MAX and j + 2 < len(bounds) - 1):
            start = a
            continue
        left, right = x[start:a][keep[start:a]], x[b:hi][keep[b:hi]]
        if not len(left) or not len(right):
            start = a
            continue
        gain = len(left) * len(right) / (len(left) + len(right)) * float(left.mean() - right.mean()) ** 2
        if gain < pen:
            keep[a:b] = False
            drop |= {a, b}
        else:
            start = a
    return [c for c in cps if c not in drop], keep


def _test(before: np.ndarray, after: np.ndarray, sigma: float, dof: float) -> tuple[float, float, float, float]:
    """Difference of means (log-ratio), its standard error, two-sided p and the 97.5% t quantile."""
    from scipy import special  # Student t's ufuncs: stats.t's machinery costs ~0.5 ms a call, per candidate

    d = float(after.mean() - before.mean())
    se = sigma * math.sqrt(1.0 / len(before) + 1.0 / len(after))
    dof = max(float(dof), 1.0)
    p = float(2 * special.stdtr(dof, -abs(d) / se))
    return d, se, p, float(special.stdtrit(dof, 0.975))


@functools.cache
def _pairs(n: int) -> tuple[np.ndarray, np.ndarray]:
    """``np.triu_indices(n, 1)``, read-only: Mann-Kendall's pairs i < j, the same few window lengths every series."""
    rows, cols = np.triu_indices(n, 1)
    rows.flags.writeable = cols.flags.writeable = False
    return rows, cols


def _mann_kendall(w: np.ndarray) -> tuple[float, float]:
    """Mann-Kendall's trend test: (Kendall's tau of the values against their order, one-sided p for an
    upward trend), the S statistic's normal approximation with the tie-corrected variance and a continuity
    correction (Hipel and McLeod; the form pymannkendall uses). NumPy only: it runs per series per night."""
    n = len(w)
    sgn = np.sign(w[None, :] - w[:, None])[_pairs(n)]
    s_stat = float(sgn.sum())
    _, counts = np.unique(w, return_counts=True)
    var = (n * (n - 1) * (2 * n + 5) - float(np.sum(counts * (counts - 1) * (2 * counts + 5)))) / 18.0
    if var <= 0:
        return 0.0, 1.0
    z = (s_stat - 1) / math.sqrt(var) if s_stat > 0 else (s_stat + 1) / math.sqrt(var) if s_stat < 0 else 0.0
    return s_stat / (n * (n - 1) / 2), 0.5 * math.erfc(z / math.sqrt(2))


def _theilslopes() -> Any:
    """``scipy.stats.theilslopes`` itself, without the axis/NaN-policy wrapper SciPy puts around it (``__wrapped__``):
    the drift test calls it on short 1-D windows without NaNs (log-times of healthy runs), for which the wrapper
    passes the arrays through unchanged and returns the function's own result, at some 1 ms of bookkeeping a call,
    the bulk of a check over a thousand drifting series. The wrapped function where SciPy has no wrapper."""
    from scipy import stats

    return getattr(stats.theilslopes, "__wrapped__", stats.theilslopes)


def _drift(x: np.ndarray, sigma: float, dof: float) -> tuple[float, float, float, float, float, int] | None:
    """The strongest trend ending tonight over windows of DRIFT_WINDOWS nights: Theil-Sen's slope (log-time per
    night) with its 95% interval, tested against the series' own noise (the slope's standard error under
    independent nights, sigma * sqrt(12 / (w^3 - w)), Student t, one-sided for slower, Bonferroni over the
    windows), and only where Mann-Kendall (Kendall's tau against night) also calls it (one-sided p <= 0.05:
    one outlying night does not make a trend) and a line fits the window better than the best single step
    (a step is a change point's business). Returns (slope, lo, hi, tau, p, window) or None."""
    from scipy import special

    best = None
    theilslopes = _theilslopes()
    wins = [w for w in DRIFT_WINDOWS if w <= len(x)]
    for w_n in wins:
        w = x[-w_n:]
        if float(np.ptp(w)) == 0.0:
            continue
        i = np.arange(w_n, dtype=float)
        tau, p_mk = _mann_kendall(w)
        if not (tau > 0 and p_mk <= 0.05):
            continue
        slope, icpt, lo, hi = theilslopes(w, i)
        if slope <= 0:
            continue
        sse_lin = float(np.sum((w - (icpt + slope * i)) ** 2))
        cs, cs2 = np.cumsum(w), np.cumsum(w * w)
        sse_step = min(float((cs2[k - 1] - cs[k - 1] ** 2 / k)
                             + (cs2[-1] - cs2[k - 1]) - (cs[-1] - cs[k - 1]) ** 2 / (w_n - k))
                       for k in range(2, w_n))  # a step on the window's last night too: one night up is a step
        if sse_lin >= sse_step:
            continue
        se = sigma * math.sqrt(12.0 / (w_n ** 3 - w_n))
        p = min(1.0, float(special.stdtr(max(dof, 1.0), -slope / se)) * len(wins))
        if best is None or p < best[4]:
            best = (float(slope), float(lo), float(hi), float(tau), p, w_n)
    return best


def _split_stats(x: np.ndarray, lo: int, idx: int, hi: int, keep: np.ndarray | None = None) -> float:
    """The variance a split of x[lo:hi] at ``idx`` explains, d^2 nb na / (nb + na): the two-segment Gaussian
    log-likelihood gain (up to the noise's variance), maximal at the maximum-likelihood change point. ``keep``:
    the runs that count (:func:`_blips`; None: all)."""
    b, a = x[lo:idx], x[idx:hi]
    if keep is not None:
        b, a = b[keep[lo:idx]], a[keep[idx:hi]]
        if not len(b) or not len(a):
            return -math.inf
    d = float(a.mean() - b.mean())
    return d * d * len(b) * len(a) / (len(b) + len(a))


def _best_split(x: np.ndarray, lo: int, scan: range) -> int:
    """``max(scan, key=lambda j: _split_stats(x, lo, j, len(x)))``, the same index, without two slices' means per
    split: every split's gain from the segment's cumulative sums at once, then :func:`_split_stats` itself only on
    the splits whose gain could be the largest given how far the cumulative sums can stray from the slices' means
    (their rounding differs; bounded here a thousand-fold wider than it can), in scan's
    order, so that the exact maximum and its first occurrence (max's tie rule) are the ones the plain max finds."""
    n = len(x)
    seg = x[lo:n]
    js = np.arange(scan.start, scan.stop)
    nb, na = (js - lo).astype(float), (n - js).astype(float)
    cs = np.cumsum(seg)
    sb = cs[js - lo - 1]
    d = (cs[-1] - sb) / na - sb / nb
    w = nb * na / (nb + na)
    gain = d * d * w
    # how far cumsum's difference of means can be from the slices' (each sum within n^2 eps max|x|), 1000-fold
    delta = 1e3 * n * n * float(np.finfo(float).eps) * float(np.max(np.abs(seg)))
    err = w * (2 * np.abs(d) * delta + delta * delta) + 1e-9 * gain
    if not (np.all(np.isfinite(gain)) and np.all(np.isfinite(err))):
        return max(scan, key=lambda j: _split_stats(x, lo, j, n))
    near = js[gain + err >= float(np.max(gain - err))]
    return max((int(j) for j in near), key=lambda j: _split_stats(x, lo, j, n))


def _refine(x: np.ndarray, lo: int, idx: int, hi: int, keep: np.ndarray | None = None) -> int:
    """The change's location by maximum likelihood among the neighbouring commits (within PLACE_RADIUS runs
    of ``idx``, keeping 3 runs before it and one after): the tested split decides *whether* the series moved,
    this decides *where* (a noisy night just before or after the step otherwise moves the blame by a commit:
    the newest run tested alone against a level that already holds the step's first night)."""
    js = _places(lo, idx, hi, keep)
    return max(js, key=lambda j: (_split_stats(x, lo, j, hi, keep), -abs(j - idx)), default=idx)


def _places(lo: int, idx: int, hi: int, keep: np.ndarray | None) -> list[int]:
    """The locations within PLACE_RADIUS runs of ``idx`` that keep 3 runs before them and one after (runs that
    count: ``keep``, :func:`_spikes` and :func:`_blips`)."""
    js = range(max(lo + 3, idx - PLACE_RADIUS), min(hi - 1, idx + PLACE_RADIUS) + 1)
    if keep is None:
        return list(js)
    return [j for j in js if keep[lo:j].sum() >= 3 and keep[j:hi].any()]


def _place_p(x: np.ndarray, lo: int, idx: int, hi: int, sigma: float, keep: np.ndarray | None = None) -> float:
    """How sure the location is: the Gaussian profile likelihood of the split at ``idx`` against the other
    splits within PLACE_RADIUS runs (keeping 3 runs before and one after), as a share (a flat prior over them)."""
    js = _places(lo, idx, hi, keep)
    if idx not in js:
        return 1.0
    ll = np.array([_split_stats(x, lo, j, hi, keep) for j in js]) / (2 * sigma * sigma)
    if not np.isfinite(ll.max()):
        return 1.0
    w = np.exp(ll - ll.max())
    return float(w[js.index(idx)] / w.sum())


def check(records: Iterable[Any], *, machine: str | None = None, frontend: str | None = "cli",
          floor: float = FLOOR, q: float = FDR_Q, min_history: int = MIN_HISTORY,
          tail: Sequence[int] = (1, 2), screen: float | None = None) -> CheckResult:
    """Change points over the history of every series in ``records`` (see the package doc).

    Only *current* series are tested: those whose newest healthy point is in the newest run of its suite on
    their machine (a retired case, an old grid version or input rotation, or a series throttled tonight says
    nothing about tonight; a quick or sampled run between two nightly runs retires no nightly series). Per current series the hypotheses are about the level tonight: the newest one and two runs
    against the level before them, and PELT's last change point whatever its age (its segment reaches
    tonight: a change stays under test until it is alerted or the series returns). A change whose two sides
    were measured on different runners (:func:`env_fingerprint`) is a break, not a regression. A trend over
    the newest nights (DRIFT_WINDOWS) that a line fits better than a step is a drift (Mann-Kendall, Theil-Sen)
    and no commit is blamed for it.

    ``screen``: the check that a confirmation rerun follows (``check --confirm``, the nightly job). An alert is
    then a series whose candidates' smallest one-sided p (slower), Bonferroni over that series' own
    candidates, is at most ``screen`` (SCREEN_P), beyond the floor: a per-series screen whose false alerts
    the rerun, tested alone (:func:`confirm`), weeds out (false alerts per series-night: about the screen's
    rate times the confirmation's). Without a rerun the alerts are Benjamini-Hochberg's over all series, which
    must carry the whole false-alert budget alone. Alerts significant at that level too are marked
    ``strict``; only those are raised when the rerun cannot measure them."""
    check_floor(floor)
    gc_was_on = gc.isenabled()
    gc.disable()  # as store.load: a Point, a list and a few arrays per record, acyclic; the cyclic GC's passes
    # over them (and over the records the caller holds) were a tenth of a check over 100,000 records
    try:
        return _check(records, machine=machine, frontend=frontend, floor=floor, q=q, min_history=min_history,
                      tail=tail, screen=screen)
    finally:
        if gc_was_on:
            gc.enable()


def _check(records: Iterable[Any], *, machine: str | None, frontend: str | None, floor: float, q: float,
           min_history: int, tail: Sequence[int], screen: float | None) -> CheckResult:
    """:func:`check`'s work (the GC paused around it), in its steps: what it reads of the records (:func:`_rows`),
    grouped per series, each current series fitted (:class:`_Fit`) and its candidates tested (:func:`_candidates`,
    :func:`_drift_candidate`), the false discovery rate controlled over all series (:func:`_significant_drifts`,
    :func:`_significant_changes`), then one change per series placed (:func:`_one_per_series`) and sorted into
    alerts, improvements and breaks (:func:`_classify`)."""
    res = CheckResult(floor=floor, fdr_q=q)
    rows = _rows(records)
    by, newest = _by_series(rows, machine, frontend)
    res.series = len(by)
    keys = {g: rows.series(idx[-1]) for g, idx in by.items()}  # every row of a group has its series
    last = {g: max(rows.created[i] for i in idx) for g, idx in by.items()}
    siblings = _siblings(keys, last)
    _count_excluded(res, rows, by)
    cands: list[Change] = []
    drift_cands: list[Drift | None] = []  # one per series tested for drift (None: no trend)
    fits: dict[str, _Fit] = {}  # fingerprint -> its fit: to refine a change's location
    for g, idx in by.items():
        idx.sort(key=lambda i: (rows.created[i], rows.run_id[i]))
        healthy = [i for i in idx if rows.why[i] is None]
        if not healthy or rows.run_id[healthy[-1]] != newest[(rows.machine[idx[-1]], rows.suite[healthy[-1]])][1]:
            res.series_stale += 1
            continue
        skey = keys[g]
        series = {**skey._asdict(), "arch": rows.arch(idx[-1])}
        fp = fingerprint(series)
        prior, every, stopped = None, healthy, False
        if rows.ratio[healthy[-1]] is not None:
            # a call-cost series whose newest point carries its interleaved ratio is judged by it, over its points
            # that carry one (the host time moves with the host's state; the ratio does not: docs/regressions.md)
            series["measure"] = CALL_RATIO
            fitted = prior_ratio_noise(skey.provider)
            prior = fitted[0] if fitted is not None else prior_noise(
                float(np.median([rows.p50[i] for i in healthy])), skey.provider, timer=skey.timer)
            healthy = [i for i in healthy if rows.ratio[i] is not None]
        elif skey.timer in CALL_COST_TIMERS:
            had = [k for k, i in enumerate(healthy[-MAX_HISTORY:]) if rows.ratio[i] is not None]
            stopped = bool(had)
            if had:  # its ratio stopped: checked on the host time again, which cannot resolve what the ratio did
                i = healthy[-MAX_HISTORY:][had[-1] + 1]
                res.breaks.append(Break(
                    series=series, fingerprint=fp, kind="method", run_id=rows.run_id[i], created=rows.created[i],
                    detail=f"no interleaved call ratio since run {rows.run_id[i]} (the interleaved timing failed or "
                           "was not run; the record's health says why): checked on its host time per call again, "
                           "which moves with the host's state"))
        # PELT's cost grows with the history; older levels say nothing of tonight
        pts = _points(rows, healthy[-MAX_HISTORY:], ratio=prior is not None)
        if len(pts) < min_history:
            # a method break is the series' own (its runs, where its method changed), not where its ratios start
            own = pts if prior is None else _points(rows, every[-MAX_HISTORY:])
            brk = _method_break(series, fp, skey, own, siblings, last, keys) if len(own) < min_history else None
            if brk is not None:
                res.breaks.append(brk)
            continue
        res.series_checked += 1
        if not stopped:  # ``checked`` closes issues: not on a night its ratio, what they were about, was not measured
            res.checked.append(fp)
        res.windows[fp] = [p.run_id for p in pts]
        fit = _fit(series, fp, rows.case_key(idx[-1]), pts, screen, prior)
        mine = _candidates(fit, _hypotheses(fit, tail))
        cands += mine
        fits[fp] = fit
        if fit.n >= DRIFT_MIN:
            drift_cands.append(_drift_candidate(fit))
    res.candidates = len(cands)
    drifting = _significant_drifts(res, drift_cands, floor)
    if not cands:
        return res
    screened = _significant_changes(res, cands, floor=floor, q=q, screen=screen)
    current = _one_per_series(res.changes, screened, fits, floor)
    _classify(res, current, drifting)
    return res


class _Rows:
    """What :func:`check` reads of each record, one list per field in the records' order: its runner's machine,
    front end, suite, time (the record's own text: the order and the alert's words), run, commit, series (a
    hashable group: the record's :class:`Series`, or the frame's fingerprint of it), why it is no point
    (:func:`unhealthy`, None for a point), its median and its within-run noise (:func:`within_sigma`); and per row
    on demand its :class:`Series`, architecture, case key and runner's fingerprint (:func:`env_fingerprint`).
    Built from loaded records (:class:`_RecordRows`) or from the frame's columns (:class:`_FrameRows`)."""

    machine: list[Any]
    frontend: list[Any]
    suite: list[Any]
    created: list[str]
    run_id: list[str]
    commit: list[Any]
    group: list[Any]
    why: list[str | None]
    p50: list[float | None]
    within: list[float]
    ratio: list[tuple[float, float] | None]  # a call-cost record's interleaved ratio and its noise (call_ratio)
    processes: list[int]  # the fresh processes its median was taken over (processes_of)

    def series(self, i: int) -> Series:
        raise NotImplementedError

    def arch(self, i: int) -> Any:
        raise NotImplementedError

    def case_key(self, i: int) -> str:
        raise NotImplementedError

    def env_print(self, i: int) -> dict[str, str]:
        raise NotImplementedError


class _RecordRows(_Rows):
    """:class:`_Rows` of records (:class:`~robocache.bench.schema.Record`: loaded, or built by :func:`.records.synthetic`)."""

    def __init__(self, records: Iterable[Any]) -> None:
        self._recs = recs = list(records)
        self.machine = [r.env.machine if r.env is not None else None for r in recs]
        self.frontend = [r.frontend for r in recs]
        self.suite = [r.suite for r in recs]
        self.created = [r.created for r in recs]
        self.run_id = [r.run_id for r in recs]
        self.commit = [r.git_commit for r in recs]
        self.group = [series_key(r) for r in recs]
        self.why = [unhealthy(r) for r in recs]
        self.p50 = [p50(r) for r in recs]
        self.within = [within_sigma(r) for r in recs]
        self.ratio = [call_ratio(r) for r in recs]
        self.processes = [processes_of(r) for r in recs]
        self._env_prints: dict[int, tuple[Any, dict[str, str]]] = {}

    def series(self, i: int) -> Series:
        return self.group[i]

    def arch(self, i: int) -> Any:
        env = self._recs[i].env
        return env.arch if env is not None else None

    def case_key(self, i: int) -> str:
        return case_key(self._recs[i])

    def env_print(self, i: int) -> dict[str, str]:
        """Computed once per env object (the records of one file share theirs), kept alive so that its id is not
        reused while this lives."""
        env = self._recs[i].env
        got = self._env_prints.get(id(env))
        if got is None or got[0] is not env:
            got = self._env_prints[id(env)] = (env, env_fingerprint(self._recs[i]))
        return dict(got[1])  # each point its own dict


# the frame's columns the check reads (robocache.bench.frame: one row per record)
FRAME_COLUMNS = ("machine", "frontend", "suite", "created_text", "run_id", "git_commit", "series", "status", "p50",
                 "throttled", "contended", "noise", "env", "op", "case_id", "provider", "dtype", "timer", "cache",
                 "grid_version", "input_sets", "method_version", "interleaved", "processes")


def _values(col: Any) -> list[Any]:
    """A frame column (pandas, or Arrow: the CLI reads the table without pandas) as Python values, a missing one as
    None (a categorical's or a float's NaN alike)."""
    vals = col.to_pylist() if hasattr(col, "to_pylist") else col.tolist()
    return [None if v is None or v != v else v for v in vals]


class _FrameRows(_Rows):
    """:class:`_Rows` of the frame (robocache.bench.frame, one row per record, with :data:`FRAME_COLUMNS`: a pandas
    DataFrame, or the Arrow table itself): its columns read whole, the series grouped by the frame's fingerprint
    column; a row's env parsed once per distinct env (one per results file)."""

    def __init__(self, df: Any) -> None:
        self._df = df
        self._cols: dict[str, list[Any]] = {}
        self.machine, self.frontend, self.suite = (self._col(c) for c in ("machine", "frontend", "suite"))
        self.created = self._col("created_text")
        self.run_id, self.commit, self.group = self._col("run_id"), self._col("git_commit"), self._col("series")
        self.p50 = [v if v is not None and 0 < v < math.inf else None for v in self._col("p50")]
        self.why = [f"status {s}" if s != "ok" or p is None else "throttled" if t else "contended" if c else None
                    for s, p, t, c in zip(self._col("status"), self.p50, self._col("throttled"),
                                          self._col("contended"))]
        self.within = [min(float(n) / 1.96, 1e6) if n is not None else 0.0 for n in self._col("noise")]
        self.ratio = [call_ratio_of_json(t, il) for t, il in zip(self._col("timer"), self._col("interleaved"))]
        self.processes = self._processes()
        self._envs: dict[Any, dict[str, Any]] = {}

    def _col(self, c: str) -> list[Any]:
        got = self._cols.get(c)
        if got is None:
            got = self._cols[c] = _values(self._df[c])
        return got

    def _processes(self) -> list[int]:
        """The ``processes`` column (1 where missing: a frame of an older cache or a caller's selection without it)."""
        try:
            vals = self._col("processes")
        except KeyError:
            return [1] * len(self.run_id)
        return [int(v) if v is not None and v >= 1 else 1 for v in vals]

    def _env(self, i: int) -> dict[str, Any]:
        text = self._col("env")[i]
        e = self._envs.get(text)
        if e is None:
            try:
                e = json.loads(str(text))
            except ValueError:
                e = {}
            e = self._envs[text] = e if isinstance(e, dict) else {}
        return e

    def _int(self, col: str, i: int, default: int | None) -> int | None:
        v = self._col(col)[i]
        return default if v is None else int(v)

    def series(self, i: int) -> Series:
        has_method = self._int("input_sets", i, None) is not None  # the frame writes a method's input sets always
        return Series(machine=self.machine[i], op=str(self._col("op")[i]), case_id=str(self._col("case_id")[i]),
                      provider=str(self._col("provider")[i]), dtype=str(self._col("dtype")[i]),
                      timer=str(self._col("timer")[i]) if has_method else "-",
                      cache=str(self._col("cache")[i]) if has_method else "-",
                      grid_version=self._int("grid_version", i, None), frontend=self.frontend[i],
                      input_sets=self._int("input_sets", i, 1), method_version=self._int("method_version", i, 1))

    def arch(self, i: int) -> Any:
        return self._env(i).get("arch")

    def case_key(self, i: int) -> str:
        return f"{self._col('case_id')[i]}/{self._col('dtype')[i]}/{self._col('provider')[i]}"

    def env_print(self, i: int) -> dict[str, str]:
        env = self._env(i)
        return env_print(env)  # each point its own dict


def machines(records: Any) -> list[Any]:
    """The runner's machine of every record (or frame row), as the check reads it."""
    return _rows(records).machine


def _rows(records: Iterable[Any]) -> _Rows:
    """The check's rows: the frame's columns (a DataFrame or an Arrow table: it has ``columns``), else the
    records'."""
    return _FrameRows(records) if hasattr(records, "columns") else _RecordRows(records)


def _by_series(rows: _Rows, machine: str | None,
               frontend: str | None) -> tuple[dict[Any, list[int]], dict[Any, tuple[str, str]]]:
    """The rows of ``machine`` and ``frontend`` (None: any) per series, and per machine and suite the (created,
    run_id) of its newest record (a series is current when its newest healthy point is in its suite's newest run)."""
    by: dict[Any, list[int]] = defaultdict(list)
    newest: dict[Any, tuple[str, str]] = {}  # (machine, suite) -> (created, run_id) of its newest record
    for i, (mach, front, suite, created, run, g) in enumerate(zip(rows.machine, rows.frontend, rows.suite,
                                                                   rows.created, rows.run_id, rows.group)):
        if machine and mach != machine:
            continue
        if frontend and front != frontend:
            continue
        by[g].append(i)
        m, stamp = (mach, suite), (created, run)
        if m not in newest or stamp > newest[m]:
            newest[m] = stamp
    return by, newest


def _siblings(keys: dict[Any, Series], last: dict[Any, str]) -> dict[Series, list[tuple[str, Series]]]:
    """Series measured another way (method version, input rotation): per case (:func:`_siblings_key`), each of its
    series with its newest record's time, for the method breaks."""
    siblings: dict[Series, list[tuple[str, Series]]] = defaultdict(list)
    for g, k in keys.items():
        siblings[_siblings_key(k)].append((last[g], k))
    return siblings


def _count_excluded(res: CheckResult, rows: _Rows, by: dict[Any, list[int]]) -> None:
    """The records of the series that are no point (:func:`unhealthy`), counted in ``res`` by reason."""
    for idx in by.values():
        for i in idx:
            why = rows.why[i]
            if why:
                res.excluded_points += 1
                k = why.split()[0] if why.startswith("status") else why
                res.excluded_reasons[k] = res.excluded_reasons.get(k, 0) + 1


def _points(rows: _Rows, healthy: list[int], ratio: bool = False) -> list[Point]:
    """A series' healthy rows (sorted) as points: their median times, or (``ratio``) their interleaved ratios."""
    if ratio:
        return [Point(rows.run_id[i], rows.commit[i], rows.created[i], math.log(rows.ratio[i][0]), rows.ratio[i][1],
                      rows.suite[i], rows.env_print(i), rows.processes[i]) for i in healthy]
    return [Point(rows.run_id[i], rows.commit[i], rows.created[i], math.log(rows.p50[i]), rows.within[i],
                  rows.suite[i], rows.env_print(i), rows.processes[i]) for i in healthy]


def _method_break(series: dict[str, Any], fp: str, skey: Series, pts: list[Point],
                  siblings: dict[Series, list[tuple[str, Series]]], last: dict[Any, str],
                  keys: dict[Any, Series]) -> Break | None:
    """A series too short to test that started where a sibling measured another way stopped: a method break."""
    older = [k for t, k in siblings[_siblings_key(skey)] if k != skey and t < pts[0].created]
    if not older:
        return None
    newest_of = {keys[g]: t for g, t in last.items()}
    prev = max(older, key=lambda k: newest_of[k])
    return Break(series=series, fingerprint=fp, kind="method", run_id=pts[0].run_id, created=pts[0].created,
                 detail=(f"measured another way since run {pts[0].run_id}: method version {prev.method_version} -> "
                         f"{skey.method_version}, input sets {prev.input_sets} -> {skey.input_sets}; a new series, "
                         "not compared with the old one"))


@dataclass
class _Fit:
    """One current series as the check tests it: its points and log-times, its noise, and its levels (PELT's
    change points without spikes and blips). Every candidate of the series is built from this
    (:meth:`candidate`)."""
    series: dict[str, Any]
    fp: str
    key: str  # the case key (:func:`case_key`)
    pts: list[Point]
    x: np.ndarray  # log-times
    within: np.ndarray  # within-run noise per point
    prior: float  # the noise prior for the series' provider and median time (prior_noise)
    floors: tuple[float, float]  # sigma_floors(x, within): the same for every candidate's noise
    sigma: float  # the series' noise, shrunk to the prior
    # the screen's noise (check(screen=...)): the outlying nights judged on a robust scale (odd), the consecutive
    # differences around them (away), and the floors without them
    odd: np.ndarray
    away: set[int]
    floors_core: tuple[float, float]
    cps: list[int]  # PELT's change points (spikes left out)
    keep: np.ndarray  # the runs that count in a level: not a spike, not in a blip
    bounds: list[int]  # the levels' boundaries: [0, *levels, n]
    scan: range  # the splits a "scan" candidate was the likeliest of (in kept runs)

    @property
    def n(self) -> int:
        return len(self.x)

    def candidate(self, idx: int, lo: int, hi: int, kind: str) -> Change:
        """The change at ``idx`` tested in runs [lo, hi): the level before against the runs after, on the noise
        without the differences across the segment boundaries and this candidate; with the screen, also without the
        outlying nights (``sigma_core``, ``p_core``)."""
        x, keep, pts = self.x, self.keep, self.pts
        before, after = x[lo:idx][keep[lo:idx]], x[idx:hi][keep[idx:hi]]
        skip = {b - 1 for b in self.cps} | {idx - 1}
        # consecutive differences overlap: their SD has about 2/3 of the degrees of freedom of their count
        dof = (2.0 / 3.0) * max(self.n - 1 - len(skip), 1)
        sig_c = shrink(series_sigma(x, self.within, skip=skip, floors=self.floors), dof, self.prior)
        d, se, p, tq = _test(before, after, sig_c, dof + PRIOR_DOF)
        bonf = len(self.scan) if kind == "scan" else 1  # a scan's location was the likeliest of len(scan) splits
        p = min(1.0, p * bonf)
        p_one = p / 2 if d > 0 else min(1.0, 1 - p / 2)
        sig_k, p_core = sig_c, p_one
        if self.away:
            sig_k, p_core = self._core_test(idx, lo, skip, before, after, bonf)
        moved = env_changes(pts[idx - 1].env, pts[idx].env)
        return Change(series=self.series, fingerprint=self.fp, index=idx, n_before=len(before), n_after=len(after),
                      ratio=safe_exp(d), ratio_ci=(safe_exp(d - tq * se), safe_exp(d + tq * se)), p_value=p,
                      before=pts[idx - 1], after=pts[idx], latest=True, sigma=sig_c, key=self.key,
                      before_level=float(before.mean()), kind=kind, dof=dof + PRIOR_DOF, p_one=p_one,
                      after_levels=[float(v) for v in after], before_levels=[float(v) for v in x[lo:idx]],
                      cause="environment" if moved else "code", cause_detail="; ".join(moved),
                      segment=(lo, hi), tonight=pts[-1], sigma_core=sig_k, p_core=min(p_core, p_one),
                      wide_levels=[float(v) for v in x[max(0, idx - WIDE_REF):idx]])

    def _core_test(self, idx: int, lo: int, skip: set[int], before: np.ndarray, after: np.ndarray,
                   bonf: int) -> tuple[float, float]:
        """The screen's test: the outlying nights out of the noise and of the level before; (sigma, one-sided p)."""
        x = self.x
        core = self.keep[lo:idx].copy()
        core[[j - lo for j in self.odd if lo <= j < idx]] = False
        dof_k = (2.0 / 3.0) * max(self.n - 1 - len(skip | self.away), 1)
        sig_k = shrink(series_sigma(x, self.within, skip=skip | self.away, floors=self.floors_core), dof_k,
                       self.prior)
        b_k = x[lo:idx][core] if core.sum() >= 3 else before
        d_k, _, p_k, _ = _test(b_k, after, sig_k, dof_k + PRIOR_DOF)
        p_k = min(1.0, p_k * bonf)
        return sig_k, p_k / 2 if d_k > 0 else min(1.0, 1 - p_k / 2)


def _fit(series: dict[str, Any], fp: str, key: str, pts: list[Point], screen: float | None,
         prior: float | None = None) -> _Fit:
    """A series' noise and levels from its points (:class:`_Fit`); ``prior``: its noise prior where the caller
    chose it (a call ratio's), else the provider's for the points' median time."""
    x = np.array([p.log_t for p in pts])
    within = np.array([p.within for p in pts])
    n = len(x)
    if prior is None:
        prior = prior_noise(safe_exp(float(np.median(x))), series["provider"], timer=series.get("timer"))
    floors = sigma_floors(x, within)  # the same for every candidate's noise
    sigma = shrink(series_sigma(x, within, floors=floors), (2.0 / 3.0) * (n - 1), prior)
    # the screen's noise (a confirmation follows): without the outlying nights, judged on a robust scale (the
    # median consecutive difference). One +-24% night among a few-microsecond case's 1.4% made its noise 3-6%
    # and kept a +10% step on the night it landed from the rerun (the out-of-sample replay: most of the 9% not
    # sent); the confirmation weighs such nights instead, as the series' own tails (confirmation.rerun_test).
    # Without a rerun to follow the noise keeps them: a second state's nights are no alert by themselves.
    odd = np.flatnonzero(~_spikes(x, _robust_sigma(x, within))) if screen is not None else np.array([], int)
    away = {int(j) + k for j in odd for k in (-1, 0)}  # the two differences around each
    floors_core = sigma_floors(np.delete(x, odd), within) if len(odd) else floors
    spiky = _spikes(x, sigma)  # outlying single nights: PELT runs without them
    kept_at = np.flatnonzero(spiky)
    cps = [int(kept_at[b]) for b in _segments(x[spiky], sigma)]
    levels, keep = _blips(x, cps, sigma, spiky)  # the levels' boundaries; spikes and blips left out of every level
    bounds = [0, *levels, n]
    # the splits a scan inside PELT's last segment looks at, over the runs that count
    lo0_k = int(keep[:bounds[-2]].sum())
    scan = range(lo0_k + 3, int(keep.sum()) - 2)
    return _Fit(series=series, fp=fp, key=key, pts=pts, x=x, within=within, prior=prior, floors=floors, sigma=sigma,
                odd=odd, away=away, floors_core=floors_core, cps=cps, keep=keep, bounds=bounds, scan=scan)


def _hypotheses(fit: _Fit, tail: Sequence[int]) -> dict[int, tuple[int, int, str]]:
    """The splits tested tonight: change index -> (level start, end, kind), all about the level tonight."""
    n, bounds, keep = fit.n, fit.bounds, fit.keep
    tests: dict[int, tuple[int, int, str]] = {}
    if len(bounds) > 2:  # PELT's last change point, whatever its age: its segment reaches tonight
        tests[bounds[-2]] = (bounds[-3], n, "pelt")
    # the newest runs against the level before them: from the latest PELT boundary that leaves 3 runs
    # (a boundary among the newest runs is itself a candidate: PELT's minimum segment of 2 puts one at
    # n-2 when only the last run moved; which split is right is decided below, by how much each explains)
    for k in tail:
        idx = n - k
        lo = max(b for b in bounds[:-1] if b <= idx - 3) if idx >= 3 else 0
        if idx - lo >= 3:
            tests[idx] = (lo, n, "tail")
    # the likeliest single change inside PELT's last segment (where PELT, its penalty scaled by a noise the
    # tails inflate, found none): its p is Bonferroni's over the locations scanned
    # (over the runs that count: spikes and blips left out, as in every level)
    if len(fit.scan) >= 2:
        lo_k = int(keep[:bounds[-2]].sum())  # the segment's start among the kept runs
        best = int(np.flatnonzero(keep)[_best_split(fit.x[keep], lo_k, fit.scan)])
        if best not in tests:
            tests[best] = (bounds[-2], n, "scan")
    return tests


def _candidates(fit: _Fit, tests: dict[int, tuple[int, int, str]]) -> list[Change]:
    """The series' candidate changes, in index order: the tested splits that leave a level of 3 runs before them and
    a run after (runs that count: ``fit.keep``)."""
    keep = fit.keep
    mine = [fit.candidate(idx, lo, hi, kind) for idx, (lo, hi, kind) in sorted(tests.items())
            if keep[lo:idx].sum() >= 3 and keep[idx:hi].any()]
    for c in mine:
        c.n_tests = len(mine)
    return mine


def _drift_candidate(fit: _Fit) -> Drift | None:
    """The series' strongest trend ending tonight (:func:`_drift`), tested on the noise of the nights before the
    windows (a drift is not noise); None when there is none."""
    x, n = fit.x, fit.n
    head = x[:-min(DRIFT_WINDOWS)]
    dof_d = (2.0 / 3.0) * max(len(head) - 1, 0)
    sig_d = shrink(series_sigma(head, fit.within[:len(head)]), dof_d, fit.prior)
    got = _drift(x, sig_d, dof_d + PRIOR_DOF)
    if got is None:
        return None
    slope, lo_s, hi_s, tau, p, w = got
    # the level a confirmation rerun is compared with: the nights before the window (its first nights where fewer
    # than SCREEN_MIN_BEFORE precede it: a higher level, so a harder confirmation)
    ref_nights = x[:n - w] if n - w >= SCREEN_MIN_BEFORE else x[:SCREEN_MIN_BEFORE]
    pts = fit.pts
    return Drift(series=fit.series, fingerprint=fit.fp, key=fit.key, slope=safe_exp(slope) - 1,
                 slope_ci=(safe_exp(lo_s) - 1, safe_exp(hi_s) - 1), total=safe_exp(slope * (w - 1)) - 1, window=w,
                 tau=tau, p_value=p, first=pts[-w], last=pts[-1],
                 before_levels=[float(v) for v in ref_nights[-MAX_REF:]], window_levels=[float(v) for v in x[-w:]],
                 sigma=sig_d, dof=dof_d + PRIOR_DOF, before=pts[max(n - w - 1, 0)])


def _significant_drifts(res: CheckResult, drift_cands: list[Drift | None], floor: float) -> set[str]:
    """Benjamini-Hochberg (DRIFT_Q) over every series tested for drift (no trend: p = 1): the drifts beyond the
    floor go to ``res.drifts`` (steepest first); returns their series' fingerprints."""
    from scipy import stats

    drifting: set[str] = set()
    if not drift_cands:
        return drifting
    qd = stats.false_discovery_control(np.array([d.p_value if d else 1.0 for d in drift_cands]), method="bh")
    for d, qq in zip(drift_cands, qd):
        if d is None:
            continue
        d.q_value = float(qq)
        if qq <= DRIFT_Q and d.total >= floor:
            res.drifts.append(d)
            drifting.add(d.fingerprint)
    res.drifts.sort(key=lambda d: -d.slope)
    return drifting


def _significant_changes(res: CheckResult, cands: list[Change], *, floor: float, q: float,
                         screen: float | None) -> list[Change]:
    """Benjamini-Hochberg (``q``) over all candidates of all series: the strict ones beyond the floor go to
    ``res.changes``. Returns the screened ones (``screen``, a confirmation rerun follows): slower candidates beyond
    the floor, not strict, whose one-sided p, Bonferroni over the series' own candidates, passes the screen."""
    from scipy import stats

    qv = stats.false_discovery_control(np.array([c.p_value for c in cands]), method="bh")
    beyond = {id(c) for c in cands if c.ratio >= 1 + floor or c.ratio <= 1 / (1 + floor)}
    for c, qq in zip(cands, qv):
        c.q_value = float(qq)
        c.strict = qq <= q and id(c) in beyond
        if c.strict:
            res.changes.append(c)
    # the screen: no correction across series (the rerun is the check on those), so a change is found however many
    # other series moved tonight; a spending rule over the nights a change is screened again: the n-th night after
    # it, screen / (n - 1) (a real step's evidence grows with its nights; an old weak one is the same fluke night
    # after night, and each night's fresh reruns were another draw against a level that fluke had selected: the
    # replay's A/A torch.compile series whose first ten nights drew low was sent twenty nights running, and
    # confirmed three times)
    screened = [c for c in cands if screen is not None and id(c) in beyond and c.ratio > 1 and not c.strict
                and c.p_core * c.n_tests <= screen / max(1, c.n_after - 1)]
    if screen is not None:  # a rerun follows: it needs a level to be compared with (SCREEN_MIN_BEFORE runs)
        screened = [c for c in screened if c.n_before >= SCREEN_MIN_BEFORE]
        res.changes = [c for c in res.changes if c.ratio < 1 or c.n_before >= SCREEN_MIN_BEFORE]
    return screened


def _explained(c: Change) -> float:
    """The variance the change's split explains, d^2 nb na / (nb + na), negated: the smallest is the likeliest."""
    d = math.log(c.ratio)
    return -d * d * c.n_before * c.n_after / (c.n_before + c.n_after)


def _one_per_series(changes: list[Change], screened: list[Change], fits: dict[str, _Fit],
                    floor: float) -> dict[str, Change]:
    """One change per series (fingerprint -> change): of its significant candidates (all about the level tonight,
    a strict slower one before any screened), the split that explains the most variance (the likelihood-ratio
    location: a step two nights ago also makes "last night vs before" significant, diluted, and the reverse),
    then placed among the neighbouring commits (:func:`_placed`)."""
    per: dict[str, list[Change]] = defaultdict(list)
    for c in changes:
        per[c.fingerprint].append(c)
    strict_slower = {c.fingerprint for c in changes if c.ratio > 1}
    for c in screened:
        if c.fingerprint not in strict_slower:  # a strict slower change speaks first
            per[c.fingerprint].append(c)
    current: dict[str, Change] = {}
    for fp, cs in per.items():
        # a significant step tonight measured inside PELT's last segment is newer news than that segment's
        # own start (an old step must not hide tonight's); but a faster night tonight does not hide a slowdown
        # that is significant with tonight counted in its level after (a low night inside a held step is no
        # return; it was reported as an improvement and the step's issue closed as recovered for a night:
        # docs/regressions.md, "A low night inside a held step")
        last_cp = max((c.index for c in cs if c.kind == "pelt"), default=None)
        slower = any(c.ratio > 1 for c in cs)
        newer = [c for c in cs if last_cp is not None and c.kind == "tail" and c.index - c.n_before >= last_cp
                 and (c.ratio > 1 or not slower)]
        current[fp] = _placed(min(newer or cs, key=_explained), fits[fp], floor)
    return current


def _placed(c: Change, fit: _Fit, floor: float) -> Change:
    """The change at its maximum-likelihood split among the neighbouring commits (:func:`_refine`), with its own
    size and the tested split's significance, and how sure that place is (``place_p``)."""
    lo, hi = c.segment
    j = _refine(fit.x, lo, c.index, hi, fit.keep)
    if j != c.index:
        moved = fit.candidate(j, lo, hi, c.kind)
        # a move keeps the level before as wide as the screen asked (SCREEN_MIN_BEFORE runs): the confirmation
        # compares its reruns with that level, and three nights of a noisy series are no reference (the
        # replay's surest false alert: an A/A torch.compile series at night 7, moved to 3 low nights, P = 0.97)
        wide = moved.n_before >= min(c.n_before, SCREEN_MIN_BEFORE)
        if wide and (moved.ratio > 1) == (c.ratio > 1) and (moved.ratio >= 1 + floor
                                                            or moved.ratio <= 1 / (1 + floor)):
            # the significance is the tested split's (the test that controls the error rate); only the
            # place and the size move: the best of two locations' p would be an uncorrected second look
            moved.q_value, moved.strict, moved.n_tests = c.q_value, c.strict, c.n_tests
            moved.p_one, moved.p_value, moved.p_core = c.p_one, c.p_value, c.p_core
            c = moved
    c.place_p = _place_p(fit.x, lo, c.index, hi, c.sigma, fit.keep)
    return c


def _classify(res: CheckResult, current: dict[str, Change], drifting: set[str]) -> None:
    """Each series' change into ``res``: a break when the runner changed across it (never the commit's fault),
    nothing when the series drifts (a trend is reported as a drift: no single commit is blamed), else an alert
    (slower) or an improvement (faster, within the newest RECENT runs; an older one is history)."""
    for c in current.values():
        if c.cause == "environment":
            res.breaks.append(Break(series=c.series, fingerprint=c.fingerprint, kind="environment",
                                    detail=f"the runner changed between run {c.before.run_id} and "
                                           f"{c.after.run_id} ({c.cause_detail})",
                                    run_id=c.after.run_id, created=c.after.created, ratio=c.ratio))
        elif c.fingerprint in drifting:
            continue
        elif c.direction == "slower":
            res.alerts.append(c)
        elif c.n_after <= RECENT:
            res.improvements.append(c)
    res.alerts.sort(key=lambda c: -c.ratio)
    res.improvements.sort(key=lambda c: c.ratio)
