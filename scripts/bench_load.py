#!/usr/bin/env python3
"""The loader's speed at 10,000 and 100,000 records: a benchmark, not a test (a busy machine must never fail
a test).

    python scripts/bench_load.py            # from the repository root, in the project's venv
    python scripts/bench_load.py --sizes 100000 --repeat 5

Per size, writes files of 1,000 schema-valid synthetic records each into a temporary folder, then times
- the store's load (``robocache.bench.store.load``, best of ``--repeat``, after one untimed load);
- the dashboard's ``load_frame`` in a NEW process each time (best of ``--repeat``; the OS page cache is warm
  from the writes, nothing of Python's is): with no columnar cache ("no cache"), building the cache where there
  is none ("cache build"), and with the cache present ("cache, new process": the cold load of a dashboard
  started again), plus that process's import of ``dashboard.data`` (streamlit, pandas, pyarrow) apart;
- ``robocache-bench check --machine`` in a new process, without and with the frame cache;
- the History and Regressions pages' data in a new process (the frame through the cache, then ``check --machine``
  over its rows: ``dashboard.history_data``), and warm in this process (both ``st.cache_data`` hits);
- in this process, the warm load (``st.cache_data`` hit, what every rerun of a page costs), then (at 100,000)
  the Overview's morning page (the newest run per machine and op, robocache against the strongest peer, the
  headline, the losses chart) and the Kernels page's tables over the frame.
Prints one line per figure; docs/harness.md quotes them. Nothing is asserted about time: a figure that grew
is a finding to look at, not a failure.
"""
from __future__ import annotations

import argparse
import copy
import json
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from robocache.bench.store import RECORDS_SUFFIX, load  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
from tests.test_store import make_env, make_record  # noqa: E402


MACHINE = "synthetic-bulk"


def write_bulk(out: Path, n_files: int = 100, per_file: int = 1000) -> None:
    """``n_files * per_file`` schema-valid records, json.dumps directly (write_records validates: slow)."""
    env = make_env(MACHINE)
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
            r["frontend"] = "cli"  # the History page's (and check's) default front end
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


# One load_frame in a fresh interpreter: prints "<import s> <load s> <rows> <bad>".
_CHILD = """
import sys, time, warnings
warnings.simplefilter("ignore")
import logging
logging.disable(logging.WARNING)  # streamlit's "no runtime" notes, outside `streamlit run`
t0 = time.perf_counter()
from dashboard import data
t1 = time.perf_counter()
df, bad = data.load_frame([sys.argv[1]], cache=sys.argv[2] if sys.argv[2] != "-" else None)
t2 = time.perf_counter()
print(f"{t1 - t0:.3f} {t2 - t1:.3f} {len(df)} {len(bad)}")
"""


# The History and Regressions pages in a fresh interpreter: the frame through the columnar cache, then
# `check --machine M` over it (history_data.check_cached, what both pages call: the check reads the frame's
# columns). Prints "<load s> <check s> <series>".
_CHILD_HISTORY = """
import os, sys, time, warnings
warnings.simplefilter("ignore")
import logging
logging.disable(logging.WARNING)
os.environ["ROBOCACHE_FRAME_CACHE"] = sys.argv[2]
from dashboard import data, history_data
t0 = time.perf_counter()
df, bad = data.load_frame([sys.argv[1]])
t1 = time.perf_counter()
import scipy.stats  # regressions.check's own import, apart: it is no part of loading
t3 = time.perf_counter()
doc = history_data.check_cached((os.fsencode(sys.argv[1]),), "bench", "cli", sys.argv[3])
t4 = time.perf_counter()
print(f"{t1 - t0:.3f} {t4 - t3:.3f} {doc.summary.series}")
"""


