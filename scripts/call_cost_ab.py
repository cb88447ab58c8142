#!/usr/bin/env python3
"""A/B of the public call's host cost: this tree's robocache against another tree's, both timed interleaved with
the bare launch in one process (a dev aid; the record of the call cost is the quick suite's ``dispatch.interleaved``).

    python3 scripts/call_cost_ab.py --base DIR [--ops resample,fuse,voxelize] [--repeats 3] [--arrays cupy] [--json FILE]

DIR is another checkout's root (its ``robocache/`` and ``kernels/``; e.g. ``git worktree add DIR HEAD~1``), imported
as the package ``robocache_base``. Each op's quick-suite call-cost case (its torch CUDA tensors) is timed by
``robocache.bench.timing.time_interleaved`` with three variants: the bare launch of the op's argument list, this
tree's public call and the base tree's, every round one loop of each in a rotated order; per round each public
call's time over the bare launch's is one ratio sample. Why (issue 25): separate runs of two trees differ by the
host's drift between processes (the quick suite's ratios move 5-10% between runs); rounds in one process see the
same drift, so the two ratios can be compared. ``--arrays cupy`` passes both trees zero-copy CuPy views of the same
tensors instead (the ``robocache (CuPy arrays)`` row of the quick suite's call cost). Prints p20/p50/p80 of both ratios and the quotient of their medians
(new / base) per op and repeat; asserts nothing. Both trees tune into one fresh temporary cache folder
(``ROBOCACHE_CACHE_DIR``), never the user's, and each tree's launch choices are printed.
"""
from __future__ import annotations

import argparse
import functools
import importlib.util
import json
import os
import shutil
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
OPS = ("resample", "fuse", "voxelize")  # the ops with a call-cost case (robocache/bench/ops)


def tree_problem(root: Path) -> str | None:
    """Why ``root`` is not a tree this script can import, or None."""
    if not (root / "robocache" / "__init__.py").is_file() or not (root / "kernels").is_dir():
        return f"{root} has no robocache/__init__.py and kernels/: pass another checkout's root"
    return None


