"""Regression verdicts between two runs, and change points over the whole history.

Two questions, one noise model:

``compare(base, new)``
    Per case: ``same``, ``faster``, ``slower``, ``incomparable`` or ``failed``. A change is a verdict only
    when it exceeds both a floor (default 3%) and ``Z`` times that case's measured noise. The noise of a
    ratio of two medians is the within-run uncertainty of each (the harness's 95% interval of the median,
    ``method.noise``) plus, twice, the *between-run* noise: on the H200 two runs of one commit differed by
    up to 18x their within-run intervals (a fresh process, other input addresses, clocks), so within-run
    intervals alone would cry wolf. The between-run noise is the series' own history when given
    (``history=``: every healthy run of the same series, :func:`schema.series_key`, except the two compared)
    pooled with the provider's prior (:func:`prior_noise`, fitted per provider and time bucket from the
    committed records, ``noise_priors.json``), widened and weighing less as the history grows
    (:func:`shrink`).

``check(records)``
    Over the history (every series, :func:`schema.series_key`: machine, case, provider, dtype, timer, cache,
    grid version, front end, input rotation, method version), in run order, with unhealthy points dropped
    (failed or incorrect status, throttled, contended): change points from ``ruptures`` (PELT, exact optimal
    segmentation under a penalty; the penalty is scaled by the series' own noise, so a quiet series segments
    at small steps and a noisy one only at large ones), plus the newest one and two runs as candidate
    segments (a regression must be found the night it lands, before PELT's minimum segment could see it);
    PELT's last change point stays a candidate whatever its age. Each candidate gets a p-value (difference
    of segment means of log-times over the series' robust noise, Student t), all candidates of all series
    together go through Benjamini-Hochberg (``scipy.stats.false_discovery_control``): false discoveries are
    controlled across the grid, not per series. An alert is a significant change that still holds at the
    newest run, beyond the floor, in the slower direction; it names the series, the ratio with its 95%
    interval, the last commit before and the first after, and the command that reproduces it. A change
    across a change of runner (:func:`env_fingerprint`) or of measuring method is a *break*, never an
    alert; a trend over the newest nights is a *drift* (Theil-Sen, Mann-Kendall), never blamed on one commit.

    With a confirmation rerun to follow (``check(screen=SCREEN_P)``, ``check --confirm``), a per-series
    screen replaces Benjamini-Hochberg as the gate to the rerun: the rerun is the check on those cases.

``confirm(first, rerun)``
    The alerted cases measured again (CONFIRM_RUNS fresh runs; CONFIRM_MORE more when those are consistent
    with the change but not conclusive, :func:`rerun_more`), tested *alone* against the level before the
    change (:func:`rerun_test`: the series' noise, the provider's measured tails, the nights before): the
    nights that raised the alert are not counted twice.

Why ruptures + SciPy rather than Apache Otava (E-Divisive + t-test, the method this mirrors) or MongoDB's
signal-processing-algorithms: apache-otava 0.8.0 pins numpy 2.2 (we pin 2.4) and pulls database, BigQuery
and Slack clients; signal-processing-algorithms ships only a source distribution that compiles C.
ruptures is maintained, numpy/scipy-only, with wheels for our Pythons.
"""
from __future__ import annotations

import hashlib
import math
import shlex
import sys
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import numpy as np

from .schema import FAILED_STATUSES, Series, fingerprint, series_key

FLOOR = 0.03  # a change smaller than 3% is never a verdict or an alert, whatever the noise
Z = 4.0  # verdicts need a change beyond Z sigma: ~1 false verdict in 16,000 cases under Gaussian noise
FDR_Q = 0.01  # Benjamini-Hochberg level over all candidate change points of all series
RECENT = 5  # an improvement older than the newest RECENT runs is history, not news
MAX_HISTORY = 150  # the newest healthy points per series that a check looks at
MIN_HISTORY = 6  # healthy points a series needs before it can alert (fewer: its noise is a guess)
PELT_BETA = 8.0  # PELT penalty: beta * sigma^2 * log(n) on log-times (twice BIC's: few spurious splits)
NOISE_MIN = 0.002  # no series is assumed quieter than 0.2% between runs
# Between-run noise assumed at least (per run, relative): sigma(t) = sqrt(REL^2 + (ABS_US / t)^2). Fitted to
# the 44 quick cases measured by 6 runs of commit c700059 on an H200 (2 CLI, 1 pytest-benchmark, 3 asv).
# Only the fallback for a provider without fitted runs (noise_priors.json, fit_priors); ABS_US also floors
# every prior (launch-bound cases of a few microseconds move by a fraction of a microsecond between processes).
PRIOR_REL = 0.015
PRIOR_ABS_US = 0.1
PRIOR_WIDEN = 1.5  # the prior is widened by this much for a series without history of its own (conservative)
PRIOR_DOF = 4.0  # the prior counts as this many degrees of freedom next to a series' own history
DRIFT_WINDOWS = (6, 9, 12, 16, 20)  # nights a drift (a trend, not a step) is tested over, ending tonight
DRIFT_MIN = 12  # healthy points a series needs before it is tested for drift
DRIFT_Q = 0.001  # Benjamini-Hochberg level over the drift tests of all series
SCREEN_P = 0.01  # check --confirm: a series' one-sided p (Bonferroni over its candidates) that sends it to the rerun
SCREEN_MIN_BEFORE = 5  # check --confirm: a slower change departs from a level of at least this many runs (PELT's
# shortest segments on heavy-tailed series are two or three outlying nights, whose median is no reference)
PLACE_SURE = 0.7  # an alert whose location's likelihood share (_place_p) is below this says a neighbour may be it
PLACE_RADIUS = 2  # a change's location is refined by maximum likelihood within this many runs of the tested split
LEVEL_Q = 0.9  # the level spread is winsorized at this quantile: a second state must recur in about 10% of nights
VERDICTS = ("slower", "faster", "same", "incomparable", "failed")
PRIORS_FILE = Path(__file__).with_name("noise_priors.json")
BUCKETS = ((20.0, "lt20us"), (200.0, "lt200us"), (math.inf, "ge200us"))  # prior time buckets (median time)
ENV_FIELDS = ("gpu_name", "driver", "cuda", "cpu", "kernel", "host_id")  # the runner's fingerprint


def _exp(d: float) -> float:
    """exp() that never overflows: a ratio of two schema-valid times (1e-300 and 1e300 us) stays finite."""
    return math.exp(max(min(float(d), 700.0), -700.0))


def _bucket(time_us: float) -> str:
    return next(name for hi, name in BUCKETS if time_us < hi)


