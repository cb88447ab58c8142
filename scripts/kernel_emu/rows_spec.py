"""kernels/rows_spec.cu (resample one output element a thread, Config.stage 4) on the CPU: compiled with g++ against the
host shims (scripts/kernel_emu/shim.h) with the NVRTC options the plan would use (``_tune.spec_options``: none, the
sizes as arguments; then with ``SPEC_CONSTANTS``, once per shape), driven through the real plan (robocache/resample.py ``_plan_v2`` with ``Config(stage=4)``)
and checked against the NumPy reference: every dtype and time dtype, nine row lengths S from 1 to 100, D 1-9, ties in the source times, infinite ends, targets on sample times, outside the row, NaN.

    python3 scripts/kernel_emu/rows_spec.py     # needs g++ >= 12 (C++20, _Float16)

A development check of logic, not of the GPU: no memory model or timing. No substitute for tests/gpu.
"""
import ctypes
import importlib
import subprocess
import sys
import tempfile
import types
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[1]))
BUILD = Path(tempfile.mkdtemp(prefix="rc_kernel_emu_spec_"))

import numpy as np  # noqa: E402  after the checkout's path entry above
import torch  # noqa: E402

from host_source import host_source, record_launches  # noqa: E402  (scripts/kernel_emu/host_source.py)

from robocache import _launch as L  # noqa: E402
from robocache import _tune, reference  # noqa: E402

rs = importlib.import_module("robocache.resample")
SRC = host_source("rows_spec")
ENTRIES = """
#define P(T, k) reinterpret_cast<T>(a[k])
void rc_emulate(unsigned grid, unsigned block, const std::function<void()>& fn);
extern "C" int rc_launch(const char* name, unsigned grid, unsigned block, const unsigned long long* a) {
    std::string n(name);
    std::function<void()> fn;
#define RSPEC1(SUF, T, TT) if (n == "resample_spec_" #SUF) fn = [a] { resample_spec_##SUF(P(const T*, 0), \
        P(const TT*, 1), P(const TT*, 2), P(T*, 3), (int)a[4], (int)a[5], (int)a[6], (long long)a[7], a[8], \
        (unsigned)a[9], a[10], (unsigned)a[11], (unsigned)a[12], (unsigned)a[13], (unsigned)a[14], (unsigned)a[15]); };
#define RSPEC(SUF, T, TT) RSPEC1(SUF, T, TT) RSPEC1(SUF##_i32, T, TT)
    RSPEC(float32_float32, float, float) RSPEC(float16_float32, rc_half, float) RSPEC(bfloat16_float32, rc_bf16, float)
    RSPEC(float32_float64, float, double) RSPEC(float16_float64, rc_half, double) RSPEC(bfloat16_float64, rc_bf16, double)
    if (!fn) return 1;
    rc_emulate(grid, block, fn);
    return 0;
}
"""
LIBS: dict[tuple[str, ...], ctypes.CDLL] = {}


def lib_for(options: tuple[str, ...]) -> ctypes.CDLL:
    lib = LIBS.get(options)
    if lib is None:
        tag = str(len(LIBS))
        (BUILD / f"spec{tag}.cpp").write_text('#include "shim.h"\n' + SRC + ENTRIES)
        defs = [o.replace("LL", "") if o.startswith("-DRC_SPEC_N=") else o for o in options]
        r = subprocess.run(["g++", "-std=c++20", "-O1", "-ffp-contract=off", "-fPIC", "-shared", "-pthread", "-w",
                            f"-I{HERE}", "-DRC_EMU_CHECK_ALIGN", *defs, "-o", str(BUILD / f"spec{tag}.so"),
                            str(BUILD / f"spec{tag}.cpp"), str(HERE / "runtime.cpp")],
                           capture_output=True, text=True, check=False)
        if r.returncode:
            print(r.stderr[-6000:], file=sys.stderr)
            sys.exit(2)
        lib = ctypes.CDLL(str(BUILD / f"spec{tag}.so"))
        lib.rc_launch.argtypes = [ctypes.c_char_p, ctypes.c_uint, ctypes.c_uint, ctypes.c_void_p]
        LIBS[options] = lib
    return lib


SMS = [132]
LOG = record_launches(L, SMS)
OPTS: list[tuple[str, ...]] = [()]
real_options = _tune.spec_options


EXTRA: list[tuple[str, ...]] = [()]  # a pass's A/B build options (-DRC_SPEC_DIV32=0)


