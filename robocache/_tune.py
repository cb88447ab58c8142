"""Launch configurations of the row kernels (resample and fuse, kernels/rows_v2.cuh) and their choice.

A :class:`Config` is how one call is launched: a *build* (targets in flight per group, ``-DRC_V2_UNROLL``
with the register cap it needs; the feature loop's unroll, ``-DRC_V2_VUNROLL``) and a *shape* (lanes per
output row, rows per group, threads per block). Which one is fastest depends on the shape of the call
(feature width, rows, source length, target density) and on the GPU, so it is chosen per *bucket* of
shapes (:func:`bucket`), in this order:

1. the user's tuning cache for this GPU (``$ROBOCACHE_CACHE_DIR`` or ``~/.cache/robocache``), filled on the
   first call of a bucket by timing every candidate with device events on the call's own inputs (as
   Triton's ``autotune`` does), unless tuning is off (``ROBOCACHE_AUTOTUNE=0``) or the stream is being
   captured into a CUDA graph;
2. the table shipped for this GPU (``robocache/tuned/<gpu>.json``), written by ``robocache-bench tune`` from
   a run on that GPU, never by hand: its exact bucket, else its nearest bucket of the same dtypes;
3. the default rule (``Config()``: the v2 launch heuristics of :mod:`robocache._launch`).

Nothing here runs at import time.
"""
from __future__ import annotations

import contextlib
import datetime
import hashlib
import json
import logging
import math
import os
import statistics
import sys
import tempfile
import threading
import time
import warnings
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any

log = logging.getLogger("robocache")

FORMAT = "robocache-tune/1"
UNROLLS = (1, 2, 4)
MINB = {1: 0, 2: 4, 4: 2}  # register cap of a build holding U targets' vectors: 64 and 128 registers at 256 threads
VUNROLLS = (0, 2, 4)
TPGS = (0, 1, 2, 4, 8, 16)  # 16: only the walk's candidates (longer runs of one row's targets per search)
BLOCKS = (0, 64, 128, 256)
LG_SHIFTS = (0, 1, 2, 3, 4, 5)
SEQS = (0, 1)
# The warp-shared L1 prefetch of a row's source times (kernels/rows_v2.cuh RC_V2_PREFETCH_BYTES): the byte cap of
# the rows it applies to, 0 for none. 4096: one 128-byte line per lane of the warp.
PREFETCHES = (0, 4096)
PREFETCH_CAP = 4096
# The column split (kernels/rows_wide.cu): log2 of the warps that share one output row, 0 for the row kernel.
CSS = (0, 1, 2, 3)
# It is a candidate where the row kernel gives each row a warp (32 lanes), each lane would loop over at least two
# vectors of its row, and the launch has few rows: at most this many warps of the row kernel (a few per SM), where
# nothing else hides the feature loop's latency.
WIDE_MAX_ROWS = 16384
# Shifted vectors (kernels/rows_wide.cu rc_shift_row): rows of any alignment moved in aligned 16-byte vectors, 0 for
# the row kernel. A candidate where the row kernel's vectors are narrower than 16 bytes (a row stride, column or
# pointer off the 16-byte grid: an odd D) and a row holds at least SHIFT_MIN_BYTES.
SHIFTS = (0, 1)
SHIFT_MIN_BYTES = 32
# The staged kernel (kernels/rows_wide.cu rc_staged_block): a block of STAGE_TARGETS threads brackets that many
# targets at once, then copies their rows by the shifted vectors. A candidate where rows are narrow (at most
# STAGE_MAX_BYTES, where a target's search is most of its time) and the launch has a block's worth of targets.
STAGES = (0, 1, 2, 3, 4, 5)
STAGE_TARGETS = 256  # RC_STAGE_T
STAGE_MAX_BYTES = 2048
# stage = 2, the span (kernels/rows_wide.cu rc_span_block): the staged kernel's brackets, then the block's source
# rows loaded once into shared memory (at most SPAN_BYTES, RC_SPAN_BYTES: a longer run copies as stage 1 does). A
# candidate where a block's targets are expected to need a run of rows that fits: dense targets (T near or above
# S) of narrow rows, where neighbouring targets share source rows that the other kernels load again and again.
SPAN_BYTES = 24576
# stage = 4, the element kernel (kernels/rows_spec.cu, resample only): one output element a thread, as Inductor maps
# it (the search repeats per element, so it pays for rows of an element or two). A candidate for rows of at most
# SPEC_MAX_BYTES. H200, scripts/tune_probe.py (2026-11-29), element kernel against the row kernel's best: B51510 S12
# T42 D1 float32 16.5 us against 22.2; B56201 S6 T9 D1 float16 5.3 against 7.6; B70 S3 T3 D1 2.2 against 2.6; but
# B64840 S4 T7 D2 bfloat16 7.7 against 7.3, B4096 S2000 T1000 D1 81.8 against 54.7, and every 8-byte or wider row
# lost (8 bytes 4.4 against 3.7; 16 bytes 23.4 against 8.4): the tuner times it, it does not replace the rule.
# Its sizes compiled in (SPEC_CONSTANTS, a module per shape) were faster again (12.2, 4.5, 6.0 us on the first,
# second and fourth shapes; B45785 S36 T29 D2 17.3 against 24.4 with the sizes as arguments), but a compile per new
# shape is not a price a call with varying sizes should pay: an A/B, not the library's default.
SPEC_MAX_BYTES = 4
# stage = 5, the flat kernel (kernels/rows_wide.cu rc_flat_block): a block's consecutive targets (FLAT_TARGETS at
# most, fewer where the launch would give the SMs few blocks: :func:`flat_lg`) of every stream bracketed at once, then
# the block's whole output (contiguous across fuse's streams) written one element a thread, as Inductor writes the
# concatenated row. A candidate for fuse where the launch has FLAT_TARGETS targets and a block's output elements stay
# below 2**31 (:func:`flat_pays`); for resample also only where the row kernel's vectors are narrower than 16 bytes
# (:func:`resample_flat_pays`). H200, scripts/wide_probe.py (2026-11-29, docs/kernels.md): fuse outputs of several
# narrow or odd-width streams 1.03-1.83x faster than every launch before (s7741-47 142.4 us against the span's 247.7;
# s6427-44 104.7 against 191.4), resample's narrow odd rows 1.16-1.19x (s5821-43 85.1 against the span's 98.8); where
# one stream is wide (s4409-41, 636 features: 158.5 with launch-sized blocks against the shifted vectors' 123.5) or
# alone, slower: the tuner times it.
FLAT_TARGETS = 128  # 2 ** RC_FLAT_LG: the most targets a block
FLAT_THREADS = 256  # RC_FLAT_THREADS
FLAT_MIN_TARGETS = 16  # the fewest targets a block (flat_lg)
FLAT_BLOCKS_PER_SM = 8  # blocks a launch should give each SM before a block takes fewer targets (2048 threads)
# stage = 3, the tile (kernels/rows_wide.cu rc_tile_warp): a warp's 32 consecutive targets bracketed by its lanes at
# once, then each target's row copied by the whole warp with a batch of vectors loaded before any store (the row
# kernel's vector widths). A candidate where the rule gives a row a whole warp (rows of 17 vectors or more: the
# search's chain of loads before each row is the time it takes off, docs/kernels.md) and the launch fills a block.


