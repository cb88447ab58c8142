"""python -m robocache.bench.pipelines run|list|dataset: the pipelines suite with every knob.

    python -m robocache.bench.pipelines dataset data/robot.h5 --size-mb 2000 --rgb
    python -m robocache.bench.pipelines run --device gpu --size-mb 256 --batch-sizes 32,128 --workers 4,8
    python -m robocache.bench.pipelines run --device gpu --train-batches 32,128 --prefetch-depth 2
    python -m robocache.bench.pipelines list --device cpu

``robocache-bench run --suite pipelines`` runs the defaults (:func:`run.default_config`). Exit codes: 0 ok,
1 when a case failed (incorrect, error, oom), 2 on bad arguments.
"""
from __future__ import annotations

import argparse
import sys


def _ints(text: str) -> tuple[int, ...]:
    try:
        return tuple(int(x) for x in text.split(",") if x.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated integers, got {text!r}") from None


def _names(text: str) -> tuple[str, ...]:
    return tuple(x.strip() for x in text.split(",") if x.strip())


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(allow_abbrev=False, prog="python -m robocache.bench.pipelines", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="cmd", required=True)
    sub.add_parser("dataset", allow_abbrev=False, help="write a synthetic robot dataset (see `dataset --help`)",
                   add_help=False)
    pr = sub.add_parser("profile", allow_abbrev=False,
                        help="Nsight Compute metrics of robocache's kernels (suite profile; GPU, ncu)")
    pr.add_argument("--device", choices=("auto", "gpu", "cpu"), default="auto")
    pr.add_argument("--cases", type=_names, help="case keys op/tag/dtype/provider (default: each op's "
                                                 "representative case, float32, robocache)")
    pr.add_argument("--out", default="results")
    pr.add_argument("--machine")
    for name in ("run", "list"):
        r = sub.add_parser(name, allow_abbrev=False,
                           help="run the suite" if name == "run" else "list the suite's cases")
        r.add_argument("--device", choices=("auto", "gpu", "cpu"), default="auto")
        r.add_argument("--dataset", help="an existing dataset file (default: generate one of --size-mb)")
        r.add_argument("--size-mb", type=float, help="size of the generated dataset's payload")
        r.add_argument("--min-s", type=float, help="shortest generated episode, seconds")
        r.add_argument("--max-s", type=float, help="longest generated episode, seconds")
        r.add_argument("--rgb", action="store_true", default=None, help="RGB frames (decoded in the workers)")
        r.add_argument("--seed", type=int)
        r.add_argument("--parts", type=_names, help="comma-separated subset of dataload,train,infer")
        r.add_argument("--batch-sizes", type=_ints)
        r.add_argument("--workers", type=_ints, help="DataLoader worker counts to sweep")
        r.add_argument("--load-batches", type=int, help="timed batches per data-loading case")
        r.add_argument("--models", type=_names, help="comma-separated subset of mlp,diffusion")
        r.add_argument("--train-batch", type=int)
        r.add_argument("--train-batches", type=_ints, help="training batch sizes (default: --train-batch, else the "
                                                             "first batch size)")
        r.add_argument("--train-workers", type=int)
        r.add_argument("--train-steps", type=int, help="timed optimizer steps per training case")
        r.add_argument("--profile-steps", type=int, help="profiled steps after the timed ones (0: no profile)")
        r.add_argument("--infer-batches", type=_ints)
        r.add_argument("--backends", type=_names,
                       help="comma-separated subset of eager,sdpa,torch_compile,torch_compile@max-autotune")
        r.add_argument("--infer-time", type=float, help="seconds of calls per inference case")
        r.add_argument("--cache-regimes", type=_names,
                       help="EpisodeCache regimes: comma-separated subset of resident,streamed ('' for none)")
        r.add_argument("--cache-budget-mb", type=float,
                       help="the streamed regime's memory budget in MB (default: half the dataset's payload)")
        r.add_argument("--prefetch-depth", type=int,
                       help="the streamed regime's chunks copied ahead beyond the next batch's (default 1)")
        r.add_argument("--ddp-ranks", type=_ints,
                       help="DDP training over these rank counts through torchrun (GPUs; Gloo processes with "
                            "--device cpu), e.g. 1,2,4,8")
        if name == "run":
            r.add_argument("--out", default="results", help="results folder (default results/)")
            r.add_argument("--machine", help="stable machine name (default $ROBOCACHE_MACHINE or the hostname)")
    return p


_MAP = {"dataset": "dataset", "size_mb": "size_mb", "min_s": "min_s", "max_s": "max_s", "rgb": "rgb", "seed": "seed",
        "parts": "parts", "batch_sizes": "batch_sizes", "workers": "workers", "load_batches": "load_batches",
        "models": "models", "train_batch": "train_batch", "train_workers": "train_workers",
        "train_steps": "train_steps", "profile_steps": "profile_steps", "infer_batches": "infer_batches",
        "backends": "backends", "infer_time": "infer_time_s", "ddp_ranks": "ddp_ranks",
        "train_batches": "train_batches", "cache_regimes": "cache_regimes", "cache_budget_mb": "cache_budget_mb",
        "prefetch_depth": "prefetch_depth"}


def config_from(args: argparse.Namespace, device: str):
    from .run import default_config

    cfg = default_config(device)
    for a, f in _MAP.items():
        v = getattr(args, a, None)
        if v is not None:
            setattr(cfg, f, v)
    cfg.validate()
    return cfg


def detect_device(choice: str) -> str:
    if choice != "auto":
        return choice
    try:
        import torch

        return "gpu" if torch.cuda.is_available() else "cpu"
    except ImportError:
        return "cpu"


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["dataset"]:
        from . import dataset

        return dataset.main(argv[1:])
    args = parser().parse_args(argv)
    device = detect_device(args.device)
    if args.cmd == "profile":
        return profile(args, device)
    try:
        cfg = config_from(args, device)
        if args.dataset:
            from . import dataset

            dataset.describe(args.dataset)
    except ValueError as e:
        print(f"pipelines {args.cmd}: {e}", file=sys.stderr)
        return 2
    if args.cmd == "list":
        return list_cases(cfg)
    return run_and_print(cfg, args.out, args.machine)


def profile(args: argparse.Namespace, device: str) -> int:
    from .. import context, specs, store
    from .. import env as envmod
    from ..views.pipelines import PROFILE_HEADER, pipeline_profile_rows
    from ..views.tables import table
    from . import ncu

    keys = list(args.cases) if args.cases else ncu.default_cases()
    try:
        for k in keys:
            specs.find(k)
    except (KeyError, ValueError) as e:
        print(f"pipelines profile: {e}", file=sys.stderr)
        return 2
    env = envmod.capture_env(device, machine=args.machine)
    commit, dirty = context.git_state()
    run_id = context.new_run_id()
    ctx = {"run_id": run_id, "git_commit": commit, "git_dirty": dirty, "frontend": "cli", "device": device}
    recs = ncu.run_profile(keys, device=device, ctx=ctx)
    slug = (env.get("arch") or "gpu").lower() if device == "gpu" else "cpu"
    from pathlib import Path

    path = store.write_records(Path(args.out) / store.safe_component(f"{slug}-{env['machine']}"), env, recs,
                               name=f"{run_id}-{ncu.SUITE}", unique=False)
    print(table(PROFILE_HEADER, pipeline_profile_rows(
        [{**r, "env": env} for r in recs])))
    failed = [r for r in recs if r["status"] in ("error", "timeout", "crash", "oom", "incorrect")]
    print(f"run {run_id}: {len(recs)} case(s), {len(failed)} failed; records: {path}")
    return 1 if failed else 0


def list_cases(cfg) -> int:
    from ..views.tables import table
    from .run import points

    info = {"episodes": "N", "seed": cfg.seed, "rgb": cfg.rgb, "payload_bytes": 0}
    pts = points(cfg, info)
    print(table(["case", "provider", "why"], [[f"{p['kind']}/{p['tag']}", p["provider"], p["reason"]] for p in pts]))
    print(f"\n{len(pts)} cases in suite pipelines for {cfg.device} (N = the dataset's episodes)")
    return 0


def run_and_print(cfg, out: str, machine: str | None) -> int:
    from ..views.pipelines import pipelines
    from .run import run

    where = "GPU" if cfg.device == "gpu" else "CPU only (robocache runs its NumPy fallback: no GPU figure)"
    print(f"robocache-bench pipelines on {where}: parts {', '.join(cfg.parts)}", file=sys.stderr)
    res = run(cfg, out, machine=machine, log=lambda s: print(s, file=sys.stderr, flush=True))
    if res.path is not None:  # read back through the loader: validated, each record with its env
        from .. import store

        loaded = store.load(res.path)
        for path, why in loaded.bad:
            print(f"FAILED to read back {path}: {why}", file=sys.stderr)
            return 1
        print(pipelines(loaded.records))
    counts: dict[str, int] = {}
    for r in res.records:
        counts[r["status"]] = counts.get(r["status"], 0) + 1
    print(f"run {res.run_id}: {', '.join(f'{k} {v}' for k, v in sorted(counts.items()))} in {res.wall_s:.0f} s; "
          f"records: {res.path}")
    for r in res.failed:
        print(f"  FAILED {r['case']['id']} {r['case']['provider']}: {r['status']}: "
              f"{(r.get('reason') or '').splitlines()[0][:200]}")
    return 1 if res.failed else 0


if __name__ == "__main__":
    sys.exit(main())
