#!/usr/bin/env python3
"""Host cost of the public resample call, piece by piece (a dev aid, not a measurement of record).

On a tiny shape the GPU finishes before the host issues the next call, so a loop of calls measures the host:
    python3 scripts/host_cost_probe.py [--n 20000]
Prints ns per call of each piece of the launch floor (robocache/resample.py's plan-cache path), the public call,
torch.compile's call of the same op, and a bare cuLaunchKernel of the same plan.
"""
from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

# RCB_PROBE_ROOT: another checkout's root (an A/B of two trees in one call)
sys.path.insert(0, os.environ.get("RCB_PROBE_ROOT") or str(Path(__file__).resolve().parents[1]))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0], allow_abbrev=False)
    ap.add_argument("--n", type=int, default=20000)
    args = ap.parse_args()
    if args.n < 1:
        ap.error(f"--n must be at least 1 (calls per timed loop), got {args.n}")
    import torch
    import robocache
    from robocache import _launch as L
    rs = sys.modules["robocache.resample"]
    dev = "cuda"
    b, s, t, d = 227, 5, 16, 1
    v = torch.randn(b, s, d, device=dev, dtype=torch.float16)
    st = torch.sort(torch.rand(b, s, device=dev, dtype=torch.float64), dim=1).values
    tt = torch.rand(b, t, device=dev, dtype=torch.float64)
    print(f"robocache from {robocache.__file__}", flush=True)
    robocache.resample(v, st, tt)
    torch.cuda.synchronize()
    key = (L.signature(v), L.signature(st), L.signature(tt))
    plan = rs._PLANS.get(key)
    assert plan is not None, "the plan cache did not take the call"

    def eager(v, s, t):
        idx = torch.searchsorted(s, t, right=True).clamp(1, s.shape[1] - 1)
        x0, x1 = s.gather(1, idx - 1), s.gather(1, idx)
        w = ((t - x0) / (x1 - x0)).clamp(0, 1).unsqueeze(-1).to(v.dtype)
        g0 = v.gather(1, (idx - 1).unsqueeze(-1).expand(-1, -1, v.shape[2]))
        g1 = v.gather(1, idx.unsqueeze(-1).expand(-1, -1, v.shape[2]))
        return g0 + w * (g1 - g0)
    tc = torch.compile(eager, dynamic=False)
    tc(v, st, tt)
    out = plan.fl
    o = L.empty(plan.kind, plan.shape, v, plan.dev)
    ptrs = {0: v.data_ptr(), 1: st.data_ptr(), 2: tt.data_ptr(), 3: o.data_ptr()}
    stream = L.raw_stream("torch", 0)
    pieces = {
        "signature x3": lambda: (L.signature(v), L.signature(st), L.signature(tt)),
        "plan dict get": lambda: rs._PLANS.get(key),
        "new_empty": lambda: v.new_empty((b, t, d)),
        "torch.empty": lambda: torch.empty((b, t, d), dtype=v.dtype, device=v.device),
        "data_ptr x4": lambda: (v.data_ptr(), st.data_ptr(), tt.data_ptr(), o.data_ptr()),
        "getDevice": lambda: L.cupy_module().cuda.runtime.getDevice(),
        "raw_stream": lambda: L.raw_stream("torch", 0),
        "FastLaunch() (bare launch)": lambda: out(plan.grid, stream, 0, ptrs, None, plan.block),
        "fast_launch": lambda: L.fast_launch(out, plan.grid, "torch", 0, ptrs, block=plan.block),
        "plan(v, s, t)": lambda: plan(v, st, tt),
        "robocache.resample": lambda: robocache.resample(v, st, tt),
        "torch.compile": lambda: tc(v, st, tt),
    }
    # the dispatch cases of the quick suite (tiny calls): fuse of two streams, voxelize count
    f1 = torch.randn(1, 4, 3, device=dev)
    f2 = torch.randn(1, 6, 2, device=dev)
    t1 = torch.sort(torch.rand(1, 4, device=dev), dim=1).values
    t2 = torch.sort(torch.rand(1, 6, device=dev), dim=1).values
    tg = torch.rand(1, 2, device=dev)
    pts = torch.rand(1, 16, 3, device=dev)
    pieces["robocache.fuse (2 streams)"] = lambda: robocache.fuse([(f1, t1), (f2, t2)], tg)
    pieces["robocache.voxelize (count)"] = lambda: robocache.voxelize(pts, None, (4, 4, 4), ((0.0, 0.0, 0.0),
                                                                                          (1.0, 1.0, 1.0)), "count")
    # the pieces of those two calls (robocache/fuse.py's and robocache/voxelize.py's plan-cache paths)
    fs, vx = sys.modules["robocache.fuse"], sys.modules["robocache.voxelize"]
    streams = [(f1, t1), (f2, t2)]
    robocache.fuse(streams, tg)
    fkey = fs._signature(streams, tg)
    fplan = fs._PLANS.get(fkey)
    assert fplan is not None, "the fuse plan cache did not take the call"
    fo = L.empty(fplan.kind, fplan.shape, f1, fplan.dev)
    ftable = {}
    for k, (a, b_) in enumerate(streams):  # as fuse's _Plan fills it: stream k in table slot slots[k]
        ftable[fs.FUSE2_FIELDS * fplan.slots[k]] = a.data_ptr()
        ftable[fs.FUSE2_FIELDS * fplan.slots[k] + 1] = b_.data_ptr()
    fptrs = {2: tg.data_ptr(), 3: fo.data_ptr()}
    bounds = ((0.0, 0.0, 0.0), (1.0, 1.0, 1.0))
    pieces["fuse signature (5 arrays)"] = lambda: fs._signature(streams, tg)
    pieces["fuse plan(...)"] = lambda: fplan(streams, tg)
    pieces["fuse FastLaunch (by-value table)"] = lambda: fplan.fl(fplan.grid, stream, 0, fptrs, ftable, fplan.block)
    pieces["voxelize _key"] = lambda: vx._key(pts, None, (4, 4, 4), bounds, "count")
    pieces["torch.zeros(1,4,4,4 int32)"] = lambda: torch.zeros((1, 4, 4, 4), dtype=torch.int32, device=pts.device)
    pieces["L.zeros (new_empty + memset)"] = lambda: L.zeros("torch", (1, 4, 4, 4), "int32", pts, 0)
    for name, fn in pieces.items():
        best = float("inf")
        for _ in range(5):
            fn()
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            for _ in range(args.n):
                fn()
            torch.cuda.synchronize()
            best = min(best, (time.perf_counter() - t0) / args.n * 1e9)
        print(f"{name:30s} {best:8.0f} ns/call (best of 5 x {args.n})", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
