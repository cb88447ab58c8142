"""The ``profile`` suite: Nsight Compute metrics of robocache's kernels (GPU only; ``ncu`` must be on PATH).

For each case (default: every op's representative case, float32, provider ``robocache``; any grid case key,
peers included: ``.../torch_compile`` profiles the kernels the compiled peer launches), one process runs under
``ncu --clock-control none --target-processes application-only`` (METHOD.md: leave the clocks alone; profiling
torch.compile's compile workers too never finished on the lent H200): it builds the case's seeded inputs through
the harness (``worker.prepare``), checks the output against the reference (a wrong kernel is never profiled), calls
the op a few times to warm up, then once inside the NVTX range ``rcb_profile``, which is the only range ncu
profiles (``--nvtx --nvtx-include rcb_profile/``). The metrics, per kernel launched in the range:

| figure | ncu metric |
| --- | --- |
| ``ncu_time_us`` | ``gpu__time_duration.sum`` (under counter replay: a share, not the harness's time) |
| ``dram_pct_of_peak`` | ``dram__throughput.avg.pct_of_peak_sustained_elapsed`` |
| ``dram_read_mb``, ``dram_write_mb`` | ``dram__bytes_read.sum``, ``dram__bytes_write.sum`` |
| ``sm_pct_of_peak`` | ``sm__throughput.avg.pct_of_peak_sustained_elapsed`` |
| ``achieved_occupancy_pct`` | ``sm__warps_active.avg.pct_of_peak_sustained_active`` |
| ``l2_hit_rate_pct`` | ``lts__t_sector_hit_rate.pct`` |
| ``l2_pct_of_peak`` | ``lts__throughput.avg.pct_of_peak_sustained_elapsed`` |
| ``stall_memory_pct`` | ``smsp__warp_issue_stalled_long_scoreboard_per_warp_active.pct`` (a warp waits on a load) |
| ``stall_lsu_queue_pct`` | ``smsp__warp_issue_stalled_lg_throttle_per_warp_active.pct`` (the load/store queue is full) |
| ``registers`` | ``launch__registers_per_thread`` |

Every value is scaled from the unit ncu printed beside it (:data:`UNITS`: ``ns``/``nsecond``, ``us``/``usecond``,
``ms``/``msecond``, ``s``/``second``; ``byte`` to ``Gbyte`` and ``B`` to ``GB``; ``%``/``percent``;
``register/thread``), ncu asked for base units (``--print-units base``); a unit not in the table makes the case an
``error`` that names it, never a guessed figure.

One record per case (suite ``profile``, nothing timed: ``metrics`` null), ``pipeline.kind: "profile"``,
``pipeline.figures`` the longest kernel's metrics (by ``ncu_time_us``) plus ``ncu_call_us`` (every kernel of the
profiled call), ``harness_us`` (the harness's device time of the same case, measured in this run in a process of
its own, :func:`harness_time`) and ``ncu_vs_harness`` (their ratio; beyond :data:`AGREE` either way the record's
reason says they disagree, and the report's profile table flags it), ``pipeline.kernels`` every profiled kernel
with its ncu time and share of the call. Without a GPU or without ``ncu`` the records are ``skipped`` with the
reason; a case whose process outlives its limit is killed with its process group (ncu and the target).
"""
from __future__ import annotations

import argparse
import csv
import io
import os
import shutil
import signal
import subprocess
import sys
import time
from typing import Any

from ..gate import NCU_AGREE
from ..messages import Task
from ..schema import Record

