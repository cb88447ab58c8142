"""The ``profile`` suite: Nsight Compute metrics of robocache's kernels (GPU only; ``ncu`` must be on PATH).

For each case (default: every op's representative case, float32, provider ``robocache``), one process runs
under ``ncu``: it builds the case's seeded inputs through the harness (``worker.prepare``), calls the op a few
times to warm up, then once inside the NVTX range ``rcb_profile``, which is the only range ncu profiles
(``--nvtx --nvtx-include rcb_profile/``). The metrics, per kernel launched in the range:

| figure | ncu metric |
| --- | --- |
| ``dram_pct_of_peak`` | ``dram__throughput.avg.pct_of_peak_sustained_elapsed`` |
| ``achieved_occupancy_pct`` | ``sm__warps_active.avg.pct_of_peak_sustained_active`` |
| ``l2_hit_rate_pct`` | ``lts__t_sector_hit_rate.pct`` |

One record per case (suite ``profile``, nothing timed: ``metrics`` null), ``pipeline.kind: "profile"``,
``pipeline.figures`` the first kernel's metrics, ``pipeline.kernels`` every profiled kernel's name. Without a GPU
or without ``ncu`` the records are ``skipped`` with the reason.
"""
from __future__ import annotations

import argparse
import csv
import io
import shutil
import subprocess
import sys
import time
from typing import Any

METRICS = {"dram__throughput.avg.pct_of_peak_sustained_elapsed": "dram_pct_of_peak",
           "sm__warps_active.avg.pct_of_peak_sustained_active": "achieved_occupancy_pct",
           "lts__t_sector_hit_rate.pct": "l2_hit_rate_pct"}
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
        try:
            k[METRICS[name]] = float(str(r.get("Metric Value", "")).replace(",", ""))
        except ValueError:
            k[METRICS[name]] = None
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
        cmd = [ncu, "--csv", "--nvtx", "--nvtx-include", f"{RANGE}/", "--metrics", ",".join(METRICS),
               "--target-processes", "all", sys.executable, "-m", "robocache.bench.pipelines.ncu", "target", key]
        try:
            out = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s)
            kernels = parse_csv(out.stdout)
            if out.returncode != 0 or not kernels:
                tail = (out.stderr or out.stdout).strip().splitlines()[-3:]
                rec = common.record(base, rc, status="error", duration_s=time.perf_counter() - t0,
                                    reason=f"ncu exit {out.returncode}, {len(kernels)} kernel(s) profiled: "
                                           + " | ".join(tail)[:600])
            else:
                first = kernels[0]
                rec = common.record(base, rc, duration_s=time.perf_counter() - t0, pipeline={
                    "kind": "profile", "figures": {v: first.get(v) for v in METRICS.values()},
                    "kernels": [{"name": k["kernel"][:200], "calls": 1, "total_us": 0.0, "avg_us": 0.0,
                                 "share": 1.0 / len(kernels)} for k in kernels],
                    "notes": [f"Nsight Compute, {len(kernels)} kernel(s) in the profiled call; figures: the first "
                              "kernel's; kernel rows carry names only (ncu's replay times are not the harness's)"]})
        except subprocess.TimeoutExpired:
            rec = common.record(base, rc, status="timeout", reason=f"ncu did not finish in {timeout_s:g} s",
                                duration_s=time.perf_counter() - t0)
        rec["suite"] = SUITE
        recs.append(rec)
    return recs


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m robocache.bench.pipelines.ncu")
    sub = p.add_subparsers(dest="cmd", required=True)
    t = sub.add_parser("target", help="(run by ncu) one case's call inside the profiled NVTX range")
    t.add_argument("key")
    a = p.parse_args(argv)
    return target(a.key)


if __name__ == "__main__":
    sys.exit(main())
