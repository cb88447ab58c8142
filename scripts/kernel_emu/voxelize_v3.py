"""voxelize v3 on the CPU: kernels/voxelize.cu compiled with g++ against host shims (scripts/kernel_emu/shim.h:
one std::thread per CUDA thread, a std::barrier for __syncthreads, GCC atomics), driven through the real v3 plan
(robocache/voxelize.py: FastLaunch argument slots, grids, block sizes) and checked against the NumPy reference.

    python3 scripts/kernel_emu/voxelize_v3.py [--list] [-DNAME=VALUE ...]   # needs g++ >= 12 (C++20, _Float16); 2-4 min

Arguments of the form -DNAME=VALUE are passed to g++ (the kernels' build options, e.g. -DRC_V3_PPT=4). --list: only
the list path of mean (TUNING["vox_list"] True: voxel_zero_list_v3, voxel_list_v3, the flat accumulate without
counts, voxel_list_mean*_v3), about a minute. Every scratch buffer and every output the plan allocates is poisoned
first (NaN bit patterns), so a region a kernel reads before anything wrote it shows in the result; the list path's
counts, list and list length are also checked against the reference's counts. A kernel's dynamic shared memory
(``extern __shared__``) is exactly the bytes its launch asks for, ending at a page that faults (runtime.cpp
``rc_emu_dyn_smem``): a kernel that reaches past what its plan gave it crashes the run.

A development check of logic (index math, phases, zero fills, vector widths, the crowded-table fallback,
the exact reciprocal), not of the GPU: no warps (the warp intrinsics of v2's accumulate kernel abort), no
memory model or timing, blocks run one after another. It is no substitute for tests/gpu on a GPU.
"""
import ctypes
import faulthandler
import importlib
import re
import subprocess
import sys
import tempfile
import types
from pathlib import Path

HERE = Path(__file__).resolve().parent
faulthandler.enable()  # a kernel's fault (the shared memory's guard page) names the launch's Python line
sys.path.insert(0, str(HERE.parents[1]))
BUILD = Path(tempfile.mkdtemp(prefix="rc_kernel_emu_"))

import numpy as np  # noqa: E402  after the checkout's path entry above
import torch  # noqa: E402

from host_source import host_source, record_launches  # noqa: E402  (scripts/kernel_emu/host_source.py)

from robocache import reference  # noqa: E402
from robocache import _launch as L  # noqa: E402

# --- build --------------------------------------------------------------------------------------
src = host_source("voxelize")  # the 16-bit conversions on the host
# dynamic shared memory: exactly the launch's bytes before a page that faults (runtime.cpp g_dyn_smem)
src = src.replace("extern __shared__ int rc_sh[];", "int* rc_sh = reinterpret_cast<int*>(g_dyn_smem);")
src = src.replace("extern __shared__ uint4 rc_sh4[];", "uint4* rc_sh4 = reinterpret_cast<uint4*>(g_dyn_smem);")
assert "__shared__" not in src, [m.start() for m in re.finditer("__shared__", src)]
(BUILD / "voxelize_host.cpp").write_text('#include "shim.h"\n' + src + '\n#include "entries.inc"\n')
DEFINES = [a for a in sys.argv[1:] if a.startswith("-D")]
LIST_ONLY = "--list" in sys.argv[1:]
if len(DEFINES) + LIST_ONLY != len(sys.argv[1:]):
    print("usage: voxelize_v3.py [--list] [-DNAME=VALUE ...]", file=sys.stderr)
    sys.exit(2)
r = subprocess.run(["g++", "-std=c++20", *DEFINES, "-O1", "-ffp-contract=off", "-fPIC", "-shared", "-pthread", "-w",
                    f"-I{HERE}", "-o", str(BUILD / "libvox.so"), str(BUILD / "voxelize_host.cpp"),
                    str(HERE / "runtime.cpp")], capture_output=True, text=True, check=False)
if r.returncode:
    print(r.stderr[-6000:], file=sys.stderr)
    sys.exit(2)

# --- run --------------------------------------------------------------------------------------------
vx = importlib.import_module("robocache.voxelize")
lib = ctypes.CDLL(str(BUILD / "libvox.so"))
lib.rc_launch.argtypes = [ctypes.c_char_p, ctypes.c_uint, ctypes.c_uint, ctypes.c_void_p]
lib.rc_emu_dyn_smem.argtypes = [ctypes.c_ulonglong]
SMS = [132]
LOG = record_launches(L, SMS)
MEAN_GRID = [0]  # > 0: the mean pass launched with at most this many blocks


