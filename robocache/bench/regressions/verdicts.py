"""``compare(base, new)``: a verdict per case between two runs (see the package doc), and its markdown."""
from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..columns import config_text
from ..schema import FAILED_STATUSES, Series, fingerprint, series_key
from .alerts import md_text, us_text
from .noise import CALL_RATIO, prior_noise, prior_ratio_noise, series_sigma, shrink
from .records import (CALL_COST_TIMERS, FLOOR, call_ratio, call_ratio_of_json, case_key, case_label, check_floor, p50,
                      safe_exp, unhealthy, within_sigma)

Z = 4.0  # verdicts need a change beyond Z sigma: ~1 false verdict in 16,000 cases under Gaussian noise
# "inconclusive": the medians moved beyond the floor but not beyond what the case's noise can resolve (the data
# cannot say whether it changed); "same" is kept for a move within the floor (docs/regressions.md)
VERDICTS = ("slower", "faster", "inconclusive", "same", "incomparable", "failed")


# compare() names these in its verdict ("incomparable: machine ...", "front end ...", "method version ...", "input
# sets ...") instead of matching on them, so a run measured differently reads as incomparable, not as missing.
_SAID_APART = {"machine": None, "frontend": None, "input_sets": None, "method_version": None}


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


def history_noise(records: Iterable[Any], exclude_runs: Iterable[str] = ()) -> dict[str, tuple[float, float]]:
    """Between-run noise per series (one sigma of log-time per run) from its healthy runs, in run order, with
    its degrees of freedom (about 2/3 of the consecutive differences, which overlap): ``{fingerprint: (sigma,
    dof)}``, keyed by the series' fingerprint (:func:`robocache.bench.schema.fingerprint`, as the frame's
    ``series`` column). Any history of two runs or more counts; how much it counts is for :func:`shrink` to say.
    A call-cost series' interleaved ratios (:func:`records.call_ratio`) give its ratio's noise too, under
    :func:`ratio_key` of its fingerprint. :meth:`robocache.bench.frame.History.noise` is the same over the frame's
    columns."""
    skip = set(exclude_runs)
    pts: dict[str, list[tuple[Any, float]]] = defaultdict(list)
    fps: dict[Series, str] = {}
    for r in records:
        if r.run_id in skip or unhealthy(r):
            continue
        k = series_key(r)
        fp = fps.get(k) or fps.setdefault(k, fingerprint(k))
        pts[fp].append((r.created, math.log(p50(r))))
        cr = call_ratio(r)
        if cr is not None:
            pts[ratio_key(fp)].append((r.created, math.log(cr[0])))
    return noise_of_points(pts)


def ratio_key(fp: str) -> str:
    """The history noise's key of a call-cost series' interleaved ratio (its time's key is ``fp`` itself)."""
    return fp + "|ratio"


def ratio_points(fps: Iterable[str], created: Iterable[Any], timers: Iterable[Any],
                 interleaved: Iterable[Any]) -> dict[str, list[tuple[Any, float]]]:
    """The ratio points of healthy frame rows (their fingerprint, time, timer, ``interleaved`` JSON text), keyed
    by :func:`ratio_key`: :func:`history_noise`'s ratio points, for :meth:`robocache.bench.frame.History.noise`
    (the same rule as :func:`records.call_ratio`, read from the frame's JSON of the section)."""
    pts: dict[str, list[tuple[Any, float]]] = defaultdict(list)
    for fp, t, timer, text in zip(fps, created, timers, interleaved):
        got = call_ratio_of_json(timer, text)
        if got is not None:
            pts[ratio_key(str(fp))].append((t, math.log(got[0])))
    return pts


def noise_of_points(pts: dict[str, list[tuple[Any, float]]]) -> dict[str, tuple[float, float]]:
    """:func:`history_noise` of each series' healthy ``(created, log p50)`` points, in any order."""
    out = {}
    for k, xs in pts.items():
        if len(xs) >= 2:
            x = np.array([v for _, v in sorted(xs)])
            out[k] = (series_sigma(x, np.zeros(0)), (2.0 / 3.0) * (len(x) - 1))
    return out


@dataclass
class Verdict:
    case: str  # "op/tag dtype provider"
    key: str  # harness case key
    verdict: str
    ratio: float | None = None  # new / base median time (above 1: slower)
    threshold: float | None = None  # the relative change needed for a verdict (the smallest detectable)
    noise: float | None = None  # one sigma of log(ratio)
    noise_source: str = ""  # "history" | "prior"
    base_us: float | None = None  # the records' median (host) time, whichever quantity was compared
    new_us: float | None = None
    reason: str = ""
    # what ``ratio`` compares: "time" (the median times), or "call_ratio" (a call-cost case whose records both
    # carry dispatch.interleaved: the public call / bare launch ratio, p50, measured ABAB in one process)
    measure: str = "time"
    base_call_ratio: float | None = None  # the two runs' interleaved ratios, where measure is "call_ratio"
    new_call_ratio: float | None = None

    def to_dict(self) -> dict[str, Any]:
        return {k: getattr(self, k) for k in self.__dataclass_fields__}