def spec_options(*a):
    OPTS[0] = real_options(*a) + EXTRA[0]
    return OPTS[0]


_tune.spec_options = spec_options


def fast_launch(fl, grid, kind, dev, ptrs, smem=0, struct_ptrs=None, block=256):
    slots = (ctypes.c_uint64 * len(fl.slots))(*fl.slots)
    for i, p in ptrs.items():
        slots[i] = p
    LOG.append((fl.name, grid, block))
    assert lib_for(OPTS[0]).rc_launch(fl.name.encode(), grid, block, ctypes.addressof(slots)) == 0, fl.name


L.fast_launch = fast_launch
TOL = {"float32": 2e-6, "float16": 2e-3, "bfloat16": 1.6e-2}


def run(dtype, tdtype, b, s, t, d, seed):
    rng = np.random.default_rng(seed)
    tdt, vdt = getattr(torch, tdtype), getattr(torch, dtype)
    vals = torch.from_numpy(rng.standard_normal((b, s, d))).to(vdt)
    src = np.sort(rng.integers(0, max(2, s), (b, s)).astype(np.float64) / 4, axis=1)  # ties
    if s > 2:
        src[0, 0], src[-1, -1] = -np.inf, np.inf
    tgt = np.concatenate([src[:, rng.integers(0, s, t // 2)], rng.uniform(-1, s / 4 + 1, (b, t - t // 2))], 1)
    tgt[0, 0] = np.nan
    src_t, tgt_t = torch.from_numpy(src).to(tdt), torch.from_numpy(tgt).to(tdt)
    v = types.SimpleNamespace(shape=(b, s, d), dtype=dtype, kind="torch", device_index=0)
    plan = rs._plan_v2(v, types.SimpleNamespace(dtype=tdtype), vals, 0, t, _tune.Config(stage=4))
    got = plan(vals, src_t, tgt_t).double().numpy()
    assert LOG[-1][0] == f"resample_spec_{dtype}_{tdtype}" + ("_i32" if I32[0] else ""), LOG[-1]
    want = reference.resample(vals.double().numpy(), src_t.double().numpy(), tgt_t.double().numpy(), out_dtype=None)
    nan = np.isnan(want)
    assert np.array_equal(np.isnan(got), nan), ("NaN pattern", dtype, tdtype, b, s, t, d)
    g, w = np.where(nan, 0, got), np.where(nan, 0, want)
    fin = np.isfinite(w)
    assert np.array_equal(g[~fin], w[~fin]), ("infinite outputs", dtype, tdtype, s)
    err = float((np.abs(g[fin] - w[fin]) / np.maximum(1, np.abs(w[fin]))).max()) if fin.any() else 0.0
    assert err <= TOL[dtype], (dtype, tdtype, b, s, t, d, err)
    print("ok", f"resample spec {dtype}/{tdtype} B{b} S{s} T{t} D{d} {OPTS[0] or 'sizes as arguments'} "
          f"grid {LOG[-1][1]}")


I32 = [True]
real_i32 = _tune.spec_i32
SHORT = ((1, 1), (2, 3), (3, 1), (5, 2), (12, 1), (13, 9), (31, 1), (64, 3), (100, 1))
# every halving count of the search (S = 2**k - 1, 2**k, 2**k + 1 up to 2**16) and past it
LONG = tuple((n, 1) for k in range(1, 17) for n in (2**k - 1, 2**k, 2**k + 1) if n > 0) + ((70001, 2),)
# the library's build (sizes as arguments) with 32-bit indices, then its 64-bit entry (forced: no shape here needs
# it), then its A/B build (the 64-bit division), then the probe's (sizes compiled in)
PASSES = ((False, True, (), SHORT + LONG), (False, False, (), SHORT + LONG[::4]),
          (False, True, ("-DRC_SPEC_DIV32=0",), SHORT), (True, True, (), SHORT))
for constants, i32, extra, shapes in PASSES:
    _tune.SPEC_CONSTANTS, I32[0], EXTRA[0] = constants, i32, extra
    _tune.spec_i32 = real_i32 if i32 else (lambda *a: False)
    for s, d in shapes:
        for dtype in ("float32", "float16", "bfloat16"):
            for tdtype in ("float32", "float64"):
                run(dtype, tdtype, 3 if s < 1000 else 1, s, 37, d, seed=s * 10 + d)
print("rows_spec: every case matched the NumPy reference")
