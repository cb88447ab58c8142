"""Between-run noise: the per-provider priors fitted from the committed records (``noise_priors.json``, next to
this module; refit with ``python -m robocache.bench.regressions fit-priors results/``), a series' own noise
(:func:`series_sigma`) and the two pooled (:func:`shrink`)."""
from __future__ import annotations

import math
import sys
from collections import defaultdict
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import numpy as np

from ..schema import Series, series_key
from .records import CALL_COST_TIMERS, call_ratio, p50, processes_of, unhealthy

NOISE_MIN = 0.002  # no series is assumed quieter than 0.2% between runs
# Between-run noise assumed at least (per run, relative): sigma(t) = sqrt(REL^2 + (ABS_US / t)^2). Fitted to
# the 44 quick cases measured by 6 runs of commit c700059 on an H200 (2 CLI, 1 pytest-benchmark, 3 asv).
# Only the fallback for a provider without fitted runs (noise_priors.json, fit_priors); ABS_US also floors
# every prior (launch-bound cases of a few microseconds move by a fraction of a microsecond between processes).
PRIOR_REL = 0.015
PRIOR_ABS_US = 0.1
PRIOR_WIDEN = 1.5  # the prior is widened by this much for a series without history of its own (conservative)
PRIOR_DOF = 4.0  # the prior counts as this many degrees of freedom next to a series' own history
LEVEL_Q = 0.9  # the level spread is winsorized at this quantile: a second state must recur in about 10% of nights
# the runs' within-run noise floors a series' noise unless its own nights refute it: their consecutive differences'
# spread is below the within-run sigma's lower one-sided WITHIN_REFUTE_P bound (chi-square on their degrees of freedom)
WITHIN_REFUTE_P = 0.001
PRIORS_FILE = Path(__file__).with_name("noise_priors.json")
BUCKETS = ((20.0, "lt20us"), (200.0, "lt200us"), (math.inf, "ge200us"))  # prior time buckets (median time)


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
    from. ``"*"`` pools a provider's buckets, ``"all"`` every provider. Call-cost series (the host's time per call,
    :data:`HOST_TIMERS`) are fitted apart, under ``<provider>|host`` and ``all|host``: their runs
    of one commit move 20-30% (H100 A/A pair of 2026-11-27, `resample/dispatch` with ``host_loop``), and pooled
    with the device-timed runs of the same provider they set the device series' thresholds.

    Each bucket's fit is robust to one session (a machine's runs of one commit, :func:`_fit_bucket`): the widest
    of the pooled deviations and the pools with one session left out, so that one session's quiet cases (an A/A
    pair of back-to-back runs) cannot narrow the prior the other sessions measured.

    A call-cost record that carries its interleaved ratio (:func:`records.call_ratio`, what ``compare`` judges such
    a case by) gives its ratio's deviations too, under ``<provider>|host-ratio`` and ``all|host-ratio``, one pool
    ``"*"`` (a ratio has no time bucket): the host's state cancels in the ratio, so its noise is not the host
    time's (H200 A/A of 2026-11-27: resample's host time 12.85 / 21.16 / 18.75 us, its ratio 1.68 / 1.72 / 1.74).

    A record timed in K > 1 fresh processes (``run --processes K``: its median the median of K processes' medians,
    :func:`records.processes_of`) is fitted apart, under ``<provider>|p<K>`` and ``all|p<K>`` (after any ``|host``
    or ``|host-ratio``; :func:`_processes_suffix`), and its runs are grouped with the runs of one commit timed in
    as many processes only: the median of K processes moves less from run to run than one process's median (the
    spread between processes is most of a short case's between-run noise: docs/harness.md), so a deviation of a
    K-process run from a one-process run's mean is neither's noise, and pooled together the K-process runs would
    narrow the one-process prior the check reads and the one-process runs widen the K-process fit. The check's
    lookups (:func:`prior_noise`, :func:`prior_pool`) read the one-process fits only: a K-process series is judged
    with the wider one-process prior until its own history outweighs it (:func:`shrink`)."""
    groups: dict[tuple[Series, str, int], list[float]] = defaultdict(list)
    ratios: dict[tuple[Series, str, int], list[float]] = defaultdict(list)
    for r in records:
        if unhealthy(r) or not r.git_commit or r.synthetic:
            continue
        # the process count in the key: runs of one commit timed in different numbers of processes never deviate
        # from one mean together (no run-to-run ratio between a K-process and a one-process run)
        k = processes_of(r)
        groups[(series_key(r), r.git_commit, k)].append(math.log(p50(r)))
        cr = call_ratio(r)
        if cr is not None:
            ratios[(series_key(r), r.git_commit, k)].append(math.log(cr[0]))
    # provider -> bucket -> session (machine, commit) -> deviations
    dev: dict[str, dict[str, dict[tuple[str, str], list[float]]]] = defaultdict(
        lambda: defaultdict(lambda: defaultdict(list)))
    for (sk, commit, k), xs in groups.items():
        if len(xs) < 2:
            continue
        x = np.array(xs)
        scale = math.sqrt(len(x) / (len(x) - 1))
        b = _bucket(math.exp(float(x.mean())))
        sfx = _timer_suffix(sk.timer) + _processes_suffix(k)
        session = (sk.machine or "", commit)
        for e in (x - x.mean()) * scale:
            for prov in (sk.provider + sfx, "all" + sfx):
                dev[prov][b][session].append(float(e))
                dev[prov]["*"][session].append(float(e))
    for (sk, commit, k), xs in ratios.items():
        if len(xs) < 2:
            continue
        x = np.array(xs)
        session = (sk.machine or "", commit)
        sfx = RATIO_SUFFIX + _processes_suffix(k)
        for e in (x - x.mean()) * math.sqrt(len(x) / (len(x) - 1)):
            for prov in (sk.provider + sfx, "all" + sfx):
                dev[prov]["*"][session].append(float(e))
    out: dict[str, Any] = {}
    for prov, per in sorted(dev.items()):
        out[prov] = {b: _fit_bucket(sessions) for b, sessions in sorted(per.items())}
    return out


SESSIONS_MIN_LEFT = 2  # a session is left out of a bucket's fit only where at least this many others remain


def _sigma90(v: np.ndarray) -> float:
    """The Gaussian-equivalent sigma of deviations ``v``: their absolute 90th percentile / 1.645."""
    return float(np.quantile(np.abs(v), 0.9)) / 1.645


def _fit_bucket(sessions: dict[tuple[str, str], list[float]]) -> dict[str, Any]:
    """One provider's bucket: sigma, RMS and the pool of deviations, robust to one session.

    A session is one machine's runs of one commit. The fit is the widest of the pooled deviations and the pools
    with one session left out (where at least SESSIONS_MIN_LEFT sessions and PRIOR_MIN_N deviations remain): one
    session's quiet cases cannot narrow the prior below what the other sessions measured (issue 27: an A/A pair of
    back-to-back quick runs narrowed CuPy's >= 200 us fit from 3.8% to 1.6% while its pool kept tails of 4.3% RMS,
    and the 20-200 us torch.compile fit from 5.5% to 4.2%; the nightly check's nights are hours apart, not
    minutes). ``n`` counts every deviation fitted; ``deviations`` is the pool the sigma comes from (what the
    confirmation's tails guard reads), ``left_out`` the session it leaves out ("machine@commit"), if any."""
    keys = sorted(sessions)
    every = np.array([e for k in keys for e in sessions[k]])
    best, pool, left = _sigma90(every), every, None
    if len(keys) - 1 >= SESSIONS_MIN_LEFT:
        for k in keys:
            rest = np.array([e for j in keys if j != k for e in sessions[j]])
            if len(rest) >= PRIOR_MIN_N and _sigma90(rest) > best:
                best, pool, left = _sigma90(rest), rest, k
    fit: dict[str, Any] = {"sigma": round(best, 5), "n": len(every),
                           "rms": round(float(np.sqrt(np.mean(np.square(pool)))), 5),
                           "deviations": [round(float(e), 5) for e in sorted(pool)]}
    if left is not None:
        fit["left_out"] = f"{left[0]}@{left[1][:12]}"
    return fit


HOST_TIMERS = CALL_COST_TIMERS  # the call-cost timer: its noise is fitted and looked up apart (one definition)
CALL_RATIO = "call_ratio"  # a series' "measure" when it is judged by its interleaved ratio (records.call_ratio)
RATIO_SUFFIX = "|host-ratio"  # the priors' key suffix of a call-cost case's interleaved ratio (records.call_ratio)


def _timer_suffix(timer: str | None) -> str:
    """The priors' key suffix of a series timed with ``timer``: ``"|host"`` for a call's host time, else none."""
    return "|host" if timer in HOST_TIMERS else ""


def _processes_suffix(k: int) -> str:
    """The priors' key suffix of runs timed in ``k`` fresh processes (``run --processes K``): ``"|p<k>"`` for
    k > 1, none for one process (every record before ``--processes``, and every prior the check looks up)."""
    return f"|p{int(k)}" if k > 1 else ""


def _prior_names(provider: str | None, timer: str | None) -> list[str]:
    """The priors' entries to try, in order, for a series of ``provider`` timed with ``timer``: the provider, its
    base (``name@version``); a host-timed series then every provider's host-timed pool (never a device fit)."""
    if not provider:
        return []
    sfx = _timer_suffix(timer)
    names = [provider + sfx, provider.split("@")[0] + sfx]
    return names + ["all" + sfx] if sfx else names


_PRIORS: dict[str, Any] | None = None
PRIOR_MIN_N = 10  # deviations a provider's bucket needs before its own sigma is used (else the provider's pool)


def priors() -> dict[str, Any]:
    """The committed priors (``noise_priors.json``, written by ``python -m robocache.bench.regressions fit-priors``)."""
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
                  "(refit: python -m robocache.bench.regressions fit-priors results/)", file=sys.stderr)
            _PRIORS = {}
    return _PRIORS


