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