def child_history(folder: Path, cache: Path, machine: str) -> tuple[float, float, int]:
    """(load_frame s, check s, series) of the History page's data in a new process (the cache present)."""
    out = subprocess.run([sys.executable, "-c", _CHILD_HISTORY, str(folder), str(cache), machine], cwd=REPO,
                         capture_output=True, text=True, check=True, env={**__import__("os").environ,
                                                                         "PYTHONPATH": str(REPO)})
    load_s, check_s, series = out.stdout.split()[-3:]
    return float(load_s), float(check_s), int(series)


def cli_check(folder: Path, cache: Path | None, machine: str) -> float:
    """Seconds of ``robocache-bench check FOLDER --machine M`` in a new process (imports included), its history
    through the frame cache in ``cache`` (``None``: off)."""
    env = {**__import__("os").environ, "PYTHONPATH": str(REPO), "ROBOCACHE_FRAME_CACHE": str(cache) if cache else "off"}
    t0 = time.perf_counter()
    out = subprocess.run([sys.executable, "-m", "robocache.bench.cli", "check", str(folder), "--machine", machine],
                         cwd=REPO, capture_output=True, text=True, env=env)
    took = time.perf_counter() - t0
    if out.returncode not in (0, 1):
        raise RuntimeError(f"check exited {out.returncode}: {out.stderr.strip()[-300:]}")
    return took


def child(folder: Path, cache: Path | None) -> tuple[float, float, int]:
    """(import s, load_frame s, rows) of one load in a new process."""
    out = subprocess.run([sys.executable, "-c", _CHILD, str(folder), str(cache) if cache else "-"], cwd=REPO,
                         capture_output=True, text=True, check=True, env={**__import__("os").environ,
                                                                         "PYTHONPATH": str(REPO)})
    imp, took, rows, bad = out.stdout.split()[-4:]
    if int(bad):
        raise RuntimeError(f"{bad} bad files in the synthetic folder")
    return float(imp), float(took), int(rows)


