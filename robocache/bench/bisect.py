"""Find the commit that moved a confirmed regression: ``robocache-bench bisect``.

A nightly alert names a commit range (the last commit measured before the change, the first after). This module
narrows it to one commit, as Chromeperf's Pinpoint does:

1. the range: the commits on the first-parent line from ``good`` (exclusive) to ``bad`` (inclusive), with ``git
   rev-list --first-parent``; a merge counts as one commit (its side branch is not entered);
2. each commit it tests is checked out in a git worktree of the repository (the kernels are compiled at run time,
   so a checkout is a build); a commit that does not import ``robocache.bench.cli``, does not know a case, or
   whose case fails the correctness gate in every sample, is *untestable* and skipped, as ``git bisect skip``;
3. a commit is measured by ITS OWN ``robocache-bench run --cases ...`` (the harness and the worker of that commit,
   the correctness gate first, each case in its own process), the alerted cases only, each ``n`` times in one
   invocation (``--cases k1,k2,k1,k2,...``: every sample a fresh process, the cases interleaved); one sample is a
   record's median time (``--statistic``: or its p20 or fastest call, for a host whose load swamps the median),
   or, for a series alerted on its interleaved call ratio, the record's ratio (:func:`_row`);
   failed and throttled records are not counted; contended ones are, flagged (contention only adds time, and the
   method is built for it: rounds measured beside each other, positions settled by the lower quartile; a host
   whose load is always above its cores marks every record contended, and dropping them left nothing to test);
4. decisions are rank tests on those samples (:func:`p_value`: Mann-Whitney U and Kolmogorov-Smirnov, the smaller
   p doubled: Bonferroni over the two tests Pinpoint runs side by side), never a mean of one run:

   - the endpoints first (:func:`endpoints_verdict`): per case, ``good`` against ``bad``, Bonferroni over the
     group's cases; a case *reproduces* when ``bad`` is slower at p <= ALPHA / cases. Cases that do not are left
     out of the decisions (listed); none reproducing is "not reproducible";
   - then each candidate (:func:`candidate_verdict`) against both endpoints at once, over the whole group: every
     sample is placed on its case's good -> bad scale (``position`` = (log t - median log good) / (median log bad
     - median log good): 0 at good, 1 at bad), and the candidate's positions, pooled over the cases, are tested
     against the endpoints' pooled positions. "Same as bad" is: different from good (p <= ALPHA) AND the same as
     bad (p above the *high threshold*: the p a true difference of the endpoints' size would exceed only
     SAME_MISS of the time, at these sample sizes; :func:`high_threshold`) or beyond it (slower than bad);
     "same as good" the mirror image (or faster than good: the machine was quieter while it ran);
     anything else "unknown", and the candidate's samples double (the endpoints measured again beside it, as many
     times, so a slow change of the machine's load reaches both sides), up to ``max_samples``; there it is settled
     by where it lies (:func:`settle`: in the last quarter of the way to bad, bad; in the first, good; between
     and different from both, "between").
     Pooling makes one decision per commit over the group (item 2 of issue 29), with the power of all its cases;
     a group whose cases moved at different commits shows as a candidate between the endpoints;
5. the range narrows to the last good and the first bad commit; the result is "found" (one commit remains),
   "spread" (a commit differs from both endpoints, between them: the change is spread over several commits),
   "untestable" (only skipped commits are left between the two), "undecided" (a commit stayed unknown at the
   most samples), "budget" (the time ran out), "not_reproducible" or "failed" (the range could not be set up).

The result is a ``robocache-bisect/1`` document (:class:`robocache.bench.schema.BisectDoc`), written when the
bisection starts (status "running") and after every measurement round, atomically: the culprit, the evidence per
tested commit, every measurement and the time spent. The candidates' own run files are kept beside it as
``*.bisect-run.json``: they measure OLD commits today, so no results loader may take them for history points.
"""
from __future__ import annotations

import hashlib
import json
import math
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, UTC
from functools import cache
from pathlib import Path
from typing import Any

import numpy as np

from . import schema, store
from .schema import BISECT_SCHEMA

ALPHA = 0.01  # "different": p at most this (Pinpoint's low threshold)
SAME_MISS = 0.01  # "same": a true difference of the endpoints' size gives a p above the high threshold 1% of the time
SAME_FLOOR = 0.05  # and never "same" at a p a plain test would call different (the high threshold can be 1e-4)
REPRO_SHARE = 0.5  # "reproduced": the bad endpoint slower by at least half the expected change (log scale)
SETTLE_MARGIN = 0.25  # at the most samples, a candidate this near an endpoint on the good -> bad scale is on its side
LOW_Q = 0.25  # settle() places a candidate by its lower quartile (contention only adds time)
SAMPLES = 10  # samples per case and commit to start with (Pinpoint: 10, doubling to 160)
MAX_SAMPLES = 160
ENDPOINT_ROUNDS = 3  # the endpoints double at most this many times while a case is unknown (10 -> 80)
BUDGET_S = 1800.0  # 30 minutes of device time (the nightly's default)
DOC_SUFFIX = ".bisect.json"
RUN_SUFFIX = ".bisect-run.json"  # a candidate's run file, renamed so that no loader of a results folder reads it
FINAL = ("found", "not_reproducible", "spread", "undecided", "budget", "untestable", "failed")
_REPS = 2000  # simulated pairs per high threshold (its 99th percentile rests on 20 of them)
_N_GRID = (12, 16, 20, 24, 32, 40, 48, 64, 80, 96, 128, 160, 192, 256)
_IQR_NORMAL = 1.3489795  # the interquartile range of the standard normal
SPREAD_Z = 2.33  # the spread behind a magnitude is taken at its one-sided 99% upper bound (spread_bound)


# ------------------------------------------------------------------------------------------------ statistics

def p_value(a: Sequence[float], b: Sequence[float]) -> float:
    """Two-sided p that ``a`` and ``b`` come from one distribution: the smaller of Mann-Whitney U's and
    Kolmogorov-Smirnov's, doubled (Bonferroni over the two; Pinpoint runs both and takes the smaller). 1.0 when
    either side has fewer than two values or every value is the same."""
    from scipy import stats

    x, y = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    if len(x) < 2 or len(y) < 2:
        return 1.0
    both = np.concatenate([x, y])
    if np.all(both == both[0]):
        return 1.0
    pu = float(stats.mannwhitneyu(x, y, alternative="two-sided").pvalue)
    pk = float(stats.ks_2samp(x, y).pvalue)
    return float(min(1.0, 2.0 * min(pu, pk)))


def _n_cell(n: int) -> int:
    """``n`` rounded DOWN to the grid the thresholds are simulated on (fewer samples: a higher threshold, so
    "same" only gets harder to call), at most 256."""
    if n <= _N_GRID[0]:
        return max(int(n), 2)
    return max(g for g in _N_GRID if g <= n)


@cache
def _high(m10: int, n1: int, n2: int) -> float:
    from scipy import stats

    rng = np.random.default_rng([20261127, m10, n1, n2])  # seeded: the same threshold every time
    a = rng.normal(size=(_REPS, n1))
    b = rng.normal(size=(_REPS, n2)) + m10 / 10.0 * _IQR_NORMAL
    pu = stats.mannwhitneyu(a, b, axis=1, alternative="two-sided").pvalue
    pk = stats.ks_2samp(a, b, axis=1).pvalue
    p = np.minimum(1.0, 2.0 * np.minimum(pu, pk))
    return float(np.quantile(p, 1.0 - SAME_MISS))


def high_threshold(magnitude: float, n1: int, n2: int) -> float:
    """Pinpoint's "high threshold": the p-value above which two samples of ``n1`` and ``n2`` values are called the
    SAME, for a difference of interest of ``magnitude`` interquartile ranges. It is the 99th percentile
    (1 - SAME_MISS) of :func:`p_value` between normal samples that differ by that much (simulated, seeded), so a
    real difference of that size is called "same" at most 1% of the time; and at least SAME_FLOOR. Rounded
    conservatively: the magnitude down to a tenth (1.0 to 6.0 IQR), the sizes down to a grid.

    The floor: for a large magnitude the simulated threshold falls to 1e-4, which is right for independent
    samples, but a machine whose load changes within a round makes them dependent; the CPU rehearsal's one wrong
    culprit at seed 0 was a commit measured through a busy spell, "the same as bad" at p = 2e-4."""
    if not math.isfinite(magnitude):
        magnitude = 6.0
    m10 = int(min(max(math.floor(magnitude * 10 + 1e-9), 1), 60))
    return max(_high(m10, _n_cell(n1), _n_cell(n2)), SAME_FLOOR)