def fast_launch(fl, grid, kind, dev, ptrs, smem=0, struct_ptrs=None, block=256):
    slots = (ctypes.c_uint64 * len(fl.slots))(*fl.slots)
    for i, p in ptrs.items():
        slots[i] = p
    assert smem <= 48 * 1024
    if MEAN_GRID[0] and fl.name.startswith(("voxel_mean", "voxel_list_mean")):  # fewer blocks: the grid-stride loops
        grid = min(grid, MEAN_GRID[0])
    LOG.append((fl.name, grid, block))
    lib.rc_emu_dyn_smem(smem)  # the launch's dynamic shared memory, no more: an access past it crashes the emulator
    rc = lib.rc_launch(fl.name.encode(), grid, block, ctypes.addressof(slots))
    assert rc == 0, fl.name


L.fast_launch = fast_launch
L.memset_zero = lambda kind, dev, ptr, nbytes: ctypes.memset(ptr, 0, nbytes)  # cudaMemsetAsync on host memory
BOUNDS = ((-1.0, -1.0, -1.0), (1.0, 1.0, 1.0))
POISON = 0x7FF0A5A5  # every scratch word before a launch: NaN as a float32 sum, a huge count, a wild list entry
SCRATCH = []  # the last plan call's scratch buffer (the list path's counts and list are checked in it)
_real_scratch, _real_empty = vx._scratch, L.empty


def _poisoned_scratch(kind, words, like, dev):
    buf = _real_scratch(kind, words, like, dev)
    buf.fill_(POISON)
    SCRATCH[:] = [buf]
    return buf


def _poisoned_empty(kind, shape, like, dev):  # the plan's own output: NaN (all bits set) in every float dtype
    out = _real_empty(kind, shape, like, dev)
    out.view(torch.uint8).fill_(255)
    return out


vx._scratch = _poisoned_scratch
L.empty = _poisoned_empty


def check_list_scratch(plan, p64, g, tag):
    """The list path's scratch after a call: the list's length is the number of occupied voxels, the counts are the
    reference's, the header's other words zero, the list holds every occupied flat voxel index once."""
    buf = SCRATCH[0].numpy()
    cnt = reference.voxelize(p64, None, g, BOUNDS, "count").reshape(-1)
    occ = np.flatnonzero(cnt)
    assert buf[0] == occ.size and not buf[1:4].any(), (tag, buf[:4], occ.size)
    assert np.array_equal(buf[4:4 + cnt.size], cnt), tag
    wide = plan.lmain.slots[6]
    lo = plan.list_off // 4
    ent = buf[lo:lo + occ.size * (2 if wide else 1)]
    lst = ent.view(np.int64) if wide else ent
    assert np.array_equal(np.sort(lst), occ), tag


