"""The public API's first call in a fresh process that holds only torch tensors (the pipelines' loaders, a user's
training script): nothing has imported CuPy yet, the tuning cache is empty and the autotuner is on.

The GPU tests' own process imports CuPy in conftest.py, so only a fresh interpreter sees this path: at 7060e97
(v3 BEST) every such first ``robocache.fuse`` failed with ``KeyError: 'cupy'`` in the tuner's device context
(H100 pipelines run 20261127T093905Z-e654fe), while all in-process GPU tests passed.
"""
from __future__ import annotations

import os
import subprocess
import sys

import pytest

CHILD = r"""
import sys
import numpy as np
import torch
assert "cupy" not in sys.modules, "torch imported CuPy: this test no longer sees a fresh process"
import robocache
from robocache import reference
assert "cupy" not in sys.modules, "importing robocache imported CuPy: this test no longer sees a fresh process"

op = sys.argv[1]
rng = np.random.default_rng(7)
dev = "cuda"
if op in ("resample", "fuse"):
    B, S, T = 64, 120, 50
    t_src = np.sort(rng.uniform(0, 1, (B, S)), axis=1).astype(np.float32)
    t_tgt = np.sort(rng.uniform(0, 1, (B, T)), axis=1).astype(np.float32)
    if op == "resample":
        v = rng.standard_normal((B, S, 14)).astype(np.float32)
        got = robocache.resample(torch.from_numpy(v).to(dev), torch.from_numpy(t_src).to(dev),
                                 torch.from_numpy(t_tgt).to(dev))
        want = reference.resample(v, t_src, t_tgt)
    else:
        v2 = rng.standard_normal((B, 40, 3)).astype(np.float32)
        t2 = np.sort(rng.uniform(0, 1, (B, 40)), axis=1).astype(np.float32)
        v1 = rng.standard_normal((B, S, 7)).astype(np.float32)
        streams = [(v1, t_src), (v2, t2)]
        got = robocache.fuse([(torch.from_numpy(a).to(dev), torch.from_numpy(b).to(dev)) for a, b in streams],
                             torch.from_numpy(t_tgt).to(dev))
        want = reference.fuse(streams, t_tgt)
else:
    pts = rng.uniform(-1, 1, (2, 5000, 3)).astype(np.float32)
    bounds = np.array([[-1, -1, -1], [1, 1, 1]], dtype=np.float32)
    got = robocache.voxelize(torch.from_numpy(pts).to(dev), None, (16, 16, 16), bounds, "count")
    want = reference.voxelize(pts, None, (16, 16, 16), bounds, "count")
np.testing.assert_allclose(got.cpu().numpy(), want, rtol=1e-5, atol=1e-5)
print("ok", op)
"""


@pytest.mark.parametrize("op", ["resample", "fuse", "voxelize"])
def test_first_call_from_torch_in_a_fresh_process(op, tmp_path):
    env = dict(os.environ, ROBOCACHE_CACHE_DIR=str(tmp_path), ROBOCACHE_AUTOTUNE="1")
    out = subprocess.run([sys.executable, "-c", CHILD, op], capture_output=True, text=True, timeout=300, env=env)
    assert out.returncode == 0, f"exit {out.returncode}: {out.stderr[-3000:]}"
    assert out.stdout.strip().endswith(f"ok {op}"), out.stdout[-500:]
