"""The dashboard's one loader: results folders -> one pandas DataFrame (one row per record), cached.

Folders: the repository's ``results/`` (the committed records), plus any given with ``--results DIR
[DIR ...]`` after ``--`` on the ``streamlit run`` command line, else with the ``ROBOCACHE_RESULTS_DIRS``
environment variable (``os.pathsep``-separated). Given folders are ADDED to ``results/``; a folder
already inside another listed one (``results/local`` inside ``results/``) is dropped from the list, and
the store loads any file reached twice only once. ``--no-default-results`` (or
``ROBOCACHE_NO_DEFAULT_RESULTS=1``) leaves ``results/`` out, so a folder of fixtures or of one run
shows on its own.

The frame is built column-wise (one pass over the records appending to plain lists, then one Arrow table
with a fixed schema, :data:`SCHEMA`, then pandas): for 100,000 records that is a fraction of the msgspec load.

Two caches, both keyed by what is on disk:
- in the process, ``st.cache_data`` keyed by every results file's path, size and mtime (:func:`files_fingerprint`),
  so a new run shows up on the next rerun without clearing anything;
- across processes, a columnar cache: one Parquet file per set of folders in :func:`cache_dir`
  (``.cache/frames/`` in the repository, ignored by git; ``$ROBOCACHE_FRAME_CACHE`` names another folder, ``off``
  turns it off). It holds the Arrow rows of every good file with each file's path, size, mtime_ns, ctime_ns and
  inode; a load re-reads (through the store's own :func:`robocache.bench.store.read_file`) only the files whose
  key changed, drops the rows of files that are gone, and re-reads every bad file each time, so bad files are
  reported exactly as :func:`robocache.bench.store.load` reports them (the cache holds good files only: a file
  that became bad changed its key and is read again). The JSON records stay the source of truth: the cache is
  written atomically (:func:`robocache.bench.store.atomic_write`), verified on read (page checksums, schema,
  row counts) and rebuilt, never trusted, when anything about it is off. ``scripts/bench_load.py`` measures it.
"""
from __future__ import annotations

import argparse
import gc
import hashlib
import json
import os
import sys
import traceback
import warnings
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import msgspec
import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import streamlit as st

from robocache.bench import store
from robocache.bench.store import RECORDS_SUFFIX, TMP_PREFIX, display_path

REPO = Path(__file__).resolve().parents[1]
DEFAULT_RESULTS = REPO / "results"
ENV_VAR = "ROBOCACHE_RESULTS_DIRS"  # folders added to results/
NO_DEFAULT_ENV_VAR = "ROBOCACHE_NO_DEFAULT_RESULTS"  # "1": results/ left out
# Shape parameters with a column each (the Sweeps page's axes); "G" is voxelize's grid side (``grid: [g, g, g]``;
# missing when the sides differ).
SHAPE_PARAMS = ("B", "S", "T", "D", "N", "G")
# The snapshot pages (Overview, Sweeps, Architectures, Multi-GPU) show the newest figure of each of these; never
# across machines, timers or warm/cold. A *series* (what History draws as one line, and compare/check compare) is
# finer: robocache.bench.schema.series_key, which also splits by front end, grid version, input rotation and
# method version.
LATEST_KEYS = ["machine", "arch", "op", "case_id", "provider", "dtype", "timer", "cache"]
EXPECTED_ARCHES = ("A100", "H100", "H200")

# From record.distributed (schema version 2): None for single-GPU records.
MULTI_NUMERIC = ("world_size", "nodes", "step_us", "aggregate_items_per_s", "efficiency", "gather_us",
                 "gather_gb_per_s", "collective_us", "collective_gb_per_s", "collective_busbw_gb_per_s")
MULTI_COLUMNS = (*MULTI_NUMERIC, "backend", "scaling", "gather", "per_rank_us")

COLUMNS = ["run_id", "created", "git_commit", "suite", "frontend", "machine", "arch", "gpu_name", "device",
           "op", "case_id", "provider", "dtype", "timer", "cache", "input_sets", "method_version", "noise", "status",
           "reason",
           "p20", "p50", "p80", "gb_per_s", "pct_of_ceiling", "items_per_s", "ceiling_gb_per_s", "throttled",
           "contended", "noisy", "synthetic", "params", *SHAPE_PARAMS,
           # for the runs page
           "grid_version", "git_dirty", "health_reasons", "sm_mhz_min", "sm_mhz_median", "sm_mhz_max_supported",
           "temperature_c_max", "power_w_max", "throttle_reasons", "other_processes", "gpu_count", "env",
           "source",
           # multi-GPU cases (record.distributed; empty for the others)
           *MULTI_COLUMNS,
           # call-cost (dispatch) cases (record.dispatch, schema v3; empty for the others and older schemas)
           "dispatch_device_us", "dispatch_gpu_keeps_up"]


