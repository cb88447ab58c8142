"""Typed messages between the harness's processes: what a worker is told and what it sends back.

A case runs in a process of its own (:mod:`robocache.bench.runner`), in the front end's process
(:mod:`robocache.bench.frontend`) or on every rank of a torchrun launch (:mod:`robocache.bench.multigpu.rank`).
What crosses a process boundary is one of these msgspec ``Struct`` types, encoded with msgspec (MessagePack
to a case process, JSON files to and from the ranks) and decoded *with its type*, so a message is checked
(field names, types, bounds) where it arrives:

* :class:`Task`: one case (or the copy-ceiling measurement) for a worker, frozen, built by
  :meth:`robocache.bench.context.RunContext.task` (the one constructor; a misspelt option fails there);
* the worker's answer: the schema's :class:`~robocache.bench.schema.Record`, a Struct from the moment the
  worker builds it (:func:`robocache.bench.worker.base_record`), or a :class:`Ceiling`, or a
  :class:`Precompiled`;
* :class:`~robocache.bench.context.LaunchTask`: the cases of one world size for the ranks of a multi-GPU
  launch, with the :class:`~robocache.bench.context.RunContext` that says where their records go; the ranks
  answer with one :class:`CaseDone` per case, and :class:`Progress`, :class:`RankPid` and
  :class:`RankFailure` files that the launcher watches.

MessagePack keeps a NaN as a NaN, so a NaN figure in a record fails the schema's finite bounds when the
runner decodes it (the case is then an ``error`` saying so) instead of turning into ``null`` on the way.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Literal, TypeVar

import msgspec

from .schema import Record

T = TypeVar("T")


class Message(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """Base of the messages: immutable, keyword-only, unknown fields refused when decoded."""


class TimingOptions(Message, omit_defaults=True):
    """Options of the project's timers (``timing.time_gpu`` / ``time_host`` / ``time_host_loop``); None: the
    timer's own default."""

    noise_target: float | None = None
    min_samples: int | None = None
    max_samples: int | None = None
    time_limit_s: float | None = None
    warmup_s: float | None = None
    target_sample_s: float | None = None

    @classmethod
    def of(cls, given: TimingOptions | dict[str, Any] | None) -> TimingOptions:
        """``given`` as options (a dict is checked: an unknown name or a wrong type raises ``ValueError``)."""
        if isinstance(given, TimingOptions):
            return given
        try:
            return msgspec.convert(given or {}, cls)
        except msgspec.ValidationError as e:
            raise ValueError(f"timing options: {e}") from None

    def kwargs(self, *only: str) -> dict[str, Any]:
        """The options that are set, as timer keyword arguments (only the names ``only`` when given)."""
        return {k: v for k in self.__struct_fields__ if (v := getattr(self, k)) is not None
                and (not only or k in only)}

    def with_defaults(self, **defaults: Any) -> TimingOptions:
        """These options, with ``defaults`` filling those that are not set."""
        return msgspec.structs.replace(self, **{k: v for k, v in defaults.items() if getattr(self, k) is None})


class Task(Message):
    """One case (``kind="case"``, ``case_key``) or the copy-ceiling measurement (``kind="ceiling"``) for a
    worker. Built by :meth:`RunContext.task <robocache.bench.context.RunContext.task>`."""

    run_id: str
    suite: str
    frontend: str
    device: Literal["gpu", "cpu"]
    git_commit: str | None = None
    git_dirty: bool | None = None
    synthetic: bool = False  # generated fixtures (tests) say so in their records
    kind: Literal["case", "ceiling"] = "case"
    case_key: str | None = None  # <op>/<tag>/<dtype>/<provider> (specs.Case.key); None for a ceiling task
    cache: Literal["warm", "cold"] = "warm"
    timing: TimingOptions = TimingOptions()
    seed: int = 0
    check_only: bool = False  # stop after the correctness gate (front ends running as tests)
    graph_check: bool = True  # the CUDA-graph replay self-check of a warm GPU case
    ceiling_gb_per_s: float | None = None  # the run's copy bandwidth, for the % of ceiling


class Ceiling(Message, omit_defaults=True):
    """The device-to-device copy bandwidth measured by a worker (``timing.copy_ceiling``), or why it failed."""

    status: str
    reason: str | None = None
    gb_per_s: float | None = None
    gb_per_s_max: float | None = None
    bytes: int | None = None
    time_us: float | None = None
    noise: float | None = None
    timer: str | None = None
    noise_target_met: bool | None = None


class Precompiled(Message):
    """A compile pre-pass process's answer (:func:`robocache.bench.runner.precompile_task`)."""

    status: str
    reason: str | None = None
    compile_s: float = 0.0
    fxgraph_cache_hit: int = 0
    fxgraph_cache_miss: int = 0


class Baseline(Message):
    """The one-rank case of a multi-GPU case: its figures are every efficiency's reference."""

    step_us: float
    items: int
    host_bound: bool = False

    @classmethod
    def of(cls, rec: Record) -> Baseline | None:
        """From a one-rank multi-GPU record (None unless it is ``ok`` and carries ``distributed``)."""
        if rec.status != "ok" or rec.distributed is None:
            return None
        return cls(step_us=rec.distributed.step_us, items=rec.case.items,
                   host_bound=any("host-bound" in x for x in rec.health.reasons))


class CaseDone(Message):
    """Written by the records writer after each case: the record and the slowest rank's step samples."""

    key: str
    record: Record
    samples_us: list[float] = []


class Progress(Message):
    """The launcher's view of a rank's progress (local rank 0 of each node)."""

    index: int
    key: str
    state: Literal["start", "done"]
    time: float


class RankPid(Message):
    pid: int
    rank: int


class RankFailure(Message):
    """A rank whose collective failed (after a peer died) says so before it exits."""

    rank: int
    error: str


# --- encoding -----------------------------------------------------------------------------------------

_MSGPACK = msgspec.msgpack.Encoder()
_JSON = msgspec.json.Encoder()


def pack(msg: Any) -> bytes:
    """MessagePack bytes of a message (to and from a case process)."""
    return _MSGPACK.encode(msg)


def unpack(data: bytes, kind: type[T]) -> T:
    """Decode and validate MessagePack bytes as ``kind``; ``msgspec.ValidationError`` / ``DecodeError``."""
    return msgspec.msgpack.decode(data, type=kind)


def write_json(path: str | Path, msg: Any) -> None:
    """Write a message as a JSON file atomically (:func:`robocache.bench.store.atomic_write`)."""
    from .store import atomic_write

    atomic_write(path, _JSON.encode(msg))


def read_json(path: str | Path, kind: type[T]) -> T | None:
    """A JSON message file decoded as ``kind``; None when it is missing or not (yet) a valid ``kind``."""
    try:
        return msgspec.json.decode(Path(path).read_bytes(), type=kind)
    except (OSError, msgspec.DecodeError, msgspec.ValidationError):
        return None
