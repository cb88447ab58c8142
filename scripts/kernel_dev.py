#!/usr/bin/env python3
"""The kernel developer's bench (llm.c ``dev/cuda`` habit): every kernel version of each op beside the
torch.compile peer on a few shapes, checked against the NumPy reference first, then timed; bandwidth
next to time, and the copy ceiling measured in the same process.

    python3 scripts/kernel_dev.py [--quick] [--no-autotune] [--ops resample,fuse,voxelize] [--json OUT]

Needs a CUDA GPU, torch and CuPy. Times are device times from the project's timer
(``robocache.bench.timing.time_gpu``: events around back-to-back calls on a pre-blocked stream, warm, no
input rotation, so small cases run from L2 for every contender alike). Besides every kernel version it
times experimental launch variants (``--variants``): v2 built with ``-DRC_V2_UNROLL=2``, voxelize v2
without its shared-memory aggregation, voxelize v3 with and without it (count through the hash too).
This is a development aid; the project's measurements of record come from ``robocache-bench run`` (one
process per case, input rotation, records in results/).
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def main() -> int:
    ap = argparse.ArgumentParser(allow_abbrev=False, description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="fewer shapes")
    ap.add_argument("--no-autotune", action="store_true", help="skip torch.compile max-autotune-no-cudagraphs")
    ap.add_argument("--autotune-cases", type=int, default=1000,
                    help="max-autotune only on the first N cases of each op (its compile takes long)")
    ap.add_argument("--ops", default="resample,fuse,voxelize")
    ap.add_argument("--json", help="write all rows to this JSON file")
    ap.add_argument("--variants", action="store_true", help="also time the experimental launch variants")
    args = ap.parse_args()
    try:
        import torch
    except ImportError as e:
        print(f"kernel_dev: needs torch ({e})", file=sys.stderr)
        return 2
    if not torch.cuda.is_available():
        print("kernel_dev: no CUDA device", file=sys.stderr)
        return 2
    import robocache
    from robocache import _cuda, _launch, reference
    from robocache.bench.timing import time_gpu
    from robocache._versions import VERSIONS, all_versions
    from robocache.providers import torch_eager

    torch.manual_seed(0)
    rng = np.random.default_rng(0)
    dev = "cuda"
    rows: list[dict] = []

    def bench(fn) -> float:
        return float(time_gpu(fn, time_limit_s=0.25).median_us)

    # copy ceiling: bytes read + written of a 2 GiB device-to-device copy
    a = torch.empty(2**29, dtype=torch.float32, device=dev).uniform_()
    b = torch.empty_like(a)
    t_copy = bench(lambda: b.copy_(a))  # noqa: F821  called inside bench(), before `del a, b` below
    ceiling = 2 * a.numel() * 4 / t_copy / 1e3  # GB/s
    del a, b
    print(f"device {torch.cuda.get_device_name()}  copy ceiling {ceiling:.0f} GB/s", flush=True)

    compiled: dict = {}

    def peer(op: str, mode: str):
        key = (op, mode)
        if key not in compiled:
            body = {"resample": torch_eager.resample, "fuse": torch_eager.fuse,
                    "voxelize": torch_eager.voxelize_with_geometry}[op]
            torch._dynamo.config.recompile_limit = 64  # one compile per shape, never eager fallback
            compiled[key] = torch.compile(body, dynamic=False, mode=None if mode == "default" else mode)
        return compiled[key]

    def tdt(name):
        return getattr(torch, name)

    # (label, version, extra NVRTC options, TUNING overrides, ops it applies to)
    variants = [(f"robocache@{v}", v, (), {}, VERSIONS.keys()) for v in all_versions()]
    if args.variants:
        variants += [("v2-noprefetch", "v2", ("-DRC_V2_PREFETCH_BYTES=0",), {}, ("resample", "fuse")),
                     ("v2-nohash", "v2", (), {"vox_hash": False}, ("voxelize",)),
                     ("v2+hash", "v2", (), {"vox_hash": True}, ("voxelize",)),
                     ("v3-nohash", "v3", (), {"vox_hash": False}, ("voxelize",)),
                     ("v3+hash", "v3", (), {"vox_hash": True}, ("voxelize",))]

    def run_case(op, label, call_of, ref, nbytes, dtype):
        results = {}
        for name, v, extra, tuning, ops_ in variants:
            if op not in ops_ or v not in VERSIONS[op]:
                continue
            saved = dict(_launch.TUNING)
            _cuda.EXTRA_OPTIONS = extra
            _launch.TUNING.update(tuning)
            try:
                fn = call_of(f"robocache@{v}")
                out = fn()
                err = _err(out, ref)
                ok = err <= {"float32": 2e-5, "float16": 3e-3, "bfloat16": 2e-2}[dtype]
                results[name] = (bench(fn) if ok else float("nan"), err, ok)
            finally:
                _cuda.EXTRA_OPTIONS = ()
                _launch.TUNING.clear()
                _launch.TUNING.update(saved)
        n_op = sum(r["op"] == op for r in rows)
        autotune = not args.no_autotune and n_op < args.autotune_cases
        modes = ["default"] + (["max-autotune-no-cudagraphs"] if autotune else [])
        for m in modes:
            fn = call_of(f"torch_compile:{m}")
            t0 = time.perf_counter()
            out = fn()
            torch.cuda.synchronize()
            compile_s = time.perf_counter() - t0
            err = _err(out, ref)
            results[f"compile:{m}"] = (bench(fn), err, True)
            results[f"compile:{m}"] += (compile_s,)
        best_peer = min(results[f"compile:{m}"][0] for m in modes)
        line = [f"{op:8s} {label:34s} {dtype:8s} {nbytes / 1e6:9.1f} MB"]
        for k, r in results.items():
            t = r[0]
            extra = f" c{r[3]:.0f}s" if len(r) > 3 else ""
            line.append(f"{k.split(':')[-1][:12]} {t:8.1f}us {nbytes / t / 1e3 / ceiling * 100 if t == t else 0:5.1f}%{extra}"
                        + ("" if r[2] else " WRONG"))
        best = results[f"robocache@{VERSIONS[op][-1]}"][0]
        line.append(f"v{VERSIONS[op][-1][1:]}/compile {best_peer / best:5.2f}x")
        print(" | ".join(line), flush=True)
        rows.append({"op": op, "case": label, "dtype": dtype, "bytes": nbytes, "ceiling_gb_s": ceiling,
                     "results": {k: list(r) for k, r in results.items()}, "ratio_vs_compile": best_peer / best})

    ops = args.ops.split(",")
    if "resample" in ops:
        shapes = [(256, 100, 50, 32, "bfloat16"), (16384, 200, 100, 32, "bfloat16"), (4096, 100, 50, 32, "float32"),
                  (32, 100, 50, 32, "float32"), (256, 100, 50, 1, "float32"), (256, 100, 50, 7, "bfloat16"),
                  (256, 100, 50, 512, "bfloat16"), (256, 10000, 5000, 32, "bfloat16"), (65536, 8, 4, 4, "float32"),
                  (1024, 50, 200, 16, "bfloat16"), (16384, 100, 50, 32, "float32")]
        if args.quick:
            shapes = shapes[:3]
        for bb, s, t, d, dt in shapes:
            vals = rng.standard_normal((bb, s, d))
            src = np.sort(np.linspace(0, 2, s)[None] + rng.uniform(-0.3, 0.3, (bb, s)) * 2 / s, axis=1)
            tgt = np.broadcast_to(np.linspace(0, 2, t), (bb, t)).copy()
            v = torch.from_numpy(vals).to(dev, tdt(dt))
            st = torch.from_numpy(src).to(dev, torch.float32)
            tt = torch.from_numpy(tgt).to(dev, torch.float32)
            ref = reference.resample(v.double().cpu().numpy(), st.double().cpu().numpy(), tt.double().cpu().numpy())
            es = v.element_size()
            nbytes = bb * s * d * es + bb * s * 4 + bb * t * 4 + bb * t * d * es

            def call_of(name, v=v, st=st, tt=tt):
                if name.startswith("robocache@"):
                    ver = name.split("@")[1]
                    return lambda: robocache.resample(v, st, tt, _version=ver)
                f = peer("resample", name.split(":")[1])
                return lambda: f(v, st, tt)
            run_case("resample", f"B{bb}-S{s}-T{t}-D{d}", call_of, ref, nbytes, dt)
    if "fuse" in ops:
        robot = [(60, 256), (200, 14), (666, 6)]
        for bb, dt in ([(32, "float32"), (256, "bfloat16"), (2048, "float32"), (2048, "bfloat16")]
                       if not args.quick else [(256, "bfloat16")]):
            streams, nstreams = [], []
            for s, d in robot:
                ts = np.sort(np.linspace(0, 2, s)[None] + rng.uniform(-0.3, 0.3, (bb, s)) * 2 / s, axis=1)
                v = torch.from_numpy(rng.standard_normal((bb, s, d))).to(dev, tdt(dt))
                st = torch.from_numpy(ts).to(dev, torch.float32)
                streams.append((v, st))
                nstreams.append((v.double().cpu().numpy(), st.double().cpu().numpy()))
            tt = torch.from_numpy(np.broadcast_to(np.linspace(0, 2, 100), (bb, 100)).copy()).to(dev, torch.float32)
            ref = reference.fuse(nstreams, tt.double().cpu().numpy())
            es = streams[0][0].element_size()
            nbytes = sum(bb * s * d * es + bb * s * 4 for s, d in robot) + bb * 100 * 4 + bb * 100 * 276 * es

            def call_of(name, streams=streams, tt=tt):
                if name.startswith("robocache@"):
                    ver = name.split("@")[1]
                    return lambda: robocache.fuse(streams, tt, _version=ver)
                f = peer("fuse", name.split(":")[1])
                return lambda: f(streams, tt)
            run_case("fuse", f"robot-B{bb}-T100", call_of, ref, nbytes, dt)
    if "voxelize" in ops:
        bounds = ((-2.0, -2.0, -2.0), (2.0, 2.0, 2.0))
        for bb, n, g, mode, cloud in [(4, 100_000, 64, "count", "uniform"), (4, 100_000, 64, "count", "clustered"),
                                      (4, 100_000, 64, "mean", "clustered"), (4, 100_000, 64, "mean", "uniform"),
                                      (16, 100_000, 64, "count", "clustered"), (1, 1_000_000, 128, "count", "uniform")]:
            if cloud == "clustered":
                centers = rng.uniform(-1.6, 1.6, (bb, 16, 3))
                pts = centers[:, rng.integers(0, 16, n)] + 0.08 * rng.standard_normal((bb, n, 3))
            else:
                pts = rng.uniform(-2.1, 2.1, (bb, n, 3))
            feats = rng.standard_normal((bb, n, 4)) if mode == "mean" else None
            p = torch.from_numpy(pts).to(dev, torch.float32)
            f = torch.from_numpy(feats).to(dev, torch.float32) if feats is not None else None
            ref = reference.voxelize(p.double().cpu().numpy(), f.double().cpu().numpy() if f is not None else None,
                                     (g, g, g), bounds, mode)
            geo = torch_eager.geometry_tensor((g, g, g), bounds, p.device)
            nbytes = bb * n * 12 + (bb * n * 16 if mode == "mean" else 0) + bb * g ** 3 * (4 if mode == "count" else 16)

            def call_of(name, p=p, f=f, g=g, mode=mode, geo=geo):
                if name.startswith("robocache@"):
                    ver = name.split("@")[1]
                    return lambda: robocache.voxelize(p, f, (g, g, g), bounds, mode, _version=ver)
                fn = peer("voxelize", name.split(":")[1])
                return lambda: fn(p, f, (g, g, g), geo, mode)
            run_case("voxelize", f"B{bb}-N{n}-G{g}-{mode}-{cloud}", call_of, ref, nbytes, "float32")

    # host cost per call of a tiny call: public API (torch, CuPy) vs a bare CuPy RawKernel launch
    import cupy

    bare = cupy.RawKernel(r'''extern "C" __global__ void bare(const float* a, const float* b, const float* c,
        float* o, int s, int t, int d, long long n, int vb, int lg, int tpg, unsigned long long m, unsigned int sh) {
        if (threadIdx.x == 0 && blockIdx.x == 0 && n < 0) o[0] = a[0] + b[0] + c[0] + s + t + d + vb + lg + tpg + m + sh; }''',
                          "bare")
    vv = torch.randn(1, 4, 1, device=dev)
    ss = torch.sort(torch.rand(1, 4, device=dev), dim=1).values
    tt = torch.rand(1, 2, device=dev)
    oo = torch.empty(1, 2, 1, device=dev)
    cargs = (np.uint64(vv.data_ptr()), np.uint64(ss.data_ptr()), np.uint64(tt.data_ptr()), np.uint64(oo.data_ptr()),
             np.int32(4), np.int32(2), np.int32(1), np.int64(2), np.int32(4), np.int32(0), np.int32(1),
             np.uint64(0), np.uint32(0))
    cv, cs_, ct = cupy.asarray(vv.cpu().numpy()), cupy.asarray(ss.cpu().numpy()), cupy.asarray(tt.cpu().numpy())

    def host_per_call(fn, n=20000) -> float:
        for _ in range(200):
            fn()
        torch.cuda.synchronize()
        best = float("inf")
        for _ in range(5):
            t0 = time.perf_counter()
            for _ in range(n):
                fn()
            t1 = time.perf_counter()
            torch.cuda.synchronize()
            best = min(best, (t1 - t0) / n * 1e6)
        return best

    pts_t = torch.rand(1, 8, 3, device=dev)
    disp = {
        "bare_cupy_launch": host_per_call(lambda: bare((1,), (256,), cargs)),
        "torch_add": host_per_call(lambda: torch.add(vv, 1.0)),
        "robocache.resample(torch)": host_per_call(lambda: robocache.resample(vv, ss, tt)),
        "robocache.resample(cupy)": host_per_call(lambda: robocache.resample(cv, cs_, ct)),
        "robocache.resample@v1(torch)": host_per_call(lambda: robocache.resample(vv, ss, tt, _version="v1"), 5000),
        "robocache.fuse(torch)": host_per_call(lambda: robocache.fuse([(vv, ss), (vv, ss)], tt)),
        "robocache.voxelize(torch)": host_per_call(
            lambda: robocache.voxelize(pts_t, None, (4, 4, 4), ((-1, -1, -1), (1, 1, 1)), "count")),
    }
    for k, v in disp.items():
        print(f"host per call  {k:32s} {v:7.2f} us  ({v / disp['bare_cupy_launch']:.2f}x bare launch)", flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps({"device": torch.cuda.get_device_name(), "ceiling_gb_s": ceiling,
                                               "rows": rows, "dispatch_us": disp}, indent=1))
    return 0


def _err(out, ref) -> float:
    got = out.double().cpu().numpy() if hasattr(out, "double") else np.asarray(out, dtype=np.float64)
    ref = np.asarray(ref, dtype=np.float64)
    if got.shape != ref.shape:
        return float("inf")
    if np.array_equal(np.isnan(got), np.isnan(ref)):
        m = ~np.isnan(ref)
        return float(np.max(np.abs(got[m] - ref[m]) / np.maximum(1.0, np.abs(ref[m])), initial=0.0))
    return float("inf")


if __name__ == "__main__":
    sys.exit(main())