def results_dirs(argv: Sequence[str] | None = None, environ: Mapping[str, str] | None = None) -> tuple[str, ...]:
    """The folders to load: ``results/``, plus ``--results`` args, else ``$ROBOCACHE_RESULTS_DIRS``.

    ``results/`` is left out with ``--no-default-results`` or ``$ROBOCACHE_NO_DEFAULT_RESULTS=1``.
    Duplicates, and folders inside another listed folder (compared by real path, as the store walks
    them), are dropped; the order is kept. A malformed command line falls back to the environment;
    ``--no-default-results`` with no other folder keeps ``results/`` (there would be nothing to show).
    """
    argv = sys.argv[1:] if argv is None else argv
    environ = os.environ if environ is None else environ
    parser = argparse.ArgumentParser(allow_abbrev=False, add_help=False)
    parser.add_argument("--results", nargs="+", action="extend", default=[])
    parser.add_argument("--no-default-results", action="store_true")

    def _fail(message: str) -> None:  # argparse would print usage and exit: fall back instead
        raise ValueError(message)

    parser.error = _fail  # type: ignore[method-assign]
    try:
        ns = parser.parse_known_args(list(argv))[0]
        cli, no_default = ns.results, ns.no_default_results
    except ValueError:  # a malformed --results: fall back rather than kill the app
        cli, no_default = [], False
    extra = cli or [p for p in environ.get(ENV_VAR, "").split(os.pathsep) if p.strip()]
    no_default = no_default or environ.get(NO_DEFAULT_ENV_VAR, "").strip().lower() in ("1", "true", "yes")
    dirs = ([] if no_default else [str(DEFAULT_RESULTS)]) + [str(p) for p in extra]
    return _dedup(dirs) if dirs else (str(DEFAULT_RESULTS),)


def _dedup(paths: Sequence[str]) -> tuple[str, ...]:
    """``paths`` without repeats and without folders inside another listed folder (by real path)."""
    real = [os.path.realpath(p) for p in paths]
    folders = {r for p, r in zip(paths, real) if os.path.isdir(p)}
    out: list[str] = []
    seen: set[str] = set()
    for p, r in zip(paths, real):
        if r in seen:
            continue
        if r in folders and any(r != f and r.startswith(f.rstrip(os.sep) + os.sep) for f in folders):
            # a folder covered by an outer one: the store walks the outer folder without following
            # links, so a real path under it is reached by that walk (a file named explicitly is kept:
            # it is read whatever its name, and the store reads a file reached twice once)
            continue
        seen.add(r)
        out.append(p)
    return tuple(out)


def files_fingerprint(dirs: Sequence[str]) -> str:
    """The cache key of what is on disk: a sha256 over every results file's (path, size, mtime), so new or
    rewritten files reload. Paths enter as bytes (``os.fsencode``): a file name that is not UTF-8 (a str with
    lone surrogates, which Streamlit's hasher cannot encode) is a key like any other."""
    h = hashlib.sha256()

    def add(p: str, st_: os.stat_result) -> None:
        h.update(os.fsencode(p) + b"\0" + f"{st_.st_size}:{st_.st_mtime_ns}".encode() + b"\0")

    for d in dirs:
        if os.path.isfile(d):
            add(d, os.stat(d))
            continue
        for dirpath, dirnames, filenames in os.walk(d):
            dirnames.sort()
            for fn in sorted(filenames):
                if fn.endswith(RECORDS_SUFFIX) and not fn.startswith(TMP_PREFIX):
                    p = os.path.join(dirpath, fn)
                    try:
                        st_ = os.stat(p)
                    except OSError:
                        continue
                    add(p, st_)
    return h.hexdigest()


# The frame's column types, fixed whatever the records hold (the cache stores exactly this). Text is dictionary
# encoded: 100,000 records of 100 files repeat each file's env (kilobytes of JSON) 1,000 times, stored once each.
CATEGORY_COLUMNS = ("run_id", "suite", "frontend", "machine", "arch", "device", "op", "provider", "dtype", "timer",
                    "cache", "status")
FLOAT_COLUMNS = ("noise", "p20", "p50", "p80", "gb_per_s", "pct_of_ceiling", "items_per_s", "ceiling_gb_per_s", *SHAPE_PARAMS,
                 "sm_mhz_min", "sm_mhz_median", "sm_mhz_max_supported", "temperature_c_max", "power_w_max",
                 *MULTI_NUMERIC, "dispatch_device_us")
