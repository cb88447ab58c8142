"""Which sources a record measured: a hash of the library's files, checked against the commit the record names.

A record's commit comes from ``git rev-parse HEAD`` or, on a machine whose copy of the tree has no usable git (the
lent GPU machines: their ``.git`` may be another commit's), from ``ROBOCACHE_GIT_COMMIT``, which a person types. A
wrong label there is silent: the record looks like any other. So every run also records ``Env.sources``, a hash of
the library's files on disk when the run started (:func:`tree_sources`: every ``.py``, ``.cu``, ``.cuh``, ``.h``
and ``.json`` under ``robocache/`` and ``kernels/``, tracked or not, by path and content; a symbolic link by its
target's path, as git stores it), and ``robocache-bench provenance`` recomputes the same hash from the named
commit's blobs (:func:`commit_sources`) and says where the two differ: a mislabelled run, or one measured on
uncommitted changes or beside untracked source files. Git's content filters (``core.autocrlf``, clean/smudge) would
make a clean checkout's files differ from its blobs; this repository uses none.
"""
from __future__ import annotations

import hashlib
import os
import re
import subprocess
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

SOURCE_DIRS = ("robocache", "kernels")
SUFFIXES = (".py", ".cu", ".cuh", ".h", ".json")
SKIP_DIRS = {"__pycache__"}
COMMIT_ID = re.compile(r"[0-9a-f]{7,40}")  # a label git resolves as a commit id, never a branch or an option


def _digest(files: Iterable[tuple[str, bytes]]) -> str:
    h = hashlib.sha256()
    for path, data in sorted(files):
        h.update(path.encode() + b"\0" + hashlib.sha256(data).hexdigest().encode() + b"\n")
    return h.hexdigest()[:16]


def _wanted(rel: str) -> bool:
    parts = rel.split("/")
    return (parts[0] in SOURCE_DIRS and rel.endswith(SUFFIXES) and not SKIP_DIRS.intersection(parts)
            and not any(p.endswith(".egg-info") for p in parts))


def tree_sources(root: str | os.PathLike[str] | None = None) -> str | None:
    """16 hex: the hash of the source files under ``root`` (default: the checkout this package was imported
    from), or None where ``root`` is no checkout (an installed wheel: its kernels sit inside the package, and no
    commit's tree looks like it) or its files cannot be read (never raises)."""
    root = Path(root) if root is not None else Path(__file__).resolve().parents[2]
    if not all((root / top).is_dir() for top in SOURCE_DIRS):
        return None
    files: list[tuple[str, bytes]] = []
    try:
        for top in SOURCE_DIRS:
            for dirpath, dirnames, filenames in os.walk(root / top):
                dirnames[:] = sorted(d for d in dirnames if d not in SKIP_DIRS and not d.endswith(".egg-info"))
                for name in filenames:
                    full = Path(dirpath, name)
                    rel = full.relative_to(root).as_posix()
                    if _wanted(rel):  # a link: its target's path, git's blob of it (mode 120000)
                        files.append((rel, os.readlink(full).encode() if full.is_symlink() else full.read_bytes()))
        return _digest(files) if files else None
    except (OSError, ValueError):  # unreadable, or a name that is not UTF-8 (git's side: None as well)
        return None