def spread_bound(x: np.ndarray) -> float:
    """The interquartile range of the residuals ``x`` at its ~99% upper confidence bound: the IQR times
    1 + 2.33 x 1.166 / sqrt(n) (1.166 / sqrt(n): the IQR's relative standard error for normal samples). The high
    threshold assumes the spread is known; estimated from 12 samples it is often too small, the magnitude too large,
    the threshold too low, and "same" too easy: 12% of true 2x changes were called "same" at 6 samples a side
    with 30% noise (2% with the bound), 5% at 12 samples and 45% noise (0.3% with it), 300 draws each."""
    return _iqr(x) * (1.0 + SPREAD_Z * 1.166 / math.sqrt(max(len(x), 1)))


def _iqr(x: np.ndarray) -> float:
    if len(x) < 2:
        return 0.0
    q75, q25 = np.percentile(x, [75, 25])
    return float(q75 - q25)


def _finite(x: float | None) -> float | None:
    return None if x is None or not math.isfinite(x) else float(x)


@dataclass
class CaseVerdict:
    """One case's endpoints: reproduced (bad slower by at least half the expected change), smaller (bad slower by
    less), faster, same (no change of the expected size) or unknown."""

    key: str
    verdict: str
    p: float
    ratio: float
    high: float
    samples: int


def endpoints_verdict(good: Mapping[str, Sequence[float]], bad: Mapping[str, Sequence[float]],
                      expect: Mapping[str, float], alpha: float = ALPHA) -> list[CaseVerdict]:
    """Per case: does ``bad`` differ from ``good``? p <= alpha / cases (Bonferroni over the group) with ``bad``
    slower by at least half the expected change (log scale, ``REPRO_SHARE``) is "reproduced", slower by less
    "smaller", faster is "faster"; p above the high threshold for the expected change (``expect``:
    the alert's ratio, or the floor) is "same"; else "unknown" (measure more)."""
    keys = [k for k in expect if k in good and k in bad]
    level = alpha / max(len(keys), 1)
    out = []
    for k in keys:
        g, b = np.log(np.asarray(good[k], float)), np.log(np.asarray(bad[k], float))
        n = min(len(g), len(b))
        if n < 2:
            out.append(CaseVerdict(k, "unknown", 1.0, 1.0, 1.0, n))
            continue
        p = p_value(g, b)
        ratio = math.exp(float(np.median(b) - np.median(g)))
        spread = spread_bound(np.concatenate([g - np.median(g), b - np.median(b)]))
        m = abs(math.log(max(expect[k], 1e-9))) / spread if spread > 0 else math.inf
        h = high_threshold(m, len(g), len(b))
        if p <= level:
            # a change far smaller than the one the alert is sure of is not the alert's: a loaded machine whose
            # contention drifts between the endpoints' rounds makes a 2-5% difference "significant" (the CPU
            # rehearsal without a plant, CI 2026-11-28: endpoints "reproduced", then no candidate could be placed)
            small = ratio > 1 and math.log(ratio) < REPRO_SHARE * abs(math.log(max(expect[k], 1e-9)))
            verdict = "faster" if ratio <= 1 else "smaller" if small else "reproduced"
        elif p > h:
            verdict = "same"
        else:
            verdict = "unknown"
        out.append(CaseVerdict(k, verdict, p, ratio, h, n))
    return out


@dataclass
class Verdict:
    """A candidate against both endpoints, over the group: ``good``, ``bad``, ``between`` or ``unknown``."""

    verdict: str
    p_good: float
    p_bad: float
    high: float
    position: float
    samples: int
    cases: list[dict[str, Any]] = field(default_factory=list)
    low: float = math.nan  # the position of the samples' lower quartile (quantile-matched): what settle() reads


def positions(x: Sequence[float], g: Sequence[float], b: Sequence[float]) -> np.ndarray:
    """Times ``x`` on the good -> bad scale of one case: 0 at the median of ``g``, 1 at the median of ``b`` (log)."""
    lg, lb = np.log(np.asarray(g, float)), np.log(np.asarray(b, float))
    a = float(np.median(lg))
    d = float(np.median(lb)) - a
    return (np.log(np.asarray(x, float)) - a) / d


def candidate_verdict(x: Mapping[str, Sequence[float]], good: Mapping[str, Sequence[float]],
                      bad: Mapping[str, Sequence[float]], keys: Sequence[str], alpha: float = ALPHA) -> Verdict:
    """One decision for a candidate over the cases ``keys`` (those the endpoints reproduced): its samples' positions
    on each case's good -> bad scale, pooled over the cases, tested against the endpoints' pooled positions.

    Pooling is a valid test of "the candidate is the same as good (or bad) in every case": under that hypothesis
    the candidate's and the endpoint's positions are draws from one mixture over the cases (the same number of
    samples per case on both sides), and the rank tests need nothing more; it has the power of every case at once.
    The magnitude of interest is the endpoints' distance (1 on this scale) over their pooled interquartile range."""
    zx, zg, zb, per = _case_positions(x, good, bad, keys)
    if not zx:
        return Verdict("unknown", 1.0, 1.0, 1.0, math.nan, 0, per)
    ax, ag, ab = np.concatenate(zx), np.concatenate(zg), np.concatenate(zb)
    p_good, p_bad = p_value(ax, ag), p_value(ax, ab)
    spread = spread_bound(np.concatenate([ag - np.median(ag), ab - np.median(ab)]))
    m = 1.0 / spread if spread > 0 else math.inf
    h_good, h_bad = high_threshold(m, len(ax), len(ag)), high_threshold(m, len(ax), len(ab))
    pos = float(np.median(ax))
    # contention only adds time: the lower quartiles, matched, place a candidate whatever share of it was contended
    qx, qg, qb = (float(np.quantile(a, LOW_Q)) for a in (ax, ag, ab))
    low = (qx - qg) / (qb - qg) if qb > qg else math.nan
    verdict, high = _pooled_verdict(p_good, p_bad, h_good, h_bad, pos, alpha)
    for c in (c for c in per if "p_vs_good" in c):
        c["verdict"] = ("bad" if c["p_vs_good"] <= alpha and c["p_vs_bad"] > alpha else
                        "good" if c["p_vs_bad"] <= alpha and c["p_vs_good"] > alpha else "unknown")
    return Verdict(verdict, p_good, p_bad, high, pos, min(len(z) for z in zx), per, low)


def _case_positions(x: Mapping[str, Sequence[float]], good: Mapping[str, Sequence[float]],
                    bad: Mapping[str, Sequence[float]], keys: Sequence[str]
                    ) -> tuple[list[np.ndarray], list[np.ndarray], list[np.ndarray], list[dict[str, Any]]]:
    """Per case with samples: the candidate's, good's and bad's positions on its good -> bad scale, and the case's
    evidence (a case whose endpoints' medians moved together has no scale: noted, left out)."""
    zx, zg, zb, per = [], [], [], []
    for k in keys:
        if not x.get(k):
            continue
        if np.median(np.log(np.asarray(bad[k], float))) <= np.median(np.log(np.asarray(good[k], float))):
            per.append({"case_key": k, "samples": len(x[k]), "verdict": "endpoints no longer apart"})
            continue  # more samples moved the endpoints' medians together: no scale to place this case on
        px, pg, pb = (positions(v, good[k], bad[k]) for v in (x[k], good[k], bad[k]))
        zx.append(px)
        zg.append(pg)
        zb.append(pb)
        lx = np.log(np.asarray(x[k], float))
        per.append({"case_key": k, "samples": len(px),
                    "ratio_vs_good": math.exp(float(np.median(lx) - np.median(np.log(np.asarray(good[k], float))))),
                    "p_vs_good": p_value(px, pg), "p_vs_bad": p_value(px, pb), "position": float(np.median(px))})
    return zx, zg, zb, per


def _pooled_verdict(p_good: float, p_bad: float, h_good: float, h_bad: float, pos: float, alpha: float
                    ) -> tuple[str, float]:
    """The pooled decision and its high threshold: same as bad, or beyond it (slower still); same as good, or
    beyond it (faster still: the machine was quieter); between; or unknown."""
    if p_good <= alpha and (p_bad > h_bad or pos > 1.0) and pos > 0.5:
        return "bad", h_bad
    if p_bad <= alpha and (p_good > h_good or pos < 0.0) and pos < 0.5:
        return "good", h_good
    if p_good <= alpha and p_bad <= alpha and 0.0 < pos < 1.0:
        return "between", max(h_good, h_bad)
    return "unknown", max(h_good, h_bad)


# ------------------------------------------------------------------------------------------------ git

class SetupError(ValueError):
    """The bisection cannot start (a commit that does not exist, a range that is not one): a usage error."""


def _git(repo: Path, *args: str) -> str:
    out = subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True, timeout=300)
    if out.returncode != 0:
        last = ((out.stderr or out.stdout).strip().splitlines() or ["failed"])[-1]
        raise SetupError(f"git {' '.join(args[:2])} in {repo}: {last[:200]}")
    return out.stdout


