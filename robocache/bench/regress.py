"""Regression verdicts between two runs, and change points over the whole history.

Two questions, one noise model:

``compare(base, new)``
    Per case: ``same``, ``faster``, ``slower``, ``incomparable`` or ``failed``. A change is a verdict only
    when it exceeds both a floor (default 3%) and ``Z`` times that case's measured noise. The noise of a
    ratio of two medians is the within-run uncertainty of each (the harness's 95% interval of the median,
    ``method.noise``) plus, twice, the *between-run* noise: on the H200 two runs of one commit differed by
    up to 18x their within-run intervals (a fresh process, other input addresses, clocks), so within-run
    intervals alone would cry wolf. The between-run noise comes from the series' own history when given
    (``history=``: every healthy run of the same series except the two compared) and is never taken below
    :func:`prior_noise`, fitted to H200 runs of unchanged kernel code.

``check(records)``
    Over the history (every series, :func:`schema.series_key`: machine, case, provider, dtype, timer, cache,
    grid version, front end, input rotation), in run order, with unhealthy points dropped (failed or
    incorrect status, throttled, contended): change points from ``ruptures`` (PELT, exact optimal
    segmentation under a penalty; the penalty is scaled by the series' own noise, so a quiet series segments
    at small steps and a noisy one only at large ones), plus the newest one and two runs as candidate
    segments (a regression must be found the night it lands, before PELT's minimum segment could see it).
    Each candidate gets a p-value (difference of segment means of log-times over the series' robust noise,
    Student t), all candidates of all series together go through Benjamini-Hochberg
    (``scipy.stats.false_discovery_control``): false discoveries are controlled across the grid, not per
    series. An alert is a significant change that still holds at the newest run, beyond the floor, in the
    slower direction; it names the series, the ratio with its 95% interval, the last commit before and the
    first after, and the command that reproduces it.

Why ruptures + SciPy rather than Apache Otava (E-Divisive + t-test, the method this mirrors) or MongoDB's
signal-processing-algorithms: apache-otava 0.8.0 pins numpy 2.2 (we pin 2.4) and pulls database, BigQuery
and Slack clients; signal-processing-algorithms ships only a source distribution that compiles C.
ruptures is maintained, numpy/scipy-only, with wheels for our Pythons.
"""
from __future__ import annotations

import math
import shlex
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any

import numpy as np

from .schema import FAILED_STATUSES, Series, fingerprint, series_key

FLOOR = 0.03  # a change smaller than 3% is never a verdict or an alert, whatever the noise
Z = 4.0  # verdicts need a change beyond Z sigma: ~1 false verdict in 16,000 cases under Gaussian noise
FDR_Q = 0.01  # Benjamini-Hochberg level over all candidate change points of all series
RECENT = 5  # PELT's last change point is a hypothesis tonight only within the newest RECENT runs (older: history)
MAX_HISTORY = 150  # the newest healthy points per series that a check looks at
MIN_HISTORY = 6  # healthy points a series needs before it can alert (fewer: its noise is a guess)
PELT_BETA = 8.0  # PELT penalty: beta * sigma^2 * log(n) on log-times (twice BIC's: few spurious splits)
NOISE_MIN = 0.002  # no series is assumed quieter than 0.2% between runs
# Between-run noise assumed at least (per run, relative): sigma(t) = sqrt(REL^2 + (ABS_US / t)^2). Fitted to
# the 44 quick cases measured by 6 runs of commit c700059 on an H200 (2 CLI, 1 pytest-benchmark, 3 asv):
# least squares of log(sd / model) gave REL 1.35%, ABS 0.07 us, with heavy tails (CuPy's fuse 11-13%);
# rounded up. Launch-bound cases of a few microseconds move by a fraction of a microsecond between processes.
PRIOR_REL = 0.015
PRIOR_ABS_US = 0.1
VERDICTS = ("slower", "faster", "same", "incomparable", "failed")


def prior_noise(time_us: float) -> float:
    """Relative between-run noise (one sigma, one run) assumed for a case of median ``time_us``."""
    t = max(float(time_us), 1e-3)
    return math.hypot(PRIOR_REL, PRIOR_ABS_US / t)


