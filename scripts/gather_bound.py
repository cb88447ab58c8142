#!/usr/bin/env python3
"""How fast could a large sampled resample/fuse point be? The op with its search taken out, against the copy ceiling.

    python3 scripts/gather_bound.py [--time-limit 0.5] [--cases ID,ID,...] [--batch 8]

A dev aid (not a measurement of record) for issue 25's ">= 80% of the copy ceiling" on the points moving 256 MB or
more. Per point (the harness's sampled case: its seeded inputs, its minimal traffic, specs.moved_bytes), timed with
the harness's timer (time_gpu, warm, one input set):

- ``robocache``: the public call, the tuner's own choice;
- ``torch.compile``: the harness's peer case;
- ``brk-loop``: the same lerp with every bracket (row offsets and weight) computed beforehand on the host: one warp
  per target, its lanes looping over the row's vectors one at a time (the row kernel's loop, kernels/rows_v2.cuh,
  minus the search);
- ``brk-batch``: the same with ``--batch`` vectors per lane loaded (both rows) before any is mixed and stored;
- ``brk-flat``: one thread per output element, scalar, the targets' rows laid end to end (inductor's mapping);
- ``rowcopy``: ``brk-batch`` reading only the first row of each bracket (the gather alone, its own traffic).

The bracket kernels read per target two int64 offsets and a float weight more than the op (counted in their traffic
as well, so their share is their own bytes over their own time). Every bracket kernel's output is checked against
the NumPy reference by the harness's gate before it is timed. One line per point.
"""
from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import probe_common  # noqa: E402  (scripts/probe_common.py)

# seed 6113's large points (>= 256 MB of minimal traffic; docs/evidence/h200-x4-s19-20261128/sampled-6113.md) and
# two of seed 2741's
POINTS = ("resample/s6113-41-B163-S3425-T632-D213", "resample/s6113-38-B2282-S72-T81-D207",
          "resample/s6113-47-B1816-S247-T123-D97", "resample/s6113-44-B66-S4853-T3159-D147",
          "resample/s6113-40-B35-S4798-T2198-D301-t64", "resample/s6113-42-B51-S136485-T59691-D9",
          "resample/s6113-45-B10772-S363-T2112-D1-t64", "resample/s6113-46-B585-S24615-T30041-D1-t64",
          "fuse/s6113-46-B413-T368-17x2-281x1-530x166-114x21-382x25",
          "fuse/s6113-45-B590-T562-152x1-509x15-59x19-1941x56-856x1")