# int64 in the frame when every record has one, float64 (NaN) when some lack it: pandas' own rule for a list
INT_COLUMNS = ("input_sets", "method_version", "grid_version", "other_processes", "gpu_count")
# bool when every record has one, object (True/False/None) when some lack it
BOOL_COLUMNS = ("throttled", "contended", "noisy", "synthetic", "git_dirty", "dispatch_gpu_keeps_up")
_TEXT = pa.dictionary(pa.int32(), pa.string())
_CREATED = pa.timestamp("ns", tz="UTC")


def _arrow_type(col: str) -> pa.DataType:
    if col == "created":
        return _CREATED
    if col in FLOAT_COLUMNS:
        return pa.float64()
    if col in INT_COLUMNS:
        return pa.int64()
    if col in BOOL_COLUMNS:
        return pa.bool_()
    return _TEXT


SCHEMA = pa.schema([pa.field(c, _arrow_type(c)) for c in COLUMNS])


def _grid_side(grid: Any) -> int | None:
    """A cubic grid's side (``[64, 64, 64]`` -> 64); ``None`` for anything else."""
    if isinstance(grid, (list, tuple)) and grid and all(type(g) is int and g == grid[0] for g in grid):
        return grid[0]
    return None


_REPO_PREFIX = str(REPO) + os.sep


def shown_source(src: Any) -> Any:
    """A record's file as the pages show it: relative to the repository when inside it (``results/h200-.../x.records
    .json``, not the checkout's absolute path), else as given; odd bytes as ``\\xNN`` (``store.display_path``)."""
    if not src:
        return src
    full = os.path.abspath(src)
    return display_path(full[len(_REPO_PREFIX):] if full.startswith(_REPO_PREFIX) else src)


def _columns(records: Sequence[Any]) -> dict[str, list[Any]]:
    """One list per column over the records (the one pass over them)."""
    cols: dict[str, list[Any]] = {c: [] for c in COLUMNS}
    a = {c: cols[c].append for c in COLUMNS}  # bound appends: the loop runs 100,000 times
    enc = msgspec.json.encode
    env_cache: dict[int, tuple[Any, ...]] = {}
    sources: dict[Any, Any] = {}
    for r in records:
        env = r.env
        e = env_cache.get(id(env))
        if e is None:  # one env object per file, shared by its records
            if env is None:
                e = ("?", "unknown", None, "?", None, "{}")
            else:
                arch = env.arch or ("CPU" if env.device == "cpu" else env.gpu_name or "unknown")
                e = (env.machine, arch, env.gpu_name, env.device, env.gpu_count, enc(env).decode())
            env_cache[id(env)] = e
        c = r.case
        m = r.method
        x = r.metrics
        h = r.health
        k = r.clocks
        p = c.params
        a["run_id"](r.run_id)
        a["created"](r.created)
        a["git_commit"](r.git_commit)
        a["suite"](r.suite)
        a["frontend"](r.frontend)
        a["machine"](e[0])
        a["arch"](e[1])
        a["gpu_name"](e[2])
        a["device"](e[3])
        a["gpu_count"](e[4])
        a["env"](e[5])
        a["op"](c.op)
        a["case_id"](c.id)
        a["provider"](c.provider)
        a["dtype"](c.dtype)
        a["grid_version"](c.grid_version)
        a["params"](enc(p).decode())
        for s in SHAPE_PARAMS:
            v = p.get(s) if s != "G" else _grid_side(p.get("grid"))
            a[s](v if isinstance(v, (int, float)) and not isinstance(v, bool) else None)
        a["timer"](m.timer if m else "-")
        a["cache"](m.cache if m else "-")
        a["input_sets"](m.input_sets if m else None)
        a["method_version"](m.version if m else None)
        a["noise"](m.noise if m else None)  # the median's 95% half-width in its run: the check's within-run noise
        a["status"](r.status)
        a["reason"](r.reason or "")
        if x is not None:
            t = x.time_us
            a["p20"](t.p20)
            a["p50"](t.p50)
            a["p80"](t.p80)
            a["gb_per_s"](x.gb_per_s)
            a["pct_of_ceiling"](x.pct_of_ceiling)
            a["items_per_s"](x.items_per_s)
            a["ceiling_gb_per_s"](x.ceiling_gb_per_s)
        else:
            for col in ("p20", "p50", "p80", "gb_per_s", "pct_of_ceiling", "items_per_s", "ceiling_gb_per_s"):
                a[col](None)
        a["throttled"](h.throttled)
        a["contended"](h.contended)
        a["noisy"](h.noisy)
        a["health_reasons"]("; ".join(h.reasons))
        a["synthetic"](r.synthetic)
        a["git_dirty"](r.git_dirty)
        if k is not None:
            a["sm_mhz_min"](k.sm_mhz_min)
            a["sm_mhz_median"](k.sm_mhz_median)
            a["sm_mhz_max_supported"](k.sm_mhz_max_supported)
            a["temperature_c_max"](k.temperature_c_max)
            a["power_w_max"](k.power_w_max)
            a["throttle_reasons"](", ".join(k.throttle_reasons))
            a["other_processes"](k.other_processes)
        else:
            for col in ("sm_mhz_min", "sm_mhz_median", "sm_mhz_max_supported", "temperature_c_max", "power_w_max",
                        "other_processes"):
                a[col](None)
            a["throttle_reasons"]("")
        src = r.source
        shown = sources.get(src)
        if shown is None:  # one source per file; one in this checkout shown from its root (results/...)
            shown = sources[src] = shown_source(src)
        a["source"](shown)
        dsp = getattr(r, "dispatch", None)
        a["dispatch_device_us"](getattr(dsp, "device_us", None) if dsp is not None else None)
        a["dispatch_gpu_keeps_up"](getattr(dsp, "gpu_keeps_up", None) if dsp is not None else None)
        dist = r.distributed
        if dist is None:
            for col in MULTI_COLUMNS:
                a[col](None)
        else:
            for col in MULTI_NUMERIC:
                a[col](getattr(dist, col))
            a["backend"](dist.backend)
            a["scaling"](dist.scaling)
            a["gather"](dist.gather)
            a["per_rank_us"](", ".join(f"{t:.1f}" for t in dist.per_rank_us))
    return cols