def fit_priors(records: Iterable[Any]) -> dict[str, Any]:
    """Between-run noise per provider and time bucket from runs of one commit (differences are noise).

    Groups healthy records by series (:func:`schema.series_key`: front end, input rotation and method version
    included) and git commit; every group of two or more runs gives its runs' deviations from the group's mean
    log-time (scaled by sqrt(n / (n - 1)): one run's deviation). Per provider and bucket of median time: a
    Gaussian-equivalent sigma from the 90th percentile of the absolute deviations (|e|_90 / 1.645: one case that
    moved 17% between a quick and a nightly run would otherwise set the whole bucket's sigma; the tails are what
    the confirmation rerun is for) and the deviations themselves, the pool that the quality tests draw nights
    from. ``"*"`` pools a provider's buckets, ``"all"`` every provider."""
    groups: dict[tuple[Series, str], list[float]] = defaultdict(list)
    for r in records:
        if _unhealthy(r) or not r.get("git_commit") or r.get("synthetic"):
            continue
        groups[(series_key(r), r["git_commit"])].append(math.log(_p50(r)))
    dev: dict[str, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    for (sk, _commit), xs in groups.items():
        if len(xs) < 2:
            continue
        x = np.array(xs)
        scale = math.sqrt(len(x) / (len(x) - 1))
        b = _bucket(math.exp(float(x.mean())))
        for e in (x - x.mean()) * scale:
            for prov in (sk.provider, "all"):
                dev[prov][b].append(float(e))
                dev[prov]["*"].append(float(e))
    out: dict[str, Any] = {}
    for prov, per in sorted(dev.items()):
        out[prov] = {b: {"sigma": round(float(np.quantile(np.abs(v), 0.9)) / 1.645, 5), "n": len(v),
                         "rms": round(float(np.sqrt(np.mean(np.square(v)))), 5),
                         "deviations": [round(e, 5) for e in sorted(v)]} for b, v in sorted(per.items())}
    return out


_PRIORS: dict[str, Any] | None = None
PRIOR_MIN_N = 10  # deviations a provider's bucket needs before its own sigma is used (else the provider's pool)


def priors() -> dict[str, Any]:
    """The committed priors (``noise_priors.json``, written by ``python -m robocache.bench.regress fit-priors``)."""
    global _PRIORS
    if _PRIORS is None:
        import json

        try:
            doc = json.loads(PRIORS_FILE.read_text())
            if doc.get("schema") != "robocache-noise-priors/1" or not isinstance(doc.get("providers"), dict):
                raise ValueError(f"not a robocache-noise-priors/1 document (schema {doc.get('schema')!r})")
            _PRIORS = doc["providers"]
        except (OSError, ValueError, AttributeError) as e:
            # the thresholds fall back to the H200 model: say so, never silently
            print(f"warning: noise priors {PRIORS_FILE} unusable ({e}); using the built-in H200 noise model "
                  "(refit: python -m robocache.bench.regress fit-priors results/)", file=sys.stderr)
            _PRIORS = {}
    return _PRIORS


def prior_noise(time_us: float, provider: str | None = None, *, tails: bool = False) -> float:
    """Relative between-run noise (one sigma, one run) assumed for a case of median ``time_us`` and ``provider``.

    The provider's fitted sigma for the case's time bucket (its pooled sigma when the bucket has fewer than
    PRIOR_MIN_N deviations; the base provider for ``name@version``), else the H200 model; never below the
    H200 model's absolute part (``PRIOR_ABS_US / t``) or NOISE_MIN. ``tails``: the root mean square of the
    deviations instead (outliers included), for ``compare``, which has no confirmation rerun to weed them out."""
    t = min(max(float(time_us), 1e-3), 1e300)
    model = math.hypot(PRIOR_REL, PRIOR_ABS_US / t)
    table = priors()
    fitted = None
    for name in ([provider, provider.split("@")[0]] if provider else []):
        per = table.get(name)
        if not per:
            continue
        b = per.get(_bucket(t))
        pick = b if b and b["n"] >= PRIOR_MIN_N else per.get("*")
        if pick and pick["n"] >= PRIOR_MIN_N:
            fitted = max(float(pick["sigma"]), float(pick["rms"])) if tails else float(pick["sigma"])
            break
    if fitted is None:
        return max(model, NOISE_MIN)
    return max(fitted, PRIOR_ABS_US / t, NOISE_MIN)


def prior_pool(time_us: float, provider: str | None) -> np.ndarray | None:
    """The provider's measured run-to-run deviations (log-time, sorted) for a case of median ``time_us``: the
    pool :func:`prior_noise` takes its sigma from (None when the provider has no fitted runs)."""
    t = min(max(float(time_us), 1e-3), 1e300)
    for name in ([provider, provider.split("@")[0]] if provider else []):
        per = priors().get(name)
        if not per:
            continue
        b = per.get(_bucket(t))
        pick = b if b and b["n"] >= PRIOR_MIN_N else per.get("*")
        if pick and pick["n"] >= PRIOR_MIN_N and pick.get("deviations"):
            return np.sort(np.asarray(pick["deviations"], dtype=float))
    return None


def shrink(sigma: float, dof: float, prior: float) -> float:
    """A series' noise with the prior: with no history the prior widened by PRIOR_WIDEN; with history the
    pooled variance (dof * sigma^2 + PRIOR_DOF * (widened prior)^2) / (dof + PRIOR_DOF), so the prior's
    weight shrinks as the series' own history grows."""
    p = PRIOR_WIDEN * prior
    if dof <= 0 or not math.isfinite(sigma):
        return p
    return math.sqrt((dof * sigma ** 2 + PRIOR_DOF * p ** 2) / (dof + PRIOR_DOF))


def _within(rec: Any) -> float:
    """One sigma of the median's relative uncertainty within its run (``method.noise`` is a 95% half-width)."""
    m = rec.get("method") or {}
    n = m.get("noise")
    return min(float(n) / 1.96, 1e6) if n is not None else 0.0


def _p50(rec: Any) -> float | None:
    m = rec.get("metrics")
    if not m:
        return None
    v = m["time_us"]["p50"]
    return float(v) if v and v > 0 and math.isfinite(v) else None


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


# compare() names these in its verdict ("incomparable: machine ...", "front end ...", "method version ...", "input
# sets ...") instead of matching on them, so a run measured differently reads as incomparable, not as missing.
_SAID_APART = {"machine": None, "frontend": None, "input_sets": None, "method_version": None}


def _match_key(rec: Any) -> Series:
    return series_key(rec)._replace(**_SAID_APART)


def _siblings_key(k: Series) -> Series:
    """The case measured any way (any method version, any input rotation): a new series among its siblings
    started with a method change, a *break* in :func:`check`, not a regression."""
    return k._replace(method_version=None, input_sets=None)


def _match_untimed(b_idx: dict[Series, Any], n_idx: dict[Series, Any]) -> None:
    """A record never timed (a crash or a failed check before timing: no method, timer "-") stands for its case
    whatever timer and cache the other run measured it with, so it reads "failed", not "missing" (in place)."""
    for idx, other in ((n_idx, b_idx), (b_idx, n_idx)):
        for k in [k for k in idx if k.timer == "-" and k not in other]:
            match = [o for o in other if o._replace(timer="-", cache="-") == k and o not in idx]
            if len(match) == 1:
                idx[match[0]] = idx.pop(k)


def env_fingerprint(rec: Any) -> dict[str, str]:
    """The runner's facts that move a series when they change (GPU, driver, CUDA, CPU model, kernel, host id);
    fields a record does not have are left out (older records lack the kernel and host id)."""
    env = rec.get("env") or {}
    return {k: str(env[k]) for k in ENV_FIELDS if env.get(k) not in (None, "")}


def env_changes(a: dict[str, str], b: dict[str, str]) -> list[str]:
    """Fields known on both sides that differ, as ``field: old -> new``."""
    return [f"{k}: {a[k]} -> {b[k]}" for k in ENV_FIELDS if k in a and k in b and a[k] != b[k]]


def history_noise(records: Iterable[Any], exclude_runs: Iterable[str] = ()) -> dict[Series, tuple[float, float]]:
    """Between-run noise per series (one sigma of log-time per run) from its healthy runs, in run order, with
    its degrees of freedom (about 2/3 of the consecutive differences, which overlap): ``{key: (sigma, dof)}``.
    Any history of two runs or more counts; how much it counts is for :func:`shrink` to say."""
    skip = set(exclude_runs)
    pts: dict[Series, list[tuple[str, float]]] = defaultdict(list)
    for r in records:
        if r["run_id"] in skip or _unhealthy(r):
            continue
        pts[series_key(r)].append((r["created"], math.log(_p50(r))))
    out = {}
    for k, xs in pts.items():
        if len(xs) >= 2:
            x = np.array([v for _, v in sorted(xs)])
            out[k] = (_series_sigma(x, np.zeros(0)), (2.0 / 3.0) * (len(x) - 1))
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


def _check_floor(floor: float) -> None:
    if not (isinstance(floor, (int, float)) and math.isfinite(floor) and 0 <= floor < 10):
        raise ValueError(f"floor must be a finite number from 0 to 10 (a relative change), got {floor!r}")


def compare(base: Sequence[Any], new: Sequence[Any], *, history: Iterable[Any] = (), floor: float = FLOOR,
            z: float = Z) -> list[Verdict]:
    """Verdicts for every case in either run (see the module doc)."""
    _check_floor(floor)
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
        vb, vn = (b.get("method") or {}).get("version", 1), (n.get("method") or {}).get("version", 1)
        if vb != vn:
            v.reason = f"method version {vb} vs {vn} (measured differently: a method change, not the code's)"
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
        # the series' own between-run noise, pooled with the provider's prior (widened, and weighing less the
        # more history the series has): a few runs of history can look quieter than the machine is (H200 A/A:
        # a series whose history said 0.4% moved 3.5% between two runs of one commit)
        prior = prior_noise(min(tb, tn), n["case"]["provider"], tails=True)
        s_h, dof = hist.get(sk, (0.0, 0.0))
        between = shrink(s_h, dof, prior)
        v.noise_source = f"history ({dof:.1f} dof) + prior" if dof > 0 else "prior"
        sigma = math.sqrt(_within(b) ** 2 + _within(n) ** 2 + 2 * between ** 2)
        thr = max(floor, _exp(z * sigma) - 1.0)
        ratio = tn / tb if math.isfinite(tn / tb) and tn / tb > 0 else _exp(math.log(tn) - math.log(tb))
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
    env: dict[str, str] = field(default_factory=dict)  # env_fingerprint of the run


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
    series: int = 0
    series_checked: int = 0  # current, with enough healthy history
    series_stale: int = 0  # no healthy point in their machine's newest run: not tested tonight
    excluded_points: int = 0
    candidates: int = 0
    excluded_reasons: dict[str, int] = field(default_factory=dict)
    floor: float = FLOOR  # the check's own settings (check(floor=, q=)), reported as they were
    fdr_q: float = FDR_Q


def _series_dict(rec: Any) -> dict[str, Any]:
    """The record's series (:func:`schema.series_key`, method version included) as a dict, with the machine's
    architecture for the alert; its :func:`schema.fingerprint` is the alert's series id (method version 1, every
    record before the version existed, hashes as before)."""
    return {**series_key(rec)._asdict(), "arch": (rec.get("env") or {}).get("arch")}


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


def _test(before: np.ndarray, after: np.ndarray, sigma: float, dof: float) -> tuple[float, float, float, float]:
    """Difference of means (log-ratio), its standard error, two-sided p and the 97.5% t quantile."""
    from scipy import special  # Student t's ufuncs: stats.t's machinery costs ~0.5 ms a call, per candidate

    d = float(after.mean() - before.mean())
    se = sigma * math.sqrt(1.0 / len(before) + 1.0 / len(after))
    dof = max(float(dof), 1.0)
    p = float(2 * special.stdtr(dof, -abs(d) / se))
    return d, se, p, float(special.stdtrit(dof, 0.975))


def _level_spread(x: np.ndarray) -> float:
    """The spread of the levels themselves: RMS of the distance to a running median of 9 runs (which follows a
    step within a few runs), winsorized at its LEVEL_Q (90th) percentile (isolated outlying nights do not
    count, a second state that recurs in a tenth of the nights or more does: at the 95th percentile two
    outliers in 20 nights, as robocache's few-microsecond cases have, set a 7.7% floor on a 1.4% series). Floors the noise of a two-state series (100/108 us alternating), where
    consecutive differences winsorized by their MAD collapse to the quiet mode."""
    if len(x) < 5:
        return 0.0
    from scipy.ndimage import median_filter

    # mode "mirror": padding with copies of the first run ("nearest") made the first nights their own median,
    # so a slow state seen only early in the history did not count
    r = x - median_filter(x, size=min(9, len(x) | 1), mode="mirror")
    c = float(np.quantile(np.abs(r), LEVEL_Q))
    r = np.clip(r, -c, c)
    return float(np.sqrt(np.mean(r * r)))


def _series_sigma(x: np.ndarray, within: np.ndarray, skip: Iterable[int] = ()) -> float:
    """Between-run noise of one series (one run's sigma of log-time): the standard deviation of consecutive
    differences over sqrt(2) (a step moves one difference only), the differences first winsorized at 3 MADs
    (a crash-slow night does not inflate it), leaving out the differences in ``skip`` (across the changes
    being tested); never below the spread of the levels (:func:`_level_spread`, two-state series), the
    runs' own median within-run noise or NOISE_MIN."""
    d = np.diff(x)
    drop = [j for j in skip if 0 <= j < len(d)]  # differences across a change being tested are not noise
    if drop and len(d) - len(drop) >= 2:
        d = np.delete(d, drop)
    if len(d) >= 2:
        # centred on 0, where differences of a level sit (their median is not: an alternating 100/108 series
        # has its differences at +8% and -8%, and the median of an odd count of them is one side's)
        mad = 1.4826 * float(np.median(np.abs(d)))
        if mad > 0:
            d = np.clip(d, -3 * mad, 3 * mad)
        sd = float(np.std(d, ddof=1)) / math.sqrt(2)
    elif len(d) == 1:  # two runs (compare's shortest history): the one difference is the estimate, not zero
        sd = abs(float(d[0])) / math.sqrt(2)
    else:
        sd = 0.0
    # the level spread of the points before the newest ones (a change tonight is not noise)
    lv = _level_spread(x[:-2] if len(x) >= 7 else x)
    sd = sd if math.isfinite(sd) else 0.0
    return max(sd, lv, float(np.median(within)) if len(within) else 0.0, NOISE_MIN)


def _mann_kendall(w: np.ndarray) -> tuple[float, float]:
    """Mann-Kendall's trend test: (Kendall's tau of the values against their order, one-sided p for an
    upward trend), the S statistic's normal approximation with the tie-corrected variance and a continuity
    correction (Hipel and McLeod; the form pymannkendall uses). NumPy only: it runs per series per night."""
    n = len(w)
    sgn = np.sign(w[None, :] - w[:, None])[np.triu_indices(n, 1)]
    s_stat = float(sgn.sum())
    _, counts = np.unique(w, return_counts=True)
    var = (n * (n - 1) * (2 * n + 5) - float(np.sum(counts * (counts - 1) * (2 * counts + 5)))) / 18.0
    if var <= 0:
        return 0.0, 1.0
    z = (s_stat - 1) / math.sqrt(var) if s_stat > 0 else (s_stat + 1) / math.sqrt(var) if s_stat < 0 else 0.0
    return s_stat / (n * (n - 1) / 2), 0.5 * math.erfc(z / math.sqrt(2))


def _drift(x: np.ndarray, sigma: float, dof: float) -> tuple[float, float, float, float, float, int] | None:
    """The strongest trend ending tonight over windows of DRIFT_WINDOWS nights: Theil-Sen's slope (log-time per
    night) with its 95% interval, tested against the series' own noise (the slope's standard error under
    independent nights, sigma * sqrt(12 / (w^3 - w)), Student t, one-sided for slower, Bonferroni over the
    windows), and only where Mann-Kendall (Kendall's tau against night) also calls it (one-sided p <= 0.05:
    one outlying night does not make a trend) and a line fits the window better than the best single step
    (a step is a change point's business). Returns (slope, lo, hi, tau, p, window) or None."""
    from scipy import special, stats

    best = None
    wins = [w for w in DRIFT_WINDOWS if w <= len(x)]
    for w_n in wins:
        w = x[-w_n:]
        if float(np.ptp(w)) == 0.0:
            continue
        i = np.arange(w_n, dtype=float)
        tau, p_mk = _mann_kendall(w)
        if not (tau > 0 and p_mk <= 0.05):
            continue
        slope, icpt, lo, hi = stats.theilslopes(w, i)
        if slope <= 0:
            continue
        sse_lin = float(np.sum((w - (icpt + slope * i)) ** 2))
        cs, cs2 = np.cumsum(w), np.cumsum(w * w)
        sse_step = min(float((cs2[k - 1] - cs[k - 1] ** 2 / k)
                             + (cs2[-1] - cs2[k - 1]) - (cs[-1] - cs[k - 1]) ** 2 / (w_n - k))
                       for k in range(2, w_n - 1))
        if sse_lin >= sse_step:
            continue
        se = sigma * math.sqrt(12.0 / (w_n ** 3 - w_n))
        p = min(1.0, float(special.stdtr(max(dof, 1.0), -slope / se)) * len(wins))
        if best is None or p < best[4]:
            best = (float(slope), float(lo), float(hi), float(tau), p, w_n)
    return best


def _split_stats(x: np.ndarray, lo: int, idx: int, hi: int) -> float:
    """The variance a split of x[lo:hi] at ``idx`` explains, d^2 nb na / (nb + na): the two-segment Gaussian
    log-likelihood gain (up to the noise's variance), maximal at the maximum-likelihood change point."""
    b, a = x[lo:idx], x[idx:hi]
    d = float(a.mean() - b.mean())
    return d * d * len(b) * len(a) / (len(b) + len(a))


def _refine(x: np.ndarray, lo: int, idx: int, hi: int) -> int:
    """The change's location by maximum likelihood among the neighbouring commits (within PLACE_RADIUS runs
    of ``idx``, keeping 3 runs before it and one after): the tested split decides *whether* the series moved,
    this decides *where* (a noisy night just before or after the step otherwise moves the blame by a commit:
    the newest run tested alone against a level that already holds the step's first night)."""
    js = range(max(lo + 3, idx - PLACE_RADIUS), min(hi - 1, idx + PLACE_RADIUS) + 1)
    return max(js, key=lambda j: (_split_stats(x, lo, j, hi), -abs(j - idx)), default=idx)


def _place_p(x: np.ndarray, lo: int, idx: int, hi: int, sigma: float) -> float:
    """How sure the location is: the Gaussian profile likelihood of the split at ``idx`` against the other
    splits within PLACE_RADIUS runs (keeping 3 runs before and one after), as a share (a flat prior over them)."""
    js = range(max(lo + 3, idx - PLACE_RADIUS), min(hi - 1, idx + PLACE_RADIUS) + 1)
    if idx not in js:
        return 1.0
    ll = np.array([_split_stats(x, lo, j, hi) for j in js]) / (2 * sigma * sigma)
    w = np.exp(ll - ll.max())
    return float(w[list(js).index(idx)] / w.sum())


def check(records: Iterable[Any], *, machine: str | None = None, frontend: str | None = "cli",
          floor: float = FLOOR, q: float = FDR_Q, min_history: int = MIN_HISTORY,
          tail: Sequence[int] = (1, 2), screen: float | None = None) -> CheckResult:
    """Change points over the history of every series in ``records`` (see the module doc).

    Only *current* series are tested: those whose newest healthy point is in their machine's newest run (a
    retired case, an old grid version or input rotation, or a series throttled tonight says nothing about
    tonight). Per current series the hypotheses are about the level tonight: the newest one and two runs
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
    from scipy import stats

    _check_floor(floor)
    res = CheckResult(floor=floor, fdr_q=q)
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
    drift_cands: list[tuple[Drift | None, bool]] = []
    builders: dict[str, Any] = {}  # fingerprint -> (its candidate maker, its log-times): to refine a location
    # series measured another way (method version, input rotation): the same case's other series, for breaks
    siblings: dict[Series, list[tuple[str, Series]]] = defaultdict(list)
    for k, recs in by.items():
        siblings[_siblings_key(k)].append((max(r["created"] for r in recs), k))
    for skey, recs in by.items():
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
                             r["suite"], env_fingerprint(r)))
        pts = pts[-MAX_HISTORY:]  # PELT's cost grows with the history; older levels say nothing of tonight
        mach = (recs[-1].get("env") or {}).get("machine")
        if not pts or pts[-1].run_id != newest[mach][1]:
            res.series_stale += 1
            continue
        series = _series_dict(recs[-1])
        fp = fingerprint(series)
        if len(pts) < min_history:
            older = [k for t, k in siblings[_siblings_key(skey)] if k != skey and t < pts[0].created]
            if older:
                prev = max(older, key=lambda k: max(r["created"] for r in by[k]))
                res.breaks.append(Break(series=series, fingerprint=fp, kind="method", run_id=pts[0].run_id,
                                        created=pts[0].created, detail=(
                                            f"measured another way since run {pts[0].run_id}: method version "
                                            f"{prev.method_version} -> {skey.method_version}, input sets "
                                            f"{prev.input_sets} -> {skey.input_sets}; a new series, not compared "
                                            "with the old one")))
            continue
        res.series_checked += 1
        res.checked.append(fp)
        x = np.array([p.log_t for p in pts])
        within = np.array([p.within for p in pts])
        n = len(x)
        prior = prior_noise(_exp(float(np.median(x))), series["provider"])
        sigma = shrink(_series_sigma(x, within), (2.0 / 3.0) * (n - 1), prior)
        cps = _segments(x, sigma)
        bounds = [0, *cps, n]
        tests: dict[int, tuple[int, int, str]] = {}  # change index -> (level start, end, kind)
        if cps:  # PELT's last change point, whatever its age: its segment reaches tonight
            tests[cps[-1]] = (bounds[-3], n, "pelt")
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
        lo0 = bounds[-2]
        scan = range(lo0 + 3, n - 2)
        if len(scan) >= 2:
            best = max(scan, key=lambda j: _split_stats(x, lo0, j, n))
            if best not in tests:
                tests[best] = (lo0, n, "scan")
        key = case_key(recs[-1])

        def make(idx: int, lo: int, hi: int, kind: str, *, x=x, within=within, pts=pts, cps=cps, prior=prior,
                 series=series, fp=fp, key=key, n=n, scan=scan) -> Change:
            before, after = x[lo:idx], x[idx:hi]
            # the noise without the differences across segment boundaries and this candidate
            skip = {b - 1 for b in cps} | {idx - 1}
            # consecutive differences overlap: their SD has about 2/3 of the degrees of freedom of their count
            dof = (2.0 / 3.0) * max(n - 1 - len(skip), 1)
            sig_c = shrink(_series_sigma(x, within, skip=skip), dof, prior)
            d, se, p, tq = _test(before, after, sig_c, dof + PRIOR_DOF)
            if kind == "scan":  # the location was chosen as the likeliest of len(scan) splits
                p = min(1.0, p * len(scan))
            moved = env_changes(pts[idx - 1].env, pts[idx].env)
            return Change(series=series, fingerprint=fp, index=idx, n_before=len(before), n_after=len(after),
                          ratio=_exp(d), ratio_ci=(_exp(d - tq * se), _exp(d + tq * se)), p_value=p,
                          before=pts[idx - 1], after=pts[idx], latest=True, sigma=sig_c, key=key,
                          before_level=float(before.mean()), kind=kind, dof=dof + PRIOR_DOF,
                          p_one=p / 2 if d > 0 else min(1.0, 1 - p / 2),
                          after_levels=[float(v) for v in after], before_levels=[float(v) for v in before],
                          cause="environment" if moved else "code", cause_detail="; ".join(moved),
                          segment=(lo, hi))

        mine = []
        for idx, (lo, hi, kind) in sorted(tests.items()):
            if idx - lo < 3 or hi - idx < 1:  # a level needs 3 runs before it can be departed from
                continue
            mine.append(make(idx, lo, hi, kind))
        for c in mine:
            c.n_tests = len(mine)
        cands += mine
        builders[fp] = (make, x)
        if n >= DRIFT_MIN:
            # the noise of the nights before the windows (a drift is not noise)
            head = x[:-min(DRIFT_WINDOWS)]
            dof_d = (2.0 / 3.0) * max(len(head) - 1, 0)
            sig_d = shrink(_series_sigma(head, within[:len(head)]), dof_d, prior)
            got = _drift(x, sig_d, dof_d + PRIOR_DOF)
            if got is not None:
                slope, lo_s, hi_s, tau, p, w = got
                drift_cands.append((Drift(series=series, fingerprint=fp, key=key, slope=_exp(slope) - 1,
                                          slope_ci=(_exp(lo_s) - 1, _exp(hi_s) - 1),
                                          total=_exp(slope * (w - 1)) - 1, window=w, tau=tau, p_value=p,
                                          first=pts[-w], last=pts[-1]), True))
            else:
                drift_cands.append((None, False))
    res.candidates = len(cands)
    drifting: set[str] = set()
    if drift_cands:
        # every series tested for drift counts in Benjamini-Hochberg's denominator (no trend: p = 1)
        qd = stats.false_discovery_control(np.array([d.p_value if d else 1.0 for d, _ in drift_cands]),
                                           method="bh")
        for (d, linear), qq in zip(drift_cands, qd):
            if d is None:
                continue
            d.q_value = float(qq)
            if qq <= DRIFT_Q and linear and d.total >= floor:
                res.drifts.append(d)
                drifting.add(d.fingerprint)
        res.drifts.sort(key=lambda d: -d.slope)
    if not cands:
        return res
    qv = stats.false_discovery_control(np.array([c.p_value for c in cands]), method="bh")
    beyond = {id(c) for c in cands if c.ratio >= 1 + floor or c.ratio <= 1 / (1 + floor)}
    for c, qq in zip(cands, qv):
        c.q_value = float(qq)
        c.strict = qq <= q and id(c) in beyond
        if c.strict:
            res.changes.append(c)
    # the screen (a confirmation rerun follows): per series, slower candidates beyond the floor whose one-sided p,
    # Bonferroni over the series' own candidates, is at most `screen`; no correction across series (the rerun is
    # the check on those), so a change is found however many other series moved tonight
    screened = [c for c in cands if screen is not None and id(c) in beyond and c.ratio > 1 and not c.strict
                and c.p_one * c.n_tests <= screen]
    if screen is not None:  # a rerun follows: it needs a level to be compared with (SCREEN_MIN_BEFORE runs)
        screened = [c for c in screened if c.n_before >= SCREEN_MIN_BEFORE]
        res.changes = [c for c in res.changes if c.ratio < 1 or c.n_before >= SCREEN_MIN_BEFORE]

    # one change per series: of its significant candidates (all about the level tonight), the split that
    # explains the most variance, d^2 nb na / (nb + na) (the likelihood-ratio location: a step two nights ago
    # also makes "last night vs before" significant, diluted, and the reverse)
    def rank(c: Change) -> float:
        d = math.log(c.ratio)
        return -d * d * c.n_before * c.n_after / (c.n_before + c.n_after)

    per: dict[str, list[Change]] = defaultdict(list)
    for c in res.changes:
        per[c.fingerprint].append(c)
    strict_slower = {c.fingerprint for c in res.changes if c.ratio > 1}
    for c in screened:
        if c.fingerprint not in strict_slower:  # a strict slower change speaks first
            per[c.fingerprint].append(c)
    current: dict[str, Change] = {}
    for fp, cs in per.items():
        # a significant step tonight measured inside PELT's last segment is newer news than that segment's
        # own start (an old step must not hide tonight's)
        last_cp = max((c.index for c in cs if c.kind == "pelt"), default=None)
        newer = [c for c in cs if last_cp is not None and c.kind == "tail" and c.index - c.n_before >= last_cp]
        c = min(newer or cs, key=rank)
        # where: the maximum-likelihood split among the neighbouring commits; its own statistics are reported
        make, x = builders[fp]
        lo, hi = c.segment
        j = _refine(x, lo, c.index, hi)
        if j != c.index:
            moved = make(j, lo, hi, c.kind)
            if (moved.ratio > 1) == (c.ratio > 1) and (moved.ratio >= 1 + floor or moved.ratio <= 1 / (1 + floor)):
                # the significance is the tested split's (the test that controls the error rate); only the
                # place and the size move: the best of two locations' p would be an uncorrected second look
                moved.q_value, moved.strict, moved.n_tests = c.q_value, c.strict, c.n_tests
                moved.p_one, moved.p_value = c.p_one, c.p_value
                c = moved
        c.place_p = _place_p(x, lo, c.index, hi, c.sigma)
        current[fp] = c
    for c in current.values():
        if c.cause == "environment":  # the runner changed between the two runs: never the commit's fault
            res.breaks.append(Break(series=c.series, fingerprint=c.fingerprint, kind="environment",
                                    detail=f"the runner changed between run {c.before.run_id} and "
                                           f"{c.after.run_id} ({c.cause_detail})",
                                    run_id=c.after.run_id, created=c.after.created, ratio=c.ratio))
        elif c.fingerprint in drifting:  # a trend, reported as a drift: no single commit is blamed
            continue
        elif c.direction == "slower":
            res.alerts.append(c)
        elif c.n_after <= RECENT:  # an older improvement is history
            res.improvements.append(c)
    res.alerts.sort(key=lambda c: -c.ratio)
    res.improvements.sort(key=lambda c: c.ratio)
    return res


CONFIRM_P = 0.001  # the confirmation's one-sided p-value bound
CONFIRM_RUNS = 2  # fresh measurements of each alerted case; every one of them must be slower beyond the floor
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


def confirm(first: CheckResult, rerun: Iterable[Any], *, floor: float = FLOOR, p_max: float = CONFIRM_P,
            measurable: Iterable[str] | None = None,
            not_measured: dict[str, str] | None = None) -> tuple[list[Change], list[Change], list[Change]]:
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
    Kept alerts are marked confirmed."""
    _check_floor(floor)
    got: dict[str, list[float]] = defaultdict(list)
    for r in rerun:
        if _unhealthy(r):
            continue
        got[fingerprint(series_key(r))].append(math.log(_p50(r)))
    can = set(measurable) if measurable is not None else None
    why_not = not_measured or {}
    kept, refuted, unconfirmable = [], [], []
    for c in first.alerts:
        xs = got.get(c.fingerprint)
        if not xs or (can is not None and c.fingerprint not in can):
            c.confirmed = False
            c.confirm_note = why_not.get(c.fingerprint, "the case could not be measured again here")
            if c.strict:
                unconfirmable.append(c)
            else:  # only the screen called it: without a rerun it is no alert (the nights alone are not enough)
                c.confirm_note += (f"; the nights alone are not significant at the check's own level "
                                   f"(q = {c.q_value:.2g} > {FDR_Q}): not raised without a rerun")
                refuted.append(c)
            continue
        xs = xs[:CONFIRM_RUNS_MAX]
        ok, p, ratio, low = rerun_test(c, np.array([xs]), floor=floor, p_max=p_max)
        c.reruns = len(xs)
        c.wants_more = bool(rerun_more(c, np.array([xs]), floor=floor, ok=ok)[0])
        c.confirm_note = (f"rerun x{ratio[0]:.3f} of the level before (one-sided p = {p[0]:.2g}, {len(xs)} run(s), "
                          f"the lowest counted x{low[0]:.3f})"
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
    return (c.n_after >= HELD_NIGHTS and c.p_one <= HELD_P and bool(c.after_levels)
            and float(np.median(c.after_levels)) - ref >= math.log1p(floor))


def _ref(c: Change) -> float:
    """The level before the change, robustly: the median of its runs."""
    return float(np.median(c.before_levels)) if c.before_levels else c.before_level


def rerun_more(c: Change, xs: np.ndarray, *, floor: float = FLOOR, ok: np.ndarray | None = None) -> np.ndarray:
    """Per rerun set (rows of ``xs``, log-times): does it call for CONFIRM_MORE more reruns? When the first
    CONFIRM_RUNS reruns did not confirm alert ``c`` (``ok``, else :func:`rerun_test`'s) but are consistent with
    it: their mean beyond the floor above the level before. What a maintainer does when two fresh runs of a
    noisy case point the same way as the nights but do not settle it: measure more (never a third look)."""
    xs = np.atleast_2d(np.asarray(xs, dtype=float))
    if xs.shape[1] >= CONFIRM_RUNS_MAX:
        return np.zeros(len(xs), dtype=bool)
    ref = _ref(c)
    if ok is None:
        ok = rerun_test(c, xs, floor=floor)[0]
    return ~ok & (xs.mean(axis=1) - ref >= math.log1p(floor))


def rerun_test(c: Change, xs: np.ndarray, *, floor: float = FLOOR,
               p_max: float = CONFIRM_P) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The confirmation's decision for alert ``c`` on rerun sets ``xs`` (shape (sets, runs), log-times): each
    set alone against the level before the change, one-sided, with the series' noise. Returns per set
    (confirmed, p, the reruns' mean ratio, the lowest rerun's ratio). Vectorized: the quality tests compute
    the exact confirmation probability of a false alert over every rerun their noise pool allows. A change that
    has held (HELD_NIGHTS nights, their median beyond the floor, their p <= HELD_P) needs p <= CONFIRM_P_HELD.
    A set of CONFIRM_RUNS_MAX reruns (the second look, :func:`rerun_more`) is judged by the same bars with one
    spare (RERUN_SPARE): all but the lowest rerun beyond them, the tails' chance binomial."""
    from scipy import special

    xs = np.atleast_2d(np.asarray(xs, dtype=float))
    # the level before, robustly: the median of its runs (a PELT segment of 3 runs can hold an outlying
    # night that would make every later run look slower; the median's variance is pi/2 the mean's)
    ref = _ref(c)
    d = xs.mean(axis=1) - ref
    se = c.sigma * math.sqrt((math.pi / 2 if c.before_levels else 1.0) / c.n_before + 1.0 / xs.shape[1])
    p = special.stdtr(max(c.dof, 1.0), -d / se)
    # the reruns that must each be beyond the bars below: all of CONFIRM_RUNS; of CONFIRM_RUNS_MAX (the second look,
    # rerun_more) all but one (one outlying rerun among four neither confirms nor refutes; the tails below count it)
    spare = RERUN_SPARE if xs.shape[1] >= CONFIRM_RUNS_MAX else 0
    low_log = np.sort(xs, axis=1)[:, spare] - ref
    if _held(c, ref, floor):
        p_max = max(p_max, CONFIRM_P_HELD)
    ok = (p <= p_max) & (low_log >= math.log1p(floor))
    # and beyond the floor above 90% of the nights before the change, whatever their distribution: a series with
    # a second state (100/108 us, the slow one a tenth of the nights or more) whose reruns both land in it has
    # shown that level before, which no step does
    if len(c.before_levels) >= SCREEN_MIN_BEFORE:
        ok &= low_log + ref - float(np.quantile(c.before_levels, LEVEL_Q)) >= math.log1p(floor)
    # and beyond the provider's measured run-to-run tails: the chance that the provider's real deviations (drawn
    # as often as there are reruns) put as many runs as slow as the counted rerun (all of them, or all but the
    # spare: the binomial tail), at most p_max (a provider whose runs of one commit moved 20% now and then
    # confirms nothing with two +12% reruns, whatever the series' quieter sigma says)
    pool = prior_pool(_exp(ref), c.series.get("provider"))
    if pool is not None:
        from scipy import stats

        k = xs.shape[1]
        tail = (len(pool) - np.searchsorted(pool, low_log, side="left")) / len(pool)
        ok &= stats.binom.sf(k - spare - 1, k, tail) <= p_max
    return ok, p, np.exp(np.clip(d, -700, 700)), np.exp(np.clip(low_log, -700, 700))


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


def alert_markdown(c: Change, dashboard_url: str | None = None) -> str:
    """The alert as markdown; its History view linked at ``dashboard_url`` (:func:`links.base_url`'s default)."""
    from . import links

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
        f"- location: this commit range's share of the likelihood among the neighbouring ones {c.place_p:.0%}"
        + (" (not sure: a neighbouring commit may be the one)" if c.place_p < PLACE_SURE else ""),
        f"- last commit before: `{_code(c.before.commit or '?')}` (run {md_text(c.before.run_id)}, {md_text(c.before.created)})",
        f"- first commit after: `{_code(c.after.commit or '?')}` (run {md_text(c.after.run_id)}, {md_text(c.after.created)})",
        "- confirmation: " + {True: "a rerun of the case, tested alone, reproduced it",
                              False: "**unconfirmed**", None: "not asked (`check --confirm`)"}[c.confirmed]
        + (f": {md_text(c.confirm_note)}" if c.confirm_note else ""),
        f"- change id `{c.change_id}` (series and commit range: one issue per change, updated while it holds)",
        f"- reproduce: `{_code(reproduce_command(c))}`",
        f"- dashboard: [History of {md_text(s['case_id'])} / {md_text(s['provider'])} / {md_text(s['dtype'])} "
        f"on {md_text(str(s['machine']))}]({links.history_url(s, dashboard_url)})",
    ]) + "\n"


