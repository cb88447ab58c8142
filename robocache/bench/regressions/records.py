"""What compare and check read from one record: its median time, its within-run noise, its health, its case,
its runner's fingerprint; the floor every verdict and alert shares."""
from __future__ import annotations

import functools
import json
import math
from collections.abc import Mapping
from typing import Any
from ..schema import Case, Dispatch, Env, Health, Method, Metrics, Quantiles, Record

FLOOR = 0.03  # a change smaller than 3% is never a verdict or an alert, whatever the noise
ENV_FIELDS = ("gpu_name", "driver", "cuda", "cpu", "kernel", "host_id")  # the runner's fingerprint


def safe_exp(d: float) -> float:
    """exp() that never overflows: a ratio of two schema-valid times (1e-300 and 1e300 us) stays finite."""
    return math.exp(max(min(float(d), 700.0), -700.0))


def check_floor(floor: float) -> None:
    if not (isinstance(floor, (int, float)) and math.isfinite(floor) and 0 <= floor < 10):
        raise ValueError(f"floor must be a finite number from 0 to 10 (a relative change), got {floor!r}")


def within_sigma(rec: Record) -> float:
    """One sigma of the median's relative uncertainty within its run (``method.noise`` is a 95% half-width)."""
    m = rec.method
    n = m.noise if m is not None else None
    return min(float(n) / 1.96, 1e6) if n is not None else 0.0


def p50(rec: Record) -> float | None:
    m = rec.metrics
    if m is None:
        return None
    v = m.time_us.p50
    return float(v) if v and v > 0 and math.isfinite(v) else None


CALL_COST_TIMERS = ("host_loop",)  # a call-cost case's timer: the host's time per call (noise.HOST_TIMERS)
# the spread of the rounds' ratios to the uncertainty of their median: p20..p80 of a normal spans 2 x 0.8416 sigma,
# and the median of n rounds has a standard error of sqrt(pi / 2) sigma / sqrt(n)
_P20_P80_SIGMAS = 2 * 0.8416
_MEDIAN_SE = math.sqrt(math.pi / 2)


def call_ratio(rec: Record) -> tuple[float, float] | None:
    """A call-cost case's interleaved ratio, the quantity its call cost is judged by (issue 25: public call /
    bare launch, measured ABAB in one process, where the host's state cancels): ``(ratio_p50, within-run sigma of
    its log)``, the sigma the median's standard error from the rounds' p20..p80 spread. None for a record that is
    not a call-cost case or carries no ``dispatch.interleaved`` (an older record, robocache@cupy's before issue 27;
    bare_launch rows, the floor the ratio divides by): its value is its host time, :func:`p50`."""
    m, d = rec.method, rec.dispatch
    if m is None or m.timer not in CALL_COST_TIMERS or d is None or d.interleaved is None:
        return None
    il = d.interleaved
    return interleaved_ratio(il.ratio_p20, il.ratio_p50, il.ratio_p80, il.rounds)


def interleaved_ratio(p20: Any, p50_: Any, p80: Any, rounds: Any) -> tuple[float, float] | None:
    """:func:`call_ratio` of an interleaved section's figures (a typed record's, or the frame's JSON of it); None
    when they are not positive and finite, or not ordered p20 <= p50 <= p80 (the schema bounds each figure alone:
    an inverted spread would read as an exact ratio, a median outside its own quantiles as any ratio at all)."""
    try:
        lo, mid, hi, n = float(p20), float(p50_), float(p80), int(rounds)
    except (TypeError, ValueError, OverflowError):  # int(inf) overflows
        return None
    if not all(0 < v < math.inf for v in (lo, mid, hi)) or n < 1 or not lo <= mid <= hi:
        return None
    spread = (math.log(hi) - math.log(lo)) / _P20_P80_SIGMAS
    return mid, min(_MEDIAN_SE * spread / math.sqrt(n), 1e6)


def call_ratio_of_json(timer: Any, text: Any) -> tuple[float, float] | None:
    """:func:`call_ratio` of a frame row: its ``timer`` and its ``interleaved`` column (the section as JSON text);
    each distinct text parsed once per process (the dashboard and `check` read the same frame again)."""
    if timer not in CALL_COST_TIMERS or not isinstance(text, str) or not text:
        return None
    got = _section_of_text(text)
    return got[0] if got is not None else None


def call_ratio_band_of_json(timer: Any, text: Any) -> tuple[float, float, float] | None:
    """The rounds' p20, p50 and p80 of a frame row's interleaved ratio (History draws the p50 with p20..p80 as its
    bars), where :func:`call_ratio_of_json` gives a ratio and None where it gives None: the same parse (cached) and
    the same rule, so a point drawn is a point the check judges."""
    if timer not in CALL_COST_TIMERS or not isinstance(text, str) or not text:
        return None
    got = _section_of_text(text)
    return got[1] if got is not None else None


@functools.lru_cache(maxsize=4096)
def _section_of_text(text: str) -> tuple[tuple[float, float], tuple[float, float, float]] | None:
    """An interleaved section's JSON text as (:func:`interleaved_ratio`, its p20/p50/p80); None: no ratio."""
    try:
        d = json.loads(text)
    except ValueError:
        return None
    if not isinstance(d, dict):
        return None
    got = interleaved_ratio(d.get("ratio_p20"), d.get("ratio_p50"), d.get("ratio_p80"), d.get("rounds"))
    if got is None:
        return None
    return got, (float(d["ratio_p20"]), got[0], float(d["ratio_p80"]))


