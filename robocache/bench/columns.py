"""The read model's rows, in plain Python: the columns of one row per record derived from loaded records (one
pass per group of columns), and :class:`Row`, one row as the views read it.

:mod:`robocache.bench.frame` stores these columns as an Arrow table (and its Parquet cache) and reads them back;
this module needs neither pandas nor pyarrow, so the views run on the same rows where those are not installed
(the ``bench`` extra alone: the CLI builds the rows from the store's load). :func:`rows` turns columns (lists,
read from the Arrow table, a pandas frame or :func:`columns`) into :class:`Row` objects; :func:`as_rows` turns
loaded records into them.
"""
from __future__ import annotations

import dataclasses
import json
import os
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import msgspec

from .. import _tune
from . import schema
from .store import display_path

# the checkout this module runs from (an editable install, or the repository itself): its root is where the
# records shown relative to it live, and its ignored .cache/ holds the columnar cache
REPO = Path(__file__).resolve().parents[2]

# Shape parameters with a column each (the Sweeps page's axes); "G" is voxelize's grid side (``grid: [g, g, g]``;
# missing when the sides differ).
SHAPE_PARAMS = ("B", "S", "T", "D", "N", "G")

# From record.distributed (schema version 2): None for single-GPU records.
MULTI_NUMERIC = ("world_size", "nodes", "step_us", "aggregate_items_per_s", "efficiency", "gather_us",
                 "gather_gb_per_s", "collective_us", "collective_gb_per_s", "collective_busbw_gb_per_s")
MULTI_COLUMNS = (*MULTI_NUMERIC, "backend", "scaling", "gather", "per_rank_us")

COLUMNS = ["run_id", "created", "created_text", "git_commit", "suite", "frontend", "machine", "arch", "gpu_name", "device",
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
           "dispatch_device_us", "dispatch_gpu_keeps_up",
           # the case's moved bytes (case.bytes), a pipeline case's kind (record.pipeline.kind), a call-cost case's
           # interleaved timing (record.dispatch.interleaved, as JSON)
           "bytes", "pipeline_kind", "interleaved",
           # robocache's tuned launch the timed call used (record.launches, :func:`launch_text`: "cs 2 (tuned)")
           "launch",
           # the fresh processes its median was taken over (`run --processes K`: len(record.processes); 1 for a record
           # timed once): check's alerts reproduce and rerun a case as its newest record was measured
           "processes",
           # the series' identity (schema.series_key's fingerprint: the one definition check, compare, the report
           # and History's lines use), 12 hex digits
           "series"]



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


def columns(records: Sequence[Any]) -> dict[str, list[Any]]:
    """One list per column over the records: a pass per group of columns (list comprehensions, each over the
    100,000 records of a large history)."""
    cols = {**_env_columns(records), **_record_columns(records), **_case_columns(records),
            **_method_columns(records), **_metric_columns(records), **_clock_columns(records),
            **_multi_columns(records)}
    return {c: cols[c] for c in COLUMNS}


def _env_columns(records: Sequence[Any]) -> dict[str, list[Any]]:
    """The runner's columns, computed once per env object (one per file, shared by its records)."""
    enc = msgspec.json.encode
    env_cache: dict[int, tuple[Any, ...]] = {}

    def row(env: Any) -> tuple[Any, ...]:
        e = env_cache.get(id(env))
        if e is None:
            if env is None:
                e = ("?", "unknown", None, "?", None, "{}")
            else:
                arch = env.arch or ("CPU" if env.device == "cpu" else env.gpu_name or "unknown")
                e = (env.machine, arch, env.gpu_name, env.device, env.gpu_count, enc(env).decode())
            env_cache[id(env)] = e
        return e

    rows = [row(r.env) for r in records]
    return {c: [e[i] for e in rows] for i, c in enumerate(("machine", "arch", "gpu_name", "device", "gpu_count",
                                                            "env"))}


