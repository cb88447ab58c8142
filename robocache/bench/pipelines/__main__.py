"""python -m robocache.bench.pipelines run|list|dataset: the pipelines suite with every knob.

    python -m robocache.bench.pipelines dataset data/robot.h5 --size-mb 2000 --rgb
    python -m robocache.bench.pipelines run --device gpu --size-mb 256 --batch-sizes 32,128 --workers 4,8
    python -m robocache.bench.pipelines run --device gpu --train-batches 32,128 --prefetch-depth 2
    python -m robocache.bench.pipelines list --device cpu

``robocache-bench run --suite pipelines`` runs the defaults (:func:`robocache.bench.specs.pipeline_defaults`). Exit codes: 0 ok,
1 when a case failed (incorrect, error, oom), 2 on bad arguments, 143 when SIGTERM/SIGHUP stopped a launch (a
timeout's; the records written so far are kept), 130 on Ctrl-C.
"""
from __future__ import annotations

import argparse
import sys

from .command import (add_run_options, checked_config, config_from, detect_device, list_cases,  # noqa: F401
                      name_list, profile, run_and_print)


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(allow_abbrev=False, prog="python -m robocache.bench.pipelines", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="cmd", required=True)
    sub.add_parser("dataset", allow_abbrev=False, help="write a synthetic robot dataset (see `dataset --help`)",
                   add_help=False)
    pr = sub.add_parser("profile", allow_abbrev=False,
                        help="Nsight Compute metrics of robocache's kernels (suite profile; GPU, ncu)")
    pr.add_argument("--device", choices=("auto", "gpu", "cpu"), default="auto")
    pr.add_argument("--cases", type=name_list, help="case keys op/tag/dtype/provider (default: each op's "
                                                 "representative case, float32, robocache)")
    pr.add_argument("--out", default="results")
    pr.add_argument("--machine")
    for name in ("run", "list"):
        r = sub.add_parser(name, allow_abbrev=False,
                           help="run the suite" if name == "run" else "list the suite's cases")
        r.add_argument("--device", choices=("auto", "gpu", "cpu"), default="auto")
        add_run_options(r)
        if name == "run":
            r.add_argument("--out", default="results", help="results folder (default results/)")
            r.add_argument("--machine", help="stable machine name (default $ROBOCACHE_MACHINE or the hostname)")
    return p


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
        cfg = checked_config(args, device)
    except ValueError as e:
        print(f"pipelines {args.cmd}: {e}", file=sys.stderr)
        return 2
    if args.cmd == "list":
        return list_cases(cfg)
    from ..multigpu import launch

    try:
        return run_and_print(cfg, args.out, args.machine)
    except launch.Stopped as e:  # SIGTERM/SIGHUP during a DDP launch (a timeout's): a line, not a traceback
        print(f"pipelines {args.cmd}: {e}; the launch's processes were stopped, the records written so far are kept",
              file=sys.stderr)
        return 143  # as robocache-bench's EXIT_STOPPED
    except KeyboardInterrupt:
        print(f"pipelines {args.cmd}: interrupted; the records written so far are kept", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