def commit_sources(repo: str | os.PathLike[str], commit: str) -> str | None:
    """The same hash over ``commit``'s blobs in the git repository ``repo``; None when git, the commit or its
    objects are not there, or ``commit`` is no commit id (never raises)."""
    if not COMMIT_ID.fullmatch(commit or ""):
        return None
    try:
        ls = subprocess.run(["git", "ls-tree", "-r", "-z", "--full-tree", commit, "--", *SOURCE_DIRS], cwd=repo,
                            capture_output=True, timeout=60)
        if ls.returncode != 0:
            return None
        entries = []
        for item in ls.stdout.split(b"\0"):
            if not item:
                continue
            meta, path = item.split(b"\t", 1)
            _mode, kind, sha = meta.split()
            rel = path.decode()
            if kind == b"blob" and _wanted(rel):
                entries.append((rel, sha.decode()))
        if not entries:
            return None
        cat = subprocess.run(["git", "cat-file", "--batch"], cwd=repo, capture_output=True, timeout=120,
                             input="".join(f"{sha}\n" for _, sha in entries).encode())
        if cat.returncode != 0:
            return None
        return _digest(zip((rel for rel, _ in entries), _batch_blobs(cat.stdout), strict=True))
    except (OSError, subprocess.TimeoutExpired, ValueError):
        return None


def _batch_blobs(out: bytes) -> Iterator[bytes]:
    """The contents of ``git cat-file --batch``'s answers, in order (``<sha> blob <size>\\n<data>\\n`` each)."""
    pos = 0
    while pos < len(out):
        nl = out.index(b"\n", pos)
        header = out[pos:nl].split()
        if len(header) != 3:
            raise ValueError(f"git cat-file: {out[pos:nl][:80]!r}")
        size = int(header[2])
        yield out[nl + 1:nl + 1 + size]
        pos = nl + 1 + size + 1


@dataclass(frozen=True)
class Verdict:
    """One run's provenance: ``state`` is ``match``, ``differs``, ``dirty`` (differs, as the run's own
    ``git_dirty`` says), ``unknown-commit`` (the commit or its objects are not in this repository, or the label is no
    commit id), ``no-commit`` (the run names none) or ``unrecorded`` (a record from before ``Env.sources``, or a run
    from an installed wheel)."""

    run_id: str
    machine: str
    commit: str | None
    recorded: str | None
    at_commit: str | None
    state: str

    def line(self) -> str:
        c = (self.commit or "?")[:12]
        return {
            "match": f"{self.run_id} ({self.machine}) commit {c}: its sources are that commit's ({self.recorded})",
            "differs": f"{self.run_id} ({self.machine}) commit {c}: its sources DIFFER from that commit's (recorded "
                       f"{self.recorded}, the commit gives {self.at_commit}): the run measured other code than its "
                       "label says (a wrong ROBOCACHE_GIT_COMMIT, uncommitted changes, or untracked files under "
                       "robocache/ or kernels/); relabel or drop it",
            "dirty": f"{self.run_id} ({self.machine}) commit {c}: its sources differ from that commit's, as its "
                     "git_dirty says (measured on uncommitted changes)",
            "unknown-commit": f"{self.run_id} ({self.machine}) commit {c}: not a commit of this repository, or its "
                              "objects are missing (fetch it to check)",
            "no-commit": f"{self.run_id} ({self.machine}): no commit recorded, nothing to check",
            "unrecorded": f"{self.run_id} ({self.machine}) commit {c}: no source hash (a record from before "
                          "Env.sources, or a run from an installed wheel)",
        }[self.state]


def check_runs(runs: Iterable[tuple[str, str, str | None, str | None, bool | None]],
               repo: str | os.PathLike[str]) -> list[Verdict]:
    """Verdicts for (run id, machine, commit, recorded sources, git_dirty) tuples against ``repo``'s commits (each
    commit's hash computed once)."""
    memo: dict[str, str | None] = {}
    out = []
    for run_id, machine, commit, recorded, dirty in runs:
        if not commit:
            out.append(Verdict(run_id, machine, commit, recorded, None, "no-commit"))
            continue
        if recorded is None:
            out.append(Verdict(run_id, machine, commit, None, None, "unrecorded"))
            continue
        if commit not in memo:
            memo[commit] = commit_sources(repo, commit)
        at = memo[commit]
        state = "unknown-commit" if at is None else "match" if at == recorded else "dirty" if dirty else "differs"
        out.append(Verdict(run_id, machine, commit, recorded, at, state))
    return out