def _within(rec: Any) -> float:
    """One sigma of the median's relative uncertainty within its run (``method.noise`` is a 95% half-width)."""
    m = rec.get("method") or {}
    n = m.get("noise")
    return float(n) / 1.96 if n is not None else 0.0


def _p50(rec: Any) -> float | None:
    m = rec.get("metrics")
    if not m:
        return None
    v = m["time_us"]["p50"]
    return float(v) if v and v > 0 else None


def _unhealthy(rec: Any) -> str | None:
    """Why a record cannot be a point of comparison (None when it can)."""
    if rec["status"] in FAILED_STATUSES:
        return f"status {rec['status']}"
    if rec["status"] != "ok" or _p50(rec) is None:
        return f"status {rec['status']}"
    h = rec.get("health") or {}
    if h.get("throttled"):
        return "throttled"
    if h.get("contended"):
        return "contended"
    return None


def case_label(rec: Any) -> str:
    c = rec["case"]
    return f"{c['id']} {c['dtype']} {c['provider']}"


def case_key(rec: Any) -> str:
    """The harness's case key (``op/tag/dtype/provider``), as ``robocache-bench run --cases`` takes it."""
    c = rec["case"]
    return f"{c['id']}/{c['dtype']}/{c['provider']}"


# compare() names these in its verdict ("incomparable: machine ...", "front end ...", "input sets ...") instead of
# matching on them, so a run measured differently reads as incomparable, not as missing.
_SAID_APART = {"machine": None, "frontend": None, "input_sets": None}


def _match_key(rec: Any) -> Series:
    return series_key(rec)._replace(**_SAID_APART)


def _match_untimed(b_idx: dict[Series, Any], n_idx: dict[Series, Any]) -> None:
    """A record never timed (a crash or a failed check before timing: no method, timer "-") stands for its case
    whatever timer and cache the other run measured it with, so it reads "failed", not "missing" (in place)."""
    for idx, other in ((n_idx, b_idx), (b_idx, n_idx)):
        for k in [k for k in idx if k.timer == "-" and k not in other]:
            match = [o for o in other if o._replace(timer="-", cache="-") == k and o not in idx]
            if len(match) == 1:
                idx[match[0]] = idx.pop(k)


def history_noise(records: Iterable[Any], exclude_runs: Iterable[str] = ()) -> dict[Series, float]:
    """Between-run noise per series (one sigma of log-time per run) from its healthy runs, in run order.

    Robust to the steps that code changes put in a history: the MAD of consecutive differences (a step moves
    one difference only), scaled to one run's sigma; kept only with at least 4 runs.
    """
    skip = set(exclude_runs)
    pts: dict[Series, list[tuple[str, float]]] = defaultdict(list)
    for r in records:
        if r["run_id"] in skip or _unhealthy(r):
            continue
        pts[series_key(r)].append((r["created"], math.log(_p50(r))))
    out = {}
    for k, xs in pts.items():
        if len(xs) >= 4:
            x = np.array([v for _, v in sorted(xs)])
            out[k] = _series_sigma(x, np.zeros(0))
    return out


# --- compare --------------------------------------------------------------------------------------------

@dataclass
class Verdict:
    case: str  # "op/tag dtype provider"
    key: str  # harness case key
    verdict: str
    ratio: float | None = None  # new / base median time (above 1: slower)
    threshold: float | None = None  # the relative change needed for a verdict (the smallest detectable)
    noise: float | None = None  # one sigma of log(ratio)
    noise_source: str = ""  # "history" | "prior"
    base_us: float | None = None
    new_us: float | None = None
    reason: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {k: getattr(self, k) for k in self.__dataclass_fields__}