def _arrow_column(col: str, vals: list[Any]) -> pa.Array:
    typ = SCHEMA.field(col).type
    if col == "created":
        # ISO 8601 with offsets or "Z", to UTC; an odd string becomes NaT (null) instead of failing the page
        t = pd.to_datetime(pd.Series(vals, dtype=object), utc=True, errors="coerce", format="ISO8601")
        return pa.array(t.dt.as_unit("ns"), type=typ)
    if typ == _TEXT:
        try:
            return pa.array(vals, type=pa.string()).dictionary_encode()
        except (pa.ArrowException, TypeError, ValueError):  # a value that is not text (or not UTF-8): as its str
            return pa.array([None if v is None else str(v).encode("utf-8", "backslashreplace").decode("utf-8")
                             for v in vals], type=pa.string()).dictionary_encode()
    try:
        return pa.array(vals, type=typ)
    except (pa.ArrowException, TypeError, ValueError, OverflowError):
        # a value of another type (the schema checks these; never fail a page on one): coerced, or missing
        num = pd.to_numeric(pd.Series(vals, dtype=object), errors="coerce")
        if typ == pa.float64():
            return pa.array(num.astype("float64"), type=typ)
        if typ == pa.int64():
            return pa.array([int(v) if pd.notna(v) and float(v).is_integer() else None for v in num], type=typ)
        return pa.array([v if isinstance(v, bool) else None for v in vals], type=typ)


def build_table(records: Sequence[Any]) -> pa.Table:
    """The records' rows as an Arrow table of :data:`SCHEMA` (what the columnar cache stores)."""
    cols = _columns(records)
    return pa.Table.from_arrays([_arrow_column(c, cols[c]) for c in COLUMNS], schema=SCHEMA)


def _object(s: pd.Series) -> pd.Series:
    """A categorical column of text as plain objects (missing: ``None``, as a list of str/None gives)."""
    cats = np.asarray(s.cat.categories, dtype=object)
    codes = s.cat.codes.to_numpy()
    out = np.empty(len(s), dtype=object)
    have = codes >= 0
    out[have] = cats[codes[have]]
    out[~have] = None
    return pd.Series(out, index=s.index, name=s.name)


def to_frame(table: pa.Table) -> pd.DataFrame:
    """The page's frame from a :data:`SCHEMA` table: categories sorted (as ``astype("category")`` sorts them),
    other text as str/None objects, ints/bools as pandas types a list of them would get."""
    df = table.to_pandas()
    for col in COLUMNS:
        if SCHEMA.field(col).type != _TEXT:
            continue
        s = df[col]
        if col in CATEGORY_COLUMNS:
            s = s.cat.remove_unused_categories()
            df[col] = s.cat.reorder_categories(sorted(s.cat.categories))
        else:
            df[col] = _object(s)
    return df


def build_frame(records: Sequence[Any]) -> pd.DataFrame:
    """One row per record (see the module docstring for how)."""
    return to_frame(build_table(records))


# --- the columnar cache -----------------------------------------------------------------------------------

