"""The nightly job's alerts, replayed out of sample over the real run-to-run noise of the committed records.

``python -m robocache.bench.regressions replay [--size full|ci] [--replicates N] [--seed S] [--jobs J]``
(docs/regressions.md, "Quality: the out-of-sample replay"). What it runs is the nightly job's own path, the
functions ``robocache-bench check --confirm`` calls: :func:`.changepoints.check` with the CLI's screen
(``screen=SCREEN_P``, ``machine=``, ``frontend="cli"``), then :func:`.confirmation.confirm_alerts` with a
``measure`` that draws ``CONFIRM_RUNS`` reruns (and ``CONFIRM_MORE`` more where an alert asks) at the series'
true level, where the CLI would run the cases again.

The world:

- **templates**: every series of the nightly suite in ``results/h100-nvidia-h100-x1`` and
  ``results/h200-nvidia-h200`` (every provider the nightly grid measured there: the CLI's grid-version-2 runs and
  the H200's asv runs of grid version 1, which hold CuPy and torch eager), each at its measured median time;
- **noise**: each night is the template's time times ``exp(e)``, ``e`` bootstrapped from the real run-to-run
  ratios: per case, every pair of runs of one commit (one series: machine, case, provider, front end...) gives
  ``log(t_i / t_j) / sqrt(2)`` (one run's deviation; both signs), pooled over the most specific cell with at least
  ``POOL_MIN`` values: the case itself, else its machine, provider and time bucket (the priors' buckets), else the
  provider and bucket on any machine, else the provider, else its base provider (``name@version``), else all;
- **out of sample, split by case**: the cases are cut in two folds by a hash of (case id, dtype, provider); a
  template of one fold draws its nights from its own fold's records only, while the check runs with noise priors
  (``noise_priors.json``'s content) fitted by :func:`.noise.fit_priors` on the other fold's records alone. Why by
  case and not by run date: every H100 run and every run of the ``@max-autotune``, ``@v1``, ``@v2`` and ``@v3``
  providers is from 2026-11-23/24, so a split by date leaves the H100 and those providers without fitted priors or
  without noise; a split by case keeps both GPUs and every provider on both sides;
- **scenarios**, per series and replicate (seeded): A/A, a step of 3-20% or a drift of +0.5%/night (some +1%),
  landing after a history of 6 to 30 nights; mixed in, two-state series (a slow state of 4-10%, alternating or
  10-30% of the nights) and contention (a night now and then 5-30% slower: half flagged ``contended`` by the
  harness, which the check drops; half not, as a neighbour on the host CPU is not seen by NVML);
- **the check** runs after every night from ``MIN_HISTORY`` on, per machine and fold (one call sees one machine's
  series of one fold, 60-220 series, as the nightly check sees one machine's grid), and its confirmation reruns
  are drawn at the series' true level (its step, drift and state; no contention: a rerun is a fresh process).

Measured, per provider and noise band (the series' own noise: the Gaussian equivalent of its pool's 90th
percentile, ``|e|_90 / 1.645``, and of its two states): A/A confirmed false alerts per 1,000 series-nights (the
count and its expectation: every alert the screen sent to the rerun times its probability of being confirmed,
Monte Carlo over the reruns its noise allows), steps found the night they land, within two and within ten
nights, drifts flagged before they total +5%; and, where a rate falls short, the bound the noise itself sets
(:func:`bounds`: the power of a test that knows the level and the noise exactly, on the nights and reruns the
nightly job has).
"""
from __future__ import annotations

import argparse
import contextlib
import json
import math
import sys
import time
import zlib
from collections import Counter, defaultdict
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

import numpy as np

from ..schema import Case, Env, Method, Record, fingerprint, series_key
from . import changepoints, confirmation, memory as mem, noise
from .alerts import code_span, md_text
from .records import p50, synthetic, synthetic_env, synthetic_method, unhealthy

REPO = Path(__file__).resolve().parents[3]
TEMPLATE_DIRS = ("results/h100-nvidia-h100-x1", "results/h200-nvidia-h200")  # the nightly machines' records
PRIOR_DIR = "results"  # what the committed priors are fitted on (fit-priors results/), less results/local/
POOL_MIN = 16  # signed deviations (8 pairs of runs) a pool needs before it is used; else the next wider cell
FOLDS = 2
STEP_SIZES = (0.03, 0.05, 0.07, 0.10, 0.15, 0.20)
DRIFT_SLOPES = (0.005, 0.005, 0.005, 0.01)  # three in four drifts at +0.5%/night (the target's), one at +1%
HISTORY = (6, 30)  # nights of history before a change lands (inclusive)
AFTER = 10  # nights measured after the latest change: +0.5%/night reaches +5% on the tenth
BANDS = ((0.005, "<= 0.5%"), (0.01, "0.5-1%"), (0.02, "1-2%"), (0.05, "2-5%"), (math.inf, "> 5%"))
SIZES = {  # replicates, a share of the templates, the Monte Carlo draws of each A/A alert's confirmation, and the
    # step sizes and drift slopes drawn (CI's reduced size draws only the targets' +5%, +10% and +0.5%/night, so that
    # its few hundred series put a few dozen in each target's cell; its replicates are independent draws whose
    # spread the A/A test of tests/test_regress_replay.py allows for: one replicate's A/A estimate is often one
    # series' false change, sent to the rerun night after night). CI's 4 replicates are the first 4 of what was
    # 8 (seeds seed..seed+3): half the test's CPU; the power kept is in docs/regressions.md ("The CI size")
    "full": {"replicates": 12, "share": 1.0, "mc": 4000, "steps": STEP_SIZES, "slopes": DRIFT_SLOPES},
    "ci": {"replicates": 4, "share": 0.35, "mc": 500, "steps": (0.05, 0.10), "slopes": (0.005,)},
}


# ------------------------------------------------------------------ the world: templates, folds, noise pools

@dataclass(frozen=True)
class Template:
    machine: str
    case: Case  # its runs' case (the series reads its id, op, provider, dtype and grid version)
    t_us: float  # the median of its nightly runs' medians
    within: float  # the runs' median within-run noise (method.noise, a 95% half-width)
    timer: str = "cuda_event"  # its runs' timer: a call-cost series (noise.HOST_TIMERS) draws from host-timed pools

    @property
    def key(self) -> str:
        return f"{self.case.id}/{self.case.dtype}/{self.case.provider}"

    @property
    def fold(self) -> int:
        return fold_of(self.case)