def _record_columns(records: Sequence[Any]) -> dict[str, list[Any]]:
    """The record's own fields, its file as shown (:func:`shown_source`, once per file) and its series'
    fingerprint (once per series)."""
    series_of = schema.series_key
    fps: dict[schema.Series, str] = {}  # one fingerprint (a sha256) per distinct series
    sources: dict[Any, Any] = {}

    def fp(r: Any) -> str:
        s = series_of(r)
        f = fps.get(s)
        if f is None:
            f = fps[s] = schema.fingerprint(s)
        return f

    def shown(src: Any) -> Any:  # one source per file; one in this checkout shown from its root (results/...)
        got = sources.get(src)
        if got is None:
            got = sources[src] = shown_source(src)
        return got

    return {"run_id": [r.run_id for r in records], "created": [r.created for r in records],
            "created_text": [r.created for r in records],  # as written: the check's order and its alerts' words
            "git_commit": [r.git_commit for r in records], "suite": [r.suite for r in records],
            "frontend": [r.frontend for r in records], "status": [r.status for r in records],
            "reason": [r.reason or "" for r in records], "synthetic": [r.synthetic for r in records],
            "git_dirty": [r.git_dirty for r in records], "source": [shown(r.source) for r in records],
            "series": [fp(r) for r in records],
            "pipeline_kind": [r.pipeline.kind if r.pipeline is not None else None for r in records],
            "launch": [launch_text(getattr(r, "launches", None)) for r in records],
            "processes": [max(len(getattr(r, "processes", None) or ()), 1) for r in records]}


# Config fields at the launch rule's value (robocache/_tune.py's DEFAULT): left out of a launch's text
_RULE = dataclasses.asdict(_tune.DEFAULT)


def launch_text(launches: Sequence[Any]) -> str | None:
    """robocache's tuned launches of one record (``record.launches``) in words: each configuration's fields that
    differ from the launch rule, or "default", and where it came from: ``"cs 2 (tuned)"``, ``"lg_shift 1, tpg 4
    (shipped)"``, ``"default (cache)"``; several joined by "; ". None for a record without any."""
    if not launches:
        return None
    return "; ".join(f"{config_text(getattr(ln, 'config', None) or {})} ({getattr(ln, 'source', '?')})"
                     for ln in launches)


# the kernel each Config.stage launches (robocache/_tune.py), named beside its number
_STAGE_NAMES = {1: "staged", 2: "span", 3: "tile", 4: "element", 5: "flat"}


def config_text(cfg: Mapping[str, int]) -> str:
    """One launch configuration (``Launch.config``) in words: its fields that differ from the launch rule's, or
    "default": ``"cs 2"``, ``"lg_shift 1, tpg 4"``, ``"stage 5 (flat)"``."""
    def one(k: str, v: Any) -> str:
        name = _STAGE_NAMES.get(v) if k == "stage" and isinstance(v, int) else None
        return f"{k} {v} ({name})" if name else f"{k} {v}"

    return ", ".join(one(k, v) for k, v in sorted(cfg.items()) if _RULE.get(k) != v) or "default"


def _case_columns(records: Sequence[Any]) -> dict[str, list[Any]]:
    """The case: op, id, provider, dtype, grid version, its parameters (as JSON, and a column per shape
    parameter that is a number)."""
    enc = msgspec.json.encode
    cases = [r.case for r in records]
    out: dict[str, list[Any]] = {"op": [c.op for c in cases], "case_id": [c.id for c in cases],
                                 "provider": [c.provider for c in cases], "dtype": [c.dtype for c in cases],
                                 "grid_version": [c.grid_version for c in cases],
                                 "params": [enc(c.params).decode() for c in cases], "bytes": [c.bytes for c in cases]}
    for s in SHAPE_PARAMS:
        vals = [_grid_side(c.params.get("grid")) for c in cases] if s == "G" else [c.params.get(s) for c in cases]
        out[s] = [v if isinstance(v, (int, float)) and not isinstance(v, bool) else None for v in vals]
    return out