def drift_title(d: Drift) -> str:
    s = d.series
    where = f"{s['arch']} ({s['machine']})" if s.get("arch") else str(s["machine"])
    return (f"{s['case_id']} {s['dtype']} {s['provider']} drifting {d.slope * 100:+.2f}%/night on {where} "
            f"({d.total * 100:+.1f}% over {d.window} nights)")


def drift_markdown(d: Drift, dashboard_url: str | None = None) -> str:
    from . import links

    s = d.series
    return "\n".join([
        f"### {md_text(drift_title(d))}", "",
        f"- series: machine `{_code(s['machine'])}`, case `{_code(s['case_id'])}`, provider "
        f"`{_code(s['provider'])}`, dtype `{_code(s['dtype'])}`, front end {md_text(str(s['frontend']))}",
        f"- trend: Theil-Sen slope {d.slope * 100:+.2f}% per night (95% interval {d.slope_ci[0] * 100:+.2f}% to "
        f"{d.slope_ci[1] * 100:+.2f}%), Mann-Kendall tau {d.tau:.2f}, one-sided p = {d.p_value:.2g}, "
        f"q = {d.q_value:.2g}; a line fits these nights better than any single step",
        f"- window: {d.window} nights, run {md_text(d.first.run_id)} (`{_code((d.first.commit or '?')[:12])}`) to "
        f"run {md_text(d.last.run_id)} (`{_code((d.last.commit or '?')[:12])}`): a drift, no single commit is blamed",
        f"- dashboard: [History of this series]({links.history_url(s, dashboard_url)})",
    ]) + "\n"