def bench(n: int, repeat: int, tmp: Path) -> None:
    folder = tmp / f"records-{n}"
    folder.mkdir()
    write_bulk(folder, n_files=max(1, n // 1000), per_file=min(n, 1000))
    res = load(folder)  # first touch
    if res.bad or len(res.records) != n:
        raise RuntimeError(f"expected {n} good records, got {len(res.records)} and {len(res.bad)} bad files")
    del res
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        res = load(folder)
        times.append(time.perf_counter() - t0)
        del res
    print(f"[{n:,} records] store.load: best {min(times):.2f} s ({', '.join(f'{t:.2f}' for t in times)})")
    cache = tmp / f"cache-{n}"
    nocache = [child(folder, None) for _ in range(repeat)]
    builds = []
    for _ in range(repeat):
        for f in cache.glob("*"):
            f.unlink()
        builds.append(child(folder, cache))
    cold = [child(folder, cache) for _ in range(repeat)]
    for name, got in (("no cache", nocache), ("cache build", builds), ("cache, new process", cold)):
        rows = {r for _, _, r in got}
        if rows != {n}:
            raise RuntimeError(f"{name}: {rows} rows, expected {n}")
        print(f"[{n:,} records] load_frame, {name}: best {min(t for _, t, _ in got):.2f} s "
              f"({', '.join(f'{t:.2f}' for _, t, _ in got)}); import of dashboard.data {min(i for i, _, _ in got):.2f} s")
    size = sum(f.stat().st_size for f in cache.glob("*.parquet"))
    json_size = sum(f.stat().st_size for f in folder.glob("*"))
    print(f"[{n:,} records] cache file {size / 1e6:.1f} MB (the JSON records: {json_size / 1e6:.1f} MB)")

    from dashboard import charts, data, tables

    data.load_frame([str(folder)], cache=cache)  # this process's first: fills st.cache_data
    warm = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        df2, _ = data.load_frame([str(folder)], cache=cache)
        warm.append(time.perf_counter() - t0)
    print(f"[{n:,} records] load_frame, warm (st.cache_data hit): best {min(warm):.2f} s "
          f"({', '.join(f'{t:.2f}' for t in warm)})")
    # History and Regressions: the same frame, then the regression check over its rows (no second JSON load)
    # the first new process computes the check (none kept yet) and keeps it beside the frame cache; the next ones
    # read it back (what a restarted dashboard does until a results file or the check's code changes)
    shutil.rmtree(cache / "checks", ignore_errors=True)
    hist = [child_history(folder, cache, MACHINE) for _ in range(max(2, repeat))]
    print(f"[{n:,} records] History/Regressions, new process (frame cache present): load_frame best "
          f"{min(h[0] for h in hist):.2f} s ({', '.join(f'{h[0]:.2f}' for h in hist)}); check --machine over the "
          f"frame, computed {hist[0][1]:.2f} s ({hist[0][2]} series); the kept check read back best "
          f"{min(h[1] for h in hist[1:]):.2f} s ({', '.join(f'{h[1]:.2f}' for h in hist[1:])})")
    # the CLI's check (a new process, imports included): the frame's columns through the columnar cache (present:
    # the pages' loads above built it), and with the cache off (the frame built from the JSON)
    withcli = [cli_check(folder, cache, MACHINE) for _ in range(repeat)]
    print(f"[{n:,} records] robocache-bench check --machine, new process, from the cache: best {min(withcli):.2f} s "
          f"({', '.join(f'{t:.2f}' for t in withcli)})")
    nocli = [cli_check(folder, None, MACHINE) for _ in range(repeat)]
    print(f"[{n:,} records] robocache-bench check --machine, new process, cache off: best {min(nocli):.2f} s "
          f"({', '.join(f'{t:.2f}' for t in nocli)})")
    import os

    from dashboard import history_data
    from robocache.bench import frame

    os.environ[frame.CACHE_ENV_VAR] = str(cache)  # the pages' load_frame(cache=True) finds this process's frame
    key = ((os.fsencode(str(folder)),), "bench-warm", "cli", MACHINE)
    history_data.check_cached(*key)  # this process's first: fills st.cache_data
    hwarm = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        data.load_frame([str(folder)])
        history_data.check_cached(*key)
        hwarm.append(time.perf_counter() - t0)
    print(f"[{n:,} records] History/Regressions, warm (st.cache_data hits: frame and check): best {min(hwarm):.2f} s "
          f"({', '.join(f'{t:.2f}' for t in hwarm)})")
    if n >= 100_000:
        t0 = time.perf_counter()
        w = tables.wins(tables.side_by_side(tables.newest_runs(df2)))  # the Overview's morning page
        tables.headline(w)
        charts.ranked_bars(w[w["speedup"] < 1], prefix_machine=True)
        figure = time.perf_counter() - t0
        t0 = time.perf_counter()
        recs = tables.kernel_rows(df2)
        tables.vs_compile(recs)
        tables.journey(recs)
        kernels = time.perf_counter() - t0
        print(f"[{n:,} records] Overview morning page {figure:.2f} s; Kernels page tables {kernels:.2f} s")


def main() -> int:
    ap = argparse.ArgumentParser(allow_abbrev=False, description=__doc__.split("\n")[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000], help="record counts to time")
    ap.add_argument("--repeat", type=int, default=3, help="timed loads per figure (best is quoted)")
    args = ap.parse_args()
    if args.repeat < 1 or any(n < 1 for n in args.sizes):
        print("bench_load: --sizes and --repeat must be positive", file=sys.stderr)
        return 2
    try:
        import dashboard.data  # noqa: F401
    except ImportError as e:  # streamlit/plotly/pyarrow are in the [dashboard] and [dev] extras
        print(f"bench_load: the dashboard's dependencies are missing ({e}); install the [dashboard] extra",
              file=sys.stderr)
        return 2
    import logging
    import warnings

    warnings.simplefilter("ignore")
    logging.disable(logging.WARNING)
    with tempfile.TemporaryDirectory(prefix="rcb-bench-load-") as tmp:
        for n in args.sizes:
            bench(n, args.repeat, Path(tmp))
    return 0


if __name__ == "__main__":
    sys.exit(main())