CACHE_ENV_VAR = "ROBOCACHE_FRAME_CACHE"  # a folder for the columnar cache; "off" (or "0", "none") turns it off
DEFAULT_CACHE_DIR = REPO / ".cache" / "frames"
CACHE_FORMAT = 2  # raise when what a row holds changes: older caches are then rebuilt
CACHE_KEEP = 16  # cache files kept per folder (one per set of results folders); the least recently used go
_CACHE_META = b"robocache.frames"


def cache_identity() -> str:
    """What a cached row depends on besides the records themselves: the frame's schema text (names and types),
    the code that derives the rows and validates the files (this module, ``robocache.bench.store`` and
    ``schema``: their source text), the record schema's version. Any change to them rebuilds the cache, so a
    ``git pull`` that changes how a column is derived or which files are rejected never serves old rows."""
    from robocache.bench import schema as rschema
    from robocache.bench import store as rstore

    h = hashlib.sha256(f"{CACHE_FORMAT}:{SCHEMA}:{rschema.SCHEMA_VERSION}".encode())
    for mod_file in (__file__, rstore.__file__, rschema.__file__):
        try:
            h.update(Path(mod_file).read_bytes())
        except OSError:  # a frozen or zipped install: the version still keys it
            h.update(str(mod_file).encode())
    return h.hexdigest()[:16]


_SCHEMA_ID = cache_identity()


def cache_dir(environ: Mapping[str, str] | None = None) -> Path | None:
    """The columnar cache's folder: ``$ROBOCACHE_FRAME_CACHE``, else ``.cache/frames`` in the repository;
    ``None`` when the variable says ``off``/``0``/``none``."""
    environ = os.environ if environ is None else environ
    v = environ.get(CACHE_ENV_VAR, "").strip()
    if v.lower() in ("off", "0", "none", "false", "no"):
        return None
    return Path(v) if v else DEFAULT_CACHE_DIR


def cache_file(dirs: Sequence[str], folder: Path) -> Path:
    """The cache file of one set of results folders (the folders as given, in order, as bytes)."""
    h = hashlib.sha256(b"\0".join(os.fsencode(str(d)) for d in dirs)).hexdigest()[:24]
    return folder / f"frame-{h}.parquet"


def _file_key(path: str) -> tuple[int, int, int, int] | None:
    """What says a results file is unchanged: size, mtime_ns, ctime_ns (a chmod, or an mtime set back) and inode
    (a file renamed over it). ``None``: it cannot be stat'ed (it is read, and reported bad if it is)."""
    try:
        st_ = os.stat(path)
    except OSError:
        return None
    return (st_.st_size, st_.st_mtime_ns, st_.st_ctime_ns, st_.st_ino)


class CacheError(Exception):
    """The cache file is not one this code wrote, or not whole: it is rebuilt."""


def _read_cache(path: Path) -> tuple[pa.Table, dict[str, tuple[tuple[int, ...], int, int]]] | None:
    """The cached table and ``{file: (key, first row, rows)}``; ``None`` when there is no cache file. Raises
    :class:`CacheError` for a cache that cannot be trusted (the caller rebuilds it)."""
    if not path.exists():
        return None
    try:
        table = pq.read_table(path, page_checksum_verification=True, use_pandas_metadata=False,
                              read_dictionary=[c for c in COLUMNS if SCHEMA.field(c).type == _TEXT])
        raw = (table.schema.metadata or {}).get(_CACHE_META)
        if raw is None:
            raise CacheError("no manifest")
        meta = json.loads(raw)
        if meta.get("schema") != _SCHEMA_ID:
            raise CacheError("written for another schema")
        table = table.replace_schema_metadata(None)
        if not table.schema.equals(SCHEMA):
            raise CacheError("columns differ from the schema it names")
        files: dict[str, tuple[tuple[int, ...], int, int]] = {}
        at = 0
        for hexpath, key, rows in meta["files"]:
            if not (isinstance(rows, int) and rows >= 0 and len(key) == 4 and all(isinstance(k, int) for k in key)):
                raise CacheError("a malformed manifest entry")
            files[os.fsdecode(bytes.fromhex(hexpath))] = (tuple(key), at, rows)
            at += rows
        if at != table.num_rows:
            raise CacheError(f"the manifest counts {at} rows, the table holds {table.num_rows}")
        return table, files
    except CacheError:
        raise
    except Exception as e:  # noqa: BLE001 - any failure to read it is a cache not to trust
        raise CacheError(f"{type(e).__name__}: {e}") from None