METRICS = {"gpu__time_duration.sum": "ncu_time_us",
           "dram__throughput.avg.pct_of_peak_sustained_elapsed": "dram_pct_of_peak",
           "dram__bytes_read.sum": "dram_read_mb",
           "dram__bytes_write.sum": "dram_write_mb",
           "sm__throughput.avg.pct_of_peak_sustained_elapsed": "sm_pct_of_peak",
           "sm__warps_active.avg.pct_of_peak_sustained_active": "achieved_occupancy_pct",
           "lts__t_sector_hit_rate.pct": "l2_hit_rate_pct",
           "lts__throughput.avg.pct_of_peak_sustained_elapsed": "l2_pct_of_peak",
           "smsp__warp_issue_stalled_long_scoreboard_per_warp_active.pct": "stall_memory_pct",
           "smsp__warp_issue_stalled_lg_throttle_per_warp_active.pct": "stall_lsu_queue_pct",
           "launch__registers_per_thread": "registers"}
# What each figure measures, and every unit ncu prints for that kind (older releases spell them out, newer ones
# abbreviate: "nsecond"/"ns"; `--print-units base` asks for ns and bytes, but a value's own unit is what counts),
# as the factor to the figure's unit (us, MB = 1e6 bytes, %, a count). A unit not listed here is refused, never
# guessed: "ns" read as "us" put 1000x too long kernel times in the profile tables (issue 24).
METRIC_KIND = {"ncu_time_us": "time", "dram_pct_of_peak": "percent", "dram_read_mb": "bytes", "dram_write_mb": "bytes",
        "sm_pct_of_peak": "percent", "achieved_occupancy_pct": "percent", "l2_hit_rate_pct": "percent",
        "l2_pct_of_peak": "percent", "stall_memory_pct": "percent", "stall_lsu_queue_pct": "percent",
        "registers": "count"}
UNITS = {
    "time": {"ns": 1e-3, "nsecond": 1e-3, "us": 1.0, "usecond": 1.0, "ms": 1e3, "msecond": 1e3,
             "s": 1e6, "second": 1e6},
    "bytes": {"byte": 1e-6, "B": 1e-6, "Kbyte": 1e-3, "KB": 1e-3, "Mbyte": 1.0, "MB": 1.0, "Gbyte": 1e3, "GB": 1e3,
              "Tbyte": 1e6, "TB": 1e6},
    "percent": {"%": 1.0, "percent": 1.0, "pct": 1.0},
    "count": {"register/thread": 1.0, "register": 1.0},
}
AGREE = NCU_AGREE  # ncu / the harness within this factor either way (robocache.bench.gate)


class UnitError(ValueError):
    """ncu printed a metric in a unit this parser does not know for that metric."""


def scale(metric: str, unit: str) -> float:
    """The factor from ``unit`` (as ncu printed it for ``metric``) to the figure's unit; :class:`UnitError`
    for a unit not in :data:`UNITS` for the figure's kind."""
    fig = METRICS[metric]
    kind = METRIC_KIND[fig]
    unit = unit.strip()
    try:
        return UNITS[kind][unit]
    except KeyError:
        raise UnitError(f"ncu printed {metric} in {unit!r}, not a {kind} unit this parser knows "
                        f"({', '.join(repr(u) for u in UNITS[kind])}): refusing to guess its scale") from None


RANGE = "rcb_profile"
SUITE = "profile"


def default_cases() -> list[str]:
    """Every registered kernel op's first float32 representative case, provider robocache."""
    from .. import ops

    out = []
    for op in ops.registered():
        for cid, dtype in op.representative:
            if dtype == "float32":
                out.append(f"{cid}/float32/robocache")
                break
    return out


def target(key: str, warm: int = 3) -> int:
    """The process ncu profiles: the case's call, warm, then once inside the NVTX range."""
    import torch

    from .. import specs, worker

    case = specs.find(key)
    prep, why = worker.prepare(case, "gpu")
    if prep is None:
        print(f"ncu target: {key}: {why}", file=sys.stderr)
        return 2
    _, _, bad = worker.gate(case, prep)  # correct before profiled: a wrong kernel's counters mean nothing
    if bad:
        print(f"ncu target: {key}: the reference gate failed: {bad}", file=sys.stderr)
        return 4
    for _ in range(warm):
        prep.call()
    torch.cuda.synchronize()
    torch.cuda.nvtx.range_push(RANGE)
    prep.call()
    torch.cuda.synchronize()
    torch.cuda.nvtx.range_pop()
    return 0