def prior_noise(time_us: float, provider: str | None = None, *, tails: bool = False,
                timer: str | None = None) -> float:
    """Relative between-run noise (one sigma, one run) assumed for a case of median ``time_us`` and ``provider``.

    The provider's fitted sigma for the case's time bucket (its pooled sigma when the bucket has fewer than
    PRIOR_MIN_N deviations; the base provider for ``name@version``), else the H200 model; never below the
    H200 model's absolute part (``PRIOR_ABS_US / t``) or NOISE_MIN. ``tails``: the root mean square of the
    deviations instead (outliers included), for ``compare``, which has no confirmation rerun to weed them out.
    ``timer``: the series' timer; a host-timed one takes the host-timed fits (:func:`_prior_names`)."""
    t = min(max(float(time_us), 1e-3), 1e300)
    model = math.hypot(PRIOR_REL, PRIOR_ABS_US / t)
    table = priors()
    fitted = None
    for name in _prior_names(provider, timer):
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


def prior_ratio_noise(provider: str | None, *, tails: bool = False) -> tuple[float, str] | None:
    """Relative between-run noise (one sigma, one run) of a call-cost case's interleaved ratio
    (:func:`records.call_ratio`) for ``provider``, and the entry it comes from: the provider's (its base's, then
    every provider's) ``|host-ratio`` fit, never below NOISE_MIN (no absolute floor: a ratio is no time). ``tails``
    as in :func:`prior_noise`. None where no ratio was fitted: the caller falls back to the host time's prior."""
    got = _ratio_pick(provider)
    if got is None:
        return None
    pick, name = got
    s = max(float(pick["sigma"]), float(pick["rms"])) if tails else float(pick["sigma"])
    return max(s, NOISE_MIN), name