def _write_cache(path: Path, table: pa.Table, files: list[tuple[str, tuple[int, ...], int]]) -> None:
    """Write the cache atomically (store.atomic_write's temporary-and-rename); a failure only costs speed."""
    import io

    meta = {"schema": _SCHEMA_ID, "files": [[os.fsencode(p).hex(), list(k), n] for p, k, n in files]}
    try:
        buf = io.BytesIO()
        pq.write_table(table.replace_schema_metadata({_CACHE_META: json.dumps(meta).encode()}), buf,
                       compression="zstd", write_page_checksum=True)
        path.parent.mkdir(parents=True, exist_ok=True)
        store.atomic_write(path, buf.getvalue())
        prune(path.parent, keep=path)
    except Exception as e:  # noqa: BLE001 - a read-only checkout still loads, only slower
        warnings.warn(f"robocache dashboard: could not write the load cache {display_path(path)}: {e}", stacklevel=2)


def prune(folder: Path, keep: Path, pattern: str = "frame-*.parquet", most: int = CACHE_KEEP) -> None:
    """At most ``most`` cache files matching ``pattern`` in ``folder``; the least recently written go first."""
    try:
        found = sorted(folder.glob(pattern), key=lambda p: p.stat().st_mtime_ns, reverse=True)
    except OSError:
        return
    for p in found[most:]:
        if p != keep:
            try:
                p.unlink()
            except OSError:
                pass


def load_table(dirs: Sequence[str], cache: Path | None = None) -> tuple[pa.Table, list[tuple[str, str]]]:
    """Every good record under ``dirs`` as a :data:`SCHEMA` table, and the bad files as ``(path, reason)``
    exactly as :func:`robocache.bench.store.load` lists them; through the columnar cache in ``cache`` (a folder;
    ``None``: no cache), which is read, checked, and rewritten when a file changed, came or went."""
    files, bad, _ = store.files_to_load(*dirs)
    target = cache_file(dirs, cache) if cache is not None else None
    cached: tuple[pa.Table, dict[str, tuple[tuple[int, ...], int, int]]] | None = None
    if target is not None:
        try:
            cached = _read_cache(target)
        except CacheError as e:
            warnings.warn(f"robocache dashboard: load cache {display_path(target)} not used, rebuilt: {e}",
                          stacklevel=2)
    old_table, old = cached if cached is not None else (None, {})
    pieces: list[pa.Table] = []
    manifest: list[tuple[str, tuple[int, ...], int]] = []
    changed = cached is None or bool(set(old) - set(files))  # no usable cache, or files gone
    gc_was_on = gc.isenabled()
    gc.disable()  # as store.load: the decoder's many acyclic containers make the cyclic GC's passes costly
    try:
        for path in files:
            key = _file_key(path)
            hit = old.get(path)
            if key is not None and hit is not None and hit[0] == key:
                pieces.append(old_table.slice(hit[1], hit[2]))
                manifest.append((path, key, hit[2]))
                continue
            changed = changed or hit is not None  # its rows are stale (if it is bad now, they go)
            records, why = store.read_file(path)
            if why is not None:
                bad.append((path, why))  # never cached: a bad file is read, and reported, on every load
                continue
            t = build_table(records)
            pieces.append(t)
            changed = True
            # a file that could not be stat'ed gets a key no file has: read again next time, never trusted
            manifest.append((path, key if key is not None else (-1, -1, -1, -1), t.num_rows))
    finally:
        if gc_was_on:
            gc.enable()
    table = pa.concat_tables(pieces) if pieces else SCHEMA.empty_table()
    if target is not None and changed:
        _write_cache(target, table, manifest)
    return table, bad


@st.cache_data(show_spinner="Loading results ...", max_entries=4)
def _load_cached(dirs: tuple[bytes, ...], fingerprint: str, cache: bytes | None) -> tuple[
        pd.DataFrame, list[tuple[str, str]]]:
    del fingerprint  # part of the cache key only
    table, bad = load_table([os.fsdecode(d) for d in dirs], None if cache is None else Path(os.fsdecode(cache)))
    # every path a page shows is text the browser can take (a name that is not UTF-8 shows as \xNN escapes)
    return to_frame(table), [(display_path(p), why) for p, why in bad]


def load_frame(dirs: Sequence[str] | None = None, cache: Path | str | None | bool = True) -> tuple[
        pd.DataFrame, list[tuple[str, str]]]:
    """All records under ``dirs`` (default: :func:`results_dirs`) as one DataFrame, and the bad files.

    Bad files are ``(path, reason)`` pairs the loader skipped; a missing folder is one of them. The in-process
    cache key is the folders as bytes and :func:`files_fingerprint`, so any file name the OS allows can be hashed.
    ``cache``: the columnar cache's folder (``True``: :func:`cache_dir`; ``None``/``False``: none).
    """
    dirs = tuple(str(d) for d in (results_dirs() if dirs is None else dirs))
    folder = cache_dir() if cache is True else (Path(cache) if cache else None)
    return _load_cached(tuple(os.fsencode(d) for d in dirs), files_fingerprint(dirs),
                        None if folder is None else os.fsencode(str(folder)))