def run(dtype, c, clustered, mode, grid=(6, 5, 7), b=2, n=3000, offset=None, ints=False, seed=0, listed=False):
    """One plan call against the reference. clustered: True (a few blobs), False (uniform, some outside the bounds)
    or "sparse" (LiDAR-like: ranges log-uniform from 0.05 around the origin, so a few voxels at the sensor hold many
    points and most voxels none). listed: the plan must be the list path's (its scratch is checked too)."""
    rng = np.random.default_rng(seed)
    if clustered == "sparse":
        d = rng.standard_normal((b, n, 3))
        d /= np.linalg.norm(d, axis=2, keepdims=True)
        pts = d * np.exp(rng.uniform(np.log(0.05), np.log(1.5), (b, n, 1)))
    elif clustered:
        pts = rng.uniform(-0.8, 0.8, (b, 4, 3))[:, rng.integers(0, 4, n)] + 0.03 * rng.standard_normal((b, n, 3))
    else:
        pts = rng.uniform(-1.1, 1.1, (b, n, 3))
    if n > 4:
        pts[0, 0] = [np.nan, 0, 0]
        pts[0, 1] = [0, np.inf, 0]
        pts[0, 2] = [1.0, 0, 0]
        pts[0, 3] = [-1, -1, -1]
    feats = rng.integers(-40, 40, (b, n, c)).astype(np.float64) if ints else rng.standard_normal((b, n, c))
    tdt = getattr(torch, dtype)
    p, f = torch.from_numpy(pts).to(tdt), torch.from_numpy(feats).to(tdt)
    g, lo, hi, inv = vx._validate_grid_bounds(grid, BOUNDS)
    out_dtype = {"count": "int32", "occupancy": "bool"}.get(mode, dtype)
    out_shape = (b, *g) if mode != "mean" else (b, *g, c)
    pn = types.SimpleNamespace(kind="torch", dtype=dtype, device_index=0)
    plan = vx._plan_v3(pn, b, n, c if mode == "mean" else 0, g, lo, hi, inv, mode, out_shape, out_dtype)
    out = None
    if offset is not None:
        tout = {"int32": torch.int32, "bool": torch.bool}.get(out_dtype, tdt)
        size = int(np.prod(out_shape))
        buf = torch.empty(size + offset, dtype=tout)
        buf.view(torch.uint8).fill_(255)
        out = buf[offset:].view(*out_shape)
    LOG.clear()
    got = plan(p, f if mode == "mean" else None, out)
    p64, f64 = p.double().numpy(), f.double().numpy()
    want = reference.voxelize(p64, f64 if mode == "mean" else None, g, BOUNDS, mode)
    cloud = clustered if isinstance(clustered, str) else "clustered" if clustered else "uniform"
    tag = (f"{dtype} C{c} {cloud} {mode} B{b} N{n} G{grid} off={offset} sms={SMS[0]} {type(plan).__name__} "
           f"{[x[0] for x in LOG]} {[x[1:] for x in LOG]}")
    assert isinstance(plan, vx._PlanV3List) == listed, tag
    if listed:
        check_list_scratch(plan, p64, g, tag)
    if mode != "mean":
        assert np.array_equal(got.numpy(), want), tag
    else:
        gg = got.double().numpy()
        assert not np.isnan(gg).any(), tag
        tol = {"float32": 2e-6, "float16": 2e-3, "bfloat16": 1.6e-2}[dtype]
        err = float((np.abs(gg - want) / np.maximum(1, np.abs(want))).max())
        assert err <= tol, (tag, err)
        if ints and dtype == "float32":
            cnt = reference.voxelize(p64, None, g, BOUNDS, "count")
            sums = np.round(want * cnt[..., None])
            with np.errstate(all="ignore"):
                exact = np.where(cnt[..., None] > 0, sums.astype(np.float32) / cnt[..., None].astype(np.float32), np.float32(0))
            assert np.array_equal(got.numpy().view(np.uint32), exact.view(np.uint32)), tag
    print("ok", tag)


def list_cases():
    """The list path (TUNING["vox_list"] True) over every dtype, C = 1-16, uniform, clustered and sparse clouds,
    dropped points (NaN, inf, the upper bound, outside), ragged rows and blocks, misaligned outputs, integer features
    bit for bit, one- and zero-point clouds, int64 list entries, and a one-block mean (its grid-stride loop)."""
    L.TUNING["vox_list"] = True
    for sms in (1, 132):
        SMS[0] = sms
        for dtype in ("float32", "float16", "bfloat16"):
            for c in (1, 2, 3, 4, 5, 8, 13, 16):
                cloud = ("sparse", True, False)[c % 3]
                run(dtype, c, cloud, "mean", grid=(40, 40, 20), n=1500, seed=c, listed=True)
            run(dtype, 3, "sparse", "mean", grid=(40, 40, 20), n=700, offset=1, listed=True)
            run(dtype, 4, True, "mean", grid=(6, 5, 7), n=3000, offset=3, listed=True)  # dense rows: hot voxels
    SMS[0] = 1
    for dtype in ("float32", "float16", "bfloat16"):
        for cloud in ("sparse", True, False):
            run(dtype, 7, cloud, "mean", grid=(17, 9, 5), b=3, n=1025 if cloud is True else 2049, seed=12, listed=True)
        run(dtype, 5, True, "mean", n=1, grid=(9, 9, 9), listed=True)
        run(dtype, 3, "sparse", "mean", n=0, listed=True)
    for c in (3, 4, 16):
        run("float32", c, "sparse", "mean", grid=(40, 40, 20), n=1500, ints=True, seed=c, listed=True)
        run("float32", c, True, "mean", grid=(9, 9, 9), ints=True, seed=c, listed=True)
    wide = vx.LIST_WIDE_VOXELS
    vx.LIST_WIDE_VOXELS = 0  # int64 list entries
    for dtype in ("float32", "bfloat16"):
        run(dtype, 3, "sparse", "mean", grid=(40, 40, 20), b=3, n=700, seed=5, listed=True)
        run(dtype, 8, True, "mean", offset=1, listed=True)
    vx.LIST_WIDE_VOXELS = wide
    MEAN_GRID[0] = 1  # one block walks every listed element
    for dtype in ("float32", "float16"):
        for c in (1, 3, 16):
            run(dtype, c, "sparse", "mean", grid=(40, 40, 20), b=2, n=1500, seed=c, listed=True)
    MEAN_GRID[0] = 0
    L.TUNING["vox_list"] = False
    # off (the default): the dense path on the same poisoned buffers
    for dtype in ("float32", "bfloat16"):
        run(dtype, 3, "sparse", "mean", grid=(40, 40, 20), n=700, offset=1)
    SMS[0] = 132
    print("LIST OK")


