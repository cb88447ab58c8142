#!/usr/bin/env python3
"""Where a case process's time goes (a dev aid, not a measurement of record; GPU or CPU).

    python3 scripts/case_phases.py [--suite sampled] [--sample-seed 41] [--ops voxelize]
        [--providers robocache,torch_compile] [--limit 6] [--precompile-jobs 8] [--json OUT]

Runs the first ``--limit`` cases of the filter the harness's way (each in a process forked from the runner's
preloaded forkserver, ``worker.run_task``: the same gate, input rotation, timer and graph check) with each phase
timed from inside the case process: ``start`` (the parent's ``Process.start`` to the child's first line), ``prepare``
(the provider's inputs, ``worker.prepare``), ``first call`` (the gate's first call: torch.compile compiles there,
robocache loads its modules), ``reference`` (the NumPy reference), ``check``, ``rotate`` (the input sets),
``timing`` (the timer), ``graph`` (the CUDA-graph check), ``other`` (the rest of the process's life: imports on
first use, the answer's encoding, exit) and ``wall`` (the parent's). With ``--precompile-jobs`` the runner's compile
pre-pass runs first, as ``run --precompile-jobs`` does, so torch.compile's cases load from Inductor's cache.
No record is written. The figures say which phase a change to the harness should cut (a sampled op with
torch.compile beside it does not fit one device call: docs/gpu.md).
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from robocache.bench import messages, runner, specs, worker  # noqa: E402
from robocache.bench.context import RunContext  # noqa: E402

PHASES = ("start", "prepare", "first call", "reference", "check", "rotate", "timing", "graph", "other", "wall")


def _phased(data: bytes, result_path: str, t_parent: float) -> None:
    """The case process: ``worker.run_task`` with its phases timed; the phases go beside the answer."""
    t0 = time.time()
    from robocache.bench import gate as gate_mod
    from robocache.bench import timing

    spent: dict[str, float] = {"start": t0 - t_parent}

    def timed(mod, name, phase):
        fn = getattr(mod, name)

        def wrapper(*a, **k):
            t = time.perf_counter()
            try:
                return fn(*a, **k)
            finally:
                spent[phase] = spent.get(phase, 0.0) + time.perf_counter() - t
        setattr(mod, name, wrapper)

    timed(worker, "prepare", "prepare")
    timed(worker, "gate", "gate")
    timed(specs, "reference_output", "reference")
    timed(gate_mod, "check", "check")
    timed(worker, "rotating_call", "rotate")
    timed(timing, "time_gpu", "timing")
    timed(timing, "time_host", "timing")
    timed(worker, "_graph_check", "graph")
    t1 = time.perf_counter()
    worker.run_task(data, result_path)
    life = time.perf_counter() - t1
    gate = spent.pop("gate", 0.0)
    spent["first call"] = max(0.0, gate - spent.get("reference", 0.0) - spent.get("check", 0.0))
    spent["other"] = max(0.0, life - gate - sum(spent.get(p, 0.0) for p in ("prepare", "rotate", "timing", "graph")))
    with open(result_path + ".phases.tmp", "w") as f:
        json.dump(spent, f)
    os.replace(result_path + ".phases.tmp", result_path + ".phases")


def run_case(ctx, task, timeout_s: float) -> tuple[dict[str, float], str]:
    with tempfile.TemporaryDirectory(prefix="rcb-phases-") as tmp:
        path = os.path.join(tmp, "result.msgpack")
        t = time.time()
        proc = ctx.Process(target=_phased, args=(messages.pack(task), path, t), daemon=False)
        proc.start()
        proc.join(timeout_s)
        if proc.is_alive():
            runner._kill_group(proc.pid)
            proc.join(10)
            return {"wall": time.time() - t}, "timeout"
        runner._kill_group(proc.pid)  # a finished case's leftovers (compile workers)
        wall = time.time() - t
        try:
            with open(path + ".phases") as f:
                spent = json.load(f)
            with open(path, "rb") as f:
                rec = messages.unpack(f.read(), worker.Record)
            status = rec.status
        except (OSError, ValueError) as e:
            return {"wall": wall}, f"no answer ({type(e).__name__}; exit code {proc.exitcode})"
        spent["wall"] = wall
        return spent, status


def _split(s: str | None) -> list[str] | None:
    return s.split(",") if s else None


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0], allow_abbrev=False)
    ap.add_argument("--suite", default="sampled", choices=specs.SUITES)
    ap.add_argument("--sample-seed", type=int, default=None)
    ap.add_argument("--ops", default=None, help="comma-separated")
    ap.add_argument("--providers", default="robocache,torch_compile", help="comma-separated")
    ap.add_argument("--dtypes", default=None, help="comma-separated")
    ap.add_argument("--limit", type=int, default=6, help="cases to run (the filter's first ones); default 6")
    ap.add_argument("--device", default="auto", choices=("auto", "gpu", "cpu"))
    ap.add_argument("--precompile-jobs", type=int, default=0)
    ap.add_argument("--timeout", type=float, default=300.0, help="seconds per case process")
    ap.add_argument("--json", default=None, help="write every case's phases here")
    ap.add_argument("--preload", default="", help="more modules for the forkserver to import before it forks "
                    "(comma-separated; e.g. torch._inductor.compile_fx: does importing it there initialise CUDA, "
                    "which would fail every GPU case, and what does it save?)")
    args = ap.parse_args()
    if args.limit < 1:
        ap.error(f"--limit must be at least 1, got {args.limit}")
    device = runner.detect_device() if args.device == "auto" else args.device
    try:
        cases = specs.cases(args.suite, device=device, ops=_split(args.ops), providers=_split(args.providers),
                            dtypes=_split(args.dtypes), sample_seed=args.sample_seed)[:args.limit]
    except ValueError as e:
        print(f"case_phases: {e}", file=sys.stderr)
        return 2
    if not cases:
        print("case_phases: the filter selects no case", file=sys.stderr)
        return 2
    out_dir = tempfile.mkdtemp(prefix="rcb-phases-run-")  # the run context's folder; nothing is written there
    run = RunContext.start(suite=args.suite, device=device, frontend="cli", out_dir=out_dir, machine=None,
                           synthetic=True)
    if args.precompile_jobs > 0:
        try:  # progress on: the runner prints its own summary line
            runner.precompile(cases, run, args.precompile_jobs, args.timeout, True, cache="warm", timing=None, seed=0)
        except Exception as e:  # noqa: BLE001 - as `run`: the pre-pass only saves time
            print(f"precompile failed ({type(e).__name__}: {e}); the cases compile in their own processes", flush=True)
    more = [m for m in args.preload.split(",") if m]
    ctx = runner._context(runner.preload_for(cases, device) + more)
    if more:
        print(f"forkserver preloads also {', '.join(more)}", flush=True)
    rows = []
    print("case".ljust(64) + "provider".ljust(16) + "".join(p.rjust(11) for p in PHASES) + "  status", flush=True)
    for case in cases:
        spent, status = run_case(ctx, run.task(case.key, cache="warm", seed=0), args.timeout)
        rows.append({"case": case.key, "phases": spent, "status": status})
        print(case.id[-63:].ljust(64) + case.provider[:15].ljust(16)
              + "".join((f"{spent[p]:.2f}" if p in spent else "-").rjust(11) for p in PHASES) + f"  {status}",
              flush=True)
    by: dict[str, dict[str, float]] = {}
    for r, case in zip(rows, cases):
        tot = by.setdefault(case.provider, {})
        for p, v in r["phases"].items():
            tot[p] = tot.get(p, 0.0) + v
    print("\ntotals (s) by provider")
    for prov, tot in by.items():
        print(prov[:15].ljust(16) + "".join(f"{tot.get(p, 0.0):.1f}".rjust(11) for p in PHASES))
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
