"""Hand-built records typed for the readers. The views read :class:`robocache.bench.schema.Record` by attribute (no
dict-style access on records), as the store loads them; a test that builds a record as a plain dict (as a results
file holds it, plus its ``env``) types it first with the schema's own decoder, validated as a loaded record is."""
from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import msgspec

from robocache.bench import schema


def record(r: Mapping[str, Any] | schema.Record) -> schema.Record:
    """``r`` as a :class:`~robocache.bench.schema.Record` (a record already typed is returned as it is)."""
    return msgspec.convert(r, schema.Record) if isinstance(r, Mapping) else r


def records(rs: Iterable[Mapping[str, Any] | schema.Record]) -> list[schema.Record]:
    """Each of ``rs`` through :func:`record`."""
    return [record(r) for r in rs]


def measured(key: str, **fields: Any) -> schema.Record:
    """The typed record of case ``key`` as a front end's measurement returns it (``frontend.measure``,
    ``benchmarks.common.measured``): status ok, nothing timed, with ``fields`` set (``dispatch=...``). For fakes of
    those functions: the front ends read the record by attribute, so a fake must not hand them a dict."""
    from robocache.bench import specs

    rec = schema.Record(run_id="test", created="2026-01-01T00:00:00+00:00", git_commit=None, git_dirty=None,
                        suite="quick", frontend="asv", case=schema.Case(**specs.find(key).to_record_case()),
                        method=None, metrics=None, check=None, clocks=None,
                        health=schema.Health(throttled=False, contended=False, noisy=False, reasons=[]),
                        status="ok", reason=None, duration_s=0.0, synthetic=True)
    return msgspec.structs.replace(rec, **fields)
