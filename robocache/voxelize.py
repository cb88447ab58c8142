"""voxelize: point clouds into dense per-batch voxel grids (count, occupancy, mean features).

validate -> (CPU: reference) | (GPU: zero the grid -> count/accumulate kernel -> mean kernel).
v3 (mean): one zero-fill launch -> the flat accumulate (one feature element a thread; the hash kernel where N * C
does not fit 32 bits) into the float32 output (or scratch sums) -> mean pass over the occupied voxels; count and
occupancy through the hash kernel where rows are dense (HASH_DENSITY), else v2's kernel. Mean over sparse rows
through a list of the occupied voxels (_PlanV3List, _list_pays): TUNING["vox_list"] False by default, None the rule.
Semantics and determinism: docs/semantics.md; kernels: kernels/voxelize.cu.
"""
from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any, NamedTuple

import numpy as np

from . import _arrays as A
from . import _launch as L
from . import _versions
from . import reference
from .reference.voxelize import MODES, voxel_geometry

BLOCK = 256
PPT = 4  # points per thread of the v2 kernels (RC_VOX_PPT in kernels/voxelize.cu)
MAX_VOXELS = 2**40  # far beyond any GPU's memory: guards against typos such as grid=(1e6, 1e6, 1e6)


def _validate_grid_bounds(grid: Any, bounds: Any) -> tuple[tuple[int, int, int], np.ndarray, np.ndarray, np.ndarray]:
    if isinstance(grid, (str, bytes)) or not isinstance(grid, Sequence) or len(grid) != 3:
        raise TypeError(f"grid must be three integers (GX, GY, GZ), got {grid!r}")
    gs = []
    for axis, g in zip("xyz", grid):
        if isinstance(g, bool) or not isinstance(g, (int, np.integer)):
            raise TypeError(f"grid size along {axis} must be an integer, got {g!r}")
        if g <= 0:
            raise ValueError(f"grid size along {axis} must be at least 1, got {g}")
        gs.append(int(g))
    if math.prod(gs) > MAX_VOXELS:
        raise ValueError(f"grid {tuple(gs)} has {math.prod(gs)} voxels, more than the limit {MAX_VOXELS}")
    try:
        b = np.asarray(bounds, dtype=np.float64)
    except (TypeError, ValueError) as e:
        raise TypeError(f"bounds must be ((x0, y0, z0), (x1, y1, z1)) numbers, got {bounds!r}") from e
    if b.shape != (2, 3):
        raise ValueError(f"bounds must have shape (2, 3): ((x0, y0, z0), (x1, y1, z1)), got shape {b.shape}")
    if not np.all(np.isfinite(b)):
        raise ValueError(f"bounds must be finite, got {b.tolist()}")
    _, lo, hi, inv = voxel_geometry(gs, b)
    if not np.all(hi > lo) or not np.all(np.isfinite(inv)):
        raise ValueError(
            f"bounds need lower < upper on every axis (after rounding to float32), got lower {lo.tolist()} "
            f"upper {hi.tolist()}"
        )
    return (gs[0], gs[1], gs[2]), lo, hi, inv


class _Plan:
    """A validated v2 voxelize of one signature (shapes, dtypes, grid, bounds, mode): its kernels with
    their argument blocks, grids and scratch shapes."""

    __slots__ = ("main", "mean", "grid", "mgrid", "kind", "dev", "out_shape", "out_dtype", "mode", "b", "c", "vox",
                 "smem")

    def __init__(self, **kw: Any):
        for k, v in kw.items():
            setattr(self, k, v)

    def __call__(self, points: Any, features: Any | None, out: Any = None) -> Any:
        ptr = L.ptr_of(self.kind)
        if self.mode != "mean":  # main: count/occupancy (0 points, 3 counts, 4 occ) or hashed (0, 7 counts)
            return _filled_launch(self, points, out, self.main_out_slot())
        counts = L.zeros(self.kind, (self.b * self.vox,), "int32", points, self.dev)
        sums = L.zeros(self.kind, (self.b * self.vox * self.c,), "float32", points, self.dev)
        if out is None:
            out = L.empty(self.kind, self.out_shape, features, self.dev)
        if self.grid:  # hashed (points 0, feats 1, counts 7, sums 8) or accumulate (0, 1, counts 5, sums 6)
            slots = (7, 8) if self.smem else (5, 6)
            L.fast_launch(self.main, self.grid, self.kind, self.dev,
                          {0: ptr(points), 1: ptr(features), slots[0]: ptr(counts), slots[1]: ptr(sums)}, self.smem)
        L.fast_launch(self.mean, self.mgrid, self.kind, self.dev, {0: ptr(counts), 1: ptr(sums), 2: ptr(out)})
        return out

    def main_out_slot(self) -> int:
        if self.smem:
            return 7  # hashed: counts
        return 3 if self.mode == "count" else 4


HASH_SMEM = 48 * 1024  # shared memory per block for the hash table (no opt-in needed up to 48 KB)