@dataclass(frozen=True)
class Config:
    """One launch configuration of a row kernel (0 in a field: the default rule's choice)."""

    unroll: int = 1  # targets in flight per group of lanes (a build option)
    vunroll: int = 0  # the feature loop's unroll (a build option; 0: the compiler's)
    lg_shift: int = 0  # lanes per output row halved this many times from the rule's (at least one lane)
    tpg: int = 0  # output rows per group per block (0: the wave rule)
    block: int = 0  # threads per block (0: the rule)
    # A build option: each group walks a contiguous run of tpg targets, bracketing each from the previous one's
    # bracket in the same row (-DRC_V2_SEQ=1, kernels/rows_v2.cuh). Its loop has one target in flight and no
    # prefetch, so it goes with unroll 1, vunroll 0 and prefetch 0 only.
    seq: int = 0
    prefetch: int = 0  # a build option: rows of source times up to this many bytes are prefetched into L1 (0: none)
    # Another kernel (kernels/rows_wide.cu, a launch option, no build): 2**cs warps share an output row, each lane
    # loading its first vectors before it stores any. The row kernel's launch fields do not apply to it.
    cs: int = 0
    # Another kernel (kernels/rows_wide.cu, a launch option, no build): a group of lanes a row moves it in aligned
    # 16-byte vectors shifted into place, whatever the row's alignment. The row kernel's fields do not apply.
    shift: int = 0
    # Another kernel (kernels/rows_wide.cu, a launch option, no build; its block is STAGE_TARGETS threads): a block's
    # targets bracketed at once, then its rows copied by the shifted vectors (1), or the block's source rows loaded
    # once into shared memory and mixed from there (2, the span); 3 the tile, 4 the element kernel (resample), 5 the
    # flat kernel (fuse). The other kernels' fields do not apply.
    stage: int = 0

    def __post_init__(self) -> None:
        for name, allowed in (("unroll", UNROLLS), ("vunroll", VUNROLLS), ("lg_shift", LG_SHIFTS), ("tpg", TPGS),
                              ("block", BLOCKS), ("seq", SEQS), ("prefetch", PREFETCHES), ("cs", CSS),
                              ("shift", SHIFTS), ("stage", STAGES)):
            val = getattr(self, name)
            if type(val) is not int or val not in allowed:
                raise ValueError(f"Config.{name} must be one of {allowed}, got {val!r}")
        if self.seq and (self.unroll != 1 or self.vunroll or self.prefetch):
            raise ValueError("Config.seq = 1 takes unroll 1, vunroll 0 and prefetch 0 (the walk's loop has none)")
        if self.cs and (self.unroll != 1 or self.vunroll or self.lg_shift or self.tpg or self.seq or self.prefetch):
            raise ValueError("Config.cs > 0 is the column-split kernel: the row kernel's unroll, vunroll, lg_shift, "
                             "tpg, seq and prefetch stay at their defaults (block may be set)")
        if self.shift and (self.unroll != 1 or self.vunroll or self.lg_shift or self.tpg or self.seq
                           or self.prefetch or self.cs):
            raise ValueError("Config.shift = 1 is the shifted-vector kernel: the row kernel's fields and cs stay at "
                             "their defaults (block may be set)")
        if self.stage and any(getattr(self, f.name) != f.default for f in fields(self) if f.name != "stage"):
            raise ValueError(f"Config.stage = {self.stage} is the staged kernel: every other field stays at its "
                             f"default (its block is {STAGE_TARGETS} threads)")

    def options(self) -> tuple[str, ...]:
        """The NVRTC options of this configuration's build (empty for the default build)."""
        opts: list[str] = []
        if self.unroll > 1:
            opts += [f"-DRC_V2_UNROLL={self.unroll}", f"-DRC_V2_MINB={MINB[self.unroll]}"]
        if self.vunroll:
            opts.append(f"-DRC_V2_VUNROLL={self.vunroll}")
        if self.seq:
            opts.append("-DRC_V2_SEQ=1")
        if self.prefetch:
            opts.append(f"-DRC_V2_PREFETCH_BYTES={self.prefetch}")
        return tuple(opts)

    def to_json(self) -> dict[str, int]:
        """The JSON object of this configuration; the options added later (seq, prefetch, cs, shift, stage) only
        when set, so a table without them reads as it was written."""
        d = asdict(self)
        for name in ("seq", "prefetch", "cs", "shift", "stage"):
            if not d[name]:
                del d[name]
        return d

    @classmethod
    def from_json(cls, d: Any) -> Config:
        """A Config from its JSON object (a field left out: its default, so tables and caches written before
        seq, prefetch, cs, shift and stage existed load as 0); ``ValueError`` on anything else."""
        if not isinstance(d, dict) or set(d) - set(cls.__dataclass_fields__):
            raise ValueError(f"not a launch configuration: {d!r}")
        return cls(**d)


DEFAULT = Config()


# The configurations timed on a bucket's first call, (unroll, vunroll, lg_shift, tpg), default first. Chosen from
# an exhaustive probe of 72 configurations on 33 random resample and fuse shapes on an H100 (scripts/tune_probe.py,
# docs/kernels.md "v3"): the greedy cover of the per-shape fastest; with these 12 every probed shape ran within
# 1% of its fastest of the 72 (the default rule alone: up to 2.7x slower).
CANDIDATES = ((1, 0, 0, 0), (1, 4, 2, 1), (1, 0, 1, 1), (2, 4, 0, 0), (1, 0, 0, 1), (1, 4, 0, 4), (2, 4, 0, 4),
              (1, 0, 1, 0), (4, 0, 0, 4), (1, 4, 0, 1), (1, 0, 2, 1), (1, 0, 1, 4))
