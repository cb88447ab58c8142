#!/usr/bin/env python3
"""Nsight Compute counters of grid cases: why a kernel misses its target, in hardware figures.

    python3 scripts/ncu_cases.py OUTDIR KEY [KEY ...]      # KEY: <op>/<tag>/<dtype>/<provider> (robocache-bench list)
    NCU_TIMEOUT_S (120): one key's limit (its process group is killed); NCU_BUDGET_S: all keys' limit

For each key, one process under ``ncu --clock-control none --profile-from-start off`` (METHOD.md: leave the
clocks alone) prepares the case exactly as the harness does (``worker.prepare``: seeded inputs, the provider's
call), checks it against the NumPy reference (a wrong kernel is never profiled), warms it up (torch.compile
compiles here, outside the profiled range), then profiles ONE call between ``cudaProfilerStart/Stop``. Every
kernel of that call is a row (torch.compile's generated kernels included). Writes OUTDIR/ncu.json (rows: key,
kernel, metrics) and OUTDIR/ncu.md (a table) and prints the table. Needs ncu on PATH and a GPU; on the lent
machines ncu reads counters on Firecracker (KINDS.md). Counter-replay times are not the harness's
measurements: use the ratios (DRAM % of peak, occupancy, L2 hit rate), not ncu's durations, as figures of record.
"""
from __future__ import annotations

import csv
import io
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

METRICS = {
    "gpu__time_duration.sum": "time_us",
    "dram__throughput.avg.pct_of_peak_sustained_elapsed": "dram_pct",
    "dram__bytes_read.sum": "dram_read_bytes",
    "dram__bytes_write.sum": "dram_write_bytes",
    "sm__throughput.avg.pct_of_peak_sustained_elapsed": "sm_pct",
    "sm__warps_active.avg.pct_of_peak_sustained_active": "occupancy_pct",
    "lts__t_sector_hit_rate.pct": "l2_hit_pct",
    "launch__registers_per_thread": "registers",
    "launch__grid_size": "grid",
    "launch__block_size": "block",
}


def inner(key: str) -> int:
    """Run under ncu: prepare, gate, warm up, profile one call."""
    t0 = time.monotonic()
    import cupy

    from robocache.bench import specs, worker

    case = specs.find(key)
    prep, why = worker.prepare(case, "gpu")
    print(f"ncu_cases: {key}: imported and prepared in {time.monotonic() - t0:.1f} s", file=sys.stderr, flush=True)
    if prep is None:
        print(f"ncu_cases: {key}: skipped: {why}", file=sys.stderr)
        return 3
    _, chk, bad = worker.gate(case, prep)
    if bad:
        print(f"ncu_cases: {key}: gate failed: {bad}", file=sys.stderr)
        return 4
    for _ in range(5):
        prep.call()
    cupy.cuda.runtime.deviceSynchronize()
    print(f"ncu_cases: {key}: gated and warm at {time.monotonic() - t0:.1f} s", file=sys.stderr, flush=True)
    try:
        import torch

        torch.cuda.synchronize()
    except Exception:  # noqa: BLE001 - a CuPy-only case
        pass
    cupy.cuda.profiler.start()
    prep.call()
    cupy.cuda.runtime.deviceSynchronize()
    cupy.cuda.profiler.stop()
    print(f"NCU_CASE {key} gate max_rel_err={chk.max_rel_err} moved_bytes={prep.moved_bytes}")
    return 0


def parse(text: str) -> list[dict]:
    """ncu ``--csv --page raw`` output -> one dict per kernel (units row dropped)."""
    lines = [ln for ln in text.splitlines() if ln.startswith('"')]
    if len(lines) < 2:
        return []
    rows = list(csv.DictReader(io.StringIO("\n".join(lines))))
    out = []
    for r in rows[1:] if rows and rows[0].get("ID", "").strip() == "" else rows:
        row = {"kernel": (r.get("Kernel Name") or "?")[:90]}
        for m, name in METRICS.items():
            v = (r.get(m) or "").replace(",", "")
            try:
                row[name] = float(v)
            except ValueError:
                row[name] = None
        if row["time_us"] is not None:
            row["time_us"] /= 1e3  # ns -> us
        out.append(row)
    return out