@dataclass(frozen=True)
class Commit:
    sha: str
    index: int  # 0: the good endpoint; the bad endpoint is the last
    subject: str = ""

    def doc(self) -> dict[str, Any]:
        return {"commit": self.sha, "index": self.index, "subject": self.subject}


def resolve(repo: Path, rev: str) -> str:
    """The full hash of ``rev`` in ``repo`` (SetupError when it is not a commit there)."""
    if not rev or rev.startswith("-") or any(ch.isspace() for ch in rev):
        raise SetupError(f"not a commit: {rev!r}")
    out = subprocess.run(["git", "-C", str(repo), "rev-parse", "--verify", "--quiet", f"{rev}^{{commit}}"],
                         capture_output=True, text=True, timeout=60)
    if out.returncode != 0:
        raise SetupError(f"{rev!r} is not a commit of {repo} (is the history fetched? the nightly checks out with "
                         "fetch-depth 0)")
    return out.stdout.strip()


def commit_range(repo: Path, good: str, bad: str) -> list[Commit]:
    """``good`` then the commits on the first-parent line after it up to ``bad``, oldest first."""
    g, b = resolve(repo, good), resolve(repo, bad)
    if g == b:
        raise SetupError(f"good and bad are the same commit {g[:12]}: nothing to bisect")
    if subprocess.run(["git", "-C", str(repo), "merge-base", "--is-ancestor", g, b], capture_output=True,
                      timeout=60).returncode != 0:
        raise SetupError(f"good {g[:12]} is not an ancestor of bad {b[:12]}: not a range to bisect")
    lines = _git(repo, "log", "--first-parent", "--reverse", "--format=%H%x00%s", f"{g}..{b}").splitlines()
    subj = _git(repo, "log", "-1", "--format=%s", g).strip()
    out = [Commit(g, 0, subj)]
    for i, line in enumerate(lines, 1):
        sha, _, s = line.partition("\0")
        out.append(Commit(sha, i, s))
    if out[-1].sha != b:
        raise SetupError(f"bad {b[:12]} is not on the first-parent line after good {g[:12]}")
    return out


# ------------------------------------------------------------------------------------------------ measuring

class Untestable(Exception):
    """A commit that cannot be measured (does not import, lacks a case, fails every sample): skipped. ``rows``: the
    measurement rows of the round that showed it (kept as evidence)."""

    def __init__(self, reason: str, rows: list[dict[str, Any]] | None = None):
        super().__init__(reason)
        self.rows = rows or []


class OutOfBudget(Exception):
    """The time budget is spent."""


class NotReproduced(Exception):
    """The endpoints' difference did not hold up: a candidate could not be placed between them, and over all their
    samples (measured again beside it) the endpoints no longer differ by the alert's size."""


@dataclass
class CaseSpec:
    key: str  # op/tag/dtype/provider
    cache: str = "warm"
    fingerprint: str | None = None
    series: dict[str, Any] = field(default_factory=dict)


@dataclass
class Round:
    """One measurement round of one commit: usable samples per case, every record as a measurement row."""

    samples: dict[str, list[float]]
    rows: list[dict[str, Any]]
    wall_s: float
    invocations: int
    series: dict[str, dict[str, Any]] = field(default_factory=dict)  # case key -> its series (from a record)


class Measurer:
    """What the bisection asks of a measurement back end (the real one: :class:`WorktreeMeasurer`)."""

    def measure(self, commit: Commit, n: int, round_no: int, timeout_s: float) -> Round:  # pragma: no cover
        raise NotImplementedError

    def close(self) -> None:
        pass


def _pythonpath(first: Path, drop: Iterable[Path]) -> str:
    """``first`` then the current PYTHONPATH without any entry that is one of ``drop`` (another checkout's
    robocache must never be the one a candidate imports)."""
    gone = {os.path.realpath(p) for p in drop}
    rest = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p and os.path.realpath(p) not in gone]
    return os.pathsep.join([str(first), *rest])


class WorktreeMeasurer(Measurer):
    """Each commit checked out in a git worktree under ``scratch`` and measured by its own CLI in a subprocess."""

    def __init__(self, repo: Path, scratch: Path, runs_dir: Path, cases: Sequence[CaseSpec], *, machine: str,
                 device: str = "auto", suite: str = "nightly", time_limit_s: float | None = None,
                 case_timeout_s: float | None = None, python: str | None = None,
                 log: Callable[[str], None] | None = None, statistic: str = "p50"):
        self.repo, self.scratch, self.runs_dir = Path(repo), Path(scratch), Path(runs_dir)
        self.cases = list(cases)
        # what each case's samples are: its time, or (a call-cost series alerted on its interleaved ratio) the ratio
        self.measures = {c.key: str(c.series.get("measure") or "") for c in self.cases}
        self.machine, self.device, self.suite = machine, device, suite
        self.time_limit_s, self.case_timeout_s = time_limit_s, case_timeout_s
        self.python = python or sys.executable
        self.statistic = statistic
        self.log = log or (lambda s: None)
        self.trees: dict[str, Path] = {}
        self.broken: dict[str, str] = {}
        self._own = Path(__file__).resolve().parents[2]

    def _env(self, tree: Path, sha: str) -> dict[str, str]:
        return {**os.environ, "PYTHONPATH": _pythonpath(tree, [self._own, self.repo]), "ROBOCACHE_GIT_COMMIT": sha,
                "ROBOCACHE_MACHINE": self.machine, "PYTHONDONTWRITEBYTECODE": "1"}

    def tree(self, commit: Commit) -> Path:
        """The commit's worktree (added once), after checking that its CLI imports; Untestable otherwise."""
        if commit.sha in self.broken:
            raise Untestable(self.broken[commit.sha])
        if commit.sha in self.trees:
            return self.trees[commit.sha]
        path = self.scratch / "trees" / commit.sha[:12]
        path.parent.mkdir(parents=True, exist_ok=True)
        _git(self.repo, "worktree", "add", "--detach", "--quiet", str(path), commit.sha)
        self.trees[commit.sha] = path
        probe = subprocess.run([self.python, "-c", "import robocache.bench.cli"], cwd=path, capture_output=True,
                               text=True, env=self._env(path, commit.sha), timeout=600)
        if probe.returncode != 0:
            last = (probe.stderr.strip().splitlines() or ["exit " + str(probe.returncode)])[-1]
            self.broken[commit.sha] = f"does not import robocache.bench.cli: {last[:200]}"
            raise Untestable(self.broken[commit.sha])
        return path

    def measure(self, commit: Commit, n: int, round_no: int, timeout_s: float) -> Round:
        t0 = time.monotonic()
        path = self.tree(commit)
        samples: dict[str, list[float]] = {c.key: [] for c in self.cases}
        rows: list[dict[str, Any]] = []
        series: dict[str, dict[str, Any]] = {}
        invocations = 0
        by_cache: dict[str, list[str]] = {}
        for c in self.cases:
            by_cache.setdefault(c.cache, []).append(c.key)
        for cache_mode, keys in sorted(by_cache.items()):
            left = timeout_s - (time.monotonic() - t0)
            if left <= 0:
                raise OutOfBudget(f"the budget ran out while measuring {commit.sha[:12]}")
            out = self.scratch / "out" / f"{commit.sha[:12]}-r{round_no}-{cache_mode}"
            cmd = [self.python, "-m", "robocache.bench.cli", "run", "--suite", self.suite, "--device", self.device,
                   "--cases", ",".join(keys * n), "--out", str(out), "--machine", self.machine, "--cache", cache_mode,
                   "--no-progress"]
            if self.time_limit_s is not None:
                cmd += ["--time-limit", repr(self.time_limit_s)]
            if self.case_timeout_s is not None:
                cmd += ["--timeout", repr(self.case_timeout_s)]
            self.log(f"  {commit.sha[:12]} round {round_no}: {n} x {len(keys)} case(s), cache {cache_mode}")
            rc, err = _run_group(cmd, path, self._env(path, commit.sha), left)
            invocations += 1
            if rc is None:
                raise OutOfBudget(f"the budget ran out while measuring {commit.sha[:12]} (its run was stopped)")
            if rc not in (0, 1):  # 2: a usage error (an unknown case at this commit), else a crash of the harness
                why = (err.strip().splitlines() or [f"exit {rc}"])[-1][:200]
                raise Untestable(f"robocache-bench run exit {rc}: {why}")
            for rec, rel in self._collect(out, commit, round_no, cache_mode):
                key = f"{rec.case.id}/{rec.case.dtype}/{rec.case.provider}"
                row = _row(rec, commit, round_no, cache_mode, key, rel, self.statistic, self.measures.get(key))
                rows.append(row)
                if key in samples and row["used"]:
                    samples[key].append(row["value"])
                    if key not in series:
                        series[key] = schema.series_key(rec)._asdict()
        empty = [k for k, v in samples.items() if not v]
        if empty:
            why = sorted({f"{r['case_key']}: {r['status']}" + (f" ({r['reason'][:120]})" if r.get("reason") else "")
                          for r in rows if r["case_key"] in empty}) or [f"{k}: no record" for k in empty]
            raise Untestable("no usable sample of " + "; ".join(why[:3]), rows)
        return Round(samples, rows, time.monotonic() - t0, invocations, series)

    def _collect(self, out: Path, commit: Commit, round_no: int, cache: str) -> list[tuple[Any, str]]:
        """The run's records, its files moved to ``runs_dir`` as ``*.bisect-run.json`` (kept, never history)."""
        got: list[tuple[Any, str]] = []
        loaded = store.load(out) if out.exists() else store.LoadResult()
        by_file: dict[str, list[Any]] = {}
        for rec in loaded.records:
            by_file.setdefault(str(rec.source), []).append(rec)
        for src, recs in sorted(by_file.items()):
            self.runs_dir.mkdir(parents=True, exist_ok=True)
            name = Path(src).name[: -len(store.RECORDS_SUFFIX)]
            dest = self.runs_dir / f"{commit.sha[:12]}-r{round_no}-{cache}-{store.safe_component(name)}{RUN_SUFFIX}"
            shutil.move(src, dest)
            rel = f"{self.runs_dir.name}/{dest.name}"
            got += [(r, rel) for r in recs]
        return got

    def close(self) -> None:
        for path in self.trees.values():
            subprocess.run(["git", "-C", str(self.repo), "worktree", "remove", "--force", str(path)],
                           capture_output=True, timeout=300)
        subprocess.run(["git", "-C", str(self.repo), "worktree", "prune"], capture_output=True, timeout=300)
        self.trees.clear()