# --- helpers the pages share (no rendering of record text as HTML anywhere) ------------------------------

_MD_SPECIAL = "\\`*_{}[]()<>#+-.!|~$"


def md_escape(text: Any) -> str:
    """Record text made inert for ``st.markdown``-family calls: every markdown/HTML character escaped."""
    s = " ".join(display_path(str(text)).split())  # lone surrogates (a non-UTF-8 file name) as \xNN
    return "".join("\\" + ch if ch in _MD_SPECIAL else ch for ch in s)


def latest(df: pd.DataFrame, keys: list[str] | None = None) -> pd.DataFrame:
    """The newest record of each :data:`LATEST_KEYS` group (machine, arch, op, case, provider, dtype, timer,
    cache), or of each group of ``keys``."""
    if df.empty:
        return df
    return df.sort_values("created", kind="stable").drop_duplicates(keys or LATEST_KEYS, keep="last")


def options(df: pd.DataFrame, col: str) -> list[Any]:
    """Distinct values of ``col`` present in ``df`` (categories that no row uses are left out), sorted; ops in
    the grid's order (resample, the classic case, first), providers in the provider table's (robocache, its
    kernel versions, the peers), other values alphabetically."""
    from robocache import providers
    from robocache.bench import ops

    vals = df[col].dropna().unique().tolist()
    if col == "op":
        return sorted(vals, key=lambda v: (ops.order(str(v)), str(v)))
    if col == "provider":
        return sorted(vals, key=lambda v: providers.order(str(v)))
    return sorted(vals, key=str)


# The timer a page opens on: the device timer of the kernel grid first, never the profile suite's untimed
# records ("-") or the pipelines' host timer only because it sorts first.
TIMER_ORDER = ("cuda_event", "host_loop", "host")


def pick_method(d: pd.DataFrame, timer_col: Any, cache_col: Any) -> tuple[str, str, pd.DataFrame]:
    """The timer and cache-mode selectboxes (in the two given columns; the cache modes offered are the chosen
    timer's; both bound to the URL's ``timer`` and ``cache``): ``(timer, cache, the rows of d measured so)``.
    Figures are never mixed across them."""
    timers = options(d, "timer")
    first = next((t for t in TIMER_ORDER if t in timers), timers[0] if timers else None)
    timer = bound(timer_col.selectbox, "timer", timers, "timer", default=first)
    cache = bound(cache_col.selectbox, "cache", options(d[d["timer"] == timer], "cache"), "cache")
    return timer, cache, d[(d["timer"] == timer) & (d["cache"] == cache)]


def run_page(title: str, body: Callable[[], None]) -> None:
    """Render a page; any error becomes an ``st.error`` with its message, never a traceback."""
    st.title(title)
    try:
        body()
    except Exception as e:  # noqa: BLE001 - the page must stay up; the details go to the server log
        traceback.print_exc()
        st.error(f"This page failed: {md_escape(type(e).__name__)}: {md_escape(e)}")


def frame_page(title: str, body: Callable[[pd.DataFrame], None]) -> None:
    """A page over the loaded records: :func:`run_page` of ``body(frame)`` after :func:`loaded`'s banners (an empty
    load shows its note, and ``body`` is not called)."""
    def run() -> None:
        got = loaded()
        if got is not None:
            body(got[0])

    run_page(title, run)


def show_table(table: tuple[Any, dict[str, Any]], **kw: Any) -> None:
    """A ``(styled frame, column config)`` pair (:func:`dashboard.tables.readable`) as a dataframe; missing values
    as :data:`dashboard.tables.MISSING`."""
    from . import tables

    styled, config = table
    st.dataframe(styled, column_config=config, **kw, placeholder=tables.MISSING)


def loaded() -> tuple[pd.DataFrame, list[tuple[str, str]]] | None:
    """The frame and bad files, with the shared banners; ``None`` (after an ``st.info``) when empty."""
    dirs = results_dirs()
    df, bad = load_frame(dirs)
    if bad:
        st.warning(f"{len(bad)} results file(s) skipped as unreadable; the Runs page lists them.")
    if df.empty:
        st.info("No records found in " + ", ".join(md_escape(display_path(d)) for d in dirs)
                + ". Run `robocache-bench run` or pass `-- --results DIR` to `streamlit run`.")
        return None
    if bool(df["synthetic"].any()):
        st.warning("Some records are SYNTHETIC (generated fixtures), not measurements.")
    return df, bad


# --- sensible defaults: the newest GPU with robocache records first, then the local run --------------------

# Newest last: an architecture further right is preferred as the first screen; one not listed (a CPU, an
# unknown GPU) comes after every listed one.
ARCH_GENERATIONS = ("A100", "H100", "H200", "B200")


