#!/usr/bin/env python3
"""voxelize's launch variants on the sampled suite's points: which build or path wins where (a dev aid, GPU only).

    python3 scripts/vox_probe.py [--seeds 2] [--modes mean,count,occupancy] [--clouds clustered,...]
        [--variants "lib=;nohash=vox_hash=False;ppt=-DRC_V3_PPT=4;list=vox_list=True"] [--peers RECORDS.json ...]
        [--time-limit 0.3] [--json OUT]

Each variant is ``name=TOKENS``: ``-DNAME=VALUE`` tokens are NVRTC options added to every voxelize kernel's build,
``vox_hash=True|False|None`` sets ``robocache._launch.TUNING["vox_hash"]`` (None: the library's rule; True: the
shared-memory hash for count, occupancy and mean; False: never), ``vox_flat=True|None|hash`` sets ``TUNING["vox_flat"]``
(True: mean accumulates one feature element a thread, ``voxel_accumulate_flat_v3``; hash: mean through the hash
table, inserted and flushed one feature element a thread, ``voxel_hashed_flat_v3``), ``vox_list=True|False|None`` sets
``TUNING["vox_list"]`` (True: mean through the list of occupied voxels wherever the flat accumulate runs,
``voxel_list_v3`` and ``voxel_list_mean*_v3``; False: the dense passes; None: the byte rule ``_list_pays``). A setting
a variant does not name keeps the library's default (``robocache._launch.TUNING`` as imported; vox_list is False
until measured). For every sampled voxelize point of each seed (the cases
``robocache-bench run --suite sampled --sample-seed S --ops voxelize`` would time, provider ``robocache``), each
variant's public call is first checked against the NumPy reference (the harness's gate; a failing variant is
reported and not timed), then timed by the harness's timer (``time_gpu``, warm, the harness's input-set rotation).
``--peers``: sampled records of the same GPU (``results/<machine>/*-sampled.records.json``) whose
``torch_compile`` times are printed beside each variant as a ratio (peer / variant; > 1: the variant is faster).
The measurements of record stay the sampled suite's: this picks what the next run should carry.
"""
from __future__ import annotations

import argparse
import importlib
import json
import math
import os
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

HASH = {"True": True, "False": False, "None": None}


def library_tuning() -> dict:
    """The library's TUNING defaults (every key a variant may set), as robocache._launch defines them."""
    from robocache import _launch

    return dict(_launch.TUNING)


def parse_variants(text: str) -> list[tuple[str, tuple[str, ...], dict]]:
    """[(name, NVRTC options, TUNING settings: the library's defaults with the variant's tokens applied)] from
    ``name=TOKENS;...``; ValueError names a bad part."""
    out = []
    defaults = library_tuning()
    for part in (p.strip() for p in text.split(";")):
        if not part:
            continue
        name, sep, rest = part.partition("=")
        if not sep or not name.strip():
            raise ValueError(f"variant {part!r}: expected name=TOKENS")
        opts, tuning = [], dict(defaults)
        for tok in rest.split():
            key, _, val = tok.partition("=")
            if tok.startswith("-D"):
                opts.append(tok)
            elif key in tuning and val in HASH:
                tuning[key] = HASH[val]
            elif key == "vox_flat" and val == "hash":
                tuning[key] = "hash"
            else:
                raise ValueError(f"variant {name!r}: token {tok!r} is neither -DNAME=VALUE nor "
                                 "vox_hash=True|False|None nor vox_flat=True|False|None|hash nor "
                                 "vox_list=True|False|None")
        out.append((name.strip(), tuple(opts), tuning))
    if not out:
        raise ValueError("no variants")
    if len({n for n, _, _ in out}) != len(out):
        raise ValueError("variant names must differ")
    return out


