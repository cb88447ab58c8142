"""The nightly job's alerts, replayed out of sample over the real run-to-run noise of the committed records.

``python -m robocache.bench.regressions replay [--size full|ci] [--replicates N] [--seed S] [--jobs J]
[--templates all|call-cost]``
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
- **call-cost series on their ratio**: a call-cost template (``noise.HOST_TIMERS``) whose committed records carry
  the interleaved ratio (``dispatch.interleaved``, :func:`.records.call_ratio`) draws ratio nights: its pool is the
  run-to-run deviations of the ratio's p50, built the same way (pairs of runs of one commit, its own fold; cells
  the case, its machine and provider, the provider, all, each ``|host-ratio``), its level, step, drift and states
  are the ratio's, and each night's record carries an interleaved section (:func:`interleaved_night`), so that
  ``check`` judges it on the ratio (series ``measure`` ``call_ratio``) as at night. A call-cost template without
  the ratio keeps its host time. The ratio's prior follows the fold split where the other fold holds ratio runs;
  where it holds none (now: the three robocache call-cost cases fall in one fold) it is fitted on every committed
  record, in sample (:func:`world`'s ``ratio_in_sample``); the report says which and how many series took each path;
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
nights, the confirmed steps placed on their own commit, of them those the noise lets be placed (:func:`placeable`
on the last night before the step and the first night on it, :attr:`Plan.around`) and those of them placed right,
drifts flagged before they total +5%; and, where a rate falls short, the bound the noise itself sets
(:func:`bounds`: the power of a test that knows the level and the noise exactly, on the nights and reruns the
nightly job has). The in-sample quality test (tests/test_regress_quality.py) asks its step targets where the noise
allows them with these same oracles: :func:`attainable` over :func:`target_bounds`, and :func:`placeable` for the
placement target.
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

from ..schema import Case, Dispatch, Env, Interleaved, Method, Record, fingerprint, series_key
from . import changepoints, confirmation, memory as mem, noise
from .alerts import code_span, md_text
from .records import call_ratio, p50, processes_of, synthetic, synthetic_env, synthetic_method, unhealthy

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
    # a call-cost case whose committed records carry the interleaved ratio (records.call_ratio): its section's
    # figures, medians over those records (None: no ratio; its nights are host times)
    interleaved: Interleaved | None = None

    @property
    def ratio(self) -> float | None:
        """Its interleaved ratio's median (public call / bare launch), None where its records carry none."""
        return float(self.interleaved.ratio_p50) if self.interleaved is not None else None

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
    ratios: dict[tuple, list[Record]] = defaultdict(list)  # the series' records of any suite that carry its ratio
    for r in records:
        if unhealthy(r) or r.synthetic:
            continue
        c = r.case
        k = (r.env.machine if r.env is not None else None, c.id, c.dtype, c.provider, c.grid_version)
        if call_ratio(r) is not None:
            ratios[k].append(r)
        if r.suite == "nightly":
            by[k].append(r)
    out = []
    for k, rs in sorted(by.items()):
        within = [float((r.method.noise if r.method is not None else None) or 0.0) for r in rs]
        timers = Counter(str((r.method.timer if r.method is not None else None) or "cuda_event") for r in rs)
        timer = timers.most_common(1)[0][0]
        out.append(Template(machine=k[0], case=rs[0].case,
                            t_us=float(np.median([p50(r) for r in rs])), within=float(np.median(within)),
                            timer=timer, interleaved=_median_section(ratios.get(k, []))
                            if timer in noise.HOST_TIMERS else None))
    return out


