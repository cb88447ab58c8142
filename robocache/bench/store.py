"""The results store: atomic, collision-free writes and a loader that never fails on one bad file.

A results folder holds ``*.records.json`` files (see :mod:`robocache.bench.schema`), one per
``write_records`` call. Other JSON in the tree (``results/asv``, ``results/pytest``) is not ours and is
ignored. Writes go to a ``.tmp-*`` file in the same folder, are fsynced, then renamed into place, so a
reader (or a writer killed half-way) never sees a partial results file; a killed writer may leave a
``.tmp-*`` orphan, which the loader skips and :func:`orphaned_temporaries` lists.
"""
from __future__ import annotations

import gc
import hashlib
import json
import os
import re
import stat
import tempfile
import unicodedata
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import msgspec

from robocache.bench.schema import (
    FILE_KIND,
    SCHEMA_VERSION,
    Env,
    Record,
    RecordsFile,
    SchemaError,
    check_ops,
    parse_file_bytes,
    to_dict,
    validate_records,
)

RECORDS_SUFFIX = ".records.json"
TMP_PREFIX = ".tmp-"
# Keys the loader attaches to each record; stripped on write so loaded records can be written again.
LOADER_KEYS = ("env", "source")
_REASON_MAX = 300

_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")
_DASHES = re.compile(r"-{2,}")


def safe_component(text: str, max_len: int = 80) -> str:
    """A file-name-safe form of ``text``: only ``[A-Za-z0-9._-]``, never empty, ``.`` or ``..``.

    Accents are folded to ASCII where Unicode allows it (``é`` -> ``e``); everything else outside the
    safe set (slashes, backslashes, NUL, control characters, other Unicode) becomes ``-``. Names longer
    than ``max_len`` are cut and end in ``-`` plus 8 hex of the original's sha256, so distinct long names
    stay distinct.
    """
    if max_len < 16:
        raise ValueError(f"max_len must be at least 16, got {max_len}")
    folded = unicodedata.normalize("NFKD", text)
    folded = "".join(ch for ch in folded if not unicodedata.combining(ch))
    out = _DASHES.sub("-", _UNSAFE.sub("-", folded))
    # Leading dots would hide the file (and make "." / ".."); leading dashes read as CLI options;
    # trailing dots are dropped by Windows.
    out = out.strip(".-")
    if not out:
        out = "unnamed"
    if len(out) > max_len:
        # surrogatepass: a str from os.fsdecode may hold lone surrogates; the hash must still work.
        digest = hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:8]
        out = out[: max_len - 9].rstrip("-") + "-" + digest
    return out


def write_records(out_dir: str | os.PathLike[str], env: Env | dict[str, Any], records: list[Record | dict[str, Any]], *,
                  name: str, unique: bool = True) -> Path:
    """Validate, then atomically write one results file into ``out_dir``; returns its path.

    Nothing is written when validation fails (:class:`SchemaError` propagates). The file name is
    ``safe_component(name)`` plus a random suffix, so concurrent writers never collide; with
    ``unique=False`` it is ``safe_component(name)`` alone and a rewrite atomically replaces the previous
    version (a runner's checkpoints of one run file; the name must then be unique to that writer).
    """
    data = encode_records(env, records)  # raises SchemaError before anything touches the disk

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    # 12 hex (48 bits): no collision in practice even across thousands of files from parallel writers.
    stem = safe_component(name) + (f"-{uuid.uuid4().hex[:12]}" if unique else "")
    final = out / f"{stem}{RECORDS_SUFFIX}"
    if final.resolve().parent != out.resolve():  # safe_component makes this impossible; check anyway
        raise ValueError(f"refusing to write outside {out}: {final}")

    atomic_write(final, data)
    return final


def encode_records(env: Any, records: list[Any]) -> bytes:
    """A results file's bytes: the document validated, then encoded ONCE (``msgspec.json``).

    Typed input (an :class:`~robocache.bench.schema.Env` and :class:`~robocache.bench.schema.Record` structs, what
    the harness writes) goes straight to the encoder; plain dicts are converted to the structs first (their one
    conversion, which validates them). Either way the bytes are then decoded as a reader will decode them
    (:func:`robocache.bench.schema.parse_file_bytes`: every constraint of the schema, which a struct built in code
    never checked, plus ``created`` in UTC) and the ops checked against the registry. JSON has no NaN or infinity:
    msgspec writes one as ``null``, so a decoded document that differs from the one encoded is looked at again and
    a non-finite number (a NaN hidden in the case params included) is a ``SchemaError``, as before. The loader's
    per-record ``env``/``source`` are never stored (the file carries env once)."""
    if isinstance(env, Env) and all(isinstance(r, Record) for r in records):
        doc = RecordsFile(schema_version=SCHEMA_VERSION, kind=FILE_KIND, env=env, records=[
            r if r.env is None and r.source is None else msgspec.structs.replace(r, env=None, source=None)
            for r in records])
    else:
        doc = validate_records(env, [{k: v for k, v in to_dict(r).items() if k not in LOADER_KEYS}
                                     for r in records])
    try:
        data = msgspec.json.encode(doc)
    except (UnicodeEncodeError, OverflowError, TypeError) as e:  # a lone surrogate, an int beyond 64 bits
        raise SchemaError(f"cannot serialize: {e}") from None
    back = parse_file_bytes(data)
    check_ops(back.records)
    if back != doc:  # not only a NaN (None != NaN): a tuple where the schema says list also differs
        try:
            json.dumps(msgspec.to_builtins(doc), allow_nan=False)
        except ValueError as e:
            raise SchemaError(f"cannot serialize: {e}") from None
    return data