def _method_columns(records: Sequence[Any]) -> dict[str, list[Any]]:
    """How it was measured, and its health flags."""
    ms = [r.method for r in records]
    hs = [r.health for r in records]
    return {"timer": [m.timer if m else "-" for m in ms], "cache": [m.cache if m else "-" for m in ms],
            "input_sets": [m.input_sets if m else None for m in ms],
            "method_version": [m.version if m else None for m in ms],
            "noise": [m.noise if m else None for m in ms],  # the median's 95% half-width: the check's within-run noise
            "throttled": [h.throttled for h in hs], "contended": [h.contended for h in hs],
            "noisy": [h.noisy for h in hs], "health_reasons": ["; ".join(h.reasons) for h in hs]}


def _metric_columns(records: Sequence[Any]) -> dict[str, list[Any]]:
    """The figures (None where the case has none), and a call-cost case's dispatch figures."""
    xs = [r.metrics for r in records]
    dsps = [getattr(r, "dispatch", None) for r in records]
    out = {"p20": [x.time_us.p20 if x is not None else None for x in xs],
           "p50": [x.time_us.p50 if x is not None else None for x in xs],
           "p80": [x.time_us.p80 if x is not None else None for x in xs]}
    for col in ("gb_per_s", "pct_of_ceiling", "items_per_s", "ceiling_gb_per_s"):
        out[col] = [getattr(x, col) if x is not None else None for x in xs]
    out["dispatch_device_us"] = [getattr(d, "device_us", None) if d is not None else None for d in dsps]
    out["dispatch_gpu_keeps_up"] = [getattr(d, "gpu_keeps_up", None) if d is not None else None for d in dsps]
    inter = [getattr(d, "interleaved", None) if d is not None else None for d in dsps]
    out["interleaved"] = [msgspec.json.encode(i).decode() if i is not None else None for i in inter]
    return out


def _clock_columns(records: Sequence[Any]) -> dict[str, list[Any]]:
    """The GPU's clocks, temperature and power while it ran (None where not sampled)."""
    ks = [r.clocks for r in records]
    out = {col: [getattr(k, col) if k is not None else None for k in ks]
           for col in ("sm_mhz_min", "sm_mhz_median", "sm_mhz_max_supported", "temperature_c_max", "power_w_max",
                       "other_processes")}
    out["throttle_reasons"] = [", ".join(k.throttle_reasons) if k is not None else "" for k in ks]
    return out


def _multi_columns(records: Sequence[Any]) -> dict[str, list[Any]]:
    """A multi-GPU case's figures (record.distributed; None for the others)."""
    ds = [r.distributed for r in records]
    out = {col: [getattr(d, col) if d is not None else None for d in ds] for col in MULTI_NUMERIC}
    for col in ("backend", "scaling", "gather"):
        out[col] = [getattr(d, col) if d is not None else None for d in ds]
    out["per_rank_us"] = [", ".join(f"{t:.1f}" for t in d.per_rank_us) if d is not None else None for d in ds]
    return out



# --- one row as the views read it --------------------------------------------------------------------------

def where_of(env: Any) -> tuple[str, str, str]:
    """(machine, arch, GPU name) of a runner's env (a dict of its fields, or the :class:`~robocache.bench.schema.Env`
    struct, or None); ``?`` where unknown (a CPU run: arch ``CPU``, the CPU's name for the GPU's)."""
    def get(k: str) -> Any:
        return env.get(k) if isinstance(env, Mapping) else getattr(env, k, None)

    arch = get("arch") or ("CPU" if get("device") == "cpu" else get("gpu_name")) or "?"
    return (str(get("machine") or "?"), str(arch), str(get("gpu_name") or get("cpu") or "?"))