def _median_section(rs: Sequence[Record]) -> Interleaved | None:
    """The interleaved section of a call-cost template: each figure's median over its records that carry one
    (a ratio's p20 <= p50 <= p80 and its rounds, as :func:`.records.call_ratio` reads them); None without any."""
    secs = [r.dispatch.interleaved for r in rs if r.dispatch is not None and r.dispatch.interleaved is not None]
    if not secs:
        return None
    med = {f: float(np.median([getattr(x, f) for x in secs])) for f in Interleaved.__struct_fields__
           if f != "noise_target_met"}
    mid = med["ratio_p50"]
    return Interleaved(rounds=max(1, round(med["rounds"])), calls_per_loop=max(1, round(med["calls_per_loop"])),
                       bare_us=med["bare_us"], public_us=med["public_us"], public_cupy_us=med["public_cupy_us"],
                       ratio_p20=min(med["ratio_p20"], mid), ratio_p50=mid, ratio_p80=max(med["ratio_p80"], mid),
                       cupy_ratio_p20=med["cupy_ratio_p20"], cupy_ratio_p50=med["cupy_ratio_p50"],
                       cupy_ratio_p80=med["cupy_ratio_p80"], noise_target_met=True)


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


def _ratio_cells(machine: str, case_id: str, dtype: str, prov: str) -> list[tuple]:
    """The pool cells of a call-cost case's interleaved ratio (:func:`.records.call_ratio`), most specific first:
    the case, its machine and provider, the provider, its base provider, all; every provider name suffixed
    ``|host-ratio`` (``noise.RATIO_SUFFIX``, as the priors key the ratio's fit), so that no ratio deviation shares a
    cell with a time's. No time bucket: a ratio has none (nor has its prior)."""
    r = noise.RATIO_SUFFIX
    cells = [("case", machine, case_id, dtype, prov + r), ("machine", machine, prov + r), ("provider", prov + r),
             ("provider", prov.split("@")[0] + r), ("all" + r,)]
    return list(dict.fromkeys(cells))  # a provider without a version is its own base: one cell


def _pairs(xs: Sequence[float]) -> np.ndarray:
    """The signed one-run deviations of runs ``xs`` (logs) of one series and commit: each pair's
    +-(x_i - x_j) / sqrt(2)."""
    x = np.array(xs)
    i, j = np.triu_indices(len(x), 1)
    d = (x[i] - x[j]) / math.sqrt(2)
    return np.concatenate([d, -d])