def load_base(root: Path):
    """The robocache package of another tree, imported as ``robocache_base`` (its relative imports stay inside it)."""
    why = tree_problem(root)
    if why:
        raise ValueError(why)
    pkg = root / "robocache"
    spec = importlib.util.spec_from_file_location("robocache_base", pkg / "__init__.py",
                                                  submodule_search_locations=[str(pkg)])
    mod = importlib.util.module_from_spec(spec)
    sys.modules["robocache_base"] = mod
    spec.loader.exec_module(mod)
    return mod


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0], allow_abbrev=False)
    ap.add_argument("--base", required=True, type=Path, help="another checkout's root (robocache/ and kernels/)")
    ap.add_argument("--ops", default="resample,fuse,voxelize", help="comma-separated ops (default: all three)")
    ap.add_argument("--repeats", type=int, default=3, help="interleaved measurements per op (default 3)")
    ap.add_argument("--time-limit", type=float, default=2.0, help="seconds of rounds per measurement (default 2)")
    ap.add_argument("--arrays", choices=("torch", "cupy"), default="torch",
                    help="the public calls' arrays: the case's torch CUDA tensors (default) or CuPy views of them")
    ap.add_argument("--json", type=Path, help="also write the figures to this file")
    args = ap.parse_args()
    if args.repeats < 1 or args.time_limit <= 0:
        ap.error("--repeats must be at least 1 and --time-limit above 0")
    wanted = [o for o in args.ops.split(",") if o]
    bad = [o for o in wanted if o not in OPS]
    if bad or not wanted:
        ap.error(f"--ops: unknown {', '.join(bad) or '(none given)'}; expected some of {', '.join(OPS)}")
    if args.json is not None and not args.json.parent.is_dir():
        ap.error(f"--json: no folder {args.json.parent} to write {args.json.name} into")
    root = args.base.resolve()
    if tree_problem(root):
        ap.error(tree_problem(root))
    cache = tempfile.mkdtemp(prefix="rc_call_cost_ab_")  # after every usage check: an error leaves nothing
    os.environ["ROBOCACHE_CACHE_DIR"] = cache  # before either tree reads it: neither tunes into the user's cache
    base = load_base(root)
    import torch

    import robocache
    from robocache.bench import ops as opsmod
    from robocache.bench import specs, timing, worker

    if not torch.cuda.is_available():
        print("error: PyTorch sees no CUDA device; this script times GPU calls", file=sys.stderr)
        return 2
    out = []
    for case in specs.cases("quick", device="gpu", ops=wanted):
        if not (case.dispatch and case.provider == "robocache"):
            continue
        prep, why = worker.prepare(case, "gpu")
        if prep is None:
            print(f"{case.key}: skipped ({why})")
            continue
        views = timing.launch_floor._as_cupy(prep.args)
        bare = timing.BareLaunch(case.op, *opsmod.get(case.op).bare_args(case, views))
        if not bare.check()["passed"]:
            raise SystemExit(f"{case.key}: the bare launch wrote a wrong value")
        new_fn, base_fn = getattr(robocache, case.op), getattr(base, case.op)
        a, kw = (prep.args if args.arrays == "torch" else views), prep.kwargs  # kwargs hold no arrays (as the suite)
        for m in (robocache, base):
            m._tune.forget_used()  # each case's own launches below
        got_new, got_base = new_fn(*a, **kw), base_fn(*a, **kw)
        torch.cuda.synchronize()
        if args.arrays == "cupy":  # compared as torch tensors (zero-copy)
            got_new, got_base = torch.from_dlpack(got_new), torch.from_dlpack(got_base)
        same = got_new.shape == got_base.shape and got_new.dtype == got_base.dtype and (
            torch.equal(got_new, got_base) if not got_new.is_floating_point()
            else torch.allclose(got_new.double(), got_base.double(), rtol=1e-5, atol=1e-6))
        if not same:  # same inputs, same semantics: the two trees must agree
            raise SystemExit(f"{case.key}: this tree's output differs from the base tree's")
        chosen = {name: [c["config"] for c in m._tune.chosen()] for name, m in (("new", robocache), ("base", base))}
        print(f"{case.key}: launches new {chosen['new']}, base {chosen['base']}")
        for rep in range(args.repeats):
            got = timing.time_interleaved({"bare": bare.launch, "new": functools.partial(new_fn, *a, **kw),
                                           "base": functools.partial(base_fn, *a, **kw)}, "bare",
                                          sync=torch.cuda.synchronize,
                                          time_limit_s=args.time_limit, max_rounds=2000, noise_target=0.005)
            r = got["ratio"]
            q = {k: round(got["us"][k], 3) for k in got["us"]}
            line = {"case": case.key, "arrays": args.arrays, "repeat": rep, "rounds": got["rounds"], "calls_per_loop": got["calls_per_loop"],
                    "us": q, "new_x_bare": r["new"], "base_x_bare": r["base"],
                    "new_over_base_p50": r["new"]["p50"] / r["base"]["p50"]}
            out.append(line)
            print(f"{case.key} #{rep}: {got['rounds']} rounds x {got['calls_per_loop']} calls; bare {q['bare']:.2f} us; "
                  f"new {q['new']:.2f} us = {r['new']['p50']:.2f}x bare ({r['new']['p20']:.2f}-{r['new']['p80']:.2f}); "
                  f"base {q['base']:.2f} us = {r['base']['p50']:.2f}x ({r['base']['p20']:.2f}-{r['base']['p80']:.2f}); "
                  f"new/base {line['new_over_base_p50']:.3f}", flush=True)
    if args.json:  # written whole or not at all
        tmp = args.json.with_name(args.json.name + ".tmp")
        tmp.write_text(json.dumps(out, indent=1) + "\n")
        os.replace(tmp, args.json)
    shutil.rmtree(cache, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