def _run_group(cmd: list[str], cwd: Path, env: dict[str, str], timeout_s: float) -> tuple[int | None, str]:
    """Run ``cmd`` in its own process group; on timeout kill the group (the runner and its forkserver) and return
    (None, stderr). stdout is not kept (the records are the result)."""
    proc = subprocess.Popen(cmd, cwd=cwd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)
    try:
        _, err = proc.communicate(timeout=max(timeout_s, 1.0))
        return proc.returncode, err or ""
    except subprocess.TimeoutExpired:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        _, err = proc.communicate()
        return None, err or ""


def _row(rec: schema.Record, commit: Commit, round_no: int, cache: str, key: str, rel: str,
         statistic: str = "p50", measure: str | None = None) -> dict[str, Any]:
    """One record as a measurement row; its ``value`` is the sample: the time named by ``statistic``, or, for a
    series whose alert is on its interleaved call ratio (``measure`` CALL_RATIO, as ``check`` judged it), the
    record's ratio p50 (public call / bare launch; the ratio is already a median over its interleaved rounds,
    so ``statistic`` does not apply). A record without the ratio (a commit from before it was measured) is no
    sample: judging it by its host time would compare another quantity."""
    from .regressions.noise import CALL_RATIO
    from .regressions.records import call_ratio

    m = rec.metrics
    p50 = _finite(float(m.time_us.p50)) if m is not None else None
    ratio = measure == CALL_RATIO
    cr = call_ratio(rec) if ratio else None
    value = (_finite(cr[0]) if cr else None) if ratio else (
        _finite(float(getattr(m.time_us, statistic))) if m is not None else None)
    h = rec.health
    used = rec.status == "ok" and value is not None and value > 0 and not h.throttled
    why = rec.reason
    if rec.status == "ok" and not used:
        why = "throttled" if h.throttled else "no interleaved call ratio" if ratio and value is None else "no time"
    return {"commit": commit.sha, "index": commit.index, "round": round_no, "case_key": key, "cache": cache,
            "status": rec.status, "used": bool(used), "p50_us": p50, "value": value,
            "noise": _finite(rec.method.noise if rec.method is not None else None), "contended": bool(h.contended),
            "reason": (str(why)[:300] if why else None), "run_id": rec.run_id, "created": rec.created,
            "file": rel}


# ------------------------------------------------------------------------------------------------ the bisection

@dataclass
class Settings:
    samples: int = SAMPLES
    max_samples: int = MAX_SAMPLES
    endpoint_rounds: int = ENDPOINT_ROUNDS
    budget_s: float = BUDGET_S
    alpha: float = ALPHA
    device: str = "auto"
    suite: str = "nightly"
    time_limit_s: float | None = None
    statistic: str = "p50"

    @property
    def endpoint_max(self) -> int:
        return self.samples * 2 ** self.endpoint_rounds


@dataclass
class State:
    """Everything a bisection has learnt so far; :func:`document` turns it into the ``robocache-bisect/1`` JSON."""

    id: str
    machine: str
    commits: list[Commit]
    cases: list[CaseSpec]
    settings: Settings
    expect: dict[str, float]
    created: str
    alert: dict[str, Any] | None = None
    note: str = ""
    status: str = "running"
    reason: str = "started"
    pools: dict[int, dict[str, list[float]]] = field(default_factory=dict)
    rounds: dict[int, int] = field(default_factory=dict)
    seconds: dict[int, float] = field(default_factory=dict)  # measuring each commit
    decide_s: dict[int, float] = field(default_factory=dict)  # each decision with its endpoint runs (-1: endpoints)
    rows: list[dict[str, Any]] = field(default_factory=list)
    untestable: dict[int, str] = field(default_factory=dict)
    evidence: dict[int, dict[str, Any]] = field(default_factory=dict)
    order: list[int] = field(default_factory=list)  # tested commits, in the order decided
    reproduced: list[str] = field(default_factory=list)
    excluded: list[tuple[str, str]] = field(default_factory=list)
    lo: int = 0
    hi: int = 0
    culprit: int | None = None
    suspects: list[int] = field(default_factory=list)
    measure_s: float = 0.0
    invocations: int = 0
    t0: float = field(default_factory=time.monotonic)
    wall_s: float = 0.0
    link_base: str | None = None

    def count(self, i: int, keys: Sequence[str] | None = None) -> int:
        pool = self.pools.get(i) or {}
        ks = list(keys) if keys is not None else [c.key for c in self.cases]
        return min((len(pool.get(k, [])) for k in ks), default=0)


def bisection_id(machine: str, good: str, bad: str, cases: Sequence[CaseSpec]) -> str:
    text = "|".join([machine, good, bad, *sorted(f"{c.key}@{c.cache}" for c in cases)])
    return hashlib.sha256(text.encode()).hexdigest()[:12]


def issue_key(machine: Any, before: Any, after: Any) -> str:
    """The issue key ``scripts/alerts_to_issues.py`` gives a change (its ``change_key``): machine and commit range."""
    return hashlib.sha256(f"{machine}|{before}|{after}".encode()).hexdigest()[:12]


def bisect(state: State, measurer: Measurer, on_update: Callable[[State], None] | None = None,
           clock: Callable[[], float] = time.monotonic, log: Callable[[str], None] | None = None) -> State:
    """Run the bisection of ``state.commits`` (good first, bad last) with ``measurer``; ``on_update`` after every
    round (the document is rewritten). Sets ``state.status``, ``reason``, ``culprit``, ``suspects``.

    Every decision compares samples measured in one stretch of time: the endpoints' rounds alternate (good, bad;
    then bad, good), and each round of a candidate measures good, the candidate and bad back to back (the order
    reversed every other round), and the candidate is judged against THOSE endpoint samples only. On a shared
    machine the load moves over minutes: a candidate measured in a quiet minute looked like the good endpoint
    measured in a busy one (the CPU rehearsal's first failure: the planted commit called good at p = 4e-5 against
    endpoint samples taken three minutes before)."""
    say = log or (lambda s: None)
    update = on_update or (lambda s: None)
    st, cfg = state, state.settings
    st.t0 = clock()
    k = len(st.commits) - 1
    st.lo, st.hi = 0, k

    def measure(i: int, n: int, block: int | None = None) -> dict[str, list[float]]:
        left = cfg.budget_s - (clock() - st.t0)
        if left <= 0:
            raise OutOfBudget(f"the {cfg.budget_s:g} s budget is spent")
        st.rounds[i] = st.rounds.get(i, 0) + 1
        t = clock()
        try:
            r = measurer.measure(st.commits[i], n, st.rounds[i], left)
        except Untestable as e:
            st.rows += [{**row, "block": block} for row in e.rows]
            raise
        finally:
            st.seconds[i] = st.seconds.get(i, 0.0) + (clock() - t)
            phase = -1 if block is None else block
            st.decide_s[phase] = st.decide_s.get(phase, 0.0) + (clock() - t)
            st.wall_s = clock() - st.t0
        st.measure_s += r.wall_s
        st.invocations += r.invocations
        st.rows += [{**row, "block": block} for row in r.rows]
        pool = st.pools.setdefault(i, {})
        for key, vals in r.samples.items():
            pool.setdefault(key, []).extend(vals)
        for c in st.cases:
            # a case given by hand (--series) learns its series as the bad endpoint measures it; its measure (--measure)
            # stays: the History link opens on the quantity bisected
            if "case_id" not in c.series and c.key in r.series and i == k:
                c.series = {**r.series[c.key], **c.series}
                c.fingerprint = c.fingerprint or schema.fingerprint(c.series)
        update(st)
        return r.samples

    def finish(status: str, reason: str) -> State:
        st.status, st.reason = status, reason
        st.wall_s = clock() - st.t0
        update(st)
        return st

    try:
        ended = _endpoints(st, measure, update)  # 1. does the change reproduce between the endpoints?
        if ended is not None:
            return finish(*ended)
        say(f"  reproduced: {', '.join(st.reproduced)}" + (f"; left out: {', '.join(x for x, _ in st.excluded)}"
                                                          if st.excluded else ""))
        return finish(*_narrow(st, measure, update, say))  # 2. narrow the range
    except NotReproduced as e:  # the range narrowed so far rested on the false first decision: not kept
        st.lo, st.hi, st.suspects = 0, len(st.commits) - 1, []
        return finish("not_reproducible", str(e))
    except OutOfBudget as e:
        st.suspects = list(range(st.lo + 1, st.hi + 1))
        return finish("budget", f"{e}: the change is in one of {len(st.suspects)} commits after "
                                f"{st.commits[st.lo].sha[:12]} up to {st.commits[st.hi].sha[:12]}")