def _ratio_pick(provider: str | None) -> tuple[dict[str, Any], str] | None:
    """The ``|host-ratio`` fit a call ratio of ``provider`` takes: the provider's, its base's, every provider's."""
    if not provider:
        return None
    table = priors()
    for name in (provider + RATIO_SUFFIX, provider.split("@")[0] + RATIO_SUFFIX, "all" + RATIO_SUFFIX):
        pick = (table.get(name) or {}).get("*")
        if pick and pick["n"] >= PRIOR_MIN_N:
            return pick, name
    return None


def prior_pool(time_us: float, provider: str | None, timer: str | None = None,
               measure: str | None = None) -> np.ndarray | None:
    """The provider's measured run-to-run deviations (log-time, sorted) for a case of median ``time_us``: the
    pool :func:`prior_noise` takes its sigma from (None when the provider has no fitted runs). ``measure``
    ``"call_ratio"``: a call-cost series checked on its interleaved ratio, the ``|host-ratio`` pool
    (:func:`prior_ratio_noise`'s; ``time_us`` unused)."""
    if measure == CALL_RATIO:
        got = _ratio_pick(provider)
        pool = got[0].get("deviations") if got is not None else None
        return np.sort(np.asarray(pool, dtype=float)) if pool else None
    t = min(max(float(time_us), 1e-3), 1e300)
    for name in _prior_names(provider, timer):
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


