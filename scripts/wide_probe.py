#!/usr/bin/env python3
"""The column split, the shifted vectors, the staged, tile and flat kernels (kernels/rows_wide.cu, robocache/_tune.py
Config.cs, Config.shift, Config.stage) against the row kernel's default launch,
the tuner's choice and torch.compile on sampled points (a dev aid, not a measurement of record).

    python3 scripts/wide_probe.py [--time-limit 0.5] [--cases ID,ID,...]

Each point is the harness's case (its seeded inputs, its rotating input sets, its timer ``time_gpu``, warm): the
public call with the tuner's choice forced to each launch (the default, cs = 1, 2, 3, shift, staged, span, tile, flat:
resample plans the default for flat), then the tuner's
own choice (tuned at the first call), then torch.compile's case; the tuned launch's and torch.compile's share of the
copy ceiling (measured once at the start) by the point's minimal traffic.
Every output is checked against the NumPy reference by the harness's gate before it is timed. One line per point.
"""
from __future__ import annotations

import argparse
import importlib
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import probe_common  # noqa: E402  (scripts/probe_common.py)

# docs/evidence/h200-sampled-20261128/: the losers whose rows are few and wide, then two wins of the same kind; then
# mid-size points of narrow rows, where the search is most of the time (the staged kernel's)
POINTS = ("fuse/s6427-11-B5-T50-234x717", "resample/s9173-08-B233-S4-T3-D722-t64", "resample/s9173-02-B69-S3-T1-D385",
          "fuse/s6427-16-B3-T153-254x156", "resample/s6427-36-B5-S13-T33-D69",
          "resample/s7741-22-B673-S58-T142-D105", "resample/s6427-20-B34553-S36-T5-D43",
          "resample/s6427-39-B1391-S98-T387-D17", "resample/s7741-09-B3062-S131-T52-D50",
          "fuse/s7741-14-B924-T49-596x20-412x46-112x63-43x24-753x6",
          # docs/evidence/h200-shift-20261128/: fuse's losers of seed 7741, several narrow streams
          "fuse/s7741-47-B2195-T257-182x5-353x4-223x50-88x1", "fuse/s7741-43-B5539-T24-51x156-49x6-100x2-60x19",
          "fuse/s7741-46-B656-T545-56x2-331x9-665x63-123x17", "fuse/s6427-44-B1118-T592-2862x34-619x1")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0], allow_abbrev=False)
    ap.add_argument("--time-limit", type=float, default=0.5, help="seconds of sampling per launch (default 0.5)")
    ap.add_argument("--cases", default=",".join(POINTS), help="sampled case ids <op>/s<seed>-..., comma-separated")
    a = ap.parse_args()
    if not a.time_limit > 0:
        ap.error(f"--time-limit must be positive, got {a.time_limit}")
    bad = probe_common.bad_case_ids([c for c in a.cases.split(",") if c])
    if bad:
        ap.error(bad)
    ceiling = probe_common.gpu_ceiling("wide_probe")
    if ceiling is None:
        return 2
    from robocache import _tune

    plans = [importlib.import_module("robocache.resample")._PLANS, importlib.import_module("robocache.fuse")._PLANS]
    forced: list = [None]
    real_choose = _tune.choose

    def choose(dev, key, cands, trial, stream, may_tune):
        return (forced[0], True) if forced[0] is not None else real_choose(dev, key, cands, trial, stream, may_tune)

    _tune.choose = choose
    for cid in [c for c in a.cases.split(",") if c]:
        found = probe_common.sampled_pair(cid)
        if found is None:
            print(f"wide_probe: {cid}: no such sampled case", file=sys.stderr)
            return 2
        us: dict[str, float] = {}
        moved = 0
        launches = [("default", _tune.DEFAULT), ("cs1", _tune.Config(cs=1)), ("cs2", _tune.Config(cs=2)),
                    ("cs3", _tune.Config(cs=3)), ("shift", _tune.Config(shift=1)), ("staged", _tune.Config(stage=1)),
                    ("span", _tune.Config(stage=2)), ("tile", _tune.Config(stage=3)), ("flat", _tune.Config(stage=5))]
        for name, cfg in [*launches, ("tuned", "tuned"), ("torch.compile", None)]:
            case = found["torch_compile" if cfg is None else "robocache"]
            forced[0] = None if cfg == "tuned" else cfg  # tuned: the tuner's own choice, timed at the first call
            for p in plans:
                p.clear()
            prep, _, why = probe_common.gated(case)
            if prep is None:
                print(f"wide_probe: {cid} {name}: {why}", file=sys.stderr)
                return 2
            if why:
                print(f"wide_probe: {cid} {name}: {why}", flush=True)
                continue
            moved = moved or int(prep.moved_bytes or 0)
            us[name] = probe_common.timed_us(case, prep, a.time_limit)
        best = min(us.get(k, float("inf")) for k in ("cs1", "cs2", "cs3", "shift", "staged", "span", "tile", "flat"))
        print(f"{cid} {found['robocache'].dtype}: " + ", ".join(f"{k} {v:.2f}" for k, v in us.items())
              + f" us; best other {us['default'] / best:.2f}x the default, torch.compile / best other "
              f"{us.get('torch.compile', float('nan')) / best:.2f}x (/ default "
              f"{us.get('torch.compile', float('nan')) / us['default']:.2f}x); of the ceiling ({moved / 1e6:.1f} MB): "
              + ", ".join(f"{k} {100 * moved / (us[k] * 1e3) / ceiling:.0f}%"
                          for k in ("default", "staged", "span", "tile", "flat", "tuned", "torch.compile")
                          if us.get(k) and moved),
              flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