def compare(base: Sequence[Any], new: Sequence[Any], *, history: Iterable[Any] = (), floor: float = FLOOR,
            z: float = Z) -> list[Verdict]:
    """Verdicts for every case in either run (see the module doc)."""
    b_idx = {_match_key(r): r for r in base}
    n_idx = {_match_key(r): r for r in new}
    _match_untimed(b_idx, n_idx)
    runs = {r["run_id"] for r in (*base, *new)}
    hist = history_noise(history, exclude_runs=runs)
    out: list[Verdict] = []
    for k in sorted(set(b_idx) | set(n_idx), key=lambda k: tuple(str(x) for x in k)):
        b, n = b_idx.get(k), n_idx.get(k)
        ref = n if n is not None else b
        v = Verdict(case=case_label(ref), key=case_key(ref), verdict="incomparable")
        if b is None or n is None:
            v.reason = "only in the new run" if b is None else "missing from the new run"
            out.append(v)
            continue
        b_env, n_env = b.get("env") or {}, n.get("env") or {}
        if b_env.get("machine") != n_env.get("machine"):
            v.reason = f"machine {b_env.get('machine')} vs {n_env.get('machine')}"
            out.append(v)
            continue
        if n["status"] in FAILED_STATUSES or b["status"] in FAILED_STATUSES:
            v.verdict = "failed"
            v.reason = (f"new: {n['status']}" if n["status"] in FAILED_STATUSES else f"base: {b['status']}")
            out.append(v)
            continue
        if b["frontend"] != n["frontend"]:
            v.reason = f"front end {b['frontend']} vs {n['frontend']} (measured differently)"
            out.append(v)
            continue
        ib, inn = (b.get("method") or {}).get("input_sets", 1), (n.get("method") or {}).get("input_sets", 1)
        if ib != inn:
            v.reason = f"input sets {ib} vs {inn} (a method change: L2-resident or rotated inputs)"
            out.append(v)
            continue
        why = _unhealthy(b) or _unhealthy(n)
        if why:
            v.reason = ("base " if _unhealthy(b) else "new ") + why
            out.append(v)
            continue
        tb, tn = _p50(b), _p50(n)
        sk = series_key(n)
        # the prior is a floor: a few runs of history can look quieter than the machine is (H200 A/A: a
        # series whose history said 0.4% moved 3.5% between two runs of one commit)
        prior = prior_noise(min(tb, tn))
        between = max(hist.get(sk, 0.0), prior)
        v.noise_source = "history" if hist.get(sk, 0.0) > prior else "prior"
        sigma = math.sqrt(_within(b) ** 2 + _within(n) ** 2 + 2 * between ** 2)
        thr = max(floor, math.expm1(z * sigma))
        ratio = tn / tb
        v.ratio, v.threshold, v.noise, v.base_us, v.new_us = ratio, thr, sigma, tb, tn
        if ratio > 1 + thr:
            v.verdict = "slower"
        elif ratio < 1 / (1 + thr):
            v.verdict = "faster"
        else:
            v.verdict = "same"
        out.append(v)
    return out


def compare_markdown(verdicts: Sequence[Verdict], base_name: str, new_name: str) -> str:
    counts = {k: sum(v.verdict == k for v in verdicts) for k in VERDICTS}
    lines = [f"## robocache-bench compare: {md_text(base_name)} -> {md_text(new_name)}", "",
             " | ".join(f"{k} {counts[k]}" for k in VERDICTS), "",
             "| verdict | case | base | new | ratio | needs | noise | reason |",
             "| --- | --- | ---: | ---: | ---: | ---: | --- | --- |"]
    order = {k: i for i, k in enumerate(VERDICTS)}
    for v in sorted(verdicts, key=lambda v: (order[v.verdict], -(abs(math.log(v.ratio)) if v.ratio else 0))):
        lines.append("| " + " | ".join([
            f"**{v.verdict}**" if v.verdict in ("slower", "failed") else v.verdict, md_text(v.case),
            _us(v.base_us), _us(v.new_us), f"{v.ratio:.3f}" if v.ratio else "",
            f"±{v.threshold * 100:.1f}%" if v.threshold is not None else "",
            f"{v.noise * 100:.2f}% ({v.noise_source})" if v.noise is not None else "", md_text(v.reason)]) + " |")
    lines += ["", f"A verdict needs a change beyond the floor ({FLOOR:.0%}) and {Z:g} sigma of the case's noise "
              "(\"needs\": the smallest change this case can call; noise: one sigma of log(new/base))."]
    return "\n".join(lines) + "\n"


# --- check ----------------------------------------------------------------------------------------------

@dataclass
class Point:
    run_id: str
    commit: str | None
    created: str
    log_t: float
    within: float
    suite: str


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
    kind: str = "tail"  # "tail": the newest runs against the level before; "pelt": PELT's last change point
    dof: float = 1.0
    after_levels: list[float] = field(default_factory=list)  # log-times after the change
    confirmed: bool | None = None  # None: no confirmation asked; False: could not be measured again

    @property
    def direction(self) -> str:
        return "slower" if self.ratio > 1 else "faster"