def fold_of(case: Case) -> int:
    """The case's fold: a stable hash of (case id, dtype, provider), the same on both machines."""
    return zlib.crc32(f"{case.id}|{case.dtype}|{case.provider}".encode()) % FOLDS


def load(dirs: Sequence[str | Path]) -> list[Record]:
    """Records of ``dirs`` (relative to the repository unless absolute); a bad file is an error here."""
    from .. import store

    loaded = store.load(*[p if Path(p).is_absolute() else REPO / p for p in dirs])
    if loaded.bad:
        raise ValueError("bad results files: " + "; ".join(f"{p}: {w}" for p, w in loaded.bad))
    return loaded.records


def templates(records: Sequence[Record]) -> list[Template]:
    """One template per series of the nightly suite (machine, case, provider, dtype, grid version; any front end:
    the asv front end's H200 grid holds the CuPy and torch eager cases), sorted."""
    by: dict[tuple, list[Record]] = defaultdict(list)
    for r in records:
        if r.suite != "nightly" or unhealthy(r) or r.synthetic:
            continue
        c = r.case
        by[(r.env.machine if r.env is not None else None, c.id, c.dtype, c.provider, c.grid_version)].append(r)
    out = []
    for (machine, *_), rs in sorted(by.items()):
        within = [float((r.method.noise if r.method is not None else None) or 0.0) for r in rs]
        timers = Counter(str((r.method.timer if r.method is not None else None) or "cuda_event") for r in rs)
        out.append(Template(machine=machine, case=rs[0].case,
                            t_us=float(np.median([p50(r) for r in rs])), within=float(np.median(within)),
                            timer=timers.most_common(1)[0][0]))
    return out


def _cells(machine: str, case_id: str, dtype: str, prov: str, t_us: float, timer: str | None = None) -> list[tuple]:
    """The pool cells of a case, most specific first. Past the case's own cell, a call-cost series (host-timed,
    ``noise.HOST_TIMERS``) and a device-timed one never share a cell, as their priors never do: one A/A pair's
    call-cost cases move 20-30% between runs, and pooled with the device times of the same provider and time
    bucket they made the replay draw false alerts for quiet kernels. A host-timed series falls back on the
    device cells only where no host-timed cell has enough values."""
    b = noise._bucket(t_us)
    own = [("case", machine, case_id, dtype, prov)]
    device = [("machine", machine, prov, b), ("bucket", prov, b), ("provider", prov), ("provider", prov.split("@")[0]),
              ("all",)]
    if not noise._timer_suffix(timer):
        return own + device
    return own + [(c[0], *(x + "|host" if x in (prov, prov.split("@")[0], "all") else x for x in c[1:]))
                  if c != ("all",) else ("all|host",) for c in device] + device


