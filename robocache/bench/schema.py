"""The result record: one versioned schema, validated on write and on load.

A results file is JSON (never pickle or YAML) written by one run on one machine::

    {"schema_version": 3, "kind": "robocache-bench/records",
     "env": Env,                  # the machine, once per file
     "records": [Record, ...]}    # one per case measured

Versions: 2 added the optional ``Record.distributed`` (multi-GPU cases: per-rank times, aggregate
throughput, scaling efficiency, gather and collective bandwidth); 3 added the timer ``host_loop`` and the
optional ``Record.dispatch`` (call-cost cases: the device time per call beside the host's). Because
readers refuse unknown fields, an older robocache-bench reports a newer file as "newer" instead of
misreading it; this one reads versions 1 to 3 (a file of an older version carrying what a later one
added is refused). The optional ``Record.pipeline`` (the end-to-end suites ``pipelines`` and ``profile``,
docs/pipelines.md) came within version 3: a reader from before it refuses such a record as an unknown field; so did
``Env.sources`` (the hash of the library's sources a run measured, robocache/bench/provenance.py; 2026-11-28).

Each :class:`Record` names its case, how it was measured, the figures, the
correctness check, the clocks during the case, the health flags and the status;
the loader attaches the file's ``env`` (and the file path as ``source``) to every
record it returns, so each loaded record carries its environment.

Validation is msgspec: typed ``Struct`` classes decoded straight from the bytes in
C. Unknown fields are refused, NaN and Inf are refused (every float has finite
bounds, and JSON has no NaN token), a file of a newer ``schema_version`` is
reported as such, never misread. Measured on the 2-core CI machine: 100,000
records of ~1.7 kB decode and validate in about 0.8 s, against 2.6 s for the
pydantic v2 version of this schema and 2.2 s for a bare ``json.loads`` (which is
why msgspec: the 2 s load budget for a growing history). Read loaded structs by attribute
(``rec.case.id``, ``rec.metrics``): they are not mappings (issue 28).
:func:`to_dict` turns them into plain dicts (for tables and DataFrames).
"""
from __future__ import annotations

import hashlib
import json
import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any, Literal, NamedTuple

import msgspec
from msgspec import Meta

SCHEMA_VERSION = 3  # the loader reads 1 to SCHEMA_VERSION (RecordsFile.schema_version); writers write this one
FILE_KIND = "robocache-bench/records"

FAILED_STATUSES = ("incorrect", "crash", "timeout", "oom", "error")
Status = Literal["ok", "incorrect", "crash", "timeout", "oom", "skipped", "error"]
Timer = Literal["cuda_event", "cuda_graph", "host", "host_loop"]
Cache = Literal["warm", "cold"]

_BIG = 1.0e300  # finite bounds make NaN (every comparison false) and +-Inf fail validation
Finite = Annotated[float, Meta(ge=-_BIG, le=_BIG)]
NonNeg = Annotated[float, Meta(ge=0.0, le=_BIG)]
Count = Annotated[int, Meta(ge=0)]
# ISO 8601 in UTC, as every writer writes it (datetime.now(timezone.utc).isoformat(timespec="seconds")): the
# history orders runs by this text, which is the time order only while every record is in UTC. Checked on the
# distinct values of a file (_check_created; a run's records share a handful): as a msgspec pattern on every
# record it cost ~1.4 us a record, a fifth of a 100k-record load
_UTC_TIME = re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d{1,6})?(\+00:00|Z)")