def dispatch_case(case_id: str, params: Mapping[str, Any] | None) -> bool:
    """A call-cost ("dispatch") case: host time per call of a tiny call in a tight loop. Recognised by its case id
    (``<op>/dispatch...``) or its params (``kind``/``mode`` == ``"dispatch"`` or a true ``dispatch`` key)."""
    p = params or {}
    tag = str(case_id).split("/", 1)[-1]
    return (tag.startswith("dispatch") or p.get("kind") == "dispatch" or p.get("mode") == "dispatch"
            or bool(p.get("dispatch")))


def pipeline_kind_of(section_kind: str | None, suite: str, op: str) -> str | None:
    """``dataload``, ``train``, ``infer`` or ``profile`` for a record of the pipelines or profile suites (its
    section's kind; a failed or skipped case without the section: from its suite and op), None otherwise."""
    if section_kind is not None:
        return section_kind
    if suite == "profile":
        return "profile"
    if suite == "pipelines" and op in schema.PIPELINE_KINDS:
        return op
    return None


class Row(msgspec.Struct, gc=False):
    """One record as the across-runs views read it (``report --kernels``, ``report --sampled`` and the dashboard's
    Kernels and Sampled pages): the frame's columns of one row, parsed (``params``, ``env``, ``interleaved`` as
    dicts; ``created`` the record's own text). ``where`` is (machine, arch, GPU name) (:func:`where_of`);
    ``p50`` and the figures are None where the record has no metrics; ``timer`` is None where it has no method;
    ``pipeline`` its end-to-end kind (:func:`pipeline_kind_of`); ``is_dispatch`` a call-cost case
    (:func:`dispatch_case`), ``is_multigpu`` a multi-GPU one (its params name the world size). Built by
    :func:`rows` only (the fields in :data:`_ROW_FIELDS`' order)."""

    run_id: str
    created: str
    suite: str
    frontend: str | None
    git_commit: str | None
    git_dirty: bool | None
    synthetic: bool
    env: dict[str, Any]
    where: tuple[str, str, str]
    op: str
    case_id: str
    provider: str
    dtype: str
    params: dict[str, Any]
    bytes: int | None
    status: str
    p50: float | None
    gb_per_s: float | None
    pct_of_ceiling: float | None
    ceiling_gb_per_s: float | None
    timer: str | None
    throttled: bool
    contended: bool
    noisy: bool
    pipeline: str | None
    dispatch_device_us: float | None
    dispatch_gpu_keeps_up: bool | None
    interleaved: dict[str, Any] | None
    launch: str | None
    series: str
    is_dispatch: bool
    is_multigpu: bool

    @property
    def flags(self) -> str:
        """``throttled,contended,noisy`` as flagged, ``-`` for none."""
        return ",".join(k for k, v in (("throttled", self.throttled), ("contended", self.contended),
                                       ("noisy", self.noisy)) if v) or "-"

    @property
    def timed(self) -> bool:
        """A single-GPU device-time row: not a multi-GPU, call-cost (dispatch) or pipeline case."""
        return not (self.is_multigpu or self.is_dispatch or self.pipeline)


# the frame's columns a Row is built from
ROW_COLUMNS = ("run_id", "created_text", "suite", "frontend", "git_commit", "git_dirty", "synthetic", "env", "op",
               "case_id", "provider", "dtype", "params", "bytes", "status", "p50", "gb_per_s", "pct_of_ceiling",
               "ceiling_gb_per_s", "timer", "input_sets", "throttled", "contended", "noisy", "pipeline_kind",
               "dispatch_device_us", "dispatch_gpu_keeps_up", "interleaved", "launch", "series")


def _parsed(texts: Sequence[Any]) -> list[Any]:
    """JSON texts parsed, once per distinct text (a dict each: anything else, or bad JSON, as ``{}``); None stays
    None. Rows with one text share its object: the views read it, never change it."""
    seen: dict[Any, Any] = {}
    out = []
    for t in texts:
        got = seen.get(t)
        if got is None:
            if t is None:
                out.append(None)
                continue
            try:
                got = json.loads(t)
            except (TypeError, ValueError):
                got = {}
            got = seen[t] = got if isinstance(got, dict) else {}
        out.append(got)
    return out