def compare(base: Sequence[Any], new: Sequence[Any], *, history: Iterable[Any] = (),
            noise: Callable[[set[str]], dict[str, tuple[float, float]]] | None = None, floor: float = FLOOR,
            z: float = Z) -> list[Verdict]:
    """Verdicts for every case in either run (see the package doc). The between-run noise is
    :func:`history_noise` of ``history``, or ``noise(runs)`` where given (the history's noise without the two
    runs compared: :meth:`robocache.bench.frame.History.noise`)."""
    check_floor(floor)
    b_idx = {_match_key(r): r for r in base}
    n_idx = {_match_key(r): r for r in new}
    _match_untimed(b_idx, n_idx)
    runs = {r.run_id for r in (*base, *new)}
    hist = noise(runs) if noise is not None else history_noise(history, exclude_runs=runs)
    out: list[Verdict] = []
    for k in sorted(set(b_idx) | set(n_idx), key=lambda k: tuple(str(x) for x in k)):
        b, n = b_idx.get(k), n_idx.get(k)
        ref = n if n is not None else b
        v = Verdict(case=case_label(ref), key=case_key(ref), verdict="incomparable")
        if b is None or n is None:
            v.reason = "only in the new run" if b is None else "missing from the new run"
        elif (why := _not_comparable(b, n)) is not None:
            v.verdict, v.reason = why
        else:
            _judge(v, b, n, hist, floor=floor, z=z)
        out.append(v)
    return out


def _not_comparable(b: Any, n: Any) -> tuple[str, str] | None:
    """Why a case's two records cannot be compared, as (verdict, reason): another machine, a failed run, another
    front end, method version or input rotation, an unhealthy run; None when they can."""
    mb, mn = (r.env.machine if r.env is not None else None for r in (b, n))
    if mb != mn:
        return "incomparable", f"machine {mb} vs {mn}"
    if n.status in FAILED_STATUSES or b.status in FAILED_STATUSES:
        return "failed", (f"new: {n.status}" if n.status in FAILED_STATUSES else f"base: {b.status}")
    if b.frontend != n.frontend:
        return "incomparable", f"front end {b.frontend} vs {n.frontend} (measured differently)"
    vb, vn = (r.method.version if r.method is not None else 1 for r in (b, n))
    if vb != vn:
        return "incomparable", f"method version {vb} vs {vn} (measured differently: a method change, not the code's)"
    ib, inn = (r.method.input_sets if r.method is not None else 1 for r in (b, n))
    if ib != inn:
        return "incomparable", f"input sets {ib} vs {inn} (a method change: L2-resident or rotated inputs)"
    why = unhealthy(b) or unhealthy(n)
    if why:
        return "incomparable", ("base " if unhealthy(b) else "new ") + why
    return None


