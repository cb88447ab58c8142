"""What the sampled-point probes share (scripts/wide_probe.py, scripts/gather_bound.py): their --cases check, the
GPU and its copy ceiling, a point's two harness cases, and a case prepared, gated against the reference and timed."""
from __future__ import annotations

import os
import re
import sys
import tempfile
from typing import Any

CASE_ID = re.compile(r"^[a-z_]+/s\d+-")  # <op>/s<seed>-..., the sampled suite's case ids


def bad_case_ids(ids: list[str], ops: tuple[str, ...] | None = None) -> str | None:
    """The first id that is not a sampled case id (of one of ``ops`` where given), as a usage message, or None."""
    for cid in ids:
        op = cid.partition("/")[0]
        if not CASE_ID.match(cid) or (ops is not None and op not in ops):
            kinds = f"{'/'.join(ops)} " if ops else ""
            return (f"--cases: {cid!r} is not a sampled {kinds}case id (<op>/s<seed>-..., e.g. "
                    "resample/s6113-41-B163-S3425-T632-D213)")
    return None


def gpu_ceiling(name: str) -> float | None:
    """The copy ceiling (GB/s) of the GPU, measured as the harness does, printed as ``name``'s first line; None (a
    message on stderr) where there is no CUDA device. Points the tuner's cache at a fresh folder unless one is set."""
    import torch

    if not torch.cuda.is_available():
        print(f"{name}: no CUDA device (this probe times GPU kernels)", file=sys.stderr)
        return None
    os.environ.setdefault("ROBOCACHE_CACHE_DIR", tempfile.mkdtemp(prefix=f"{name}_"))
    from robocache.bench.timing.device import copy_ceiling

    ceiling = float(copy_ceiling(time_limit_s=1.0)["gb_per_s"])
    print(f"{name}: copy ceiling {ceiling:.0f} GB/s", flush=True)
    return ceiling


def sampled_pair(cid: str) -> dict[str, Any] | None:
    """The point's robocache and torch_compile cases (by provider), or None where the sampled suite has no such id."""
    from robocache.bench import specs

    op, _, tag = cid.partition("/")
    seed = int(tag.split("-")[0][1:])
    found = {c.provider: c for c in specs.cases("sampled", ops=[op], providers=["robocache", "torch_compile"],
                                                sample_seed=seed) if c.id == cid}
    return found if set(found) == {"robocache", "torch_compile"} else None


def gated(case: Any) -> tuple[Any, Any, str | None]:
    """(prepared case, its NumPy reference, why it cannot be timed: None, or a skip's reason, or "WRONG ...") of
    ``case`` on the GPU: its output checked against the reference by the harness's gate first."""
    from robocache.bench import gate as gate_mod
    from robocache.bench import specs, worker

    prep, why = worker.prepare(case, "gpu")
    if prep is None:
        return None, None, why
    ref = specs.reference_output(case, worker._rounded(case, prep.args))
    chk = gate_mod.check(worker.to_host(prep.call()), ref, case.dtype)
    return prep, ref, None if chk["passed"] else f"WRONG (max rel err {chk['max_rel_err']})"


def timed_us(case: Any, prep: Any, time_limit_s: float) -> float:
    """The harness's warm median (us) of a prepared case: its rotating input sets, its timer."""
    from robocache.bench import worker
    from robocache.bench.timing.device import time_gpu

    call, _ = worker.rotating_call(case, prep, device="gpu", cache="warm")
    return float(time_gpu(call, time_limit_s=time_limit_s).median_us)
