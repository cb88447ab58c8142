"""The sampled suite's extreme points on a GPU (issue 25, item 2): the largest point of each op (the memory cap)
and the float64 epoch-seconds points gated against the reference for the public API and torch eager (the peer
with the largest temporaries). Correctness only; nothing is timed."""
from __future__ import annotations

import pytest


@pytest.fixture(scope="module")
def torch():
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("PyTorch sees no CUDA device")
    return torch


def _picks() -> list[str]:
    from robocache.bench import ops, specs

    keys = []
    for op in specs.OPS:
        pts = specs.sampled_points(op)
        model = ops.get(op)
        big = max(pts, key=lambda p: model.case_bytes(p.params, p.dtypes[0]))
        chosen = [big] + [p for p in pts if p.params.get("time_dtype") == "float64"][:1]
        keys += [f"{op}/{p.tag}/{p.dtypes[0]}/{prov}" for p in chosen for prov in ("robocache", "torch_eager")]
    return keys


@pytest.mark.parametrize("key", _picks())
def test_extreme_sampled_points_pass_the_gate(torch, key):
    from robocache.bench import worker
    from robocache.bench.messages import Task

    rec = worker.measure(Task(run_id="gpu-test", suite="sampled", frontend="test", device="gpu", case_key=key,
                              check_only=True))
    print(f"\n{key}: {rec.status}, {rec.case.bytes / 1e6:.0f} MB moved, {rec.duration_s:.1f} s, "
          f"max rel err {rec.check.max_rel_err if rec.check is not None else None}")
    assert rec.status == "ok", (rec.status, rec.reason)
    assert rec.check.passed
    torch.cuda.empty_cache()