@dataclass
class CheckResult:
    changes: list[Change] = field(default_factory=list)  # significant, beyond the floor
    alerts: list[Change] = field(default_factory=list)  # of those: current and slower
    improvements: list[Change] = field(default_factory=list)  # current and faster
    series: int = 0
    series_checked: int = 0  # current, with enough healthy history
    series_stale: int = 0  # no healthy point in their machine's newest run: not tested tonight
    excluded_points: int = 0
    candidates: int = 0
    excluded_reasons: dict[str, int] = field(default_factory=dict)


def _series_dict(rec: Any) -> dict[str, Any]:
    """The record's series (:func:`schema.series_key`) as a dict, with the machine's architecture for the alert."""
    return {**series_key(rec)._asdict(), "arch": (rec.get("env") or {}).get("arch")}


def _segments(x: np.ndarray, sigma: float) -> list[int]:
    """PELT change points (indices where a new segment starts) on log-times, penalty in units of sigma^2."""
    import ruptures

    n = len(x)
    if n < 4:
        return []
    pen = PELT_BETA * sigma ** 2 * math.log(n)
    bkps = ruptures.Pelt(model="l2", min_size=2, jump=1).fit(x.reshape(-1, 1)).predict(pen=pen)
    return [b for b in bkps if 0 < b < n]


def _test(before: np.ndarray, after: np.ndarray, sigma: float, dof: float) -> tuple[float, float, float, float]:
    """Difference of means of log-times, its standard error, the two-sided p-value (Student t with the
    degrees of freedom of the noise estimate) and the t quantile for a 95% interval."""
    from scipy import stats

    d = float(after.mean() - before.mean())
    se = sigma * math.sqrt(1.0 / len(before) + 1.0 / len(after))
    dof = max(float(dof), 1.0)
    p = float(2 * stats.t.sf(abs(d) / se, dof))
    return d, se, p, float(stats.t.ppf(0.975, dof))


def _series_sigma(x: np.ndarray, within: np.ndarray, skip: Iterable[int] = ()) -> float:
    """Between-run noise of one series (one run's sigma of log-time): the standard deviation of consecutive
    differences over sqrt(2) (a step moves one difference only), the differences first winsorized at 5 MADs
    (a crash-slow night does not inflate it), leaving out the differences in ``skip`` (across the changes
    being tested); never below the runs' own median within-run noise or NOISE_MIN."""
    d = np.diff(x)
    drop = [j for j in skip if 0 <= j < len(d)]  # differences across a change being tested are not noise
    if drop and len(d) - len(drop) >= 2:
        d = np.delete(d, drop)
    if len(d) >= 2:
        m = float(np.median(d))
        mad = 1.4826 * float(np.median(np.abs(d - m)))
        if mad > 0:
            d = np.clip(d, m - 5 * mad, m + 5 * mad)
        sd = float(np.std(d, ddof=1)) / math.sqrt(2)
    else:
        sd = 0.0
    return max(sd, float(np.median(within)) if len(within) else 0.0, NOISE_MIN)