def _judge(v: Verdict, b: Any, n: Any, hist: dict[str, tuple[float, float]], *, floor: float, z: float) -> None:
    """``v``'s ratio, noise and verdict for two comparable healthy records: slower or faster beyond both the floor
    and ``z`` sigma of the noise, inconclusive beyond the floor only, else same."""
    tb, tn = p50(b), p50(n)
    sk = series_key(n)
    # the series' own between-run noise, pooled with the provider's prior (widened, and weighing less the
    # more history the series has): a few runs of history can look quieter than the machine is (H200 A/A:
    # a series whose history said 0.4% moved 3.5% between two runs of one commit)
    prior = prior_noise(min(tb, tn), n.case.provider, tails=True, timer=sk.timer)
    key, wb, wn, note = fingerprint(sk), within_sigma(b), within_sigma(n), ""
    vb, vn = tb, tn  # the quantity compared: the median times, or a call-cost case's interleaved ratios
    rb, rn = call_ratio(b), call_ratio(n)
    if rb is not None and rn is not None:
        # a call cost is judged by its ratio to the bare launch timed ABAB in one process, where the host's
        # state (clocks, core, process) cancels: the absolute host time of one commit moved 20-70% between runs
        # (H200 A/A, resample: 12.85 / 21.16 / 18.75 us) while the ratio moved 1.68 / 1.72 / 1.74
        (vb, wb), (vn, wn) = rb, rn
        v.measure, v.base_call_ratio, v.new_call_ratio = CALL_RATIO, vb, vn
        key = ratio_key(key)
        fitted = prior_ratio_noise(n.case.provider, tails=True)
        prior = fitted[0] if fitted is not None else prior
        note = (f"interleaved call ratio (public / bare launch, p50) {vb:.3f} -> {vn:.3f}; host time "
                f"{(tn / tb - 1) * 100:+.1f}%" + ("" if fitted else " (no ratio prior fitted: the host time's)"))
    elif sk.timer in CALL_COST_TIMERS:
        lacks = "both records lack" if rb is None and rn is None else "the base record lacks" if rb is None else \
            "the new record lacks"
        note = (f"host time per call: {lacks} an interleaved call ratio (dispatch.interleaved, measured on the "
                "public call's rows only)")
    s_h, dof = hist.get(key, (0.0, 0.0))
    between = shrink(s_h, dof, prior)
    v.noise_source = f"history ({dof:.1f} dof) + prior" if dof > 0 else "prior"
    sigma = math.sqrt(wb ** 2 + wn ** 2 + 2 * between ** 2)
    thr = max(floor, safe_exp(z * sigma) - 1.0)
    ratio = vn / vb if math.isfinite(vn / vb) and vn / vb > 0 else safe_exp(math.log(vn) - math.log(vb))
    v.ratio, v.threshold, v.noise, v.base_us, v.new_us = ratio, thr, sigma, tb, tn
    _verdict(v, ratio, thr, floor)
    changed = launch_change(b, n)
    if changed:  # a different tuned launch explains a move better than noise or a code change does
        note = f"{note}; {changed}" if note else changed
    if note:
        v.reason = f"{note}; {v.reason}" if v.reason else note


def launch_change(b: Any, n: Any) -> str:
    """What changed in the launch configurations robocache's tuner chose (``Record.launches``) between two records
    of one case, per bucket (their source, tuned or cached, aside); "" where both used the same or either lacks
    them. A robocache move with another launch is the tuner's choice, not the kernel's code or noise."""
    lb = {(x.device, x.bucket): x.config for x in (getattr(b, "launches", None) or [])}
    ln = {(x.device, x.bucket): x.config for x in (getattr(n, "launches", None) or [])}
    if not lb or not ln or lb == ln:
        return ""
    parts = []
    for k in sorted(set(lb) | set(ln), key=str):
        cb, cn = lb.get(k), ln.get(k)
        if cb != cn:
            parts.append(f"{k[1]}: {'none' if cb is None else config_text(cb)} -> "
                         f"{'none' if cn is None else config_text(cn)}")
    return "launch changed (" + "; ".join(parts) + ")"


def _verdict(v: Verdict, ratio: float, thr: float, floor: float) -> None:
    """``v``'s verdict and reason for a ratio ``ratio`` (new / base) against the threshold ``thr``."""
    if ratio > 1 + thr:
        v.verdict = "slower"
    elif ratio < 1 / (1 + thr):
        v.verdict = "faster"
    elif ratio > 1 + floor or ratio < 1 / (1 + floor):
        # beyond the floor, within the noise: the data cannot tell a change from none ("same" would claim
        # what a case needing +-205% cannot see; issue 24: torch.compile moved 1.42x and read "same")
        v.verdict = "inconclusive"
        v.reason = (f"moved {(ratio - 1) * 100:+.1f}%, within the noise: this case resolves only {_pm(thr)} "
                    "(more history narrows it)")
    else:
        v.verdict = "same"
        if thr > floor:  # within the floor, but say how coarse this case is
            v.reason = f"within the {floor:.0%} floor; this case resolves only {_pm(thr)}"


def _pm(thr: float) -> str:
    return f"±{thr * 100:.1f}%"


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
            *((f"{v.base_call_ratio:.3f}x bare", f"{v.new_call_ratio:.3f}x bare") if v.measure == CALL_RATIO
              else (us_text(v.base_us), us_text(v.new_us))), f"{v.ratio:.3f}" if v.ratio else "",
            f"±{v.threshold * 100:.1f}%" if v.threshold is not None else "",
            f"{v.noise * 100:.2f}% ({v.noise_source})" if v.noise is not None else "", md_text(v.reason)]) + " |")
    lines += ["", f"slower or faster: a change beyond the floor ({FLOOR:.0%}) and {Z:g} sigma of the case's noise "
              "(\"needs\": the smallest change this case can call; noise: one sigma of log(new/base)); inconclusive: "
              "beyond the floor but within the noise (the data cannot tell); same: within the floor. A call-cost "
              "case whose two records carry an interleaved call ratio is compared on it (base, new: the public "
              "call's time over the bare launch's, timed ABAB in one process, where the host's state cancels)."]
    return "\n".join(lines) + "\n"

