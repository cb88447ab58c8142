"""The dashboard's loader: results folders -> one pandas DataFrame (one row per record), cached in the process.

Folders: the repository's ``results/`` (the committed records), plus any given with ``--results DIR
[DIR ...]`` after ``--`` on the ``streamlit run`` command line, else with the ``ROBOCACHE_RESULTS_DIRS``
environment variable (``os.pathsep``-separated). Given folders are ADDED to ``results/``; a folder
already inside another listed one (``results/local`` inside ``results/``) is dropped from the list, and
the store loads any file reached twice only once. ``--no-default-results`` (or
``ROBOCACHE_NO_DEFAULT_RESULTS=1``) leaves ``results/`` out, so a folder of fixtures or of one run
shows on its own.

The frame itself, its columns and the columnar (Parquet) cache across processes are the harness's read model,
:mod:`robocache.bench.frame` (``robocache-bench check`` reads the same cache). This module adds the in-process
cache, ``st.cache_data`` keyed by every results file's path, size and mtime (:func:`robocache.bench.frame.files_fingerprint`), so
a new run shows up on the next rerun without clearing anything, and the helpers the pages share.
"""
from __future__ import annotations

import argparse
import hashlib
import os
import sys
import traceback
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import pandas as pd
import streamlit as st

from robocache.bench import frame
from robocache.bench.store import display_path

REPO = Path(__file__).resolve().parents[1]
DEFAULT_RESULTS = REPO / "results"
ENV_VAR = "ROBOCACHE_RESULTS_DIRS"  # folders added to results/
NO_DEFAULT_ENV_VAR = "ROBOCACHE_NO_DEFAULT_RESULTS"  # "1": results/ left out
# The snapshot pages (Overview, Sweeps, Architectures, Multi-GPU) show the newest figure of each of these; never
# across machines, timers or warm/cold. A *series* (what History draws as one line, and compare/check compare) is
# finer: robocache.bench.schema.series_key, which also splits by front end, grid version, input rotation and
# method version.
LATEST_KEYS = ["machine", "arch", "op", "case_id", "provider", "dtype", "timer", "cache"]
EXPECTED_ARCHES = ("A100", "H100", "H200")


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


@st.cache_data(show_spinner="Loading results ...", max_entries=4)
def _load_cached(dirs: tuple[bytes, ...], fingerprint: str, cache: bytes | None) -> tuple[
        pd.DataFrame, list[tuple[str, str]]]:
    del fingerprint  # part of the cache key only
    table, bad = frame.load_table([os.fsdecode(d) for d in dirs], None if cache is None else Path(os.fsdecode(cache)))
    # every path a page shows is text the browser can take (a name that is not UTF-8 shows as \xNN escapes)
    return frame.to_frame(table), [(display_path(p), why) for p, why in bad]


def load_frame(dirs: Sequence[str] | None = None, cache: Path | str | None | bool = True) -> tuple[
        pd.DataFrame, list[tuple[str, str]]]:
    """All records under ``dirs`` (default: :func:`results_dirs`) as one DataFrame, and the bad files.

    Bad files are ``(path, reason)`` pairs the loader skipped; a missing folder is one of them. The in-process
    cache key is the folders as bytes and :func:`robocache.bench.frame.files_fingerprint`, so any file name the OS
    allows can be hashed. ``cache``: the columnar cache's folder (``True``: :func:`robocache.bench.frame.cache_dir`; ``None``/``False``:
    none).
    """
    dirs = tuple(str(d) for d in (results_dirs() if dirs is None else dirs))
    folder = frame.cache_dir() if cache is True else (Path(cache) if cache else None)
    return _load_cached(tuple(os.fsencode(d) for d in dirs), frame.files_fingerprint(dirs),
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


# --- sensible defaults: the newest one-GPU machine with robocache records first, then the local run ----------

# Newest last: an architecture further right is preferred as the first screen; one not listed (a CPU, an
# unknown GPU) comes after every listed one.
ARCH_GENERATIONS = ("A100", "H100", "H200", "B200")


def preferred_machines(df: pd.DataFrame) -> list[str]:
    """Machines in the order a first screen should offer them: single-GPU GPU machines with ``ok`` robocache
    records, newest architecture first (then the most such records, then the name); then the machines of several
    GPUs, even with more such records (a sampled run spread over four GPUs outnumbers one GPU's nightly): a machine
    is of several GPUs when none of its counted records says ``gpu_count`` 1 or less (a missing count counts as one
    GPU, so older records and the CPU run keep their place; one run filed under a one-GPU name from a bigger host
    does not demote it); then the other machines with ``ok`` robocache records (the local CPU run); then every other
    machine. Never an empty one first because its name sorts first."""
    from robocache import providers

    if df.empty:
        return []
    d = df.assign(_m=df["machine"].astype(str), _a=df["arch"].astype(str), _dev=df["device"].astype(str))
    ours = d[(d["provider"].astype(str) == providers.OURS) & (d["status"].astype(str) == "ok")]
    single = ours["world_size"].isna() if "world_size" in ours.columns else pd.Series(True, index=ours.index)
    counted = ours[single]
    n = counted.groupby("_m").size()
    arch = d.groupby("_m")["_a"].first()
    dev = d.groupby("_m")["_dev"].first()
    # the fewest GPUs any counted record names (NaN, a missing count, as one): a machine of several only if all say so
    gpus = (counted.assign(_g=pd.to_numeric(counted["gpu_count"], errors="coerce").fillna(1)).groupby("_m")["_g"].min()
            if "gpu_count" in counted.columns else pd.Series(dtype=float))

    def rank(m: str) -> tuple:
        has = int(n.get(m, 0))
        gen = ARCH_GENERATIONS.index(arch[m]) if arch[m] in ARCH_GENERATIONS else -1
        g = gpus.get(m)
        several = g is not None and int(g) > 1
        tier = (1 if several else 0) if has and dev[m] == "gpu" else 2 if has else 3
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