class _Rec(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    """The schema's Structs: unknown fields refused, keyword-only. Read by attribute (``rec.case.id``); a Struct is
    not a mapping, so ``rec["case"]``, ``rec.get(...)`` and ``"case" in rec`` raise ``TypeError`` or
    ``AttributeError`` (issue 28 removed the transitional read by key; tests/test_messages.py checks it stays gone).
    A test that builds a record as a dict types it first (tests/typed.py), or builds a simulated one with
    :func:`robocache.bench.regressions.records.synthetic`."""


class Case(_Rec):
    """What was measured."""

    id: str  # stable across runs, e.g. "resample/B256-S100-T50-D32"; part of its series (series_key)
    # Any string on load (an older reader keeps loading files of ops added later); checked against the op
    # registry (robocache.bench.ops) when written, by validate_records.
    op: str
    provider: str
    dtype: str
    params: dict[str, Any]  # JSON scalars and lists of them (shapes, grid sizes, stream lists)
    grid_version: int  # bumped when a case's meaning changes: never compared across versions
    # Bytes the op must move: grid version >= 2, the minimum traffic of the inputs measured (the source
    # rows the targets use, every time, the output: specs.moved_bytes); grid version 1, every input read
    # once and every output written once, from the params.
    bytes: Count
    items: Count  # trajectories (resample, fuse) or points (voxelize) per call
    items_unit: str
    reason: str = ""  # why this grid point exists


class Quantiles(_Rec):
    p20: NonNeg
    p50: NonNeg
    p80: NonNeg
    min: NonNeg
    max: NonNeg
    mean: NonNeg


class Method(_Rec):
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
    input_sets: Count = 1  # warm mode rotates this many input sets (>= 2x L2 in all, capped) between calls
    version: Count = 1  # the measuring method's version (METHOD_VERSION when written; absent: 1): part of a series


class Metrics(_Rec):
    time_us: Quantiles  # per call
    items_per_s: NonNeg
    gb_per_s: NonNeg  # case bytes / median time
    ceiling_gb_per_s: NonNeg | None  # device-to-device copy bandwidth measured in the same run
    pct_of_ceiling: NonNeg | None
    graph_time_us: NonNeg | None  # median under CUDA-graph replay (the second method)
    event_vs_graph: Finite | None  # (event - graph) / graph: the timers' self-check


class Check(_Rec):
    """The correctness gate, run before any timing."""

    passed: bool
    max_abs_err: NonNeg | None
    max_rel_err: NonNeg | None
    tolerance: NonNeg
    bad_fraction: NonNeg | None


class Clocks(_Rec):
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


class Health(_Rec):
    throttled: bool
    contended: bool
    noisy: bool
    reasons: list[str]


class Env(_Rec, omit_defaults=True):  # omit_defaults: kernel and host_id absent when unknown
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
    kernel: str | None = None  # the OS kernel release (platform.release()); absent in older records
    host_id: str | None = None  # 12 hex of sha256(/etc/machine-id): the physical runner, not its name
    # 16 hex: the library's sources the run imported (robocache.bench.provenance.tree_sources), so a run can be
    # checked against the commit it names (`robocache-bench provenance`); absent in older records
    sources: str | None = None


class Distributed(_Rec):
    """A case run over several ranks (one GPU each; Gloo processes on a CPU run), schema version 2.

    Each rank times its own shard; the group's step ends when its slowest rank does, so the step time is
    the largest per-rank median and the aggregate throughput is the group's items over it
    (:mod:`robocache.bench.multigpu.scaling` holds the arithmetic).
    """

    world_size: Annotated[int, Meta(ge=1)]  # ranks (processes), one GPU each on a GPU run
    nodes: Annotated[int, Meta(ge=1)]
    backend: Literal["nccl", "gloo"]
    scaling: Literal["weak", "strong"]  # weak: fixed batch per rank; strong: fixed total batch
    gather: Literal["none", "all", "one"]  # outputs gathered to every rank (all_gather), to rank 0, or not
    items_per_rank: list[Count]
    per_rank_us: list[NonNeg]  # median time of the op alone, per rank (index = rank)
    per_rank_step_us: list[NonNeg]  # median time of one step (op, plus the gather when there is one) per rank
    step_us: NonNeg  # the slowest rank's step median: the group's step time
    aggregate_items_per_s: NonNeg  # the group's items / step_us
    efficiency: NonNeg | None  # vs the 1-rank case of the same run (None when it did not run)
    baseline_step_us: NonNeg | None  # that 1-rank case's step time
    gather_bytes: Count | None  # bytes the gather delivers: world_size x the output bytes of one rank
    gather_us: NonNeg | None  # the gather alone, slowest rank's median
    gather_gb_per_s: NonNeg | None  # gather_bytes / gather_us
    collective_us: NonNeg | None  # all_gather of a plain uint8 tensor of the same size, slowest rank's median
    collective_gb_per_s: NonNeg | None  # its algorithm bandwidth: world_size x bytes / time (nccl-tests algbw)
    collective_busbw_gb_per_s: NonNeg | None  # algbw x (world_size - 1) / world_size (nccl-tests busbw)


class Interleaved(_Rec):
    """The public call and the bare launch of a call-cost case timed interleaved in one process (issue 25;
    ``robocache.bench.timing.interleaved_call_cost``): rounds of one loop of ``calls_per_loop`` calls each of the
    bare launch, the public call on the case's torch tensors and the public call on CuPy views of them, in a
    rotated order; per round, each public call's time per call over the bare launch's is one ratio."""

    rounds: Count
    calls_per_loop: Count
    bare_us: NonNeg  # medians over the rounds of the host time per call
    public_us: NonNeg
    public_cupy_us: NonNeg
    ratio_p20: NonNeg  # public call (torch tensors) / bare launch, quantiles over the rounds
    ratio_p50: NonNeg
    ratio_p80: NonNeg
    cupy_ratio_p20: NonNeg  # public call (CuPy arrays) / bare launch
    cupy_ratio_p50: NonNeg
    cupy_ratio_p80: NonNeg
    noise_target_met: bool  # every ratio's median known to the timer's noise target


class Dispatch(_Rec, omit_defaults=True):  # omit_defaults: interleaved absent where not measured
    """A call-cost case (timer ``host_loop``), schema version 3: ``metrics.time_us`` is the host's time per
    call in a tight loop; this is the device's beside it, and (the public API's record on a GPU) the
    interleaved ratio to the bare launch."""

    device_us: NonNeg | None  # median device time per call (CUDA events, pre-blocked stream); None on a CPU run
    gpu_keeps_up: bool | None  # device_us < host time per call: the loop's rate is the host's (None on a CPU run)
    interleaved: Interleaved | None = None  # within version 3, like pipeline: an older reader refuses the field


class Launch(_Rec):
    """The launch configuration one robocache call used for a bucket of shapes (robocache/_tune.py): what the
    record's time was measured with. ``source``: where it came from (``tuned`` in this process, ``cache`` the
    user's tuning cache, ``shipped`` the GPU's shipped table, ``nearest shipped`` a neighbouring bucket's,
    ``default`` the launch rule, ...; ``_tune.SOURCES``)."""

    device: Count
    bucket: str
    config: dict[str, int]  # Config.to_json(): only the fields that differ from the rule's
    source: Literal["tuned", "tuned, cut short", "cache", "shipped", "nearest shipped", "default",
                    "default, tuning failed", "provisional"]


PIPELINES_SUITE = "pipelines"
PIPELINE_KINDS = ("dataload", "train", "infer")  # the case "op" of a pipelines record (docs/pipelines.md)


class KernelRow(_Rec):
    """One row of a profile's kernel table (torch.profiler): a kernel (GPU) or an operator (CPU run)."""

    name: str
    calls: Count
    total_us: NonNeg  # self time summed over the profiled steps
    avg_us: NonNeg
    share: NonNeg  # of the table's total self time (0..1)


class Pipeline(_Rec):
    """An end-to-end case (suite ``pipelines``: data loading, training step, policy inference), optional.

    ``metrics.time_us`` holds the per-batch (dataload), per-step (train) or per-call (infer) wall time;
    this section holds what only a pipeline has. ``figures`` are named scalars (see docs/pipelines.md:
    ``traj_per_s``, ``ms_p50``, ``ms_p90``, ``steps_per_s``, ``data_wait_share``, ``latency_ms_p50``,
    ``latency_ms_p99``, ``peak_mem_mb``, ``speedup_vs_baseline``, ...); ``split_ms`` the time split per batch
    or step; ``resample_on`` where the resampling ran (``cpu_workers``, ``gpu`` or ``numpy_fallback``: the
    robocache path on a machine without a GPU).
    """

    kind: Literal["dataload", "train", "infer", "profile"]  # profile: Nsight Compute metrics of a kernel case
    resample_on: Literal["cpu_workers", "gpu", "numpy_fallback"] | None = None
    figures: dict[str, Finite | None] = {}
    split_ms: dict[str, NonNeg] = {}
    gpu_util_pct: NonNeg | None = None  # NVML utilisation, mean over the timed part
    gpu_util: str = "unavailable"  # "ok" or "unavailable: <why>"
    loss: list[Finite] = []  # train: the loss per step (the gate compares the two pipelines' curves)
    kernels: list[KernelRow] = []  # the profile's kernel table, largest share first
    trace_file: str | None = None  # the Chrome/Perfetto trace, relative to the records file's folder
    notes: list[str] = []


class Record(_Rec, omit_defaults=True):
    run_id: str
    created: str  # ISO 8601 UTC (_check_created: another offset would misorder the history)
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
    distributed: Distributed | None = None  # multi-GPU cases only (schema version 2); omitted when None
    dispatch: Dispatch | None = None  # call-cost cases only (schema version 3); omitted when None
    pipeline: Pipeline | None = None  # end-to-end cases only (suite pipelines); omitted when None
    launches: list[Launch] = []  # robocache's tuned launches (v3) the timed call used; omitted when none
    # the median (us) of each fresh process a short case was timed in (`run --processes K`); metrics are then
    # their median (the mean of two), method.noise within-process (docs/harness.md); omitted when the case ran in one
    processes: list[NonNeg] = []
    # attached by the loader, never stored (the writer strips them):
    env: Env | None = None
    source: str | None = None


class RecordsFile(_Rec):
    schema_version: Literal[1, 2, 3]
    kind: Literal["robocache-bench/records"]
    env: Env
    records: list[Record]


_DECODER = msgspec.json.Decoder(RecordsFile)


class SchemaError(ValueError):
    """A results file or record that does not match the schema; the message says where."""


def parse_file_bytes(data: bytes) -> RecordsFile:
    """Validate a results file's bytes; ``SchemaError`` with a short reason otherwise."""
    if not data.strip():
        raise SchemaError("empty file")
    try:
        doc = _DECODER.decode(data)
    except (msgspec.ValidationError, msgspec.DecodeError) as e:
        version = _peek_version(data)
        if isinstance(version, int) and not isinstance(version, bool) and version > SCHEMA_VERSION:
            raise SchemaError(f"schema_version {version} is newer than this robocache-bench ({SCHEMA_VERSION}); "
                              "upgrade robocache to read it") from None
        raise SchemaError(str(e)) from None
    except RecursionError:
        raise SchemaError("nested too deeply to be a results file") from None
    if doc.schema_version < SCHEMA_VERSION:
        _check_older(doc.schema_version, doc.records)
    _check_created(doc.records)
    return doc


def _check_created(records: list[Record]) -> None:
    """Every record's ``created`` is ISO 8601 in UTC (checked once per distinct value)."""
    for when in {r.created for r in records}:
        if not _UTC_TIME.fullmatch(when):
            i = next(i for i, r in enumerate(records) if r.created == when)
            raise SchemaError(f"created {when[:40]!r} is not an ISO 8601 time in UTC (YYYY-MM-DDTHH:MM:SS+00:00 or "
                              f"...Z) - at `$.records[{i}].created`")


def _check_older(version: int, records: list[Record]) -> None:
    """A file of an older version cannot carry what a later version added."""
    for i, rec in enumerate(records):
        if version < 2 and rec.distributed is not None:
            raise SchemaError(f"Object contains unknown field `distributed` for schema_version {version} - at "
                              f"`$.records[{i}]`")
        if version < 3 and rec.dispatch is not None:
            raise SchemaError(f"Object contains unknown field `dispatch` for schema_version {version} - at "
                              f"`$.records[{i}]`")
        if version < 3 and rec.method is not None and rec.method.timer == "host_loop":
            raise SchemaError(f"Invalid enum value 'host_loop' for schema_version {version} - at "
                              f"`$.records[{i}].method.timer`")


def _peek_version(data: bytes) -> Any:
    try:
        head = json.loads(data)
    except (ValueError, RecursionError):
        return None
    return head.get("schema_version") if isinstance(head, dict) else None


def validate_records(env: Any, records: list[Any]) -> RecordsFile:
    """Validate before writing: returns the file struct, raises ``SchemaError``."""
    doc = {"schema_version": SCHEMA_VERSION, "kind": FILE_KIND, "env": to_dict(env),
           "records": [to_dict(r) for r in records]}
    try:
        out = msgspec.convert(doc, RecordsFile)
    except msgspec.ValidationError as e:
        raise SchemaError(str(e)) from None
    _check_created(out.records)
    check_ops(out.records)
    return out


def check_ops(records: list[Record]) -> None:
    """Every record's op is registered (``SchemaError`` naming the first that is not): checked on write."""
    from . import ops

    known = ops.names()
    for i, rec in enumerate(records):
        # the pipelines suite's cases are benchmark kinds (data loading, training step, inference), not ops
        if rec.case.op not in known and not (rec.suite == PIPELINES_SUITE and rec.case.op in PIPELINE_KINDS):
            raise SchemaError(f"unknown op {rec.case.op!r} (registered: {', '.join(known)}) - at "
                              f"`$.records[{i}].case.op`")


def to_dict(obj: Any) -> Any:
    """Plain dicts/lists from structs (dicts pass through unchanged)."""
    if isinstance(obj, msgspec.Struct):
        return msgspec.to_builtins(obj)
    if isinstance(obj, list):
        return [to_dict(x) for x in obj]
    return obj


# The measuring method's version: bump it when the way a case is timed changes (what a series' points mean),
# e.g. input rotation added to warm mode. A record without it was measured with version 1 (Series.method_version).
METHOD_VERSION = 1


class Series(NamedTuple):
    """The identity of a measured quantity over time: two figures are compared (``compare``, ``check``, the
    report's runs, the dashboard's History lines) only when their series are equal. Built by :func:`series_key`.

    Extending it (a method version, an environment class, ...): add a field here WITH a default and set it in
    :func:`series_key`; :func:`fingerprint` leaves a field at its default out of the hash, so the series (and
    the alert issues keyed by their fingerprints) that existed before keep their identity.
    """

    machine: str | None  # the stable machine name (env.machine): never compared across machines
    op: str  # implied by the case id; kept for grouping and display
    case_id: str  # op and shape: "resample/B256-S100-T50-D32"
    provider: str  # provider and variant: "robocache@v2", "torch_compile@max-autotune"
    dtype: str
    timer: str  # how it was timed: cuda_event, cuda_graph, host, host_loop ("-": never timed, as the dashboard)
    cache: str  # warm or cold ("-": never timed)
    grid_version: int  # a case's meaning (the bytes it is judged by): bumped, it is a new series
    frontend: str | None  # cli, asv, pytest-benchmark, ...: each one times its own way, so it changes the figure
    input_sets: int  # 1 = the same (L2-resident) inputs every call, >1 rotated (warm mode)
    method_version: int = 1  # the measuring method's version (method.version; absent: 1): a new method, a new series


# Fields implied by others (op: by the case id), left out of the fingerprint.
_IMPLIED = ("op",)


def series_key(rec: Record) -> Series:
    """The series of a loaded record: the one definition of "a series", see :class:`Series`. A record read as a
    dict is refused (``TypeError``): records are read typed (``store.load``, ``schema.decode_records``)."""
    if isinstance(rec, Mapping):
        raise TypeError("series_key takes a typed Record (store.load / schema.decode_records), not a dict")
    m, c, env = rec.method, rec.case, rec.env
    return Series(machine=env.machine if env is not None else None, op=c.op, case_id=c.id,
                  provider=c.provider, dtype=c.dtype, timer=(m.timer if m else None) or "-",
                  cache=(m.cache if m else None) or "-", grid_version=c.grid_version, frontend=rec.frontend,
                  input_sets=m.input_sets if m else 1, method_version=m.version if m else 1)


def fingerprint(series: Series | Mapping[str, Any]) -> str:
    """12 hex digits, stable per series (one alert issue per series, however many nights it stays slow): a hash of
    the :class:`Series` fields in order, without the implied ones and without those at their default."""
    d = series._asdict() if isinstance(series, Series) else series
    dflt = Series._field_defaults  # a mapping without a defaulted field (an older alert's series) has it at default
    keep = [f for f in Series._fields if f not in _IMPLIED and not (f in dflt and d.get(f, dflt[f]) == dflt[f])]
    return hashlib.sha256("|".join(str(d.get(k)) for k in keep).encode()).hexdigest()[:12]


# --- bisection documents: ``robocache-bench bisect`` (robocache/bench/bisect.py, docs/regressions.md "Bisection") ---
# A separate versioned JSON document, not a record: a bisection measures OLD commits today, so its measurements
# must never become points of a series' history (its raw run files are kept as ``*.bisect-run.json``, a name no
# results loader picks up). Validated like a records file: msgspec, unknown fields refused, floats finite.

BISECT_SCHEMA = "robocache-bisect/1"
BISECT_STATUSES = ("running", "found", "not_reproducible", "spread", "undecided", "budget", "untestable", "failed")
BisectStatus = Literal["running", "found", "not_reproducible", "spread", "undecided", "budget", "untestable", "failed"]
Prob = Annotated[float, Meta(ge=0.0, le=1.0)]
_HEX12 = Annotated[str, Meta(pattern=r"^[0-9a-f]{12}$")]


class BisectCommit(_Rec):
    """One commit of the bisected range: its hash, subject and place (0: the good endpoint)."""

    commit: str
    index: Count
    subject: str = ""


class BisectCase(_Rec):
    """A measured case: its key (``op/tag/dtype/provider``), cache mode and, when known, its series."""

    key: str
    cache: Cache
    fingerprint: str | None = None
    series: dict[str, Any] = {}


class BisectMeasurement(_Rec):
    """One record a candidate's own ``robocache-bench run`` wrote (its p50: one sample of a comparison)."""

    commit: str
    index: Count
    round: Count
    case_key: str
    cache: Cache
    status: Status
    used: bool  # counted: status ok, a time, not throttled (a contended record counts: ``contended`` says so)
    p50_us: NonNeg | None = None
    value: NonNeg | None = None  # the sample: the record's figure named by settings.statistic (us), or, for a case
    # whose series' measure is call_ratio (its alert was on the interleaved ratio), the record's ratio p50
    noise: NonNeg | None = None
    reason: str | None = None
    run_id: str | None = None
    created: str | None = None
    file: str | None = None  # the run file, relative to the document's folder
    block: Count | None = None  # the candidate (its index) it was measured beside; None: the endpoints' own rounds
    contended: bool = False  # the record's health said contended (host load above its cores, another GPU process)


class BisectCaseEvidence(_Rec):
    """One case's part of a decision: its samples against the endpoints' (position: 0 at good, 1 at bad)."""

    case_key: str
    samples: Count
    ratio_vs_good: NonNeg | None = None
    p_vs_good: Prob | None = None
    p_vs_bad: Prob | None = None
    position: Finite | None = None
    verdict: str = ""


class BisectEvidence(_Rec):
    """The decision about one tested commit (the endpoints: whether the change reproduces between them)."""

    commit: str
    index: Count
    role: Literal["endpoints", "candidate"]
    verdict: Literal["reproduced", "not_reproduced", "good", "bad", "between", "unknown", "untestable"]
    samples: Count  # per case, the fewest of the cases counted
    rounds: Count
    seconds: NonNeg
    p_vs_good: Prob | None = None
    p_vs_bad: Prob | None = None
    high_threshold: Prob | None = None
    position: Finite | None = None
    position_low: Finite | None = None  # the lower quartile's position (quantile-matched), what settles a candidate
    reason: str = ""
    cases: list[BisectCaseEvidence] = []


class BisectUntestable(_Rec):
    commit: str
    index: Count
    reason: str


class BisectExcluded(_Rec):
    case_key: str
    reason: str


class BisectAlert(_Rec):
    """The alert group the bisection was started from (``check --json``): the issue key of
    ``scripts/alerts_to_issues.py`` (machine and commit range), its change ids and series fingerprints."""

    key: _HEX12
    change_ids: list[str] = []
    fingerprints: list[str] = []
    ratio: NonNeg | None = None


class BisectSettings(_Rec):
    samples: Annotated[int, Meta(ge=2)]
    max_samples: Annotated[int, Meta(ge=2)]
    endpoint_max: Annotated[int, Meta(ge=2)]
    alpha: Prob
    same_miss: Prob
    budget_s: NonNeg
    device: str
    suite: str
    time_limit_s: NonNeg | None = None
    statistic: Literal["p50", "p20", "min"] = "p50"
    same_floor: Prob = 0.0


class BisectTime(_Rec):
    wall_s: NonNeg
    measure_s: NonNeg
    invocations: Count


class BisectDoc(_Rec):
    """A bisection's result (``status``), written when it starts and after every measurement round."""

    schema: Literal["robocache-bisect/1"]
    id: _HEX12
    status: BisectStatus
    reason: str
    created: str  # ISO 8601 UTC, as records
    updated: str
    machine: str
    good: BisectCommit
    bad: BisectCommit
    commits: list[BisectCommit]  # good first, bad last (first-parent order)
    cases: list[BisectCase]
    settings: BisectSettings
    time: BisectTime
    markdown: str  # the summary, record strings escaped (issues and stdout use it as is)
    culprit: BisectCommit | None = None
    last_good: BisectCommit | None = None  # the range narrowed so far
    first_bad: BisectCommit | None = None
    suspects: list[BisectCommit] = []  # the commits the change may be in when no single culprit is named
    untestable: list[BisectUntestable] = []
    reproduced: list[str] = []  # the case keys that moved between the endpoints (the ones that decide)
    excluded: list[BisectExcluded] = []
    evidence: list[BisectEvidence] = []
    measurements: list[BisectMeasurement] = []
    alert: BisectAlert | None = None
    link: str | None = None  # the History view with the culprit marked (robocache/bench/links.py)
    note: str = ""


_BISECT_DECODER = msgspec.json.Decoder(BisectDoc)


def parse_bisect_bytes(data: bytes) -> BisectDoc:
    """Validate a bisection document's bytes; ``SchemaError`` with a short reason otherwise."""
    if not data.strip():
        raise SchemaError("empty file")
    try:
        doc = _BISECT_DECODER.decode(data)
    except (msgspec.ValidationError, msgspec.DecodeError) as e:
        raise SchemaError(str(e)) from None
    except RecursionError:
        raise SchemaError("nested too deeply to be a bisection document") from None
    for name in ("created", "updated"):
        if not _UTC_TIME.fullmatch(getattr(doc, name)):
            raise SchemaError(f"{name} {getattr(doc, name)[:40]!r} is not an ISO 8601 time in UTC - at `$.{name}`")
    return doc


def validate_bisect(doc: Any) -> BisectDoc:
    """A bisection document (a dict) checked before writing: the struct, or ``SchemaError``."""
    try:
        data = json.dumps(to_dict(doc), allow_nan=False, ensure_ascii=False).encode("utf-8")
    except (TypeError, ValueError, UnicodeEncodeError) as e:  # NaN/inf (msgspec would write null), a non-JSON value
        raise SchemaError(f"cannot serialize: {e}") from None
    return parse_bisect_bytes(data)


# --- alerts documents: ``robocache-bench check --json`` (robocache/bench/regressions/alerts.py) ---------------
# What `check` raised, written by the CLI (``check --json``) and the dashboard's check cache, read by the dashboard
# (History, Regressions, Overview), ``robocache-bench bisect --alerts`` and scripts/alerts_to_issues.py. Validated
# like the other documents: msgspec, unknown fields refused, floats finite (no NaN: JSON has no such token). The
# version is the ``schema`` text: fields added within /1 are optional, so every file written since the first
# ``robocache-alerts/1`` (no change ids, links, drifts, breaks or ``checked`` then) still loads; a writer only ever
# adds optional fields within /1, and anything else is /2, which this reader refuses by name.
# Only ``alerts`` and a finding's ``fingerprint`` and ``series`` are required: the format is read from files of other writers too
# (tests, hand-made fixtures); what each reader needs beyond that (an issue's title and markdown, bisect's case key
# and commit range) it asks of the typed document itself. scripts/alerts_to_issues.py runs in a job that installs
# nothing (the runner's python3 and that one file), so it keeps a standard-library check of the same format:
# tests/test_alerts_schema.py holds the two to the same fields.

ALERTS_SCHEMA = "robocache-alerts/1"
_FMAX = 1.7976931348623157e308  # sys.float_info.max: a check's ratio may be any finite number (1e-300 -> 1e300)
AlertFloat = Annotated[float, Meta(ge=-_FMAX, le=_FMAX)]  # finite: NaN and +-Inf fail the bounds
AlertNonNeg = Annotated[float, Meta(ge=0.0, le=_FMAX)]
# schema.Series as a dict (fingerprint()), plus the machine's arch and, on a call-cost series judged by its interleaved
# ratio, ``measure``: ``"call_ratio"`` (regressions.noise.CALL_RATIO; outside the fingerprint, absent otherwise and
# in every file written before it, so those still load)
SeriesFields = dict[str, str | int | None]


class AlertPoint(_Rec):
    """A run at one end of a change (the last before, the first after) or of a drift's window."""

    commit: str | None = None
    run_id: str | None = None
    created: str | None = None


class StepAlert(_Rec, kw_only=True):
    """A significant step in a series between two commits: an alert (slower) or an improvement (faster)."""

    fingerprint: _HEX12  # the series (schema.fingerprint)
    change_id: _HEX12 | None = None  # series and commit range (absent in the first /1 files)
    kind: Literal["step"] = "step"
    series: SeriesFields
    title: str = ""
    direction: Literal["slower", "faster"] | None = None
    ratio: AlertNonNeg | None = None  # median time after / before
    ratio_ci: list[AlertNonNeg] = []
    q_value: AlertNonNeg | None = None
    p_value: AlertNonNeg | None = None
    noise: AlertNonNeg | None = None
    n_before: Count | None = None
    n_after: Count | None = None
    before: AlertPoint | None = None
    after: AlertPoint | None = None
    case_key: str | None = None  # op/tag/dtype/provider: what `run --cases` measures again
    reproduce: str | None = None
    markdown: str = ""  # record strings escaped: an issue's body as is
    link: str | None = None  # its History view (links.history_url); a reader rebuilds it, never trusts it
    confirmed: bool | None = None  # None: not asked (no --confirm); False: could not be measured again
    confirm_note: str = ""
    reruns: Count = 0
    location_p: AlertNonNeg | None = None


class DriftAlert(_Rec, kw_only=True):
    """A trend over the newest nights of a series (no single commit blamed)."""

    fingerprint: _HEX12
    change_id: _HEX12 | None = None
    kind: Literal["drift"] = "drift"
    series: SeriesFields
    title: str = ""
    direction: Literal["slower", "faster"] | None = None
    slope_per_night: AlertFloat | None = None
    slope_ci: list[AlertFloat] = []
    total: AlertFloat | None = None
    window: Count | None = None
    tau: AlertFloat | None = None
    p_value: AlertNonNeg | None = None
    q_value: AlertNonNeg | None = None
    first: AlertPoint | None = None
    last: AlertPoint | None = None
    case_key: str | None = None
    markdown: str = ""
    link: str | None = None
    confirmed: bool | None = None
    confirm_note: str = ""
    reruns: Count = 0


class BreakNote(_Rec, kw_only=True):
    """A series moved because the way it is measured (``method``) or its runner (``environment``) changed."""

    fingerprint: _HEX12
    kind: Literal["method", "environment"]
    series: SeriesFields
    detail: str = ""
    run_id: str | None = None
    created: str | None = None
    ratio: AlertNonNeg | None = None
    link: str | None = None


class AlertsSummary(_Rec):
    """The check's counts and settings (regressions.alerts.tested: what it could answer); all optional, as a
    file of an older writer lacks the later ones (and then says no pass: dashboard verdict ``unknown``)."""

    series_current: Count | None = None
    series_checked: Count | None = None
    series_not_enough_history: Count | None = None
    series_stale: Count | None = None
    status: Literal["regression", "not_enough_history", "partial", "no_regression"] | None = None
    series: Count | None = None
    candidates: Count | None = None
    significant_changes: Count | None = None
    alerts: Count | None = None
    improvements: Count | None = None
    drifts: Count | None = None
    breaks: Count | None = None
    excluded_points: Count | None = None
    excluded_reasons: dict[str, Count] = {}
    floor: AlertNonNeg | None = None
    fdr_q: AlertNonNeg | None = None


class RefutedLook(_Rec):
    """A change point the confirmation's reruns refuted (``check --json``'s ``refuted_looks``, read back by the next
    night's ``check --refuted-before``): its change id, its series' fingerprint and how many nights' reruns refuted
    it (its next confirmation is tested at ``confirmation.spent`` of the level); where it is (``kind``, and the run
    ids ``before`` and ``after`` it: what the memory matches on, ``regressions.memory``; absent in the first
    files, matched by the change id)."""

    change_id: _HEX12
    fingerprint: _HEX12
    # any int here: its reader (regressions.memory.Memory.from_json) drops an entry below 1 and clamps one above
    # MAX_LOOKS, each said, so one bad entry costs that entry and not the night's whole memory
    looks: int
    kind: Literal["step", "drift"] = "step"
    before: str | None = None
    after: str | None = None
    rerun_us: list[float] = []  # a step's reruns (median us) on the nights that refuted it: pooled at its next look
    # what rerun_us holds: absent, median times (us); "call_ratio", a call-cost series' interleaved call ratios
    # (regressions.memory: pooled only into a look of the same measure)
    measure: Literal["time", "call_ratio"] | None = None


class AlertsDoc(_Rec, kw_only=True):
    """A check's result (``check --json``): its alerts, improvements, drifts and breaks, the series it tested."""

    schema: Literal["robocache-alerts/1"]
    alerts: list[StepAlert]  # every writer writes it, every reader needs it (an empty list: nothing raised)
    generated: str | None = None  # ISO 8601 UTC
    improvements: list[StepAlert] = []
    drifts: list[DriftAlert] = []
    breaks: list[BreakNote] = []
    checked: list[_HEX12] | None = None  # fingerprints of the series tested (None: absent, close no issue)
    summary: AlertsSummary | None = None
    refuted: list[_HEX12] = []  # check --confirm: alerts the rerun did not reproduce (not raised)
    refuted_looks: list[RefutedLook] = []  # the confirmation's memory: change points refuted, tonight or before
    confirm_asked: bool | None = None


class AlertsError(SchemaError):
    """An alerts document that does not match :class:`AlertsDoc`: ``path`` (``alerts[0].ratio``, "" for the
    document) and ``detail`` (what is wrong there) besides the one-line message ``path: detail``."""

    def __init__(self, path: str, detail: str) -> None:
        super().__init__(f"{path}: {detail}" if path else detail)
        self.path, self.detail = path, detail


_ALERTS_DECODER = msgspec.json.Decoder(AlertsDoc)
_TYPE_WORDS = {"array": "a list", "object": "an object", "str": "a string", "int": "an integer", "float": "a number",
               "bool": "true or false", "null": "null"}


def _alerts_error(e: Exception) -> AlertsError:
    """msgspec's ``Expected `array`, got `object` - at `$.alerts``` as ``alerts: must be a list, got an object``."""
    text, _, at = str(e).partition(" - at `")
    path = at.rstrip("`").removeprefix("$").lstrip(".")
    m = re.fullmatch(r"Expected `(.+?)`, got `(\w+)`", text)
    if m:
        want = " or ".join(_TYPE_WORDS.get(t, f"`{t}`") for t in m.group(1).split(" | "))
        text = f"must be {want}, got {_TYPE_WORDS.get(m.group(2), m.group(2))}"
    elif text.startswith("Expected `str` matching regex '^[0-9a-f]{12}$'"):
        text = "must be 12 lowercase hex digits"
    elif re.fullmatch(r"Expected `float` [<>]= \S+", text):  # the finite bounds: NaN and infinity fail them
        bound = text.removeprefix("Expected `float` ")
        text = "must be a finite number" + ("" if bound.endswith(("e+300", "e+308")) else f" {bound}")
    elif text.startswith("Invalid enum value") and path == "schema":
        text = (f"{text.removeprefix('Invalid enum value ')} is not {ALERTS_SCHEMA!r} (is this the output of "
                "`robocache-bench check --json`? a newer robocache writes a newer version)")
    return AlertsError(path, text[:1].lower() + text[1:])


def parse_alerts_bytes(data: bytes) -> AlertsDoc:
    """An alerts file's bytes as an :class:`AlertsDoc`; :class:`AlertsError` with a one-line reason otherwise."""
    if not data.strip():
        raise AlertsError("", "empty file")
    try:
        return _ALERTS_DECODER.decode(data)
    except msgspec.ValidationError as e:
        raise _alerts_error(e) from None
    except msgspec.DecodeError as e:  # NaN and Infinity are not JSON tokens: refused here
        raise AlertsError("", f"not JSON: {e}") from None
    except RecursionError:
        raise AlertsError("", "nested too deeply to be an alerts document") from None


class AlertsUnreadable(AlertsError):
    """An alerts file that could not be read at all (missing, a folder, not allowed): ``reason`` says why."""

    def __init__(self, reason: str) -> None:
        super().__init__("", f"cannot read: {reason}")
        self.reason = reason


def load_alerts(path: str | os.PathLike[str]) -> AlertsDoc | AlertsError:
    """The one reader of an alerts file (``check --json``): the typed :class:`AlertsDoc`, or the reason it is not
    one as an :class:`AlertsError` (its ``str`` one line; :class:`AlertsUnreadable` when the file could not be read)
    returned, never raised: each reader says it its own way and goes on (the dashboard computes the check, bisect
    stops with a usage error, ``check --refuted-before`` runs without the memory)."""
    try:
        raw = Path(path).read_bytes()
    except OSError as e:
        return AlertsUnreadable(e.strerror or str(e))
    try:
        return parse_alerts_bytes(raw)
    except AlertsError as e:
        return e


def alerts_doc(doc: Any) -> AlertsDoc:
    """An alerts document in memory (a dict, as ``check`` builds it and ``json.load`` reads it) as an
    :class:`AlertsDoc`, validated like a file (a NaN ``json.load`` let through is refused here)."""
    if isinstance(doc, AlertsDoc):
        doc = msgspec.to_builtins(doc)
    if not isinstance(doc, dict):
        raise AlertsError("", f"expected a JSON object, got {type(doc).__name__}")
    try:
        return msgspec.convert(doc, AlertsDoc)
    except msgspec.ValidationError as e:
        raise _alerts_error(e) from None
    except RecursionError:
        raise AlertsError("", "nested too deeply to be an alerts document") from None


def encode_alerts(doc: Any) -> str:
    """The text ``check --json`` writes: ``doc`` validated (:func:`alerts_doc`), then as it is (key order kept,
    indent 1, no NaN): the file stays what it was before the format was typed."""
    alerts_doc(doc)
    return json.dumps(to_dict(doc), indent=1, allow_nan=False)