def _once(f: Any, values: Sequence[Any], key: Any = None) -> list[Any]:
    """``[f(v) for v in values]``, computed once per distinct ``key(v)`` (``v`` itself by default)."""
    seen: dict[Any, Any] = {}
    out = []
    for v in values:
        k = v if key is None else key(v)
        if k not in seen:
            seen[k] = f(v)
        out.append(seen[k])
    return out


def _kinds(cols: Mapping[str, Sequence[Any]], envs: list[Any], params: list[dict[str, Any]]) -> tuple[list, ...]:
    """Per row: where it ran (once per env), its end-to-end kind, whether it is a call-cost case and a multi-GPU
    case."""
    where = _once(where_of, envs, key=id)
    pipeline = [pipeline_kind_of(k, s, o) for k, s, o in zip(cols["pipeline_kind"], cols["suite"], cols["op"])]
    is_dispatch = [dispatch_case(c, p) for c, p in zip(cols["case_id"], params)]
    return where, pipeline, is_dispatch, ["world_size" in p for p in params]


def rows(cols: Mapping[str, Sequence[Any]]) -> list[Row]:
    """:class:`Row` objects from the frame's columns (:data:`ROW_COLUMNS` at least, as plain Python values with
    None for missing: lists as :func:`columns` gives them, or as :func:`robocache.bench.frame.rows_of` reads them
    from the Arrow table or a pandas frame); ``params``, ``env`` and ``interleaved`` parsed once per distinct text,
    what is derived from them computed once per distinct value."""
    n = len(cols["run_id"])
    envs = _parsed(cols["env"])
    params = [p if p is not None else {} for p in _parsed(cols["params"])]
    where, pipeline, is_dispatch, is_multigpu = _kinds(cols, envs, params)
    fields = (
        [str(v) for v in cols["run_id"]], [str(v) for v in cols["created_text"]], [str(v) for v in cols["suite"]],
        cols["frontend"], cols["git_commit"], cols["git_dirty"], [bool(v) for v in cols["synthetic"]],
        [e if e is not None else {} for e in envs], where, cols["op"], cols["case_id"], cols["provider"],
        cols["dtype"], params, [None if b is None else int(b) for b in cols["bytes"]], cols["status"], cols["p50"],
        cols["gb_per_s"], cols["pct_of_ceiling"], cols["ceiling_gb_per_s"],
        # the frame writes a method's input sets always, its timer "-" without one
        [t if s is not None else None for t, s in zip(cols["timer"], cols["input_sets"])],
        [bool(v) for v in cols["throttled"]], [bool(v) for v in cols["contended"]],
        [bool(v) for v in cols["noisy"]], pipeline, cols["dispatch_device_us"], cols["dispatch_gpu_keeps_up"],
        _parsed(cols["interleaved"]), cols["launch"], cols["series"], is_dispatch, is_multigpu)
    assert all(len(f) == n for f in fields)
    return [Row(*vals) for vals in zip(*fields)]


def of_records(records: Iterable[schema.Record]) -> list[Row]:
    """Loaded records (:class:`robocache.bench.schema.Record`, typed by the store's loader) as rows: :func:`rows`
    of :func:`columns`. A record as a dict is refused (``TypeError``): the one loader types records, not the
    readers."""
    recs = list(records)
    for r in recs:
        if not isinstance(r, schema.Record):
            raise TypeError(f"of_records takes loaded records (schema.Record), got {type(r).__name__}")
    return rows(columns(recs)) if recs else []


def as_rows(items: Iterable[Any]) -> list[Row]:
    """``items`` as rows: rows as they are, loaded records through :func:`of_records`."""
    items = list(items)
    return items if not items or isinstance(items[0], Row) else of_records(items)
