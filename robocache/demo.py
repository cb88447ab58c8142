"""A short tour: resample, fuse and voxelize on the best device present, and print the results.

Run with ``python -m robocache.demo`` (``make run``). On a machine with a CUDA GPU
and CuPy it runs the CUDA kernels and checks them against the NumPy reference; on a
machine without one it runs the CPU path (the reference itself) and says so.
"""
from __future__ import annotations

import time

import numpy as np

import robocache
from robocache import reference


def _gpu() -> tuple[object | None, str]:
    try:
        import cupy

        n = cupy.cuda.runtime.getDeviceCount()
        if n < 1:
            return None, "no CUDA device"
        name = cupy.cuda.runtime.getDeviceProperties(0)["name"].decode()
        return cupy, name
    except Exception as e:  # noqa: BLE001  no CuPy, no driver, no device
        return None, f"{type(e).__name__}: {e}".splitlines()[0]


def main() -> None:
    rng = np.random.default_rng(0)
    xp, where = _gpu()
    device = f"GPU ({where})" if xp is not None else f"CPU (NumPy reference path; GPU unavailable: {where})"
    print(f"robocache {robocache.__version__} on {device}")
    to = (lambda a: xp.asarray(a)) if xp is not None else (lambda a: a)
    back = (lambda a: xp.asnumpy(a)) if xp is not None else (lambda a: a)

    # The classic case: 256 trajectories, 100 source frames at jittered times -> 50 frames, 32 features.
    b, s, t, d = 256, 100, 50, 32
    src = np.sort(rng.uniform(0.0, 2.0, (b, s)), axis=1).astype(np.float32)
    tgt = np.broadcast_to(np.linspace(0.0, 2.0, t, dtype=np.float32), (b, t)).copy()
    vals = rng.standard_normal((b, s, d)).astype(np.float32)
    t0 = time.perf_counter()
    out = back(robocache.resample(to(vals), to(src), to(tgt)))
    ms = (time.perf_counter() - t0) * 1e3
    err = np.abs(out - reference.resample(vals, src, tgt)).max()
    print(f"resample {vals.shape} -> {out.shape} {out.dtype}: max |err| vs reference {err:.2e} "
          f"(first call {ms:.1f} ms, compile included)")

    # A robot mix: vision 256-D at 30 Hz, proprioception 14-D at 100 Hz, force 6-D at 333 Hz -> 50 Hz.
    b, secs = 32, 2.0
    streams = []
    for hz, dim in ((30, 256), (100, 14), (333, 6)):
        n = int(hz * secs)
        ts = np.sort(rng.uniform(0.0, secs, (b, n)), axis=1)
        streams.append((rng.standard_normal((b, n, dim)).astype(np.float32), ts))
    tgt = np.broadcast_to(np.arange(0.0, secs, 1 / 50), (b, int(50 * secs))).copy()
    fused = back(robocache.fuse([(to(v), to(ts)) for v, ts in streams], to(tgt)))
    err = np.abs(fused - reference.fuse(streams, tgt)).max()
    print(f"fuse 3 streams (30/100/333 Hz) -> {fused.shape} {fused.dtype}: max |err| vs reference {err:.2e}")

    # A point cloud: 4 clouds of 100k points in a 4 m cube -> 64^3 voxels.
    pts = rng.uniform(-2.2, 2.2, (4, 100_000, 3)).astype(np.float32)
    feats = rng.standard_normal((4, 100_000, 4)).astype(np.float32)
    bounds = ((-2.0, -2.0, -2.0), (2.0, 2.0, 2.0))
    counts = back(robocache.voxelize(to(pts), None, (64, 64, 64), bounds, "count"))
    mean = back(robocache.voxelize(to(pts), to(feats), (64, 64, 64), bounds, "mean"))
    same = np.array_equal(counts, reference.voxelize(pts, None, (64, 64, 64), bounds, "count"))
    err = np.abs(mean - reference.voxelize(pts, feats, (64, 64, 64), bounds, "mean")).max()
    print(f"voxelize {pts.shape} -> counts {counts.shape}: {int(counts.sum())} points kept, "
          f"{int((counts > 0).sum())} voxels occupied, counts equal reference: {same}; "
          f"mean features max |err| {err:.2e}")


if __name__ == "__main__":
    main()
