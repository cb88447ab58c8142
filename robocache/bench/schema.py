"""The result record: one versioned schema, validated on write and on load.

A results file is JSON (never pickle or YAML) written by one run on one machine::

    {"schema_version": 1, "kind": "robocache-bench/records",
     "env": Env,                  # the machine, once per file
     "records": [Record, ...]}    # one per case measured

Each :class:`Record` names its case, how it was measured, the figures, the
correctness check, the clocks during the case, the health flags and the status;
the loader attaches the file's ``env`` to every record it returns, so each loaded
record carries its environment. Records are plain dicts (``TypedDict``): they go
straight into tables and DataFrames. Validation is pydantic v2 on the raw bytes
(Rust core): unknown fields are refused, NaN/Inf are refused, a file of a newer
``schema_version`` is reported as such, never misread. Validating 100,000
records takes about a second on a CI-sized machine.
"""
from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import ConfigDict, Field, TypeAdapter, ValidationError, with_config
from typing_extensions import NotRequired, TypedDict

SCHEMA_VERSION = 1
FILE_KIND = "robocache-bench/records"

STATUSES = ("ok", "incorrect", "crash", "timeout", "oom", "skipped", "error")
FAILED_STATUSES = ("incorrect", "crash", "timeout", "oom", "error")
Status = Literal["ok", "incorrect", "crash", "timeout", "oom", "skipped", "error"]
Timer = Literal["cuda_event", "cuda_graph", "host"]
Cache = Literal["warm", "cold"]

Finite = Annotated[float, Field(allow_inf_nan=False)]
NonNeg = Annotated[float, Field(allow_inf_nan=False, ge=0)]
Count = Annotated[int, Field(ge=0)]
Param = int | Finite | str | bool | list[int] | list[list[int]] | list[Finite] | list[list[Finite]]

_CFG = ConfigDict(extra="forbid", allow_inf_nan=False, strict=False)


@with_config(_CFG)
class Case(TypedDict):
    """What was measured."""

    id: str  # stable across runs, e.g. "resample/B256-S100-T50-D32"; with provider+dtype+method: a series
    op: Literal["resample", "fuse", "voxelize"]
    provider: str
    dtype: str
    params: dict[str, Param]
    grid_version: int  # bumped when a case's meaning changes: never compared across versions
    bytes: Count  # bytes the op must move: each input read once, each output written once
    items: Count  # trajectories (resample, fuse) or points (voxelize) per call
    items_unit: str
    reason: NotRequired[str]  # why this grid point exists


@with_config(_CFG)
class Quantiles(TypedDict):
    p20: NonNeg
    p50: NonNeg
    p80: NonNeg
    min: NonNeg
    max: NonNeg
    mean: NonNeg


@with_config(_CFG)
class Method(TypedDict):
    """How it was timed."""

    timer: Timer
    cache: Cache
    warmup_s: NonNeg
    samples: Count
    reps_per_sample: Count
    noise_target: NonNeg  # relative half-width of the median's 95% interval aimed for
    noise: NonNeg | None  # relative half-width reached
    noise_target_met: bool
    time_limit_s: NonNeg


@with_config(_CFG)
class Metrics(TypedDict):
    time_us: Quantiles  # per call
    items_per_s: NonNeg
    gb_per_s: NonNeg  # case bytes / median time
    ceiling_gb_per_s: NonNeg | None  # device-to-device copy bandwidth measured in the same run
    pct_of_ceiling: NonNeg | None
    graph_time_us: NonNeg | None  # median under CUDA-graph replay (the second method)
    event_vs_graph: Finite | None  # (event - graph) / graph: the timers' self-check


@with_config(_CFG)
class Check(TypedDict):
    """The correctness gate, run before any timing."""

    passed: bool
    max_abs_err: NonNeg | None
    max_rel_err: NonNeg | None
    tolerance: NonNeg
    bad_fraction: NonNeg | None


@with_config(_CFG)
class Clocks(TypedDict):
    """Sampled through NVML while the case ran (all None when NVML is unknown)."""

    sm_mhz_min: NonNeg | None
    sm_mhz_median: NonNeg | None
    sm_mhz_max_supported: NonNeg | None
    mem_mhz_median: NonNeg | None
    temperature_c_max: Finite | None
    power_w_max: NonNeg | None
    throttle_reasons: list[str]
    other_processes: Count | None
    samples: Count


