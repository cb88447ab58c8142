#!/usr/bin/env python3
"""Rehearse `robocache-bench bisect` in a throwaway git history with a planted slowdown (CPU, or a GPU kernel).

What one rehearsal does, in a temporary folder (nothing in this repository is touched):

1. copies this working tree (tracked and untracked, not ignored files; not results/) and makes it a new git
   repository: the base commit is the good endpoint;
2. makes --commits more commits (20): harmless ones (a line added to REHEARSAL.md), plus
   - at the first probe (the middle of the range) a commit that does NOT import (a syntax error in
     robocache/bench/specs.py), fixed by the next commit: bisection must skip it and report it as untestable;
   - at a seeded random place (never the broken commit or its fix: with the broken one just before it the culprit
     could be either, which is what bisection would then rightly say) the planted slowdown: on the CPU an extra
     pass in the NumPy provider's ``resample`` (the result computed twice, the second returned: a real ~2x, still
     correct); on the GPU (--device gpu) a loop of ``__syncthreads()`` at the start of robocache's v2 resample
     kernel (kernels/resample.cu: every block waits --spins barriers before its work; the result is unchanged);
3. on the CPU, starts a noisy neighbour: a process that copies 64 MB arrays in seeded bursts of 0.5-8 s with
   0.5-8 s pauses (memory bandwidth and a core taken from the measured processes), for the whole bisection;
4. runs ``robocache-bench bisect --series CASES --good BASE --bad HEAD`` (this checkout's bisect, the history's
   own harness at every commit) and reads its document: the culprit must be the planted commit and the broken
   commit must be listed as untestable. On the CPU torch is hidden from the measured runs (--hide-torch): the
   NumPy cases never use it, and every run's forkserver importing torch, dynamo and inductor was most of a run's
   time on a loaded 2-core machine (51 s of which 35 s; 17 s without).

With --no-plant the same history has no slowdown and the bisection must say "not reproducible" (--expect 2: the
endpoints must rule out a 2x change). Without --no-plant and --plant-only, one seed runs both.

    python scripts/rehearse_bisect.py                         # seed 0: the planted commit, then not reproducible
    python scripts/rehearse_bisect.py --seeds 20 --plant-only --json bisect-20.json   # the 20-seed figure
    python scripts/rehearse_bisect.py --device gpu --out OUT  # on a GPU (scripts/gpu_bisect.sh): planted __syncthreads

Exit code 0 when every rehearsal did what it should (with --seeds N > 1: at least 95% of the planted ones found,
every not-reproducible one right); 1 otherwise. On a busy 2-core machine one CPU seed takes 3-8 minutes.
"""
from __future__ import annotations

import argparse
import importlib.util
import json
import math
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
CPU_CASES = ["resample/B32-S100-T50-D32/float32/numpy", "resample/B16-S100-T50-D32/float32/numpy"]
GPU_CASES = ["resample/B256-S100-T50-D32/float32/robocache", "resample/B4096-S100-T50-D32/float32/robocache"]
MACHINE = "rehearsal-bisect"

CPU_PLANT = '''

# --- rehearsal: this commit makes the NumPy resample slower: an extra pass (the result is the same) --------
_one_pass_resample = resample


def resample(values, src_times, tgt_times):  # noqa: F811 - the rehearsal's planted slowdown
    for _ in range(PASSES):
        _one_pass_resample(values, src_times, tgt_times)
    return _one_pass_resample(values, src_times, tgt_times)
'''
GPU_ANCHOR = "        const rc_stream2 st = {values, src, S, D, 0, vb, lg, tpg};                       \\\n"
GPU_PLANT = ("        for (int rc_spin = 0; rc_spin < SPINS; ++rc_spin) __syncthreads();  /* rehearsal */      \\\n")
BROKEN = "\nthis line is not python  # rehearsal: a commit that does not import\n"

NEIGHBOUR = r'''
import random, sys, time
import numpy as np
rng = random.Random(int(sys.argv[1]))
a = np.ones(8_000_000)
while True:
    end = time.monotonic() + rng.uniform(0.5, 8.0)
    while time.monotonic() < end:
        b = a * 1.000001
    time.sleep(rng.uniform(0.5, 8.0))
'''