def unhealthy(rec: Record) -> str | None:
    """Why a record cannot be a point of comparison (None when it can)."""
    if rec.status != "ok" or p50(rec) is None:  # a failed status, skipped, or nothing timed
        return f"status {rec.status}"
    h = rec.health
    if h.throttled:
        return "throttled"
    if h.contended:
        return "contended"
    return None


# `run --processes K` (docs/harness.md): the --processes-below-us that a rerun or a reproduction of a K-process record
# passes, so that its case is timed in K processes whatever its first process measures (1000 s: beyond any case's
# median, past run's default --timeout of 600 s). The record does not say which threshold its run used, only that its first process was under it; with
# the default (12 us) a slower commit's first process could land over it and be timed once, another measurement
ALWAYS_BELOW_US = 1e9
# the most processes `run --processes` takes (runner.MAX_PROCESSES, which tests/test_regress.py holds this to; not
# imported: the runner pulls in the worker and the providers): a record that lists more, which this runner never
# writes, is rerun and reproduced in this many, never with an argument the runner refuses
MAX_PROCESSES = 16


def processes_of(rec: Record) -> int:
    """How many fresh processes the record's median was taken over (``run --processes K``): K for a record that
    lists its processes' medians (``Record.processes``), 1 for one timed once (an ordinary record lists none)."""
    return max(len(getattr(rec, "processes", None) or ()), 1)


def case_label(rec: Record) -> str:
    c = rec.case
    return f"{c.id} {c.dtype} {c.provider}"


def case_key(rec: Record) -> str:
    """The harness's case key (``op/tag/dtype/provider``), as ``robocache-bench run --cases`` takes it."""
    c = rec.case
    return f"{c.id}/{c.dtype}/{c.provider}"


def env_fingerprint(rec: Record) -> dict[str, str]:
    """The runner's facts that move a series when they change (GPU, driver, CUDA, CPU model, kernel, host id);
    fields a record does not have are left out (older records lack the kernel and host id)."""
    env = rec.env
    if env is None:
        return {}
    vals = ((k, getattr(env, k)) for k in ENV_FIELDS)
    return {k: str(v) for k, v in vals if v not in (None, "")}


def env_print(env: Mapping[str, Any]) -> dict[str, str]:
    """:func:`env_fingerprint` of an env as JSON holds it (a results file's, the frame's ``env`` column)."""
    return {k: str(env[k]) for k in ENV_FIELDS if env.get(k) not in (None, "")}


def synthetic(*, run_id: str, created: str, git_commit: str, case: Case, t_us: float, noise: float, env: Env,
              timer: str = "cuda_event", cache: str = "warm", contended: bool = False, suite: str = "nightly",
              frontend: str = "cli", method: Method | None = None, dispatch: Dispatch | None = None) -> Record:
    """A synthetic record (``synthetic``: True) with what the check and compare read: its run, commit, case, median
    time, within-run noise, contention and machine; the figures nobody reads are zero, the sections None. Built
    without validation (Struct constructors), for the replay and the tests' simulated nights; ``method`` (from
    :func:`synthetic_method`) may be shared by the records of one series; ``dispatch``: a call-cost case's section
    (its interleaved ratio, :func:`call_ratio`)."""
    return Record(run_id=run_id, created=created, git_commit=git_commit, git_dirty=None, suite=suite,
                  frontend=frontend, case=case,
                  method=method if method is not None else synthetic_method(timer, cache, noise),
                  metrics=Metrics(time_us=Quantiles(p20=t_us, p50=t_us, p80=t_us, min=t_us, max=t_us, mean=t_us),
                                  items_per_s=0.0, gb_per_s=0.0, ceiling_gb_per_s=None, pct_of_ceiling=None,
                                  graph_time_us=None, event_vs_graph=None),
                  check=None, clocks=None,
                  health=Health(throttled=False, contended=contended, noisy=False, reasons=[]),
                  status="ok", reason=None, duration_s=0.0, synthetic=True, env=env, dispatch=dispatch)


def synthetic_method(timer: str, cache: str, noise: float) -> Method:
    """The :class:`Method` of a :func:`synthetic` record: its timer, cache and within-run noise."""
    return Method(timer=timer, cache=cache, warmup_s=0.0, samples=0, reps_per_sample=0, noise_target=0.0,
                  noise=noise, noise_target_met=True, time_limit_s=0.0)


def synthetic_env(machine: str, arch: str | None = None) -> Env:
    """The :class:`Env` of a :func:`synthetic` record: its machine (and architecture); every other fact unknown."""
    return Env(hostname=machine, machine=machine, device="gpu", gpu_name=None, arch=arch, compute_capability=None,
               gpu_count=None, gpu_memory_gb=None, sm_count=None, l2_mb=None, driver=None, cuda=None, cpu=None,
               python="", libs={}, nvml="unknown: synthetic")


def env_changes(a: dict[str, str], b: dict[str, str]) -> list[str]:
    """Fields known on both sides that differ, as ``field: old -> new``."""
    return [f"{k}: {a[k]} -> {b[k]}" for k in ENV_FIELDS if k in a and k in b and a[k] != b[k]]

