"""The pipelines suite's commands, shared by the one CLI and its alias.

``robocache-bench run --suite pipelines [knobs]`` (:mod:`robocache.bench.cli`) and ``python -m
robocache.bench.pipelines run|list|profile`` (:mod:`.__main__`, kept for scripts and docs) take the same knobs
(:func:`add_run_options`), build the same :class:`~robocache.bench.specs.PipelineConfig`
(:func:`checked_config`) and run through :func:`run_and_print`.
"""
from __future__ import annotations

import argparse
import sys


def int_list(text: str) -> tuple[int, ...]:
    try:
        return tuple(int(x) for x in text.split(",") if x.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated integers, got {text!r}") from None


def name_list(text: str) -> tuple[str, ...]:
    return tuple(x.strip() for x in text.split(",") if x.strip())


def add_run_options(p) -> None:
    """The suite's knobs (``run`` and ``list``) on a parser or an argument group; each defaults to None: the
    :func:`~robocache.bench.specs.pipeline_defaults` of the device."""
    p.add_argument("--dataset", help="an existing dataset file (default: generate one of --size-mb)")
    p.add_argument("--size-mb", type=float, help="size of the generated dataset's payload")
    p.add_argument("--min-s", type=float, help="shortest generated episode, seconds")
    p.add_argument("--max-s", type=float, help="longest generated episode, seconds")
    p.add_argument("--rgb", action="store_true", default=None, help="RGB frames (decoded in the workers)")
    p.add_argument("--seed", type=int)
    p.add_argument("--parts", type=name_list, help="comma-separated subset of dataload,train,infer")
    p.add_argument("--batch-sizes", type=int_list)
    p.add_argument("--workers", type=int_list, help="DataLoader worker counts to sweep")
    p.add_argument("--load-batches", type=int, help="timed batches per data-loading case")
    p.add_argument("--models", type=name_list, help="comma-separated subset of mlp,diffusion")
    p.add_argument("--train-batch", type=int)
    p.add_argument("--train-batches", type=int_list, help="training batch sizes (default: --train-batch, else the "
                                                         "first batch size)")
    p.add_argument("--train-workers", type=int)
    p.add_argument("--train-steps", type=int, help="timed optimizer steps per training case")
    p.add_argument("--profile-steps", type=int, help="profiled steps after the timed ones (0: no profile)")
    p.add_argument("--infer-batches", type=int_list)
    p.add_argument("--backends", type=name_list,
                   help="comma-separated subset of eager,sdpa,torch_compile,torch_compile@max-autotune")
    p.add_argument("--infer-time", type=float, help="seconds of calls per inference case")
    p.add_argument("--cache-regimes", type=name_list,
                   help="EpisodeCache regimes: comma-separated subset of resident,streamed ('' for none)")
    p.add_argument("--cache-budget-mb", type=float,
                   help="the streamed regime's memory budget in MB (default: half the dataset's payload)")
    p.add_argument("--prefetch-depth", type=int,
                   help="the streamed regime's chunks copied ahead beyond the next batch's (default 1)")
    p.add_argument("--ddp-ranks", type=int_list,
                   help="DDP training over these rank counts through torchrun (GPUs; Gloo processes with "
                        "--device cpu), e.g. 1,2,4,8")


_MAP = {"dataset": "dataset", "size_mb": "size_mb", "min_s": "min_s", "max_s": "max_s", "rgb": "rgb", "seed": "seed",
        "parts": "parts", "batch_sizes": "batch_sizes", "workers": "workers", "load_batches": "load_batches",
        "models": "models", "train_batch": "train_batch", "train_workers": "train_workers",
        "train_steps": "train_steps", "profile_steps": "profile_steps", "infer_batches": "infer_batches",
        "backends": "backends", "infer_time": "infer_time_s", "ddp_ranks": "ddp_ranks",
        "train_batches": "train_batches", "cache_regimes": "cache_regimes", "cache_budget_mb": "cache_budget_mb",
        "prefetch_depth": "prefetch_depth"}


def given(args: argparse.Namespace) -> list[str]:
    """The knobs set in ``args`` (their flags, e.g. ``--batch-sizes``)."""
    return [f"--{a.replace('_', '-')}" for a in _MAP if getattr(args, a, None) is not None]


def config_from(args: argparse.Namespace, device: str):
    from ..specs import pipeline_defaults

    cfg = pipeline_defaults(device)
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


def checked_config(args: argparse.Namespace, device: str):
    """The config of ``args`` on ``device``, validated, and the dataset it names read: ``ValueError`` (one
    line) when either is wrong."""
    cfg = config_from(args, device)
    if cfg.dataset:
        from . import dataset

        dataset.describe(cfg.dataset)
    if cfg.ddp_ranks:  # the launches' grace ($ROBOCACHE_LAUNCH_MARGIN_S): refused before any part runs
        from ..multigpu import launch

        launch.launch_margin_s()
    return cfg


def profile(args: argparse.Namespace, device: str) -> int:
    import msgspec

    from .. import context, specs
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
    # the run's context: id, git state, environment, and the run file <out>/<arch or cpu>-<machine>/<id>-profile
    run = context.RunContext.start(suite=ncu.SUITE, device=device, out_dir=args.out, machine=args.machine)
    recs = ncu.run_profile(keys, device=device, ctx=run.task())
    path = run.write(recs)
    print(table(PROFILE_HEADER, pipeline_profile_rows([msgspec.structs.replace(r, env=run.env) for r in recs])))
    failed = [r for r in recs if r.status in ("error", "timeout", "crash", "oom", "incorrect")]
    print(f"run {run.run_id}: {len(recs)} case(s), {len(failed)} failed; records: {path}")
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
    # the run file and, after a DDP launch, its files per rank count (<run id>-pipelines-ddp-g<k>.records.json)
    files = sorted(str(p) for p in res.folder.glob(f"{res.run_id}-*.records.json")) if res.folder else []
    if files:  # read back through the loader: validated, each record with its env
        from .. import store

        loaded = store.load(*files)
        for path, why in loaded.bad:
            print(f"FAILED to read back {path}: {why}", file=sys.stderr)
            return 1
        print(pipelines(loaded.records))
    counts: dict[str, int] = {}
    for r in res.records:
        counts[r.status] = counts.get(r.status, 0) + 1
    print(f"run {res.run_id}: {', '.join(f'{k} {v}' for k, v in sorted(counts.items()))} in {res.wall_s:.0f} s; "
          f"records: {', '.join(files) or 'none written'}")
    for r in res.failed:
        print(f"  FAILED {r.case.id} {r.case.provider}: {r.status}: {(r.reason or '').splitlines()[0][:200]}")
    return 1 if res.failed else 0