def check(records: Iterable[Any], *, machine: str | None = None, frontend: str | None = "cli",
          floor: float = FLOOR, q: float = FDR_Q, min_history: int = MIN_HISTORY,
          tail: Sequence[int] = (1, 2)) -> CheckResult:
    """Change points over the history of every series in ``records`` (see the module doc).

    Only *current* series are tested: those whose newest healthy point is in their machine's newest run (a
    retired case, an old grid version or input rotation, or a series throttled tonight says nothing about
    tonight). Per current series, the hypotheses are about tonight only: the newest one and two runs
    against the level before them, and PELT's last change point when it lies within the newest ``RECENT``
    runs (a slower step that needed a few nights of evidence); older change points are history, not
    hypotheses, and stay out of Benjamini-Hochberg's denominator."""
    from scipy import stats

    res = CheckResult()
    by: dict[Series, list[Any]] = defaultdict(list)
    newest: dict[Any, tuple[str, str]] = {}  # machine -> (created, run_id) of its newest record
    for r in records:
        env = r.get("env") or {}
        if machine and env.get("machine") != machine:
            continue
        if frontend and r["frontend"] != frontend:
            continue
        by[series_key(r)].append(r)
        m, stamp = env.get("machine"), (r["created"], r["run_id"])
        if m not in newest or stamp > newest[m]:
            newest[m] = stamp
    res.series = len(by)
    cands: list[Change] = []
    for recs in by.values():
        recs.sort(key=lambda r: (r["created"], r["run_id"]))
        pts: list[Point] = []
        for r in recs:
            why = _unhealthy(r)
            if why:
                res.excluded_points += 1
                k = why.split()[0] if why.startswith("status") else why
                res.excluded_reasons[k] = res.excluded_reasons.get(k, 0) + 1
                continue
            pts.append(Point(r["run_id"], r.get("git_commit"), r["created"], math.log(_p50(r)), _within(r),
                             r["suite"]))
        pts = pts[-MAX_HISTORY:]  # PELT's cost grows with the history; older levels say nothing of tonight
        mach = (recs[-1].get("env") or {}).get("machine")
        if not pts or pts[-1].run_id != newest[mach][1]:
            res.series_stale += 1
            continue
        if len(pts) < min_history:
            continue
        res.series_checked += 1
        x = np.array([p.log_t for p in pts])
        within = np.array([p.within for p in pts])
        sigma = _series_sigma(x, within)
        n = len(x)
        cps = _segments(x, sigma)
        bounds = [0, *cps, n]
        tests: dict[int, tuple[int, int, str]] = {}  # change index -> (level start, end, kind)
        if cps and cps[-1] >= n - RECENT:  # PELT's last change point, if recent: its segment reaches tonight
            tests[cps[-1]] = (bounds[-3], n, "pelt")
        # the newest runs against the level before them: from the latest PELT boundary that leaves 3 runs
        # (a boundary among the newest runs is itself a candidate: PELT's minimum segment of 2 puts one at
        # n-2 when only the last run moved; which split is right is decided below, by how much each explains)
        for k in tail:
            idx = n - k
            lo = max(b for b in bounds[:-1] if b <= idx - 3) if idx >= 3 else 0
            if idx - lo >= 3:
                tests[idx] = (lo, n, "tail")
        series = _series_dict(recs[-1])
        fp = fingerprint(series)
        key = case_key(recs[-1])
        for idx, (lo, hi, kind) in sorted(tests.items()):
            before, after = x[lo:idx], x[idx:hi]
            if len(before) < 3 or len(after) < 1:  # a level needs 3 runs before it can be departed from
                continue
            # the noise without the differences across segment boundaries and this candidate
            skip = {b - 1 for b in cps} | {idx - 1}
            sig_c = _series_sigma(x, within, skip=skip)
            # consecutive differences overlap: their SD has about 2/3 of the degrees of freedom of their count
            dof = (2.0 / 3.0) * max(n - 1 - len(skip), 1)
            d, se, p, tq = _test(before, after, sig_c, dof)
            cands.append(Change(series=series, fingerprint=fp, index=idx, n_before=len(before),
                                n_after=len(after), ratio=math.exp(d),
                                ratio_ci=(math.exp(d - tq * se), math.exp(d + tq * se)), p_value=p,
                                before=pts[idx - 1], after=pts[idx], latest=True, sigma=sig_c, key=key,
                                before_level=float(before.mean()), kind=kind, dof=dof,
                                after_levels=[float(v) for v in after]))
    res.candidates = len(cands)
    if not cands:
        return res
    qv = stats.false_discovery_control(np.array([c.p_value for c in cands]), method="bh")
    for c, qq in zip(cands, qv):
        c.q_value = float(qq)
        if qq <= q and (c.ratio >= 1 + floor or c.ratio <= 1 / (1 + floor)):
            res.changes.append(c)
    # one change per series: of its significant candidates (all about the newest runs: an older step is not
    # a candidate, so it never hides tonight's), the split that explains the most variance,
    # d^2 nb na / (nb + na) (the likelihood-ratio location: a step two nights ago also makes "last night vs
    # before" significant, diluted, and the reverse)
    def rank(c: Change) -> float:
        d = math.log(c.ratio)
        return -d * d * c.n_before * c.n_after / (c.n_before + c.n_after)

    current: dict[str, Change] = {}
    for c in res.changes:
        if c.fingerprint not in current or rank(c) < rank(current[c.fingerprint]):
            current[c.fingerprint] = c
    for c in current.values():
        (res.alerts if c.direction == "slower" else res.improvements).append(c)
    res.alerts.sort(key=lambda c: -c.ratio)
    res.improvements.sort(key=lambda c: c.ratio)
    return res


