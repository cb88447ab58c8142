#!/usr/bin/env python3
"""fuse's launch plans as JSON, without a GPU: for each of many configurations (the row kernel's launches, the
column split, the shifted vectors, the staged kernel; two SM counts, four dtype pairs, four stream
mixes) the kernel's name, argument slots, the stream table's bytes, grid, block and slot map, built by the real
host code (robocache/fuse.py) with the emulator's kernel stubs (host_source.record_launches). A check for host
refactors: run it before and after, and compare the two files byte for byte.

    python3 scripts/kernel_emu/fuse_plans.py > before.json    # then edit, then:
    python3 scripts/kernel_emu/fuse_plans.py | cmp before.json -
"""
import importlib
import json
import sys
import types
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parents[1]))

import torch  # noqa: E402  after the checkout's path entries above
from host_source import record_launches  # noqa: E402  (scripts/kernel_emu/host_source.py)

from robocache import _launch as L  # noqa: E402
from robocache import _tune  # noqa: E402

SMS = [132]
record_launches(L, SMS)
fz = importlib.import_module("robocache.fuse")
out = []
for sms in (132, 1):
    SMS[0] = sms
    for dtype in ("float32", "bfloat16"):
        for tdtype in ("float32", "float64"):
            for b, t, streams in ((2, 7, [(11, 3), (23, 717), (5, 1), (9, 130)]), (3, 700, [(2000, 3), (90, 1)]),
                                  (1, 50, [(234, 717)]), (4, 1100, [(40, 37)])):
                arrays = [(torch.zeros((b, s, d), dtype=getattr(torch, dtype)),
                           torch.zeros((b, s), dtype=getattr(torch, tdtype))) for s, d in streams]
                pairs = [(types.SimpleNamespace(shape=(b, s, d), dtype=dtype), None) for s, d in streams]
                ta = types.SimpleNamespace(shape=(b, t), dtype=tdtype, kind="torch", device_index=0)
                for cfg in (_tune.DEFAULT, _tune.Config(lg_shift=1, tpg=4), _tune.Config(block=128), _tune.Config(cs=2),
                            _tune.Config(cs=3, block=64), _tune.Config(shift=1), _tune.Config(shift=1, block=64),
                            _tune.Config(stage=1), _tune.Config(unroll=2, vunroll=4)):
                    p = fz._plan_v2(pairs, ta, arrays, 0, cfg)
                    out.append([sms, dtype, tdtype, b, t, streams, str(cfg), p.fl.name, list(p.fl.slots),
                                list(p.fl.struct_buf) if p.fl.struct_buf is not None else None, p.grid, p.block,
                                p.slots, list(p.shape)])
json.dump(out, sys.stdout)
print()
