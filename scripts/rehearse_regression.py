#!/usr/bin/env python3
"""Rehearse the nightly regression alert end to end on the CPU, in a throwaway git history.

What it does, in a temporary folder (nothing in this repository is touched):

1. copies this working tree (tracked and untracked, not ignored files) and makes it a new git repository;
2. for each of --nights quiet nights: an empty commit, then the nightly steps on the CPU providers
   (``robocache-bench run`` of a few NumPy cases into the history folder, the commit recorded);
3. one commit that makes a kernel slower: the NumPy provider's ``resample`` sleeps for --slowdown of its own
   run time after computing (the result stays correct, so only the timing can catch it);
4. that night's run, then ``robocache-bench check --confirm --fail-on-regression`` over the history,
   which prints the alert (markdown) and writes it as JSON; the confirmation rerun measures the alerted
   cases once more before the alert is raised.

Exit code 0 when the check raised exactly the expected alert (the slowed case, first commit after = the
slow commit) and nothing else; 1 otherwise. About 2 minutes on a 2-core machine.

    python scripts/rehearse_regression.py                 # 8 quiet nights, then ten times as slow
    python scripts/rehearse_regression.py --keep --json alerts.json
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
CASES = ["resample/B256-S100-T50-D32/float32/numpy", "resample/B32-S100-T50-D32/float32/numpy",
         "voxelize/B4-N100000-G64-count-uniform/float32/numpy"]
SLOWED = sorted(CASES[:2])  # the slow commit touches NumPy's resample: both resample cases; voxelize is the control
MACHINE = "rehearsal-cpu"
SLOW_PATCH = '''

# --- rehearsal: this commit makes the resample kernel slower ------------------------------------------
import time as _time

_fast_resample = resample


def resample(values, src_times, tgt_times):  # noqa: F811 - the rehearsal's regression
    t0 = _time.perf_counter()
    out = _fast_resample(values, src_times, tgt_times)
    _time.sleep(SLOWDOWN * (_time.perf_counter() - t0))
    return out
'''


def sh(cmd: list[str], cwd: Path, env: dict[str, str] | None = None, check: bool = True) -> subprocess.CompletedProcess:
    out = subprocess.run(cmd, cwd=cwd, env=env, text=True, capture_output=True)
    if check and out.returncode != 0:
        raise SystemExit(f"rehearsal: `{' '.join(cmd)}` failed ({out.returncode}):\n{out.stdout[-2000:]}\n{out.stderr[-2000:]}")
    return out


def copy_tree(dst: Path) -> None:
    files = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=REPO,
                           capture_output=True, check=True).stdout.split(b"\0")
    for f in files:
        if not f:
            continue
        rel = f.decode()
        src = REPO / rel
        if src.is_file() and not rel.startswith("results/"):  # the history starts empty
            (dst / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dst / rel)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], epilog=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--nights", type=int, default=8, help="quiet nights before the slow commit (8)")
    ap.add_argument("--slowdown", type=float, default=9.0,
                    help="the slow commit's slowdown of resample (9.0: ten times as slow; a busy 2-core machine "
                         "measured the NumPy cases with 5-30%% noise between runs)")
    ap.add_argument("--json", help="also copy the alerts JSON here")
    ap.add_argument("--keep", action="store_true", help="keep the temporary folder and print its path")
    args = ap.parse_args(argv)

    tmp = Path(tempfile.mkdtemp(prefix="robocache-rehearsal-"))
    work, hist = tmp / "repo", tmp / "history"
    work.mkdir()
    t_start = time.perf_counter()
    try:
        copy_tree(work)
        git_env = {**os.environ, "GIT_AUTHOR_NAME": "rehearsal", "GIT_AUTHOR_EMAIL": "rehearsal@localhost",
                   "GIT_COMMITTER_NAME": "rehearsal", "GIT_COMMITTER_EMAIL": "rehearsal@localhost"}
        sh(["git", "init", "-q", "-b", "main"], work)
        sh(["git", "add", "-A"], work)
        sh(["git", "commit", "-q", "-m", "rehearsal: base"], work, git_env)
        # the copy's code, not the installed one, runs (the forked case processes inherit PYTHONPATH)
        # (and whatever PYTHONPATH already holds after it: packages installed with --target, as on the GPU machine)
        path = os.pathsep.join([str(work)] + ([os.environ["PYTHONPATH"]] if os.environ.get("PYTHONPATH") else []))
        run_env = {**os.environ, "PYTHONPATH": path, "ROBOCACHE_MACHINE": MACHINE}
        bench = [sys.executable, "-m", "robocache.bench.cli"]

        def night(label: str) -> str:
            commit = sh(["git", "rev-parse", "HEAD"], work).stdout.strip()
            t0 = time.perf_counter()
            sh([*bench, "run", "--device", "cpu", "--cases", ",".join(CASES), "--out", str(hist),
                "--time-limit", "0.5", "--no-progress"], work, {**run_env, "ROBOCACHE_GIT_COMMIT": commit})
            print(f"  {label:<28} commit {commit[:12]}  nightly run {time.perf_counter() - t0:4.1f} s", flush=True)
            return commit

        print(f"rehearsal in {tmp}: {args.nights} quiet nights, then a commit making {', '.join(SLOWED)} "
              f"{args.slowdown:.0%} slower", flush=True)
        for i in range(args.nights):
            sh(["git", "commit", "-q", "--allow-empty", "-m", f"rehearsal: night {i + 1}"], work, git_env)
            night(f"night {i + 1} (no change)")
        prov = work / "robocache" / "providers" / "numpy_cpu.py"
        prov.write_text(prov.read_text() + SLOW_PATCH.replace("SLOWDOWN", repr(args.slowdown)))
        sh(["git", "commit", "-q", "-am", "rehearsal: make the NumPy resample slower"], work, git_env)
        slow_commit = night("night with the slow commit")

        alerts_json, alerts_md = tmp / "alerts.json", tmp / "alerts.md"
        print("\n$ robocache-bench check history --machine rehearsal-cpu --confirm --fail-on-regression\n", flush=True)
        out = sh([*bench, "check", str(hist), "--machine", MACHINE, "--confirm", "--fail-on-regression",
                  "--json", str(alerts_json), "--markdown", str(alerts_md), "--confirm-out", str(tmp / "confirm")],
                 work, {**run_env, "ROBOCACHE_GIT_COMMIT": slow_commit}, check=False)
        print(out.stdout)
        if out.stderr.strip():
            print(out.stderr[-1500:], file=sys.stderr)
        doc = json.loads(alerts_json.read_text())
        if args.json:
            shutil.copy2(alerts_json, args.json)
        keys = sorted(a["case_key"] for a in doc["alerts"])
        ok = (out.returncode == 1 and keys == SLOWED
              and all(a["after"]["commit"] == slow_commit for a in doc["alerts"]))
        print(f"rehearsal {'OK' if ok else 'FAILED'}: check exit {out.returncode}, alerts {keys or 'none'} "
              f"(expected {SLOWED} since {slow_commit[:12]}); {time.perf_counter() - t_start:.0f} s")
        return 0 if ok else 1
    finally:
        if args.keep:
            print(f"kept {tmp}")
        else:
            shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