CONFIRM_P = 0.001  # the confirmation's one-sided p-value bound


def confirm(first: CheckResult, rerun: Iterable[Any], *, floor: float = FLOOR, p_max: float = CONFIRM_P,
            measurable: Iterable[str] | None = None) -> tuple[list[Change], list[Change], list[Change]]:
    """Which alerts of ``first`` the confirmation rerun reproduces: (kept, refuted, unconfirmable).

    The rerun's median time(s) of the series, pooled with the runs already after the change (each one a
    fresh process: a change seen on two nights has repeated already), must be slower than the level before
    (one-sided p <= ``p_max`` with the series' noise) and beyond the floor, else the alert is refuted: a
    one-night outlier does not repeat. An alert whose series the rerun did not measure healthily (crashed,
    throttled, another machine: ``measurable`` lists the fingerprints this machine could rerun) is
    *unconfirmable*: it is still raised, marked unconfirmed, never dropped because the check could not
    measure. Kept alerts are marked confirmed."""
    from scipy import stats

    got: dict[str, list[float]] = defaultdict(list)
    for r in rerun:
        if _unhealthy(r):
            continue
        got[fingerprint(series_key(r))].append(math.log(_p50(r)))
    can = set(measurable) if measurable is not None else None
    kept, refuted, unconfirmable = [], [], []
    for c in first.alerts:
        xs = got.get(c.fingerprint)
        if not xs or (can is not None and c.fingerprint not in can):
            c.confirmed = False
            unconfirmable.append(c)
            continue
        pooled = xs + (c.after_levels if c.n_after >= 2 else [])
        d = float(np.mean(pooled)) - c.before_level
        se = c.sigma * math.sqrt(1.0 / c.n_before + 1.0 / len(pooled))
        p = float(stats.t.sf(d / se, max(c.dof, 1.0)))
        if p <= p_max and math.exp(d) >= 1 + floor:
            c.confirmed = True
            kept.append(c)
        else:
            refuted.append(c)
    return kept, refuted, unconfirmable


def reproduce_command(c: Change) -> str:
    s = c.series
    before, after = (shlex.quote((c.before.commit or "?")[:12]), shlex.quote((c.after.commit or "?")[:12]))
    run = (f"robocache-bench run --suite {shlex.quote(c.after.suite)} --cases {shlex.quote(c.key)} "
           f"--machine {shlex.quote(str(s['machine']))}")
    return (f"git checkout {before} && {run} && git checkout {after} && {run} && "
            f"robocache-bench compare results/<run at {before}> results/<run at {after}>")


def alert_title(c: Change) -> str:
    s = c.series
    where = f"{s['arch']} ({s['machine']})" if s.get("arch") else str(s["machine"])
    span = (f"since {(c.after.commit or '?')[:12]}" if c.before.commit != c.after.commit
            else f"at {(c.after.commit or '?')[:12]} (same commit before: an environment change?)")
    return f"{s['case_id']} {s['dtype']} {s['provider']} {(c.ratio - 1) * 100:+.1f}% slower on {where} {span}"


