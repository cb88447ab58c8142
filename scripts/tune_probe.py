#!/usr/bin/env python3
# ruff: noqa: B023, E702, B007 - a dev probe: each loop's closures are called within their own iteration (B023 would
# flag a late binding that never happens), and its terse timing lines are meant to read as one
"""Kernel development probe (a dev aid, not a measurement of record): on user-like shapes drawn at random,
every launch configuration of the row kernels (robocache/_tune.py candidates) beside torch.compile, and
voxelize beside torch.compile. Every configuration's output is checked equal to the default's, and the
default's against PyTorch eager, before anything is timed.

    python3 scripts/tune_probe.py --seed 1 --n 40 --json OUT/probe.json [--ops resample,fuse,voxelize]

An A/B of kernel builds (every candidate of each build timed, outputs checked equal): e.g.
    --tuner-cands --variants "none=;warp=-DRC_V2_PREFETCH_BYTES=4096"
Torch.compile's column ("tc") is timed over back-to-back calls, so under ~60 us it is the host's time.

The tuner's build choices (Config.seq, the walk; Config.prefetch, the short-row prefetch) are candidates where
robocache/_tune.py offers them, so one build A/Bs them: each row prints the best of the launches without them
("base") beside the best of all ("choice"), e.g. the sampled worst points with
    --tuner-cands --ops resample --n 0 --shapes "63558,31,107,1,float32,float32;4096,100,50,32,float32,float32"
"""
from __future__ import annotations

import argparse
import json
import math
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

CAP = 1.5e9  # bytes moved per case at most


def loguni(rng, lo, hi):
    return int(round(math.exp(rng.uniform(math.log(lo), math.log(hi)))))


def times(torch, rng, b, s, dur, tdt, dev):
    base = torch.linspace(0, dur, s, device=dev, dtype=torch.float64)
    jit = (torch.rand(b, s, device=dev, dtype=torch.float64) - 0.5) * (0.6 * dur / max(s, 2))
    return torch.sort(base[None] + jit, dim=1).values.to(tdt)