def _endpoints(st: State, measure: Callable[..., Any], update: Callable[[State], None]) -> tuple[str, str] | None:
    """The endpoints' rounds (alternating: good, bad; bad, good; ...) until every case is decided: sets
    ``reproduced`` and ``excluded``; ``(status, reason)`` when the bisection ends here, else None."""
    cfg, k = st.settings, len(st.commits) - 1
    verdicts: list[CaseVerdict] = []
    n = cfg.samples
    for r in range(cfg.endpoint_rounds + 1):
        for i in ((0, k) if r % 2 == 0 else (k, 0)):
            try:
                measure(i, n)
            except Untestable as e:
                st.untestable[i] = str(e)
                return "not_reproducible", (f"the {'good' if i == 0 else 'bad'} endpoint "
                                            f"{st.commits[i].sha[:12]} cannot be measured: {e}")
        verdicts = endpoints_verdict(st.pools[0], st.pools[k], st.expect, cfg.alpha)
        st.evidence[k] = _endpoint_evidence(st, verdicts)
        update(st)
        # a case left out (or "not reproducible", which ends the bisection) never on one run of each endpoint:
        # one noisy invocation, and a spread estimated from a few samples, must not decide that nothing moved
        undecided = [v for v in verdicts if v.verdict == "unknown"]
        settled = not undecided and (all(v.verdict == "reproduced" for v in verdicts) or r >= 1)
        have = st.count(0)
        if settled or have >= cfg.endpoint_max:
            break
        n = min(have, cfg.endpoint_max - have)
    st.reproduced = [v.key for v in verdicts if v.verdict == "reproduced"]
    st.excluded = [(v.key, _excluded_reason(v)) for v in verdicts if v.verdict != "reproduced"]
    st.order.append(k)
    if not st.reproduced:
        return "not_reproducible", "the endpoints do not differ by the change looked for: " + "; ".join(
            f"{v.key} x{v.ratio:.3f} ({v.verdict}, p = {v.p:.2g})" for v in verdicts)
    return None


def _narrow(st: State, measure: Callable[..., Any], update: Callable[[State], None], say: Callable[[str], None]
            ) -> tuple[str, str]:
    """Candidates between the last good and the first bad, each decided against its own endpoint samples, until
    one commit is left or a candidate ends it: ``(status, reason)``."""
    while st.hi - st.lo > 1:
        mid = _pick(st.lo, st.hi, set(st.untestable))
        if mid is None:
            st.suspects = [i for i in range(st.lo + 1, st.hi + 1)]
            return "untestable", (f"only untestable commits are left between the last good "
                                  f"{st.commits[st.lo].sha[:12]} and the first bad {st.commits[st.hi].sha[:12]}: the "
                                  f"change is in one of {len(st.suspects)} commits")
        try:
            v = _decide(st, mid, measure)
        except Untestable as e:
            st.untestable[mid] = str(e)
            st.evidence[mid] = {"commit": st.commits[mid].sha, "index": mid, "role": "candidate",
                                "verdict": "untestable", "samples": 0, "rounds": st.rounds.get(mid, 0),
                                "seconds": st.decide_s.get(mid, 0.0), "reason": str(e)}
            st.order.append(mid)
            say(f"  {st.commits[mid].sha[:12]}: untestable ({e})")
            update(st)
            continue
        st.order.append(mid)
        say(f"  {st.commits[mid].sha[:12]}: {v.verdict} (p vs good {v.p_good:.2g}, vs bad {v.p_bad:.2g}, "
            f"position {v.position:.2f}, {v.samples} samples per case)")
        if v.verdict == "bad":
            st.hi = mid
        elif v.verdict == "good":
            st.lo = mid
        else:
            st.suspects = list(range(st.lo + 1, st.hi + 1))
            if v.verdict == "between":
                return "spread", (f"{st.commits[mid].sha[:12]} differs from both endpoints and lies between them "
                                  f"(position {v.position:.2f} on the good -> bad scale, its lower quartile "
                                  f"{v.low:.2f}): the change is spread over several commits of the range")
            return "undecided", (f"{st.commits[mid].sha[:12]} stayed unknown after {v.samples} samples per case "
                                 f"(p vs good {v.p_good:.2g}, vs bad {v.p_bad:.2g})")
    st.culprit = st.hi
    skipped = [i for i in st.untestable if st.lo < i < st.hi]
    return "found", (f"{st.commits[st.hi].sha[:12]} is the first commit the same as the bad endpoint; the "
                     f"commit before it, {st.commits[st.lo].sha[:12]}, is the same as the good one"
                     + (f" ({len(skipped)} untestable between)" if skipped else ""))


def _recheck_endpoints(st: State, mid: int, rounds: int) -> None:
    """Candidate ``mid`` could not be placed after ``rounds`` rounds (the endpoints measured again beside it each
    time): judge the endpoints again over all their samples. Raises :class:`NotReproduced` when no case reproduces
    there any more: the first decision was a false one, as a load spell over one endpoint's first runs can make
    it, and every candidate would then stay unknown (CI, 2026-11-28: "undecided" after 160 samples of a commit
    whose endpoints were the same); returns when one still does (``mid`` is measured on).

    It ends only on evidence that the change is gone, for every case the decisions rest on: the endpoints now the
    same, or bad slower by less than half the change looked for, by the medians AND by the lower quartiles
    (contention only adds time: a load spell over the good endpoint's samples pulls its median toward bad, not its
    lower quartile). "Unknown" (p between the two thresholds) is no such evidence: measure on. Nor is "faster": a
    bad endpoint first slower, then faster over all samples, is load contradicting itself, not a change gone. A
    real x1.3 change (expect 1.2, 15% noise, x1.8 load spells; scripts/simulate_bisect_load.py, seeds 1000-1099)
    ended "not reproducible" in 10 of 100 simulated bisections with "faster" ending it, 5 with these rules (4
    before the re-judgement); with no change, "not reproducible" in 89 of 100 (85 before it)."""
    k = len(st.commits) - 1
    again = endpoints_verdict(st.pools[0], st.pools[k], st.expect, st.settings.alpha)
    if any(v.verdict == "reproduced" for v in again):
        return
    for v in again:
        if v.key not in st.reproduced:
            continue
        if v.verdict not in ("same", "smaller"):
            return
        lq = float(np.quantile(np.log(np.asarray(st.pools[k][v.key], float)), LOW_Q)
                   - np.quantile(np.log(np.asarray(st.pools[0][v.key], float)), LOW_Q))
        if lq >= REPRO_SHARE * abs(math.log(max(st.expect[v.key], 1e-9))):
            return
    st.evidence[k] = _endpoint_evidence(st, again)
    st.excluded = [(v.key, _excluded_reason(v)) for v in again]
    st.reproduced = []
    why = "the endpoints, judged again over all their samples, no longer differ"
    st.evidence[mid] = {**st.evidence.get(mid, {"commit": st.commits[mid].sha, "index": mid, "role": "candidate",
                                                "samples": 0, "rounds": rounds,
                                                "seconds": st.decide_s.get(mid, 0.0)}),
                        "verdict": "unknown", "reason": why}  # what it measured is kept: the rows show it
    st.order.append(mid)
    raise NotReproduced(
        f"the endpoints' difference did not hold up: {st.commits[mid].sha[:12]} could not be placed between them, "
        f"and over all their samples (measured again beside it) they no longer differ: " + "; ".join(
            f"{v.key} x{v.ratio:.3f} ({v.verdict}, p = {v.p:.2g})" for v in again))