def copy_repo(dst: Path) -> None:
    """This checkout into ``dst``: the copy the regression rehearsal makes (tracked and untracked files, not
    ignored ones, not results/); where this is no git checkout (a GPU machine gets a copy of the working tree
    without .git) every file but the usual build, cache and results folders."""
    if not (REPO / ".git").exists():
        shutil.copytree(REPO, dst, dirs_exist_ok=True, ignore=shutil.ignore_patterns(
            ".git", ".venv", "results", "__pycache__", ".whl", ".cache", "gpu-out", "*.egg-info", ".asv", "build",
            "dist", ".pytest_cache", ".hypothesis"))
        return
    spec = importlib.util.spec_from_file_location("rehearse_regression", REPO / "scripts" / "rehearse_regression.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    mod.copy_tree(dst)


def sh(cmd: list[str], cwd: Path, env: dict[str, str] | None = None) -> str:
    out = subprocess.run(cmd, cwd=cwd, env=env, text=True, capture_output=True)
    if out.returncode != 0:
        raise SystemExit(f"rehearsal: `{' '.join(cmd)}` failed ({out.returncode}):\n{out.stdout[-2000:]}\n"
                         f"{out.stderr[-2000:]}")
    return out.stdout


GIT_ENV = {**os.environ, "GIT_AUTHOR_NAME": "rehearsal", "GIT_AUTHOR_EMAIL": "rehearsal@localhost",
           "GIT_COMMITTER_NAME": "rehearsal", "GIT_COMMITTER_EMAIL": "rehearsal@localhost"}


def build_history(work: Path, commits: int, seed: int, plant: bool, device: str, passes: int,
                  spins: int) -> dict:
    """The throwaway history; returns the base (good), head (bad), the planted and the broken commit."""
    copy_repo(work)
    (work / "REHEARSAL.md").write_text("A throwaway history for scripts/rehearse_bisect.py.\n")
    sh(["git", "init", "-q", "-b", "main"], work)
    sh(["git", "add", "-A"], work)
    sh(["git", "commit", "-q", "-m", "rehearsal: base (the good endpoint)"], work, GIT_ENV)
    base = sh(["git", "rev-parse", "HEAD"], work).strip()
    broken = commits // 2  # the first probe of a range of `commits`: bisection meets it and must skip it
    rng = random.Random(seed)
    planted = rng.choice([i for i in range(1, commits + 1) if i not in (broken, broken + 1)])
    specs = work / "robocache" / "bench" / "specs.py"
    prov = work / "robocache" / "providers" / "numpy_cpu.py"
    cu = work / "kernels" / "resample.cu"
    good_specs = specs.read_text()
    shas: dict[int, str] = {}
    for i in range(1, commits + 1):
        if i == broken:
            specs.write_text(good_specs + BROKEN)
            msg = "rehearsal: a commit that does not import"
        elif i == broken + 1:
            specs.write_text(good_specs)
            msg = "rehearsal: fix the import"
        elif i == planted and plant:
            if device == "gpu":
                text = cu.read_text()
                assert GPU_ANCHOR in text, "kernels/resample.cu changed: update GPU_ANCHOR"
                cu.write_text(text.replace(GPU_ANCHOR, GPU_PLANT.replace("SPINS", str(spins)) + GPU_ANCHOR, 1))
                msg = f"rehearsal: {spins} extra __syncthreads() per block in the v2 resample kernel"
            else:
                prov.write_text(prov.read_text() + CPU_PLANT.replace("PASSES", str(passes)))
                msg = f"rehearsal: {passes} extra pass(es) in the NumPy resample"
        else:
            with open(work / "REHEARSAL.md", "a") as f:
                f.write(f"commit {i}\n")
            msg = f"rehearsal: commit {i} (no change to the code)"
        sh(["git", "commit", "-q", "-am", msg], work, GIT_ENV)
        shas[i] = sh(["git", "rev-parse", "HEAD"], work).strip()
    return {"base": base, "head": shas[commits], "planted": shas[planted] if plant else None, "planted_index": planted,
            "broken": shas[broken], "broken_index": broken}


def noise_of(doc: dict, field: str = "value") -> dict[str, float]:
    """Per case, the between-run noise the bisection met at the good endpoint: the samples' robust sigma of log
    time (IQR / 1.349) as a fraction; ``field``: the samples (``value``, the statistic bisect used) or the
    records' medians (``p50_us``)."""
    good = doc["good"]["commit"]
    out = {}
    for c in doc["cases"]:
        xs = sorted(math.log(m[field]) for m in doc["measurements"]
                    if m["commit"] == good and m["case_key"] == c["key"] and m["used"] and m.get(field))
        if len(xs) >= 4:
            q = statistics.quantiles(xs, n=4)
            out[c["key"]] = (q[2] - q[0]) / 1.349
    return out


def one(seed: int, plant: bool, args: argparse.Namespace, out_root: Path | None) -> dict:
    tmp = Path(tempfile.mkdtemp(prefix="robocache-rehearse-bisect-"))
    work = tmp / "repo"
    work.mkdir()
    t0 = time.perf_counter()
    neighbour = None
    try:
        h = build_history(work, args.commits, seed, plant, args.device, args.passes, args.spins)
        cases = GPU_CASES if args.device == "gpu" else CPU_CASES
        out = (out_root / f"seed{seed}-{'plant' if plant else 'noplant'}") if out_root else tmp / "out"
        extra = [os.environ["PYTHONPATH"]] if os.environ.get("PYTHONPATH") else []
        if args.hide_torch:  # after every other entry: the candidates' own checkout still comes first
            hidden = tmp / "no-torch" / "torch"
            hidden.mkdir(parents=True)
            (hidden / "__init__.py").write_text('raise ImportError("hidden by scripts/rehearse_bisect.py")\n')
            extra = [*extra, str(hidden.parent)]
        env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), *extra])}
        cmd = [sys.executable, "-m", "robocache.bench.cli", "bisect", "--repo", str(work), "--series", ",".join(cases),
               "--good", h["base"], "--bad", h["head"], "--device", args.device, "--machine", args.machine,
               "--samples", str(args.samples), "--max-samples", str(args.max_samples), "--budget", str(args.budget),
               "--expect", str(args.expect), "--out", str(out), "--statistic", args.statistic,
               "--note", f"rehearsal seed {seed}: " + ("planted slowdown" if plant else "no planted change")]
        if args.time_limit:
            cmd += ["--time-limit", str(args.time_limit)]
        if args.neighbour:
            neighbour = subprocess.Popen([sys.executable, "-c", NEIGHBOUR, str(seed)], stdout=subprocess.DEVNULL,
                                         stderr=subprocess.DEVNULL)
        print(f"seed {seed}: {'planted' if plant else 'no planted'} slowdown"
              + (f" at commit {h['planted_index']} ({h['planted'][:12]})" if plant else "")
              + f", untestable commit {h['broken_index']} ({h['broken'][:12]}); bisecting ...", flush=True)
        run = subprocess.run(cmd, cwd=REPO, env=env, text=True, capture_output=True)
        if run.returncode != 0:
            return {"seed": seed, "plant": plant, "ok": False, "why": f"bisect exit {run.returncode}: "
                                                                      f"{run.stderr.strip()[-800:]}"}
        doc = json.loads(next(out.glob("*.bisect.json")).read_text())
    finally:
        if neighbour is not None:
            neighbour.kill()
            neighbour.wait()
        if not args.keep:
            shutil.rmtree(tmp, ignore_errors=True)
    untestable = [u["commit"] for u in doc["untestable"]]
    culprit = (doc.get("culprit") or {}).get("commit")
    if plant:
        ok = doc["status"] == "found" and culprit == h["planted"] and h["broken"] in untestable
    else:
        ok = doc["status"] == "not_reproducible"
    res = {"seed": seed, "plant": plant, "ok": ok, "status": doc["status"], "culprit": culprit,
           "planted": h["planted"], "planted_index": h["planted_index"], "broken": h["broken"],
           "untestable_reported": h["broken"] in untestable, "reason": doc["reason"],
           "tested": len(doc["evidence"]), "samples": len([m for m in doc["measurements"] if m["used"]]),
           "wall_s": doc["time"]["wall_s"], "noise": noise_of(doc), "noise_p50": noise_of(doc, "p50_us"),
           "rehearsal_s": time.perf_counter() - t0,
           "document": str(next(out.glob("*.bisect.json"))) if out_root else None}
    noise = ", ".join(f"{k.split('/')[1]} {v:.0%} ({res['noise_p50'].get(k, math.nan):.0%} in the records' medians)"
                      for k, v in res["noise"].items())
    print(f"  {'ok' if ok else 'FAILED'}: {doc['status']}"
          + (f", culprit {culprit[:12]} ({'the planted commit' if culprit == h['planted'] else 'NOT the planted one'})"
             if culprit else "")
          + f"; untestable {'reported' if res['untestable_reported'] else 'not reported'}; {res['tested']} decisions, "
            f"{res['samples']} samples, {doc['time']['wall_s']:.0f} s; noise ({args.statistic}) at the good endpoint: "
            f"{noise}", flush=True)
    if not ok:
        print(f"  reason: {doc['reason']}", flush=True)
    return res


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], epilog=__doc__, allow_abbrev=False,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seed", type=int, default=0, help="the first seed (0)")
    ap.add_argument("--seeds", type=int, default=1, help="how many seeds, from --seed (1)")
    what = ap.add_mutually_exclusive_group()
    what.add_argument("--plant-only", action="store_true", help="only the planted history")
    what.add_argument("--no-plant", action="store_true", help="only the history without the slowdown")
    ap.add_argument("--commits", type=int, default=None, help="commits after the base (CPU 20, GPU 10)")
    ap.add_argument("--device", choices=("cpu", "gpu"), default="cpu")
    ap.add_argument("--passes", type=int, default=1, help="CPU: extra passes of the planted NumPy resample (1: ~2x)")
    ap.add_argument("--spins", type=int, default=256, help="GPU: __syncthreads() per block in the planted kernel")
    ap.add_argument("--neighbour", action=argparse.BooleanOptionalAction, default=None,
                    help="the noisy neighbour process (default: on for the CPU, off for the GPU)")
    ap.add_argument("--samples", type=int, default=None, help="bisect --samples (6)")
    ap.add_argument("--max-samples", type=int, default=None, help="bisect --max-samples (CPU 48, GPU 24)")
    ap.add_argument("--time-limit", type=float, default=None, help="bisect --time-limit per sample (CPU 0.3, GPU 0.2)")
    ap.add_argument("--hide-torch", action=argparse.BooleanOptionalAction, default=None,
                    help="CPU: make torch unimportable for the measured runs (default on for the CPU): the NumPy cases "
                         "never use it, and each run's forkserver importing torch, dynamo and inductor cost 35 of a "
                         "run's 51 s on a loaded 2-core machine (17 s without)")
    ap.add_argument("--statistic", choices=("p50", "p20", "min"), default=None,
                    help="bisect --statistic (CPU: min, GPU: p50). On this 2-core machine at load 10, a 1.2 ms NumPy "
                         "call's records had medians of 1.5 to 11 ms (the load, not the code) and minima of 1.2-1.3 ms")
    ap.add_argument("--expect", type=float, default=2.0, help="bisect --expect (2.0: the planted ~2x)")
    ap.add_argument("--budget", type=float, default=None, help="bisect --budget seconds (CPU 1800, GPU 500: the "
                                                               "whole GPU rehearsal fits one 10-minute device call)")
    ap.add_argument("--machine", default=MACHINE, help=f"the records' machine name ({MACHINE})")
    ap.add_argument("--out", help="keep every bisection's document and run files under this folder")
    ap.add_argument("--json", help="write the per-seed results here")
    ap.add_argument("--keep", action="store_true", help="keep the throwaway histories")
    args = ap.parse_args(argv)
    gpu = args.device == "gpu"
    args.commits = args.commits or (10 if gpu else 20)
    args.samples = args.samples or 6
    args.max_samples = args.max_samples or (24 if gpu else 48)
    args.time_limit = args.time_limit or (0.2 if gpu else 0.3)
    args.budget = args.budget or (500.0 if gpu else 1800.0)
    args.neighbour = (not gpu) if args.neighbour is None else args.neighbour
    args.hide_torch = (not gpu) if args.hide_torch is None else args.hide_torch
    args.statistic = args.statistic or ("p50" if gpu else "min")
    if gpu and args.hide_torch:
        ap.error("--hide-torch is for the CPU rehearsal (the GPU run measures with the machine's own packages)")
    if args.commits < 4:
        ap.error("--commits must be at least 4")
    out_root = Path(args.out).resolve() if args.out else None
    plants = [True] if args.plant_only else [False] if args.no_plant else [True, False]
    results = []
    t0 = time.perf_counter()
    for seed in range(args.seed, args.seed + args.seeds):
        for plant in plants:
            results.append(one(seed, plant, args, out_root))
    planted = [r for r in results if r["plant"]]
    clean = [r for r in results if not r["plant"]]
    found = sum(r["ok"] for r in planted)
    noises = [v for r in results for v in (r.get("noise") or {}).values()]
    noises50 = [v for r in results for v in (r.get("noise_p50") or {}).values()]
    summary = {"device": args.device, "commits": args.commits, "seeds": args.seeds, "first_seed": args.seed,
               "planted_found": found, "planted_runs": len(planted),
               "not_reproducible_right": sum(r["ok"] for r in clean), "not_reproducible_runs": len(clean),
               "noise_median": statistics.median(noises) if noises else None,
               "noise_range": [min(noises), max(noises)] if noises else None, "statistic": args.statistic,
               "noise_p50_median": statistics.median(noises50) if noises50 else None,
               "neighbour": args.neighbour, "samples": args.samples, "max_samples": args.max_samples,
               "wall_s": time.perf_counter() - t0, "results": results}
    if args.json:
        Path(args.json).write_text(json.dumps(summary, indent=1))
    need = math.ceil(0.95 * len(planted)) if len(planted) > 1 else len(planted)
    ok = found >= need and all(r["ok"] for r in clean)
    print(f"\nrehearsal {'OK' if ok else 'FAILED'}: planted culprit found in {found} of {len(planted)} seeded run(s)"
          + (f", 'not reproducible' in {summary['not_reproducible_right']} of {len(clean)} without the plant"
             if clean else "")
          + (f"; between-run noise at the good endpoint (robust sigma of log time, per case and run) median "
             f"{summary['noise_median']:.0%}, {summary['noise_range'][0]:.0%} to {summary['noise_range'][1]:.0%} "
             f"({args.statistic}; the records' medians: {summary['noise_p50_median']:.0%})" if noises else "")
          + f"; neighbour {'on' if args.neighbour else 'off'}; {summary['wall_s']:.0f} s")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