def _hash_shape(c: int, reserve: int = 0) -> tuple[int, int, int] | None:
    """(hs_log2, points per block, shared bytes) of the block-aggregated kernel, or None when the table
    would hold fewer than 512 slots (too many features per point to aggregate in shared memory); ``reserve``:
    bytes of the block's shared memory kept for something else (the flat insert's slot per thread)."""
    words = 2 + c  # key, count, c sums
    hs = 4096
    while hs * words * 4 > HASH_SMEM - reserve:
        hs //= 2
    if hs < 512:
        return None
    return hs.bit_length() - 1, hs // 2, hs * words * 4


def _filled_launch(plan: Any, points: Any, out: Any, out_slot: int, block: int = L.BLOCK) -> Any:
    """count/occupancy (and v2's hashed count) of a v2 or v3 plan: the output zeroed (allocated, or ``out``
    filled on its device and stream), then the plan's one kernel writing it through argument ``out_slot``."""
    if out is None:
        out = L.zeros(plan.kind, plan.out_shape, plan.out_dtype, points, plan.dev)
    else:
        with L.on_device(plan.kind, plan.dev):  # the fill on the output's device and stream
            out[...] = 0
    if plan.grid:
        ptr = L.ptr_of(plan.kind)
        L.fast_launch(plan.main, plan.grid, plan.kind, plan.dev, {0: ptr(points), out_slot: ptr(out)}, plan.smem,
                      block=block)
    return out


V3_PPT = 2  # points per thread in flight in the v3 hash kernel (RC_V3_PPT)
# count and occupancy take the hash kernel where a row has at least this many points per voxel (N >= 0.5 V): on
# the H200 (scripts/vox_probe.py, sampled seeds 2 and 23, 2026-11-28) the hash ran 0.31-0.75x the plain
# kernel's time for sparse and clustered clouds from N/V = 0.28 up, and 1.1-1.5x for uniform clouds (which stay
# several times faster than torch.compile); below 0.5 plain atomics win or tie on every cloud (docs/kernels.md)
HASH_DENSITY = 0.5
V3_MAX_THREADS = 512  # its __launch_bounds__


class _PlanV3:
    """A validated v3 voxelize of one signature. ``mean``: one zero-fill launch (the int32 counts and the
    float32 output, or one scratch buffer of counts and float32 sums for 16-bit features), the hash (or
    accumulate) kernel, the mean pass. ``count``/``occupancy``: the output zeroed, then one kernel: the hash
    where rows are dense (:data:`HASH_DENSITY`), else v2's count kernel."""

    __slots__ = ("block", "bv", "bvc", "dev", "grid", "inplace", "kind", "main", "main_slots", "mean", "mgrid",
                 "mode", "out_dtype", "out_shape", "scratch_words", "smem", "sums_off", "vw", "zero", "zgrid",
                 "lmain", "lgrid", "list_off")

    def __init__(self, **kw: Any):
        for k, v in kw.items():
            setattr(self, k, v)

    def __call__(self, points: Any, features: Any | None, out: Any = None) -> Any:
        ptr = L.ptr_of(self.kind)
        if self.mode != "mean":
            return _filled_launch(self, points, out, self.main_slots[0], self.block)
        vw = self.vw
        if out is None:
            out = L.empty(self.kind, self.out_shape, features, self.dev)
        else:  # a caller's buffer: the vector width its alignment allows
            vw = _mean_vw(self.inplace, self.out_shape[-1], ptr(out))
        scratch = _scratch(self.kind, self.scratch_words, points, self.dev)
        counts, o = ptr(scratch), ptr(out)
        sums = o if self.inplace else counts + self.sums_off
        # zero: (counts, bv words) and (out, bvc words) in place; else the whole scratch buffer alone
        L.fast_launch(self.zero, self.zgrid, self.kind, self.dev, {0: counts, 2: o if self.inplace else 0})
        if self.grid:
            L.fast_launch(self.main, self.grid, self.kind, self.dev,
                          {0: ptr(points), 1: ptr(features), self.main_slots[0]: counts, self.main_slots[1]: sums},
                          self.smem, block=self.block)
        if self.inplace:  # voxel_mean_inplace_v3_float32(counts, out, BV, C, vw)
            L.fast_launch(self.mean, self.mgrid, self.kind, self.dev, {0: counts, 1: o, 4: vw})
        else:  # voxel_mean_v3_<T>(counts, sums, out, BV, C, vw)
            L.fast_launch(self.mean, self.mgrid, self.kind, self.dev, {0: counts, 1: sums, 2: o, 5: vw})
        return out


