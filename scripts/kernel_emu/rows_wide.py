"""The kernels of resample and fuse in kernels/rows_wide.cu (the column split, the shifted vectors, the staged kernel
and its span) on the CPU: compiled with g++ against the host shims (scripts/kernel_emu/shim.h: one std::thread per
CUDA thread, blocks one after another), driven through the real plans (robocache/resample.py and robocache/fuse.py
``_plan_v2`` with ``Config(cs=...)``, ``Config(shift=1)``, ``Config(stage=1, 2 or 3)``: FastLaunch's argument slots and
by-value stream table, grids, blocks) and checked against the NumPy reference.

    python3 scripts/kernel_emu/rows_wide.py     # needs g++ >= 12 (C++20, _Float16); about 3.5 minutes on 2 cores

A development check of logic (warp and chunk index math, the loaded-first vectors and the loop past them, vector
widths, narrow streams beside wide ones, rows of one warp's vectors left to the row kernel; the span's run of source
rows, its shared-memory buffer and its fallback to the staged copy), and of every vector access's alignment (shim.h
RC_EMU_CHECK_ALIGN: the GPU faults where the host reads on), with values and outputs off the 16-byte grid, and of
the flat kernel's dynamic shared memory against what its launch asks for (exactly those bytes, then a page that
faults: runtime.cpp ``rc_emu_dyn_smem``); not of the GPU: no memory model or timing. No substitute for tests/gpu.
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

from robocache import _launch as L  # noqa: E402
from robocache import _tune, reference  # noqa: E402

rs = importlib.import_module("robocache.resample")  # the modules (robocache.resample is also the function)
fz = importlib.import_module("robocache.fuse")

SRC = host_source("rows_wide")
# the staged kernel's __shared__ arrays carved out of the emulator's shared buffer, which runtime.cpp fills with
# garbage before every block (as the GPU's shared memory holds whatever it held): an entry read before it is written
# reads garbage, never a stale plausible one
for decl, new in (("__shared__ long long rc_st_r0[RC_STAGE_T];",
                   "long long* rc_st_r0 = reinterpret_cast<long long*>(g_smem);"),
                  ("__shared__ long long rc_st_r1[RC_STAGE_T];",
                   "long long* rc_st_r1 = reinterpret_cast<long long*>(g_smem) + RC_STAGE_T;"),
                  ("__shared__ float rc_st_w[RC_STAGE_T];",
                   "float* rc_st_w = reinterpret_cast<float*>(reinterpret_cast<long long*>(g_smem) + 2 * RC_STAGE_T);")):
    if decl not in SRC:
        sys.exit(f"kernel_emu/rows_wide.py: kernels/rows_wide.cu no longer declares {decl!r}")
    SRC = SRC.replace(decl, new)
# the span's (stage = 2) the same way, one after another without overlap: the brackets (8-byte aligned), the run's
# first and last rows (scalars: references), the run (16-byte aligned), RC_SPAN_BYTES within g_smem
SP = "(g_smem + 20 * RC_STAGE_T)"  # past r0, r1 (8 bytes a target) and w (4): the scalars, then the run
for decl, new in (("__shared__ long long rc_sp_r0[RC_STAGE_T];",
                   "long long* rc_sp_r0 = reinterpret_cast<long long*>(g_smem);"),
                  ("__shared__ long long rc_sp_r1[RC_STAGE_T];",
                   "long long* rc_sp_r1 = reinterpret_cast<long long*>(g_smem + 8 * RC_STAGE_T);"),
                  ("__shared__ float rc_sp_w[RC_STAGE_T];",
                   "float* rc_sp_w = reinterpret_cast<float*>(g_smem + 16 * RC_STAGE_T);"),
                  ("__shared__ unsigned long long rc_sp_lo, rc_sp_hi;",
                   f"unsigned long long& rc_sp_lo = *reinterpret_cast<unsigned long long*>{SP};"
                   f" unsigned long long& rc_sp_hi = *reinterpret_cast<unsigned long long*>({SP} + 8);"),
                  ("__shared__ uint4 rc_sp_buf[RC_SPAN_BYTES / 16];",
                   f"uint4* rc_sp_buf = reinterpret_cast<uint4*>({SP} + 16);"
                   " static_assert(RC_STAGE_T % 4 == 0 && 20 * RC_STAGE_T + 16 + RC_SPAN_BYTES <= RC_EMU_SMEM_BYTES);"),
                  # which path each block took (rc_emu_span_paths: the run in shared memory, the staged copy for a
                  # run past RC_SPAN_BYTES, for rows past RC_SPAN_MAX_D), and no store past the run's buffer
                  ("        rc_staged_copy<T, 0>(values, rc_sp_r0, rc_sp_r1, rc_sp_w, D, col, lg, out, n_targets, out_stride,"
                   " first);\n        return;",
                   "        if (tid == 0) ++rc_emu_span_paths[D > RC_SPAN_MAX_D ? 2 : 1];\n"
                   "        rc_staged_copy<T, 0>(values, rc_sp_r0, rc_sp_r1, rc_sp_w, D, col, lg, out, n_targets, out_stride,"
                   " first);\n        return;"),
                  ("    const uint4* __restrict__ run = reinterpret_cast<const uint4*>(a0);",
                   "    if (tid == 0) ++rc_emu_span_paths[0];\n"
                   "    const uint4* __restrict__ run = reinterpret_cast<const uint4*>(a0);"),
                  ("rc_sp_buf[k] = __ldg(run + k);", "rc_sp_buf[rc_emu_span_slot(k)] = __ldg(run + k);")):
    if decl not in SRC:
        sys.exit(f"kernel_emu/rows_wide.py: kernels/rows_wide.cu no longer holds {decl!r}")
    SRC = SRC.replace(decl, new)
# the flat kernel's (stage = 5) dynamic shared memory: exactly the launch's bytes before a page that faults
# (runtime.cpp g_dyn_smem), garbage before every block
FLAT_DECL = "extern __shared__ long long rc_fl_sh[];"
if FLAT_DECL not in SRC:
    sys.exit(f"kernel_emu/rows_wide.py: kernels/rows_wide.cu no longer holds {FLAT_DECL!r}")
SRC = SRC.replace(FLAT_DECL, "long long* rc_fl_sh = reinterpret_cast<long long*>(g_dyn_smem);")
SPAN_HOOKS = """
extern "C" { long long rc_emu_span_paths[3]; }  // blocks of the span: run in shared memory, run too long, D too large
inline int rc_emu_span_slot(int k) {
    if (k < 0 || k >= RC_SPAN_BYTES / 16) {
        std::fprintf(stderr, "kernel_emu: the span's run stored at vector %d of %d\\n", k, RC_SPAN_BYTES / 16);
        std::abort();
    }
    return k;
}
"""
HOOK_AT = "template <typename T>\n__device__ __forceinline__ void rc_store_cs("
if HOOK_AT not in SRC:
    sys.exit(f"kernel_emu/rows_wide.py: kernels/rows_wide.cu no longer holds {HOOK_AT!r}")
SRC = SRC.replace(HOOK_AT, SPAN_HOOKS + HOOK_AT, 1)
(BUILD / "rows_host.cpp").write_text('#include "shim.h"\n' + SRC + '\n#include "rows_entries.inc"\n')
# RC_EMU_CHECK_ALIGN: every vector load and store checked against its width (shim.h), as the GPU faults on it
r = subprocess.run(["g++", "-std=c++20", "-O1", "-ffp-contract=off", "-fPIC", "-shared", "-pthread", "-w", f"-I{HERE}",
                    "-DRC_EMU_CHECK_ALIGN", "-DRC_EMU_SHFL_SYNC",
                    "-o", str(BUILD / "librows.so"), str(BUILD / "rows_host.cpp"), str(HERE / "runtime.cpp")],
                   capture_output=True, text=True, check=False)
if r.returncode:
    print(r.stderr[-6000:], file=sys.stderr)
    sys.exit(2)
lib = ctypes.CDLL(str(BUILD / "librows.so"))
lib.rc_launch.argtypes = [ctypes.c_char_p, ctypes.c_uint, ctypes.c_uint, ctypes.c_void_p]
lib.rc_emu_dyn_smem.argtypes = [ctypes.c_ulonglong]
SMS = [132]
LOG = record_launches(L, SMS)


def fast_launch(fl, grid, kind, dev, ptrs, smem=0, struct_ptrs=None, block=256):
    slots = (ctypes.c_uint64 * len(fl.slots))(*fl.slots)
    for i, p in ptrs.items():
        slots[i] = p
    if fl.struct_buf is not None:  # the table by value: its bytes with this call's pointers, its address in slot 0
        table = (ctypes.c_int64 * len(fl.struct_buf))(*fl.struct_buf)
        for i, p in (struct_ptrs or {}).items():
            table[i] = p
        slots[0] = ctypes.addressof(table)
    LOG.append((fl.name, grid, block))
    lib.rc_emu_dyn_smem(smem)  # the launch's dynamic shared memory, no more: an access past it crashes the emulator
    assert lib.rc_launch(fl.name.encode(), grid, block, ctypes.addressof(slots)) == 0, fl.name


L.fast_launch = fast_launch
TOL = {"float32": 2e-6, "float16": 2e-3, "bfloat16": 1.6e-2}


def times(rng, b, n, tdt, jitter=True):
    t = np.sort(rng.uniform(0, 1, (b, n)), axis=1) if jitter else np.tile(np.linspace(0, 1, n), (b, 1))
    return torch.from_numpy(t).to(tdt)


def untouched(out, tag):
    """The poisoned elements around a shifted output (``shifted``) are still NaN: nothing stored outside it."""
    if out is None:
        return
    base, first = out._base, out.storage_offset()
    assert bool(base[:first].isnan().all()) and bool(base[first + out.numel():].isnan().all()), ("outside", tag)


def check(got, want, tag, dtype):
    g = got.double().numpy()
    err = float((np.abs(g - want) / np.maximum(1, np.abs(want))).max()) if want.size else 0.0
    assert err <= TOL[dtype], (tag, err)
    print("ok", tag, LOG[-1][1:])


def shifted(shape, dtype, shift, fill=None):
    """A C-contiguous tensor of ``shape`` whose data start ``shift`` elements into its storage: a pointer that the
    vector rule (``_launch.vector_bytes``) must see, as a slice of a larger array has on the GPU."""
    n = int(np.prod(shape))
    base = torch.full((n + shift + 8,), float("nan"), dtype=dtype)  # neighbours poisoned: read, never stored
    t = base[shift: shift + n].view(shape)
    if fill is not None:
        t.copy_(fill)
    return t


STAGED = ("", "staged", "span", "tile")  # the kernel of each Config.stage
LAST_PACKED: list = [[]]  # the last fuse plan's packed table fields (vb | lg << 8 ... per stream)


def run_resample(dtype, tdtype, b, s, t, d, cs, seed=0, shift=0, oshift=0, sv=0, st=0):
    rng = np.random.default_rng(seed)
    tdt, vdt = getattr(torch, tdtype), getattr(torch, dtype)
    vals = shifted((b, s, d), vdt, shift, torch.from_numpy(rng.standard_normal((b, s, d))).to(vdt))
    src = times(rng, b, s, tdt)
    tgt = torch.from_numpy(rng.uniform(-0.1, 1.1, (b, t))).to(tdt)  # some before and after the row: clamped
    tgt[0, 0] = float("nan") if t > 1 else tgt[0, 0]
    v = types.SimpleNamespace(shape=tuple(vals.shape), dtype=dtype, kind="torch", device_index=0)  # host tensors
    sa = types.SimpleNamespace(dtype=tdtype)
    out = shifted((b, t, d), vdt, oshift) if oshift else None
    plan = rs._plan_v2(v, sa, vals, out.data_ptr() if oshift else 0, t, _tune.Config(cs=cs, shift=sv, stage=st))
    if plan.fl.name.startswith("resample_v2_"):  # rows of one warp's vectors: the row kernel (not built here)
        es = vals.element_size()
        assert _tune.wide_split(cs, d * es // L.vector_bytes(es, (d * es,), (vals.data_ptr(), 0))) == 0, d
        print("ok", f"resample {dtype}/{tdtype} D{d} cs{cs}: the row kernel's launch")
        return
    got = plan(vals, src, tgt, out)
    want = reference.resample(vals.double().numpy(), src.double().numpy(), tgt.double().numpy(), out_dtype=None)
    assert LOG[-1][0] == f"resample_{STAGED[st] if st else 'shift' if sv else 'wide'}_{dtype}_{tdtype}"
    nan = np.isnan(want)
    assert np.array_equal(np.isnan(got.double().numpy()), nan), "NaN targets"
    untouched(out, f"resample D{d}")
    check(got.masked_fill(torch.from_numpy(nan), 0), np.where(nan, 0, want),
          f"resample {dtype}/{tdtype} B{b} S{s} T{t} D{d} "
          + (f"{STAGED[st] if st else 'shift'} {'vb' if st == 3 else 'lg'}{plan.fl.slots[8]}" if sv or st
             else f"cs{cs} vb{plan.fl.slots[8]}")
          + f" sms={SMS[0]}"
          + (f" shifted {shift}/{oshift}" if shift or oshift else ""), dtype)


def run_fuse(dtype, tdtype, b, t, streams, cs, seed=0, shift=0, oshift=0, sv=0, st=0):
    rng = np.random.default_rng(seed)
    tdt, vdt = getattr(torch, tdtype), getattr(torch, dtype)
    # the first stream's values `shift` elements into their storage, the output `oshift`
    arrays = [(shifted((b, s, d), vdt, shift if k == 0 else 0, torch.from_numpy(rng.standard_normal((b, s, d))).to(vdt)),
               times(rng, b, s, tdt, jitter=k % 2 == 0)) for k, (s, d) in enumerate(streams)]
    tgt = torch.from_numpy(np.sort(rng.uniform(-0.1, 1.1, (b, t)), axis=1)).to(tdt)
    pairs = [(types.SimpleNamespace(shape=tuple(v.shape), dtype=dtype), None) for v, _ in arrays]
    ta = types.SimpleNamespace(shape=tuple(tgt.shape), dtype=tdtype, kind="torch", device_index=0)
    out = shifted((b, t, sum(d for _, d in streams)), vdt, oshift) if oshift else None
    plan = fz._plan_v2(pairs, ta, arrays, out.data_ptr() if oshift else 0,
                       _tune.Config(cs=cs, shift=sv, stage=st))
    got = plan(arrays, tgt, out)
    want = reference.fuse([(v.double().numpy(), ts.double().numpy()) for v, ts in arrays], tgt.double().numpy())
    untouched(out, f"fuse {streams}")
    assert LOG[-1][0] == f"fuse_{STAGED[st] if st else 'shift' if sv else 'wide'}_{dtype}_{tdtype}"
    packed = [int(plan.fl.struct_buf[fz.FUSE2_FIELDS * k + 5]) for k in range(len(streams))]
    LAST_PACKED[0] = packed
    geo = (f"{STAGED[st] if st else 'shift'} lg{[p >> 8 & 0xff for p in packed]} vb{[p & 0xff for p in packed]}"
           if sv or st
           else f"cs{cs} vb{[p & 0xff for p in packed]}")
    check(got, want, f"fuse {dtype}/{tdtype} B{b} T{t} {streams} {geo} sms={SMS[0]}"
          + (f" shifted {shift}/{oshift}" if shift or oshift else ""), dtype)


for sms in (132, 1):  # 132: one-warp blocks (few warps), 1: 256-thread blocks with a ragged last one
    SMS[0] = sms
    for dtype in ("float32", "float16", "bfloat16"):
        for tdtype in ("float32", "float64"):
            # D: one vector a lane at most, the loaded-first vectors exactly, past them (the loop), odd (scalars)
            # (132: 33 vectors, a second warp with one; 64: 32 vectors or fewer, the row kernel's launch)
            for d, cs in ((132, 1), (600, 2), (1031, 3), (2048, 1), (37, 2), (64, 3)):
                run_resample(dtype, tdtype, 3, 9, 5, d, cs, seed=d)
        run_resample(dtype, "float32", 1, 2, 1, 717, 3)  # one target, S = 2
    for dtype in ("float32", "bfloat16"):
        # a wide stream beside narrow ones (theirs split less, or not at all), the streams' order in the table
        run_fuse(dtype, "float32", 2, 7, [(11, 3), (23, 717), (5, 1), (9, 130)], 3, seed=1)
        run_fuse(dtype, "float64", 3, 5, [(40, 1000)], 2, seed=2)
        run_fuse(dtype, "float32", 1, 50, [(234, 717)], 3, seed=3)
    # pointers off the 16-byte grid (slices of larger arrays): the values, the output, or both, one element or
    # more in; the vector width must follow them, every access aligned (RC_EMU_CHECK_ALIGN)
    for dtype in ("float32", "float16"):
        for shift, oshift in ((1, 0), (0, 1), (2, 3), (4, 0)):
            run_resample(dtype, "float32", 3, 9, 5, 1032, 2, seed=7, shift=shift, oshift=oshift)
            run_fuse(dtype, "float32", 2, 7, [(23, 720), (11, 4), (9, 136)], 3, seed=4, shift=shift, oshift=oshift)
# shifted vectors (Config(shift=1)): rows of any length and alignment, values and output off the 16-byte grid by
# every element count a 16-byte vector holds, groups of 1-32 lanes, dead groups past the last target
for sms in (132, 1):
    SMS[0] = sms
    for dtype in ("float32", "float16", "bfloat16"):
        for tdtype in ("float32", "float64"):
            for d in (1, 3, 5, 8, 37, 130, 855):
                run_resample(dtype, tdtype, 3, 9, 5, d, 0, seed=d, sv=1)
    for dtype, es in (("float32", 4), ("float16", 2)):
        for shift, oshift in ((1, 0), (0, 1), (3, 2), (16 // es - 1, 5 % (16 // es)), (2, 16 // es - 1)):
            run_resample(dtype, "float32", 2, 7, 6, 71, 0, seed=shift, shift=shift, oshift=oshift, sv=1)
            run_fuse(dtype, "float32", 2, 5, [(23, 37), (11, 3), (9, 64), (5, 1)], 0, seed=shift, shift=shift,
                     oshift=oshift, sv=1)
    run_resample("bfloat16", "float64", 1, 2, 1, 717, 0, sv=1)  # one target, S = 2
    run_fuse("float32", "float64", 3, 5, [(40, 1001)], 0, seed=2, sv=1)
# the staged kernel (Config(stage=1)): blocks of 256 targets, the last one ragged, rows of 1-855 elements off the
# grid, several streams (each its own blocks)
for dtype in ("float32", "float16", "bfloat16"):
    for tdtype in ("float32", "float64"):
        for d in (1, 3, 37, 130, 855):
            run_resample(dtype, tdtype, 3, 9, 131, d, 0, seed=d, st=1)  # 393 targets: two blocks, the second ragged
        run_fuse(dtype, tdtype, 3, 100, [(23, 37), (11, 3), (9, 64), (5, 1)], 0, seed=8, st=1)
for dtype, es in (("float32", 4), ("float16", 2)):
    for shift, oshift in ((1, 0), (0, 1), (3, 2), (16 // es - 1, 5 % (16 // es))):
        run_resample(dtype, "float32", 2, 7, 200, 71, 0, seed=shift, shift=shift, oshift=oshift, st=1)
        run_fuse(dtype, "float32", 2, 150, [(23, 37), (11, 3), (9, 64), (5, 1)], 0, seed=shift, shift=shift,
                 oshift=oshift, st=1)
run_resample("float32", "float32", 1, 2, 1, 717, 0, st=1)  # one target: one block, 255 dead rows
# the tile (Config(stage=3)): a warp's 32 targets bracketed by its lanes, rows by the row kernel's vectors; the same
# shapes as the staged kernel's (rows of 1-855 elements: one vector a lane to several batches), outputs off the grid
for dtype in ("float32", "float16", "bfloat16"):
    for tdtype in ("float32", "float64"):
        for d in (1, 3, 37, 130, 855, 2100):
            run_resample(dtype, tdtype, 3, 9, 131, d, 0, seed=d, st=3)  # 393 targets: two blocks, ragged warps
        run_fuse(dtype, tdtype, 3, 100, [(23, 37), (11, 3), (9, 64), (5, 1)], 0, seed=8, st=3)
for dtype, es in (("float32", 4), ("float16", 2)):
    for shift, oshift in ((1, 0), (0, 1), (3, 2), (16 // es - 1, 5 % (16 // es))):
        run_resample(dtype, "float32", 2, 7, 200, 71, 0, seed=shift, shift=shift, oshift=oshift, st=3)
        run_fuse(dtype, "float32", 2, 150, [(23, 37), (11, 3), (9, 64), (5, 1)], 0, seed=shift, shift=shift,
                 oshift=oshift, st=3)
run_resample("float32", "float32", 1, 2, 1, 717, 0, st=3)  # one target: one block, 255 dead targets
# 16-byte vectors: resample rows of 8-1000 elements on the grid, and fuse streams whose widths, columns and output
# row keep every stream on the grid (the tile reads each stream's vector bytes from the table: assert it got 16)
for dtype in ("float32", "float16", "bfloat16"):
    for d in (8, 64, 1000):
        run_resample(dtype, "float32", 3, 9, 131, d, 0, seed=d, st=3)
    dims = [(11, 8), (9, 64), (5, 700 if dtype == "float32" else 696)]
    run_fuse(dtype, "float32", 3, 100, dims, 0, seed=9, st=3)
    assert all(p & 0xff == 16 for p in LAST_PACKED[0]), (dtype, LAST_PACKED[0])


def fuse_sixteen(dtype, tdtype, seed, b, t, spec, nan_at, oshift):
    """fuse of sixteen streams (the table's most), stream k's values k % 8 elements off the 16-byte grid, a NaN
    target at ``nan_at``, the output ``oshift`` elements off: the staged kernel, the shifted vectors at 64-thread
    blocks, the tile and the shifted vectors at the rule's, each bit for bit the last one's output, and that output the NumPy reference's. The
    generator is returned for more draws."""
    rng = np.random.default_rng(seed)
    tdt, vdt = getattr(torch, tdtype), getattr(torch, dtype)
    arrays = [(shifted((b, s, d), vdt, k % 8, torch.from_numpy(rng.standard_normal((b, s, d))).to(vdt)),
               times(rng, b, s, tdt)) for k, (s, d) in enumerate(spec)]
    tgt = torch.from_numpy(rng.uniform(-0.1, 1.1, (b, t))).to(tdt)
    tgt[nan_at] = float("nan")
    pairs = [(types.SimpleNamespace(shape=tuple(v.shape), dtype=dtype), None) for v, _ in arrays]
    ta = types.SimpleNamespace(shape=tuple(tgt.shape), dtype=tdtype, kind="torch", device_index=0)
    outs = []
    for cfg in (_tune.Config(stage=1), _tune.Config(shift=1, block=64), _tune.Config(stage=3), _tune.Config(shift=1)):
        out = shifted((b, t, sum(d for _, d in spec)), vdt, oshift)
        outs.append(fz._plan_v2(pairs, ta, arrays, out.data_ptr(), cfg)(arrays, tgt, out))
        untouched(out, f"fuse 16 streams B{b} T{t} {cfg}")
    assert LOG[-4][0].startswith("fuse_staged") and LOG[-4][1] == 16 * -(-b * t // _tune.STAGE_TARGETS), LOG[-4]
    assert LOG[-2][0].startswith("fuse_tile") and LOG[-2][1] == 16 * -(-b * t // _tune.STAGE_TARGETS), LOG[-2]
    clean = [o.nan_to_num(7.0) for o in outs]
    assert all(torch.equal(c, clean[3]) for c in clean[:3]), ("staged/tile/shift differ", dtype, tdtype)
    outs = [outs[0], outs[1], outs[3]]
    want = reference.fuse([(v.double().numpy(), ts.double().numpy()) for v, ts in arrays], tgt.double().numpy())
    nan = np.isnan(want)
    assert np.array_equal(np.isnan(outs[2].double().numpy()), nan), "NaN targets"
    check(outs[2].masked_fill(torch.from_numpy(nan), 0), np.where(nan, 0, want),
          f"fuse {dtype}/{tdtype} 16 streams B{b} T{t}: staged = tile = shift, bit for bit", dtype)
    return rng


# sixteen streams of S = 1-23 and one ragged staged block each; then of three blocks each (561 targets, the last
# block ragged); then resample D 1-855 over three blocks, the staged kernel bit for bit the shifted vectors
for dtype in ("float32", "float16", "bfloat16"):
    for tdtype in ("float32", "float64"):
        if dtype != "float16":
            fuse_sixteen(dtype, tdtype, 16, 2, 9, [(1 + (k * 7) % 23, 1 + (k * 37) % 100) for k in range(16)],
                         (1, 4), 3)
        rng = fuse_sixteen(dtype, tdtype, 561, 3, 187, [(1 + (k * 5) % 19, 1 + (k * 29) % 90) for k in range(16)],
                           (2, 100), 5)
        tdt, vdt = getattr(torch, tdtype), getattr(torch, dtype)
        for d in (1, 3, 37, 130, 855):
            vals = shifted((3, 11, d), vdt, 3, torch.from_numpy(rng.standard_normal((3, 11, d))).to(vdt))
            src = times(rng, 3, 11, tdt)
            tt = torch.from_numpy(rng.uniform(-0.1, 1.1, (3, 200))).to(tdt)
            v = types.SimpleNamespace(shape=tuple(vals.shape), dtype=dtype, kind="torch", device_index=0)
            got = [rs._plan_v2(v, types.SimpleNamespace(dtype=tdtype), vals, 0, 200, cfg)(vals, src, tt, None)
                   for cfg in (_tune.Config(stage=1), _tune.Config(shift=1), _tune.Config(stage=3))]
            assert torch.equal(got[0].nan_to_num(7.0), got[1].nan_to_num(7.0)), ("staged differs", d, dtype, tdtype)
            assert torch.equal(got[2].nan_to_num(7.0), got[1].nan_to_num(7.0)), ("tile differs", d, dtype, tdtype)
        print("ok", f"{dtype}/{tdtype}: staged = tile = shift bit for bit (fuse 16 streams x 3 blocks, resample)")


# the span (Config(stage=2)): a block's 256 targets bracketed as the staged kernel does, then their run of source rows
# loaded once into shared memory (g_smem, garbage before every block) and mixed from there; a block whose run is
# longer than RC_SPAN_BYTES, or whose rows are wider than RC_SPAN_MAX_D, copies as the staged kernel. Each launch is
# checked bit for bit against the staged kernel's (itself the shifted vectors' above), against the reference, for
# nothing stored outside its output, and for the path each block took (rc_emu_span_paths) against the model of the
# kernel's choice below: several launches take both paths.
SPAN_BYTES, SPAN_MAX_D = (int(re.search(rf"#define {m} (\d+)", SRC).group(1)) for m in ("RC_SPAN_BYTES", "RC_SPAN_MAX_D"))
assert SPAN_BYTES == _tune.SPAN_BYTES, (SPAN_BYTES, _tune.SPAN_BYTES)
SPAN_PATHS = (ctypes.c_longlong * 3).in_dll(lib, "rc_emu_span_paths")
# e / D by the multiply (m = ceil(2^32 / D)) exact wherever the span uses it (e < RC_STAGE_T * D, D <= RC_SPAN_MAX_D):
# the worst e of each quotient, e = q * D + D - 1
_d = np.arange(1, SPAN_MAX_D + 1, dtype=np.uint64)[:, None]
_q = np.arange(_tune.STAGE_TARGETS, dtype=np.uint64)[None, :]
_e = _q * _d + _d - np.uint64(1)
assert ((_e * (((np.uint64(1) << np.uint64(32)) + _d - np.uint64(1)) // _d)) >> np.uint64(32) == _q).all()


def span_model(vals, src, tgt):
    """The span's path for each of a stream's blocks (its values ``vals`` (B, S, D), source times ``src``, target
    times ``tgt`` (B, T)), as [run in shared memory, run too long, rows too wide] counts: every live target's
    bracket rows (the last source time <= the target, clamped at both ends; a NaN target row 0), the block's run of
    source rows [lo, hi] in aligned 16-byte vectors against RC_SPAN_BYTES."""
    b, s, d = vals.shape
    row, x = src.numpy(), tgt.numpy()
    j = np.stack([np.searchsorted(row[i], x[i], side="right") - 1 for i in range(b)])
    clamp = np.isnan(x) | (j < 0)
    j0 = np.where(clamp, 0, np.minimum(j, s - 1))
    j1 = np.where(clamp, 0, np.minimum(j + 1, s - 1))
    base = (np.arange(b) * s)[:, None]
    g0, g1 = (base + j0).ravel(), (base + j1).ravel()
    es, ptr = vals.element_size(), vals.data_ptr()
    paths = [0, 0, 0]
    for first in range(0, g0.size, _tune.STAGE_TARGETS):
        blk = slice(first, first + _tune.STAGE_TARGETS)
        lo, hi = int(min(g0[blk].min(), g1[blk].min())), int(max(g0[blk].max(), g1[blk].max()))
        start, end = ptr + lo * d * es, ptr + (hi + 1) * d * es
        nv = (((end + 15) & ~15) - (start & ~15)) >> 4
        paths[2 if d > SPAN_MAX_D else 1 if nv > SPAN_BYTES // 16 else 0] += 1
    return paths


def bits(x):
    return x.view(torch.int32 if x.element_size() == 4 else torch.int16)


def spanned(run, out_of, want, tag, dtype, model, need=None):
    """``run(cfg, out)`` through the span and the staged kernel into fresh outputs (``out_of()``: a poisoned one,
    ``shifted``): bit for bit equal, ``want`` (the reference) within TOL, NaN where it is, nothing stored outside,
    the span's blocks on the paths ``model`` says; ``need``: path indices some block must take."""
    outs = []
    for cfg in (_tune.Config(stage=2), _tune.Config(stage=1)):
        before = list(SPAN_PATHS)
        o = out_of()
        outs.append(run(cfg, o))
        untouched(o, tag)
        if cfg.stage == 2:
            assert LOG[-1][0].split("_")[1] == "span", LOG[-1]
            took = [a - b for a, b in zip(SPAN_PATHS, before)]
            assert took == model and sum(took) == LOG[-1][1], ("span paths", tag, took, model, LOG[-1])
        else:
            assert LOG[-1][0].split("_")[1] == "staged", LOG[-1]
    assert torch.equal(bits(outs[0]), bits(outs[1])), ("span differs from staged", tag)
    nan = np.isnan(want)
    assert np.array_equal(np.isnan(outs[0].double().numpy()), nan), ("NaN targets", tag)
    for i in need or ():
        assert model[i], ("a path untaken", tag, model)
    check(outs[0].masked_fill(torch.from_numpy(nan), 0), np.where(nan, 0, want),
          f"{tag} span {model} = staged, bit for bit", dtype)


def span_resample(dtype, tdtype, b, s, t, d, seed, shift=0, oshift=0, tgt_of=None, need=None):
    """resample through the span: targets ``tgt_of(rng)`` (default: over the rows and past both ends, unsorted, one
    NaN), values ``shift`` elements off the 16-byte grid, the output ``oshift``."""
    rng = np.random.default_rng(seed)
    tdt, vdt = getattr(torch, tdtype), getattr(torch, dtype)
    vals = shifted((b, s, d), vdt, shift, torch.from_numpy(rng.standard_normal((b, s, d))).to(vdt))
    src = times(rng, b, s, tdt)
    if tgt_of is None:
        x = rng.uniform(-0.1, 1.1, (b, t))
        x[0, min(3, t - 1)] = float("nan")
    else:
        x = tgt_of(rng)
    tgt = torch.from_numpy(x).to(tdt)
    v = types.SimpleNamespace(shape=(b, s, d), dtype=dtype, kind="torch", device_index=0)
    want = reference.resample(vals.double().numpy(), src.double().numpy(), tgt.double().numpy(), out_dtype=None)
    spanned(lambda cfg, o: rs._plan_v2(v, types.SimpleNamespace(dtype=tdtype), vals, o.data_ptr(), t, cfg)(
                vals, src, tgt, o), lambda: shifted((b, t, d), vdt, oshift),
            want, f"resample {dtype}/{tdtype} B{b} S{s} T{t} D{d} shifted {shift}/{oshift}", dtype,
            span_model(vals, src, tgt), need)


def span_fuse(dtype, tdtype, b, t, streams, seed, oshift=0, tgt_of=None, need=None):
    """fuse through the span: stream k's values k % 8 elements off the 16-byte grid, the output ``oshift``; targets
    ``tgt_of(rng)`` (default: sorted over the rows and past both ends, one NaN)."""
    rng = np.random.default_rng(seed)
    tdt, vdt = getattr(torch, tdtype), getattr(torch, dtype)
    arrays = [(shifted((b, s, d), vdt, k % 8, torch.from_numpy(rng.standard_normal((b, s, d))).to(vdt)),
               times(rng, b, s, tdt, jitter=k % 3 != 1)) for k, (s, d) in enumerate(streams)]
    if tgt_of is None:
        x = np.sort(rng.uniform(-0.1, 1.1, (b, t)), axis=1)
        x[-1, t // 2] = float("nan")
    else:
        x = tgt_of(rng)
    tgt = torch.from_numpy(x).to(tdt)
    pairs = [(types.SimpleNamespace(shape=tuple(v.shape), dtype=dtype), None) for v, _ in arrays]
    ta = types.SimpleNamespace(shape=(b, t), dtype=tdtype, kind="torch", device_index=0)
    want = reference.fuse([(v.double().numpy(), ts.double().numpy()) for v, ts in arrays], tgt.double().numpy())
    model = [sum(p) for p in zip(*(span_model(v, ts, tgt) for v, ts in arrays))]
    spanned(lambda cfg, o: fz._plan_v2(pairs, ta, arrays, o.data_ptr(), cfg)(arrays, tgt, o),
            lambda: shifted((b, t, sum(d for _, d in streams)), vdt, oshift), want,
            f"fuse {dtype}/{tdtype} B{b} T{t} {streams} shifted {oshift}", dtype, model, need)


def crowded(t, windows, nan_at=None):
    """Target times of batch row i uniform over ``windows[i]`` (lo, hi), unsorted, a NaN at ``nan_at``: a narrow
    window needs a few source rows (the span's run fits), a wide one all of a long row's (it does not)."""
    def draw(rng):
        x = np.stack([rng.uniform(lo, hi, t) for lo, hi in windows])
        if nan_at is not None:
            x[nan_at] = float("nan")
        return x
    return draw


# shapes keep the emulation short (a block is 256 threads): 393 targets of 3 rows are two blocks, the second ragged
# and across two batch rows; D 1-300, values and output off the 16-byte grid by every offset a vector holds
for dtype, es in (("float32", 4), ("float16", 2), ("bfloat16", 2)):
    for tdtype in ("float32", "float64"):
        for i, d in enumerate((1, 3, 37, 130, 300)):
            span_resample(dtype, tdtype, 3, 9, 131, d, seed=d, shift=i % (16 // es), oshift=(3 * i + 1) % (16 // es),
                          need=(0,))
        # both paths in one launch: batch row 0's targets crowd a few rows of 70 (the run fits), row 1's spread
        # over all 70 rows of 200 elements (it does not), row 2's crowd the end; 4 blocks, the last ragged, one
        # with a NaN target (row 0: the NaN's bracket is row 0 as the window's)
        span_resample(dtype, tdtype, 3, 70, 300, 200, seed=5, shift=1, oshift=2,
                      tgt_of=crowded(300, ((0.0, 0.03), (-0.1, 1.1), (0.95, 1.05)), (0, 7)), need=(0, 1))
# blocks across many batch rows: T = 40 (a block of 7 rows), T = 1 (256 rows of S = 2), T = 3 of D = 2100 (rows
# wider than RC_SPAN_MAX_D: the staged copy whatever the run)
span_resample("float32", "float64", 8, 9, 40, 5, seed=11, shift=3, oshift=1, need=(0,))
span_resample("bfloat16", "float32", 300, 2, 1, 3, seed=12, oshift=5, need=(0,))
span_resample("float16", "float32", 1, 2, 3, 2100, seed=13, shift=1, need=(2,))
# fuse: a stream whose runs fit beside one whose do not (70 rows of 200 elements, targets over all of them), in
# one launch (each stream its own blocks), sorted targets with a NaN; then crowded and spread batch rows, unsorted
for dtype in ("float32", "float16", "bfloat16"):
    for tdtype in ("float32", "float64"):
        span_fuse(dtype, tdtype, 3, 100, [(23, 37), (11, 3), (70, 200), (5, 1)], seed=21, oshift=3, need=(0, 1))
    span_fuse(dtype, "float32", 2, 300, [(9, 64), (70, 200)], seed=22, oshift=1,
              tgt_of=crowded(300, ((0.5, 0.52), (-0.1, 1.1))), need=(0, 1))
# sixteen streams (the table's most), one ragged block each, S 1-23 and D 1-100
span_fuse("float32", "float64", 2, 9, [(1 + (k * 7) % 23, 1 + (k * 37) % 100) for k in range(16)], seed=16, oshift=3,
          need=(0,))

print("rows_wide: every case matched the NumPy reference")


# the flat kernel (Config(stage=5), fuse): a block's 128 targets of every stream bracketed into shared memory (garbage
# before every block), then its output walked flat, a column's stream by a scan of the first columns. Bit for bit the
# staged kernel's output (itself the shifted vectors'), the reference's within TOL, NaN where it is, nothing stored
# outside a poisoned output off the 16-byte grid. Widths where the walk's step (256 elements) is several rows (Dtot
# 1, 3), exactly one (256), part of one (717), and sixteen streams; ragged last blocks; unsorted and NaN targets.
def flat_fuse(dtype, tdtype, b, t, spec, seed, oshift=0, shift=0, nan_at=None, sorted_tgt=True):
    rng = np.random.default_rng(seed)
    tdt, vdt = getattr(torch, tdtype), getattr(torch, dtype)
    arrays = [(shifted((b, s, d), vdt, (shift + k) % 8, torch.from_numpy(rng.standard_normal((b, s, d))).to(vdt)),
               times(rng, b, s, tdt, jitter=k % 2 == 0)) for k, (s, d) in enumerate(spec)]
    x = rng.uniform(-0.1, 1.1, (b, t))
    tgt = torch.from_numpy(np.sort(x, axis=1) if sorted_tgt else x).to(tdt)
    if nan_at is not None:
        tgt[nan_at] = float("nan")
    pairs = [(types.SimpleNamespace(shape=tuple(v.shape), dtype=dtype), None) for v, _ in arrays]
    ta = types.SimpleNamespace(shape=tuple(tgt.shape), dtype=tdtype, kind="torch", device_index=0)
    total = sum(d for _, d in spec)
    outs = []
    for cfg in (_tune.Config(stage=5), _tune.Config(stage=1)):
        out = shifted((b, t, total), vdt, oshift)
        plan = fz._plan_v2(pairs, ta, arrays, out.data_ptr(), cfg)
        outs.append(plan(arrays, tgt, out))
        untouched(out, f"flat {spec}")
        if cfg.stage == 5:
            lg = _tune.flat_lg(b * t, SMS[0])
            assert LOG[-1] == (f"fuse_flat_{dtype}_{tdtype}", -(-b * t >> lg), _tune.FLAT_THREADS), LOG[-1]
            assert plan.smem == _tune.flat_smem(len(spec), lg) and plan.smem <= 48 * 1024, plan.smem
            LGS.add(lg)
    assert torch.equal(bits(outs[0]), bits(outs[1])), ("flat differs from staged", dtype, tdtype, spec)
    want = reference.fuse([(v.double().numpy(), ts.double().numpy()) for v, ts in arrays], tgt.double().numpy())
    nan = np.isnan(want)
    assert np.array_equal(np.isnan(outs[0].double().numpy()), nan), "NaN targets"
    check(outs[0].masked_fill(torch.from_numpy(nan), 0), np.where(nan, 0, want),
          f"fuse {dtype}/{tdtype} B{b} T{t} {spec if len(spec) < 6 else f'{len(spec)} streams'} flat = staged, bit for bit"
          + (f" shifted {shift}/{oshift}" if shift or oshift else ""), dtype)


def flat_resample(dtype, tdtype, b, s, t, d, seed, shift=0, oshift=0):
    """resample through the flat kernel (one stream): bit for bit the staged kernel's, the reference's within TOL,
    nothing stored outside a poisoned output; unsorted targets over the rows and past both ends, one NaN."""
    rng = np.random.default_rng(seed)
    tdt, vdt = getattr(torch, tdtype), getattr(torch, dtype)
    vals = shifted((b, s, d), vdt, shift, torch.from_numpy(rng.standard_normal((b, s, d))).to(vdt))
    src = times(rng, b, s, tdt)
    x = rng.uniform(-0.1, 1.1, (b, t))
    x[b - 1, t // 2] = float("nan")
    tgt = torch.from_numpy(x).to(tdt)
    v = types.SimpleNamespace(shape=tuple(vals.shape), dtype=dtype, kind="torch", device_index=0)
    outs = []
    for cfg in (_tune.Config(stage=5), _tune.Config(stage=1)):
        out = shifted((b, t, d), vdt, oshift)
        plan = rs._plan_v2(v, types.SimpleNamespace(dtype=tdtype), vals, out.data_ptr(), t, cfg)
        outs.append(plan(vals, src, tgt, out))
        untouched(out, f"flat resample D{d}")
        if cfg.stage == 5:
            lg = _tune.flat_lg(b * t, SMS[0])
            assert LOG[-1] == (f"resample_flat_{dtype}_{tdtype}", -(-b * t >> lg), _tune.FLAT_THREADS), LOG[-1]
            assert plan.smem == _tune.flat_smem(1, lg) and list(plan.fl.slots)[8] == lg, (plan.smem, lg)
            LGS.add(lg)
    assert torch.equal(bits(outs[0]), bits(outs[1])), ("flat differs from staged", dtype, tdtype, d)
    want = reference.resample(vals.double().numpy(), src.double().numpy(), tgt.double().numpy(), out_dtype=None)
    nan = np.isnan(want)
    assert np.array_equal(np.isnan(outs[0].double().numpy()), nan), "NaN targets"
    check(outs[0].masked_fill(torch.from_numpy(nan), 0), np.where(nan, 0, want),
          f"resample {dtype}/{tdtype} B{b} S{s} T{t} D{d} flat = staged, bit for bit"
          + (f" shifted {shift}/{oshift}" if shift or oshift else ""), dtype)


LGS: set = set()  # the targets a block the launches took (log2): 128 with one SM, fewer with 132 (few blocks)
for sms in (1, 132):
    SMS[0] = sms
    for dtype in ("float32", "float16", "bfloat16"):
        for tdtype in ("float32", "float64"):
            for d, (shift, oshift) in zip((1, 3, 37, 130), ((0, 0), (1, 0), (0, 3), (2, 1))):
                flat_resample(dtype, tdtype, 3, 9, 400, d, seed=d, shift=shift, oshift=oshift)  # 1200 targets
            flat_resample(dtype, tdtype, 3, 9, 131, 855, seed=855, shift=3, oshift=2)  # 393 targets
# 1200 targets: ten blocks of 128 (the last ragged) with one SM, 75 of 16 with 132 SMs (under 8 blocks an SM at any
# size); 393: 13 blocks of 32 with one SM
assert LGS == {7, 5, 4}, LGS
for sms, dtype in ((1, "float32"), (132, "float32"), (1, "float16"), (132, "bfloat16"), (1, "bfloat16")):
    SMS[0] = sms
    for tdtype in ("float32", "float64"):
        flat_fuse(dtype, tdtype, 3, 100, [(23, 37), (11, 3), (9, 64), (5, 1)], 8, nan_at=(1, 7))  # 300 targets
        flat_fuse(dtype, tdtype, 2, 97, [(13, 1)], 9, oshift=1, sorted_tgt=False)  # Dtot 1: a step of 256 rows
        flat_fuse(dtype, tdtype, 1, 130, [(7, 2), (19, 1)], 10, oshift=3)  # Dtot 3: 85 rows and a column a step
        flat_fuse(dtype, tdtype, 2, 70, [(31, 200), (5, 56)], 11, shift=1)  # Dtot 256: a row a step
        flat_fuse(dtype, tdtype, 1, 129, [(40, 717)], 12, oshift=5, nan_at=(0, 128))  # a step within a row
        flat_fuse(dtype, tdtype, 3, 61, [(1 + (k * 5) % 19, 1 + (k * 29) % 90) for k in range(16)], 13,
                  oshift=2, nan_at=(2, 0), sorted_tgt=False)  # sixteen streams, S = 1 among them
print("ok", "flat = staged bit for bit: every dtype and time dtype, 16 to 128 targets a block")
