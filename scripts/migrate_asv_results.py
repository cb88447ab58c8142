#!/usr/bin/env python3
"""Migrate asv result files written before the benchmarks took their current names, so `asv publish` shows them.

    python scripts/migrate_asv_results.py                 # results/asv, against results/asv/benchmarks.json
    python scripts/migrate_asv_results.py --dry-run       # say what would change, write nothing
    python scripts/migrate_asv_results.py --results DIR --benchmarks DIR/benchmarks.json

asv shows a result only under a benchmark of ``benchmarks.json`` with the same name and ``version``. The H200 files
of 2026-11-20/21 were written by the first asv front end (grid version 1): a device time in microseconds
``<Op>.track_device_us``, bandwidth ``<Op>.track_gb_per_s``, ``<Op>Ceiling.track_pct_of_ceiling`` and the wall time
``<Op>Wall.time_wall``, each over one parameter, the case key ``op/case/dtype/provider``. Today's benchmarks
(benchmarks/common.py) keep lower-is-better figures only, over three parameters (case, dtype, provider). So
`asv publish` dropped all five H200 files (issue 24). This script maps, and only maps (no value is made up):

| old benchmark (grid version 1) | now | how |
| --- | --- | --- |
| ``bench_<op>.<Op>.track_device_us`` | ``bench_<op>.<Op>.time_device`` | the same median device time, us -> s (x 1e-6) |
| ``bench_<op>.<Op>Wall.time_wall`` | ``bench_<op>.<Op>Wall.time_wall`` | unchanged values, samples and statistics |
| ``bench_<op>.<Op>.track_gb_per_s`` | none (bandwidth stays in our records) | dropped |
| ``bench_<op>.<Op>Ceiling.track_pct_of_ceiling`` | none (% of ceiling stays in our records) | dropped |

Each value moves to the index of its (case, dtype, provider) in the current benchmark's parameters; a case key the
current grid does not have is dropped (counted). The version becomes the current one: grid version 2 changed the
bytes a record counts (``specs.GRID_VERSION``), which the times asv keeps do not carry, and every committed record of
those asv runs says method version 1, today's, with the same timer (CUDA events) and input rotation. Results
already under a current name and version are left as they are, so a second run changes nothing. A track's result
had no samples (asv keeps no spread for a ``track_``): a migrated ``time_device`` keeps none either, so
`asv compare` shows those old figures without ``±``; results measured since (``time_device`` feeds the harness's
samples to asv) carry their spread.

Exit code 0 (done, or nothing to do), 2 on a file that is not an asv results file of format version 2 or a
benchmarks file without the current benchmarks (nothing is written then). Writes are atomic (a temporary file in
the same folder, then a rename).
"""
from __future__ import annotations

import argparse
import ast
import itertools
import json
import math
import os
import re
import sys
import tempfile
from pathlib import Path
from typing import Any

OLD_VERSION = "robocache-grid-1"
SCALE_COLUMNS = ("result", "stats_ci_99_a", "stats_ci_99_b", "stats_q_25", "stats_q_75")  # in the figure's unit
# (old name pattern, new name template, factor to the new unit); None: no counterpart, dropped
RULES: list[tuple[re.Pattern[str], str | None, float]] = [
    (re.compile(r"^(bench_\w+)\.(\w+)\.track_device_us$"), r"\1.\2.time_device", 1e-6),
    (re.compile(r"^(bench_\w+)\.(\w+Wall)\.time_wall$"), r"\1.\2.time_wall", 1.0),
    (re.compile(r"^bench_\w+\.\w+\.track_gb_per_s$"), None, 0.0),
    (re.compile(r"^bench_\w+\.\w+Ceiling\.track_pct_of_ceiling$"), None, 0.0),
]


class MigrationError(ValueError):
    """A file this script cannot migrate safely; nothing is written."""


def rule_for(name: str) -> tuple[str | None, float] | None:
    """(the current name or None to drop, the factor), or None when no rule applies to ``name``."""
    for pat, new, factor in RULES:
        if pat.match(name):
            return (pat.sub(new, name) if new else None), factor
    return None


def _unquote(p: str) -> str:
    return ast.literal_eval(p) if isinstance(p, str) and p[:1] in "'\"" else str(p)


def _scaled(x: Any, factor: float) -> Any:
    if x is None or factor == 1.0:
        return x
    if isinstance(x, list):  # a sample list
        return [_scaled(v, factor) for v in x]
    return x * factor if isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x) else x


