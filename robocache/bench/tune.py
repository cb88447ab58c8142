"""``robocache-bench tune``: the launch-configuration table shipped for one GPU model (robocache/_tune.py).

On the GPU it runs the public API once on each shape of a *tuning set* drawn from the sampled suite's
distribution (:func:`robocache.bench.ops.base.sample_points`) with its own seed, :data:`TUNE_SEED`, never the
suite's (:data:`specs.SAMPLE_SEED`) nor a fresh ``--sample-seed`` a user evaluates with; so what the sampled
suite measures is out of sample. Every first call of a bucket times all of its candidates (no budget), in a
private cache folder; the choices are then written as ``<OUT>/<gpu>.json`` with their provenance, validated
before writing. Commit it as ``robocache/tuned/<gpu>.json``: never written by hand.
"""
from __future__ import annotations

import datetime
import json
import os
import platform
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from .. import _tune, _versions
from . import specs

# The tuning set's seed: apart from the sampled suite's seeds (the grid version, or a user's --sample-seed).
TUNE_SEED = 1_000_000 + specs.GRID_VERSION
TUNE_OPS = tuple(op.name for op in specs.ops.registered() if op.tuned_launch)  # the ops whose launches are tuned
TUNE_POINTS = 96  # shapes per op


def tuning_cases(op: str, seed: int = TUNE_SEED, n: int = TUNE_POINTS) -> list[specs.Case]:
    """The tuning set of ``op``: ``n`` shapes of the sampled distribution with ``seed``, each measured through the
    op's tuned version (``robocache@v3``), whatever the public API's best version is."""
    from .ops import base

    points = base.sample_points(specs.ops.get(op), seed, ("tune",), n=n, large=max(1, n // 6))
    return [specs.Case(op, pt.tag, pt.params, pt.dtypes[0], f"robocache@{_versions.TUNED[op]}", pt.reason,
                       pt.suites) for pt in points]


def _clear_plans() -> None:
    for op in TUNE_OPS:
        mod = sys.modules.get(f"robocache.{op}")
        if mod is not None:
            mod._PLANS.clear()


def tune(out_dir: Path, ops: tuple[str, ...] = TUNE_OPS, seed: int = TUNE_SEED, n: int = TUNE_POINTS,
         progress: bool = True) -> Path:
    """Tune every bucket the tuning set reaches on this GPU; write and return the table's path."""
    from . import worker

    unknown = [op for op in ops if op not in TUNE_OPS]
    if unknown:
        raise ValueError(f"no launch configurations to tune for {', '.join(unknown)}; ops are {', '.join(TUNE_OPS)}")
    if seed in (specs.SAMPLE_SEED,):
        raise ValueError(f"seed {seed} is the sampled suite's own: tuning on it would judge the table in sample")
    try:
        import cupy
        import torch
    except ImportError as e:
        raise ValueError(f"tune needs a CUDA GPU with torch and CuPy ({e})") from None
    if not torch.cuda.is_available():
        raise ValueError("tune needs a CUDA GPU: torch sees none")
    dev = _tune.device(torch.cuda.current_device())
    t0 = time.perf_counter()
    saved = {k: os.environ.get(k) for k in ("ROBOCACHE_CACHE_DIR", "ROBOCACHE_AUTOTUNE", "ROBOCACHE_TUNE_BUDGET_S")}
    shapes = skipped = 0
    with tempfile.TemporaryDirectory(prefix="robocache-tune-") as tmp:
        os.environ.update({"ROBOCACHE_CACHE_DIR": tmp, "ROBOCACHE_AUTOTUNE": "1", "ROBOCACHE_TUNE_BUDGET_S": "1e9"})
        _tune.reset()
        _clear_plans()
        _tune.USE_SHIPPED = False  # the table being written must not be read back: every bucket tuned afresh
        try:
            for op in ops:
                cases = tuning_cases(op, seed, n)
                for i, case in enumerate(cases):
                    prep, why = worker.prepare(case, "gpu")
                    if prep is None:
                        skipped += 1
                        print(f"tune: skipped {case.key}: {why}", file=sys.stderr)
                        continue
                    prep.call()
                    torch.cuda.synchronize()
                    del prep
                    cupy.get_default_memory_pool().free_all_blocks()
                    torch.cuda.empty_cache()
                    shapes += 1
                    if progress:
                        print(f"tune {op} {i + 1}/{len(cases)} {case.id} {case.dtype} "
                              f"({_tune.STATS['buckets_tuned']:.0f} buckets)", flush=True)
            path = _tune._store(torch.cuda.current_device()).path
            entries = _tune.parse_table(path.read_text(), str(path))["entries"] if path.exists() else {}
        finally:
            _tune.USE_SHIPPED = True
            for k, v in saved.items():
                if v is None:
                    os.environ.pop(k, None)
                else:
                    os.environ[k] = v
            _tune.reset()
            _clear_plans()
    if not entries:
        raise RuntimeError("tune: no bucket was tuned (every shape skipped?)")
    prov = {"command": "robocache-bench tune", "seed": seed, "points_per_op": n, "ops": list(ops),
            "shapes": shapes, "skipped": skipped, "commit": _commit(),
            "date": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
            "seconds": round(time.perf_counter() - t0, 1), "python": platform.python_version(),
            "torch": torch.__version__, "cupy": cupy.__version__}
    out = Path(out_dir) / f"{dev.slug}.json"
    _tune.write_table(out, dev, entries, prov)
    gains = sorted(e["default_us"] / e["us"] for e in entries.values() if e["us"] > 0)
    med = gains[len(gains) // 2] if gains else float("nan")
    print(f"tune: {len(entries)} buckets of {dev.name} from {shapes} shapes in {prov['seconds']} s; tuned over the "
          f"default rule: median {med:.2f}x, best {gains[-1] if gains else float('nan'):.2f}x -> {out}")
    return out


def _commit() -> str:
    """The commit tuned (``ROBOCACHE_GIT_COMMIT`` first: a device machine's copy of the tree may carry another
    checkout's git state), as every record gets it."""
    from .context import git_state

    commit, dirty = git_state()
    return (commit or "unknown") + ("+dirty" if dirty else "")


def summary(path: Path) -> dict[str, Any]:
    """A shipped table's provenance and size (for ``--help`` texts and tests)."""
    doc = _tune.parse_table(Path(path).read_text(), str(path))
    return {"device": doc["device"]["name"], "buckets": len(doc["entries"]), **doc.get("provenance", {})}


if __name__ == "__main__":  # pragma: no cover - python -m robocache.bench.tune OUT
    print(json.dumps(summary(Path(sys.argv[1])), indent=1))
