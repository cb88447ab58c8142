#!/usr/bin/env python3
"""How much a case's median moves from one process to the next (a dev aid for issue 27's A/A pairs).

    python3 scripts/process_spread.py [--cases KEY,...] [--processes 6] [--device gpu] [--json FILE]

The quick suite's A/A pairs moved robocache's 3-5 us cases by up to 4% between two runs of one commit while each
run's own noise was 0.1-0.9% (docs/regressions.md, "Where robocache's device-time moves come from"): the part that
varies is per process. This runs each case in ``--processes`` fresh processes, exactly as ``robocache-bench run``
does (``runner.run_in_process``: its gate, timer and input rotation), in interleaved rounds (round r runs every
case once, so a drift of the machine shows as a trend, not as one case's bias), and prints per case the processes'
medians (CUDA-event p50 and CUDA-graph replay time where the timer has one), their spread between processes
against the sd each process's median has from its own samples (``method.noise`` / 1.96), and the A/A move to expect when a run's figure is the mean of
k processes: the 90th percentile of |mean_A - mean_B|, ``1.645 * sqrt(2) * sd / sqrt(k)`` (k = 1, 2, 3, 4), beside
``compare``'s 3% floor. Nothing is written to results/; ``--json`` keeps every process's figures.

Default cases: the quick suite's robocache cases timed on the device (its call-cost cases are judged by their
interleaved ratio instead). On a machine without a GPU, ``--device cpu`` runs the CPU providers' cases (a check of
the script, not a measurement of interest).
"""
from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

Z90 = 1.645


def summarize(values: list[float], noise: list[float]) -> dict:
    """One case's figures over its processes' medians ``values`` (us) and their within-process noise ``noise``
    (the records' ``method.noise``: the 95% half-width of a median's confidence interval, relative): the median, the
    spread (max - min over the median), the between-process relative sd, the sd a process's median has from its
    own samples (the median half-width / 1.96), and the 90th-percentile A/A move expected when a run reports the
    mean of k processes (k = 1..4). With about six processes the sd itself is uncertain by some 30%."""
    if len(values) < 2:
        raise ValueError("at least two processes are needed for a spread")
    med = statistics.median(values)
    mean = statistics.fmean(values)
    sd = statistics.stdev(values) / mean
    return {"n": len(values), "median_us": med, "spread": (max(values) - min(values)) / med, "between_sd": sd,
            "within_sd": statistics.median(noise) / 1.96 if noise else None,
            "aa_move_p90": {k: Z90 * math.sqrt(2) * sd / math.sqrt(k) for k in (1, 2, 3, 4)}}


def default_cases(device: str) -> list[str]:
    from robocache.bench import specs

    return [c.key for c in specs.cases("quick", device=device)
            if c.provider == "robocache" and "dispatch" not in c.id]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], allow_abbrev=False)
    ap.add_argument("--cases", default="", help="comma-separated case keys op/tag/dtype/provider (default: the quick "
                                               "suite's robocache cases timed on the device)")
    ap.add_argument("--processes", type=int, default=6, help="fresh processes per case (default 6, at least 2)")
    ap.add_argument("--device", choices=("gpu", "cpu"), default="gpu")
    ap.add_argument("--timeout", type=float, default=300.0, help="seconds per case process (default 300)")
    ap.add_argument("--json", type=Path, help="write every process's figures and the summary here (atomically)")
    a = ap.parse_args()
    if a.processes < 2:
        ap.error("--processes must be at least 2 (a spread needs two)")
    if a.json is not None and not a.json.parent.is_dir():
        ap.error(f"--json: no folder {a.json.parent} to write {a.json.name} into")
    from robocache.bench import runner, specs, store
    from robocache.bench.regressions import FLOOR

    try:
        keys = [k for k in a.cases.split(",") if k] or default_cases(a.device)
        cases = [specs.find(k) for k in keys]
    except (KeyError, ValueError) as e:
        print(f"process_spread: {e}", file=sys.stderr)
        return 2
    if a.device == "gpu" and runner.detect_device() != "gpu":
        print("process_spread: no CUDA device (--device cpu checks the script on the CPU)", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory(prefix="process_spread_") as tmp:
        run = runner._run_context(suite="quick", device=a.device, frontend="cli", out_dir=tmp, machine=None,
                                  synthetic=False, resume=None)
        runner._context(runner.preload_for(cases, a.device))
        rows: dict[str, list[dict]] = {c.key: [] for c in cases}
        for r in range(a.processes):
            for case in cases:
                outcome, rec, detail = runner.run_in_process(run.task(case.key, cache="warm", timing=None, seed=0),
                                                             a.timeout)
                if outcome != "ok" or rec is None or rec.status != "ok" or rec.metrics is None:
                    why = detail or (rec.reason if rec is not None else "") or outcome
                    print(f"round {r + 1}: {case.key}: {why}", flush=True)
                    continue
                m = rec.metrics
                rows[case.key].append({"round": r + 1, "p50_us": m.time_us.p50, "graph_us": m.graph_time_us,
                                       "noise": rec.method.noise if rec.method else None})
                graph = f"{m.graph_time_us:.3f} us" if m.graph_time_us else "-"
                print(f"round {r + 1}: {case.key}: p50 {m.time_us.p50:.3f} us, graph {graph}",
                      flush=True)  # a run cut by a timeout still leaves every process's figure in its log
            print(f"round {r + 1} of {a.processes} done", flush=True)
    summary = {}
    print(f"\n{'case':58s} {'median us':>9s} {'spread':>7s} {'sd':>6s} {'own sd':>6s}  A/A move p90 for k = 1..4 "
          f"processes (floor {FLOOR:.0%}); graph replay's sd")
    for key, got in rows.items():
        if len(got) < 2:
            print(f"{key:58s} fewer than two processes ok: no spread")
            continue
        s = summarize([g["p50_us"] for g in got], [g["noise"] for g in got if g["noise"] is not None])
        graphs = [g["graph_us"] for g in got if g["graph_us"]]
        s["graph"] = summarize(graphs, []) if len(graphs) >= 2 else None
        summary[key] = s
        moves = " ".join(f"{v:5.1%}" for v in s["aa_move_p90"].values())
        within = f"{s['within_sd']:6.2%}" if s["within_sd"] is not None else "     -"
        graph = f"{s['graph']['between_sd']:6.2%}" if s["graph"] else "-"
        print(f"{key:58s} {s['median_us']:9.2f} {s['spread']:7.2%} {s['between_sd']:6.2%} {within}  {moves}   {graph}")
    if a.json is not None:
        store.atomic_write(a.json, json.dumps({"processes": a.processes, "device": a.device, "rows": rows,
                                               "summary": summary}, indent=1))
        print(f"written {a.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
