#!/usr/bin/env python3
"""The loader's speed on 100,000 records: a benchmark, not a test (a busy machine must never fail a test).

    python scripts/bench_load.py            # from the repository root, in the project's venv

Writes 100 files of 1,000 schema-valid synthetic records each into a temporary folder, then times
- the store's load (``robocache.bench.store.load``, best of 3, after one untimed load for the page cache);
- the dashboard's first (uncached) and cached ``load_frame``, the overview's speedup figure and the Kernels
  page's tables over the frame.
Prints one line per figure; docs/harness.md quotes them. Nothing is asserted about time: a figure that grew
is a finding to look at, not a failure.
"""
from __future__ import annotations

import copy
import json
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from robocache.bench.store import RECORDS_SUFFIX, load  # noqa: E402
from tests.test_store import make_env, make_record  # noqa: E402


def write_bulk(out: Path, n_files: int = 100, per_file: int = 1000) -> None:
    """100,000 schema-valid records in 100 files, json.dumps directly (write_records validates: slow)."""
    env = make_env("synthetic-bulk")
    env.update(device="gpu", gpu_name="NVIDIA H200 (synthetic)", arch="H200", compute_capability="9.0",
               gpu_count=1, gpu_memory_gb=80.0, sm_count=132, l2_mb=50.0, driver="0.0", cuda="13.0",
               nvml="unknown: synthetic fixture")
    base = make_record(0)
    providers = ("robocache", "torch_eager", "torch_compile", "cupy")
    for f in range(n_files):
        recs = []
        for i in range(per_file):
            r = copy.deepcopy(base)
            b = 1 + i // len(providers)
            t = 1.0 + b * 0.01 + f * 1e-4
            r["run_id"] = f"bulk-{f:03d}"
            r["created"] = f"2026-02-{1 + f % 28:02d}T{f % 24:02d}:00:00Z"
            r["git_commit"] = f"{f:040x}"
            r["case"].update(id=f"resample/B{b}-S100-T50-D32", provider=providers[i % len(providers)],
                             params={"B": b, "S": 100, "T": 50, "D": 32})
            r["method"]["timer"] = "cuda_event"
            r["metrics"]["time_us"] = {"p20": t, "p50": t * (1 + i % len(providers)), "p80": t * 5, "min": t,
                                       "max": t * 5, "mean": t * 2}
            recs.append(r)
        doc = {"schema_version": 1, "kind": "robocache-bench/records", "env": env, "records": recs}
        (out / f"bulk-{f:03d}{RECORDS_SUFFIX}").write_text(json.dumps(doc), encoding="utf-8")


def main() -> int:
    with tempfile.TemporaryDirectory(prefix="rcb-bench-load-") as tmp:
        out = Path(tmp)
        write_bulk(out)
        res = load(out)  # first touch: page cache, imports
        if res.bad or len(res.records) != 100_000:
            print(f"bench_load: expected 100,000 good records, got {len(res.records)} and {len(res.bad)} bad files",
                  file=sys.stderr)
            return 1
        del res
        times = []
        for _ in range(3):
            t0 = time.perf_counter()
            res = load(out)
            times.append(time.perf_counter() - t0)
            del res
        print(f"store.load: 100,000 records from 100 files: best {min(times):.2f} s "
              f"(timed loads {', '.join(f'{t:.2f}' for t in times)})")
        try:
            from dashboard import charts, data, tables
        except ImportError as e:  # streamlit/plotly are in the [dev] extra
            print(f"dashboard figures skipped: {e}")
            return 0
        t0 = time.perf_counter()
        df, bad = data.load_frame([str(out)])
        first = time.perf_counter() - t0
        t0 = time.perf_counter()
        df2, _ = data.load_frame([str(out)])  # cached
        cached = time.perf_counter() - t0
        d = df2[(df2["arch"] == "H200") & (df2["op"] == "resample") & (df2["timer"] == "cuda_event")
                & (df2["cache"] == "warm")]
        charts.speedup_bars(tables.speedups(tables.side_by_side(d)))
        figure = time.perf_counter() - t0
        t0 = time.perf_counter()
        recs = tables.kernel_records(df2)
        tables.vs_compile(recs)
        tables.journey(recs)
        kernels = time.perf_counter() - t0
        print(f"dashboard load_frame: first {first:.2f} s ({len(df)} rows, {len(bad)} bad); cached {cached:.2f} s, "
              f"+ overview figure {figure:.2f} s; Kernels page tables {kernels:.2f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
