"""The harness's one read model: results files -> one columnar table of records (one row per record, the series'
identity in columns), through a Parquet cache keyed by the files as they are.

Each row carries its series' identity, ``series`` (the fingerprint of :func:`robocache.bench.schema.series_key`, the
one definition ``check``, ``compare``, the report and History's lines use), computed from the record itself.

The table is built column-wise (:func:`robocache.bench.columns.columns`: one pass over the records appending to
plain lists; then one Arrow table with a fixed schema, :data:`SCHEMA`, then pandas): for 100,000 records that is a
fraction of the msgspec load.

The columnar cache: one Parquet file per set of folders in :func:`cache_dir` (``.cache/frames/`` in a checkout,
ignored by git; ``$ROBOCACHE_FRAME_CACHE`` names another folder, ``off`` turns it off). It holds the Arrow rows of
every good file with each file's path, size, mtime_ns, ctime_ns and inode; a load re-reads (through the store's
own :func:`robocache.bench.store.read_file`) only the files whose key changed, drops the rows of files that are
gone, and re-reads every bad file each time, so bad files are reported exactly as
:func:`robocache.bench.store.load` reports them (the cache holds good files only: a file that became bad changed
its key and is read again). The JSON records stay the source of truth: the cache is written atomically
(:func:`robocache.bench.store.atomic_write`), verified on read (page checksums, schema, row counts) and rebuilt,
never trusted, when anything about it is off. ``scripts/bench_load.py`` measures it.

Readers: the dashboard (``dashboard/data.py`` adds Streamlit's in-process cache and the pages' helpers; its
History and Regressions pages' check reads the frame's columns as they are), the CLI's ``check`` (the Arrow
table's columns of :data:`robocache.bench.regressions.changepoints.FRAME_COLUMNS`, ``created_text`` the record's
time as written: pandas is imported only to build a frame, or a table from records on a cache miss), and
its ``show``, ``report`` and ``compare`` (:class:`History`: the runs found; ``report --kernels`` and ``--sampled``
the frame's rows, :func:`rows_of`; a run's records read in full from its own files; ``compare``'s between-run noise
from the columns). The across-runs views and the dashboard's Kernels and Sampled pages read the same rows
(:class:`robocache.bench.columns.Row`). Needs pandas and pyarrow (the ``dashboard`` and ``dev`` extras); the CLI
falls back to the store's JSON load without them, and builds the same rows from the records
(:func:`robocache.bench.columns.of_records`, the same derivation of the columns).
"""
from __future__ import annotations

import gc
import hashlib
import json
import math
import os
import warnings
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from . import store
from .columns import (  # noqa: F401 - MULTI_COLUMNS, SHAPE_PARAMS, shown_source: read as frame.X by the pages
    COLUMNS, MULTI_COLUMNS, MULTI_NUMERIC, REPO, ROW_COLUMNS, SHAPE_PARAMS, Row, columns, rows, shown_source)

if TYPE_CHECKING:
    import pandas as pd  # imported where a frame is built: the CLI's check reads the Arrow table without it
from .store import RECORDS_SUFFIX, TMP_PREFIX, display_path


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
INT_COLUMNS = ("input_sets", "method_version", "grid_version", "other_processes", "gpu_count", "bytes", "processes")
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



def _arrow_column(col: str, vals: list[Any]) -> pa.Array:
    import pandas as pd

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
    cols = columns(records)
    return pa.Table.from_arrays([_arrow_column(c, cols[c]) for c in COLUMNS], schema=SCHEMA)


def _object(s: pd.Series) -> pd.Series:
    """A categorical column of text as plain objects (missing: ``None``, as a list of str/None gives)."""
    import pandas as pd

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
# in a checkout (an editable install), its ignored .cache/; an installed package never writes beside itself: the
# user's cache folder
DEFAULT_CACHE_DIR = (REPO / ".cache" / "frames" if (REPO / "pyproject.toml").is_file() else
                     Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "robocache" / "frames")
CACHE_FORMAT = 5  # raise when what a row holds changes: older caches are then rebuilt
CACHE_KEEP = 16  # cache files kept per folder (one per set of results folders); the least recently used go
_CACHE_META = b"robocache.frames"