def migrate_entry(name: str, row: list[Any], columns: list[str], bench: dict[str, Any],
                  factor: float) -> tuple[list[Any], int]:
    """One result row of the old one-parameter benchmark ``name`` as a row of the current benchmark ``bench``
    (three parameters): (the row, how many parameter values had no place in the current grid)."""
    old = dict(zip(columns, row))
    params = old.get("params") or []
    if len(params) != 1:
        raise MigrationError(f"{name}: expected one parameter (the case key), got {len(params)}")
    new_params = bench["params"]
    index = {combo: j for j, combo in enumerate(itertools.product(*new_params))}
    size = len(index)
    out: dict[str, Any] = {c: None for c in columns}
    out.update(params=new_params, version=bench["version"], started_at=old.get("started_at"),
               duration=old.get("duration"))
    dropped = 0
    per_value = [c for c in columns if c in ("result", "samples") or c.startswith("stats_")]
    arrays = {c: [None] * size for c in per_value if old.get(c) is not None}
    for i, key in enumerate(params[0]):
        parts = _unquote(key).split("/")
        if len(parts) < 4:
            raise MigrationError(f"{name}: parameter {key!r} is not a case key op/case/dtype/provider")
        combo = (repr(parts[1]), repr(parts[2]), repr("/".join(parts[3:])))
        j = index.get(combo)
        if j is None:
            dropped += 1
            continue
        for c, arr in arrays.items():
            v = old[c][i] if i < len(old[c]) else None
            arr[j] = _scaled(v, factor) if (c in SCALE_COLUMNS or c == "samples") else v
    for c, arr in arrays.items():
        out[c] = None if all(v is None for v in arr) else arr
    new_row = [out.get(c) for c in columns]
    while new_row and new_row[-1] is None:  # asv's own trimming (Results.save)
        new_row.pop()
    return new_row, dropped


def migrate_doc(doc: dict[str, Any], benchmarks: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """The results document with every old benchmark mapped (:data:`RULES`); the changes, one line each."""
    if doc.get("version") != 2 or not isinstance(doc.get("results"), dict) or "result_columns" not in doc:
        raise MigrationError("not an asv results file of format version 2")
    columns = doc["result_columns"]
    results: dict[str, Any] = {}
    said: list[str] = []
    for name, row in doc["results"].items():
        old = dict(zip(columns, row))
        current = benchmarks.get(name)
        if current is not None and old.get("version") == current.get("version"):
            results.setdefault(name, row)  # already a current result
            continue
        rule = rule_for(name)
        if rule is None or old.get("version") != OLD_VERSION:
            results.setdefault(name, row)  # not ours to change: asv shows or hides it as before
            continue
        new_name, factor = rule
        if new_name is None:
            said.append(f"dropped {name} (no current counterpart)")
            continue
        bench = benchmarks.get(new_name)
        if bench is None:
            raise MigrationError(f"{new_name} (for {name}) is not in the benchmarks file")
        if new_name in doc["results"] and new_name != name:
            raise MigrationError(f"both {name} and {new_name} in one file: refusing to merge them")
        new_row, dropped = migrate_entry(name, row, columns, bench, factor)
        results[new_name] = new_row
        said.append(f"{name} -> {new_name}" + (f" (x{factor:g})" if factor != 1.0 else "")
                    + (f"; {dropped} case(s) not in the current grid dropped" if dropped else ""))
    return {**doc, "results": results}, said


def _write_json(path: Path, doc: dict[str, Any]) -> None:
    # asv's own layout (util.write_json, compact): one line, NaN kept as asv writes it
    data = json.dumps(doc, separators=(",", ":"))
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-")
    try:
        with os.fdopen(fd, "w") as f:
            f.write(data)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(allow_abbrev=False, description=__doc__.split("\n\n")[0])
    ap.add_argument("--results", default="results/asv", help="asv's results folder (default results/asv)")
    ap.add_argument("--benchmarks", default=None, help="the current benchmarks.json (default: RESULTS/benchmarks.json)")
    ap.add_argument("--dry-run", action="store_true", help="print what would change; write nothing")
    args = ap.parse_args(argv)
    root = Path(args.results)
    bpath = Path(args.benchmarks) if args.benchmarks else root / "benchmarks.json"
    try:
        benchmarks = json.loads(bpath.read_text())
    except (OSError, ValueError) as e:
        print(f"migrate_asv_results: cannot read the benchmarks file {bpath}: {e}", file=sys.stderr)
        return 2
    files = sorted(p for p in root.glob("*/*.json") if p.name != "machine.json")
    planned: list[tuple[Path, dict[str, Any], list[str]]] = []
    for path in files:
        try:
            doc = json.loads(path.read_text())
            new, said = migrate_doc(doc, benchmarks)
        except (OSError, ValueError) as e:  # MigrationError is a ValueError; so is bad JSON
            print(f"migrate_asv_results: {path}: {e}; nothing written", file=sys.stderr)
            return 2
        if said:
            planned.append((path, new, said))
    for path, new, said in planned:
        print(f"{path}:" + "".join(f"\n  {s}" for s in said))
        if not args.dry_run:
            _write_json(path, new)
    print(f"{len(planned)} of {len(files)} result file(s) {'would change' if args.dry_run else 'migrated'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
