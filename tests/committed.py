"""The committed records, by explicit path, for the tests that read them (issue 24: never the user's results).

``make run`` writes the user's own runs to ``results/local/`` (ignored by git). A test that loaded ``results/``
whole picked them up: five regression tests failed after two ``make run``. These helpers name the committed files
instead: every ``*.records.json`` under ``results/`` that git does not ignore (:func:`store.committed_files`), and
never anything under ``results/local/`` even where git cannot be asked (a copy without ``.git``).
"""
from __future__ import annotations

import functools
import os
from pathlib import Path

from robocache.bench import store

REPO = Path(__file__).resolve().parents[1]
RESULTS = REPO / "results"
LOCAL = RESULTS / "local"  # make run's RUN_OUT (the Makefile) and `run`'s default --out (cli.ADHOC_OUT)


def _outside_local(path: str) -> bool:
    real, local = os.path.realpath(path), os.path.realpath(LOCAL)
    return not (real == local or real.startswith(local + os.sep))


@functools.cache
def files() -> tuple[str, ...]:
    """Every committed records file under ``results/``, sorted (what ``store.load(*files())`` reads)."""
    kept, _ignored = store.committed_files(RESULTS)
    found, _bad, _ = store.files_to_load(*kept)
    return tuple(f for f in found if _outside_local(f))


@functools.cache
def folders() -> tuple[Path, ...]:
    """The folders directly under ``results/`` that hold committed records (one per machine), sorted."""
    return tuple(sorted({RESULTS / Path(f).relative_to(RESULTS).parts[0] for f in files()}))


def load() -> store.LoadResult:
    """The committed records (a fresh load: callers may keep or change what they get)."""
    return store.load(*files())


def dirs_env() -> str:
    """:func:`folders` as one ``os.pathsep``-joined value (the dashboard's ``$ROBOCACHE_RESULTS_DIRS``)."""
    return os.pathsep.join(str(p) for p in folders())