def _excluded_reason(v: CaseVerdict) -> str:
    what = {"faster": "faster at the bad endpoint", "same": "no change of the alert's size between the endpoints",
            "smaller": "slower at the bad endpoint by less than half the alert's change",
            "unknown": "not shown different between the endpoints"}.get(v.verdict, v.verdict)
    return f"{what} (x{v.ratio:.3f}, p = {v.p:.2g}, {v.samples} samples)"


def _endpoint_evidence(st: State, verdicts: list[CaseVerdict]) -> dict[str, Any]:
    k = len(st.commits) - 1
    ok = any(v.verdict == "reproduced" for v in verdicts)
    return {"commit": st.commits[k].sha, "index": k, "role": "endpoints",
            "verdict": "reproduced" if ok else "not_reproduced", "samples": st.count(0), "rounds": st.rounds.get(k, 0),
            "seconds": st.decide_s.get(-1, 0.0),
            "p_vs_good": min((v.p for v in verdicts), default=1.0),
            "reason": "good against bad, per case; Bonferroni over the cases",
            "cases": [{"case_key": v.key, "samples": v.samples, "ratio_vs_good": v.ratio, "p_vs_good": v.p,
                       "verdict": v.verdict} for v in verdicts]}


def _pick(lo: int, hi: int, skipped: set[int]) -> int | None:
    """The testable commit strictly between ``lo`` and ``hi`` nearest their middle (the lower one on a tie)."""
    mid = (lo + hi) / 2
    cands = [i for i in range(lo + 1, hi) if i not in skipped]
    return min(cands, key=lambda i: (abs(i - mid), i)) if cands else None


def settle(v: Verdict, alpha: float = ALPHA) -> Verdict:
    """The verdict of a candidate at the most samples, when the tests alone did not say "good" or "bad": by where
    its lower quartile lies (``Verdict.low``: the candidate's lower quartile on the scale of the endpoints' lower
    quartiles), with a margin. Different from good and in the last quarter of the way to bad (>= 0.75) is bad;
    different from bad and in the first quarter is good; between the two quarters and different from both is
    "between" (the change is spread); anything else stays unknown.

    Why: a machine whose load comes and goes changes the shape of a commit's samples (a heavier tail), not only
    their level, and Kolmogorov-Smirnov sees shape; a commit at position 0.09 with a few contended samples was
    "different from both" (the CPU rehearsal's seeds 5 and 7, "spread" after two rounds). Why the lower
    quartile: contention only ever adds time, and it comes in spells, so over four rounds one commit can draw
    twice the endpoints' share of it: a good commit with half its records contended (the good endpoint beside it a
    fifth) had its median at 0.30 of the way to bad (seed 13, "spread"); its lower quartile was at the good one's."""
    loc = v.low if math.isfinite(v.low) else v.position
    if v.verdict in ("good", "bad") or not math.isfinite(loc):
        return v

    def as_(verdict: str) -> Verdict:
        return Verdict(verdict, v.p_good, v.p_bad, v.high, v.position, v.samples, v.cases, v.low)

    if v.p_good <= alpha and loc >= 1.0 - SETTLE_MARGIN:
        return as_("bad")
    if v.p_bad <= alpha and loc <= SETTLE_MARGIN:
        return as_("good")
    if v.p_good <= alpha and v.p_bad <= alpha:
        return as_("between")
    return as_("unknown")


def _decide(st: State, mid: int, measure: Callable[..., dict[str, list[float]]]) -> Verdict:
    """Measure ``mid`` in rounds of good, ``mid``, bad back to back (reversed every other round) until it is good or
    bad, its samples doubling up to ``max_samples`` (then :func:`settle`); judged against the endpoint samples of
    its own rounds only. Its evidence entry is kept current."""
    cfg = st.settings
    k = len(st.commits) - 1
    x: dict[str, list[float]] = {}
    g: dict[str, list[float]] = {}
    b: dict[str, list[float]] = {}
    n, r = cfg.samples, 0
    while True:
        for i in ((0, mid, k) if r % 2 == 0 else (k, mid, 0)):
            try:
                got = measure(i, n, mid)
            except Untestable:
                if i == mid:
                    raise
                continue  # an endpoint that fails now keeps the samples it had (this commit is not to blame)
            for key, vals in got.items():
                {0: g, mid: x, k: b}[i].setdefault(key, []).extend(vals)
        r += 1
        v = candidate_verdict(x, g, b, st.reproduced, cfg.alpha)
        have = min((len(x.get(key, [])) for key in st.reproduced), default=0)
        placed = v.verdict in ("good", "bad")
        if have >= cfg.max_samples:
            v = settle(v, cfg.alpha)
        st.evidence[mid] = {"commit": st.commits[mid].sha, "index": mid, "role": "candidate", "verdict": v.verdict,
                            "samples": v.samples, "rounds": r, "seconds": st.decide_s.get(mid, 0.0),
                            "p_vs_good": v.p_good, "p_vs_bad": v.p_bad, "high_threshold": v.high,
                            "position": _finite(v.position), "position_low": _finite(v.low), "cases": v.cases}
        if not placed:  # can it not be placed because the endpoints are not apart after all?
            _recheck_endpoints(st, mid, r)
        # "between" is never decided before the most samples: a commit measured through busier spells than the
        # endpoints beside it differs from both for a while, until more rounds spread the contention alike
        if v.verdict in ("good", "bad") or have >= cfg.max_samples:
            return v
        n = min(have, cfg.max_samples - have)


# ------------------------------------------------------------------------------------------------ the document

def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


def document(st: State) -> dict[str, Any]:
    """The ``robocache-bisect/1`` document of ``st`` (validated by :func:`robocache.bench.schema.validate_bisect`)."""
    from . import links

    c = st.commits

    def com(i: int | None) -> dict[str, Any] | None:
        return None if i is None else c[i].doc()

    culprit = com(st.culprit)
    link = None
    first = next((x for x in st.cases if x.series), None)
    if first is not None:
        link = links.history_url(first.series, st.link_base,
                                 culprit=c[st.culprit].sha if st.culprit is not None else None)
    ev = [_clean(st.evidence[i]) for i in dict.fromkeys(st.order + sorted(st.evidence)) if i in st.evidence]
    doc = {
        "schema": BISECT_SCHEMA, "id": st.id, "status": st.status, "reason": st.reason, "created": st.created,
        "updated": _now(), "machine": st.machine, "good": c[0].doc(), "bad": c[-1].doc(),
        "commits": [x.doc() for x in c],
        "cases": [{"key": x.key, "cache": x.cache, "fingerprint": x.fingerprint, "series": x.series} for x in st.cases],
        "settings": {"samples": st.settings.samples, "max_samples": st.settings.max_samples,
                     "endpoint_max": st.settings.endpoint_max, "alpha": st.settings.alpha, "same_miss": SAME_MISS,
                     "budget_s": st.settings.budget_s, "device": st.settings.device, "suite": st.settings.suite,
                     "time_limit_s": st.settings.time_limit_s, "statistic": st.settings.statistic,
                     "same_floor": SAME_FLOOR},
        "time": {"wall_s": round(st.wall_s, 3), "measure_s": round(st.measure_s, 3), "invocations": st.invocations},
        "culprit": culprit, "last_good": com(st.lo), "first_bad": com(st.hi),
        "suspects": [c[i].doc() for i in st.suspects],
        "untestable": [{"commit": c[i].sha, "index": i, "reason": r} for i, r in sorted(st.untestable.items())],
        "reproduced": list(st.reproduced), "excluded": [{"case_key": k, "reason": r} for k, r in st.excluded],
        "evidence": ev, "measurements": [_clean(r) for r in st.rows], "alert": st.alert, "link": link,
        "note": st.note, "markdown": "",
    }
    doc["markdown"] = markdown(doc)
    return doc


def _clean(d: dict[str, Any]) -> dict[str, Any]:
    """Non-finite floats (a NaN position) as None, nested lists of dicts too: the document is strict JSON."""
    out = {}
    for k, v in d.items():
        if isinstance(v, float):
            out[k] = _finite(v)
        elif isinstance(v, list):
            out[k] = [_clean(x) if isinstance(x, dict) else x for x in v]
        else:
            out[k] = v
    return out


STATUS_TEXT = {"running": "running", "found": "culprit found", "not_reproducible": "not reproducible",
               "spread": "spread over several commits", "undecided": "undecided", "budget": "budget ran out",
               "untestable": "only untestable commits left", "failed": "failed"}