def pools(records: Sequence[Record], fold: int) -> dict[tuple, np.ndarray]:
    """Every cell's signed run-to-run deviations from the records of cases in ``fold``: per series and commit, each
    pair of its runs gives +-log(t_i / t_j) / sqrt(2)."""
    groups: dict[tuple, list[float]] = defaultdict(list)
    for r in records:
        if unhealthy(r) or r.synthetic or not r.git_commit or fold_of(r.case) != fold:
            continue
        timer = r.method.timer if r.method is not None else None
        groups[(series_key(r), r.git_commit, timer)].append(math.log(p50(r)))
    cells: dict[tuple, list[float]] = defaultdict(list)
    for (sk, _commit, timer), xs in groups.items():
        if len(xs) < 2:
            continue
        x = np.array(xs)
        i, j = np.triu_indices(len(x), 1)
        d = (x[i] - x[j]) / math.sqrt(2)
        own, *rest = _cells(sk.machine, sk.case_id, sk.dtype, sk.provider, math.exp(float(x.mean())), timer)
        # a host-timed case's deviations go to its own and the host-timed cells, never the device cells
        for cell in [own, *(rest[:len(rest) // 2] if noise._timer_suffix(timer) else rest)]:
            cells[cell].extend(d.tolist())
            cells[cell].extend((-d).tolist())
    return {k: np.sort(np.array(v)) for k, v in cells.items()}


def pool_for(pl: dict[tuple, np.ndarray], tpl: Template) -> tuple[np.ndarray, str]:
    """The template's pool (the most specific cell with POOL_MIN values) and the cell's kind."""
    c = tpl.case
    for cell in _cells(tpl.machine, c.id, c.dtype, c.provider, tpl.t_us, tpl.timer):
        v = pl.get(cell)
        if v is not None and len(v) >= POOL_MIN:
            return v, cell[0]
    raise ValueError(f"no noise pool for {tpl.key} on {tpl.machine}: the fold holds no runs of one commit")


def band_sigma(pool: np.ndarray) -> float:
    """A pool's noise: one run's Gaussian-equivalent sigma from its 90th percentile (as the priors)."""
    return float(np.quantile(np.abs(pool), 0.9)) / 1.645


def band_of(sigma: float) -> str:
    return next(name for hi, name in BANDS if sigma <= hi)


@contextlib.contextmanager
def priors_of(providers: dict[str, Any]) -> Iterator[None]:
    """Run the check with these noise priors (``fit_priors``' document) instead of the committed ones."""
    old = noise._PRIORS
    noise._PRIORS = providers
    try:
        yield
    finally:
        noise._PRIORS = old


# ------------------------------------------------------------------ one series' nights

@dataclass
class Plan:
    """One simulated series: its template, noise and scenario."""
    tpl: Template
    pool: np.ndarray
    cell: str  # which pool cell it draws from
    kind: str = "aa"  # "aa" | "step" | "drift"
    start: int = 10 ** 6  # the first night of the change
    step: float = 0.0
    slope: float = 0.0  # per night, compounded, from ``start`` on
    state: tuple[float, float] | None = None  # two-state: (the slow state's size, its share of nights; 0.5 alternates)
    contended: dict[int, tuple[float, bool]] = field(default_factory=dict)  # night -> (slowdown, flagged)
    notes: list[str] = field(default_factory=list)  # the false alerts it raised, described
    # each re-proposal of a remembered refuted step: [its shift in nights from the nearest one remembered, the old
    # key (change id) matched, the memory's key matched] (:func:`memory_keys`)
    reproposed: list[list] = field(default_factory=list)

    @property
    def noise(self) -> float:
        """The series' own noise: its pool's and, for two states, their spread (one Gaussian-equivalent sigma)."""
        s = band_sigma(self.pool)
        if self.state:
            size, share = self.state
            s = math.hypot(s, math.log1p(size) * math.sqrt(share * (1 - share)))
        return s

    @property
    def provider(self) -> str:
        return self.tpl.case.provider

    @property
    def fp(self) -> str:
        c = self.tpl.case
        return fingerprint({"machine": self.tpl.machine, "case_id": c.id, "provider": c.provider,
                            "dtype": c.dtype, "timer": self.tpl.timer, "cache": "warm",
                            "grid_version": c.grid_version, "frontend": "cli", "input_sets": 1})

    @cached_property
    def env(self) -> Env:
        """Its records' env, one object for them all (the check reads the runner's fingerprint once per env)."""
        return synthetic_env(self.tpl.machine)

    @cached_property
    def method(self) -> Method:
        """Its records' method, one object for them all."""
        return synthetic_method(self.tpl.timer, "warm", self.tpl.within)

    def level(self, night: int) -> float:
        """The true log-time of ``night`` without noise, state or contention."""
        x = math.log(self.tpl.t_us)
        if night >= self.start:
            x += math.log1p(self.step) + math.log1p(self.slope) * (night - self.start + 1)
        return x

    def slow(self, night: int, rng: np.random.Generator) -> bool:
        if not self.state:
            return False
        return night % 2 == 1 if self.state[1] == 0.5 else bool(rng.random() < self.state[1])

    def night(self, night: int, rng: np.random.Generator) -> tuple[float, bool]:
        """(the night's time, flagged contended)."""
        x = self.level(night) + float(rng.choice(self.pool))
        if self.slow(night, rng):
            x += math.log1p(self.state[0])
        slow, flagged = self.contended.get(night, (0.0, False))
        return math.exp(x + math.log1p(slow)), flagged

    def reruns(self, night: int, k: int, rng: np.random.Generator, sets: int = 1) -> np.ndarray:
        """``sets`` x ``k`` rerun log-times at the true level of ``night`` (its state drawn anew; no contention)."""
        x = self.level(night) + rng.choice(self.pool, size=(sets, k))
        if self.state:
            size, share = self.state
            slow = rng.random((sets, k)) < share
            x = x + math.log1p(size) * slow
        return x


def _created(night: int, minute: int = 0) -> str:
    day = np.datetime64("2026-01-01") + np.timedelta64(night, "D")
    return f"{day}T03:{minute:02d}:00+00:00"


def record(p: Plan, t_us: float, night: int, *, rerun: int = 0, contended: bool = False) -> Record:
    """A synthetic record with the fields the check reads (marked synthetic; :func:`.records.synthetic`)."""
    stamp = _created(night, rerun)
    run = f"{stamp[:10].replace('-', '')}T03{rerun:02d}00Z-{p.tpl.machine[-4:]}{night:03d}" + (f"r{rerun}" if rerun else "")
    return synthetic(run_id=run, created=stamp, git_commit=f"{night:04d}" + "c" * 36, case=p.tpl.case, t_us=t_us,
                     noise=p.tpl.within, env=p.env, method=p.method, contended=contended)


# ------------------------------------------------------------------ scenarios and one replicate

def plans(tpls: Sequence[Template], pls: dict[int, dict[tuple, np.ndarray]], rng: np.random.Generator,
          steps: Sequence[float] = STEP_SIZES, slopes: Sequence[float] = DRIFT_SLOPES) -> list[Plan]:
    """Each template's scenario for one replicate: a third A/A, half a step (of ``steps``), a sixth a drift (of
    ``slopes``), each landing after HISTORY nights; a tenth two-state, a tenth with contended nights."""
    out = []
    for tpl in tpls:
        pool, cell = pool_for(pls[tpl.fold], tpl)
        p = Plan(tpl=tpl, pool=pool, cell=cell)
        u = rng.random()
        if u < 1 / 3:
            p.kind = "aa"
        elif u < 5 / 6:
            p.kind, p.step = "step", float(rng.choice(steps))
        else:
            p.kind, p.slope = "drift", float(rng.choice(slopes))
        if p.kind != "aa":
            p.start = int(rng.integers(HISTORY[0], HISTORY[1] + 1))
        if rng.random() < 0.1:
            p.state = (float(rng.uniform(0.04, 0.10)), float(rng.choice((0.5, 0.3, 0.1))))
        if rng.random() < 0.1:
            for n in range(HISTORY[1] + AFTER + 1):
                if rng.random() < 0.05:
                    p.contended[n] = (float(rng.uniform(0.05, 0.30)), bool(rng.random() < 0.5))
        out.append(p)
    return out


@dataclass
class Seen:
    """What one check night did to one series."""
    night: int  # the check after nights 0..night-1
    raw: bool  # sent to the rerun (an alert before confirmation)
    kept: bool  # confirmed
    drift: bool
    placed: bool  # a kept alert's first commit after the change is the change's own
    p_confirm: float  # an alert of an unchanged series: its probability of being confirmed (Monte Carlo)
    reruns: int = 0


def p_confirm(p: Plan, c: changepoints.Change, night: int, rng: np.random.Generator, draws: int) -> float:
    """The probability that the confirmation keeps alert ``c``: its rule (:func:`.confirmation.rerun_test`, the
    second look where :func:`.confirmation.rerun_more` asks) over ``draws`` rerun sets drawn as the replay draws
    them."""
    first = p.reruns(night, confirmation.CONFIRM_RUNS, rng, draws)
    pooled = np.broadcast_to(np.asarray(c.pooled if c.drift is None else [], dtype=float), (draws, len(c.pooled)
                                                                                          if c.drift is None else 0))
    k = pooled.shape[1]
    ok, *_ = confirmation.rerun_test(c, np.concatenate([pooled, first], axis=1), pooled=k)
    more = confirmation.rerun_more(c, first, ok=ok)
    if more.any():
        both = np.concatenate([first[more], p.reruns(night, confirmation.CONFIRM_MORE, rng, int(more.sum()))], axis=1)
        ok2, *_ = confirmation.rerun_test(c, np.concatenate([pooled[more], both], axis=1), pooled=k)
        ok[more] = ok2
    return float(ok.mean())


def replicate(world: dict, seed: int, share: float, mc: int, steps: Sequence[float] = STEP_SIZES,
              slopes: Sequence[float] = DRIFT_SLOPES, memory: bool = True) -> list[dict]:
    """One replicate: every plan's nights, the nightly check after each night, per series what each check did.
    ``memory``: the nightly jobs carry the memory of refuted looks from night to night (False: every change point
    at its first look, as before issue 27; the same nights and reruns, for :func:`step_delays`)."""
    rng = np.random.default_rng(seed)
    tpls = [t for t in world["templates"] if share >= 1 or rng.random() < share]
    ps = plans(tpls, world["pools"], rng, steps, slopes)
    nights = HISTORY[1] + AFTER
    groups: dict[tuple[str, int], list[int]] = defaultdict(list)
    for i, p in enumerate(ps):
        groups[(p.tpl.machine, p.tpl.fold)].append(i)
    recs: dict[tuple[str, int], list[Record]] = {g: [] for g in groups}
    looked = {g: mem.Memory() for g in groups}  # each nightly job's memory
    seen: list[list[Seen]] = [[] for _ in ps]
    night_rng = np.random.default_rng([seed, 1])
    for n in range(nights + 1):
        if n >= changepoints.MIN_HISTORY:  # the check after nights 0..n-1
            for g, idx in groups.items():
                _night_check(world, g, idx, ps, recs[g], n, seed, mc, seen, looked[g] if memory else None)
        if n < nights:
            for g, idx in groups.items():
                for i in idx:
                    t, flagged = ps[i].night(n, night_rng)
                    recs[g].append(record(ps[i], t, n, contended=flagged))
    return [_summary(p, s) for p, s in zip(ps, seen)]


def _night_check(world: dict, g: tuple[str, int], idx: list[int], ps: list[Plan], recs: list[Record], n: int,
                 seed: int, mc: int, seen: list[list[Seen]], looked: mem.Memory | None = None) -> None:
    """The nightly job after night n-1 for one machine and fold: check --confirm's own calls, with the memory of
    the change points earlier nights refuted (``looked``, carried from night to night as the nightly job carries
    its previous alerts.json to ``check --refuted-before``)."""
    machine, fold = g
    by_fp = {ps[i].fp: i for i in idx}
    asked: dict[str, int] = defaultdict(int)

    def measure(alerts: list[changepoints.Change], times: int) -> list[Record]:
        out = []
        for c in alerts:
            i = by_fp[c.fingerprint]
            # each series' reruns after a night from their own stream (one alert's second look redraws nothing else)
            g_rng = np.random.default_rng([seed, 2, n, i, asked[c.fingerprint]])
            for x in ps[i].reruns(n - 1, times, g_rng)[0]:
                asked[c.fingerprint] += 1
                out.append(record(ps[i], math.exp(float(x)), n - 1, rerun=asked[c.fingerprint]))
        return out

    with priors_of(world["priors"][fold]):
        res = changepoints.check(recs, machine=machine, frontend="cli", screen=changepoints.SCREEN_P)
        # what the confirmation will measure: the alerts and the drifts (as changes from the level before them), each
        # at its look (the change points earlier nights' reruns refuted: check --refuted-before's memory)
        raw = {c.fingerprint: c for c in confirmation.to_confirm(res, looked)}
        if looked is not None:
            _reproposals(looked, raw.values(), res.windows, ps, by_fp)
        confirmation.confirm_alerts(res, measure, machine=machine, looked=looked)
        if looked is not None:  # as check --json writes it: pruned to what can match again
            looked.prune(res.windows)
        kept = {c.fingerprint: c for c in res.alerts if c.confirmed}
        drifts = {d.fingerprint: d for d in res.drifts if d.confirmed}
        checked = set(res.checked)
        for fp, i in by_fp.items():
            if fp not in checked:
                continue
            p = ps[i]
            changed = n - 1 >= p.start
            c = raw.get(fp)
            pc = 0.0
            if c is not None and not changed:
                pc = p_confirm(p, c, n - 1, np.random.default_rng([seed, 3, n, i]), mc)
            k = kept.get(fp)
            placed = bool(k is not None and changed and k.after.commit == f"{p.start:04d}" + "c" * 36)
            seen[i].append(Seen(n, c is not None, k is not None, fp in drifts, placed, pc,
                                k.reruns if k is not None else 0))
            if c is not None and not changed and (pc >= 0.01 or k is not None or fp in drifts):
                # what a false alert looked like (the report lists the likeliest)
                note = drifts[fp].confirm_note if fp in drifts else k.confirm_note if k is not None else ""
                p.notes.append(f"night {n}: x{c.ratio:.3f} {c.kind} n_before {c.n_before} n_after {c.n_after} "
                               f"sigma {c.sigma:.4f} p_one {c.p_one:.2g}x{c.n_tests}; P(confirmed) {pc:.3f}"
                               + (f"; confirmed: {note}" if note else ""))


def _reproposals(looked: mem.Memory, items, windows: dict[str, list[str]], ps: list[Plan],
                 by_fp: dict[str, int]) -> None:
    """Per step sent to the rerun tonight whose series has a refuted step in the memory: how far (nights of its
    checked window) its location is from the nearest remembered one, and whether the old key (the change id) and
    the memory's key match it (:func:`memory_keys` sums them)."""
    for c in items:
        if c.drift is not None:
            continue
        olds = [e for e in looked.entries if e.fingerprint == c.fingerprint and e.kind == "step" and e.after]
        runs = windows.get(c.fingerprint, [])
        if not olds or c.after.run_id not in runs:
            continue
        at = runs.index(c.after.run_id)
        shift = min(abs(runs.index(e.after) - at) if e.after in runs else 10 ** 6 for e in olds)
        ps[by_fp[c.fingerprint]].reproposed.append(
            [shift, any(e.change_id == c.change_id for e in olds), looked.find(c) is not None])


def memory_keys(series: Sequence[dict]) -> dict:
    """Over every series' re-proposals of a remembered refuted step (:func:`_reproposals`): how many, by their
    shift in nights (0: the same place; 1: the location moved by one night; more: another change point, or one
    moved further), and how many each key matched: the old key (the change id, series and commit range) and the
    memory's (:mod:`.memory`: series and the runs around it, one night's shift allowed). A key *drifts* where the
    same change point (shift 0 or 1) is re-proposed and it does not match."""
    rows = [r for s in series for r in s.get("reproposed", [])]
    near = [r for r in rows if r[0] <= 1]
    out = {"reproposals": len(rows), "shift_0": sum(r[0] == 0 for r in rows), "shift_1": sum(r[0] == 1 for r in rows),
           "shift_more": sum(r[0] > 1 for r in rows),
           "old_key_drifts": sum(not r[1] for r in near), "new_key_drifts": sum(not r[2] for r in near),
           "new_key_matched_further": sum(r[2] for r in rows if r[0] > 1)}
    out["old_key_drift_rate"] = out["old_key_drifts"] / len(near) if near else None
    out["new_key_drift_rate"] = out["new_key_drifts"] / len(near) if near else None
    return out


def _summary(p: Plan, seen: list[Seen]) -> dict:
    """What a replicate keeps of one series (JSON-able)."""
    bound = target_bounds(p.pool) if p.kind == "step" and p.step in (0.05, 0.10) and p.noise <= 0.02 else {}
    return {"machine": p.tpl.machine, "provider": p.provider, "key": p.tpl.key, "fold": p.tpl.fold, "cell": p.cell,
            "bound": bound,
            "noise": p.noise, "kind": p.kind, "step": p.step, "slope": p.slope, "start": p.start,
            "two_state": p.state is not None, "contended": bool(p.contended),
            "state": list(p.state) if p.state else None, "notes": p.notes, "reproposed": p.reproposed,
            "seen": [[s.night, s.raw, s.kept, s.drift, s.placed, s.p_confirm] for s in seen]}


def committed_dirs(root: str | Path = PRIOR_DIR) -> list[Path]:
    """The folders of ``results/`` the committed priors are fitted on: every one but ``local/`` (``make run``'s
    own runs, which git ignores: this machine's, never part of what is measured here)."""
    base = Path(root) if Path(root).is_absolute() else REPO / root
    return sorted(d for d in base.iterdir() if d.is_dir() and d.name != "local")


def world(dirs: Sequence[str | Path] = TEMPLATE_DIRS, prior_dir: str | Path = PRIOR_DIR) -> dict:
    """Templates, each fold's noise pools, and each fold's priors (fitted on the other fold's records)."""
    recs = load(dirs)
    every = load(committed_dirs(prior_dir))
    tpls = templates(recs)
    pls = {f: pools(recs, f) for f in range(FOLDS)}
    pri = {f: noise.fit_priors([r for r in every if fold_of(r.case) != f]) for f in range(FOLDS)}
    usable = []
    for t in tpls:
        try:
            pool_for(pls[t.fold], t)
            usable.append(t)
        except ValueError as e:
            print(f"replay: template left out: {e}", file=sys.stderr)
    return {"templates": usable, "pools": pls, "priors": pri}


# ------------------------------------------------------------------ measures

def _first(seen: list, pred) -> int | None:
    return next((s[0] for s in seen if pred(s)), None)


HISTORY_BANDS = ((10, "6-10"), (20, "11-20"), (10 ** 6, "21-30"))


def measures(series: list[dict]) -> dict:
    """The rates, per provider and noise band, over every replicate's series."""
    t = _Tally()
    for s in series:
        b = band_of(s["noise"])
        t.add_aa(s, b)
        if s["kind"] == "step":
            t.add_step(s, b)
        elif s["kind"] == "drift":
            t.add_drift(s, b)
    return {"aa": {f"{p}|{b}": v for (p, b), v in sorted(t.aa.items())}, "aa_by_kind": dict(sorted(t.kinds.items())),
            "targets_by_history": dict(sorted(t.hist.items())), "bounds": dict(sorted(t.bound.items())),
            "steps": {f"{p}|{b}|{z}": v for (p, b, z), v in sorted(t.steps.items())},
            "drifts": {f"{p}|{b}|{z}": v for (p, b, z), v in sorted(t.drifts.items())}}


@dataclass
class _Tally:
    """:func:`measures`' counts, per cell."""
    # A/A series-nights per (provider, band) and per kind of series: [nights, sent, confirmed, expected, drifts]
    aa: dict[tuple[str, str], list[float]] = field(default_factory=lambda: defaultdict(lambda: [0, 0, 0, 0.0, 0]))
    kinds: dict[str, list[float]] = field(default_factory=lambda: defaultdict(lambda: [0, 0, 0, 0.0, 0]))
    # steps per (provider, band, size): [series, found the night after, within 2, within AFTER, placed, checked]
    steps: dict[tuple[str, str, float], list[int]] = field(
        default_factory=lambda: defaultdict(lambda: [0, 0, 0, 0, 0, 0]))
    # drifts per (provider, band, slope): [series, flagged before +5%, flagged as a drift]
    drifts: dict[tuple[str, str, float], list[int]] = field(default_factory=lambda: defaultdict(lambda: [0, 0, 0]))
    hist: dict[str, list[int]] = field(default_factory=lambda: defaultdict(lambda: [0, 0]))  # target|history band
    bound: dict[str, list[float]] = field(default_factory=lambda: defaultdict(lambda: [0, 0.0]))  # target|prov|band

    def add_aa(self, s: dict, b: str) -> None:
        """The series' nights before its change (A/A series-nights)."""
        mod = "two-state" if s["two_state"] else "contended nights" if s["contended"] else "plain"
        for night, raw, kept, drift, _placed, pc in s["seen"]:
            if night - 1 < s["start"]:  # unchanged tonight: an A/A series-night
                for row in (self.aa[(s["provider"], b)], self.kinds[mod]):
                    row[0] += 1
                    row[1] += raw
                    row[2] += kept
                    row[3] += pc
                    row[4] += drift

    def add_step(self, s: dict, b: str) -> None:
        """A step: how soon it was found and placed, whether the check ran the night it landed; for the targets'
        sizes, by the history it landed after, with the bound the noise sets."""
        k = _first(s["seen"], lambda x, s=s: x[0] - 1 >= s["start"] and x[2])
        placed = next((x[4] for x in s["seen"] if x[0] - 1 >= s["start"] and x[2]), False)
        row = self.steps[(s["provider"], b, s["step"])]
        row[0] += 1
        if k is not None:
            d = k - s["start"]  # 1: the check right after the step's first night
            row[1] += d <= 1
            row[2] += d <= 2
            row[3] += d <= AFTER
            row[4] += bool(placed)
        # whether the check ran the night the change landed (a series that came back unhealthy is not "checked")
        row[5] += any(x[0] == s["start"] + 1 for x in s["seen"])
        target = ("ten", 1) if s["step"] == 0.10 and s["noise"] <= 0.02 else \
            ("five", 2) if s["step"] == 0.05 and s["noise"] <= 0.01 else None
        if target:  # the targets' rates by the history the step landed after, and the bound the noise sets
            hb = next(name for hi, name in HISTORY_BANDS if s["start"] <= hi)
            self.hist[f"{target[0]}|{hb}"][0] += 1
            self.hist[f"{target[0]}|{hb}"][1] += k is not None and k - s["start"] <= target[1]
            cell = self.bound[f"{target[0]}|{s['provider']}|{b}"]
            cell[0] += 1
            cell[1] += s.get("bound", {}).get(target[0], 0.0)

    def add_drift(self, s: dict, b: str) -> None:
        """A drift: flagged before it totals +5%, and flagged as a drift at all."""
        k = _first(s["seen"], lambda x, s=s: x[0] - 1 >= s["start"] and (x[3] or x[2]))
        row = self.drifts[(s["provider"], b, s["slope"])]
        row[0] += 1
        if k is not None:
            total = (1 + s["slope"]) ** (k - s["start"]) - 1
            row[1] += total < 0.05
            row[2] += _first(s["seen"], lambda x, s=s: x[0] - 1 >= s["start"] and x[3]) is not None


def step_delays(a: Sequence[dict], b: Sequence[dict], within: Sequence[int] = (1, 2, 5, AFTER)) -> dict:
    """Two runs of one replicate (the same seed: the same nights and reruns), ``a`` and ``b`` (such as the memory
    on and off, :func:`replicate`'s ``memory``), compared step by step: per N of ``within`` the steps each confirmed
    within N nights after landing, and the steps ``a`` confirmed later than ``b`` or never where ``b`` did."""
    def night(s: dict) -> int | None:
        k = _first(s["seen"], lambda x, s=s: x[0] - 1 >= s["start"] and x[2])
        return None if k is None else k - s["start"]

    if len(a) != len(b):
        raise ValueError(f"not one replicate: {len(a)} and {len(b)} series")
    out = {"steps": 0, "within": {n: [0, 0] for n in within}, "later": [], "never": []}
    for s, t in zip(a, b):
        if any(s[k] != t[k] for k in ("machine", "key", "kind", "start", "step")):
            raise ValueError(f"not one replicate: {s['key']} differs between the two runs")
        if s["kind"] != "step":
            continue
        da, db = night(s), night(t)
        out["steps"] += 1
        for n, row in out["within"].items():
            row[0] += da is not None and da <= n
            row[1] += db is not None and db <= n
        if db is not None and (da is None or da > db):
            out["never" if da is None else "later"].append({"key": s["key"], "machine": s["machine"],
                                                            "step": s["step"], "noise": round(s["noise"], 4),
                                                            "start": s["start"], "a": da, "b": db})
    return out


def _sum(rows: dict, pred) -> list:
    tot = None
    for k, v in rows.items():
        if pred(k.split("|")):
            tot = list(v) if tot is None else [a + b for a, b in zip(tot, v)]
    return tot or []


BAND_MAX = {name: hi for hi, name in BANDS}


def _in(band: str, limit: float) -> bool:
    return BAND_MAX[band] <= limit


def targets(m: dict) -> dict:
    """The issue's targets, measured: A/A per 1,000 series-nights; +10% the night it lands at noise <= 2%; +5%
    within two nights at noise <= 1%; +0.5%/night drift flagged before +5% at noise <= 0.5%."""
    aa = _sum(m["aa"], lambda k: True)
    ten = _sum(m["steps"], lambda k: float(k[2]) == 0.10 and _in(k[1], 0.02))
    five = _sum(m["steps"], lambda k: float(k[2]) == 0.05 and _in(k[1], 0.01))
    drift = _sum(m["drifts"], lambda k: float(k[2]) == 0.005 and _in(k[1], 0.005))
    return {"aa_series_nights": aa[0], "aa_sent": aa[1], "aa_confirmed": aa[2], "aa_expected": aa[3],
            "aa_false_drifts": aa[4],
            "aa_per_1000": 1000 * aa[2] / max(aa[0], 1), "aa_expected_per_1000": 1000 * aa[3] / max(aa[0], 1),
            "ten_night_it_lands": ten[1] / max(ten[0], 1) if ten else None, "ten_n": ten[0] if ten else 0,
            "five_within_two": five[2] / max(five[0], 1) if five else None, "five_n": five[0] if five else 0,
            "drift_before_5pc": drift[1] / max(drift[0], 1) if drift else None, "drift_n": drift[0] if drift else 0}


def _aa_weight(s: dict) -> tuple[int, int, float]:
    """One series' A/A series-nights, the nights it was sent to the rerun, and its expected confirmed false alerts
    (the sum of those nights' probabilities of being confirmed)."""
    aa = [x for x in s["seen"] if x[0] - 1 < s["start"]]
    return len(aa), sum(bool(x[1]) for x in aa), float(sum(x[5] for x in aa))


def aa_spread(each: Sequence[Sequence[dict]], top: int = 5) -> dict:
    """The A/A estimate's spread over independent replicates (``each``: every replicate's series): each
    replicate's expected confirmed false alerts per 1,000 series-nights, their mean, standard deviation and the
    mean's standard error; and the series that weigh most (a replicate's figure is often one series' night after
    night: a false change whose level before drew low is sent to the rerun every night until it is confirmed or
    its evidence fades)."""
    rates, heavy = [], []
    for k, got in enumerate(each):
        nights = exp = 0.0
        for s in got:
            n, sent, e = _aa_weight(s)
            nights += n
            exp += e
            if e > 0:
                heavy.append({"replicate": k, "machine": s["machine"], "key": s["key"], "cell": s["cell"],
                              "noise": round(s["noise"], 4), "two_state": s["two_state"], "sent": sent,
                              "expected": round(e, 4)})
        rates.append(1000 * exp / max(nights, 1))
    r = np.array(rates, dtype=float)
    sd = float(r.std(ddof=1)) if len(r) > 1 else None  # (JSON: no NaN) one replicate has no spread
    return {"per_replicate_per_1000": [round(x, 4) for x in rates], "mean_per_1000": float(r.mean()) if len(r) else 0.0,
            "sd_per_1000": sd, "se_per_1000": sd / math.sqrt(len(r)) if sd is not None else None,
            "heaviest": sorted(heavy, key=lambda h: -h["expected"])[:top]}


# ------------------------------------------------------------------ the bound the noise sets

AA_TARGET = 0.05 / 1000  # confirmed false alerts per series-night the issue allows


def bounds(pool: np.ndarray, step: float, nights: int, reruns: int, alpha: float = AA_TARGET, draws: int = 400_000,
           seed: int = 0) -> float:
    """The power of an oracle that knows the level before and the noise's distribution exactly (the series' pool),
    on ``nights`` nights after the step plus ``reruns`` reruns, at a false-alert rate of ``alpha`` per
    series-night: it calls a step when the mean (or, whichever is more powerful on this pool, the median) of those
    runs' deviations exceeds its A/A (1 - alpha) quantile. A reference for what these measurements allow: the
    nightly job does not know the level (it estimates it from the history) nor the case's tails (it must guard
    against tails it has not seen), so it does worse; a test that weighs each draw by the pool's density could do
    somewhat better on heavy tails, so this is no strict upper bound."""
    rng = np.random.default_rng(seed)
    k = nights + reruns
    null = rng.choice(pool, size=(draws, k))
    alt = rng.choice(pool, size=(draws // 8, k)) + math.log1p(step)
    best = 0.0
    for stat in (np.mean, np.median):
        h0 = stat(null, axis=1)
        thr = float(np.quantile(h0, 1 - alpha)) if alpha * draws >= 20 else float(h0.max())
        best = max(best, float(np.mean(stat(alt, axis=1) > thr)))
    return best


_BOUNDS: dict[tuple[int, str], float] = {}


def target_bounds(pool: np.ndarray) -> dict[str, float]:
    """:func:`bounds` for the two step targets on this pool (memoized: the pools are a few dozen cells): +10% on
    the night it lands (that night and the job's reruns that night, CONFIRM_RUNS_MAX) and +5% within two nights
    (two nights and the reruns)."""
    out = {}
    for name, step, nights in (("ten", 0.10, 1), ("five", 0.05, 2)):
        key = (id(pool), name)
        if key not in _BOUNDS:
            _BOUNDS[key] = bounds(pool, step, nights, confirmation.CONFIRM_RUNS_MAX)
        out[name] = _BOUNDS[key]
    return out


# ------------------------------------------------------------------ the command

def run(size: str = "full", replicates: int | None = None, seed: int = 20261125, jobs: int = 1,
        log=None) -> dict:
    """The replay at ``size`` (SIZES): every replicate's series and the measures over them."""
    cfg = dict(SIZES[size])
    if replicates is not None:
        cfg["replicates"] = replicates
    w = world()
    seeds = [seed + k for k in range(cfg["replicates"])]
    t0 = time.perf_counter()
    each: list[list[dict]] = []  # every replicate's series, in seed order
    if jobs > 1 and len(seeds) > 1:
        import multiprocessing as mp

        with mp.get_context("fork").Pool(min(jobs, len(seeds)), initializer=_init, initargs=(w,)) as pool:
            args = [(s, cfg["share"], cfg["mc"], cfg["steps"], cfg["slopes"]) for s in seeds]
            for k, got in enumerate(pool.imap(_job, args)):
                each.append(got)
                if log:
                    log(f"replicate {k + 1}/{len(seeds)} done after {time.perf_counter() - t0:.0f} s")
    else:
        for k, s in enumerate(seeds):
            each.append(replicate(w, s, cfg["share"], cfg["mc"], cfg["steps"], cfg["slopes"]))
            if log:
                log(f"replicate {k + 1}/{len(seeds)} done after {time.perf_counter() - t0:.0f} s")
    series = [s for got in each for s in got]
    m = measures(series)
    return {"schema": "robocache-replay/1", "size": size, "seed": seed, "replicates": cfg["replicates"],
            "share": cfg["share"], "templates": len(w["templates"]), "series": len(series),
            "cells": dict(sorted(_count(s["cell"] for s in series).items())), "measures": m, "targets": targets(m),
            "per_replicate": [{"seed": s, **targets(measures(got))} for s, got in zip(seeds, each)],
            "aa_spread": aa_spread(each), "memory_keys": memory_keys(series),
            "wall_s": round(time.perf_counter() - t0, 1), "every_series": series}


_W: dict | None = None


def _init(w: dict) -> None:
    global _W
    _W = w


def _job(args: tuple) -> list[dict]:
    return replicate(_W, *args)


def _count(xs) -> dict:
    out: dict = defaultdict(int)
    for x in xs:
        out[x] += 1
    return out


def markdown(doc: dict) -> str:
    """The replay's tables: targets, then A/A, steps and drifts per provider and noise band."""
    t = doc["targets"]
    pct = lambda x: "-" if x is None else f"{100 * x:.0f}%"  # noqa: E731
    lines = [f"Replay: {doc['replicates']} replicate(s) of {doc['templates']} templates x {doc['share']:.0%} "
             f"(seed {doc['seed']}, {doc['series']} series)", "",
             "| target | measured |", "| --- | --- |",
             f"| A/A <= 0.05 confirmed per 1,000 series-nights | {t['aa_confirmed']} in {t['aa_series_nights']:,} = "
             f"{t['aa_per_1000']:.3f}; expected {t['aa_expected_per_1000']:.3f} ({t['aa_sent']} sent to the rerun; "
             f"{t['aa_false_drifts']} false drifts) |",
             f"| +10% the night it lands, noise <= 2%, >= 90% | {pct(t['ten_night_it_lands'])} of {t['ten_n']} |",
             f"| +5% within two nights, noise <= 1%, >= 80% | {pct(t['five_within_two'])} of {t['five_n']} |",
             f"| +0.5%/night flagged before +5%, noise <= 0.5%, >= 90% | {pct(t['drift_before_5pc'])} of "
             f"{t['drift_n']} |", ""]
    mk = doc.get("memory_keys")
    if mk and mk["reproposals"]:
        rate = lambda x: "-" if x is None else f"{100 * x:.1f}%"  # noqa: E731
        lines += [f"The memory's key (series and the runs around the change point) against the change id: "
                  f"{mk['reproposals']} re-proposals of a remembered refuted step, {mk['shift_0']} at the same place, "
                  f"{mk['shift_1']} one night off, {mk['shift_more']} further; of the first two the change id "
                  f"missed {mk['old_key_drifts']} ({rate(mk['old_key_drift_rate'])}), the memory's key "
                  f"{mk['new_key_drifts']} ({rate(mk['new_key_drift_rate'])})", ""]
    sp = doc.get("aa_spread")
    if sp and sp["sd_per_1000"] is not None:
        r = sp["per_replicate_per_1000"]
        lines += [f"A/A expected per 1,000 series-nights, per replicate: mean {sp['mean_per_1000']:.3f}, sd "
                  f"{sp['sd_per_1000']:.3f} (the mean's standard error {sp['se_per_1000']:.3f}), {min(r):.3f}-"
                  f"{max(r):.3f} over {len(r)} replicates (sorted: {', '.join(f'{x:.4f}' for x in sorted(r))}; "
                  f"without the largest: mean {sum(sorted(r)[:-1]) / (len(r) - 1):.3f}); the heaviest series: "
                  + "; ".join(f"{md_text(h['machine'])} `{code_span(h['key'])}` ({h['cell']} pool, noise "
                              f"{100 * h['noise']:.1f}%{', two-state' if h['two_state'] else ''}): "
                              f"{h['expected']:.2f} over {h['sent']} night(s) sent" for h in sp["heaviest"][:3]), ""]
    m = doc["measures"]
    lines += ["| provider | noise | A/A series-nights | sent | confirmed | expected per 1,000 | false drifts |",
              "| --- | --- | ---: | ---: | ---: | ---: | ---: |"]
    for k, (n, raw, kept, exp, dr) in m["aa"].items():
        p, b = k.split("|")
        lines.append(f"| {p} | {b} | {n} | {raw} | {kept} | {1000 * exp / max(n, 1):.3f} | {dr} |")
    lines += ["", "| A/A series | series-nights | sent | confirmed | expected per 1,000 | false drifts |",
              "| --- | ---: | ---: | ---: | ---: | ---: |"]
    for k, (n, raw, kept, exp, dr) in m["aa_by_kind"].items():
        lines.append(f"| {k} | {n} | {raw} | {kept} | {1000 * exp / max(n, 1):.3f} | {dr} |")
    lines += ["", "| provider | noise | step | n | the night it lands | within 2 | within 10 | placed |",
              "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for k, (n, one, two, ten, placed, _ran) in m["steps"].items():
        p, b, z = k.split("|")
        lines.append(f"| {p} | {b} | +{float(z):.0%} | {n} | {pct(one / n)} | {pct(two / n)} | {pct(ten / n)} | "
                     f"{placed}/{ten} |")
    lines += ["", "| target | history before the step | n | met |", "| --- | --- | ---: | ---: |"]
    for k, (n, got) in m["targets_by_history"].items():
        t_, hb = k.split("|")
        what = "+10% the night it lands, noise <= 2%" if t_ == "ten" else "+5% within two nights, noise <= 1%"
        lines.append(f"| {what} | {hb} nights | {n} | {pct(got / n)} |")
    lines += ["", "| target | provider | noise | n | an oracle's power (mean over the series) |", "| --- | --- | --- | ---: | ---: |"]
    for k, (n, tot) in m["bounds"].items():
        t_, p, b = k.split("|")
        what = "+10% the night it lands" if t_ == "ten" else "+5% within two nights"
        lines.append(f"| {what} | {p} | {b} | {n} | {pct(tot / n)} |")
    lines += ["", "| provider | noise | slope | n | flagged before +5% | reported as a drift |",
              "| --- | --- | ---: | ---: | ---: | ---: |"]
    for k, (n, early, as_drift) in m["drifts"].items():
        p, b, z = k.split("|")
        lines.append(f"| {p} | {b} | +{float(z):.1%}/night | {n} | {pct(early / n)} | {pct(as_drift / n)} |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    """``python -m robocache.bench.regressions replay``: the out-of-sample replay of the nightly check."""
    ap = argparse.ArgumentParser(prog="python -m robocache.bench.regressions replay", allow_abbrev=False,
                                 description="Replay the nightly check --confirm over the real run-to-run noise, "
                                             "out of sample (docs/regressions.md)")
    ap.add_argument("--size", choices=sorted(SIZES), default="full")
    ap.add_argument("--replicates", type=int, default=None)
    ap.add_argument("--seed", type=int, default=20261125)
    ap.add_argument("--jobs", type=int, default=1)
    ap.add_argument("--json", help="write the measures (and every series) as JSON to this file")
    ap.add_argument("--markdown", help="write the tables to this file (also printed)")
    args = ap.parse_args(argv)
    if args.replicates is not None and args.replicates < 1:
        ap.error("--replicates must be at least 1")
    if args.jobs < 1:
        ap.error("--jobs must be at least 1")
    from .. import store

    doc = run(args.size, args.replicates, args.seed, args.jobs, log=lambda s: print(s, file=sys.stderr))
    text = markdown(doc)
    print(text)
    if args.markdown:
        store.atomic_write(args.markdown, text)
    if args.json:
        store.atomic_write(args.json, json.dumps(doc, indent=1, allow_nan=False))
    return 0