def atomic_write(path: str | os.PathLike[str], data: bytes | str) -> None:
    """Write ``data`` to ``path`` atomically: a temporary file in the same folder, fsynced, then renamed over
    ``path`` (a reader sees the old file or the new one, never a part); the folder must exist. Every file the
    commands write (records, reports, comparisons, alerts) goes through here."""
    final = Path(path)
    out = final.parent
    raw = data.encode("utf-8") if isinstance(data, str) else data
    fd, tmp = tempfile.mkstemp(dir=out, prefix=TMP_PREFIX)
    try:
        try:
            os.fchmod(fd, 0o644)  # mkstemp makes 0600; results are shared (CI artifacts, dashboard)
        except (AttributeError, OSError):
            pass
        with os.fdopen(fd, "wb") as f:
            f.write(raw)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, final)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    _fsync_dir(out)


def _fsync_dir(path: Path) -> None:
    """Make the rename durable across a power cut; best effort (not every OS/filesystem allows it)."""
    try:
        dfd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(dfd)
    except OSError:
        pass
    finally:
        os.close(dfd)


@dataclass
class LoadResult:
    """Records from every good file, and the files that could not be used."""

    records: list[dict[str, Any]] = field(default_factory=list)  # each with "env" and "source" attached
    bad: list[tuple[str, str]] = field(default_factory=list)  # (path, reason)
    files: int = 0  # files looked at, bad ones and missing paths included


def display_path(path: str | os.PathLike[str]) -> str:
    """``path`` as text any terminal or web page can show: bytes of a name that is not UTF-8 (carried by
    Python as lone surrogates) become ``\\xNN`` escapes; other paths are returned unchanged."""
    p = os.fspath(path)
    try:
        p.encode("utf-8")
        return p
    except UnicodeEncodeError:
        return os.fsencode(p).decode("utf-8", "backslashreplace")


def _inside(real: str, root_real: str) -> bool:
    return real == root_real or real.startswith(root_real.rstrip(os.sep) + os.sep)


def _scan(root: str, recursive: bool, bad: list[tuple[str, str]]) -> list[str]:
    """``*.records.json`` under ``root``, skipping in-flight/orphaned ``.tmp-*`` files.

    A link whose target lies outside ``root`` is not this folder's results: it goes to ``bad`` (its target
    is never opened, so nothing of it reaches a reason), a link to a folder outside likewise (not walked);
    a link to a file inside is loaded once.
    """
    found = []
    root_real = os.path.realpath(root)
    for dirpath, dirnames, filenames in os.walk(root):  # followlinks=False: no symlink loops
        dirnames.sort()
        for dn in dirnames:
            sub = os.path.join(dirpath, dn)
            if os.path.islink(sub) and not _inside(os.path.realpath(sub), root_real):
                # not walked (never was): said, so a folder of results reached by a link is not silently missing
                bad.append((sub, f"a link to a folder outside {display_path(root)}: not followed (name it "
                                 "itself to load it)"))
        for fn in filenames:
            if fn.endswith(RECORDS_SUFFIX) and not fn.startswith(TMP_PREFIX):
                path = os.path.join(dirpath, fn)
                if os.path.islink(path) and not _inside(os.path.realpath(path), root_real):
                    bad.append((path, f"a link to a file outside {display_path(root)}: not loaded"))
                    continue
                found.append(path)
        if not recursive:
            break
    return found


def _short(reason: str) -> str:
    reason = " ".join(reason.split())
    return reason if len(reason) <= _REASON_MAX else reason[: _REASON_MAX - 3] + "..."


def load(*paths: str | os.PathLike[str], recursive: bool = True) -> LoadResult:
    """Load results files and folders; bad files are listed with a reason, never raised.

    A folder contributes its ``*.records.json`` files (recursively by default); a file named
    explicitly is read whatever its name. Records come sorted by file path, then in file order,
    each with the file's env (the same dict for every record of a file) and ``source``.
    """
    result = LoadResult()
    files, result.bad, result.files = files_to_load(*paths, recursive=recursive)

    # The validator builds ~20 containers per record, all acyclic: with the cyclic GC on, its repeated
    # full collections over the growing result cost ~1.1 s of a 3.2 s load of 100,000 records on a
    # 2-core VM (2.1 s with it off). Paused for the loop only, and only if it was on.
    gc_was_on = gc.isenabled()
    gc.disable()
    try:
        for path in files:
            result.files += 1
            records, why = read_file(path)
            if why is not None:
                result.bad.append((path, why))
            else:
                result.records.extend(records)
    finally:
        if gc_was_on:
            gc.enable()
    return result