class _PlanV3List(_PlanV3):
    """v3's mean through a list of the occupied voxels (kernels/voxelize.cu, "v3, the list path"): one zero fill (the
    output, and the scratch's header and counts), the list kernel (``lmain``: counts, the list, 16-bit sums rows
    cleared), the flat accumulate without counts (``main``), the mean of the listed voxels. Offsets in bytes from the
    scratch buffer's start: the counts at 16, the list at ``list_off``, the 16-bit features' sums at ``sums_off``."""

    __slots__ = ()

    def __call__(self, points: Any, features: Any | None, out: Any = None) -> Any:
        ptr = L.ptr_of(self.kind)
        if out is None:
            out = L.empty(self.kind, self.out_shape, features, self.dev)
        scratch = _scratch(self.kind, self.scratch_words, points, self.dev)
        base, o = ptr(scratch), ptr(out)
        counts, lst = base + 16, base + self.list_off
        sums = o if self.inplace else base + self.sums_off
        # voxel_zero_list_v3(header and counts, their words, out, its 16-bit values)
        L.fast_launch(self.zero, self.zgrid, self.kind, self.dev, {0: base, 2: o})
        if not self.grid:
            return out
        pts = ptr(points)
        # voxel_list_v3_<T>(points, N, bpr, nslots, counts, list, wide, sums (16-bit; null: float32), C, geometry)
        lp = {0: pts, 3: base, 4: counts, 5: lst}
        if not self.inplace:
            lp[7] = sums
        L.fast_launch(self.lmain, self.lgrid, self.kind, self.dev, lp, 16)
        # voxel_accumulate_flat_v3_<T>(points, feats, N, C, bpr, counts (null: counted above), sums, geometry)
        L.fast_launch(self.main, self.grid, self.kind, self.dev, {0: pts, 1: ptr(features), 6: sums},
                      block=self.block)
        if self.inplace:  # voxel_list_mean_inplace_v3_float32(nslots, counts, list, wide, out, C)
            L.fast_launch(self.mean, self.mgrid, self.kind, self.dev, {0: base, 1: counts, 2: lst, 4: o})
        else:  # voxel_list_mean_v3_<T>(nslots, counts, list, wide, sums, out, C)
            L.fast_launch(self.mean, self.mgrid, self.kind, self.dev, {0: base, 1: counts, 2: lst, 4: sums, 5: o})
        return out