list_cases()
if LIST_ONLY:
    sys.exit(0)
for sms in (132, 1):
    SMS[0] = sms
    for dtype in ("float32", "float16", "bfloat16"):
        for c in (1, 3, 4, 6, 8, 13):  # 1, 3, 13: one element a lane; 6: two (the flat walk); 4, 8: the row loop
            for clustered in (False, True):
                run(dtype, c, clustered, "mean", seed=c)
        run(dtype, 4, True, "mean", offset=1)
        run(dtype, 8, False, "mean", offset=2)
        run(dtype, 2, True, "count")
        run(dtype, 2, True, "occupancy")
        run(dtype, 2, False, "count", offset=1)
    run("float32", 4, True, "mean", ints=True)
    run("float32", 3, False, "mean", ints=True)
    run("float32", 4, True, "mean", n=0)
    L.TUNING["vox_hash"] = True
    run("float32", 2, True, "count")
    run("float16", 2, False, "count", offset=3)
    L.TUNING["vox_hash"] = None
MEAN_GRID[0] = 1  # one block walks every tile of voxels (the flat walk's and the row loop's grid-stride)
for dtype in ("float32", "bfloat16"):
    for c in (3, 4, 6, 13):
        run(dtype, c, True, "mean", grid=(9, 9, 9), b=3, seed=c)
    run("float32", 13, False, "mean", grid=(9, 9, 9), ints=True)
MEAN_GRID[0] = 0
# mean accumulated one feature element a thread (TUNING["vox_flat"]): C = 1 (every lane counts), 3, 6, 13 (a point's
# channels straddle warps and blocks), clustered (same-address atomics), a one-point cloud, integer features exact
# and through the hash inserted that way (TUNING["vox_flat"] = "hash", voxel_hashed_flat_v3): the same cases; False:
# the thread-per-point hash (voxel_hashed_v3, still mean's path where N * C >= 2^31 - 1024, and with -DRC_V3_FLAT_FLUSH=1)
for flat in (True, "hash", False):
    L.TUNING["vox_flat"] = flat
    for dtype in ("float32", "float16", "bfloat16"):
        for c in (1, 3, 6, 13):
            run(dtype, c, c % 2 == 1, "mean", seed=c)
        run(dtype, 5, True, "mean", n=1, grid=(9, 9, 9))
    run("float32", 7, True, "mean", ints=True)
    run("float32", 4, False, "mean", n=0)
    run("bfloat16", 16, True, "mean", offset=1)
    # 32,000 voxels a row: uniform rounds take a new slot for most points (the hash's rounds go straight to the
    # grid), clustered ones mix both kinds of round
    for dtype in ("float32", "float16"):
        for clustered in (False, True):
            run(dtype, 3, clustered, "mean", grid=(40, 40, 20), n=3000, seed=7)
    run("float32", 5, False, "mean", grid=(40, 40, 20), n=3000, ints=True)
    # three rows, partial last blocks and rounds (N = 5001), C = 16 (the table's 512 slots, 128-thread blocks)
    for clustered in (False, True):
        run("float32", 16, clustered, "mean", grid=(40, 40, 20), b=3, n=5001, seed=11)
    run("float16", 7, True, "mean", grid=(17, 9, 5), b=3, n=4099, seed=12)
    run("float32", 9, False, "mean", grid=(40, 40, 20), b=3, n=2001, ints=True)
# more channels than the table holds (the hash settings would take v2's accumulate, whose warp intrinsics the
# emulator lacks): the flat accumulate; C = 300 > blockDim (the element stepping's quotient 0, remainder 256)
for flat in (None, True):
    L.TUNING["vox_flat"] = flat
    for c in (40, 300):
        run("float32", c, True, "mean", grid=(9, 9, 9), b=2, n=301 if c == 300 else 2001, seed=c)