def break_markdown(b: Break) -> str:
    s = b.series
    moved = f" (x{b.ratio:.3f})" if b.ratio else ""
    return (f"- {md_text(b.kind)} change, not a regression: {md_text(s['case_id'])} {md_text(s['dtype'])} {md_text(s['provider'])} "
            f"on {md_text(str(s['machine']))}{moved}: {md_text(b.detail)}")


def alerts_json(res: CheckResult, dashboard_url: str | None = None) -> dict[str, Any]:
    from . import links

    def pt(p: Point) -> dict[str, Any]:
        return {"commit": p.commit, "run_id": p.run_id, "created": p.created}

    def one(c: Change) -> dict[str, Any]:
        return {"fingerprint": c.fingerprint, "change_id": c.change_id, "kind": "step", "series": c.series,
                "title": alert_title(c) if c.direction == "slower" else alert_title(c).replace("slower", "faster"),
                "direction": c.direction, "ratio": c.ratio, "ratio_ci": list(c.ratio_ci), "q_value": c.q_value,
                "p_value": c.p_value, "noise": c.sigma, "n_before": c.n_before, "n_after": c.n_after,
                "before": pt(c.before), "after": pt(c.after),
                "case_key": c.key, "reproduce": reproduce_command(c), "markdown": alert_markdown(c, dashboard_url),
                "link": links.history_url(c.series, dashboard_url),
                "confirmed": c.confirmed, "confirm_note": c.confirm_note, "reruns": c.reruns,
                "location_p": c.place_p}

    def drift(d: Drift) -> dict[str, Any]:
        return {"fingerprint": d.fingerprint, "change_id": hashlib.sha256(f"{d.fingerprint}|drift".encode())
                .hexdigest()[:12], "kind": "drift", "series": d.series, "title": drift_title(d),
                "direction": d.direction, "slope_per_night": d.slope, "slope_ci": list(d.slope_ci),
                "total": d.total, "window": d.window, "tau": d.tau, "p_value": d.p_value, "q_value": d.q_value,
                "first": pt(d.first), "last": pt(d.last), "case_key": d.key, "markdown": drift_markdown(d, dashboard_url),
                "link": links.history_url(d.series, dashboard_url)}

    def brk(b: Break) -> dict[str, Any]:
        return {"fingerprint": b.fingerprint, "kind": b.kind, "series": b.series, "detail": b.detail,
                "run_id": b.run_id, "created": b.created, "ratio": b.ratio,
                "link": links.history_url(b.series, dashboard_url)}

    return {"schema": "robocache-alerts/1", "generated": datetime.now(timezone.utc).isoformat(timespec="seconds"),
            "alerts": [one(c) for c in res.alerts], "improvements": [one(c) for c in res.improvements],
            "drifts": [drift(d) for d in res.drifts], "breaks": [brk(b) for b in res.breaks],
            "checked": sorted(res.checked),
            "summary": {"series": res.series, "series_checked": res.series_checked,
                        "candidates": res.candidates, "significant_changes": len(res.changes),
                        "alerts": len(res.alerts), "improvements": len(res.improvements),
                        "drifts": len(res.drifts), "breaks": len(res.breaks),
                        "excluded_points": res.excluded_points, "excluded_reasons": res.excluded_reasons,
                        "floor": res.floor, "fdr_q": res.fdr_q}}