def cache_identity() -> str:
    """What a cached row depends on besides the records themselves: the frame's schema text (names and types),
    the code that derives the rows and validates the files (this module, ``robocache.bench.store`` and
    ``schema``: their source text), the record schema's version. Any change to them rebuilds the cache, so a
    ``git pull`` that changes how a column is derived or which files are rejected never serves old rows."""
    from robocache.bench import columns as rcolumns
    from robocache.bench import schema as rschema
    from robocache.bench import store as rstore

    h = hashlib.sha256(f"{CACHE_FORMAT}:{SCHEMA}:{rschema.SCHEMA_VERSION}".encode())
    for mod_file in (__file__, rcolumns.__file__, rstore.__file__, rschema.__file__):
        try:
            h.update(Path(mod_file).read_bytes())
        except OSError:  # a frozen or zipped install: the version still keys it
            h.update(str(mod_file).encode())
    return h.hexdigest()[:16]


_SCHEMA_ID = cache_identity()


def cache_dir(environ: Mapping[str, str] | None = None) -> Path | None:
    """The columnar cache's folder: ``$ROBOCACHE_FRAME_CACHE``, else ``.cache/frames`` in the repository (outside a
    checkout: ``$XDG_CACHE_HOME/robocache/frames``); ``None`` when the variable says ``off``/``0``/``none``."""
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
        # ParquetFile, not read_table: read_table goes through pyarrow.dataset, whose import (pandas among it) is
        # most of a cached load in a new process
        with pq.ParquetFile(path, page_checksum_verification=True,
                            read_dictionary=[c for c in COLUMNS if SCHEMA.field(c).type == _TEXT]) as f:
            table = f.read(use_pandas_metadata=False)
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
        warnings.warn(f"robocache: could not write the load cache {display_path(path)}: {e}", stacklevel=2)


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
    table, bad, _ = _load_table(dirs, cache)
    return table, bad