def markdown(doc: Mapping[str, Any]) -> str:
    """The bisection as markdown (issues, stdout): every string that came from git or a record escaped."""
    from .regressions.alerts import code_span, md_text

    def sha(x: Mapping[str, Any] | None) -> str:
        return f"`{code_span(str(x['commit'])[:12])}`" if x else "?"

    def subj(x: Mapping[str, Any] | None) -> str:
        return f" ({md_text(str(x.get('subject') or '')[:100])})" if x and x.get("subject") else ""

    n = len(doc["commits"]) - 1
    t = doc["time"]
    head = {"found": f"culprit {sha(doc.get('culprit'))}{subj(doc.get('culprit'))}"}.get(
        doc["status"], STATUS_TEXT.get(doc["status"], doc["status"]))
    lines = [f"### Bisection: {head}", "",
             f"- status: **{md_text(STATUS_TEXT.get(doc['status'], doc['status']))}**: {md_text(doc['reason'])}",
             f"- range: {n} commit(s) after {sha(doc['good'])} up to {sha(doc['bad'])} on `{code_span(doc['machine'])}` "
             "(first-parent); cases: " + ", ".join(f"`{code_span(c['key'])}` ({md_text(c['cache'])}; "
                                                   f"{md_text(_sampled(c, doc['settings']['statistic']))})"
                                                   for c in doc["cases"])]
    if doc.get("excluded"):
        lines.append("- left out (not moved between the endpoints): " + "; ".join(
            f"`{code_span(x['case_key'])}`: {md_text(x['reason'])}" for x in doc["excluded"]))
    if doc["status"] != "found" and doc.get("suspects"):
        lines.append(f"- the change is in one of {len(doc['suspects'])} commit(s): "
                     + ", ".join(sha(x) for x in doc["suspects"][:12]) + (" ..." if len(doc["suspects"]) > 12 else ""))
    if doc.get("untestable"):
        lines.append("- untestable (skipped): " + "; ".join(f"{sha(x)}: {md_text(x['reason'][:160])}"
                                                           for x in doc["untestable"]))
    lines.append(f"- time: {t['wall_s']:.0f} s of the {doc['settings']['budget_s']:.0f} s budget, "
                 f"{t['invocations']} run(s) of the harness")
    ev = doc.get("evidence") or []
    if ev:
        lines += ["", "| commit | role | verdict | samples per case | p vs good | p vs bad | position (0 good, 1 bad) "
                      "| sample vs good |", "| --- | --- | --- | ---: | ---: | ---: | ---: | --- |"]
        for e in ev:
            ratios = ", ".join(f"x{c['ratio_vs_good']:.3f}" for c in e.get("cases") or []
                               if c.get("ratio_vs_good") is not None)
            lines.append("| " + " | ".join([
                sha(e), md_text(e["role"]), md_text(e["verdict"]), str(e["samples"]), _p(e.get("p_vs_good")),
                _p(e.get("p_vs_bad")), "" if e.get("position") is None else f"{e['position']:.2f}", ratios]) + " |")
    if doc.get("link"):
        lines += ["", f"- dashboard: [History with the culprit marked]({doc['link']})"]
    return "\n".join(lines) + "\n"


STATISTIC_TEXT = {"p50": "the median time, us", "p20": "the 20th percentile time, us", "min": "the fastest call, us"}


def _sampled(case: Mapping[str, Any], statistic: str) -> str:
    """What one case's samples are, for the markdown: a call-ratio case's ratio (:func:`_row`), else the time
    ``statistic`` names."""
    from .regressions.noise import CALL_RATIO

    if (case.get("series") or {}).get("measure") == CALL_RATIO:
        return "the interleaved call ratio p50, public call / bare launch"
    return STATISTIC_TEXT.get(statistic, statistic)


def _p(x: float | None) -> str:
    return "" if x is None else f"{x:.2g}"


def write_doc(st: State, out_dir: Path) -> Path:
    """Validate and atomically (re)write the document of ``st`` as ``<out_dir>/<machine>-<id>.bisect.json``."""
    doc = document(st)
    checked = schema.validate_bisect(doc)
    path = out_dir / f"{store.safe_component(st.machine, 60)}-{st.id}{DOC_SUFFIX}"
    out_dir.mkdir(parents=True, exist_ok=True)
    store.atomic_write(path, json.dumps(schema.to_dict(checked), indent=1, allow_nan=False, ensure_ascii=False))
    return path


def load_docs(*dirs: str | os.PathLike[str]) -> tuple[list[schema.BisectDoc], list[tuple[str, str]]]:
    """Every ``*.bisect.json`` under ``dirs`` (recursively), validated; bad files as (path, reason), never raised."""
    docs, bad = [], []
    for d in dirs:
        root = Path(d)
        files = [root] if root.is_file() else sorted(root.rglob(f"*{DOC_SUFFIX}")) if root.is_dir() else []
        for f in files:
            if f.name.startswith(store.TMP_PREFIX) or f.is_symlink():
                continue
            try:
                docs.append(schema.parse_bisect_bytes(f.read_bytes()))
            except (OSError, schema.SchemaError) as e:
                bad.append((str(f), str(e)[:300]))
    return docs, bad


# ------------------------------------------------------------------------------------------------ alerts

@dataclass
class Group:
    """Alerts of one machine and commit range (one issue): bisected once, their cases together."""

    key: str
    machine: str
    before: str
    after: str
    alerts: list[schema.StepAlert]

    @property
    def cases(self) -> list[CaseSpec]:
        out: dict[tuple[str, str], CaseSpec] = {}
        for a in self.alerts:
            cache = str(a.series.get("cache") or "warm")
            cache = cache if cache in ("warm", "cold") else "warm"
            out.setdefault((str(a.case_key), cache), CaseSpec(str(a.case_key), cache, a.fingerprint, dict(a.series)))
        return list(out.values())

    @property
    def ratio(self) -> float:
        return max(float(a.ratio or 1.0) for a in self.alerts)


def read_alerts(path: str | os.PathLike[str]) -> schema.AlertsDoc:
    """A ``check --json`` file as its type (:class:`schema.AlertsDoc`, ``robocache-alerts/1``,
    :func:`schema.load_alerts`), each alert with what bisect reads (its case key and commit range: optional in the
    format); SetupError with a one-line reason otherwise."""
    doc = schema.load_alerts(path)
    if isinstance(doc, schema.AlertsUnreadable):
        raise SetupError(f"{path}: {doc}")
    if isinstance(doc, schema.AlertsError):
        alert = doc.path.split(".")[0] if doc.path.startswith("alerts[") else ""
        if alert:
            raise SetupError(f"{path}: {alert} lacks series, case_key, fingerprint, before or after as "
                             f"`robocache-bench check --json` writes them ({doc})")
        raise SetupError(f"{path}: not a robocache-alerts/1 document (the output of `robocache-bench check "
                         f"--json`): {doc}")
    for i, a in enumerate(doc.alerts):
        if a.case_key is None or a.before is None or a.after is None:
            raise SetupError(f"{path}: alerts[{i}] lacks series, case_key, fingerprint, before or after")
    return doc


def groups(alerts: Sequence[schema.StepAlert]) -> list[Group]:
    """Slower alerts grouped by machine and commit range, worst first (an alert without a direction is slower: the
    first files wrote none)."""
    out: dict[str, Group] = {}
    for a in alerts:
        if (a.direction or "slower") != "slower":
            continue
        m = a.series.get("machine")
        b, f = a.before.commit if a.before else None, a.after.commit if a.after else None
        key = issue_key(m, b, f)
        out.setdefault(key, Group(key, str(m), str(b or ""), str(f or ""), [])).alerts.append(a)
    return sorted(out.values(), key=lambda g: -g.ratio)


def pick_group(alerts: Sequence[schema.StepAlert], ident: str) -> Group:
    """The group of the alert whose change id, fingerprint or issue key is ``ident`` (a unique prefix of 6+)."""
    ident = ident.strip().lower()
    if len(ident) < 6:
        raise SetupError(f"alert id {ident!r}: give at least 6 hex digits of a change id, fingerprint or issue key")
    hits = [g for g in groups(alerts) if g.key.startswith(ident) or any(
        (a.change_id or "").startswith(ident) or a.fingerprint.startswith(ident) for a in g.alerts)]
    if not hits:
        raise SetupError(f"no slower alert with change id, fingerprint or issue key {ident!r} in the alerts file")
    if len(hits) > 1:
        raise SetupError(f"{ident!r} matches {len(hits)} alert groups: give more digits")
    return hits[0]