def check_markdown(res: CheckResult, dashboard_url: str | None = None) -> str:
    lines = ["## robocache-bench check", "",
             f"{res.series} series, {res.series_checked} with at least {MIN_HISTORY} healthy runs; "
             f"{res.excluded_points} points excluded ({', '.join(f'{k} {v}' for k, v in sorted(res.excluded_reasons.items())) or 'none'}); "
             f"{res.candidates} candidate change points, {len(res.changes)} significant "
             f"(Benjamini-Hochberg q <= {FDR_Q}, beyond {FLOOR:.0%}).", ""]
    if res.alerts:
        lines += [f"**{len(res.alerts)} performance regression(s)**", ""] + [alert_markdown(c, dashboard_url) for c in res.alerts]
    elif res.series_checked == 0:
        # nothing was tested: "no regression" would be a pass that never looked
        lines.append(f"**Nothing tested**: no series has the {MIN_HISTORY} healthy runs a test needs, so no "
                     "regression can be found or ruled out yet (run the suite on more commits of this machine).")
    elif res.series_checked < res.series:
        lines.append(f"No performance regression in the {res.series_checked} series tested "
                     f"({res.series - res.series_checked} with fewer than {MIN_HISTORY} healthy runs not tested).")
    else:
        lines.append("No performance regression.")
    if res.drifts:
        lines += ["", f"**{len(res.drifts)} drift(s)** (a trend over the newest nights, not one commit):", ""]
        lines += [drift_markdown(d, dashboard_url) for d in res.drifts]
    if res.breaks:
        lines += ["", f"{len(res.breaks)} method or environment change(s) (not regressions, no issue):", ""]
        lines += [break_markdown(b) for b in res.breaks]
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