_SRC = r"""
#include "common.cuh"
#include "rows_v2.cuh"

// one warp per target q; lanes over the row's vectors; MODE 0: loop, 1: batch of KB vectors loaded first,
// 2: the first row only (no mix), batched
template <typename T, int VB, int MODE>
__device__ __forceinline__ void brk_rows(const T* __restrict__ values, const long long* __restrict__ off0,
                                         const long long* __restrict__ off1, const float* __restrict__ wts,
                                         T* __restrict__ out, long long n, int D, int out_stride, int col) {
    constexpr int N = VB / (int)sizeof(T);
    typedef typename rc_vec<T, VB>::W W;
    const long long q = (long long)blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5);
    if (q >= n) return;
    const int lane = threadIdx.x & 31;
    const T* r0 = values + __ldg(off0 + q);
    const T* r1 = values + __ldg(off1 + q);
    const float w = __ldg(wts + q);
    T* o = out + q * (long long)out_stride + col;
    const int nvec = D / N;
    if constexpr (MODE == 0) {
        for (int v = lane; v < nvec; v += 32) {
            float a[N], c[N];
            rc_vec<T, VB>::load(r0 + v * N, a);
            rc_vec<T, VB>::load(r1 + v * N, c);
#pragma unroll
            for (int i = 0; i < N; ++i) a[i] = rc_mix(a[i], c[i], w);
            rc_vec<T, VB>::store(o + v * N, a);
        }
    } else {
#pragma unroll 1
    for (int v0 = lane; v0 < nvec; v0 += 32 * KB) {
        W a[KB], c[KB];
#pragma unroll
        for (int k = 0; k < KB; ++k) {
            const int v = v0 + 32 * k;
            if (v < nvec) {
                a[k] = __ldg(reinterpret_cast<const W*>(r0 + v * N));
                if (MODE == 1) c[k] = __ldg(reinterpret_cast<const W*>(r1 + v * N));
            }
        }
#pragma unroll
        for (int k = 0; k < KB; ++k) {
            const int v = v0 + 32 * k;
            if (v < nvec) {
                float x[N], y[N];
                rc_vec<T, VB>::unpack(a[k], x);
                if (MODE == 1) {
                    rc_vec<T, VB>::unpack(c[k], y);
#pragma unroll
                    for (int i = 0; i < N; ++i) x[i] = rc_mix(x[i], y[i], w);
                }
                rc_vec<T, VB>::store(o + v * N, x);
            }
        }
    }
    }
}

// one thread per output element of this stream (grid-stride), scalar
template <typename T>
__device__ __forceinline__ void brk_flat(const T* __restrict__ values, const long long* __restrict__ off0,
                                         const long long* __restrict__ off1, const float* __restrict__ wts,
                                         T* __restrict__ out, long long n, int D, int out_stride, int col) {
    const long long total = n * D;
    for (long long e = (long long)blockIdx.x * blockDim.x + threadIdx.x; e < total;
         e += (long long)gridDim.x * blockDim.x) {
        const long long q = e / D;
        const int d = (int)(e - q * D);
        const float a = rc_to_float(values[__ldg(off0 + q) + d]);
        const float c = rc_to_float(values[__ldg(off1 + q) + d]);
        out[q * (long long)out_stride + col + d] = rc_from_float<T>(rc_mix(a, c, __ldg(wts + q)));
    }
}

"""
_INCLUDE = re.compile(r'^\s*#\s*include\s+"([A-Za-z0-9_]+\.cuh)"\s*$', re.MULTILINE)
MODES = {"brk-loop": 0, "brk-batch": 1, "rowcopy": 2, "brk-flat": 3}


def source(kdir: Path, batch: int) -> str:
    seen: set[str] = set()

    def inline(m: re.Match) -> str:
        if m.group(1) in seen:
            return ""
        seen.add(m.group(1))
        return _INCLUDE.sub(inline, (kdir / m.group(1)).read_text().replace("#pragma once", ""))

    head = _SRC.split("// one warp per target")[0]
    body = _SRC[len(head):]
    entries = []
    for dt, t in (("float32", "float"), ("float16", "rc_half"), ("bfloat16", "rc_bf16")):
        entries.append(f'extern "C" __global__ void __launch_bounds__(256) brk_{dt}_flat(const {t}* values, '
                       f'const long long* off0, const long long* off1, const float* wts, {t}* out, long long n, '
                       f'int D, int out_stride, int col) {{ brk_flat<{t}>(values, off0, off1, wts, out, n, D, '
                       'out_stride, col); }')
        for vb in (16, 8, 4) + ((2,) if t != "float" else ()):
            for mode in (0, 1, 2):
                entries.append(f'extern "C" __global__ void __launch_bounds__(256) brk_{dt}_{mode}_{vb}('
                               f'const {t}* values, const long long* off0, const long long* off1, const float* wts, '
                               f'{t}* out, long long n, int D, int out_stride, int col) {{ brk_rows<{t}, {vb}, {mode}>'
                               '(values, off0, off1, wts, out, n, D, out_stride, col); }')
    return f"#define KB {batch}\n" + _INCLUDE.sub(inline, head) + body + "\n".join(entries) + "\n"