def alert_markdown(c: Change) -> str:
    s = c.series
    lo, hi = c.ratio_ci
    return "\n".join([
        f"### {md_text(alert_title(c))}", "",
        f"- series: machine `{_code(s['machine'])}` ({md_text(str(s['arch'] or 'arch unknown'))}), op `{_code(s['op'])}`, case "
        f"`{_code(s['case_id'])}`, provider `{_code(s['provider'])}`, dtype `{_code(s['dtype'])}`, "
        f"timer {md_text(str(s['timer']))}, cache {md_text(str(s['cache']))}, front end {md_text(str(s['frontend']))}",
        f"- change: median time x{c.ratio:.3f} (95% interval x{lo:.3f} to x{hi:.3f}); "
        f"{c.n_before} runs before, {c.n_after} after; series noise {c.sigma * 100:.2f}% per run; "
        f"q = {c.q_value:.2g} (Benjamini-Hochberg over all series)",
        f"- last commit before: `{_code(c.before.commit or '?')}` (run {md_text(c.before.run_id)}, {md_text(c.before.created)})",
        f"- first commit after: `{_code(c.after.commit or '?')}` (run {md_text(c.after.run_id)}, {md_text(c.after.created)})",
        "- confirmation: " + {True: "a rerun of the case reproduced it", False: "**unconfirmed**: the case "
                               "could not be measured again here", None: "not asked (`check --confirm`)"}[c.confirmed],
        f"- reproduce: `{_code(reproduce_command(c))}`",
        f"- dashboard: History page, series {md_text(s['case_id'])} / {md_text(s['provider'])} / {md_text(s['dtype'])} "
        f"on {md_text(str(s['machine']))}",
    ]) + "\n"


def alerts_json(res: CheckResult) -> dict[str, Any]:
    def one(c: Change) -> dict[str, Any]:
        return {"fingerprint": c.fingerprint, "series": c.series, "title": alert_title(c)
                if c.direction == "slower" else alert_title(c).replace("slower", "faster"),
                "direction": c.direction, "ratio": c.ratio, "ratio_ci": list(c.ratio_ci), "q_value": c.q_value,
                "p_value": c.p_value, "noise": c.sigma, "n_before": c.n_before, "n_after": c.n_after,
                "before": {"commit": c.before.commit, "run_id": c.before.run_id, "created": c.before.created},
                "after": {"commit": c.after.commit, "run_id": c.after.run_id, "created": c.after.created},
                "case_key": c.key, "reproduce": reproduce_command(c), "markdown": alert_markdown(c),
                "confirmed": c.confirmed}

    return {"schema": "robocache-alerts/1", "generated": datetime.now(timezone.utc).isoformat(timespec="seconds"),
            "alerts": [one(c) for c in res.alerts], "improvements": [one(c) for c in res.improvements],
            "summary": {"series": res.series, "series_checked": res.series_checked,
                        "candidates": res.candidates, "significant_changes": len(res.changes),
                        "alerts": len(res.alerts), "improvements": len(res.improvements),
                        "excluded_points": res.excluded_points, "excluded_reasons": res.excluded_reasons,
                        "floor": FLOOR, "fdr_q": FDR_Q}}


def check_markdown(res: CheckResult) -> str:
    lines = ["## robocache-bench check", "",
             f"{res.series} series, {res.series_checked} with at least {MIN_HISTORY} healthy runs; "
             f"{res.excluded_points} points excluded ({', '.join(f'{k} {v}' for k, v in sorted(res.excluded_reasons.items())) or 'none'}); "
             f"{res.candidates} candidate change points, {len(res.changes)} significant "
             f"(Benjamini-Hochberg q <= {FDR_Q}, beyond {FLOOR:.0%}).", ""]
    if res.alerts:
        lines += [f"**{len(res.alerts)} performance regression(s)**", ""] + [alert_markdown(c) for c in res.alerts]
    else:
        lines.append("No performance regression.")
    if res.improvements:
        lines += ["", f"{len(res.improvements)} improvement(s):", ""]
        lines += [f"- {md_text(alert_title(c).replace('slower', 'faster'))} (x{c.ratio:.3f})" for c in res.improvements]
    return "\n".join(lines) + "\n"


def _us(x: float | None) -> str:
    return "" if x is None else (f"{x:.2f} us" if x < 1000 else f"{x / 1000:.2f} ms")


def md_text(text: Any) -> str:
    """Markdown-safe text: record strings never become markup (or HTML) in a report or an issue."""
    s = str(text)
    for ch in "\\`*_{}[]()<>#+!|":
        s = s.replace(ch, "\\" + ch)
    # a record string must not mention anyone in a GitHub issue: a word joiner after @ breaks the mention
    return s.replace("\n", " ").replace("@", "@\u2060")


def _code(text: Any) -> str:
    """Text for inside a code span: backticks and newlines removed."""
    return str(text).replace("`", "'").replace("\n", " ").replace("@", "@\u2060")