def preferred_machines(df: pd.DataFrame) -> list[str]:
    """Machines in the order a first screen should offer them: single-GPU GPU machines with ``ok`` robocache
    records, newest architecture first (then the most such records, then the name); then the other machines
    with ``ok`` robocache records (the local CPU run); then every other machine. Never an empty one first
    because its name sorts first."""
    from robocache import providers

    if df.empty:
        return []
    d = df.assign(_m=df["machine"].astype(str), _a=df["arch"].astype(str), _dev=df["device"].astype(str))
    ours = d[(d["provider"].astype(str) == providers.OURS) & (d["status"].astype(str) == "ok")]
    single = ours["world_size"].isna() if "world_size" in ours.columns else pd.Series(True, index=ours.index)
    n = ours[single].groupby("_m").size()
    arch = d.groupby("_m")["_a"].first()
    dev = d.groupby("_m")["_dev"].first()

    def rank(m: str) -> tuple:
        has = int(n.get(m, 0))
        gen = ARCH_GENERATIONS.index(arch[m]) if arch[m] in ARCH_GENERATIONS else -1
        tier = 0 if has and dev[m] == "gpu" else 1 if has else 2
        return (tier, -gen, -has, m)

    return sorted(d["_m"].unique().tolist(), key=rank)


def preferred(df: pd.DataFrame, col: str) -> Any:
    """The default value of ``col`` (``machine`` or ``arch``): that of the first of :func:`preferred_machines`."""
    ms = preferred_machines(df)
    if not ms:
        return None
    if col == "machine":
        return ms[0]
    vals = df.loc[df["machine"].astype(str) == ms[0], col].dropna()
    return vals.iloc[0] if len(vals) else None


# --- deep links: every page's selections live in the URL ---------------------------------------------------

def qp_get(key: str) -> str | None:
    try:
        v = st.query_params.get_all(key)
    except Exception:  # noqa: BLE001 - a malformed URL never fails a page
        return None
    return v[-1] if v else None


def bound(widget: Callable[..., Any], label: str, opts: Sequence[Any], key: str, default: Any = None,
          **kw: Any) -> Any:
    """A one-choice widget (``selectbox`` or ``radio`` of a container) bound to the URL's query parameter ``key``:
    its initial choice is the parameter's value when it names an option (compared as text), else ``default``,
    else the first option; the choice is written back, so the URL always names the view. A parameter naming no
    option is ignored (the page still draws) and replaced."""
    opts = list(opts)
    names = [str(o) for o in opts]
    want = qp_get(key)
    if want is not None and want in names:
        index = names.index(want)
    elif default is not None and str(default) in names:
        index = names.index(str(default))
    else:
        index = 0
    # keyed: the widget's identity is the key, so a changed initial index (the URL rewritten by the last choice)
    # never makes a new widget that drops the user's next choice
    value = widget(label, opts, index=index if opts else None, key=f"qp:{key}", **kw)
    if value is None:
        st.query_params.pop(key, None)
    else:
        st.query_params[key] = str(value)
    return value


def bound_multi(widget: Callable[..., Any], label: str, opts: Sequence[Any], key: str,
                default: Sequence[Any] | None = None, **kw: Any) -> list[Any]:
    """A multiselect bound to the repeated query parameter ``key`` (``?machine=a&machine=b``), as :func:`bound`;
    an empty parameter (``?machine=``) is an empty choice, a missing one the ``default`` (every option). Only a
    choice other than the default is written to the URL, so the default follows the options offered."""
    opts = list(opts)
    by_name = {str(o): o for o in opts}
    try:
        raw = st.query_params.get_all(key) if key in st.query_params else None
    except Exception:  # noqa: BLE001
        raw = None
    fallback = [o for o in (opts if default is None else default) if str(o) in by_name]
    chosen = [by_name[v] for v in raw if v in by_name] if raw is not None else fallback
    if raw is not None and not chosen and any(raw):  # it names only options not offered here: the default
        chosen = fallback
    # keyed by the options too: a choice holds while they stay, and new options (another machine's providers)
    # start from the URL's choice or the default, rather than from the old options' choice minus what is gone
    opts_id = hashlib.sha256("\0".join(sorted(by_name)).encode("utf-8", "surrogateescape")).hexdigest()[:12]
    value = widget(label, opts, default=chosen, key=f"qp:{key}:{opts_id}", **kw)
    if {str(v) for v in value} == {str(v) for v in fallback}:
        # the default choice stays out of the URL: it follows the options (another machine's providers), where
        # a choice written down would carry one context's options into the next
        st.query_params.pop(key, None)
    else:
        st.query_params[key] = [str(v) for v in value] if value else ""
    return value