L.TUNING["vox_flat"] = None
# a sparse grid: whole tiles of 256 empty voxels (zeroed with 16-byte stores, or skipped in place), misaligned too
for dtype in ("float32", "bfloat16", "float16"):
    for c in (3, 13):
        run(dtype, c, True, "mean", grid=(40, 40, 20), n=300, seed=c)
    run(dtype, 3, True, "mean", grid=(40, 40, 20), n=300, offset=1)
run("float32", 2, True, "occupancy", grid=(40, 40, 20), n=3000)
for dtype in ("float32", "bfloat16"):  # 32,800 voxels a row: a partial last tile, mostly empty
    run(dtype, 3, True, "mean", grid=(41, 40, 20), n=300, offset=1 if dtype == "bfloat16" else None)
print("ALL OK")

# a crowded table: 16 slots for 1024-point blocks, so most points overflow their 16 probes to global atomics
orig = vx._v3_hash_shape
vx._v3_hash_shape = lambda c, b, n, sms, flat=False: (4, 1024, 16 * (2 + c) * 4 + (16 + 16 + 4 * 512 if flat else 0), 512)
# False: the thread-per-point hash (None, the default, accumulates flat and never builds the table); "hash": the flat
# insert, crowded points' features straight to the grid, one element a thread
for flat in (False, "hash"):
    L.TUNING["vox_flat"] = flat
    for dtype in ("float32", "bfloat16"):
        run(dtype, 5, False, "mean", n=5000, grid=(9, 9, 9))
        run(dtype, 4, True, "mean", n=5000, ints=True)
L.TUNING["vox_flat"] = None
L.TUNING["vox_hash"] = True
run("float32", 0, False, "count", n=5000, grid=(9, 9, 9))
run("float32", 0, False, "occupancy", n=5000, grid=(9, 9, 9))
run("bfloat16", 0, True, "occupancy", n=5000)
print("CROWDED OK")


def occupancy_view(offset, use_hash, b=2, n=3000, grid=(7, 9, 11)):
    """Occupancy (a word atomicOr a voxel, rc_occ_set) into a view 0-3 bytes past a word boundary inside a
    poisoned buffer, its first and last voxels occupied: the grid equals the reference, no byte around it moves."""
    L.TUNING["vox_hash"] = use_hash
    rng = np.random.default_rng(offset)
    pts = rng.uniform(-0.8, 0.8, (b, 4, 3))[:, rng.integers(0, 4, n)] + 0.03 * rng.standard_normal((b, n, 3))
    for z in range(4):  # voxel centres: the grid's first and last four voxels
        pts[0, z] = [-1 + 1 / grid[0], -1 + 1 / grid[1], -1 + (2 * z + 1) / grid[2]]
        pts[b - 1, z] = [1 - 1 / grid[0], 1 - 1 / grid[1], -1 + (2 * (grid[2] - 4 + z) + 1) / grid[2]]
    p = torch.from_numpy(pts).float()
    g, lo, hi, inv = vx._validate_grid_bounds(grid, BOUNDS)
    pn = types.SimpleNamespace(kind="torch", dtype="float32", device_index=0)
    plan = vx._plan_v3(pn, b, n, 0, g, lo, hi, inv, "occupancy", (b, *g), "bool")
    size = b * int(np.prod(g))
    buf = torch.full((size + 8,), 0x5A, dtype=torch.uint8)
    LOG.clear()
    plan(p, None, buf[offset:offset + size].view(torch.bool).view(b, *g))
    want = reference.voxelize(p.double().numpy(), None, g, BOUNDS, "occupancy")
    host = buf.numpy()
    tag = f"occupancy view off={offset} hash={use_hash} {[x[0] for x in LOG]}"
    assert want.reshape(-1)[:4].all() and want.reshape(-1)[-4:].all(), tag
    assert np.array_equal(host[offset:offset + size].reshape(b, *g), want.astype(np.uint8)), tag
    assert (host[:offset] == 0x5A).all() and (host[offset + size:] == 0x5A).all(), tag
    print("ok", tag)


for use_hash in (True, False):
    for offset in range(4):
        occupancy_view(offset, use_hash)
L.TUNING["vox_hash"] = None
print("OCCUPANCY VIEWS OK")