def _main(argv: list[str] | None = None) -> int:
    """``python -m robocache.bench.regress fit-priors results/``: refit ``noise_priors.json`` from the records."""
    import argparse
    import json

    from . import store

    ap = argparse.ArgumentParser(prog="python -m robocache.bench.regress")
    sub = ap.add_subparsers(dest="cmd", required=True)
    f = sub.add_parser("fit-priors", help="fit the per-provider noise priors from runs of one commit")
    f.add_argument("paths", nargs="+")
    f.add_argument("--out", default=str(PRIORS_FILE))
    args = ap.parse_args(argv)
    loaded = store.load(*args.paths)
    if loaded.bad:
        for path, why in loaded.bad:
            print(f"bad results file {path}: {why}", file=sys.stderr)
        return 2
    doc = {"schema": "robocache-noise-priors/1",
           "about": "between-run noise (one sigma of log-time per run) per provider and median-time bucket, from "
                    "healthy runs of one commit; written by python -m robocache.bench.regress fit-priors",
           "sources": sorted({str(Path(p)) for p in args.paths}), "providers": fit_priors(loaded.records)}
    text = json.dumps(doc, indent=1, sort_keys=True, allow_nan=False) + "\n"
    out = Path(args.out)
    from .store import atomic_write

    atomic_write(out, text)
    print(f"priors for {len(doc['providers'])} providers written to {out}")
    return 0


if __name__ == "__main__":
    sys.exit(_main())