def brackets(src: np.ndarray, tgt: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per target (row-major over [B, T]): the element-row index (b * S + j0, b * S + j1) and the weight, by
    numpy.interp's rule as rc_bracket_tail applies it (below/above the row and exact hits: w = -1, one row)."""
    b, s = src.shape
    j0 = np.empty(tgt.shape, np.int64)
    j1 = np.empty(tgt.shape, np.int64)
    w = np.empty(tgt.shape, np.float32)
    for i in range(b):
        x = tgt[i].astype(np.float64)
        row = src[i].astype(np.float64)
        j = np.searchsorted(row, x, side="right") - 1
        inner = (j >= 0) & (j < s - 1)
        lo = np.clip(j, 0, s - 1)
        hi = np.where(inner, lo + 1, lo)
        x0, x1 = row[lo], row[hi]
        with np.errstate(divide="ignore", invalid="ignore"):
            ww = np.where(inner, (x - x0) / np.where(inner, x1 - x0, 1.0), -1.0)
        j0[i], j1[i], w[i] = lo + i * s, hi + i * s, ww.astype(np.float32)
    return j0.ravel(), j1.ravel(), w.ravel()


def vector_bytes(d: int, es: int, out_stride: int, col: int) -> int:
    for vb in (16, 8, 4, es):
        if vb >= es and (d * es) % vb == 0 and (out_stride * es) % vb == 0 and (col * es) % vb == 0:
            return vb
    return es


def as_cupy(t):
    """A CuPy view of a contiguous CUDA array (CuPy or torch; bfloat16 seen as uint16: the kernels take pointers)."""
    import cupy
    if isinstance(t, cupy.ndarray):
        return t
    import torch
    t = t.contiguous()
    dt = {torch.float32: np.float32, torch.float64: np.float64, torch.float16: np.float16,
          torch.bfloat16: np.uint16}[t.dtype]
    mem = cupy.cuda.UnownedMemory(t.data_ptr(), t.numel() * t.element_size(), t)
    return cupy.ndarray(tuple(t.shape), dt, cupy.cuda.MemoryPointer(mem, 0))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0], allow_abbrev=False)
    ap.add_argument("--time-limit", type=float, default=0.5, help="seconds of sampling per kernel (default 0.5)")
    ap.add_argument("--cases", default=",".join(POINTS), help="sampled case ids <op>/s<seed>-..., comma-separated")
    ap.add_argument("--batch", type=int, default=8, help="vectors per lane loaded before a store (default 8)")
    a = ap.parse_args()
    if not a.time_limit > 0 or not 1 <= a.batch <= 16:
        ap.error("--time-limit must be positive and --batch 1-16")
    ids = [c for c in a.cases.split(",") if c]
    bad = probe_common.bad_case_ids(ids, ("resample", "fuse"))
    if bad:
        ap.error(bad)
    ceiling = probe_common.gpu_ceiling("gather_bound")
    if ceiling is None:
        return 2
    print(f"gather_bound: batch {a.batch}", flush=True)
    import cupy
    import torch

    from robocache import _cuda
    from robocache.bench import gate as gate_mod
    from robocache.bench.timing.device import time_gpu

    mod = cupy.RawModule(code=source(_cuda.kernel_dir(), a.batch), options=_cuda.COMPILE_OPTIONS)
    for cid in ids:
        try:
            op = cid.partition("/")[0]
            found = probe_common.sampled_pair(cid)
            if found is None:
                print(f"gather_bound: {cid}: no such sampled case", file=sys.stderr)
                return 2
            us: dict[str, float] = {}
            share: dict[str, float] = {}
            moved = 0
            kept = None
            for name in ("robocache", "torch_compile"):
                case = found[name]
                prep, ref, why = probe_common.gated(case)
                if prep is None:
                    print(f"gather_bound: {cid} {name}: {why}", file=sys.stderr)
                    return 2
                if why:
                    print(f"gather_bound: {cid} {name}: {why}", flush=True)
                    continue
                moved = moved or int(prep.moved_bytes or 0)
                us[name] = probe_common.timed_us(case, prep, a.time_limit)
                share[name] = moved / (us[name] * 1e3) / ceiling
                if name == "robocache":
                    kept = (case, prep, ref)
                del prep
            if kept is None:
                continue
            case, prep, ref = kept
            # the robocache case's arrays (CuPy): resample (values, src, tgt); fuse ([(values, times)...], tgt)
            if op == "resample":
                streams, tgt = [(prep.args[0], prep.args[1])], prep.args[2]
            else:
                streams, tgt = list(prep.args[0]), prep.args[1]
            streams = [(as_cupy(v), as_cupy(t)) for v, t in streams]
            tgt = as_cupy(tgt)
            tgt_h = cupy.asnumpy(tgt).astype(np.float64)
            d_total = sum(int(v.shape[2]) for v, _ in streams)
            n = tgt_h.size
            es = np.dtype(np.float32 if case.dtype == "float32" else np.float16).itemsize
            out = cupy.empty((tgt_h.shape[0], tgt_h.shape[1], d_total), dtype=streams[0][0].dtype)
            plan = []
            col = 0
            extra = 0
            for v, t in streams:
                j0, j1, w = brackets(cupy.asnumpy(t).astype(np.float64), tgt_h)
                d = int(v.shape[2])
                plan.append((v, cupy.asarray(j0 * d), cupy.asarray(j1 * d), cupy.asarray(w), d, col,
                             vector_bytes(d, es, d_total, col)))
                col += d
                extra += n * 20  # two int64 offsets and a float32 weight per target
            # rowcopy's own traffic: the distinct first rows it reads and the output
            rc_bytes = sum(len(np.unique(cupy.asnumpy(p[1]))) * p[4] * es for p in plan) + out.nbytes
            stream = cupy.cuda.ExternalStream(torch.cuda.current_stream().cuda_stream)

            def launcher(mode: int, plan=plan, out=out, n=n, d_total=d_total, dt=case.dtype, stream=stream):
                def go():
                    with stream:
                        for v, o0, o1, w, d, c, vb in plan:
                            args = (v, o0, o1, w, out, np.int64(n), np.int32(d), np.int32(d_total), np.int32(c))
                            if mode == 3:
                                mod.get_function(f"brk_{dt}_flat")((min((n * d + 255) // 256, 132 * 64),),
                                                                            (256,), args)
                            else:
                                mod.get_function(f"brk_{dt}_{mode}_{vb}")(((n + 7) // 8,), (256,), args)
                return go
            for name, mode in MODES.items():
                out.fill(0)
                fn = launcher(mode)
                fn()
                torch.cuda.synchronize()
                if mode != 2:
                    host = cupy.asnumpy(out)
                    if case.dtype == "bfloat16":  # uint16 bits -> float32
                        host = (host.astype(np.uint32) << 16).view(np.float32)
                    chk = gate_mod.check(host, ref, case.dtype)
                    if not chk["passed"]:
                        print(f"gather_bound: {cid} {name}: WRONG (max rel err {chk['max_rel_err']})", flush=True)
                        continue
                us[name] = float(time_gpu(fn, time_limit_s=a.time_limit).median_us)
                own = rc_bytes if mode == 2 else moved + extra
                share[name] = own / (us[name] * 1e3) / ceiling
            vbs = ",".join(str(p[6]) for p in plan)
            print(f"{cid} {case.dtype} ({moved / 1e6:.1f} MB, vb {vbs}): "
                  + ", ".join(f"{k} {us[k]:.2f} us ({100 * share[k]:.0f}%)" for k in us), flush=True)
            plan.clear()
        except Exception as e:  # noqa: BLE001 (a dev probe: a point that fails says so, the next one still runs)
            print(f"gather_bound: {cid}: {type(e).__name__}: {e}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