def _plan_list(p: Any, b: int, n: int, c: int, vox: int, geo: list, kw: dict) -> _PlanV3List:
    """The list path's plan (``kw``: the flat accumulate's, built with null counts)."""
    dev, item = kw["dev"], 4 if p.dtype == "float32" else 2
    inplace = p.dtype == "float32"
    list_off, wide, sums_off, words = _list_layout(b, n, vox, c, inplace)
    lbpr = max(1, -(-n // (BLOCK * PPT)))  # the list kernel: RC_VOX_PPT points a thread, as v2's count kernel
    lgrid = b * lbpr if n else 0
    A.check_grid(lgrid, "points")
    lmain = L.FastLaunch(L.kernel("voxelize", f"voxel_list_v3_{p.dtype}", dev),
                         [("ptr", None), ("i32", n), ("i32", lbpr), ("ptr", None), ("ptr", None), ("ptr", None),
                          ("i32", wide), ("ptr", 0), ("i32", c), *geo])
    if inplace:
        mean = L.FastLaunch(L.kernel("voxelize", "voxel_list_mean_inplace_v3_float32", dev),
                            [("ptr", None), ("ptr", None), ("ptr", None), ("i32", wide), ("ptr", None), ("i32", c)])
    else:
        mean = L.FastLaunch(L.kernel("voxelize", f"voxel_list_mean_v3_{p.dtype}", dev),
                            [("ptr", None), ("ptr", None), ("ptr", None), ("i32", wide), ("ptr", None),
                             ("ptr", None), ("i32", c)])
    bvc = b * vox * c
    head = list_off  # the header and the counts (padded): zeroed
    out_halves = bvc * item // 2
    zero = L.FastLaunch(L.kernel("voxelize", "voxel_zero_list_v3", dev),
                        [("ptr", None), ("i64", head), ("ptr", None), ("i64", out_halves)])
    sms = L.sm_count(dev)
    zgrid = max(1, min(-(-max(head, -(-out_halves // 2)) // (4 * BLOCK)), 16 * sms))
    elems = max(1, b * min(n, vox) * c)  # the most listed elements; the kernel stops at the list's length
    mgrid = max(1, min(-(-elems // BLOCK), LIST_MEAN_BLOCKS_PER_SM * sms))
    return _PlanV3List(mean=mean, zero=zero, mgrid=mgrid, zgrid=zgrid, inplace=inplace, sums_off=4 * sums_off, vw=1,
                       scratch_words=words, lmain=lmain, lgrid=lgrid, list_off=4 * list_off, **kw)


def _mean_vw(inplace: bool, c: int, out_ptr: int) -> int:
    """Elements per access of the v3 mean pass: the widest (16, 8, 4 bytes or one element) that every
    output row start allows (row bytes and the output pointer); the float32 sums of 16-bit outputs sit
    16-byte aligned in the scratch buffer, so their rows allow the matching float loads."""
    item = 4 if inplace else 2
    return L.vector_bytes(item, (c * item,), (out_ptr,)) // item


def _scratch(kind: str, words: int, like: Any, dev: int) -> Any:
    """An uninitialised int32 buffer (the v3 zero-fill launch clears what is read)."""
    if kind == "torch":
        import torch

        return torch.empty((words,), dtype=torch.int32, device=like.device)
    import cupy

    with cupy.cuda.Device(dev):
        return cupy.empty((words,), dtype="int32")


# --- mean through a list of the occupied voxels (kernels/voxelize.cu, "v3, the list path") ---------------------------
# The dense passes of v3's mean touch every voxel of the grid: the zero fill of the float32 sums (16-bit features) or
# of the output and counts (float32), and the mean pass reading every count (and, 16-bit, writing every row). Where a
# row has few points for its voxels (sparse clouds on fine grids) these passes are the time: on the H200's sampled
# runs such large mean points ran at 11-24% of the copy ceiling (s6113-23 float16 C3 388.7 us at 11%). The list path
# zeroes the output and the counts, counts the points in a kernel of its own that lists each voxel at its first point
# (and clears that voxel's float32 sums row), accumulates flat without counting, and takes the means of the listed
# voxels only.
#
# Bytes each path moves beyond what both move (the output written once, the flat accumulate's reads and atomics), per
# batch row of n points into vox voxels of c channels:
#   dense, 16-bit features:  vox * (4 + 4 c)  the float32 sums zeroed (4 c) and every count read by the mean pass (4)
#   dense, float32 (in place): vox * 4        every count read by the mean pass
#   list:  n * LIST_BYTES_PER_POINT           the list kernel: the point's coordinates read again and its count's
#                                             atomic returning the old value (the flat accumulate's count moved here)
#        + occ * (LIST_BYTES_PER_VOXEL + 4 c (16-bit))  a listed voxel's entry written and read, its sums row cleared
#        + LIST_LAUNCH_BYTES / rows           one more launch, over the batch
# with occ = min(n, vox), the most voxels a row's points can occupy (the host cannot know the number without a sync).
# The list pays where the dense bytes exceed the list's and the row is sparse (LIST_MAX_POINTS_PER_VOXEL). The
# per-point and per-voxel bytes are estimates: the H200's A/B (scripts/vox_probe.py --modes mean --variants
# "dense=vox_list=False;list=vox_list=True;rule=vox_list=None"; docs/kernels.md, "... the list path measured") gave
# the same verdicts for any per-point cost from 8 to 32 bytes. What it did set: the cap below and the launch cost
# (4 MB before the A/B, which took the list for s9437-05, a 12 us point of one row, 11.7 us dense against 16.1 list;
# 8 MB, about 2 us at 4.3 TB/s, leaves no one of the 55 points measured slower than dense where the rule takes the
# list: fitted on them, so in sample).
LIST_BYTES_PER_POINT = 16  # coordinates re-read (6-12 B) + a returning atomic per point (an estimate; see above)
LIST_BYTES_PER_VOXEL = 8  # a 4-byte list entry written once and read once (an estimate)
LIST_LAUNCH_BYTES = 8 << 20  # the list's extra launches (H200 A/B)
# The byte model alone took the list where it lost on the H200 (scripts/vox_probe.py, 2026-11-29, seed 6113's 22 mean
# points and 8861's first three, dense against list in one process): uniform 16-bit rows of 0.13-0.2 points a voxel
# (s6113-31 57.8 us dense against 66.4 list, s6113-01 25.0 against 27.5), where its per-point atomics outweigh the
# voxels it skips; every row of 0.1 points a voxel or fewer won or tied (1.0-3.3x: s6113-23 382.5 -> 165.6 us,
# s6113-41 316.8 -> 115.5), every row of 0.2 or more lost (1.1-1.4x slower). The list is taken only at or below:
LIST_MAX_POINTS_PER_VOXEL = 0.1
LIST_MEAN_BLOCKS_PER_SM = 8  # the list's mean pass: 256-thread blocks per SM (grid-stride over the listed elements)
LIST_WIDE_VOXELS = 2**31  # B*V from which the list holds int64 flat indices (the CPU emulator lowers it to test them)


def _list_pays(n_points_per_row: int, voxels_per_row: int, c: int, inplace: bool, rows: int = 1) -> bool:
    """Whether the list path of mean moves fewer bytes than the dense passes (the byte model above) for ``rows``
    batch rows of ``n_points_per_row`` points into ``voxels_per_row`` voxels of ``c`` channels; ``inplace``: float32
    features (the sums are the output). Only rows of at most :data:`LIST_MAX_POINTS_PER_VOXEL` points a voxel.
    TUNING["vox_list"] None asks this rule."""
    n, vox = n_points_per_row, voxels_per_row
    dense = vox * (4 if inplace else 4 + 4 * c)
    occ = min(n, vox)
    lst = n * LIST_BYTES_PER_POINT + occ * (LIST_BYTES_PER_VOXEL + (0 if inplace else 4 * c))
    return n <= LIST_MAX_POINTS_PER_VOXEL * vox and rows * dense > rows * lst + LIST_LAUNCH_BYTES


def _list_layout(b: int, n: int, vox: int, c: int, inplace: bool) -> tuple[int, int, int, int]:
    """The list path's scratch buffer in int32 words (kernels/voxelize.cu, "v3, the list path"): (the list's offset,
    wide: 1 for int64 entries where B*V >= 2^31, the float32 sums' offset, the buffer's words). Word 0 is the list's
    length, the counts start at word 4; every region starts 16-byte aligned; the sums (16-bit features only) come
    last, B*V*C words, never zeroed densely."""
    bv = b * vox
    wide = int(bv >= LIST_WIDE_VOXELS)
    counts_words = -(-bv // 4) * 4
    list_words = -(-(b * min(n, vox) << wide) // 4) * 4
    list_off = 4 + counts_words
    sums_off = list_off + list_words
    return list_off, wide, sums_off, sums_off + (0 if inplace else bv * c)


def _v3_hash_shape(c: int, b: int, n: int, sms: int, flat: bool = False) -> tuple[int, int, int, int] | None:
    """(hs_log2, points per block, shared bytes, threads) of the v3 hash kernel, or None (too many features
    to aggregate in shared memory). The table is the largest that fits 48 KB (as v2), halved (down to 512
    slots) while the launch would give fewer than two blocks per SM, so small clouds still cover the chip;
    threads: V3_PPT points each, 128 to 512. ``flat``: the flat insert's kernel, whose shared memory also
    holds a bit per slot, a counter and one slot index per thread."""
    shape = _hash_shape(c, 4 * V3_MAX_THREADS + 4096 // 8 + 16 if flat else 0)
    if shape is None:
        return None
    hs = 1 << shape[0]
    while hs > 512 and b * -(-n // (hs // 2)) < 2 * sms:
        hs //= 2
    ppb = hs // 2
    threads = max(128, min(V3_MAX_THREADS, ppb // V3_PPT))
    return hs.bit_length() - 1, ppb, hs * (2 + c) * 4 + (-(-hs // 128) * 16 + 16 + 4 * threads if flat else 0), threads


def _plan_v3(p: Any, b: int, n: int, c_feat: int, g: tuple[int, int, int], lo: np.ndarray, hi: np.ndarray,
             inv: np.ndarray, mode: str, out_shape: tuple[int, ...], out_dtype: str) -> _PlanV3:
    vox = g[0] * g[1] * g[2]
    acc = mode == "mean"
    c = c_feat if acc else 0
    dev = p.device_index
    geo = [("f32", x) for x in (*lo, *hi, *inv)] + [("i32", x) for x in g]  # RC_VOX_ARGS
    use_hash = L.TUNING["vox_hash"]
    # mean: the hash where the flat accumulate (below) is not taken. count and occupancy: the hash where a row has
    # at least HASH_DENSITY points per voxel (count: C = 0 into the int32 output; occupancy: one word reduction per
    # distinct voxel of a block, kernels/voxelize.cu rc_occ_set), else v2's plain atomics; TUNING's True or False
    # asks for one path everywhere.
    wanted = (acc or n >= HASH_DENSITY * vox) if use_hash is None else use_hash
    # mean: one feature element a thread straight to the grid (voxel_accumulate_flat_v3) where N * C fits: on the
    # H200 (scripts/vox_probe.py, mean points of sampled seeds 2, 23 and 97, 2026-11-28) 0.81x the hash's time
    # (geomean of 44 points), faster on 40 of them, and >= 1.03x torch.compile on the 12 with its times where the
    # hash was 0.42-0.97x on 3; it lost where a few voxels take most of the points (LiDAR-like sparse clouds:
    # s23-09 669 us against the hash's 234). TUNING: vox_flat True asks for it, False (or vox_hash True) for the
    # thread-per-point hash, "hash" for the hash inserted one element a thread (voxel_hashed_flat_v3).
    vflat = L.TUNING["vox_flat"]
    flat = acc and (vflat is True or (vflat is None and use_hash is None)) and n * c < 2**31 - BLOCK * PPT
    hflat = acc and vflat == "hash"
    # mean through the list of occupied voxels (_PlanV3List): a change of the flat path, so only where it is taken, and
    # where the list's length fits its int32 counter. TUNING vox_list: True always, None the byte rule (_list_pays),
    # False (the default until a GPU has measured the rule's constants) never.
    vlist = L.TUNING["vox_list"]
    listed = flat and b * min(n, vox) < 2**31 and (
        vlist is True or (vlist is None and _list_pays(n, vox, c, p.dtype == "float32", b)))
    shape = _v3_hash_shape(c, b, n, L.sm_count(dev), hflat) if wanted and not flat else None
    if shape is not None:
        hs_log2, ppb, smem, threads = shape
    else:
        hs_log2, ppb, smem, threads = 0, BLOCK * PPT, 0, BLOCK
    bpr = max(1, -(-(n * c if flat else n) // ppb))  # blocks per batch row
    grid_blocks = b * bpr if n else 0
    A.check_grid(grid_blocks, "points")
    # argument lists: kernels/voxelize.cu; main_slots: where the per-call pointers of counts (and sums) go
    if shape is not None:  # hashed (points 0, feats 1, counts 7, sums 8, occupancy 9); count: counts the output
        name = "voxel_hashed_flat_v3" if hflat else "voxel_hashed_v3"
        main = L.FastLaunch(L.kernel("voxelize", f"{name}_{p.dtype}", dev),
                            [("ptr", None), ("ptr", 0), ("i32", n), ("i32", c), ("i32", bpr), ("i32", ppb),
                             ("i32", hs_log2), ("ptr", None), ("ptr", 0), ("ptr", 0), *geo])
        slots = (7, 8) if acc else (7,) if mode == "count" else (9,)
    elif flat:  # one feature element a thread: counts 5 (the list path: null, counted by its list kernel), sums 6
        main = L.FastLaunch(L.kernel("voxelize", f"voxel_accumulate_flat_v3_{p.dtype}", dev),
                            [("ptr", None), ("ptr", None), ("i32", n), ("i32", c), ("i32", bpr),
                             ("ptr", 0 if listed else None), ("ptr", None), *geo])
        slots = (5, 6)
    elif acc:  # v2's warp-aggregated atomics (more channels than the table holds): counts 5, sums 6
        main = L.FastLaunch(L.kernel("voxelize", f"voxel_accumulate_v2_{p.dtype}", dev),
                            [("ptr", None), ("ptr", None), ("i32", n), ("i32", c), ("i32", bpr),
                             ("ptr", None), ("ptr", None), *geo])
        slots = (5, 6)
    else:  # v2's count kernel: counts 3 or occupancy 4
        main = L.FastLaunch(L.kernel("voxelize", f"voxel_count_v2_{p.dtype}", dev),
                            [("ptr", None), ("i32", n), ("i32", bpr), ("ptr", 0), ("ptr", 0), *geo])
        slots = (3,) if mode == "count" else (4,)
    kw = {"main": main, "grid": grid_blocks, "block": threads, "kind": p.kind, "dev": dev, "out_shape": out_shape,
          "out_dtype": out_dtype, "mode": mode, "smem": smem, "main_slots": slots, "bv": b * vox, "bvc": b * vox * c}
    if not acc:
        return _PlanV3(mean=None, zero=None, mgrid=0, zgrid=0, inplace=False, sums_off=0, vw=1, scratch_words=0,
                       lmain=None, lgrid=0, list_off=0, **kw)
    if listed:
        return _plan_list(p, b, n, c, vox, geo, kw)
    bv, bvc = b * vox, b * vox * c
    inplace = p.dtype == "float32"
    cwords = -(-bv // 4) * 4  # counts, padded so the sums start 16-byte aligned
    scratch_words = bv if inplace else cwords + bvc
    if inplace:
        mean = L.FastLaunch(L.kernel("voxelize", "voxel_mean_inplace_v3_float32", dev),
                            [("ptr", None), ("ptr", None), ("i64", bv), ("i32", c), ("i32", 4)])
    else:
        mean = L.FastLaunch(L.kernel("voxelize", f"voxel_mean_v3_{p.dtype}", dev),
                            [("ptr", None), ("ptr", None), ("ptr", None), ("i64", bv), ("i32", c), ("i32", 8)])
    zero = L.FastLaunch(L.kernel("voxelize", "voxel_zero_v3", dev),
                        [("ptr", None), ("i64", bv if inplace else scratch_words), ("ptr", 0),
                         ("i64", bvc if inplace else 0)])
    zwords = max(bv, bvc) if inplace else scratch_words
    sms = L.sm_count(dev)
    return _PlanV3(mean=mean, zero=zero, mgrid=max(1, min(-(-bv // BLOCK), 65536)),
                   zgrid=max(1, min(-(-zwords // (4 * BLOCK)), 16 * sms)), inplace=inplace, sums_off=4 * cwords,
                   vw=_mean_vw(inplace, c, 0), scratch_words=scratch_words, lmain=None, lgrid=0, list_off=0, **kw)


_PLANS = L.PlanCache()


_INT = frozenset((int,))
_NUMBER = frozenset((int, float))


def _key(points: Any, features: Any | None, grid: Any, bounds: Any, mode: str) -> tuple | None:
    """The plan key of a call, or None when it must take the full path: exact types only (``type(x) is int``:
    True == 1 would otherwise reuse a plan the checks never saw), checked by C loops (``map``), no generator."""
    sp = L.signature(points)
    if sp is None or type(grid) is not tuple or not _INT.issuperset(map(type, grid)):
        return None  # only plain int grids
    if (type(bounds) is not tuple or len(bounds) != 2 or type(bounds[0]) is not tuple or type(bounds[1]) is not tuple
            or not _NUMBER.issuperset(map(type, bounds[0])) or not _NUMBER.issuperset(map(type, bounds[1]))):
        return None  # only plain number tuples: arrays or tensors could change in place under a cached plan
    if type(mode) is not str:
        return None  # the full path raises its error
    sf = None
    if features is not None:
        sf = L.signature(features)
        if sf is None:  # host features with GPU points: the full path raises the mixed-kinds error
            return None
    return (sp, sf, grid, bounds, mode)  # every part hashable: signatures, int and number tuples, a str


def _checked_inputs(points: Any, features: Any | None, mode: str) -> tuple[A.Arr, A.Arr | None]:
    """``mode``, ``points[B, N, 3]`` and ``features[B, N, C]`` checked (the first problem raised, in this order):
    their descriptions."""
    if mode not in MODES:
        raise ValueError(f"mode must be one of {MODES}, got {mode!r}")
    p = A.describe("points", points)
    f = A.describe("features", features) if features is not None else None
    A.same_place([p] + ([f] if f is not None else []))
    A.check_rank(p, 3, "[B, N, 3]")
    b, n, three = p.shape
    if three != 3:
        raise ValueError(f"points must have shape [B, N, 3] (x, y, z last), got {p.shape}")
    A.check_positive(p, {"B (batch)": b, "N (points)": n}, allow_zero=("N (points)",))
    A.check_value_dtype(p, on_gpu=p.on_gpu)
    if mode == "mean" and f is None:
        raise ValueError("mode='mean' averages features: pass features[B, N, C]")
    if f is not None:
        A.check_rank(f, 3, "[B, N, C]")
        if f.shape[:2] != (b, n):
            raise ValueError(f"features must have shape [B, N, C] with B, N = {(b, n)} like points, got {f.shape}")
        A.check_positive(f, {"C (channels)": f.shape[2]})
        if f.dtype != p.dtype:
            raise TypeError(f"features have dtype {f.dtype} but points have {p.dtype}; cast one to the other")
    return p, f


def voxelize(points: Any, features: Any | None, grid: Sequence[int], bounds: Any,
             mode: str = "count", *, out: Any | None = None, _version: str | None = None) -> Any:
    """Voxelize ``points[B,N,3]`` (and ``features[B,N,C]``) into a dense grid per batch row.

    ``mode``: ``"count"`` -> int32 ``[B,GX,GY,GZ]``; ``"occupancy"`` -> bool
    ``[B,GX,GY,GZ]``; ``"mean"`` -> ``[B,GX,GY,GZ,C]`` mean features in the features'
    dtype (0 where empty). Points outside ``bounds`` (half-open, ``lo <= p < hi``) or
    with non-finite coordinates are dropped. Counts and occupancy are deterministic;
    mean sums float32 atomics (last bits may vary between GPU runs). ``out``: an
    optional C-contiguous result array of the inputs' kind and device (zeroed first
    for count and occupancy, fully overwritten for mean).
    ``_version`` (benchmarks only): a kernel version of ``robocache._versions`` instead of the best.
    """
    if out is None and _version is None:  # the launch floor: one dict lookup
        key = _key(points, features, grid, bounds, mode)
        plan = _PLANS.get(key) if key is not None else None
        if plan is not None:
            return plan(points, features)
    version = _versions.check("voxelize", _version)
    p, f = _checked_inputs(points, features, mode)
    b, n = p.shape[0], p.shape[1]
    g, lo, hi, inv = _validate_grid_bounds(grid, bounds)
    out_dtype = {"count": "int32", "occupancy": "bool"}.get(mode, p.dtype)
    out_shape = (b, *g) if mode != "mean" else (b, *g, f.shape[2])
    if out is not None:
        A.check_out(out, p, out_shape, out_dtype)

    if not p.on_gpu:
        bnds = np.stack([lo, hi]).astype(np.float64)
        res = reference.voxelize(A.to_numpy(p), A.to_numpy(f) if f is not None else None, g, bnds, mode,
                                 out_dtype=np.float64)
        return A.fill_out(out, A.from_numpy_like(p, res, out_dtype))

    vox = g[0] * g[1] * g[2]
    if vox > A.INT32_MAX:  # the kernels index a row's voxels with int32
        raise ValueError(f"grid {g} has {vox} voxels per row; on the GPU robocache supports at most {A.INT32_MAX}")
    geom = (*(np.float32(x) for x in lo), *(np.float32(x) for x in hi), *(np.float32(x) for x in inv),
            *(np.int32(x) for x in g))
    call = _Call(p, f, b, n, g, lo, hi, inv, mode, out_shape, out_dtype, out, _version is None, points, features,
                 grid, bounds, geom, vox)
    return _LAUNCH[version](call)


class _Call(NamedTuple):
    """One validated GPU call, as every version's launch function takes it."""

    p: A.Arr
    f: A.Arr | None
    b: int
    n: int
    g: tuple[int, int, int]
    lo: np.ndarray
    hi: np.ndarray
    inv: np.ndarray
    mode: str
    out_shape: tuple[int, ...]
    out_dtype: str
    out: Any
    public: bool  # the public API (no _version): its plan is cached by signature
    points: Any
    features: Any
    grid: Any
    bounds: Any
    geom: tuple
    vox: int


def _cache_plan(c: _Call, pp: Any, ff: Any, plan: Any) -> None:
    if c.out is None and c.public and pp is c.points and ff is c.features:
        key = _key(c.points, c.features, c.grid, c.bounds, c.mode)
        if key is not None:
            _PLANS.put(key, plan)


def _launch_v3(c: _Call) -> Any:
    p, f = c.p, c.f
    with L.on_device(p.kind, p.device_index):  # copies of non-contiguous CuPy inputs on their own device
        pp = A.contiguous(p)
        ff = A.contiguous(f) if f is not None else None
    plan3 = _plan_v3(p, c.b, c.n, f.shape[2] if f is not None else 0, c.g, c.lo, c.hi, c.inv, c.mode, c.out_shape,
                     c.out_dtype)
    _cache_plan(c, pp, ff, plan3)
    return plan3(pp, ff, c.out)


def _launch_v2(c: _Call) -> Any:
    p, f, b, n, g, mode = c.p, c.f, c.b, c.n, c.g, c.mode
    lo, hi, inv, vox = c.lo, c.hi, c.inv, c.vox
    with L.on_device(p.kind, p.device_index):  # copies of non-contiguous CuPy inputs on their own device
        pp = A.contiguous(p)
        ff = A.contiguous(f) if f is not None else None
    acc = mode == "mean"
    cf = f.shape[2] if acc else 0  # features given with count/occupancy are ignored, never read
    # Shared-memory aggregation pays for mean (H100, B4 N100k G64: 44 us vs 55 us without, clustered;
    # 47 vs 59 uniform) but not for count (14.4 vs 10.3 us uniform): mean only unless TUNING says.
    use_hash = L.TUNING["vox_hash"]
    wanted = acc if use_hash is None else (use_hash and mode != "occupancy")
    shape = _hash_shape(cf if acc else 0) if wanted else None
    if shape is not None:
        hs_log2, ppb, smem = shape
        name = f"voxel_hashed_v2_{p.dtype}"
    else:
        hs_log2, ppb, smem = 0, BLOCK * PPT, 0
        name = f"voxel_accumulate_v2_{p.dtype}" if acc else f"voxel_count_v2_{p.dtype}"
    bpr = max(1, -(-n // ppb))  # blocks per batch row
    grid_blocks = b * bpr if n else 0
    A.check_grid(grid_blocks, "points")
    geo = [("f32", x) for x in (*lo, *hi, *inv)] + [("i32", x) for x in g]  # RC_VOX_ARGS
    fn = L.kernel("voxelize", name, p.device_index)
    # argument lists: kernels/voxelize.cu (pointers filled per call)
    if shape is not None:
        main = L.FastLaunch(fn, [("ptr", None), ("ptr", 0), ("i32", n), ("i32", cf), ("i32", bpr), ("i32", ppb),
                                 ("i32", hs_log2), ("ptr", None), ("ptr", 0), *geo])
    elif acc:
        main = L.FastLaunch(fn, [("ptr", None), ("ptr", None), ("i32", n), ("i32", cf), ("i32", bpr),
                                 ("ptr", None), ("ptr", None), *geo])
    else:
        main = L.FastLaunch(fn, [("ptr", None), ("i32", n), ("i32", bpr), ("ptr", 0), ("ptr", 0), *geo])
    mean = None
    if acc:
        mean = L.FastLaunch(L.kernel("voxelize", f"voxel_mean_v2_{p.dtype}", p.device_index),
                            [("ptr", None), ("ptr", None), ("ptr", None), ("i64", b * vox), ("i32", cf)])
    plan = _Plan(main=main, mean=mean, grid=grid_blocks, mgrid=max(1, min(-(-(b * vox) // BLOCK), 65536)),
                 kind=p.kind, dev=p.device_index, out_shape=c.out_shape, out_dtype=c.out_dtype, mode=mode, b=b, c=cf,
                 vox=vox, smem=smem)
    _cache_plan(c, pp, ff, plan)
    return plan(pp, ff, c.out)


def _launch_v1(c: _Call) -> Any:
    p, f, b, n, vox, mode, out, out_shape, geom = c.p, c.f, c.b, c.n, c.vox, c.mode, c.out, c.out_shape, c.geom
    with A.GpuContext(p.kind, p.device_index) as ctx:
        pp = A.contiguous(p)
        total = b * n
        blocks = max(1, min((total + BLOCK - 1) // BLOCK, 65536))  # grid-stride loops beyond this
        if mode in ("count", "occupancy"):
            if out is None:
                out = ctx.zeros(out_shape, c.out_dtype, pp)
            else:
                out[...] = 0
            if total:
                cnt = out if mode == "count" else None
                occ = out if mode == "occupancy" else None
                ctx.launch("voxelize", f"voxel_count_v1_{p.dtype}", blocks, BLOCK,
                           (A.ptr_arg(pp), np.int64(b), np.int32(n),
                            A.ptr_arg(cnt) if cnt is not None else np.uint64(0),
                            A.ptr_arg(occ) if occ is not None else np.uint64(0), *geom))
            return out
        ff = A.contiguous(f)
        cf = f.shape[2]
        counts = ctx.zeros((b * vox,), "int32", pp)
        sums = ctx.zeros((b * vox * cf,), "float32", pp)
        if out is None:
            out = ctx.empty(out_shape, "like", ff)
        if total:
            ctx.launch("voxelize", f"voxel_accumulate_v1_{p.dtype}", blocks, BLOCK,
                       (A.ptr_arg(pp), A.ptr_arg(ff), np.int64(b), np.int32(n), np.int32(cf),
                        A.ptr_arg(counts), A.ptr_arg(sums), *geom))
        mblocks = max(1, min((b * vox * cf + BLOCK - 1) // BLOCK, 65536))
        ctx.launch("voxelize", f"voxel_mean_v1_{p.dtype}", mblocks, BLOCK,
                   (A.ptr_arg(counts), A.ptr_arg(sums), A.ptr_arg(out), np.int64(b * vox), np.int32(cf)))
    return out


# One launch function per kernel version (robocache/_versions.py): a version without one fails at import.
_LAUNCH = {"v1": _launch_v1, "v2": _launch_v2, "v3": _launch_v3}
_versions.require_launchers("voxelize", _LAUNCH)