def within_floor(x: np.ndarray, within: np.ndarray) -> float:
    """The runs' median within-run noise (:func:`records.within_sigma`) as a floor on the series' between-run
    noise, capped where the series' own nights refute it: a run's median cannot vary less between runs than
    within one, so nights whose consecutive differences (winsorized as :func:`series_sigma`'s, over sqrt(2)) spread less than
    that sigma could give with probability WITHIN_REFUTE_P (chi-square, (2/3)(n-1) degrees of freedom, as the
    check counts them) say the within-run figure is not the median's uncertainty. The cap is then that
    one-sided bound: the largest sigma the nights allow. (Issue 27: ``method.noise`` is a distribution-free 95%
    interval, at 8 samples their whole range; one batch of 8 blocked behind a stream gave a CuPy case +-38%, a
    19.5% floor on a series whose nights moved 1-2%, and hid +20% steps on it for good.) Few nights bound
    nothing: the floor stands where the history is short."""
    med = float(np.median(within)) if len(within) else 0.0
    d = np.diff(x)
    dof = (2.0 / 3.0) * len(d)
    if med <= 0 or len(d) < 2:
        return med
    from scipy import special  # the chi-square quantile's ufunc

    # winsorized at 3 MADs around 0 as series_sigma's (a Gaussian's mean square loses 0.5% to it, so the bound
    # holds where the within-run figure is right), so that one tail night or a step in the history does not
    # carry the cap back up to the figure the other nights refute
    mad = 1.4826 * float(np.median(np.abs(d)))
    if mad > 0:
        d = np.clip(d, -3 * mad, 3 * mad)
    s = float(np.sqrt(np.mean(d * d) / 2))  # about 0, where differences of a level sit (series_sigma)
    lo_q = float(special.chdtri(dof, 1.0 - WITHIN_REFUTE_P))  # the chi-square's WITHIN_REFUTE_P quantile
    if not (math.isfinite(s) and lo_q > 0):
        return med
    return min(med, s * math.sqrt(dof / lo_q))


def sigma_floors(x: np.ndarray, within: np.ndarray) -> tuple[float, float]:
    """The parts of :func:`series_sigma` that do not depend on ``skip``: (the level spread of the points before
    the newest ones, the runs' median within-run noise where the nights do not refute it, :func:`within_floor`).
    ``check`` tests several candidates per series, each leaving out other differences: it computes these once
    per series and passes them back (``floors=``)."""
    # the level spread of the points before the newest ones (a change tonight is not noise)
    head = x[:-2] if len(x) >= 7 else x
    return _level_spread(head), within_floor(head, within)


def series_sigma(x: np.ndarray, within: np.ndarray, skip: Iterable[int] = (), *,
                 floors: tuple[float, float] | None = None) -> float:
    """Between-run noise of one series (one run's sigma of log-time): the standard deviation of consecutive
    differences over sqrt(2) (a step moves one difference only), the differences first winsorized at 3 MADs
    (a crash-slow night does not inflate it), leaving out the differences in ``skip`` (across the changes
    being tested); never below the spread of the levels (:func:`_level_spread`, two-state series), the
    runs' own median within-run noise or NOISE_MIN. ``floors``: :func:`sigma_floors` of these same ``x`` and
    ``within``, computed once by a caller that asks for several ``skip``s (None: computed here)."""
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
    lv, med = sigma_floors(x, within) if floors is None else floors
    sd = sd if math.isfinite(sd) else 0.0
    return max(sd, lv, med, NOISE_MIN)


def main(argv: list[str] | None = None) -> int:
    """``python -m robocache.bench.regressions fit-priors results/``: refit ``noise_priors.json`` from the records."""
    import argparse
    import json

    from .. import store

    ap = argparse.ArgumentParser(allow_abbrev=False, prog="python -m robocache.bench.regressions")
    sub = ap.add_subparsers(dest="cmd", required=True)
    f = sub.add_parser("fit-priors", allow_abbrev=False,
                       help="fit the per-provider noise priors from runs of one commit")
    f.add_argument("paths", nargs="+")
    f.add_argument("--out", default=str(PRIORS_FILE))
    args = ap.parse_args(argv)
    # the committed records only: a folder's files that git ignores (make run's results/local/, the user's own
    # runs) would change the committed priors from one checkout to the next; named explicitly, they count
    paths, ignored = store.committed_files(*args.paths)
    if ignored:
        where = sorted({str(Path(f).parent) for f in ignored})
        print(f"fit-priors: left out {len(ignored)} results file(s) git ignores ({', '.join(where[:3])}"
              f"{', ...' if len(where) > 3 else ''}): not committed records; name that folder to fit on it",
              file=sys.stderr)
    loaded = store.load(*paths)
    if loaded.bad:
        for path, why in loaded.bad:
            print(f"bad results file {path}: {why}", file=sys.stderr)
        return 2
    doc = {"schema": "robocache-noise-priors/1",
           "about": "between-run noise (one sigma of log-time per run) per provider and median-time bucket, from "
                    "healthy runs of one commit; written by python -m robocache.bench.regressions fit-priors",
           "sources": sorted({str(Path(p)) for p in args.paths}), "providers": fit_priors(loaded.records)}
    text = json.dumps(doc, indent=1, sort_keys=True, allow_nan=False) + "\n"
    out = Path(args.out)
    store.atomic_write(out, text)
    print(f"priors for {len(doc['providers'])} providers written to {out}")
    return 0