def peer_times(paths: list[str]) -> dict[tuple[str, str], float]:
    """(case id, dtype) -> torch_compile's median us in the given sampled records."""
    out = {}
    for p in paths:
        doc = json.loads(Path(p).read_text())
        for r in doc.get("records", []):
            c = r.get("case") or {}
            t = ((r.get("metrics") or {}).get("time_us") or {}).get("p50")
            if c.get("provider") == "torch_compile" and t:
                out[(c["id"], c["dtype"])] = float(t)
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], allow_abbrev=False)
    ap.add_argument("--seeds", default="2", help="comma-separated sample seeds (default 2)")
    ap.add_argument("--modes", default="", help="comma-separated modes to keep (count, occupancy, mean; default all)")
    ap.add_argument("--clouds", default="", help="comma-separated clouds to keep (uniform, clustered, sparse)")
    ap.add_argument("--variants", default="lib=;nohash=vox_hash=False", help="name=TOKENS;... (see above)")
    ap.add_argument("--peers", nargs="*", default=[], help="sampled records with torch_compile times (same GPU)")
    ap.add_argument("--time-limit", type=float, default=0.3, help="seconds of sampling per variant and case")
    ap.add_argument("--json", help="write every row here (atomically)")
    a = ap.parse_args()
    try:
        variants = parse_variants(a.variants)
        seeds = [int(s) for s in a.seeds.split(",") if s.strip()]
        peers = peer_times(a.peers)
    except (ValueError, OSError) as e:
        print(f"vox_probe: {e}", file=sys.stderr)
        return 2
    modes = {m for m in a.modes.split(",") if m}
    clouds = {m for m in a.clouds.split(",") if m}
    import torch
    if not torch.cuda.is_available():
        print("vox_probe: no CUDA device (this probe times GPU kernels)", file=sys.stderr)
        return 2
    os.environ.setdefault("ROBOCACHE_CACHE_DIR", tempfile.mkdtemp(prefix="vox_probe_"))
    from robocache import _launch as L
    from robocache.bench import gate as gate_mod
    from robocache.bench import specs, worker
    from robocache.bench.timing.device import time_gpu
    vx = importlib.import_module("robocache.voxelize")
    orig_kernel = L.kernel
    defaults = dict(L.TUNING)

    def use(opts: tuple[str, ...], tuning: dict) -> None:
        def kernel(op, name, dev, options=()):
            return orig_kernel(op, name, dev, tuple(options) + (opts if op == "voxelize" else ()))
        L.kernel = kernel
        L.TUNING.update(tuning)
        vx._PLANS.clear()

    rows = []
    for seed in seeds:
        cases = [c for c in specs.cases("sampled", ops=["voxelize"], providers=["robocache"], sample_seed=seed)
                 if (not modes or c.params["mode"] in modes) and (not clouds or c.params["cloud"] in clouds)]
        print(f"seed {seed}: {len(cases)} points; variants {', '.join(n for n, _, _ in variants)}", flush=True)
        for case in cases:
            prep, why = worker.prepare(case, "gpu")
            if prep is None:
                print(f"  {case.id} {case.dtype}: skipped: {why}", flush=True)
                continue
            ref = specs.reference_output(case, worker._rounded(case, prep.args))
            call, _ = worker.rotating_call(case, prep, device="gpu", cache="warm")
            row = {"seed": seed, "id": case.id, "dtype": case.dtype, "params": case.params, "us": {}, "bad": {}}
            for name, opts, tuning in variants:
                use(opts, tuning)
                out = prep.call()
                chk = gate_mod.check(worker.to_host(out), ref, case.dtype)
                if not chk["passed"]:
                    row["bad"][name] = f"max rel err {chk['max_rel_err']}, bad fraction {chk['bad_fraction']}"
                    continue
                row["us"][name] = float(time_gpu(call, time_limit_s=a.time_limit).median_us)
            use((), defaults)
            tc = peers.get((case.id, case.dtype))
            row["torch_compile_us"] = tc
            cells = []
            for name, _, _ in variants:
                us = row["us"].get(name)
                cells.append(f"{name} " + ("BAD" if us is None else f"{us:8.1f}" + (f" ({tc / us:4.2f}x)" if tc else "")))
            p = case.params
            print(f"  {p['mode']:9s} {p['cloud']:9s} C{p['C']:<2d} {case.dtype:8s} {case.id[len('voxelize/'):]:50s} "
                  + "  ".join(cells) + (f"  tc {tc:.1f}" if tc else ""), flush=True)
            for name, msg in row["bad"].items():
                print(f"    {name}: WRONG OUTPUT ({msg})", flush=True)
            rows.append(row)
            del prep, call, ref
            torch.cuda.empty_cache()
    base = variants[0][0]
    print("summary (geomean time of each variant over the first's, points where both passed; with --peers: "
          "points >= 1.0x torch.compile):")
    for name, _, _ in variants:
        logs = [math.log(r["us"][name] / r["us"][base]) for r in rows if name in r["us"] and base in r["us"]]
        wins = [r["torch_compile_us"] / r["us"][name] for r in rows if r["torch_compile_us"] and name in r["us"]]
        line = f"  {name}: {math.exp(sum(logs) / len(logs)):.3f} over {len(logs)} points" if logs else f"  {name}: -"
        if wins:
            line += f"; vs torch.compile {sum(w >= 1.0 for w in wins)}/{len(wins)} >= 1.0x, worst {min(wins):.2f}x"
        print(line + (f"; {sum(name in r['bad'] for r in rows)} WRONG" if any(name in r["bad"] for r in rows) else ""))
    if a.json:
        tmp = Path(a.json).with_suffix(".tmp")
        tmp.write_text(json.dumps(rows, indent=1))
        os.replace(tmp, a.json)
    return 1 if any(r["bad"] for r in rows) else 0


if __name__ == "__main__":
    sys.exit(main())