def known_keys(dirs: Sequence[str]) -> set[str]:
    """Issue keys of alert groups already bisected to a final status in ``dirs`` (the nightly skips them)."""
    docs, _ = load_docs(*dirs)
    return {d.alert.key for d in docs if d.alert is not None and d.status in FINAL and d.status != "budget"}


# ------------------------------------------------------------------------------------------------ command line

def start(repo: Path, good: str, bad: str, cases: Sequence[CaseSpec], *, machine: str, out_dir: Path,
          settings: Settings, expect: float | None = None, alert: Group | None = None, scratch: Path | None = None,
          keep: bool = False, link_base: str | None = None, note: str = "",
          log: Callable[[str], None] | None = None) -> tuple[State, Path]:
    """Set up and run one bisection, writing its document to ``out_dir``; returns (state, document path)."""
    say = log or (lambda s: None)
    if not cases:
        raise SetupError("no case to measure")
    commits = commit_range(repo, good, bad)
    exp = {c.key: float(expect if expect is not None else 1.0 + 0.03) for c in cases}
    if alert is not None:
        for a in alert.alerts:  # the smallest change the alert is sure of: its 95% interval's lower end
            low = float(a.ratio_ci[0]) if len(a.ratio_ci) == 2 else float(a.ratio or 1.03)
            exp[str(a.case_key)] = float(expect) if expect is not None else max(low, 1.01)
    st = State(id=bisection_id(machine, commits[0].sha, commits[-1].sha, cases), machine=machine, commits=commits,
               cases=[CaseSpec(c.key, c.cache, c.fingerprint, dict(c.series)) for c in cases], settings=settings,
               expect=exp, created=_now(), note=note, link_base=link_base)
    st.hi = len(commits) - 1
    if alert is not None:
        st.alert = {"key": alert.key, "change_ids": sorted({a.change_id for a in alert.alerts if a.change_id}),
                    "fingerprints": sorted({a.fingerprint for a in alert.alerts}), "ratio": alert.ratio}
    out_dir.mkdir(parents=True, exist_ok=True)
    tmp = scratch or Path(tempfile.mkdtemp(prefix="robocache-bisect-"))
    runs = out_dir / f"{store.safe_component(machine, 60)}-{st.id}-runs"
    meas = WorktreeMeasurer(repo, tmp, runs, st.cases, machine=machine, device=settings.device, suite=settings.suite,
                            time_limit_s=settings.time_limit_s, log=say, statistic=settings.statistic)
    path = write_doc(st, out_dir)
    say(f"bisecting {len(commits) - 1} commit(s) after {commits[0].sha[:12]} up to {commits[-1].sha[:12]} on "
        f"{machine}: {', '.join(c.key for c in cases)}; document {path}")
    try:
        bisect(st, meas, on_update=lambda s: write_doc(s, out_dir), log=say)
    except Exception as e:  # a worktree that cannot be added, a full disk: the document says so, then the error
        st.status, st.reason = "failed", f"{type(e).__name__}: {str(e)[:300]}"
        write_doc(st, out_dir)
        raise
    finally:
        meas.close()
        if keep and scratch is None:
            say(f"scratch kept: {tmp}")
        elif scratch is None:
            shutil.rmtree(tmp, ignore_errors=True)
    return st, write_doc(st, out_dir)


def _repo_root(path: str) -> Path:
    out = subprocess.run(["git", "-C", path, "rev-parse", "--show-toplevel"], capture_output=True, text=True,
                         timeout=60)
    if out.returncode != 0:
        raise SetupError(f"--repo {path}: not a git checkout ({(out.stderr.strip().splitlines() or ['?'])[-1][:160]})")
    return Path(out.stdout.strip())


def _series_cases(text: str, cache: str, measure: str | None = None) -> list[CaseSpec]:
    """``--series``' cases; ``measure`` (``--measure call_ratio``) bisects them on their interleaved call ratio, as
    ``check`` judges a call-cost series (:func:`_row`); None or "time": the time ``--statistic`` names."""
    from . import specs
    from .regressions.noise import CALL_RATIO

    keys = [k.strip() for k in text.split(",") if k.strip()]
    if not keys:
        raise SetupError("--series: give one or more case keys op/tag/dtype/provider (as `list` and alerts print them)")
    for k in keys:
        specs.find(k)  # a KeyError/ValueError with the reason: a usage error
        if specs.find(k).distributed:
            raise SetupError(f"{k}: a multi-GPU case; bisect measures single-GPU cases")
    series = {"measure": CALL_RATIO} if measure == CALL_RATIO else {}
    return [CaseSpec(k, cache, series=dict(series)) for k in dict.fromkeys(keys)]


def _chosen_groups(args: Any, doc: schema.AlertsDoc, say: Callable[[str], None]) -> list[Group]:
    """The alert groups ``--alerts`` asks for: the one ALERT names, or (``--all``) every confirmed one of this
    machine not bisected yet (``--known``)."""
    if args.alert:
        return [pick_group(doc.alerts, args.alert)]
    if not args.all:
        raise SetupError("--alerts needs an ALERT id (change id, fingerprint or issue key) or --all")
    known = known_keys(args.known or [])
    chosen = []
    for g in groups([a for a in doc.alerts if a.confirmed is True]):
        if g.key in known:
            say(f"alert group {g.key} ({g.machine}, {g.before[:12]}..{g.after[:12]}): already bisected, skipped")
        elif g.machine != (args.machine or g.machine):
            say(f"alert group {g.key}: machine {g.machine}, not this one ({args.machine}), skipped")
        else:
            chosen.append(g)
    return chosen


def _alert_jobs(args: Any, repo: Path, say: Callable[[str], None]
                ) -> list[tuple[str, str, list[CaseSpec], str, Group | None]]:
    """``(good, bad, cases, machine, group)`` of each chosen alert group with a commit range to bisect."""
    if args.series or args.good or args.bad:
        raise SetupError("give an alert (ALERT or --all with --alerts) or --series with --good and --bad, not both")
    if getattr(args, "measure", None):
        raise SetupError("--measure is for --series: an alert is bisected on the quantity check judged it by")
    jobs: list[tuple[str, str, list[CaseSpec], str, Group | None]] = []
    for g in _chosen_groups(args, read_alerts(args.alerts), say):
        if not g.before or not g.after or g.before == g.after:
            say(f"alert group {g.key}: no commit range (same commit before and after): nothing to bisect")
            continue
        try:
            n = len(commit_range(repo, g.before, g.after)) - 1
        except SetupError as e:
            if args.all:  # the nightly goes on with the other groups
                say(f"alert group {g.key}: {e}")
                continue
            raise
        if n < 2 and args.all:
            say(f"alert group {g.key}: one commit in its range, {g.after[:12]}: it is the culprit, nothing to "
                "bisect")
            continue
        jobs.append((g.before, g.after, g.cases, args.machine or g.machine, g))
    return jobs


def run_cli(args: Any) -> int:
    """``robocache-bench bisect``: one alert group (ALERT with --alerts), every eligible group (--all), or a list of
    cases and a commit range (--series, --good, --bad). Prints each bisection's summary; exit 0 when each ran to a
    result (whatever it found), 2 on a usage error."""
    repo = _repo_root(args.repo)
    out = Path(args.out)
    def say(s: str) -> None:
        print(s, file=sys.stderr, flush=True)

    settings = Settings(samples=args.samples, max_samples=max(args.max_samples, args.samples), budget_s=args.budget,
                        device=args.device, suite=args.suite, time_limit_s=args.time_limit, statistic=args.statistic)
    t0 = time.monotonic()
    jobs: list[tuple[str, str, list[CaseSpec], str, Group | None]] = []  # good, bad, cases, machine, group
    if args.alerts:
        jobs = _alert_jobs(args, repo, say)
        if not jobs:
            print("nothing to bisect")
            return 0
    else:
        if not (args.series and args.good and args.bad):
            raise SetupError("give --series KEYS with --good COMMIT and --bad COMMIT, or an alert with --alerts FILE")
        machine = args.machine or os.environ.get("ROBOCACHE_MACHINE") or __import__("socket").gethostname()
        jobs.append((args.good, args.bad, _series_cases(args.series, args.cache, getattr(args, "measure", None)),
                     machine, None))
    for good, bad, cases, machine, grp in jobs:
        left = args.budget - (time.monotonic() - t0)
        if left <= 0:
            say(f"budget spent: {len(jobs)} bisection(s) asked, the rest not started")
            break
        cfg = Settings(**{**settings.__dict__, "budget_s": left})
        st, path = start(repo, good, bad, cases, machine=machine, out_dir=out, settings=cfg, expect=args.expect,
                         alert=grp, keep=args.keep, link_base=args.dashboard_url, note=args.note or "", log=say)
        from .terminal import for_stdout

        print(for_stdout(document(st)["markdown"]))
        print(f"bisection {st.id}: {STATUS_TEXT[st.status]}; document {path}")
    return 0