# The walk's candidates (seq = 1), rows per group: where one lane owns an output row and targets are denser than
# sources (D = 1 upsampling). 0: the wave rule (up to 8 on large launches: the measured best of the 276 MB point,
# docs/kernels.md "RC_V2_SEQ"), 4 (the small point's best), 16 (longer runs, one search per 16 targets). tpg 1
# would be the default mapping (no run to walk), 2 a walk of one step per search.
SEQ_TPGS = (0, 4, 16)
# The prefetch's candidates, (lg_shift, tpg) of the default build with the prefetch: the default launch (the rule
# the +4.6% alert of B4096 S100 T50 D32 measured against) and the shipped tables' most chosen other launch.
PREFETCH_LAUNCHES = ((0, 0), (2, 1))


def candidates(lg_nat: int, loop_iters: int, n_targets: int, *, n_tgt: int = 0, n_src: int = 0,
               time_bytes: int = 0, shifted: bool = False, staged: bool = False,
               spanned: bool = False, tiled: bool = False, spec: bool = False, flat: bool = False) -> list[Config]:
    """The configurations worth timing for one geometry (default first), without duplicates in effect.

    ``lg_nat``: the rule's log2 lanes per row; ``loop_iters``: the feature loop's trip count at that width
    (vectors per row over lanes); ``n_targets``: output rows in the launch. A lane shift past one lane, or a
    feature-loop unroll where the loop runs fewer than two times, changes nothing and is dropped.
    ``n_tgt``, ``n_src``: targets and source samples per row (the longest source row of a fuse), ``time_bytes``:
    bytes per time. With them, two build options join where they can pay: the walk (``seq``, :data:`SEQ_TPGS`)
    for one-lane rows with more targets than sources, the prefetch (:data:`PREFETCH_LAUNCHES`) for rows whose
    times fit :data:`PREFETCH_CAP`. Without them (0): the 12 launches of :data:`CANDIDATES`, and the column split
    (:func:`wide_splits`) where a launch has few rows of many vectors. ``shifted``: the shifted-vector kernel joins
    (:func:`shift_pays` of a row of the launch). ``staged``: the staged kernel joins (:func:`stage_pays`);
    ``spanned``: its span too (:func:`span_pays`); ``tiled``: the tile kernel (:func:`tile_pays`); ``spec``: the
    element kernel (:func:`spec_pays`, resample); ``flat``: the flat kernel (:func:`flat_pays`, fuse).
    """
    out: list[Config] = []
    seen: set[Config] = set()

    def add(c: Config) -> None:
        if c not in seen:
            seen.add(c)
            out.append(c)

    for unroll, vunroll, shift, tpg in CANDIDATES:
        shift = min(shift, lg_nat)
        vunroll = vunroll if (loop_iters << shift) >= 2 else 0
        add(Config(unroll=unroll, vunroll=vunroll, lg_shift=shift, tpg=tpg))
    if walk_pays(lg_nat, n_tgt, n_src):
        for tpg in SEQ_TPGS:
            add(Config(seq=1, tpg=tpg))
    if prefetch_fits(n_src, time_bytes):
        for shift, tpg in PREFETCH_LAUNCHES:
            add(Config(lg_shift=min(shift, lg_nat), tpg=tpg, prefetch=PREFETCH_CAP))
    for cs in wide_splits(lg_nat, loop_iters, n_targets):
        add(Config(cs=cs))
    if shifted:
        add(Config(shift=1))
    if staged:
        add(Config(stage=1))
        if spanned:
            add(Config(stage=2))
    if tiled:
        add(Config(stage=3))
    if spec:
        add(Config(stage=4))
    if flat:
        add(Config(stage=5))
    return out


def flat_pays(n_targets: int, total_features: int, n_streams: int) -> bool:
    """Whether the flat kernel (``stage`` = 5, fuse) is worth timing and can run: at least a block of targets
    (:data:`FLAT_TARGETS`), at most the stream table's streams, and a block's output elements below 2**31."""
    return n_targets >= FLAT_TARGETS and 0 < n_streams <= 16 and 0 < total_features * FLAT_TARGETS < 2**31


def resample_flat_pays(vb: int, n_targets: int, d: int) -> bool:
    """Whether resample offers the flat kernel (one stream): :func:`flat_pays` where the row kernel's vectors are
    narrower than 16 bytes (rows of 16-byte vectors are the row kernel's). The candidate list and the plan both ask
    this, so a bucket's stage 5 borrowed by a shape of 16-byte rows runs the default launch."""
    return vb < 16 and flat_pays(n_targets, d, 1)


def flat_lg(n_targets: int, sms: int) -> int:
    """log2 of the targets a block of the flat kernel takes: :data:`FLAT_TARGETS`, halved (down to
    :data:`FLAT_MIN_TARGETS`) while the launch would give the SMs fewer than :data:`FLAT_BLOCKS_PER_SM` blocks each
    (fuse s4409-41, 35872 targets of 819 features: 281 blocks of 128, two an SM of the H200's 132, where 32 a block
    gives 1121)."""
    lg = FLAT_TARGETS.bit_length() - 1
    while (1 << lg) > FLAT_MIN_TARGETS and -(-n_targets >> lg) < FLAT_BLOCKS_PER_SM * sms:
        lg -= 1
    return lg


def flat_smem(n_streams: int, lg: int = FLAT_TARGETS.bit_length() - 1) -> int:
    """Dynamic shared memory of a flat launch of 2**lg targets a block (kernels/rows_wide.cu rc_flat_block): the
    stream table's values pointers (16 of 8 bytes) and first columns (16 of 4), and per (stream, target) two row
    offsets and a weight."""
    return 16 * 12 + (n_streams << lg) * 20


def spec_pays(row_bytes: int) -> bool:
    """Whether the element kernel (``stage`` = 4) is worth timing: rows of at most :data:`SPEC_MAX_BYTES` bytes."""
    return 0 < row_bytes <= SPEC_MAX_BYTES


# The sizes compiled in (a module per shape: a compile per new shape; scripts/tune_probe.py's A/B), not the default.
SPEC_CONSTANTS = False


def side_modules(op: str) -> list[tuple[str, tuple[str, ...]]]:
    """The (source, NVRTC options) modules beside ``op``'s own builds that its tuned candidates may launch: the
    column split's, shifted and staged kernels (kernels/rows_wide.cu), and for resample the element kernel's one
    module (kernels/rows_spec.cu; none with :data:`SPEC_CONSTANTS`, a module per shape). A warm-up builds them."""
    out: list[tuple[str, tuple[str, ...]]] = [("rows_wide", ())]
    if op == "resample" and not SPEC_CONSTANTS:
        out.append(("rows_spec", ()))
    return out


def spec_i32(n_src: int, n_tgt: int, d: int, b: int) -> bool:
    """Whether the element kernel's 32-bit entry holds one resample shape: every offset of the values, the times and
    the output below 2**31 (a block's worth of margin)."""
    return max(b * n_src * d, b * n_tgt * d, b * n_src, b * n_tgt) < 2**31 - 256