def parse_csv(text: str) -> list[dict[str, Any]]:
    """ncu's ``--csv`` details page -> ``[{"kernel": name, <figure>: value, ...}]`` in launch order (rows of
    the metrics in :data:`METRICS`, each value scaled from its own ``Metric Unit`` by :func:`scale`;
    ``==PROF==`` lines and the target's own output skipped). :class:`UnitError` on a unit not known."""
    lines = [ln for ln in text.splitlines() if ln.startswith('"')]
    if not lines:
        return []
    rows = list(csv.DictReader(io.StringIO("\n".join(lines))))
    out: dict[str, dict[str, Any]] = {}
    for r in rows:
        name = r.get("Metric Name")
        if name not in METRICS:
            continue
        rid = r.get("ID", "0")
        k = out.setdefault(rid, {"kernel": r.get("Kernel Name", "?")})
        fig = METRICS[name]
        try:
            value = float(str(r.get("Metric Value", "")).replace(",", ""))
        except ValueError:  # "n/a": a counter this kernel or GPU does not have
            k[fig] = None
            continue
        k[fig] = value * scale(name, str(r.get("Metric Unit", "")))
    return [out[i] for i in sorted(out, key=lambda x: int(x) if x.isdigit() else 0)]


def run_profile(keys: list[str], *, device: str, ctx: Task, timeout_s: float = 300.0) -> list[Record]:
    """One record per case key (see the module doc); ``ctx``: the run's task (:meth:`RunContext.task
    <robocache.bench.context.RunContext.task>`)."""
    from .. import specs
    from . import common

    ncu = shutil.which("ncu")
    recs = []
    for key in keys:
        t0 = time.perf_counter()
        case = specs.find(key)
        rc = case.to_record_case()
        base = ctx
        if device != "gpu" or ncu is None:
            why = "no GPU: Nsight Compute profiles GPU kernels" if device != "gpu" else "ncu not found on PATH"
            recs.append(common.record(base, rc, status="skipped", reason=why, suite=SUITE))
            continue
        cmd = [ncu, "--clock-control", "none", "--target-processes", "application-only", "--csv", "--nvtx",
               "--nvtx-include", f"{RANGE}/", "--print-units", "base", "--metrics", ",".join(METRICS),
               sys.executable, "-m", "robocache.bench.pipelines.ncu", "target", key]
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                start_new_session=True)
        try:
            stdout, stderr = proc.communicate(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)  # ncu and the profiled process: a survivor would skew the next case
            proc.communicate()
            rec = common.record(base, rc, status="timeout", reason=f"ncu did not finish in {timeout_s:g} s",
                                duration_s=time.perf_counter() - t0, suite=SUITE)
        else:
            harness_us, why = harness_time(key, ctx, timeout_s)
            rec = _record(common, base, rc, proc.returncode, stdout, stderr, time.perf_counter() - t0,
                          harness_us=harness_us, harness_why=why)
        recs.append(rec)
    return recs


def harness_time(key: str, ctx: Task, timeout_s: float) -> tuple[float | None, str | None]:
    """The harness's device time of case ``key`` (median us per call, the CUDA-event timer of every GPU run, warm,
    in a process of its own), measured in this profile run beside ncu's: ``(us, None)``, or ``(None, why)``."""
    import msgspec

    from .. import runner

    task = msgspec.structs.replace(ctx, suite=SUITE, device="gpu", case_key=key, graph_check=False)
    outcome, rec, detail = runner.run_in_process(task, timeout_s)
    if outcome != "ok" or rec is None:
        return None, f"the harness's measurement: {outcome}: {detail}"[:300]
    if rec.status != "ok" or rec.metrics is None:
        return None, f"the harness's measurement: {rec.status}: {(rec.reason or '').splitlines()[0][:200]}"
    return float(rec.metrics.time_us.p50), None


