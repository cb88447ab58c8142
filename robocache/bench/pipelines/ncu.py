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
| ``registers`` | ``launch__registers_per_thread`` |

One record per case (suite ``profile``, nothing timed: ``metrics`` null), ``pipeline.kind: "profile"``,
``pipeline.figures`` the longest kernel's metrics (by ``ncu_time_us``), ``pipeline.kernels`` every profiled
kernel with its ncu time and share of the call. Without a GPU or without ``ncu`` the records are ``skipped`` with
the reason; a case whose process outlives its limit is killed with its process group (ncu and the target).
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

METRICS = {"gpu__time_duration.sum": "ncu_time_us",
           "dram__throughput.avg.pct_of_peak_sustained_elapsed": "dram_pct_of_peak",
           "dram__bytes_read.sum": "dram_read_mb",
           "dram__bytes_write.sum": "dram_write_mb",
           "sm__throughput.avg.pct_of_peak_sustained_elapsed": "sm_pct_of_peak",
           "sm__warps_active.avg.pct_of_peak_sustained_active": "achieved_occupancy_pct",
           "lts__t_sector_hit_rate.pct": "l2_hit_rate_pct",
           "launch__registers_per_thread": "registers"}
# ncu's units -> the figure's (the details page gives each metric's unit in "Metric Unit")
_SCALE = {("ncu_time_us", "nsecond"): 1e-3, ("ncu_time_us", "usecond"): 1.0, ("ncu_time_us", "msecond"): 1e3,
          ("dram_read_mb", "byte"): 1e-6, ("dram_read_mb", "Kbyte"): 1e-3, ("dram_read_mb", "Mbyte"): 1.0,
          ("dram_read_mb", "Gbyte"): 1e3, ("dram_write_mb", "byte"): 1e-6, ("dram_write_mb", "Kbyte"): 1e-3,
          ("dram_write_mb", "Mbyte"): 1.0, ("dram_write_mb", "Gbyte"): 1e3}
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
    the metrics in :data:`METRICS`; ``==PROF==`` lines and the target's own output skipped)."""
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
            k[fig] = float(str(r.get("Metric Value", "")).replace(",", "")) * \
                _SCALE.get((fig, str(r.get("Metric Unit", "")).strip()), 1.0)
        except ValueError:
            k[fig] = None
    return [out[i] for i in sorted(out, key=lambda x: int(x) if x.isdigit() else 0)]


def run_profile(keys: list[str], *, device: str, ctx: dict[str, Any], timeout_s: float = 300.0
                ) -> list[dict[str, Any]]:
    """One record per case key (see the module doc)."""
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
            rec = common.record(base, rc, status="skipped", reason=why)
            rec["suite"] = SUITE
            recs.append(rec)
            continue
        cmd = [ncu, "--clock-control", "none", "--target-processes", "application-only", "--csv", "--nvtx",
               "--nvtx-include", f"{RANGE}/", "--metrics", ",".join(METRICS),
               sys.executable, "-m", "robocache.bench.pipelines.ncu", "target", key]
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                start_new_session=True)
        try:
            stdout, stderr = proc.communicate(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)  # ncu and the profiled process: a survivor would skew the next case
            proc.communicate()
            rec = common.record(base, rc, status="timeout", reason=f"ncu did not finish in {timeout_s:g} s",
                                duration_s=time.perf_counter() - t0)
        else:
            rec = _record(common, base, rc, proc.returncode, stdout, stderr, time.perf_counter() - t0)
        rec["suite"] = SUITE
        recs.append(rec)
    return recs


def _record(common: Any, base: dict[str, Any], rc: dict[str, Any], code: int, stdout: str, stderr: str,
            duration_s: float) -> dict[str, Any]:
    """A profile record from ncu's output: the longest kernel's figures, every kernel with its ncu time."""
    kernels = parse_csv(stdout)
    if code != 0 or not kernels:
        tail = (stderr or stdout).strip().splitlines()[-3:]
        return common.record(base, rc, status="error", duration_s=duration_s,
                             reason=f"ncu exit {code}, {len(kernels)} kernel(s) profiled: " + " | ".join(tail)[:600])
    times = [k.get("ncu_time_us") or 0.0 for k in kernels]
    total = sum(times)
    longest = kernels[max(range(len(kernels)), key=times.__getitem__)]
    return common.record(base, rc, duration_s=duration_s, pipeline={
        "kind": "profile", "figures": {v: longest.get(v) for v in METRICS.values()},
        "kernels": [{"name": k["kernel"][:200], "calls": 1, "total_us": t, "avg_us": t,
                     "share": t / total if total > 0 else 1.0 / len(kernels)} for k, t in zip(kernels, times)],
        "notes": [f"Nsight Compute, {len(kernels)} kernel(s) in the profiled call; figures: the longest kernel's; "
                  "times are ncu's under counter replay (shares of the call, not the harness's measurement)"]})


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m robocache.bench.pipelines.ncu")
    sub = p.add_subparsers(dest="cmd", required=True)
    t = sub.add_parser("target", help="(run by ncu) one case's call inside the profiled NVTX range")
    t.add_argument("key")
    a = p.parse_args(argv)
    return target(a.key)


if __name__ == "__main__":
    sys.exit(main())