def _load_table(dirs: Sequence[str], cache: Path | None) -> tuple[
        pa.Table, list[tuple[str, str]], list[tuple[str, tuple[int, ...], int]]]:
    """:func:`load_table`, and its manifest: each good file with its key and rows, in the table's row order."""
    files, bad, _ = store.files_to_load(*dirs)
    target = cache_file(dirs, cache) if cache is not None else None
    cached: tuple[pa.Table, dict[str, tuple[tuple[int, ...], int, int]]] | None = None
    if target is not None:
        try:
            cached = _read_cache(target)
        except CacheError as e:
            warnings.warn(f"robocache: load cache {display_path(target)} not used, rebuilt: {e}",
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
    return table, bad, manifest



def load(dirs: Sequence[str], cache: Path | str | None | bool = True) -> tuple[pd.DataFrame, list[tuple[str, str]]]:
    """Every good record under ``dirs`` as one frame (one row per record, :data:`COLUMNS`) and the bad files as
    ``(path, reason)`` (unescaped, as :func:`robocache.bench.store.load` lists them), through the columnar cache
    (``cache``: its folder; ``True``: :func:`cache_dir`; ``None``/``False``: none)."""
    folder = cache_dir() if cache is True else (Path(cache) if cache else None)
    table, bad = load_table([str(d) for d in dirs], folder)
    return to_frame(table), bad


def _pylist(col: pa.ChunkedArray) -> list[Any]:
    """An Arrow column as Python values (None for null): dictionary text through its dictionary, once per chunk
    (a chunk per results file), numbers without nulls through numpy (``to_pylist`` value by value is most of a
    100,000-row read otherwise)."""
    out: list[Any] = []
    for chunk in col.chunks:
        if pa.types.is_dictionary(chunk.type):
            words = [*chunk.dictionary.to_pylist(), None]
            idx = chunk.indices.fill_null(len(words) - 1).to_numpy(zero_copy_only=False).tolist()
            out += [words[i] for i in idx]
        elif chunk.null_count == 0 and (pa.types.is_floating(chunk.type) or pa.types.is_integer(chunk.type)):
            out += chunk.to_numpy(zero_copy_only=False).tolist()
        else:
            out += chunk.to_pylist()
    return out


def _pandas_list(s: pd.Series) -> list[Any]:
    """A frame column as Python values, missing (NaN, None) as None."""
    vals = s.astype(object).tolist()
    return [None if v is None or (isinstance(v, float) and v != v) else v for v in vals]


def rows_of(data: pa.Table | pd.DataFrame) -> list[Row]:
    """The rows the across-runs views read (:class:`robocache.bench.columns.Row`) of a :data:`SCHEMA` table or of a
    frame of it (the dashboard's, or a part of it)."""
    if isinstance(data, pa.Table):
        return rows({c: _pylist(data.column(c)) for c in ROW_COLUMNS})
    return rows({c: _pandas_list(data[c]) for c in ROW_COLUMNS})


# --- show, report and compare: which runs there are, one run's records, compare's history --------------------

class History:
    """The records under some folders for ``show``, ``report`` and ``compare``, read through the frame (and its
    columnar cache): the runs found, in :func:`robocache.bench.views.records.runs`' order; a run's records read in
    full (the views read every field) from its own files only; the between-run noise of every series from the
    frame's columns. ``bad``: the bad files as :func:`robocache.bench.store.load` lists them."""

    _COLUMNS = ["run_id", "created", "series", "status", "p50", "throttled", "contended", "timer", "interleaved"]

    def __init__(self, dirs: Sequence[str], cache: Path | str | None | bool = True) -> None:
        folder = cache_dir() if cache is True else (Path(cache) if cache else None)
        with warnings.catch_warnings():  # a cache of older code is rebuilt without a word (the dashboard logs it)
            warnings.filterwarnings("ignore", message=".*written for another schema", category=UserWarning)
            table, self.bad, manifest = _load_table([str(d) for d in dirs], folder)
        self._table = table
        self._df = table.select(self._COLUMNS).to_pandas()
        self._files = [p for p, _, _ in manifest]
        self._file_of = np.repeat(np.arange(len(manifest)), [n for _, _, n in manifest])
        self._run = self._df["run_id"].astype(object)

    @property
    def empty(self) -> bool:
        return self._df.empty

    def run_ids(self) -> list[str]:
        """Every run, ordered by its first record's time (ties: in the order the store loads them)."""
        first = self._df.groupby(self._run, sort=False, observed=True)["created"].min()
        return sorted(first.index, key=first.__getitem__)

    def rows(self) -> list[Row]:
        """Every record as a row of the frame (``report --kernels`` and ``--sampled``), in the store's order."""
        return rows_of(self._table)

    def records_of(self, run_ids: Iterable[str]) -> list[Any]:
        """The records of ``run_ids``, in the store's order, parsed again from their files only."""
        want = set(run_ids)
        out: list[Any] = []
        for i in np.unique(self._file_of[self._run.isin(want).to_numpy()]):
            records, why = store.read_file(self._files[i])
            if why is not None:  # it changed between the frame's load and now
                raise ValueError(f"{display_path(self._files[i])}: {why}")
            out += [r for r in records if r.run_id in want]
        return out

    def noise(self, exclude_runs: Iterable[str] = ()) -> dict[str, tuple[float, float]]:
        """:func:`robocache.bench.regressions.verdicts.history_noise` over the frame's rows: healthy (ok, timed
        with p50 > 0 as the store's ``records.p50`` wants, neither throttled nor contended) rows of runs other than ``exclude_runs``, by series;
        a call-cost series' interleaved ratios under ``ratio_key`` of its fingerprint (``verdicts.ratio_points``)."""
        from .regressions.verdicts import noise_of_points, ratio_points

        d = self._df
        ok = (d["status"].astype(object) == "ok") & (d["p50"] > 0) & ~d["throttled"].astype(bool) & \
            ~d["contended"].astype(bool) & ~self._run.isin(set(exclude_runs))
        d = d[ok.to_numpy()]
        pts: dict[str, list[tuple[Any, float]]] = {}
        for fp, t, p in zip(d["series"].astype(object).tolist(), d["created"].to_numpy("int64").tolist(),
                            d["p50"].tolist()):
            pts.setdefault(fp, []).append((t, math.log(p)))
        pts.update(ratio_points(d["series"].astype(object).tolist(), d["created"].to_numpy("int64").tolist(),
                                d["timer"].astype(object).tolist(), d["interleaved"].astype(object).tolist()))
        return noise_of_points(pts)