def agreement(ncu_us: float | None, harness_us: float | None) -> tuple[float | None, bool | None]:
    """(ncu's time of the profiled call / the harness's device time, whether they agree within :data:`AGREE`);
    (None, None) when either is missing."""
    if not ncu_us or not harness_us or ncu_us <= 0 or harness_us <= 0:
        return None, None
    ratio = ncu_us / harness_us
    return ratio, 1.0 / AGREE <= ratio <= AGREE


def _num(x: float) -> str:
    return f"{x:,.0f}" if x >= 1000 else f"{x:.3g}"


def _record(common: Any, base: Task, rc: dict[str, Any], code: int, stdout: str, stderr: str,
            duration_s: float, *, harness_us: float | None = None, harness_why: str | None = None) -> Record:
    """A profile record from ncu's output: the longest kernel's figures, every kernel with its ncu time, and the
    call's ncu time (all its kernels) against the harness's device time of the same case (``harness_us``: same
    run; ``harness_why``: why there is none), flagged when they disagree beyond :data:`AGREE`."""
    try:
        kernels = parse_csv(stdout)
    except UnitError as e:  # loud: a number whose scale is unknown is not recorded at all
        return common.record(base, rc, status="error", duration_s=duration_s, reason=f"ncu output refused: {e}",
                             suite=SUITE)
    if code != 0 or not kernels:
        tail = (stderr or stdout).strip().splitlines()[-3:]
        return common.record(base, rc, status="error", duration_s=duration_s,
                             reason=f"ncu exit {code}, {len(kernels)} kernel(s) profiled: " + " | ".join(tail)[:600],
                             suite=SUITE)
    times = [k.get("ncu_time_us") or 0.0 for k in kernels]
    total = sum(times)
    longest = kernels[max(range(len(kernels)), key=times.__getitem__)]
    ratio, agree = agreement(total, harness_us)
    figures = {v: longest.get(v) for v in METRICS.values()}
    figures.update(ncu_call_us=total, harness_us=harness_us, ncu_vs_harness=ratio)
    notes = [f"Nsight Compute, {len(kernels)} kernel(s) in the profiled call; figures: the longest kernel's; "
             "times are ncu's under counter replay (shares of the call, not the harness's measurement)"]
    if agree is None:
        notes.append("no agreement check with the harness: " + (harness_why or "no harness time"))
    else:
        notes.append(f"ncu's call {_num(total)} us against the harness's device time {_num(harness_us)} us of the "
                     f"same case in this run: {_num(ratio)}x, " + ("within" if agree else "BEYOND") + f" {AGREE:g}x")
    reason = None
    if agree is False:  # flagged in the record: its reason, and the report's profile table
        reason = (f"ncu and the harness disagree: the profiled call took {_num(total)} us under ncu, "
                  f"{_num(harness_us)} us by the harness ({_num(ratio)}x, beyond {AGREE:g}x either way)")
    return common.record(base, rc, duration_s=duration_s, reason=reason, suite=SUITE, pipeline={
        "kind": "profile", "figures": figures,
        "kernels": [{"name": k["kernel"][:200], "calls": 1, "total_us": t, "avg_us": t,
                     "share": t / total if total > 0 else 1.0 / len(kernels)} for k, t in zip(kernels, times)],
        "notes": notes})


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(allow_abbrev=False, prog="python -m robocache.bench.pipelines.ncu")
    sub = p.add_subparsers(dest="cmd", required=True)
    t = sub.add_parser("target", allow_abbrev=False, help="(run by ncu) one case's call inside the profiled NVTX range")
    t.add_argument("key")
    a = p.parse_args(argv)
    return target(a.key)


if __name__ == "__main__":
    sys.exit(main())