def spec_options(n_src: int, n_tgt: int, d: int, b: int) -> tuple[str, ...]:
    """The NVRTC options of kernels/rows_spec.cu for one resample shape: none (sizes are arguments) unless
    :data:`SPEC_CONSTANTS`, then its sizes."""
    if not SPEC_CONSTANTS:
        return ()
    return (f"-DRC_SPEC_S={n_src}", f"-DRC_SPEC_T={n_tgt}", f"-DRC_SPEC_D={d}", f"-DRC_SPEC_N={b * n_tgt * d}LL")


def tile_pays(lg_nat: int, n_targets: int) -> bool:
    """Whether the tile kernel (``stage`` = 3) is worth timing: the rule gives a row a whole warp (``lg_nat`` 5, the
    widest stream's for fuse) and the launch has a block's worth of targets (:data:`STAGE_TARGETS`)."""
    return lg_nat >= 5 and n_targets >= STAGE_TARGETS


def span_pays(row_bytes: int, n_src: int, n_tgt: int) -> bool:
    """Whether the span (``stage`` = 2) is worth timing for a stream of ``n_src`` source and ``n_tgt`` target
    samples a row, ``row_bytes`` a source row: the run of source rows a block's :data:`STAGE_TARGETS` targets are
    expected to need (targets spread evenly over the sources; a block of more targets than a row has spans several
    rows) fits :data:`SPAN_BYTES`. A block whose run turns out longer still runs correctly (as the staged kernel)."""
    if row_bytes <= 0 or n_src <= 0 or n_tgt <= 0:
        return False
    rows = -(-STAGE_TARGETS * n_src // n_tgt) + 2
    return rows * row_bytes + 16 <= SPAN_BYTES


def stage_pays(row_bytes: int, n_targets: int) -> bool:
    """Whether the staged kernel (``stage``) is worth timing: rows of at most :data:`STAGE_MAX_BYTES` (the widest
    stream's), and a launch of at least a block of targets (:data:`STAGE_TARGETS`)."""
    return 0 < row_bytes <= STAGE_MAX_BYTES and n_targets >= STAGE_TARGETS


def shift_pays(vb: int, row_bytes: int) -> bool:
    """Whether the shifted-vector kernel (``shift``) is worth timing for a row of ``row_bytes`` that the row kernel
    moves in ``vb``-byte vectors: narrower than 16 bytes, at least :data:`SHIFT_MIN_BYTES` of them."""
    return vb < 16 and row_bytes >= SHIFT_MIN_BYTES


def shift_lanes(row_bytes: int) -> int:
    """log2 of the lanes of a shifted-vector row (kernels/rows_wide.cu rc_shift_row): enough for the aligned
    16-byte vectors a row of ``row_bytes`` may touch (ceil((row_bytes + 15) / 16)), a warp at most."""
    return min(5, (((max(1, row_bytes) + 30) >> 4) - 1).bit_length())


def wide_splits(lg_nat: int, loop_iters: int, n_targets: int | None) -> list[int]:
    """The column splits worth timing (kernels/rows_wide.cu): where the row kernel gives a row a whole warp, each
    lane loops over at least two vectors and the launch has at most :data:`WIDE_MAX_ROWS` rows (``n_targets``
    None: any number, the probe's space); each split that still leaves a lane two vectors before the split's last
    halving (``loop_iters >> (cs - 1) >= 2``)."""
    if lg_nat < 5 or loop_iters < 2 or (n_targets is not None and not 0 < n_targets <= WIDE_MAX_ROWS):
        return []
    return [cs for cs in CSS[1:] if loop_iters >> (cs - 1) >= 2]


def wide_split(cs: int, nvec: int) -> int:
    """The split a row of ``nvec`` vectors takes of a configuration's ``cs`` (the plans of resample and fuse): at
    most ceil(log2(runs)) for the row's runs of 32 vectors, so 0 for a row of 32 vectors or fewer (then the row
    kernel, never 2**cs warps for a one-lane row). The tuner offers ``cs`` only where this keeps it whole; a choice
    made for another bucket (the nearest shipped one, a provisional one) may not fit this one."""
    return min(cs, (-(-max(1, nvec) // 32) - 1).bit_length())


def walk_pays(lg_nat: int, n_tgt: int, n_src: int) -> bool:
    """Whether the walk (``seq``) is a candidate: one lane per output row, more targets than sources per row."""
    return lg_nat == 0 and n_src > 0 and n_tgt > n_src


def prefetch_fits(n_src: int, time_bytes: int) -> bool:
    """Whether the prefetch is a candidate: every row's source times fit its byte cap."""
    return n_src > 0 and time_bytes > 0 and n_src * time_bytes <= PREFETCH_CAP


def builds() -> list[tuple[str, ...]]:
    """The NVRTC options of every build :func:`candidates` may ask for (the default build first): what a
    pre-pass warming the tuner's modules should build."""
    every = [c.options() for lg_nat in range(6) for iters in (1, 8)
             for c in candidates(lg_nat, iters, 1, n_tgt=2, n_src=1, time_bytes=4)]
    return list(dict.fromkeys(every))


def exhaustive(lg_nat: int, loop_iters: int, *, n_tgt: int = 0, n_src: int = 0,
               time_bytes: int = 0, shifted: bool = False, staged: bool = False,
               spanned: bool = False, tiled: bool = False, spec: bool = False, flat: bool = False) -> list[Config]:
    """Every configuration of the probe's space for one geometry (scripts/tune_probe.py; not for first calls):
    with ``n_tgt``/``n_src``/``time_bytes`` given, the walk's and the prefetch's too where :func:`candidates`
    would offer them (the walk over every tpg but 1, the prefetch over the probe's launches)."""
    out = [DEFAULT]
    shifts = sorted({s for s in (0, 1, 2, lg_nat) if s <= lg_nat})
    for unroll in UNROLLS:
        for shift in shifts:
            for vunroll in ((0, 4) if (loop_iters << shift) >= 4 else (0,)):
                for tpg in (0, 1, 4):
                    c = Config(unroll=unroll, vunroll=vunroll, lg_shift=shift, tpg=tpg)
                    if c not in out:
                        out.append(c)
    if walk_pays(lg_nat, n_tgt, n_src):
        out += [Config(seq=1, tpg=tpg) for tpg in TPGS if tpg != 1]
    if prefetch_fits(n_src, time_bytes):
        out += [Config(lg_shift=shift, tpg=tpg, prefetch=PREFETCH_CAP) for shift in shifts for tpg in (0, 1, 4)]
    out += [Config(cs=cs) for cs in wide_splits(lg_nat, loop_iters, None)]
    if shifted:
        out.append(Config(shift=1))
    if staged:
        out.append(Config(stage=1))
        if spanned:
            out.append(Config(stage=2))
    if tiled:
        out.append(Config(stage=3))
    if spec:
        out.append(Config(stage=4))
    if flat:
        out.append(Config(stage=5))
    return out


# --- buckets ---------------------------------------------------------------------------------------

def _log2(x: float) -> int:
    return int(math.floor(math.log2(max(1.0, float(x)))))


def bucket(op: str, value_dtype: str, time_dtype: str, streams: Iterable[tuple[int, int, int]], n_tgt: int,
           batch: int) -> str:
    """The bucket of a call: dtypes, and per stream (sorted) its row width class (vector bytes and vectors
    per row, rounded up to a power of two), its source length (log2) and its target density (log2 of T/S,
    clamped to +-5); the launch's output rows (log2)."""
    parts = []
    for vb, nvec, n_src in sorted(streams):
        dens = max(-5, min(5, round(math.log2(max(n_tgt, 1) / max(n_src, 1)))))
        parts.append(f"v{vb}x{1 << max(0, (nvec - 1).bit_length())}s{_log2(n_src)}d{dens}")
    return f"{op}|{value_dtype}|{time_dtype}|n{_log2(batch * n_tgt)}|{'+'.join(parts)}"


def _features(key: str) -> tuple[str, list[float]] | None:
    """(the bucket's class: op, dtypes and stream count; its numeric features) for the nearest-bucket rule."""
    try:
        op, vdt, tdt, n, streams = key.split("|")
        feats = [float(n[1:])]
        ss = streams.split("+")
        for s in ss:
            vb, rest = s[1:].split("x")
            nv, rest = rest.split("s")
            sl, dens = rest.split("d")
            feats += [math.log2(int(vb)), math.log2(int(nv)), float(sl), float(dens)]
        return f"{op}|{vdt}|{tdt}|{len(ss)}", feats
    except (ValueError, IndexError):
        return None


# --- where choices are kept ------------------------------------------------------------------------

def cache_dir() -> Path:
    """The user's cache folder for robocache (``ROBOCACHE_CACHE_DIR``, else XDG's, else ``~/.cache``)."""
    env = os.environ.get("ROBOCACHE_CACHE_DIR")
    if env:
        return Path(env)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "robocache"


def autotune_enabled() -> bool:
    """First-call tuning is on unless ``ROBOCACHE_AUTOTUNE`` is 0/false/off/no."""
    return os.environ.get("ROBOCACHE_AUTOTUNE", "1").strip().lower() not in ("0", "false", "off", "no")


def device_slug(name: str) -> str:
    """A file-name-safe name of a GPU model ("NVIDIA H100 80GB HBM3" -> "nvidia-h100-80gb-hbm3")."""
    out = "".join(c if c.isalnum() else "-" for c in name.lower())
    while "--" in out:
        out = out.replace("--", "-")
    return out.strip("-") or "gpu"


@dataclass(frozen=True)
class Device:
    name: str
    cc: str
    sms: int

    @property
    def slug(self) -> str:
        return device_slug(self.name)


_DEVICES: dict[int, Device] = {}


def device(device_index: int) -> Device:
    """The GPU model of one device (name, compute capability, SM count), memoized."""
    d = _DEVICES.get(device_index)
    if d is None:
        import cupy

        p = cupy.cuda.runtime.getDeviceProperties(device_index)
        name = p["name"].decode() if isinstance(p["name"], bytes) else str(p["name"])
        d = Device(name, f"{p['major']}.{p['minor']}", int(p["multiProcessorCount"]))
        _DEVICES[device_index] = d
    return d


def kernels_hash(ops: tuple[str, ...] = ("resample", "fuse")) -> str:
    """A hash of the row kernels' sources: a tuning made for other kernels is not reused. The shipped tables are
    keyed to the row kernels' files (resample.cu, fuse.cu and their headers), so an edit of the tuner's added
    launches (kernels/rows_wide.cu) leaves them valid; the user's cache (:func:`cache_hash`) covers both."""
    from . import _cuda

    h = hashlib.sha256()
    for op in ops:
        h.update(_cuda.source(op).encode())
    return h.hexdigest()[:16]


def cache_hash() -> str:
    """The kernels hash of the user's tuning cache: the row kernels and kernels/rows_wide.cu, so an edit of either
    re-tunes a bucket at its next first call (a cache is cheap to rebuild; a shipped table is not)."""
    return kernels_hash(("resample", "fuse", "rows_wide", "rows_spec"))


USE_SHIPPED = True  # False while `robocache-bench tune` writes a new table: every bucket is then tuned afresh


def shipped_dir() -> Path:
    return Path(__file__).resolve().parent / "tuned"


class TableError(ValueError):
    """A tuning file that is not one (reported, never used)."""


def parse_table(text: str, where: str) -> dict[str, Any]:
    """A tuning file's document, validated: format, device, kernels hash, and every entry's configuration."""
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as e:
        raise TableError(f"{where}: not JSON ({e})") from None
    if not isinstance(doc, dict) or doc.get("format") != FORMAT:
        raise TableError(f"{where}: not a {FORMAT} document")
    dev = doc.get("device")
    if not isinstance(dev, dict) or not isinstance(dev.get("name"), str):
        raise TableError(f"{where}: no device")
    entries = doc.get("entries")
    if not isinstance(entries, dict):
        raise TableError(f"{where}: no entries")
    for k, e in entries.items():
        if not isinstance(e, dict) or _features(k) is None:
            raise TableError(f"{where}: bad entry {k!r}")
        try:
            Config.from_json(e.get("config"))
        except (TypeError, ValueError) as err:
            raise TableError(f"{where}: entry {k!r}: {err}") from None
        for f in ("us", "default_us"):
            if f in e and not (isinstance(e[f], (int, float)) and math.isfinite(e[f]) and e[f] >= 0):
                raise TableError(f"{where}: entry {k!r}: {f} must be a finite time")
    return doc


class _Store:
    """Choices in memory, backed by the user's cache file and the shipped table of one GPU model."""

    def __init__(self, dev: Device):
        self.dev = dev
        self.mem: dict[str, Config] = {}
        self.user: dict[str, dict[str, Any]] | None = None
        self.shipped: dict[str, dict[str, Any]] | None = None
        self.warned: set[str] = set()

    @property
    def path(self) -> Path:
        return cache_dir() / f"tune-{self.dev.slug}.json"

    def _warn(self, msg: str) -> None:
        if msg not in self.warned:
            self.warned.add(msg)
            warnings.warn(msg, RuntimeWarning, stacklevel=4)

    def _read(self, path: Path, what: str, want: str) -> dict[str, dict[str, Any]]:
        """The entries of one tuning file for this GPU whose kernels hash is ``want`` ({} otherwise)."""
        try:
            text = path.read_text()
        except FileNotFoundError:
            return {}
        except OSError as e:
            self._warn(f"robocache: cannot read the {what} {path} ({e}); tuning without it")
            return {}
        try:
            doc = parse_table(text, str(path))
        except TableError as e:
            self._warn(f"robocache: ignoring the {what}: {e}; delete it or let robocache rewrite it")
            return {}
        if doc["device"].get("name") != self.dev.name or doc.get("kernels") != want:
            return {}  # another GPU model's or other kernels' choices: stale, not wrong
        return doc["entries"]

    def user_entries(self) -> dict[str, dict[str, Any]]:
        if self.user is None:
            self.user = self._read(self.path, "tuning cache", cache_hash())
        return self.user

    def shipped_entries(self) -> dict[str, dict[str, Any]]:
        if not USE_SHIPPED:
            return {}
        if self.shipped is None:
            self.shipped = self._read(shipped_dir() / f"{self.dev.slug}.json", "shipped tuning table", kernels_hash())
        return self.shipped

    def lookup(self, key: str, use_user: bool) -> tuple[Config | None, str]:
        if key in self.mem:
            return self.mem[key], "memory"
        if use_user:
            e = self.user_entries().get(key)
            if e is not None:
                return Config.from_json(e["config"]), "cache"
        e = self.shipped_entries().get(key)
        if e is not None:
            return Config.from_json(e["config"]), "shipped"
        return None, ""

    def nearest(self, key: str) -> Config | None:
        """The shipped choice for the nearest bucket of the same op, dtypes and stream count: from this GPU's
        table, or, for a GPU without one, from every shipped table (another GPU's measurements still beat a
        rule fitted to none)."""
        mine = _features(key)
        if mine is None:
            return None
        table = self.shipped_entries() or self.all_shipped()
        best, best_d = None, math.inf
        for k, e in table.items():
            other = _features(k)
            if other is None or other[0] != mine[0] or len(other[1]) != len(mine[1]):
                continue
            d = sum((a - b) ** 2 for a, b in zip(mine[1], other[1]))
            if d < best_d:
                best, best_d = Config.from_json(e["config"]), d
        return best

    def all_shipped(self) -> dict[str, dict[str, Any]]:
        """The entries of every shipped table (for this kernels' hash), merged; the first table's win."""
        merged: dict[str, dict[str, Any]] = {}
        if not USE_SHIPPED:
            return merged
        for path in sorted(shipped_dir().glob("*.json")):
            try:
                doc = parse_table(path.read_text(), str(path))
            except (OSError, TableError) as e:
                self._warn(f"robocache: ignoring the shipped tuning table {path}: {e}")
                continue
            if doc.get("kernels") == kernels_hash():
                for k, e in doc["entries"].items():
                    merged.setdefault(k, e)
        return merged

    def save(self, key: str, entry: dict[str, Any]) -> None:
        """Merge one entry into the user's cache file: under a lock, written atomically."""
        path = self.path
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            with _locked(path.with_suffix(".lock")):
                entries = dict(self._read(path, "tuning cache", cache_hash()))
                entries[key] = entry
                doc = {"format": FORMAT, "device": {"name": self.dev.name, "cc": self.dev.cc, "sms": self.dev.sms},
                       "kernels": cache_hash(), "entries": dict(sorted(entries.items()))}
                _atomic_write(path, json.dumps(doc, indent=1) + "\n")
                self.user = entries
        except (OSError, ImportError) as e:  # ImportError: no fcntl (not a POSIX system)
            self._warn(f"robocache: cannot write the tuning cache {path} ({e}); tuned choices stay in memory "
                       "(set ROBOCACHE_CACHE_DIR to a writable folder)")


@contextlib.contextmanager
def _locked(path: Path):
    import fcntl

    with open(path, "a") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def _atomic_write(path: Path, text: str) -> None:
    fd, tmp = tempfile.mkstemp(prefix=path.name + ".", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


_STORES: dict[Device, _Store] = {}
_LOCK = threading.RLock()
_KEY_LOCKS: dict[tuple[int, str], threading.Lock] = {}
STATS: dict[str, float] = {"buckets_tuned": 0, "candidates_timed": 0, "tune_s": 0.0, "build_s": 0.0, "runoff_s": 0.0}
# Where each bucket's configuration came from, in this process: (device index, bucket) -> (config, source), with
# source one of SOURCES. The harness writes these into a record (``Record.launches``), so a figure says which
# launch produced it: a tuned choice, the user's cache, the shipped table, a neighbour's, or the default rule.
SOURCES = ("tuned", "tuned, cut short", "cache", "shipped", "nearest shipped", "default", "default, tuning failed",
           "provisional")
CHOSEN: dict[tuple[int, str], tuple[Config, str]] = {}
USED: set[tuple[int, str]] = set()  # the buckets chosen for since the last forget_used()


def chosen() -> list[dict[str, Any]]:
    """The configurations used since the last :func:`forget_used` (the process's start), one per device and
    bucket (bucket order), each with its source."""
    return [{"device": dev, "bucket": key, "config": CHOSEN[(dev, key)][0].to_json(), "source": CHOSEN[(dev, key)][1]}
            for dev, key in sorted(USED) if (dev, key) in CHOSEN]


def forget_used() -> None:
    """Start a new list for :func:`chosen` (the harness, before each case it measures in one process)."""
    USED.clear()


def _store(device_index: int) -> _Store:
    dev = device(device_index)
    st = _STORES.get(dev)
    if st is None:
        st = _STORES[dev] = _Store(dev)
    return st


def reset() -> None:
    """Forget every choice held in memory and the ops' cached plans built from them (files stay)."""
    with _LOCK:
        _STORES.clear()
        _DEVICES.clear()
        CHOSEN.clear()
        USED.clear()
        for op in ("resample", "fuse"):
            mod = sys.modules.get(f"robocache.{op}")
            if mod is not None:
                mod._PLANS.clear()


# --- the choice ----------------------------------------------------------------------------------------

MARGIN = 0.03  # a candidate replaces the default rule only when at least this much faster (else noise decides)


def _key_lock(device_index: int, key: str) -> threading.Lock:
    with _LOCK:
        lk = _KEY_LOCKS.get((device_index, key))
        if lk is None:
            lk = _KEY_LOCKS[(device_index, key)] = threading.Lock()
        return lk


def choose(device_index: int, key: str, cands: list[Config], trial: Callable[[Config], Callable[[], Any]],
           stream: Any, may_tune: bool) -> tuple[Config, bool]:
    """(the configuration for bucket ``key`` on one device, whether it is final) in the module docstring's order.

    ``trial(cfg)`` builds the call of one candidate (its launch on the caller's inputs, writing a scratch
    output); it is timed on ``stream`` (a CuPy stream) with device events. ``may_tune`` is False where the
    caller cannot afford a synchronisation (a stream being captured): the user's cache and the shipped table
    are still read (reading a file is no stream work), but a fallback (the nearest shipped bucket, the default
    rule) is then only provisional: it is neither remembered nor final, so a later call may still tune. A
    caller caches a plan only for a final choice. One thread tunes a bucket at a time (a lock per bucket);
    tuning synchronises the caller's stream, so a thread must not tune while another captures a graph in
    global mode.
    """
    USED.add((device_index, key))
    with _key_lock(device_index, key):
        with _LOCK:
            st = _store(device_index)
        cfg, src = st.lookup(key, use_user=True)
        if cfg is not None:
            st.mem[key] = cfg
            if src != "memory" or (device_index, key) not in CHOSEN:  # a choice in memory keeps its first source
                CHOSEN[(device_index, key)] = (cfg, src if src != "memory" else "tuned")
            return cfg, True
        tuning = may_tune and autotune_enabled()
        if not tuning:
            near = st.nearest(key)
            cfg = near or DEFAULT
            if may_tune:  # tuning is off: this is the answer for the process
                st.mem[key] = cfg
            CHOSEN[(device_index, key)] = (cfg, ("nearest shipped" if near else "default") if may_tune
                                           else "provisional")
            return cfg, may_tune
        t0 = time.perf_counter()
        try:
            timed, cut = tune(cands, trial, stream, device_index=device_index)
        except Exception as e:  # noqa: BLE001 - tuning only picks among right answers: never fail the call for it
            log.warning("robocache: tuning %s failed (%s: %s); using the nearest shipped choice or the default",
                        key, type(e).__name__, e)
            cfg = st.nearest(key) or DEFAULT
            CHOSEN[(device_index, key)] = (cfg, "default, tuning failed")
            return cfg, False
        spent = time.perf_counter() - t0
        best = pick(timed)
        STATS["buckets_tuned"] += 1
        STATS["candidates_timed"] += len(timed)
        STATS["tune_s"] += spent
        log.info("robocache: tuned %s on %s in %.2f s (%d candidates): %s, %.1f us (default %.1f us)", key,
                 st.dev.name, spent, len(timed), best, timed[best], timed.get(DEFAULT, math.nan))
        st.mem[key] = best
        CHOSEN[(device_index, key)] = (best, "tuned, cut short" if cut else "tuned")
        if not cut:  # a tuning cut short by the budget stays in memory: a later process retries it
            st.save(key, entry(best, timed, len(cands)))
        return best, True


def pick(timed: dict[Config, float]) -> Config:
    """The choice among timed candidates: the fastest, unless it is within MARGIN of the default (then the
    default: not worth a choice that noise may have made)."""
    best = min(timed, key=lambda c: timed[c])
    if DEFAULT in timed and timed[best] > (1.0 - MARGIN) * timed[DEFAULT]:
        return DEFAULT
    return best


def entry(best: Config, timed: dict[Config, float], n_cands: int) -> dict[str, Any]:
    """A table entry: the choice, its time and the default's (us), how many candidates were timed, when."""
    return {"config": best.to_json(), "us": round(timed[best], 3),
            "default_us": round(timed.get(DEFAULT, timed[best]), 3), "candidates": len(timed), "of": n_cands,
            "tuned_at": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")}


def tune_budget_s() -> float:
    """Wall seconds one bucket's tuning may take (``ROBOCACHE_TUNE_BUDGET_S``, default 2)."""
    try:
        return max(0.0, float(os.environ.get("ROBOCACHE_TUNE_BUDGET_S", "2.0")))
    except ValueError:
        return 2.0


_SPIN_SRC = r"""
extern "C" __global__ void rc_spin(long long cycles) {
    const long long t0 = clock64();
    while (clock64() - t0 < cycles) { }
}
"""
_SPINNERS: dict[int, Any] = {}


def _spinner(device_index: int) -> tuple[Any, float]:
    """(a one-thread kernel that spins for a number of SM cycles, SM cycles per microsecond) of one device."""
    import cupy

    hit = _SPINNERS.get(device_index)
    if hit is None:
        with cupy.cuda.Device(device_index):
            kern = cupy.RawKernel(_SPIN_SRC, "rc_spin")
        khz = 0
        try:  # CUDA 13 dropped clockRate from the device properties; the attribute query stays
            khz = int(cupy.cuda.runtime.deviceGetAttribute(cupy.cuda.runtime.cudaDevAttrClockRate, device_index))
        except Exception:  # noqa: BLE001 - an old CuPy: the properties, else a Hopper-like 2 GHz
            khz = int(cupy.cuda.runtime.getDeviceProperties(device_index).get("clockRate", 0) or 0)
        # only the spin's length depends on it, and a sample whose spin ends early is taken again, longer
        hit = _SPINNERS[device_index] = (kern, khz / 1e3 if khz > 0 else 2000.0)
    return hit


def _device_us_per_call(fn: Callable[[], Any], reps: int, stream: Any, spin: tuple[Any, float],
                        host_us: float) -> float:
    """Device time per call of ``reps`` back-to-back calls of ``fn`` on ``stream``: the stream is blocked first by
    a spin kernel sized to outlast the host's enqueueing of the calls, so the events between them time the GPU,
    not Python's launch rate (a first version timed calls as fast as the host issued them: every small
    candidate measured the host's ~10 us a call, the choice among them was noise, and on an H100 it picked
    configurations 1.7-2.4x slower on the device for the classic case). If the spin ended before the last call
    was enqueued (an event after it has completed), the sample is taken again with a longer spin."""
    import cupy
    import numpy as np

    kern, per_us = spin
    covered, start, end = cupy.cuda.Event(), cupy.cuda.Event(), cupy.cuda.Event()
    cycles = int((reps * max(host_us, 5.0) * 2 + 50.0) * per_us)
    for _ in range(4):
        kern((1,), (1,), (np.int64(cycles),), stream=stream)
        covered.record(stream)
        start.record(stream)
        for _ in range(reps):
            fn()
        end.record(stream)
        ok = not covered.done
        end.synchronize()
        if ok:
            return cupy.cuda.get_elapsed_time(start, end) * 1e3 / reps
        cycles *= 4
    return math.inf  # never covered: a host-bound figure, not the device's (the caller drops the candidate)


RUNOFF_WITHIN = 0.08  # candidates within this much of the first pass's best (and the default) go to the run-off
RUNOFF_ROUNDS = 6  # rounds of the run-off: one sample of every finalist per round, the order rotated each round
RUNOFF_MIN_ROUNDS = 3  # rounds run whatever the budget: a finalist's time is never one sample


def runoff(first: dict[Config, float], sample: Callable[[Config], float], budget_s: float = math.inf,
           clock: Callable[[], float] = time.perf_counter) -> dict[Config, float]:
    """The first pass's times with its finalists timed again, interleaved: every candidate within RUNOFF_WITHIN of
    the best, and the default; RUNOFF_ROUNDS rounds of one ``sample(c)`` each (device us per call), the order
    rotated every round so that no finalist always runs first; a finalist's time is the median of its run-off
    samples alone (a first-pass time that made the best is biased low: it was selected). Every candidate within
    the window is a finalist, so none keeps a lucky first time beside the others' fresh ones (a cap on the
    finalists let an un-retimed one win on its first sample). Where a dozen candidates lie within a few percent
    of one another, the minimum of one pass is mostly the luckiest sample (the winner's curse): the H100 quick
    suite of 2026-11-28 kept a launch 6.5% slower than the one the run before had kept for the same bucket, and
    the H200 kept the default, 5% slower than the launch it had chosen before. Rounds past RUNOFF_MIN_ROUNDS stop
    once ``budget_s`` is spent. A sample that is not finite (not covered by the spin) is dropped; a finalist left
    with none keeps its first time.
    """
    if len(first) < 2:
        return dict(first)
    best = min(first.values())
    near = sorted((c for c in first if c != DEFAULT and first[c] <= best * (1.0 + RUNOFF_WITHIN)),
                  key=lambda c: first[c])
    finalists = ([DEFAULT] if DEFAULT in first else []) + near
    if len(finalists) < 2:
        return dict(first)
    got: dict[Config, list[float]] = {c: [] for c in finalists}
    t0 = clock()
    for r in range(RUNOFF_ROUNDS):
        if r >= RUNOFF_MIN_ROUNDS and clock() - t0 > budget_s:
            break
        k = r % len(finalists)
        for c in finalists[k:] + finalists[:k]:
            v = sample(c)
            if math.isfinite(v):
                got[c].append(v)
    out = dict(first)
    out.update({c: float(statistics.median(vs)) for c, vs in got.items() if vs})
    return out


def tune(cands: list[Config], trial: Callable[[Config], Callable[[], Any]], stream: Any,
         budget_s: float | None = None, device_index: int | None = None) -> tuple[dict[Config, float], bool]:
    """(median device time per call (us) of each candidate on ``stream``, timed with CUDA events behind a blocked
    stream; whether the budget cut the list short).

    Each candidate: one warm-up call, then three samples of enough back-to-back calls to last ~0.3 ms on the
    device (at most 200), each behind a spin kernel that outlasts their enqueueing (:func:`_device_us_per_call`).
    Candidates are timed in order until ``budget_s`` of timing is spent (the first one, the default, always), so
    a first call's cost is bounded. Then the finalists are timed again interleaved (:func:`runoff`, within what
    is left of the budget, at least RUNOFF_MIN_ROUNDS rounds): their times are the run-off's. Building a candidate (its module
    is compiled once per process and build, then cached on disk by CuPy) is not counted: it is reported in
    ``STATS["build_s"]``.
    """
    import cupy

    budget = tune_budget_s() if budget_s is None else budget_s
    spin = _spinner(cupy.cuda.runtime.getDevice() if device_index is None else device_index)
    spent = 0.0
    out: dict[Config, float] = {}
    calls: dict[Config, tuple[Callable[[], Any], int, float]] = {}  # a timed candidate's call, reps, host us
    cut = False
    for i, c in enumerate(cands):
        if i and spent > budget:
            cut = True
            break
        t_build = time.perf_counter()
        try:
            fn = trial(c)
        except Exception as e:  # a build that does not compile here: not a candidate
            if c == DEFAULT:
                raise
            log.debug("robocache: candidate %s failed: %s", c, e)
            continue
        t0 = time.perf_counter()
        STATS["build_s"] += t0 - t_build
        fn()  # warm-up (and the host's time for one call, below)
        h0 = time.perf_counter()
        fn()
        host_us = (time.perf_counter() - h0) * 1e6
        one = _device_us_per_call(fn, 1, stream, spin, host_us)
        reps = max(1, min(200, int(300.0 / max(one, 0.5))))
        samples = sorted(_device_us_per_call(fn, reps, stream, spin, host_us) for _ in range(3))
        spent += time.perf_counter() - t0
        if math.isfinite(samples[1]):
            out[c] = samples[1]
            calls[c] = (fn, reps, host_us)
        elif c == DEFAULT:
            raise RuntimeError("the default configuration could not be timed behind a blocked stream")
        else:
            log.debug("robocache: candidate %s dropped: its samples were not covered by the spin", c)
    t1 = time.perf_counter()
    out = runoff(out, lambda c: _device_us_per_call(calls[c][0], calls[c][1], stream, spin, calls[c][2]),
                 budget_s=max(0.0, budget - spent))
    STATS["runoff_s"] += time.perf_counter() - t1
    return out, cut


def write_table(path: Path, dev: Device, entries: dict[str, dict[str, Any]], provenance: dict[str, Any]) -> None:
    """Write a shipped table (``robocache-bench tune``): the entries tuned on this GPU, with provenance."""
    doc = {"format": FORMAT, "device": {"name": dev.name, "cc": dev.cc, "sms": dev.sms}, "kernels": kernels_hash(),
           "provenance": provenance, "entries": dict(sorted(entries.items()))}
    parse_table(json.dumps(doc), str(path))  # never write what would not load
    path.parent.mkdir(parents=True, exist_ok=True)
    _atomic_write(path, json.dumps(doc, indent=1) + "\n")


def capturing(kind: str, device_index: int) -> bool:
    """Whether the caller's current stream is being captured into a CUDA graph (tuning must not sync)."""
    try:
        if kind == "torch":
            torch = sys.modules["torch"]
            return bool(torch.cuda.is_current_stream_capturing())
        import cupy

        return bool(cupy.cuda.get_current_stream().is_capturing())
    except Exception:  # noqa: BLE001 - an old library without the query (or a broken one): assume capture, never sync
        return True