def files_to_load(*paths: str | os.PathLike[str], recursive: bool = True) -> tuple[list[str], list[tuple[str, str]], int]:
    """What :func:`load` reads, without reading it: ``(files, bad, looked_at)``. ``files`` in load's order (sorted
    by path, a file reached twice, by a folder and by name, once); ``bad`` the paths refused before reading (a
    missing path, then links leading outside a folder), in load's order; ``looked_at`` their count. With
    :func:`read_file` on each file in turn it is :func:`load` (the dashboard's columnar cache reads only the files
    that changed, and reports the same bad files in the same order)."""
    files: list[str] = []
    bad: list[tuple[str, str]] = []
    refused: list[tuple[str, str]] = []
    for p in paths:
        p = os.fspath(p)
        if os.path.isdir(p):
            files.extend(_scan(p, recursive, refused))
        elif os.path.lexists(p):
            files.append(p)  # named explicitly: read whatever its name (a dangling link is reported bad)
        else:
            bad.append((p, "no such file or directory"))
    bad.extend(refused)
    out: list[str] = []
    seen: set[str] = set()
    for path in sorted(files):
        key = os.path.realpath(path)
        if key in seen:  # the same file reached twice (a folder and a file in it): load it once
            continue
        seen.add(key)
        out.append(path)
    return out, bad, len(bad)


def committed_files(*paths: str | os.PathLike[str], recursive: bool = True) -> tuple[list[str], list[str]]:
    """The results files under ``paths`` that git does not ignore, and those it does: ``(kept, ignored)``.

    What a command meant for the committed records (``fit-priors``, the tests) loads, so that the ignored
    ``results/local/`` of ``make run`` (the user's own runs, on this machine only) never changes what it
    computes. A file named explicitly is kept, and so is every file below a folder that is itself ignored
    and named explicitly (``fit-priors results/local`` means it). Outside a git work tree, or without git,
    nothing is ignored. Bad paths are :func:`load`'s to report: ``kept`` holds them unchanged."""
    import subprocess

    kept: list[str] = []
    ignored: list[str] = []
    for p in paths:
        p = os.fspath(p)
        if not os.path.isdir(p):
            kept.append(p)
            continue
        files = _scan(p, recursive, [])
        rel = [os.path.relpath(f, p) for f in files]
        try:
            # check-ignore reads the paths on stdin (no argument-length limit); tracked files are never "ignored"
            # (the index is consulted); exit 0: some ignored, 1: none, 128: not a work tree (nothing ignored)
            out = subprocess.run(["git", "check-ignore", "-z", "--stdin"], cwd=p, capture_output=True,
                                 input="\0".join([".", *rel]).encode("utf-8", "surrogateescape") + b"\0",
                                 timeout=60)
        except (OSError, subprocess.SubprocessError):
            kept.append(p)
            continue
        hits = set(out.stdout.decode("utf-8", "surrogateescape").split("\0")) if out.returncode == 0 else set()
        hits.discard("")
        if not hits or "." in hits:  # nothing ignored, or the folder named is itself ignored (so meant)
            kept.append(p)  # the folder itself: load() reports its bad links as before
            continue
        for f, r in zip(files, rel):
            (ignored if r in hits else kept).append(f)
    return kept, ignored


def read_file(path: str) -> tuple[list[Any], None] | tuple[None, str]:
    """One results file's records (each with the file's env and ``source`` attached) and ``None``, or ``None``
    and the one-line reason the file cannot be used; never raises for a bad file."""
    try:
        # O_NONBLOCK + fstat on the opened file: a FIFO or device named *.records.json (or one swapped in
        # after a check) would block or stream forever
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_BINARY", 0))
        with os.fdopen(fd, "rb") as f:
            if not stat.S_ISREG(os.fstat(f.fileno()).st_mode):
                return None, "not a regular file"
            data = f.read()
        doc = parse_file_bytes(data)  # one pass of msgspec's C decoder + validator: the fast path
    except FileNotFoundError:  # vanished between scan and read
        return None, "no such file or directory"
    except OSError as e:
        return None, _short(f"unreadable: {e.strerror or e}")
    except SchemaError as e:
        return None, _short(str(e))
    except Exception as e:  # noqa: BLE001 - one odd file must never stop the others
        return None, _short(f"{type(e).__name__}: {e}")
    env = doc.env
    records = doc.records
    for rec in records:  # fresh structs from the decoder: attach in place, env by reference
        rec.env = env
        rec.source = path
    return records, None


def orphaned_temporaries(out_dir: str | os.PathLike[str]) -> list[Path]:
    """``.tmp-*`` files left by killed writers under ``out_dir`` (never results; ``load`` skips them)."""
    found = []
    for dirpath, dirnames, filenames in os.walk(out_dir):
        dirnames.sort()
        found.extend(Path(dirpath, fn) for fn in filenames if fn.startswith(TMP_PREFIX))
    return sorted(found)


def to_plain(rec: Any) -> dict[str, Any]:
    """A record (struct or dict) as a plain JSON-able dict, without the loader's keys."""
    d = to_dict(rec)
    return {k: v for k, v in d.items() if k not in LOADER_KEYS}