@with_config(_CFG)
class Health(TypedDict):
    throttled: bool
    contended: bool
    noisy: bool
    reasons: list[str]


@with_config(_CFG)
class Env(TypedDict):
    """Where it ran. Unknown values are None, never guessed."""

    hostname: str
    machine: str  # stable machine name keying series (ROBOCACHE_MACHINE, else the hostname)
    device: Literal["gpu", "cpu"]
    gpu_name: str | None
    arch: str | None  # normalized: A100, H100, H200, B200, L40S, ... (or the raw name)
    compute_capability: str | None
    gpu_count: Count | None
    gpu_memory_gb: NonNeg | None
    sm_count: Count | None
    l2_mb: NonNeg | None
    driver: str | None
    cuda: str | None
    cpu: str | None
    python: str
    libs: dict[str, str]
    nvml: str  # "ok" or "unknown: <why>"


@with_config(_CFG)
class Record(TypedDict):
    run_id: str
    created: str  # ISO 8601 UTC
    git_commit: str | None
    git_dirty: bool | None
    suite: str
    frontend: str  # cli | asv | pytest-benchmark | nightly | test
    case: Case
    method: Method | None  # None when nothing was timed
    metrics: Metrics | None
    check: Check | None
    clocks: Clocks | None
    health: Health
    status: Status
    reason: str | None
    duration_s: NonNeg
    synthetic: bool  # generated fixtures say so; committed results never are
    env: NotRequired[Env]  # attached by the loader from the file; not stored per record


@with_config(_CFG)
class RecordsFile(TypedDict):
    schema_version: Literal[1]
    kind: Literal["robocache-bench/records"]
    env: Env
    records: list[Record]


RECORDS_FILE = TypeAdapter(RecordsFile)
RECORD = TypeAdapter(Record)
ENV = TypeAdapter(Env)


class SchemaError(ValueError):
    """A results file or record that does not match the schema; the message says where."""


def _explain(e: ValidationError, limit: int = 3) -> str:
    parts = []
    for err in e.errors()[:limit]:
        loc = ".".join(str(x) for x in err["loc"])
        parts.append(f"{loc}: {err['msg']}")
    more = f" (+{e.error_count() - limit} more)" if e.error_count() > limit else ""
    return "; ".join(parts) + more


def parse_file_bytes(data: bytes) -> RecordsFile:
    """Validate a results file's bytes; ``SchemaError`` with a short reason otherwise."""
    if not data.strip():
        raise SchemaError("empty file")
    try:
        return RECORDS_FILE.validate_json(data)
    except ValidationError as e:
        # A clearer word for the one case people hit after upgrades: a newer schema.
        import json

        try:
            head = json.loads(data)
            v = head.get("schema_version") if isinstance(head, dict) else None
        except (ValueError, RecursionError):  # RecursionError: hostile nesting such as b"[" * 100_000
            v = None
        if isinstance(v, int) and v > SCHEMA_VERSION:
            raise SchemaError(f"schema_version {v} is newer than this robocache-bench ({SCHEMA_VERSION}); "
                              f"upgrade robocache to read it") from None
        raise SchemaError(_explain(e)) from None


def validate_records(env: Any, records: list[Any]) -> RecordsFile:
    """Validate before writing: returns the file object, raises ``SchemaError``."""
    doc = {"schema_version": SCHEMA_VERSION, "kind": FILE_KIND, "env": env, "records": records}
    try:
        return RECORDS_FILE.validate_python(doc)
    except ValidationError as e:
        raise SchemaError(_explain(e)) from None


def series_key(rec: Record) -> tuple[str, ...]:
    """Results compare only within a series: machine, case, provider, dtype, timer, cache, grid version."""
    m = rec.get("method") or {}
    c = rec["case"]
    env = rec.get("env") or {}
    return (env.get("machine", "?"), c["id"], c["provider"], c["dtype"], m.get("timer", "-"),
            m.get("cache", "-"), str(c["grid_version"]))


def json_schema() -> dict[str, Any]:
    """The JSON Schema of a results file, for docs and other tools."""
    return RECORDS_FILE.json_schema()