def pools(records: Sequence[Record], fold: int) -> dict[tuple, np.ndarray]:
    """Every cell's signed run-to-run deviations from the records of cases in ``fold``: per series and commit, each
    pair of its runs gives +-log(t_i / t_j) / sqrt(2). A call-cost record that carries its interleaved ratio
    (:func:`.records.call_ratio`) gives its ratio's too, the same way (pairs of runs of one series and commit), to
    the ratio's cells (:func:`_ratio_cells`): a call-cost template with a ratio draws its nights from them. A
    record timed in K > 1 fresh processes (``run --processes K``, :func:`.records.processes_of`) gives none: the
    replay draws one-process nights, as the check's priors are one-process fits (:func:`.noise.fit_priors` fits
    K-process runs apart), and a pair of a K-process and a one-process run is no run-to-run ratio of either."""
    groups: dict[tuple, list[float]] = defaultdict(list)
    ratios: dict[tuple, list[float]] = defaultdict(list)
    for r in records:
        if (unhealthy(r) or r.synthetic or not r.git_commit or fold_of(r.case) != fold
                or processes_of(r) != 1):
            continue
        timer = r.method.timer if r.method is not None else None
        groups[(series_key(r), r.git_commit, timer)].append(math.log(p50(r)))
        cr = call_ratio(r)
        if cr is not None:
            ratios[(series_key(r), r.git_commit)].append(math.log(cr[0]))
    cells: dict[tuple, list[float]] = defaultdict(list)
    for (sk, _commit, timer), xs in groups.items():
        if len(xs) < 2:
            continue
        d = _pairs(xs)
        own, *rest = _cells(sk.machine, sk.case_id, sk.dtype, sk.provider, math.exp(float(np.mean(xs))), timer)
        # a host-timed case's deviations go to its own and the host-timed cells, never the device cells
        for cell in [own, *(rest[:len(rest) // 2] if noise._timer_suffix(timer) else rest)]:
            cells[cell].extend(d.tolist())
    for (sk, _commit), xs in ratios.items():
        if len(xs) < 2:
            continue
        d = _pairs(xs)
        for cell in _ratio_cells(sk.machine, sk.case_id, sk.dtype, sk.provider):
            cells[cell].extend(d.tolist())
    return {k: np.sort(np.array(v)) for k, v in cells.items()}


def pool_for(pl: dict[tuple, np.ndarray], tpl: Template) -> tuple[np.ndarray, str]:
    """The template's pool (the most specific cell with POOL_MIN values) and the cell's kind: for a call-cost
    template with a ratio (:attr:`Template.ratio`) its ratio's cells first (the cell's kind then ``ratio <kind>``),
    else, and for every other template, its time's."""
    c = tpl.case
    if tpl.ratio is not None:
        for cell in _ratio_cells(tpl.machine, c.id, c.dtype, c.provider):
            v = pl.get(cell)
            if v is not None and len(v) >= POOL_MIN:
                return v, "ratio " + cell[0]
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
    measures: set[str] = field(default_factory=set)  # what the check judged its changes by (series "measure")
    # a step's nights either side of it as the check reads them (:meth:`saw`): [the last night before the step, the
    # first night on it], each as a log-ratio to the level before (None: no such night the check reads)
    around: list[float | None] = field(default_factory=lambda: [None, None])

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
    def on_ratio(self) -> bool:
        """Its nights are interleaved ratios (a call-cost template with a ratio pool): its value, level, step and
        reruns are the ratio's, and its records carry ``dispatch.interleaved``, so the check judges the ratio."""
        return self.cell.startswith("ratio")

    @property
    def path(self) -> str:
        """What the check judges it by: ``ratio`` (a call-cost series' interleaved ratio), ``host`` (a call-cost
        series' host time per call, its records carry no ratio) or ``device`` (every other series)."""
        return "ratio" if self.on_ratio else "host" if self.tpl.timer in noise.HOST_TIMERS else "device"

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
        """The true log-value of ``night`` (its time, or on a ratio its ratio) without noise, state or contention."""
        x = math.log(self.tpl.ratio if self.on_ratio else self.tpl.t_us)
        if night >= self.start:
            x += math.log1p(self.step) + math.log1p(self.slope) * (night - self.start + 1)
        return x

    def slow(self, night: int, rng: np.random.Generator) -> bool:
        if not self.state:
            return False
        return night % 2 == 1 if self.state[1] == 0.5 else bool(rng.random() < self.state[1])

    def night(self, night: int, rng: np.random.Generator) -> tuple[float, bool]:
        """(the night's value: its time, or on a ratio its ratio; flagged contended). A contended night's slowdown
        is the host's: on a ratio it cancels (the public call and the bare launch are timed interleaved); what the
        host's state does to a ratio is in its pool, the real runs' ratios. The flag is kept: the check drops it."""
        x = self.level(night) + float(rng.choice(self.pool))
        if self.slow(night, rng):
            x += math.log1p(self.state[0])
        slow, flagged = self.contended.get(night, (0.0, False))
        return math.exp(x + (0.0 if self.on_ratio else math.log1p(slow))), flagged

    def saw(self, night: int, value: float, flagged: bool) -> None:
        """Keep a step's nights either side of it (:attr:`around`), as :func:`placeable` reads them: ``value`` is
        night ``night``'s (its time, or on a ratio its ratio), taken as a log-ratio to the level before the step
        (:meth:`level`: without state or contention; a two-state series' fast state). A night flagged contended is
        no point of the check's: the last night before the step is the last one not flagged, and where the step's
        own first night is flagged the check reads no record of its commit (None: no placement can name it).
        Reads no random numbers: the series' nights are what they were."""
        if self.kind != "step" or night > self.start or (flagged and night < self.start):
            return
        self.around[1 if night == self.start else 0] = None if flagged else math.log(value) - self.level(self.start - 1)

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


def record(p: Plan, value: float, night: int, *, rerun: int = 0, contended: bool = False) -> Record:
    """A synthetic record with the fields the check reads (marked synthetic; :func:`.records.synthetic`). ``value``
    is the night's time, or for a plan on the ratio (:attr:`Plan.on_ratio`) its interleaved ratio: the record then
    carries ``dispatch.interleaved`` (:func:`interleaved_night`) and its host time moves with the ratio."""
    stamp = _created(night, rerun)
    run = f"{stamp[:10].replace('-', '')}T03{rerun:02d}00Z-{p.tpl.machine[-4:]}{night:03d}" + (f"r{rerun}" if rerun else "")
    t_us, dispatch = value, None
    if p.on_ratio:
        dispatch = Dispatch(device_us=None, gpu_keeps_up=None, interleaved=interleaved_night(p.tpl.interleaved, value))
        t_us = p.tpl.t_us * value / p.tpl.interleaved.ratio_p50
    return synthetic(run_id=run, created=stamp, git_commit=f"{night:04d}" + "c" * 36, case=p.tpl.case, t_us=t_us,
                     noise=p.tpl.within, env=p.env, method=p.method, contended=contended, dispatch=dispatch)


def interleaved_night(tpl: Interleaved, ratio: float) -> Interleaved:
    """The interleaved section of a synthetic night whose ratio (public call / bare launch, median over the rounds)
    is ``ratio``: the template's section (its rounds and loop) with every ratio figure scaled by ``ratio`` over the
    template's median (the rounds' p20..p80 spread, hence the within-run sigma :func:`.records.call_ratio` reads,
    kept) and the public call's time with it, the bare launch's held."""
    k = ratio / tpl.ratio_p50
    return Interleaved(rounds=tpl.rounds, calls_per_loop=tpl.calls_per_loop, bare_us=tpl.bare_us,
                       public_us=tpl.public_us * k, public_cupy_us=tpl.public_cupy_us,
                       ratio_p20=tpl.ratio_p20 * k, ratio_p50=ratio, ratio_p80=tpl.ratio_p80 * k,
                       cupy_ratio_p20=tpl.cupy_ratio_p20, cupy_ratio_p50=tpl.cupy_ratio_p50,
                       cupy_ratio_p80=tpl.cupy_ratio_p80, noise_target_met=tpl.noise_target_met)


# ------------------------------------------------------------------ scenarios and one replicate

def plans(tpls: Sequence[Template], pls: dict[int, dict[tuple, np.ndarray]], rng: np.random.Generator,
          steps: Sequence[float] = STEP_SIZES, slopes: Sequence[float] = DRIFT_SLOPES,
          kind: str | None = None) -> list[Plan]:
    """Each template's scenario for one replicate: a third A/A, half a step (of ``steps``), a sixth a drift (of
    ``slopes``), each landing after HISTORY nights; a tenth two-state, a tenth with contended nights. ``kind``
    (``"aa"``, ``"step"`` or ``"drift"``): every plan of that kind (the tests' A/A and planted steps), drawn
    otherwise as before."""
    if kind not in (None, "aa", "step", "drift"):
        raise ValueError(f"kind must be aa, step or drift, got {kind!r}")
    out = []
    for tpl in tpls:
        pool, cell = pool_for(pls[tpl.fold], tpl)
        p = Plan(tpl=tpl, pool=pool, cell=cell)
        u = rng.random()
        if kind is not None:  # then drawn as any plan of that kind
            u = {"aa": 0.0, "step": 0.5, "drift": 0.9}[kind]
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
              slopes: Sequence[float] = DRIFT_SLOPES, memory: bool = True, kind: str | None = None) -> list[dict]:
    """One replicate: every plan's nights, the nightly check after each night, per series what each check did.
    ``memory``: the nightly jobs carry the memory of refuted looks from night to night (False: every change point
    at its first look, as before issue 27; the same nights and reruns, for :func:`step_delays`)."""
    rng = np.random.default_rng(seed)
    tpls = [t for t in world["templates"] if share >= 1 or rng.random() < share]
    ps = plans(tpls, world["pools"], rng, steps, slopes, kind)
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
                    ps[i].saw(n, t, flagged)
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

    with priors_of({**world["priors"][fold], **world.get("ratio_priors", {}).get(fold, {})}):
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
            if c is not None:
                p.measures.add(c.series.get("measure", "time"))
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
            "path": p.path, "measures": sorted(p.measures),
            "bound": bound,
            "noise": p.noise, "kind": p.kind, "step": p.step, "slope": p.slope, "start": p.start,
            "two_state": p.state is not None, "contended": bool(p.contended),
            "state": list(p.state) if p.state else None, "notes": p.notes, "reproposed": p.reproposed,
            "around": list(p.around) if p.kind == "step" else None,
            "seen": [[s.night, s.raw, s.kept, s.drift, s.placed, s.p_confirm] for s in seen]}


def committed_dirs(root: str | Path = PRIOR_DIR) -> list[Path]:
    """The folders of ``results/`` the committed priors are fitted on: every one but ``local/`` (``make run``'s
    own runs, which git ignores: this machine's, never part of what is measured here)."""
    base = Path(root) if Path(root).is_absolute() else REPO / root
    return sorted(d for d in base.iterdir() if d.is_dir() and d.name != "local")


def world(dirs: Sequence[str | Path] = TEMPLATE_DIRS, prior_dir: str | Path = PRIOR_DIR,
          ratio_in_sample: bool = True) -> dict:
    """Templates, each fold's noise pools, and each fold's priors (fitted on the other fold's records).

    The interleaved ratio's prior (``<provider>|host-ratio``, :func:`.noise.prior_ratio_noise`) follows the same
    rule, but only three call-cost cases carry the ratio in the committed records, and the split puts all three in
    one fold: that fold's priors, fitted on the other fold, hold no ratio fit, and its check would judge the ratio
    against the host time's prior (20-70% between runs), which the nightly job, whose priors hold the ratio's fit,
    does not. ``ratio_in_sample``: such a fold's check takes the ratio's fit from every committed record instead
    (``ratio_priors``; in sample: the nights of its ratio series are drawn from some of the very deviations it was
    fitted on); False: the strict split (the host time's prior). ``ratio_prior`` says which, per fold."""
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
    whole = None
    ratio_pri: dict[int, dict[str, Any]] = {}
    ratio_how: dict[int, str] = {}
    for f in range(FOLDS):
        if not any(t.fold == f and pool_for(pls[f], t)[1].startswith("ratio") for t in usable):
            continue
        if _ratio_fits(pri[f]):
            ratio_how[f] = "out of sample (the other fold's ratio runs)"
        elif ratio_in_sample:
            whole = noise.fit_priors(every) if whole is None else whole
            ratio_pri[f] = _ratio_fits(whole)
            ratio_how[f] = ("in sample (the other fold holds no ratio runs): every committed ratio run's fit, "
                            + ", ".join(f"{k} {100 * v['*']['sigma']:.2f}% of {v['*']['n']}" for k, v in
                                        sorted(ratio_pri[f].items())))
        else:
            ratio_how[f] = "none: the other fold holds no ratio runs; the host time's prior (strict split)"
    return {"templates": usable, "pools": pls, "priors": pri, "ratio_priors": ratio_pri, "ratio_prior": ratio_how}


def _ratio_fits(priors: dict[str, Any]) -> dict[str, Any]:
    """The interleaved ratio's fits of a priors document (``<provider>|host-ratio`` with enough deviations)."""
    return {k: v for k, v in priors.items() if k.endswith(noise.RATIO_SUFFIX)
            and (v.get("*") or {}).get("n", 0) >= noise.PRIOR_MIN_N}


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
    # steps per (provider, band, size): [series, found the night after, within 2, within AFTER, placed, checked,
    # confirmed at all, of those placeable (placeable_around), of those placed]
    steps: dict[tuple[str, str, float], list[int]] = field(
        default_factory=lambda: defaultdict(lambda: [0, 0, 0, 0, 0, 0, 0, 0, 0]))
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
        """A step: how soon it was found and placed, whether the check ran the night it landed, and, of the steps
        confirmed at all, those the noise lets be placed (:func:`placeable_around` on its nights either side of the
        step) and those of them placed right; for the targets' sizes, by the history it landed after, with the
        bound the noise sets."""
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
            can = placeable_around(s.get("around"), s["step"])
            row[6] += 1
            row[7] += can
            row[8] += can and bool(placed)
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


# The two step targets (issue 14): the rate each asks, and the floor under which a set of series fails whatever the
# oracle says (the CI replay's bars, tests/test_regress_replay.py: a method under them is broken, not unlucky)
STEP_TARGETS = {"ten": 0.90, "five": 0.80}
STEP_FLOORS = {"ten": 0.75, "five": 0.60}
# How far under the oracle a series may fall where the oracle itself is under target + BOUND_MARGIN: the oracle
# knows the level and the pool, the nightly job estimates the level from the history and must first send the night
# to the rerun on that night alone; and :func:`bounds` is a Monte Carlo figure (1 - alpha quantile from 400,000
# draws). Where every series' bound is at least target + BOUND_MARGIN the target is asked unchanged.
BOUND_MARGIN = 0.05


def attainable(bounds_: Sequence[float], target: str, margin: float = BOUND_MARGIN) -> float:
    """The rate a step target (``"ten"`` or ``"five"``, :func:`target_bounds`' names) asks of a set of series, each
    with its oracle's bound: every series counts ``min(target, bound - margin)``, the set the mean of those, and
    never less than the target's floor (``STEP_FLOORS``). Where the noise allows the target on every series it is
    the target itself; where a series' noise does not, the set is asked what the noise allows on it, less the
    margin; a set whose noise allows little is still asked the floor, so the target never becomes one that cannot
    fail."""
    if not len(bounds_):
        raise ValueError(f"no series to judge the {target!r} target on")
    rate = STEP_TARGETS[target]
    return max(STEP_FLOORS[target], min(rate, float(np.mean([min(rate, b - margin) for b in bounds_]))))


def placeable(before: float, after: float, step: float) -> bool:
    """Whether a step of ``step`` can be placed on its commit by an oracle that knows the levels before and after it
    and the noise's distribution (symmetric, its density falling with the distance): ``before`` and ``after`` are the
    last night before the step and the first night on it, as log-ratios to the level before. The placement the
    oracle gets right most often is the likeliest split (maximum likelihood, every commit equally likely a priori);
    the first night on the step is likelier at the level before where it is nearer that level than the step's
    (``after < log1p(step) / 2``), so the split one night later is likelier than the right one, and likewise one
    night earlier where ``before`` is nearer the step's level. Either way these nights point at a neighbour, and no
    placement rule can be expected to name the right commit on them: the noise does not allow it. Where both
    nights are on their own level's side the right split is likelier than either neighbour (a necessary condition,
    not a sufficient one: two nights further off may still tip it)."""
    mid = math.log1p(step) / 2
    return before < mid < after


def placeable_around(around: Sequence[float | None] | None, step: float) -> bool:
    """:func:`placeable` on a replayed step series' nights either side of its step (:attr:`Plan.around`, its
    series' ``around``): False where either is missing (no night before the step the check reads, or the step's own
    first night flagged contended, so that the check reads no record of its commit)."""
    if not around or around[0] is None or around[1] is None:
        return False
    return placeable(around[0], around[1], step)


# ------------------------------------------------------------------ the command

TEMPLATE_SETS = ("all", "call-cost")  # --templates: every template, or the call-cost ones alone


def run(size: str = "full", replicates: int | None = None, seed: int = 20261125, jobs: int = 1,
        log=None, only: str = "all") -> dict:
    """The replay at ``size`` (SIZES): every replicate's series and the measures over them. ``only``
    ``"call-cost"``: the call-cost templates alone (noise.HOST_TIMERS; a few per machine), for their rates over
    many replicates: each check call then sees only them, and as the screen and the confirmation are per series
    (the false discovery rate over all series is the no-rerun path's), each series fares as in the full grid."""
    if only not in TEMPLATE_SETS:
        raise ValueError(f"templates must be one of {', '.join(TEMPLATE_SETS)}, got {only!r}")
    cfg = dict(SIZES[size])
    if replicates is not None:
        cfg["replicates"] = replicates
    w = world()
    if only == "call-cost":
        w = {**w, "templates": [t for t in w["templates"] if t.timer in noise.HOST_TIMERS]}
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
    return {"schema": "robocache-replay/1", "size": size, "seed": seed, "replicates": cfg["replicates"], "only": only,
            "share": cfg["share"], "templates": len(w["templates"]), "series": len(series),
            "cells": dict(sorted(_count(s["cell"] for s in series).items())), "measures": m, "targets": targets(m),
            "paths": paths(w, series),
            "per_replicate": [{"seed": s, **targets(measures(got))} for s, got in zip(seeds, each)],
            "aa_spread": aa_spread(each), "memory_keys": memory_keys(series),
            "wall_s": round(time.perf_counter() - t0, 1), "every_series": series}


def paths(w: dict, series: Sequence[dict]) -> dict:
    """What the check judged the series by (:attr:`Plan.path`): per path (``ratio``: a call-cost series on its
    interleaved ratio; ``host``: a call-cost series on its host time, its records carrying no ratio; ``device``)
    the templates and the series that took it, the measures of the call-cost paths, and the ratio's prior per fold
    (:func:`world`)."""
    tpl_paths = _count("ratio" if pool_for(w["pools"][t.fold], t)[1].startswith("ratio")
                       else "host" if t.timer in noise.HOST_TIMERS else "device" for t in w["templates"])
    out: dict[str, Any] = {"templates": dict(sorted(tpl_paths.items())),
                           "series": dict(sorted(_count(s.get("path", "device") for s in series).items())),
                           "ratio_prior": {str(f): how for f, how in sorted(w.get("ratio_prior", {}).items())}}
    for path in ("ratio", "host"):
        sub = [s for s in series if s.get("path") == path]
        if sub:
            out[path] = measures(sub)
    return out


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
    """The replay's tables: targets, then A/A, steps and drifts per provider and noise band. A step row's last two
    columns: of its steps confirmed at all, those whose nights either side of the step let them be placed
    (:func:`placeable_around`), and of those the ones placed on the step's own commit."""
    t = doc["targets"]
    pct = lambda x: "-" if x is None else f"{100 * x:.0f}%"  # noqa: E731
    lines = [f"Replay: {doc['replicates']} replicate(s) of {doc['templates']} "
             f"{'call-cost ' if doc.get('only') == 'call-cost' else ''}templates x {doc['share']:.0%} "
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
    pa = doc.get("paths")
    if pa:
        lines += _path_lines(pa, pct)
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
    lines += ["", "| provider | noise | step | n | the night it lands | within 2 | within 10 | placed | placeable, of "
              "those confirmed | placed right among placeable |", "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    lines += [_step_row(k, row, pct) for k, row in m["steps"].items()]
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


def _step_row(k: str, row: Sequence[int], pct) -> str:
    """One row of :func:`markdown`'s steps table: the cell ``k`` (provider|band|size) and its counts
    (:class:`_Tally`'s ``steps``)."""
    p, b, z = k.split("|")
    n, one, two, ten, placed, _ran, *more = row
    share = lambda x, of: f"{x}/{of} ({pct(x / of if of else None)})"  # noqa: E731
    # (a document from before the placeable steps were counted: "-", and "placed" over the steps found within
    # AFTER nights, which undercounted its base: a step confirmed later and placed counted above it)
    new = f"{share(more[1], more[0])} | {share(more[2], more[1])}" if len(more) == 3 else "- | -"
    confirmed = more[0] if len(more) == 3 else ten
    return (f"| {p} | {b} | +{float(z):.0%} | {n} | {pct(one / n)} | {pct(two / n)} | {pct(ten / n)} | "
            f"{placed}/{confirmed} | {new} |")


def _path_lines(pa: dict, pct) -> list[str]:
    """The call-cost series' lines of :func:`markdown`: how many took each path, the ratio's prior, and per path
    their A/A, steps and drifts."""
    t, n = pa["templates"], pa["series"]
    lines = [f"Call-cost series (timer host_loop): {n.get('ratio', 0)} judged on their interleaved ratio "
             f"({t.get('ratio', 0)} template(s) whose records carry it), {n.get('host', 0)} on their host time "
             f"({t.get('host', 0)} template(s) without it); {n.get('device', 0)} device-timed series. "
             + "".join(f"The ratio's prior in fold {f}: {md_text(how)}. " for f, how in pa["ratio_prior"].items()), ""]
    rows = []
    for path in ("ratio", "host"):
        m = pa.get(path)
        if not m:
            continue
        for k, (nn, raw, kept, exp, dr) in m["aa"].items():
            p, b = k.split("|")
            rows.append(f"| {path} | {p} | {b} | A/A | {nn} series-nights: {raw} sent, {kept} confirmed, expected "
                        f"{1000 * exp / max(nn, 1):.3f} per 1,000, {dr} false drifts |")
        for k, (nn, one, two, ten, *_rest) in m["steps"].items():
            p, b, z = k.split("|")
            rows.append(f"| {path} | {p} | {b} | +{float(z):.0%} step | {nn}: the night it lands {pct(one / nn)}, "
                        f"within 2 {pct(two / nn)}, within 10 {pct(ten / nn)} |")
        for k, (nn, early, as_drift) in m["drifts"].items():
            p, b, z = k.split("|")
            rows.append(f"| {path} | {p} | {b} | +{float(z):.1%}/night drift | {nn}: before +5% {pct(early / nn)}, "
                        f"as a drift {pct(as_drift / nn)} |")
    if rows:
        lines += ["| path | provider | noise | scenario | measured |", "| --- | --- | --- | --- | --- |", *rows, ""]
    return lines


def main(argv: list[str] | None = None) -> int:
    """``python -m robocache.bench.regressions replay``: the out-of-sample replay of the nightly check."""
    ap = argparse.ArgumentParser(prog="python -m robocache.bench.regressions replay", allow_abbrev=False,
                                 description="Replay the nightly check --confirm over the real run-to-run noise, "
                                             "out of sample (docs/regressions.md)")
    ap.add_argument("--size", choices=sorted(SIZES), default="full")
    ap.add_argument("--replicates", type=int, default=None)
    ap.add_argument("--seed", type=int, default=20261125)
    ap.add_argument("--jobs", type=int, default=1)
    ap.add_argument("--templates", choices=TEMPLATE_SETS, default="all",
                    help="every template of the nightly grid, or the call-cost ones alone (their rates over many "
                         "replicates)")
    ap.add_argument("--json", help="write the measures (and every series) as JSON to this file")
    ap.add_argument("--markdown", help="write the tables to this file (also printed)")
    args = ap.parse_args(argv)
    if args.replicates is not None and args.replicates < 1:
        ap.error("--replicates must be at least 1")
    if args.jobs < 1:
        ap.error("--jobs must be at least 1")
    from .. import store

    doc = run(args.size, args.replicates, args.seed, args.jobs, log=lambda s: print(s, file=sys.stderr),
              only=args.templates)
    text = markdown(doc)
    print(text)
    if args.markdown:
        store.atomic_write(args.markdown, text)
    if args.json:
        store.atomic_write(args.json, json.dumps(doc, indent=1, allow_nan=False))
    return 0