def outer(outdir: Path, keys: list[str]) -> int:
    ncu = shutil.which("ncu")
    if ncu is None:
        print("ncu_cases: ncu is not on PATH (Nsight Compute); nothing profiled", file=sys.stderr)
        return 2
    outdir.mkdir(parents=True, exist_ok=True)
    results, status = [], 0
    per_key = float(os.environ.get("NCU_TIMEOUT_S", "120"))  # one key's process, ncu included
    budget = float(os.environ.get("NCU_BUDGET_S", "1e9"))  # all keys: the rest are skipped, said so
    t_all = time.monotonic()
    for key in keys:
        left = budget - (time.monotonic() - t_all)
        if left < 20:
            status = 1
            print(f"ncu_cases: {key}: not profiled, NCU_BUDGET_S={budget:g} spent", file=sys.stderr, flush=True)
            continue
        cmd = [ncu, "--clock-control", "none", "--profile-from-start", "off", "--target-processes",
               "application-only", "--csv", "--page", "raw", "--metrics", ",".join(METRICS),
               sys.executable, __file__, "--inner", key]
        t0 = time.monotonic()
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                env={**os.environ, "PYTHONPATH": str(ROOT)}, start_new_session=True)
        try:
            stdout, stderr = proc.communicate(timeout=min(per_key, left))
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)  # ncu and the profiled python: the whole group
            stdout, stderr = proc.communicate()
            stderr += f"\ntimed out after {time.monotonic() - t0:.0f} s"
        rows = parse(stdout)
        moved = None
        for ln in stdout.splitlines():
            if ln.startswith("NCU_CASE"):
                moved = int(ln.rsplit("moved_bytes=", 1)[1]) if "moved_bytes=None" not in ln else None
        if proc.returncode != 0 or not rows:
            status = 1
            tail = (stderr or stdout).strip().splitlines()[-3:]
            print(f"ncu_cases: {key}: exit {proc.returncode}, {len(rows)} kernels, {time.monotonic() - t0:.0f} s; "
                  f"{tail}", file=sys.stderr, flush=True)
        else:
            print(f"ncu_cases: {key}: {len(rows)} kernels, {time.monotonic() - t0:.0f} s", flush=True)
        for r in rows:
            results.append({"key": key, "moved_bytes": moved, **r})
        (outdir / "ncu.json").write_text(json.dumps(results, indent=1))  # after every key: a cut run keeps them
    hdr = ("| case | kernel | ncu us | DRAM % peak | DRAM MB r/w | SM % | occupancy % | L2 hit % | regs | grid x block |\n"
           "|---|---|---:|---:|---:|---:|---:|---:|---:|---|\n")

    def f(v, fmt="{:.1f}"):
        return "-" if v is None else fmt.format(v)
    body = "".join(
        f"| {r['key']} | `{r['kernel'][:48]}` | {f(r['time_us'])} | {f(r['dram_pct'])} | "
        f"{f((r['dram_read_bytes'] or 0) / 1e6)}/{f((r['dram_write_bytes'] or 0) / 1e6)} | {f(r['sm_pct'])} | "
        f"{f(r['occupancy_pct'])} | {f(r['l2_hit_pct'])} | {f(r['registers'], '{:.0f}')} | "
        f"{f(r['grid'], '{:.0f}')} x {f(r['block'], '{:.0f}')} |\n" for r in results)
    (outdir / "ncu.md").write_text(hdr + body)
    print(hdr + body)
    return status


def main(argv: list[str]) -> int:
    if len(argv) >= 2 and argv[0] == "--inner":
        return inner(argv[1])
    if len(argv) < 2 or argv[0] in ("-h", "--help"):
        print(__doc__)
        return 0 if argv[:1] in (["-h"], ["--help"]) else 2
    return outer(Path(argv[0]), argv[1:])


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