def main() -> int:
    ap = argparse.ArgumentParser(description="Kernel development probe (scripts/tune_probe.py).", allow_abbrev=False)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--n", type=int, default=40)
    ap.add_argument("--ops", default="resample,fuse,voxelize")
    ap.add_argument("--json", required=True)
    ap.add_argument("--budget-s", type=float, default=400)
    ap.add_argument("--named", action="store_true", help="the issue's named losing shapes first")
    ap.add_argument("--shapes", default="", help="resample shapes to run first: 'B,S,T,D,values,times;...'")
    ap.add_argument("--variants", default="",
                    help="builds to compare, 'name=-DOPT=1 -DOPT2=0;name2=': every candidate of each (the first is "
                         "the reference build, checked against the default) is timed; '' runs the library's build")
    ap.add_argument("--tuner-cands", action="store_true", help="the tuner's candidates, not the exhaustive space")
    args = ap.parse_args()
    import torch
    import robocache
    from robocache import _tune, _launch as L
    rs, fu = sys.modules["robocache.resample"], sys.modules["robocache.fuse"]
    variants = [(v.split("=", 1)[0].strip(), tuple(v.split("=", 1)[1].split())) for v in args.variants.split(";") if v.strip()]
    variants = variants or [("lib", ())]
    extra: list[str] = []
    _opts = _tune.Config.options
    _tune.Config.options = lambda self: _opts(self) + tuple(extra)  # every build of a variant gets its options
    from robocache import _arrays as A
    from robocache.providers import torch_eager

    dev = "cuda"
    t_start = time.perf_counter()
    rng = np.random.default_rng(args.seed)
    torch.manual_seed(args.seed)
    torch._dynamo.config.recompile_limit = 1000
    torch._dynamo.config.cache_size_limit = 1000
    out_rows = []
    def evt(fn, n=5):
        fn()
        torch.cuda.synchronize()
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record(); fn(); e.record(); e.synchronize()
        one = max(s.elapsed_time(e) * 1e3, 1.0)
        reps = max(1, min(200, int(1000 / one)))
        xs = []
        for _ in range(n):
            s.record()
            for _ in range(reps):
                fn()
            e.record(); e.synchronize()
            xs.append(s.elapsed_time(e) * 1e3 / reps)
        return sorted(xs)[n // 2]

    def copy_ceiling() -> float:
        src = torch.empty(2**29, dtype=torch.float32, device=dev)
        dst = torch.empty_like(src)
        return 2 * src.numel() * 4 / evt(lambda: dst.copy_(src)) / 1e3

    ceiling = copy_ceiling()
    name = torch.cuda.get_device_name()
    print(f"device {name} copy ceiling {ceiling:.0f} GB/s", flush=True)
    stream = L.stream_for("torch", 0)

    def compiled(fn):
        return torch.compile(fn, dynamic=False)

    def over():
        return time.perf_counter() - t_start > args.budget_s

    def by_variant(cands, trial, scratch, outd, bad):
        """{variant: {config: device us}}: each build's candidates, every output checked equal to ``outd`` first."""
        per_variant = {}
        for vname, vopts in variants:
            extra[:] = vopts
            for c in cands:
                trial(c)()
                if not torch.equal(scratch, outd):
                    bad.append(f"{vname}:{c}")
            per_variant[vname], _ = _tune.tune(cands, trial, stream, budget_s=60)
        extra[:] = []
        return per_variant

    def choice_cols(timed):
        """The A/B of the build choices in one build's timings: the best launch without seq and prefetch ("base")
        against the best of all, and which kind won ("base", "seq", "prefetch"; "none offered")."""
        base = {c: us for c, us in timed.items() if not (c.seq or c.prefetch)}
        best = min(timed, key=timed.get)
        kind = "seq" if best.seq else "prefetch" if best.prefetch else "base"
        return {"base_us": min(base.values()), "choice_us": timed[best],
                "choice_kind": kind if len(base) < len(timed) else "none offered"}

    def print_choice(row):
        if row["choice_kind"] != "none offered":
            print(f"   build choices: base {row['base_us']:9.1f}us, with seq/prefetch {row['choice_us']:9.1f}us "
                  f"({row['base_us'] / row['choice_us']:.2f}x, {row['choice_kind']})", flush=True)

    ops = args.ops.split(",")
    dts = ["float32", "float16", "bfloat16"]
    if "resample" in ops:
        shapes = []
        for part in filter(None, args.shapes.split(";")):
            b_, s_, t_, d_, dt_, tdt_ = part.split(",")
            shapes.append((int(b_), int(s_), int(t_), int(d_), dt_.strip(), tdt_.strip()))
        n_given = len(shapes)
        if args.named:
            shapes += [(8192, 400, 200, 14, "float32", "float32"), (8192, 400, 200, 14, "bfloat16", "float32"),
                       (4096, 1000, 500, 64, "float32", "float32"), (16384, 200, 100, 32, "bfloat16", "float32"),
                       (65536, 100, 50, 1, "float32", "float32"), (4096, 64, 512, 3, "float32", "float32"),
                       (256, 100, 50, 32, "bfloat16", "float32")]
        while len(shapes) < args.n + n_given + (7 if args.named else 0):
            b = loguni(rng, 1, 65536); s = loguni(rng, 2, 200000); t = max(1, int(round(s * math.exp(rng.uniform(math.log(1 / 16), math.log(16))))))
            d = loguni(rng, 1, 1024); dt = dts[rng.integers(3)]; tdt = "float64" if rng.random() < 0.25 else "float32"
            es = 4 if dt == "float32" else 2
            ts = 8 if tdt == "float64" else 4
            per_b = s * d * es + s * ts + t * ts + t * d * es
            b = max(1, min(b, int(CAP // per_b)))
            if per_b > CAP or b * t > 2**31 // 64:
                continue
            shapes.append((b, s, t, d, dt, tdt))
        for (b, s, t, d, dt, tdt) in shapes:
            if over():
                break
            vals = torch.randn(b, s, d, device=dev).to(getattr(torch, dt))
            src = times(torch, rng, b, s, 2.0, getattr(torch, tdt), dev)
            tgt = torch.linspace(-0.02, 2.02, t, device=dev, dtype=torch.float64)[None].expand(b, t).contiguous().to(getattr(torch, tdt))
            es = vals.element_size(); ts = src.element_size()
            nbytes = b * s * d * es + b * s * ts + b * t * ts + b * t * d * es
            v, sa, ta = A.describe("v", vals), A.describe("s", src), A.describe("t", tgt)
            ref = torch_eager.resample(vals, src, tgt)
            outd = robocache.resample(vals, src, tgt, _version="v2")
            tol = 1e-5 if dt == "float32" else 2e-2
            err = float(((outd.float() - ref.float()).abs() / ref.float().abs().clamp(min=1)).max())
            es_, vb, n_targets, sms = rs._geometry(v, vals, 0, t)
            nvec = max(1, d * es_ // vb)
            lg_nat = min(5, (nvec - 1).bit_length())
            loop_iters = -(-nvec // (1 << lg_nat))
            kw = {"n_tgt": t, "n_src": s, "time_bytes": src.element_size(),  # the walk's and the prefetch's test
                  "shifted": _tune.shift_pays(vb, d * es_), "staged": _tune.stage_pays(d * es_, b * t),
                  "spanned": _tune.span_pays(d * es_, s, t), "tiled": _tune.tile_pays(lg_nat, b * t),
                  "spec": _tune.spec_pays(d * es_), "flat": _tune.resample_flat_pays(vb, b * t, d)}
            cands = (_tune.candidates(lg_nat, loop_iters, b * t, **kw) if args.tuner_cands
                     else _tune.exhaustive(lg_nat, loop_iters, **kw))
            scratch = torch.empty_like(outd)
            bad = []

            def trial(cfg):
                p = rs._plan_v2(v, sa, vals, 0, t, cfg)
                return lambda: p(vals, src, tgt, scratch)
            per_variant = by_variant(cands, trial, scratch, outd, bad)
            timed = per_variant[variants[0][0]]
            t0 = time.perf_counter()
            f = compiled(torch_eager.resample)
            f(vals, src, tgt)
            comp_s = time.perf_counter() - t0
            tc = evt(lambda: f(vals, src, tgt))
            pub = evt(lambda: robocache.resample(vals, src, tgt, _version="v2"))
            best = min(timed, key=timed.get)
            pub3 = evt(lambda: robocache.resample(vals, src, tgt))
            row = {"op": "resample", "shape": [b, s, t, d, dt, tdt], "bytes": nbytes, "ceiling": ceiling, "err": err,
                   "err_ok": err <= tol, "bad": bad, "compile_us": tc, "compile_s": comp_s, "v2_us": pub,
                   "public_us": pub3, **choice_cols(timed),
                   "cands": {json.dumps(c.to_json()): us for c, us in timed.items()}, "best": best.to_json(),
                   "variants": {vn: {json.dumps(c.to_json()): us for c, us in tv.items()} for vn, tv in per_variant.items()}}
            out_rows.append(row)
            if len(variants) > 1:
                print("   " + " | ".join(f"{vn}: default {tv[_tune.DEFAULT]:8.1f}us best {min(tv.values()):8.1f}us "
                                         f"(tc/best {tc / min(tv.values()):5.2f})" for vn, tv in per_variant.items())
                      + f" | public {pub3:8.1f}us tc/public {tc / pub3:5.2f}", flush=True)
            print(f"rs B{b:6d} S{s:6d} T{t:6d} D{d:4d} {dt:8s} {tdt:7s} {nbytes/1e6:8.1f}MB v2 {pub:9.1f}us "
                  f"best {timed[best]:9.1f}us tc {tc:9.1f}us | v2/tc {tc/pub:5.2f} best/tc {tc/timed[best]:5.2f} "
                  f"bw {nbytes/timed[best]/1e3/ceiling*100:5.1f}% {best.to_json()} {'ERR' if not row['err_ok'] else ''}{' BAD' if bad else ''}", flush=True)
            print_choice(row)
            del vals, src, tgt, ref, outd, scratch
            torch._dynamo.reset()
    if "fuse" in ops:
        for i in range(args.n):
            if over():
                break
            k = int(rng.integers(1, 7))
            dur = math.exp(rng.uniform(math.log(0.5), math.log(10)))
            rates = [math.exp(rng.uniform(math.log(10), math.log(1000))) for _ in range(k)]
            dims = [int(rng.choice([1, 3, 6, 7, 14, 32, 64, 128, 256, 512])) for _ in range(k)]
            hz = math.exp(rng.uniform(math.log(10), math.log(200)))
            t = max(2, int(hz * dur))
            ss = [max(2, int(r * dur)) for r in rates]
            dt = dts[rng.integers(3)]
            es = 4 if dt == "float32" else 2
            per_b = sum(s * d * es + s * 4 for s, d in zip(ss, dims)) + t * 4 + t * sum(dims) * es
            b = max(1, min(loguni(rng, 1, 8192), int(CAP // per_b)))
            streams = [(torch.randn(b, s, d, device=dev).to(getattr(torch, dt)), times(torch, rng, b, s, dur, torch.float32, dev))
                       for s, d in zip(ss, dims)]
            tgt = torch.linspace(0, dur, t, device=dev)[None].expand(b, t).contiguous()
            nbytes = b * per_b
            ref = torch_eager.fuse(streams, tgt)
            outd = robocache.fuse(streams, tgt, _version="v2")
            tol = 1e-5 if dt == "float32" else 2e-2
            err = float(((outd.float() - ref.float()).abs() / ref.float().abs().clamp(min=1)).max())
            pairs = [(A.describe("v", v_), A.describe("t", s_)) for v_, s_ in streams]
            ta = A.describe("tgt", tgt)
            es_, vbs = fu._streams_geometry(pairs, ta, streams, 0)
            nvecs = [max(1, d * es_ // vb) for d, vb in zip(dims, vbs)]
            lg_nat = max(min(5, (n - 1).bit_length()) for n in nvecs)
            iters = max(-(-n // (1 << min(5, (n - 1).bit_length()))) for n in nvecs)
            kw = {"n_tgt": t, "n_src": max(ss), "time_bytes": 4,  # float32 times: the walk's and the prefetch's test
                  "shifted": any(_tune.shift_pays(vb, d * es_) for d, vb in zip(dims, vbs)),
                  "staged": _tune.stage_pays(max(dims) * es_, b * t),
                  "spanned": any(_tune.span_pays(d * es_, n, t) for d, n in zip(dims, ss)),
                  "tiled": _tune.tile_pays(lg_nat, b * t), "flat": _tune.flat_pays(b * t, sum(dims), len(dims))}
            cands = (_tune.candidates(lg_nat, iters, b * t, **kw) if args.tuner_cands
                     else _tune.exhaustive(lg_nat, iters, **kw))
            scratch = torch.empty_like(outd)
            bad = []

            def trial(cfg):
                p = fu._plan_v2(pairs, ta, streams, 0, cfg)
                return lambda: p(streams, tgt, scratch)
            per_variant = by_variant(cands, trial, scratch, outd, bad)
            timed = per_variant[variants[0][0]]
            f = compiled(torch_eager.fuse)
            f(streams, tgt)
            tc = evt(lambda: f(streams, tgt))
            pub = evt(lambda: robocache.fuse(streams, tgt, _version="v2"))
            pub3 = evt(lambda: robocache.fuse(streams, tgt))
            best = min(timed, key=timed.get)
            out_rows.append({"op": "fuse", "shape": [b, t, ss, dims, dt], "bytes": nbytes, "ceiling": ceiling, "err": err,
                             "err_ok": err <= tol, "bad": bad, "compile_us": tc, "v2_us": pub, "public_us": pub3,
                             **choice_cols(timed),
                             "cands": {json.dumps(c.to_json()): us for c, us in timed.items()}, "best": best.to_json(),
                             "variants": {vn: {json.dumps(c.to_json()): us for c, us in tv.items()}
                                          for vn, tv in per_variant.items()}})
            if len(variants) > 1:
                print("   " + " | ".join(f"{vn}: default {tv[_tune.DEFAULT]:8.1f}us best {min(tv.values()):8.1f}us "
                                         f"(tc/best {tc / min(tv.values()):5.2f})" for vn, tv in per_variant.items())
                      + f" | public {pub3:8.1f}us tc/public {tc / pub3:5.2f}", flush=True)
            print(f"fu B{b:5d} T{t:5d} S{ss} D{dims} {dt:8s} {nbytes/1e6:8.1f}MB v2 {pub:9.1f}us best {timed[best]:9.1f}us "
                  f"tc {tc:9.1f}us | v2/tc {tc/pub:5.2f} best/tc {tc/timed[best]:5.2f} bw {nbytes/timed[best]/1e3/ceiling*100:5.1f}% "
                  f"{best.to_json()} {'ERR' if err > tol else ''}{' BAD' if bad else ''}", flush=True)
            print_choice(out_rows[-1])
            del streams, tgt, ref, outd, scratch
            torch._dynamo.reset()
    if "voxelize" in ops:
        for i in range(args.n):
            if over():
                break
            n = loguni(rng, 1000, 2_000_000); g = int(rng.choice([16, 32, 48, 64, 96, 128, 192, 256]))
            mode = str(rng.choice(["count", "occupancy", "mean"])); c = loguni(rng, 1, 16) if mode == "mean" else 0
            cloud = str(rng.choice(["uniform", "clustered", "sparse"]))
            b = loguni(rng, 1, 16)
            per_b = n * 12 + n * c * 4 + g ** 3 * (4 * max(c, 1) if mode == "mean" else 4)
            b = max(1, min(b, int(CAP // per_b)))
            if cloud == "uniform":
                pts = (torch.rand(b, n, 3, device=dev) * 4.2 - 2.1)
            elif cloud == "clustered":
                cent = torch.rand(b, 16, 3, device=dev) * 3.2 - 1.6
                idx = torch.randint(0, 16, (b, n), device=dev)
                pts = torch.gather(cent, 1, idx[..., None].expand(b, n, 3)) + 0.08 * torch.randn(b, n, 3, device=dev)
            else:
                pts = torch.randn(b, n, 3, device=dev) * 0.3 + 1.9
            feats = torch.randn(b, n, c, device=dev) if mode == "mean" else None
            bounds = ((-2.0, -2.0, -2.0), (2.0, 2.0, 2.0))
            grid = (g, g, g)
            ref = torch_eager.voxelize(pts, feats, grid, bounds, mode)
            got = robocache.voxelize(pts, feats, grid, bounds, mode)
            ok = bool(torch.allclose(got.float(), ref.float(), rtol=1e-4, atol=1e-5))
            geo = torch_eager.geometry_tensor(grid, bounds, pts.device)
            f = compiled(torch_eager.voxelize_with_geometry)
            f(pts, feats, grid, geo, mode)
            tc = evt(lambda: f(pts, feats, grid, geo, mode))
            pub = evt(lambda: robocache.voxelize(pts, feats, grid, bounds, mode))
            nbytes = b * per_b
            out_rows.append({"op": "voxelize", "shape": [b, n, g, mode, c, cloud], "bytes": nbytes, "ceiling": ceiling,
                             "ok": ok, "compile_us": tc, "pub_us": pub})
            print(f"vx B{b:3d} N{n:8d} G{g:4d} {mode:9s} C{c:2d} {cloud:9s} {nbytes/1e6:8.1f}MB pub {pub:9.1f}us tc {tc:9.1f}us "
                  f"| pub/tc {tc/pub:5.2f} bw {nbytes/pub/1e3/ceiling*100:5.1f}% {'' if ok else 'WRONG'}", flush=True)
            del pts, feats, ref, got
            torch._dynamo.reset()
    Path(args.json).write_text(json.dumps({"device": name, "ceiling": ceiling, "rows": out_rows}))
    # summary
    for op in ("resample", "fuse", "voxelize"):
        rows = [r for r in out_rows if r["op"] == op]
        if not rows:
            continue
        if op == "voxelize":
            rat = sorted(r["compile_us"] / r["pub_us"] for r in rows)
            print(f"SUMMARY {op}: n={len(rows)} pub/tc median {np.median(rat):.2f} worst {rat[0]:.2f} "
                  f">=1: {sum(x >= 1 for x in rat)}/{len(rat)}")
            continue
        v2 = sorted(r["compile_us"] / r["v2_us"] for r in rows)
        bst = sorted(r["compile_us"] / min(r["cands"].values()) for r in rows)
        print(f"SUMMARY {op}: n={len(rows)} v2/tc median {np.median(v2):.2f} worst {v2[0]:.2f} >=1 {sum(x >= 1 for x in v2)}; "
              f"best/tc median {np.median(bst):.2f} worst {bst[0]:.2f} >=1 {sum(x >= 1 for x in bst)}")
        offered = [r for r in rows if r["choice_kind"] != "none offered"]
        wins = [r for r in offered if r["choice_us"] < (1 - _tune.MARGIN) * r["base_us"]]
        print(f"SUMMARY {op} build choices: offered on {len(offered)} shapes, beat the base launches by the tuner's "
              f"margin on {len(wins)}: " + ", ".join(f"{r['choice_kind']} {r['base_us'] / r['choice_us']:.2f}x"
                                                     for r in wins))
    print(f"probe wall {time.perf_counter() - t_start:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
