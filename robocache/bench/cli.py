"""robocache-bench: run the grid, look at a run, write the report, find regressions.

    robocache-bench run --suite quick                 # the best device present, into results/local/ by default
    robocache-bench run --suite multigpu --gpus 8     # multi-GPU cases through torchrun (NCCL; Gloo on --device cpu)
    robocache-bench list --suite nightly --ops fuse   # the cases and why each exists
    robocache-bench show results/                     # one run (the latest unless --run), every case
    robocache-bench report results/ --out report.md   # the markdown report of one run
    robocache-bench report results/ --kernels         # every machine: kernel journey, vs torch.compile, call cost
    robocache-bench report results/ --sampled         # the sampled suite: per op, seed and GPU vs the peers
    robocache-bench compare BASE NEW --history results/   # per case: slower / faster / inconclusive / same / ...
    robocache-bench check results/ --machine gpu-h200     # change points over the history; alerts
    robocache-bench bisect CHANGE_ID --alerts alerts.json # the commit that moved an alert (git worktrees)
    robocache-bench show results/ --format json       # list, show and report as JSON too (docs/report.md)
"""
from __future__ import annotations

import argparse
import io
import json
import math
import os
import sys
import tempfile
import traceback
import unicodedata
from pathlib import Path
from typing import Any

from .. import providers
from . import specs, store
from .messages import TimingOptions
from .columns import as_rows
from .schema import Record
from .terminal import for_stdout, terminal_text  # noqa: F401 - cli.terminal_text, cli.for_stdout: their old home
from .multigpu import launch
from .pipelines import command as pipeline_options  # the pipelines suite's knobs and run (run --suite pipelines)
from .views import report as rep
from .views.kernels import kernels, kernels_sections
from .views.sampled import point_rows as sampled_points, sampled, sampled_sections, summary as sampled_summary
from .views.multigpu import multigpu as multigpu_table
from .views.pipelines import latest_pipeline_rows, latest_pipeline_runs
from .views.records import pick_run_id, runs
from .views.tables import sections_json, table


PIPELINES = specs.PIPELINES  # the end-to-end suite (robocache.bench.pipelines), outside the kernel grid


def _csv(text: str) -> list[str]:
    """A comma-separated option's items; invisible format characters (a word joiner copied from a GitHub issue
    after ``@``, a zero-width space) are dropped, so a provider name copied from rendered markdown still works."""
    text = "".join(ch for ch in text if unicodedata.category(ch) != "Cf")
    return [x.strip() for x in text.split(",") if x.strip()]


def number(kind: type = float, *, lo: float | None = None, hi: float | None = None, lo_open: bool = False,
           hi_open: bool = False):
    """An argparse ``type`` for a finite number of ``kind`` (int or float) in a range; the one validator of
    every numeric option (NaN, inf, overflow such as 1e400 and out-of-range values are refused at parse time,
    so a bad value never reaches a measurement)."""
    def rng() -> str:
        parts = []
        if lo is not None:
            parts.append(f"{'>' if lo_open else '>='} {lo:g}")
        if hi is not None:
            parts.append(f"{'<' if hi_open else '<='} {hi:g}")
        return ("a finite " if kind is float else "an ") + ("number" if kind is float else "integer") + \
            (" " + " and ".join(parts) if parts else "")

    def parse(text: str):
        try:
            x = kind(text)
        except (TypeError, ValueError):
            raise argparse.ArgumentTypeError(f"expected {rng()}, got {text!r}") from None
        if isinstance(x, float) and not math.isfinite(x):
            raise argparse.ArgumentTypeError(f"expected {rng()}, got {text!r}")
        if lo is not None and (x <= lo if lo_open else x < lo):
            raise argparse.ArgumentTypeError(f"expected {rng()}, got {text!r}")
        if hi is not None and (x >= hi if hi_open else x > hi):
            raise argparse.ArgumentTypeError(f"expected {rng()}, got {text!r}")
        return x

    parse.__name__ = kind.__name__  # argparse names the type in its message
    return parse


_POSITIVE_S = number(float, lo=0, lo_open=True)
_NONNEG_INT = number(int, lo=0)
_POSITIVE_INT = number(int, lo=1)


def _endpoint(text: str) -> str:
    """HOST:PORT with a port in 1..65535 (torchrun's c10d rendezvous)."""
    host, sep, port = text.rpartition(":")
    if not sep or not host or not port.isdigit() or not 1 <= int(port) <= 65535:
        raise argparse.ArgumentTypeError(f"expected HOST:PORT with a port in 1..65535, got {text!r}")
    return text


def _stderr_is_tty() -> bool:
    """The progress bar (tqdm, on stderr) only where someone watches: a log or pipe gets the plain lines."""
    try:
        return sys.stderr.isatty()
    except (AttributeError, ValueError):
        return False


# Where `run` writes without --out: ignored by git (.gitignore), so an ad-hoc run never lands in the committed tree.
ADHOC_OUT = "results/local"
# Every provider a case can name (the provider table's: the GPU peers, robocache's kernel versions, NumPy on the
# CPU, and the call-cost cases' own).
ALL_PROVIDERS = tuple(providers.names())
_CALL_ONLY = [p for p in ALL_PROVIDERS if providers.get(p).grids == ("dispatch",)]
_PROVIDERS_HELP = (f"comma-separated subset of {','.join(ALL_PROVIDERS)} ({' and '.join(_CALL_ONLY)}: the "
                   "call-cost cases only)")


_SAMPLE_SEED_HELP = (f"the sampled points' seed (suites sampled and nightly): a fresh set no one tuned to; the seed "
                     f"is in every sampled case's tag and params (default: ${specs.SAMPLE_SEED_ENV}, else "
                     f"{specs.SAMPLE_SEED}, the grid version's)")


# The JSON documents of `list`, `show` and `report --format json` (docs/report.md, "JSON output"); a change to
# their keys that a reader could trip over bumps the number after the slash.
LIST_SCHEMA, SHOW_SCHEMA, REPORT_SCHEMA = "robocache-list/1", "robocache-show/1", "robocache-report/1"


def version_text() -> str:
    """``robocache <version>`` from the installed distribution's metadata, plus the commit (and uncommitted
    changes) when the package is imported from a git checkout rather than from an installed wheel."""
    import importlib.metadata

    from .context import git_state

    try:
        ver = importlib.metadata.version("robocache")
    except importlib.metadata.PackageNotFoundError:
        ver = "unknown (not installed: no package metadata)"
    text = f"robocache {ver}"
    root = Path(__file__).resolve().parents[2]  # the checkout's root when robocache/ sits in one
    if (root / ".git").exists() and (root / "pyproject.toml").is_file():
        commit, dirty = git_state(root)
        if commit:
            text += f" (git {commit[:12]}{', uncommitted changes' if dirty else ''})"
    return text


class _VersionAction(argparse.Action):
    """``--version``: computed only when asked (the git call costs a subprocess)."""

    def __init__(self, option_strings, dest=argparse.SUPPRESS, default=argparse.SUPPRESS, help=None):
        super().__init__(option_strings=option_strings, dest=dest, default=default, nargs=0, help=help)

    def __call__(self, parser, _namespace, _values, _option_string=None):  # argparse passes them positionally
        print(version_text())  # on stdout, as argparse's own version action
        parser.exit(0)


def _json_text(doc: dict) -> str:
    """The one JSON rendering of every --format json output: strict JSON (no NaN), one key per line."""
    return json.dumps(doc, indent=1, allow_nan=False, ensure_ascii=False)


class _Parser(argparse.ArgumentParser):
    """argparse with a one-line usage error (the option and what to fix, then where the help is), exit 2, and no
    prefix matching of long options (``run --suit quick`` is an error, never ``--suite``; every subcommand's parser
    is one of these: argparse makes them with the parent's class)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("allow_abbrev", False)
        super().__init__(*args, **kwargs)

    def error(self, message: str):  # type: ignore[override]
        self.exit(EXIT_USAGE, f"{self.prog}: {message} (see {self.prog} --help)\n")


def _parser() -> argparse.ArgumentParser:
    p = _Parser(
        prog="robocache-bench",
        description="Benchmark robocache's CUDA kernels against PyTorch eager, torch.compile, CuPy and NumPy. "
                    "Each case is checked against the NumPy reference, then timed on the device (CUDA events, "
                    "noise-based stopping), and stored as a validated JSON record.",
        formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    p.add_argument("--version", action=_VersionAction,
                   help="print robocache's version (and the git commit in a checkout) and exit")
    sub = p.add_subparsers(dest="cmd", required=True, metavar="COMMAND")

    r = sub.add_parser("run", help="run a suite, one process per case, and store the records",
                       description="Run a suite of the grid. Exit code 1 when any case failed (incorrect, crash, "
                                   "timeout, oom, error), 2 on bad arguments.")
    r.add_argument("--suite", choices=(*specs.SUITES, PIPELINES), default="quick",
                   help="quick: about two minutes on one GPU; nightly: the full sweep (the sampled points included); "
                        "sampled: 48 shapes per op drawn from what users pass, the public API against its peers "
                        "(--sample-seed N: a fresh draw; docs/harness.md); multigpu: cases over 1-8 GPUs "
                        "(and 16 over two nodes) through torchrun; pipelines: data loading, training step, policy "
                        "inference end to end, at default sizes or those of the pipelines options below "
                        "(docs/pipelines.md) (default: quick)")
    r.add_argument("--ops", type=_csv, help=f"comma-separated subset of {','.join(specs.OPS)}")
    r.add_argument("--providers", type=_csv, help=_PROVIDERS_HELP)
    r.add_argument("--dtypes", type=_csv, help=f"comma-separated subset of {','.join(specs.GPU_DTYPES)}")
    r.add_argument("--device", choices=("auto", "gpu", "cpu"), default="auto",
                   help="gpu: CUDA providers with device timers; cpu: NumPy/PyTorch-CPU with a host timer "
                        "(default: gpu when CuPy sees a CUDA device)")
    r.add_argument("--out", default=ADHOC_OUT,
                   help=f"results folder (default: {ADHOC_OUT}/, ignored by git; the committed records under "
                        "results/<arch>-<machine>/ come from the GPU machines' runs)")
    r.add_argument("--cache", choices=("warm", "cold"), default="warm",
                   help="warm: steady state; cold: L2 flushed before every timed call (a separate series)")
    r.add_argument("--timeout", type=_POSITIVE_S, default=600.0, help="seconds per case before it is killed (600)")
    r.add_argument("--noise-target", type=number(float, lo=0, hi=1, lo_open=True, hi_open=True), default=None,
                   help="relative half-width of the median's 95%% interval to stop at (GPU 0.005, CPU 0.01)")
    r.add_argument("--time-limit", type=_POSITIVE_S, default=None, help="max seconds of sampling per case (2)")
    r.add_argument("--machine", help="stable machine name for the history (default: $ROBOCACHE_MACHINE, else "
                                     "from the GPU: its name and count, e.g. nvidia-h200-x4; the hostname on the "
                                     "CPU)")
    r.add_argument("--cases", type=_csv,
                   help="comma-separated case keys op/tag/dtype/provider (as `list` and alerts print them); "
                        "they replace the suite's cases")
    r.add_argument("--no-progress", action="store_true", help="no progress bar")
    r.add_argument("--sample-seed", type=_NONNEG_INT, default=None, metavar="N", help=_SAMPLE_SEED_HELP)
    r.add_argument("--resume", metavar="FILE",
                   help="continue a run cut short (a time limit, a killed runner): FILE is its records file "
                        "(results/<arch>-<machine>/<run>.records.json); give the run's own suite, filters "
                        "(--ops, --providers, --dtypes, --cases, --sample-seed) and timing options (--cache, "
                        "--noise-target, --time-limit). The points it measured whole are "
                        "kept, a point measured in part is measured again whole (its providers side by side), and "
                        "FILE is rewritten with the new records under the run's id. Refused (exit 2, nothing run) "
                        "for another suite, filters, timing options, commit, machine, GPU, driver, library or host; "
                        "single-GPU suites only")
    r.add_argument("--processes", type=number(int, lo=1, hi=16), default=1, metavar="K",
                   help="time each case whose first process measured a median under --processes-below-us, and "
                        "every call-cost case whatever its time, again in fresh processes, K in all, and report their "
                        "median (the mean for K = 2; the record lists each process's median). A short case's median, "
                        "and a call-cost case's interleaved call ratio at any time, move more from one process to the "
                        "next than within one (docs/regressions.md); default 1")
    r.add_argument("--processes-below-us", type=_POSITIVE_S, default=None, metavar="US",
                   help="the median below which --processes applies (default 12 us)")
    r.add_argument("--precompile-jobs", type=_NONNEG_INT, default=0, metavar="N",
                   help="before timing, compile the torch.compile cases in N parallel processes so each timing "
                        "process loads its compiled code from Inductor's on-disk cache; what is timed is "
                        "unchanged (default 0: off)")
    g = r.add_argument_group("multi-GPU (suite multigpu: torchrun, one process per GPU; NCCL, Gloo on --device cpu)")
    g.add_argument("--gpus", type=_POSITIVE_INT, default=None,
                   help="GPUs per node (default: the GPUs visible here; on the CPU: 2 Gloo processes); every world "
                        "size of the suite up to it runs, one torchrun each")
    g.add_argument("--collective-timeout", type=_POSITIVE_S, default=None,
                   help="seconds a collective waits for a peer before it fails: the process group's timeout "
                        "once every rank has started (default 120; the start may take up to 300 s); a dead rank "
                        "ends the run within it plus a margin (30 s; $ROBOCACHE_LAUNCH_MARGIN_S sets it)")
    g.add_argument("--nnodes", type=_POSITIVE_INT, default=1, help="machines in the run (default 1: torchrun --standalone)")
    g.add_argument("--node-rank", type=_NONNEG_INT, default=0,
                   help="this machine's rank among --nnodes (0 runs the one-GPU cases and writes the records)")
    g.add_argument("--rdzv-endpoint", metavar="HOST:PORT", type=_endpoint,
                   help="torchrun's c10d rendezvous, the same on every node (needed with --nnodes > 1)")
    g.add_argument("--rdzv-id", default="robocache-bench", help="rendezvous id, the same on every node")
    pipeline_options.add_run_options(r.add_argument_group(
        "pipelines (suite pipelines: each defaults to the device's default sweep; also python -m "
        "robocache.bench.pipelines run)"))

    ls = sub.add_parser("list", help="list the cases of a suite and the reason for each grid point",
                        description="List the cases of a suite. The bytes column is the upper bound from the "
                                    "case's parameters alone (every source row read); a record carries the "
                                    "minimum traffic of the inputs it timed (specs.moved_bytes), never more.")
    ls.add_argument("--suite", choices=(*specs.SUITES, PIPELINES), default="quick")
    ls.add_argument("--device", choices=("gpu", "cpu"), default="gpu")
    ls.add_argument("--ops", type=_csv, help=f"comma-separated subset of {','.join(specs.OPS)}")
    ls.add_argument("--providers", type=_csv, help=_PROVIDERS_HELP)
    ls.add_argument("--dtypes", type=_csv, help=f"comma-separated subset of {','.join(specs.GPU_DTYPES)}")
    ls.add_argument("--sample-seed", type=_NONNEG_INT, default=None, metavar="N", help=_SAMPLE_SEED_HELP)
    ls.add_argument("--format", choices=("text", "json"), default="text",
                    help=f"text: the table (default); json: {LIST_SCHEMA} (docs/report.md; not for suite pipelines)")
    pipeline_options.add_run_options(ls.add_argument_group(
        "pipelines (suite pipelines: the cases of these knobs; each defaults to the device's default sweep)"))

    for name, helptext in (("show", "a table of one run: every case, status, time, throughput, bandwidth"),
                           ("report", "the markdown report of one run (headline, scaling, peers, roofline), or with "
                                      "--kernels the kernel tables over every machine")):
        s = sub.add_parser(name, help=helptext)
        s.add_argument("paths", nargs="*", default=["results"], help="record files or folders (default: results/)")
        s.add_argument("--run", help="run id (or a unique prefix); default: the latest run found")
        s.add_argument("--format", choices=("markdown", "json"), default="markdown",
                       help=f"markdown: the tables (default; plain text on a terminal); json: "
                            f"{SHOW_SCHEMA if name == 'show' else REPORT_SCHEMA} (docs/report.md)")
        if name == "report":
            s.add_argument("--out", help="write the report to this file instead of stdout")
            what = s.add_mutually_exclusive_group()
            what.add_argument("--headline", action="store_true",
                              help="only the header and the headline table (the classic case)")
            what.add_argument("--sampled", action="store_true",
                              help="the sampled suite over every machine in PATHS: per op, seed and GPU the share of "
                                   "points where robocache is >= 1.0x torch.compile's faster mode, the worst and "
                                   "median ratio, the large points (>= 256 MB moved) at >= 80%% of the copy "
                                   "ceiling, GPU over GPU, every point; one run per machine, op and seed")
            what.add_argument("--kernels", action="store_true",
                              help="the kernel tables over every machine in PATHS, not one run: the optimisation "
                                   "journey (robocache@v1, @v2, ...), robocache against torch.compile at its faster "
                                   "mode, and the call cost; one run per machine and op (a nightly run first, then "
                                   "the newest), so --run does not apply; see docs/report.md")

    c = sub.add_parser(
        "compare", help="per case verdicts between two runs: slower, faster, inconclusive, same, incomparable, failed",
        description="Compare two runs of one machine case by case. A case is 'slower' or 'faster' when its change "
                    "exceeds both the floor and 4 sigma of its noise: the two runs' own uncertainty plus the "
                    "between-run noise, taken from --history (other runs of the same series) or else from a prior "
                    "fitted on the committed runs; 'inconclusive' when it exceeds the floor but not the noise (the "
                    "reason says what the case could resolve); 'same' when it stays within the floor. "
                    "BASE and NEW are each a records file, a folder (its latest run) or a run id (looked up in "
                    "--results). Exit code 1 with --fail-on-slower when any case is slower or failed.")
    c.add_argument("base")
    c.add_argument("new")
    c.add_argument("--results", nargs="+", default=["results"], help="where run ids are looked up (results/)")
    c.add_argument("--history", nargs="*", default=None,
                   help="folders whose runs give each case's between-run noise (default: --results)")
    c.add_argument("--floor", type=_floor_arg, default=None, help="smallest relative change ever called (0.03)")
    c.add_argument("--format", choices=("markdown", "json"), default="markdown")
    c.add_argument("--out", help="write to this file instead of stdout")
    c.add_argument("--fail-on-slower", action="store_true", help="exit 1 when any case is slower or failed")

    tn = sub.add_parser(
        "tune", help="on a GPU: the launch-configuration table of this GPU model (robocache/tuned/)",
        description="Tune robocache's launch configurations (resample and fuse v3) on this GPU over a tuning set of "
                    "shapes drawn from the sampled suite's distribution with its own seed, and write the table "
                    "robocache ships for this GPU model (<OUT>/<gpu>.json; commit it as robocache/tuned/<gpu>.json). "
                    "docs/kernels.md says how v3 uses it.")
    tn.add_argument("--out", default="robocache/tuned", help="folder of the table (default: robocache/tuned)")
    tn.add_argument("--ops", type=_csv, default=None, help="comma-separated subset of resample,fuse (default: both)")
    tn.add_argument("--sample-seed", type=_NONNEG_INT, default=None, metavar="N",
                    help="the tuning set's seed (default: 1000000 + the grid version, never an evaluation seed)")
    tn.add_argument("--points", type=_POSITIVE_INT, default=96, metavar="N", help="shapes per op (default 96)")

    k = sub.add_parser(
        "check", help="change points over the history of every series; alerts for current regressions",
        description="Detect change points in every series (machine, case, provider, dtype, timer, cache, front end) "
                    "over the runs in PATHS: ruptures' PELT scaled to each series' own noise plus the newest runs, "
                    "p-values with Benjamini-Hochberg across all series, throttled/contended/failed/incorrect runs "
                    "excluded. An alert is a significant slowdown beyond the floor that still holds at the newest "
                    "run. With --confirm the alerted cases are measured again first and only alerts that persist "
                    "are raised.")
    k.add_argument("paths", nargs="*", default=["results"], help="record files or folders (default: results/)")
    k.add_argument("--machine", help="only this machine's series")
    k.add_argument("--frontend", default="cli", help="only records of this front end (cli; 'all' for every one)")
    k.add_argument("--floor", type=_floor_arg, default=None, help="smallest relative change ever alerted (0.03)")
    k.add_argument("--json", help="write the alerts as JSON (schema robocache-alerts/1) to this file")
    k.add_argument("--markdown", help="write the markdown summary to this file (also printed)")
    k.add_argument("--confirm", action="store_true",
                   help="measure the alerted cases again (one process each; in K where the alert's newest record "
                        "was timed with run --processes K) before raising the alerts")
    k.add_argument("--confirm-out", default=None,
                   help="where the confirmation records go (default: a new temporary folder; never the history)")
    k.add_argument("--time-limit", type=_POSITIVE_S, default=None,
                   help="with --confirm: max seconds of sampling per case in each confirmation rerun (default: run's, "
                        "2); the rehearsal and tests bound their reruns' cost with it")
    k.add_argument("--reruns", metavar="DIR", default=None,
                   help="confirm with reruns measured elsewhere instead of measuring here (a folder or records file, "
                        "e.g. another job's --confirm-out): records of the alerted series, newer than the night "
                        "alerted, of its commit, timed in as many processes (run --processes), healthy; the same "
                        "rule as --confirm")
    k.add_argument("--refuted-before", metavar="ALERTS_JSON", default=None,
                   help="the previous night's check --json of this machine; with --confirm or --reruns a change "
                        "point its reruns refuted (refuted_looks) is tested at a spent level tonight (its looks "
                        "share one budget); the memory goes on into this night's --json (unchanged without them)")
    k.add_argument("--fail-on-regression", action="store_true",
                   help="exit 1 when any alert or drift is raised (method or environment changes never fail)")
    k.add_argument("--dashboard-url", default=None,
                   help="the dashboard the alerts link to (their History view); default $ROBOCACHE_DASHBOARD_URL, "
                        "else http://127.0.0.1:8501")
    _bisect_parser(sub)
    pv = sub.add_parser(
        "provenance", help="whether each run measured the sources of the commit it names (a mislabelled run)",
        description="For every run in PATHS: the hash of the library's sources it recorded (Env.sources: every .py, "
                    ".cu, .cuh, .h and .json under robocache/ and kernels/) against the same hash of the commit the "
                    "run names, read from the git repository --repo. 'DIFFER' means the run measured other code "
                    "than its label says: a wrong ROBOCACHE_GIT_COMMIT on a machine whose copy has no usable git, "
                    "or uncommitted changes. Exit 1 when any run differs (with --strict also when one cannot be "
                    "checked: its commit is not in the repository, the record predates Env.sources, or the run "
                    "says it was measured on uncommitted changes).")
    pv.add_argument("paths", nargs="*", default=["results"], help="record files or folders (default: results/)")
    pv.add_argument("--repo", default=".", help="the git repository holding the runs' commits (default: .)")
    pv.add_argument("--strict", action="store_true",
                    help="exit 1 also when a run cannot be checked (unknown commit, no source hash)")
    return p


def _bisect_parser(sub: Any) -> None:
    """``bisect``'s options (robocache/bench/bisect.py; docs/regressions.md, "Bisection")."""
    b = sub.add_parser(
        "bisect", help="find the commit that moved an alert: each commit of its range measured by its own harness",
        description="Bisect a commit range for the commit that made the alerted cases slower. Each commit tested is "
                    "checked out in a git worktree and measured by its own `robocache-bench run --cases` (the "
                    "correctness gate first, one process per sample); Mann-Whitney U and Kolmogorov-Smirnov decide "
                    "'same as good', 'same as bad' or 'unknown' (then the samples double, up to --max-samples). "
                    "Writes a robocache-bisect/1 document (status running, then found / not_reproducible / spread / "
                    "undecided / budget / untestable) to --out. Exit 0 when the bisection ran, whatever it found.")
    b.add_argument("alert", nargs="?", help="a change id, series fingerprint or issue key of an alert in --alerts "
                                            "(its group: every slower alert of its machine and commit range)")
    b.add_argument("--alerts", help="the alerts JSON of `check --json` (robocache-alerts/1)")
    b.add_argument("--all", action="store_true", help="every confirmed slower alert group of --alerts whose range "
                                                      "has more than one commit (the nightly job)")
    b.add_argument("--known", action="append", metavar="DIR",
                   help="folders of earlier bisection documents: groups already bisected are skipped (repeatable)")
    b.add_argument("--series", metavar="KEYS", help="comma-separated case keys op/tag/dtype/provider to bisect "
                                                    "(with --good and --bad instead of an alert)")
    b.add_argument("--good", metavar="COMMIT", help="a commit measured before the change")
    b.add_argument("--bad", metavar="COMMIT", help="a later commit measured after it")
    b.add_argument("--cache", choices=("warm", "cold"), default="warm", help="--series' cache mode (warm)")
    b.add_argument("--measure", choices=("time", "call_ratio"), default=None,
                   help="--series' quantity: time (default; the figure --statistic names) or call_ratio (a call-cost "
                        "case's interleaved ratio, public call / bare launch, as check judges it); an alert is "
                        "bisected on its own")
    b.add_argument("--expect", type=number(float, lo=1, lo_open=True, hi=1000), default=None, metavar="RATIO",
                   help="the slowdown looked for (an alert's own ratio by default, else 1.03): the endpoints are "
                        "'the same' when a change this large is ruled out")
    b.add_argument("--repo", default=".", help="the git checkout whose history is bisected (default: here)")
    b.add_argument("--machine", help="the machine name of the measurements (an alert's own by default, else "
                                     "$ROBOCACHE_MACHINE or the hostname); with --all only that machine's groups")
    b.add_argument("--device", choices=("auto", "gpu", "cpu"), default="auto")
    b.add_argument("--suite", choices=specs.SUITES, default="nightly", help="the suite the records name (nightly)")
    b.add_argument("--samples", type=number(int, lo=4, hi=10000), default=10,
                   help="samples per case and commit to start with (10); doubled while a decision is unknown")
    b.add_argument("--max-samples", type=number(int, lo=4, hi=10000), default=160, help="at most (160)")
    b.add_argument("--budget", type=_POSITIVE_S, default=1800.0,
                   help="seconds for every bisection of this call together (1800: the nightly's 30 minutes)")
    b.add_argument("--time-limit", type=_POSITIVE_S, default=None, help="run --time-limit of each sample (2)")
    b.add_argument("--statistic", choices=("p50", "p20", "min"), default="p50",
                   help="the figure of each record that is one sample: p50, the series' own (default); p20 or min "
                        "(its fastest call) where the host's load swamps the median (a loaded CPU machine)")
    b.add_argument("--out", default="results/local/bisect",
                   help="where the documents (*.bisect.json) and the candidates' run files go (results/local/bisect)")
    b.add_argument("--keep", action="store_true", help="keep the worktrees' scratch folder (its path is printed)")
    b.add_argument("--note", default=None, help="a line stored with the document (e.g. 'rehearsal')")
    b.add_argument("--dashboard-url", default=None,
                   help="the dashboard the culprit's History link points to (default $ROBOCACHE_DASHBOARD_URL)")


# Exit codes (docs/harness.md "Exit codes"): 0 done; 1 a case failed / a regression or slower case was found
# (only with --fail-on-*) / a launch failed; 2 a usage error (bad option or value, unknown case, unreadable input,
# unwritable output, nothing to work on); 3 an internal error (a bug: the traceback is printed); 130 interrupted;
# 143 a multi-GPU launch stopped by SIGTERM/SIGHUP. A reader that closes the pipe does not change the code.
EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_INTERNAL, EXIT_INTERRUPTED, EXIT_STOPPED = 0, 1, 2, 3, 130, 143


class _QuietPipe(io.TextIOBase):
    """stdout that ends quietly when the reader goes away (``report | head``): the first BrokenPipeError points
    the descriptor at /dev/null and drops the rest, so the command finishes its work (a run still writes its
    records) and returns its own exit code, with no traceback."""

    def __init__(self, inner) -> None:
        self._inner = inner
        self.broken = False

    def write(self, text: str) -> int:
        if not self.broken:
            try:
                return self._inner.write(text)
            except BrokenPipeError:
                self._break()
        return len(text)

    def flush(self) -> None:
        if not self.broken:
            try:
                self._inner.flush()
            except BrokenPipeError:
                self._break()

    def _break(self) -> None:
        self.broken = True
        try:
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, self._inner.fileno())
            os.close(devnull)
        except (OSError, ValueError, io.UnsupportedOperation):
            pass

    def isatty(self) -> bool:
        return not self.broken and self._inner.isatty()

    def fileno(self) -> int:
        return self._inner.fileno()

    @property
    def encoding(self) -> str:  # type: ignore[override]
        return getattr(self._inner, "encoding", "utf-8")

    def writable(self) -> bool:
        return True


def _writable_dir(flag: str, path: str) -> None:
    """``path`` is (or can be made) a folder this process can write a file into; else ValueError naming ``flag``.
    Nothing is created: a usage error found later (an unknown op) leaves no folder behind; the command makes the
    folder when it writes (a probe file in the nearest existing folder, removed at once, tests the rights)."""
    p = Path(path)
    top = p
    while not top.exists() and not top.is_symlink() and top != top.parent:
        top = top.parent
    if not top.is_dir():
        what = "is a file" if p == top else f"{top} is not a folder"
        raise ValueError(f"{flag} {path}: {what}; name a writable folder")
    why = _cannot_write_in(top)
    if why:
        raise ValueError(f"{flag} {path}: cannot write there ({why}); name a writable folder")


def _writable_file(flag: str, path: str) -> None:
    """``path`` can be written as a file (its folder exists and is writable; it is not a folder)."""
    p = Path(path)
    if p.is_dir():
        raise ValueError(f"{flag} {path}: is a folder; name a file")
    parent = p.parent if str(p.parent) else Path(".")
    if not parent.is_dir():
        raise ValueError(f"{flag} {path}: the folder {parent} does not exist; create it or name another file")
    if p.exists() and not os.access(p, os.W_OK):
        raise ValueError(f"{flag} {path}: not writable")
    why = _cannot_write_in(parent)
    if why:
        raise ValueError(f"{flag} {path}: cannot write in {parent} ({why})")


def _cannot_write_in(folder: Path) -> str | None:
    """Why a file cannot be created in ``folder`` (a probe file made and removed at once), None when it can."""
    try:
        fd, probe = tempfile.mkstemp(dir=folder, prefix=".tmp-probe-")
        os.close(fd)
        os.unlink(probe)
    except OSError as e:
        return str(e.strerror or e)
    return None


# Every output option of every command: checked before any measurement, load or analysis (shared plumbing).
_OUTPUT_FILES = {"report": ("out",), "compare": ("out",), "check": ("json", "markdown")}
_OUTPUT_DIRS = {"run": ("out",), "check": ("confirm_out",), "tune": ("out",), "bisect": ("out",)}


def check_outputs(args: argparse.Namespace) -> None:
    for attr in _OUTPUT_FILES.get(args.cmd, ()):
        if getattr(args, attr, None):
            _writable_file("--" + attr.replace("_", "-"), getattr(args, attr))
    for attr in _OUTPUT_DIRS.get(args.cmd, ()):
        if getattr(args, attr, None):
            _writable_dir("--" + attr.replace("_", "-"), getattr(args, attr))


def _check_options(args: argparse.Namespace) -> None:
    """Relations between options argparse cannot see on its own."""
    if args.cmd == "run" and args.node_rank >= args.nnodes:
        raise ValueError(f"--node-rank {args.node_rank} must be below --nnodes {args.nnodes}")
    if args.cmd in ("check", "bisect"):  # the link base: a bad one is a usage error before anything is loaded
        from . import links

        args.dashboard_url = links.base_url(args.dashboard_url)
        if args.cmd == "check" and args.time_limit is not None and not args.confirm:
            raise ValueError("--time-limit bounds the confirmation reruns of --confirm: it needs --confirm")
        if args.cmd == "check" and args.reruns is not None:  # reruns measured elsewhere: nothing is measured here
            if args.confirm or args.confirm_out:
                raise ValueError("--reruns takes reruns measured elsewhere; --confirm (and --confirm-out) measures "
                                 "them here: pick one")
            if not Path(args.reruns).exists():
                raise ValueError(f"--reruns {args.reruns}: no such file or folder")
        if args.cmd == "check" and args.refuted_before is not None:
            # without --confirm or --reruns nothing is looked at again: the memory is carried on unchanged (a night
            # checked without a confirmation must not wipe what the nights before it refuted)
            args.looked = _refuted_before(args.refuted_before)


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    out = sys.stdout
    guard = out if isinstance(out, _QuietPipe) else _QuietPipe(out)
    sys.stdout = guard
    try:
        _check_options(args)
        check_outputs(args)
        return _dispatch(args)
    except (ValueError, KeyError) as e:
        msg = e.args[0] if isinstance(e, KeyError) and e.args else e
        print(f"robocache-bench {args.cmd}: {msg}", file=sys.stderr)
        return EXIT_USAGE
    except OSError as e:  # a file or folder the command needed (not a bug: say which and why)
        where = f" {e.filename}" if getattr(e, "filename", None) else ""
        print(f"robocache-bench {args.cmd}:{where} {e.strerror or e}", file=sys.stderr)
        return EXIT_USAGE
    except launch.Stopped as e:  # SIGTERM/SIGHUP during a multi-GPU launch: its processes were killed
        print(f"robocache-bench {args.cmd}: {e}; the launch's processes were stopped, the records written so far "
              "are kept", file=sys.stderr)
        return EXIT_STOPPED
    except KeyboardInterrupt:
        print(f"robocache-bench {args.cmd}: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except Exception as e:  # noqa: BLE001 - a bug: the traceback for the report, never exit 1 ("a case failed")
        traceback.print_exc()
        print(f"robocache-bench {args.cmd}: internal error (a bug, please report it with the traceback above): "
              f"{type(e).__name__}: {e}", file=sys.stderr)
        return EXIT_INTERNAL
    finally:
        try:
            sys.stdout.flush()
        except Exception:  # noqa: BLE001
            pass
        sys.stdout = out


def _dispatch(args: argparse.Namespace) -> int:
    commands = {"list": _list, "show": _show_report, "report": _show_report, "compare": _compare, "check": _check,
                "tune": _tune_cmd, "bisect": _bisect, "provenance": _provenance}
    return commands.get(args.cmd, _run)(args)


def _provenance(args: argparse.Namespace) -> int:
    """``provenance``: each run's recorded sources against its commit's (robocache/bench/provenance.py)."""
    from . import provenance

    import subprocess

    try:
        is_git = subprocess.run(["git", "-C", str(args.repo), "rev-parse", "--git-dir"], capture_output=True,
                                timeout=30).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        is_git = False
    if not is_git:
        raise ValueError(f"--repo {args.repo}: not a git repository (or no git here): name the repository the runs "
                         "came from")
    loaded = store.load(*args.paths)
    _warn_bad(loaded)
    if not loaded.records and loaded.bad:  # the inputs' own reason, as show's (exit 2)
        raise ValueError("nothing readable: " + "; ".join(f"{store.display_path(str(p))}: {w}"
                                                          for p, w in loaded.bad[:3]))
    runs: dict[tuple, None] = {}
    for r in loaded.records:
        runs.setdefault((r.run_id, r.env.machine if r.env else "?", r.git_commit,
                         r.env.sources if r.env else None, r.git_dirty), None)
    if not runs:
        raise ValueError(f"no records in {', '.join(args.paths)}")
    verdicts = provenance.check_runs(runs, args.repo)
    for v in verdicts:
        print(terminal_text(v.line()))
    counts = {s: sum(v.state == s for v in verdicts) for s in ("match", "differs", "dirty", "unknown-commit",
                                                                  "unrecorded", "no-commit")}
    print(f"provenance: {len(verdicts)} run(s): " + ", ".join(f"{n} {s}" for s, n in counts.items() if n))
    unchecked = counts["dirty"] + counts["unknown-commit"] + counts["unrecorded"] + counts["no-commit"]
    return 1 if counts["differs"] or (args.strict and unchecked) else 0


def _tune_cmd(args: argparse.Namespace) -> int:
    """``tune``: this GPU's launch-configuration table (robocache/bench/tune.py)."""
    from . import tune

    tune.tune(Path(args.out), tuple(args.ops) if args.ops else tune.TUNE_OPS,
              tune.TUNE_SEED if args.sample_seed is None else args.sample_seed, args.points)
    return 0


def _list(args: argparse.Namespace) -> int:
    """``list``: the cases of a suite, as a table or JSON."""
    knobs = pipeline_options.given(args)
    if args.suite == PIPELINES:
        given = [flag for flag, v in (("--ops", args.ops), ("--providers", args.providers), ("--dtypes", args.dtypes),
                                      ("--sample-seed", args.sample_seed), ("--format json", args.format == "json"))
                 if v is not None and v is not False]
        if given:
            return _usage(f"list --suite pipelines takes --device and the pipelines options only (got "
                          f"{', '.join(given)})")
        try:
            cfg = pipeline_options.checked_config(args, args.device)
        except ValueError as e:
            return _usage(f"robocache-bench list --suite pipelines: {e}")
        return pipeline_options.list_cases(cfg)
    if knobs:
        return _usage(f"{', '.join(knobs)}: options of --suite pipelines, not of --suite {args.suite}")
    cases = specs.cases(args.suite, device=args.device, ops=args.ops, providers=args.providers,
                        dtypes=args.dtypes, sample_seed=args.sample_seed)
    if args.format == "json":
        print(_json_text({"schema": LIST_SCHEMA, "suite": args.suite, "device": args.device,
                          "sample_seed": specs.sample_seed(args.sample_seed),
                          "grid_version": specs.GRID_VERSION, "cases": [
                              {"key": c.key, "op": c.op, "id": c.id, "dtype": c.dtype, "provider": c.provider,
                               "bytes_upper_bound": c.bytes, "reason": c.reason} for c in cases]}))
        return 0
    rows = [[c.id, c.dtype, c.provider, f"{c.bytes / 1e6:.2f}", c.reason] for c in cases]
    print(terminal_text(table(["case", "dtype", "provider", "MB (upper bound)", "why"], rows)))
    seed = (f", sample seed {specs.sample_seed(args.sample_seed)}" if any(c.params.get("kind") == "sampled"
                                                                        for c in cases) else "")
    print(f"\n{len(cases)} cases in suite {args.suite} for {args.device} (grid version {specs.GRID_VERSION}{seed}); "
          "bytes: the upper bound from the parameters, a record carries its inputs' moved bytes")
    return 0


def _unreadable(loaded: Any, paths: list[str]) -> None:
    """A usage error (exit 2) when the inputs hold no record and some could not be read: the reason is theirs (a
    file of a newer schema version, a damaged one), not "run first"."""
    if not loaded.empty or not loaded.bad:
        return
    whys = "; ".join(f"{store.display_path(str(p))}: {w}" for p, w in loaded.bad[:3])
    more = f" (and {len(loaded.bad) - 3} more)" if len(loaded.bad) > 3 else ""
    if [str(p) for p in paths] == [str(loaded.bad[0][0])] and len(loaded.bad) == 1:  # one file named: its reason
        raise ValueError(whys)
    raise ValueError(f"nothing readable in {', '.join(map(str, paths))}: {whys}{more}")


class _Loaded:
    """The store's load with :class:`robocache.bench.frame.History`'s reading methods (the frame's rows built from
    the records, :func:`robocache.bench.columns.of_records`): show, report, compare and check where pandas or
    pyarrow (the frame's) are not installed."""

    def __init__(self, paths: list[str]) -> None:
        loaded = store.load(*paths)
        self.records, self.bad = loaded.records, loaded.bad

    @property
    def empty(self) -> bool:
        return not self.records

    def run_ids(self) -> list[str]:
        return list(runs(self.records))

    def records_of(self, run_ids: Any) -> list:
        want = set(run_ids)
        return [r for r in self.records if r.run_id in want]

    def rows(self) -> list:
        from .columns import of_records

        return of_records(self.records)

    def noise(self, exclude_runs: Any = ()) -> dict[str, tuple[float, float]]:
        from .regressions.verdicts import history_noise

        return history_noise(self.records, exclude_runs)


def _history(paths: list[str]) -> Any:
    """The records under ``paths`` for show, report and compare: through the frame and its columnar cache
    (:class:`robocache.bench.frame.History`: one run's files read in full), else the store's load."""
    try:  # the frame's pandas and pyarrow (the dashboard and dev extras): frame.py imports pandas only to build a frame
        import pandas  # noqa: F401
        import pyarrow  # noqa: F401

        from .frame import History
    except ImportError:
        return _Loaded(paths)
    return History(paths)


def _warn_bad(loaded: Any) -> None:
    for path, why in loaded.bad:
        print(f"warning: skipped bad results file {path}: {why}", file=sys.stderr)


def _show_report(args: argparse.Namespace) -> int:
    """``show`` / ``report``: one run (or, ``report --kernels``, every machine) as a table, markdown or JSON."""
    across = args.cmd == "report" and (args.kernels or args.sampled)
    loaded = _history(args.paths)
    _warn_bad(loaded)
    _unreadable(loaded, args.paths)
    pipe: list = []
    if across:
        records, pipe = _across_runs(args, loaded)
    else:
        records = loaded.records_of([pick_run_id(loaded.run_ids(), args.run)])
    if args.format == "json":
        text = _json_text(_show_report_json(args, records, [{"path": str(p), "why": str(w)}
                                                            for p, w in loaded.bad], pipe))
    elif args.cmd == "report" and args.kernels:
        text = kernels(records, pipe)
    elif args.cmd == "report" and args.sampled:
        text = sampled(records)
    elif args.cmd == "show":
        text = rep.show(records)
    elif args.headline:
        text = rep.header(records) + "\n\n" + rep.headline(records)
    else:
        text = rep.report(records)
    if args.cmd == "report" and args.out:
        store.atomic_write(args.out, text)
        print(f"report written to {args.out}")
    elif args.format == "json":
        print(text)
    else:
        print(for_stdout(text))  # plain on a terminal; the escaped markdown into a pipe or file (records are data)
    return 0


def _across_runs(args: argparse.Namespace, loaded: Any) -> tuple[list, list]:
    """``report --kernels`` / ``--sampled``: the frame's rows of every run, and (``--kernels``) the records of the
    newest pipeline runs, read in full for the end-to-end tables."""
    if args.run:
        raise ValueError(f"--{'kernels' if args.kernels else 'sampled'} picks one run per machine and op itself: "
                         "drop --run")
    if loaded.empty:
        raise ValueError(f"no records in {', '.join(args.paths)}")
    rows = loaded.rows()
    pipe_runs = {r.run_id for r in latest_pipeline_rows(rows)} if args.kernels else set()
    return rows, latest_pipeline_runs(loaded.records_of(pipe_runs)) if pipe_runs else []


def _show_report_json(args: argparse.Namespace, records: list, bad: list[dict], pipe: list) -> dict:
    """The JSON of ``show`` / ``report``: the same rows and tables the markdown is rendered from (``report
    --kernels`` and ``--sampled``: over the frame's rows; ``pipe``: the newest pipeline runs' records)."""
    if args.cmd == "report" and args.kernels:
        return {"schema": REPORT_SCHEMA, "kind": "kernels",
                "runs": [rep.run_facts(rs) for rs in runs(records).values()],
                "sections": sections_json(kernels_sections(records, pipe)), "skipped_files": bad}
    if args.cmd == "report" and args.sampled:
        return {"schema": REPORT_SCHEMA, "kind": "sampled",
                "runs": [rep.run_facts(rs) for rs in runs(records).values()],
                "summary": sampled_summary(sampled_points(records)),
                "sections": sections_json(sampled_sections(records)), "skipped_files": bad}
    doc = {"schema": SHOW_SCHEMA if args.cmd == "show" else REPORT_SCHEMA, "run": rep.run_facts(as_rows(records)),
           "cases": rep.case_rows(records), "skipped_files": bad}
    if args.cmd == "report":
        sections = rep.report_sections(records)
        if args.headline:
            sections = sections[:1] if sections and sections[0][1].startswith("Headline") else []
        doc = {"schema": REPORT_SCHEMA, "kind": "run", **{k: v for k, v in doc.items() if k != "schema"},
               "sections": sections_json(sections)}
    return doc


def _run_records(spec: str, results: Any) -> tuple[str, list]:
    """A run given as a records file, a folder (its latest run) or a run id looked up in ``results()``."""
    if Path(spec).exists():
        loaded = _history([spec])
        _warn_bad(loaded)
        _unreadable(loaded, [spec])
        rid = pick_run_id(loaded.run_ids())
    else:
        loaded = results()
        rid = pick_run_id(loaded.run_ids(), spec)
    return rid, loaded.records_of([rid])


def _compare(args: argparse.Namespace) -> int:
    import functools
    import json

    from .regressions.verdicts import VERDICTS, compare, compare_markdown

    results = functools.cache(lambda: _history(args.results))  # read once: for run ids and as the history
    bname, base = _run_records(args.base, results)
    nname, new = _run_records(args.new, results)
    _same_machine(bname, base, nname, new)
    hist_paths = args.results if args.history is None else args.history
    history = (results() if hist_paths == args.results else _history(hist_paths)) if hist_paths else None
    kw = {"floor": args.floor} if args.floor is not None else {}
    verdicts = compare(base, new, noise=None if history is None else history.noise, **kw)
    if args.format == "json":
        text = json.dumps({"schema": "robocache-compare/1", "base": bname, "new": nname,
                           "cases": [v.to_dict() for v in verdicts]}, indent=1, allow_nan=False)
    else:
        text = compare_markdown(verdicts, bname, nname)
    if args.out:
        store.atomic_write(args.out, text)
        print(f"comparison written to {args.out}")
    else:
        print(text if args.format == "json" else for_stdout(text))
    counts = {k: sum(v.verdict == k for v in verdicts) for k in VERDICTS}
    print("verdicts: " + ", ".join(f"{k} {v}" for k, v in counts.items()), file=sys.stderr)
    return 1 if args.fail_on_slower and (counts["slower"] or counts["failed"]) else 0


def _same_machine(bname: str, base: list, nname: str, new: list) -> None:
    """ValueError (exit 2, one line) when the two runs were measured on different machines: no case of one can be
    compared with the other's (a case's series is per machine), so a table of "incomparable" rows would only hide
    the mistake (issue 24: 46 such rows, exit 0, no hint)."""
    def machines(recs: list) -> set[str]:
        return {str(r.env.machine if r.env is not None else None) for r in recs}

    bm, nm = machines(base), machines(new)
    if bm and nm and not bm & nm:
        raise ValueError(
            f"{bname} ran on machine {', '.join(sorted(bm))} and {nname} on {', '.join(sorted(nm))}: runs of "
            "different machines are never compared case by case (each machine's cases are series of their own); "
            "compare two runs of one machine (`robocache-bench show --run ID` names a run's machine), or set "
            "machines side by side with `robocache-bench report --kernels` or the dashboard's Architectures page")


def _refuted_before(path: str) -> Any:
    """``--refuted-before``: the confirmation's memory (:class:`.regressions.memory.Memory`) from a previous
    ``check --json``.

    A path that does not exist, or is a folder, is a usage error (ValueError, one line). A file that cannot be read
    or is no robocache-alerts/1 document (truncated, corrupt, a newer schema's) is warned about in one line and read
    as no memory: the check runs, every change point at its first look. ``scripts/nightly.sh`` passes the newest
    alerts.json of the results branch, and a check that refused to run on it would write no alerts.json, leave
    that file the newest and fail again every night after."""
    from . import schema
    from .regressions.memory import Memory

    p = Path(path)
    if not p.exists():
        raise ValueError(f"--refuted-before {path}: no such file")
    if p.is_dir():
        raise ValueError(f"--refuted-before {path}: a folder, not a check --json file")
    doc = schema.load_alerts(p)
    if isinstance(doc, schema.AlertsUnreadable):
        why = doc.reason
    elif isinstance(doc, schema.AlertsError):
        why = f"not a robocache-alerts/1 document ({doc})"
    else:
        memory, notes = Memory.from_json(schema.to_dict(r) for r in doc.refuted_looks)
        for note in notes:  # an entry no writer of ours makes: said, and the rest of the memory read
            print(f"warning: --refuted-before {path}: {note}", file=sys.stderr)
        return memory
    print(f"warning: --refuted-before {path}: {why}; checked without the confirmation's memory (every change point "
          "at its first look)", file=sys.stderr)
    return Memory()


def _check(args: argparse.Namespace) -> int:
    """``check``: load the history, find the changes, confirm them by measuring again (``--confirm``), write."""
    from .regressions import changepoints

    records = _check_history(args)
    if isinstance(records, int):
        return records
    frontend = None if args.frontend == "all" else args.frontend
    kw = {"floor": args.floor} if args.floor is not None else {}
    # with --confirm, a per-series screen sends cases to the rerun, which is the check on them (changepoints.check)
    rerun = args.confirm or args.reruns is not None  # a confirmation follows: its screen, not BH, sends alerts
    res = changepoints.check(records, machine=args.machine, frontend=frontend,
                             screen=changepoints.SCREEN_P if rerun else None, **kw)
    if res.series == 0:
        machines = sorted({str(m) for m in changepoints.machines(records)})
        print(f"robocache-bench check: no series for machine {args.machine!r} and front end {args.frontend!r}; "
              f"machines in these records: {', '.join(machines)}", file=sys.stderr)
        return 2
    refuted: list = []
    # the confirmation's memory (--refuted-before): looks per change point, carried on for the series checked tonight
    from .regressions.memory import Memory

    memory = getattr(args, "looked", None)
    memory = memory if memory is not None else Memory()
    remembered = len(memory)
    ckw = {**kw, "looked": memory}
    if args.reruns is not None:
        refuted = _check_reruns(args, res, ckw)
    elif args.confirm and res.alerts:
        refuted = _check_confirm(args, res, ckw)
    _carry_memory(args, memory, remembered, res.windows)
    _check_outputs(args, res, refuted)
    return 1 if args.fail_on_regression and (res.alerts or res.drifts) else 0


def _carry_memory(args: argparse.Namespace, memory: Any, remembered: int, windows: Any) -> None:
    """The confirmation's memory pruned to what can match again (``memory.Memory.prune``: the series checked
    tonight, change points in their window) into ``args.refuted_looks``; what was dropped said on stderr."""
    from collections import Counter

    from .regressions.memory import NOT_CHECKED

    dropped = memory.prune(windows)
    args.refuted_looks = memory.to_json()
    gone = [e for e, why in dropped if why == NOT_CHECKED]
    if gone:  # another machine's file, another suite or front end: said, not silently forgotten
        print(f"check --refuted-before {args.refuted_before}: {len(gone)} of {remembered} remembered change "
              f"point(s) are of {len({e.fingerprint for e in gone})} series not checked tonight (another "
              "machine's file? another suite?): not carried on", file=sys.stderr)
    aged = Counter(why for _e, why in dropped if why != NOT_CHECKED)
    if aged:  # out of the window: they can never be proposed again (said, as the nightly log's record)
        print(f"check --refuted-before {args.refuted_before}: {sum(aged.values())} of {remembered} remembered change "
              "point(s) not carried on: " + "; ".join(f"{n} {why}" for why, n in sorted(aged.items())),
              file=sys.stderr)


def _bisect(args: argparse.Namespace) -> int:
    """``bisect``: robocache/bench/bisect.py does the work (a setup error is a ValueError: exit 2)."""
    from . import bisect

    return bisect.run_cli(args)


def _check_history(args: argparse.Namespace) -> Any:
    """The records of ``check``'s paths (bad files warned about): the frame's columns the check reads, through the
    columnar cache (else, without pandas and pyarrow, the store's records); or exit code 2 with a one-line reason."""
    missing = [p for p in args.paths if not Path(p).exists()]
    if missing:
        print(f"robocache-bench check: no such file or folder: {', '.join(missing)}", file=sys.stderr)
        return 2
    loaded = _check_rows(args.paths)
    for path, why in loaded.bad:
        print(f"warning: skipped bad results file {path}: {why}", file=sys.stderr)
    if loaded.empty:
        try:
            _unreadable(loaded, args.paths)
        except ValueError as e:
            print(f"robocache-bench check: {e}", file=sys.stderr)
            return 2
        print(f"robocache-bench check: no records in {', '.join(args.paths)}"
              + (f" ({len(loaded.bad)} bad file(s) skipped)" if loaded.bad else ""), file=sys.stderr)
        return 2
    return loaded.records


class _CheckRows:
    """``check``'s history as the frame's columns (:data:`robocache.bench.regressions.changepoints.FRAME_COLUMNS`,
    which :func:`robocache.bench.regressions.check` reads as they are: the Arrow table, pandas never imported when
    the cache holds every file) through the columnar cache, and the bad files."""

    def __init__(self, paths: list[str]) -> None:
        import warnings

        from .frame import cache_dir, load_table
        from .regressions.changepoints import FRAME_COLUMNS

        with warnings.catch_warnings():  # a cache of older code is rebuilt without a word (as History)
            warnings.filterwarnings("ignore", message=".*written for another schema", category=UserWarning)
            table, self.bad = load_table([str(p) for p in paths], cache_dir())
        self.records = table.select(list(FRAME_COLUMNS))
        self.empty = self.records.num_rows == 0


def _check_rows(paths: list[str]) -> Any:
    try:
        return _CheckRows(paths)
    except ImportError:  # the frame's pandas and pyarrow: the dashboard and dev extras
        return _Loaded(paths)


def _measurable(alerts: list) -> tuple[list[str], dict[str, str]]:
    """The case keys of ``alerts`` this machine may measure again, and why the others are not: only providers
    the provider table registers (a provider read from a record, which anyone with write access to the results
    could edit, never chooses code to import) and cases still in the grid."""
    registered = set(providers.names())
    keys, why_not = [], {}
    for c in alerts:
        prov = str(c.series["provider"])
        if c.series.get("frontend") not in (None, "cli"):  # the rerun is the CLI's: another front end's series
            why_not[c.fingerprint] = (f"a {c.series['frontend']} series: the confirmation rerun measures through "
                                      "the CLI, whose figures are another series")
            continue
        if prov not in registered:
            why_not[c.fingerprint] = (f"provider {prov!r} is not a registered provider: not measured again "
                                      "(a record never chooses code to import)")
            print(f"robocache-bench check: refusing to measure {c.key!r} again: provider {prov!r} is not a "
                  f"registered provider ({', '.join(sorted(registered))}); the alert is raised unconfirmed",
                  file=sys.stderr)
            continue
        try:
            specs.find(c.key)
            keys.append(c.key)
        except (KeyError, ValueError):  # a case no longer in the grid cannot be measured again
            why_not[c.fingerprint] = f"case {c.key} is not in grid version {specs.GRID_VERSION}"
    return sorted(set(keys)), why_not


def _check_confirm(args: argparse.Namespace, res: Any, kw: dict[str, Any]) -> list:
    """Measure this machine's alerted cases again (``confirmation.CONFIRM_RUNS`` fresh runs) and keep the alerts the
    reruns, tested alone, reproduce; an alert that cannot be measured here is raised, marked unconfirmed. An
    alert whose first reruns are consistent with it but not conclusive (``Change.wants_more``) is measured
    ``CONFIRM_MORE`` times more, the same way, and tested again on all its reruns (the alert's
    confirmation note reports how many). Updates ``res.alerts``; returns the refuted ones."""
    import tempfile

    from . import env as envmod  # capture_env's rule for the name (argument, ROBOCACHE_MACHINE, GPU, hostname)
    from . import runner
    from .regressions import confirmation
    from .regressions.alerts import measured_processes
    from .regressions.records import ALWAYS_BELOW_US

    here = args.machine or envmod.capture_env(runner.detect_device())["machine"]
    again: list = []
    out, device = args.confirm_out, None

    def can_measure(mine: list) -> tuple[set[str], dict[str, str]]:  # this machine's alerts and drifts
        keys, why_not = _measurable(mine)
        return {c.fingerprint for c in mine if c.key in keys}, why_not

    def measure(alerts: list, times: int) -> list:
        nonlocal out, device
        out = out or tempfile.mkdtemp(prefix="robocache-confirm-")
        device = device or runner.detect_device()
        start = len(again)
        print(f"confirming {len(alerts)} alerted case(s) on {here} by measuring them {times} times "
              f"again into {out} ...", file=sys.stderr)
        # each alert measured as its series was: its suite and cache mode (a cold-cache series rerun warm would be
        # another series and could never confirm it), and in as many fresh processes as its newest run timed it in
        # (`run --processes K`: the median of K processes moves less between runs than one process's, and the
        # series' noise the reruns are tested with is that of its K-process nights; alerts.measured_processes)
        groups: dict[tuple[str, str, int], list[str]] = {}
        for c in alerts:
            cache = c.series.get("cache") if c.series.get("cache") in ("warm", "cold") else "warm"
            groups.setdefault((c.after.suite, cache, measured_processes(c)), []).append(c.key)
        # --time-limit: the sampling of each rerun's case (only when given: otherwise run's own default)
        timing = {"timing": {"time_limit_s": args.time_limit}} if args.time_limit is not None else {}
        for (suite, cache, nproc), ks in sorted(groups.items()):
            # K > 1: every case of the group timed in K processes whatever its first one measures (the record does
            # not say its run's --processes-below-us; records.ALWAYS_BELOW_US)
            procs = {"processes": nproc, "processes_below_us": ALWAYS_BELOW_US} if nproc > 1 else {}
            for _ in range(times):  # fresh processes each time: independent measurements
                rr = runner.run_suite(suite, device=device, cases=[specs.find(k) for k in sorted(set(ks))],
                                      out_dir=out, machine=here, cache=cache, progress=False, **timing, **procs)
                again.extend(store.load(rr.path).records if rr.path else [])
        return again[start:]

    # the first look, then the second where the reruns ask for it: the one path the replay measures too
    return confirmation.confirm_alerts(res, measure, machine=here, can_measure=can_measure, **kw)


def _check_reruns(args: argparse.Namespace, res: Any, kw: dict[str, Any]) -> list:
    """``check --reruns DIR``: the confirmation of ``--confirm`` on reruns measured elsewhere (another job, another
    runner of the machine): a rerun counts for an alert when it is a healthy record of the alert's series (machine,
    case, provider, front end, method...), newer than the night alerted, of its commit and timed in as many fresh
    processes (``run --processes K``, :func:`.regressions.records.processes_of`); the first
    ``CONFIRM_RUNS`` of them (in time order) are the first look and the next ``CONFIRM_MORE`` the second, exactly
    as ``--confirm`` measures them. An alert with fewer valid reruns is raised unconfirmed (or, only screened, not
    raised), with the reason. Updates ``res.alerts``; returns the refuted ones."""
    from collections import defaultdict

    from .regressions import confirmation
    from .regressions.noise import CALL_RATIO
    from .regressions.records import call_ratio, processes_of, unhealthy
    from .schema import fingerprint, series_key

    loaded = store.load(args.reruns)
    for path, why in loaded.bad:
        print(f"warning: skipped bad rerun file {path}: {why}", file=sys.stderr)
    valid: dict[str, list] = {}
    seen = {"others": 0, "alerted": 0}

    def can_measure(items: list) -> tuple[set[str], dict[str, str]]:
        """The alerts and drifts with CONFIRM_RUNS valid reruns in the folder, and why not the others."""
        alerted = {c.fingerprint: c for c in items}
        seen["alerted"] = len(alerted)
        valid.update({fp: [] for fp in alerted})
        left: dict[str, dict[str, int]] = {fp: {} for fp in alerted}
        for r in sorted(loaded.records, key=lambda r: (r.created, r.run_id)):
            fp = fingerprint(series_key(r))
            c = alerted.get(fp)
            if c is None:  # another series, or another machine's: it confirms nothing here
                seen["others"] += 1
                continue
            night = c.tonight
            why = unhealthy(r)
            if why is None and night is not None and r.created <= night.created:
                why = f"not newer than the night alerted ({night.created})"
            elif why is None and night is not None and night.commit and r.git_commit != night.commit:
                why = f"of commit {str(r.git_commit)[:12]}, not the night's {night.commit[:12]}"
            elif why is None and night is not None and processes_of(r) != night.processes:
                # timed another way (`run --processes K`): one process's median moves more between runs than the
                # median of K, and the reruns are tested with the noise of the series' nights
                why = f"timed in {processes_of(r)} process(es), the night alerted in {night.processes}"
            elif why is None and c.series.get("measure") == CALL_RATIO and call_ratio(r) is None:
                # its alert is tested on the reruns' ratios: a rerun without one would leave the look short
                why = "without the interleaved call ratio its alert is judged by"
            if why:
                left[fp][why] = left[fp].get(why, 0) + 1
            else:
                valid[fp].append(r)
        why_not: dict[str, str] = {}
        for fp, rs in valid.items():
            if len(rs) < confirmation.CONFIRM_RUNS:
                skipped = "".join(f"; {n} {w}" for w, n in sorted(left[fp].items()))
                why_not[fp] = (f"--reruns {args.reruns} holds {len(rs)} valid rerun(s) of this series, "
                               f"{confirmation.CONFIRM_RUNS} needed{skipped}")
        return {fp for fp in valid if fp not in why_not}, why_not

    used = 0
    taken: dict[str, int] = defaultdict(int)

    def measure(alerts: list, times: int) -> list:
        nonlocal used
        out = []
        for c in alerts:
            rs = valid[c.fingerprint][taken[c.fingerprint]:taken[c.fingerprint] + times]
            if len(rs) < times:  # a look on fewer reruns than its rule counts would be another test
                continue
            taken[c.fingerprint] += times
            out += rs
            used += len(rs)
        return out

    refuted = confirmation.confirm_alerts(res, measure, machine=None, can_measure=can_measure, **kw)
    for c in refuted + res.alerts + res.drifts:
        if not taken[c.fingerprint]:
            continue
        runs = ", ".join(r.run_id for r in valid[c.fingerprint][:taken[c.fingerprint]])
        c.confirm_note += f"; reruns read from {args.reruns} (runs {runs})"
        if getattr(c, "wants_more", False):
            c.confirm_note += (f"; the folder holds {len(valid[c.fingerprint]) - taken[c.fingerprint]} more: measure "
                               f"{confirmation.CONFIRM_MORE} more of {c.key} there and check again")
    print(f"check --reruns {args.reruns}: {len(loaded.records)} record(s), {used} used as reruns of "
          f"{seen['alerted']} alert(s) and drift(s); {seen['others']} of other series or machines", file=sys.stderr)
    return refuted


def _check_outputs(args: argparse.Namespace, res: Any, refuted: list) -> None:
    """``check``'s report on stdout and, when asked, its markdown and JSON files (written atomically)."""
    from . import schema
    from .regressions import alerts

    text = alerts.check_markdown(res, getattr(args, "dashboard_url", None))
    if refuted:  # a refuted drift stands as its confirmation's change (confirmation.drift_change): its own title
        text += "\nNot reproduced by the confirmation rerun, tested alone (not raised): " + "; ".join(
            f"{alerts.md_text(alerts.drift_title(c.drift) if c.drift is not None else alerts.alert_title(c))} "
            f"({alerts.md_text(c.confirm_note)})" for c in refuted) + "\n"
    print(for_stdout(text))
    if args.markdown:
        store.atomic_write(args.markdown, text)
    if args.json:
        doc = alerts.alerts_json(res, getattr(args, "dashboard_url", None))
        doc["refuted"] = [c.fingerprint for c in refuted]
        doc["refuted_looks"] = getattr(args, "refuted_looks", [])
        doc["confirm_asked"] = bool(args.confirm or args.reruns is not None)
        store.atomic_write(args.json, schema.encode_alerts(doc))  # validated as schema.AlertsDoc


def _floor_arg(text: str) -> float:
    """``--floor`` of check and compare: a finite relative change from 0 to 10 (nan, inf, negatives: exit 2)."""
    import math

    try:
        x = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number such as 0.03, got {text!r}") from None
    if not math.isfinite(x) or x < 0 or x > 10:
        raise argparse.ArgumentTypeError(f"expected a finite relative change from 0 to 10 (0.03 is 3%), got {text}")
    return x


def _usage(message: str) -> int:
    """A usage error of ``run`` found after parsing: its one line on stderr, exit 2."""
    print(message, file=sys.stderr)
    return EXIT_USAGE


def _run(args: argparse.Namespace) -> int:
    """``run``: the pipelines suite, or the cases of the grid: single-GPU ones (one process each) or multi-GPU
    ones (torchrun per world size), never both in one run."""
    from . import runner

    if args.suite == PIPELINES:
        return _run_pipelines(args)
    knobs = pipeline_options.given(args)
    if knobs:
        return _usage(f"{', '.join(knobs)}: options of --suite pipelines, not of --suite {args.suite}")
    device = runner.detect_device() if args.device == "auto" else args.device
    cases = ([specs.find(k) for k in args.cases] if args.cases else
             specs.cases(args.suite, device=device, ops=args.ops, providers=args.providers, dtypes=args.dtypes,
                         sample_seed=args.sample_seed))
    why = _run_cases_unusable(args, cases)
    if why:
        return _usage(why)
    if cases[0].distributed:
        if args.resume:
            return _usage("--resume continues single-GPU suites; a multi-GPU run starts over")
        return _run_multigpu(args, device, cases)
    resume = None
    if args.resume:
        try:
            resume = runner.resume_plan(args.resume, cases, suite=args.suite, device=device, machine=args.machine,
                                        cache=args.cache, timing=TimingOptions(noise_target=args.noise_target,
                                                                               time_limit_s=args.time_limit),
                                        processes=args.processes,
                                        processes_below_us=args.processes_below_us or runner.PROCESSES_BELOW_US)
        except ValueError as e:
            return _usage(f"robocache-bench run: {e}")
    return _run_single(args, device, cases, resume)


def _run_pipelines(args: argparse.Namespace) -> int:
    """``run --suite pipelines``: the end-to-end suite, at its defaults or with the pipelines options (the same
    knobs, config and run as ``python -m robocache.bench.pipelines run``)."""
    given = [flag for flag, v in (("--ops", args.ops), ("--providers", args.providers), ("--dtypes", args.dtypes),
                                  ("--cases", args.cases), ("--gpus", args.gpus)) if v]
    given += ["--sample-seed"] if args.sample_seed is not None else []
    given += ["--resume"] if args.resume else []
    given += ["--processes"] if args.processes != 1 or args.processes_below_us is not None else []
    if given or args.cache != "warm" or args.precompile_jobs:
        return _usage(f"--suite pipelines takes --device, --out, --machine and the pipelines options only (got "
                      f"{', '.join(given) or 'other options'}); see robocache-bench run --help")
    device = pipeline_options.detect_device(args.device)
    try:
        cfg = pipeline_options.checked_config(args, device)
    except ValueError as e:
        return _usage(f"robocache-bench run --suite pipelines: {e}")
    return pipeline_options.run_and_print(cfg, args.out, args.machine)


def _run_cases_unusable(args: argparse.Namespace, cases: list) -> str | None:
    """Why ``run`` cannot run these cases with these options (one line), or None."""
    if not cases:
        return "no cases match these filters; see `robocache-bench list`"
    multi = [c for c in cases if c.distributed]
    if multi and len(multi) != len(cases):
        return "multi-GPU cases (suite multigpu) and single-GPU cases run separately: pick one kind"
    if args.processes_below_us is not None and args.processes == 1:
        return "--processes-below-us applies with --processes 2 or more"
    if multi and args.processes != 1:
        return "--processes applies to single-GPU cases (a multi-GPU case is timed once per world size)"
    if not multi and (args.gpus is not None or args.nnodes != 1 or args.rdzv_endpoint
                      or args.collective_timeout is not None):
        return ("--gpus, --nnodes, --rdzv-endpoint and --collective-timeout apply to multi-GPU cases "
                "(--suite multigpu)")
    return None


def _run_single(args: argparse.Namespace, device: str, cases: list, resume: Any = None) -> int:
    """Single-GPU cases, one process each; the summary and every failure printed; exit 1 when one failed.
    ``resume``: the cut run to continue (:func:`runner.resume_plan`)."""
    from . import runner

    timing = TimingOptions(noise_target=args.noise_target, time_limit_s=args.time_limit)
    where = "GPU (device timers)" if device == "gpu" else "CPU only (host timer; no GPU found)"
    each = ("one process each" if args.processes == 1 else f"one process each, {args.processes} for a case under "
            f"{args.processes_below_us or runner.PROCESSES_BELOW_US:g} us and for a call-cost case")
    print(f"robocache-bench: {len(cases)} cases of suite {args.suite} on {where}, {each}", file=sys.stderr)
    if resume is not None:
        print(f"robocache-bench: resuming run {resume.run_id} ({resume.path}): {len(resume.kept)} records kept, "
              f"{len(resume.todo)} cases to run", file=sys.stderr)
    res = runner.run_suite(args.suite, device=device, cases=cases, out_dir=args.out, cache=args.cache,
                           timeout_s=args.timeout, timing=timing, machine=args.machine,
                           progress=not args.no_progress and _stderr_is_tty(), precompile_jobs=args.precompile_jobs,
                           resume=resume, processes=args.processes,
                           processes_below_us=args.processes_below_us or runner.PROCESSES_BELOW_US)
    if res.precompile is not None:
        print(_precompile_line(res.precompile))
    counts = ", ".join(f"{k} {v}" for k, v in sorted(res.counts().items()))
    ceiling = (f"; copy ceiling {res.ceiling.gb_per_s:.0f} GB/s" if res.ceiling and res.ceiling.gb_per_s is not None
               else "")
    print(f"run {res.run_id}: {counts} in {res.wall_s:.0f} s{ceiling}; records: {res.path}")
    _print_failed(res.failed, 160)
    if res.ceiling_failed:
        print(f"  FAILED copy-ceiling measurement: {res.ceiling.reason}; records carry no % of ceiling")
    return 1 if res.failed or res.ceiling_failed else 0


def _precompile_line(pre: dict[str, Any]) -> str:
    """The torch.compile pre-pass in one line: how many compiled, in how long, and each failure."""
    return (f"precompile: {pre.get('ok', 0)} of {pre.get('cases', 0)} torch.compile cases compiled in "
            f"{pre.get('wall_s', 0.0):.0f} s with {pre['jobs']} processes"
            + "".join(f"; {f['case']}: {f['status']}" for f in pre.get("failed", []))
            + (f"; pre-pass error: {pre['error']}" if pre.get("error") else ""))


def _print_failed(failed: list[Record], width: int) -> None:
    """One line per failed record: its case, status and the first line of its reason (``width`` characters)."""
    for r in failed:
        print(f"  FAILED {r.case.id} {r.case.dtype} {r.case.provider}: {r.status}: "
              f"{((r.reason or '').splitlines() or [''])[0][:width]}")


def _run_multigpu(args: argparse.Namespace, device: str, cases: list) -> int:
    """Multi-GPU cases: torchrun per world size on this node (of ``--nnodes``); node 0 writes the records."""
    why = _multigpu_unusable(args, device)
    if why:
        return _usage(why)
    gpus = args.gpus if args.gpus is not None else (launch.gpu_count() if device == "gpu" else 2)
    if gpus < 1:
        return _usage("no GPU visible here: pass --gpus N, or --device cpu for Gloo processes")
    try:
        margin = launch.launch_margin_s()
    except ValueError as e:
        return _usage(f"robocache-bench run: {e}")
    timing = TimingOptions(noise_target=args.noise_target, time_limit_s=args.time_limit)
    coll = args.collective_timeout if args.collective_timeout is not None else launch.COLLECTIVE_TIMEOUT_S
    where = (f"{gpus} GPU(s) per node, NCCL" if device == "gpu" else f"{gpus} Gloo process(es) per node, CPU only "
             "(host timer)") + (f", {args.nnodes} nodes (this is node {args.node_rank})" if args.nnodes > 1 else "")
    print(f"robocache-bench: {len(cases)} multi-GPU cases of suite {args.suite} on {where}; torchrun per world size, "
          f"collective timeout {coll:g} s", file=sys.stderr)
    say = None if args.no_progress else (lambda line: print(line, file=sys.stderr, flush=True))
    res = launch.run_multigpu(cases, device=device, gpus=gpus, out_dir=args.out, suite=args.suite, timing=timing,
                              machine=args.machine, collective_timeout_s=coll, case_timeout_s=args.timeout,
                              nnodes=args.nnodes, node_rank=args.node_rank, rdzv_endpoint=args.rdzv_endpoint,
                              rdzv_id=args.rdzv_id, log=say, margin_s=margin)
    return _multigpu_summary(args, res)


def _multigpu_unusable(args: argparse.Namespace, device: str) -> str | None:
    """Why the multi-GPU cases cannot run here with these options (one line), or None."""
    if args.nnodes > 1 and not args.rdzv_endpoint:
        return "--nnodes > 1 needs --rdzv-endpoint HOST:PORT (the same on every node)"
    ok, why = launch.available(device)
    return None if ok else f"robocache-bench run: multi-GPU cases need torch.distributed: {why}"


def _multigpu_summary(args: argparse.Namespace, res: Any) -> int:
    """What a multi-GPU run did: cases not run, the table (on the writing node), notes and failures; the exit
    code (2: no case fits here, 1: a case or a launch failed)."""
    if res.not_run:
        need = sorted({specs.find(k).world_size for k, _ in res.not_run})
        print(f"not run: {len(res.not_run)} case(s) needing {', '.join(map(str, need))} ranks "
              f"({res.not_run[0][1]})", file=sys.stderr)
    if not res.records and not res.launches:
        return _usage("no multi-GPU case fits on this machine")
    if not res.writer:
        rcs = ", ".join(f"{x['world_size']} ranks: exit {x['rc']}" for x in res.launches)
        print(f"node {args.node_rank}: launches done ({rcs}); the records are written on the node with --node-rank 0")
        return 1 if res.launch_failed else 0
    counts = ", ".join(f"{k} {v}" for k, v in sorted(res.counts().items()))
    print(f"run {res.run_id}: {counts} in {res.wall_s:.0f} s; records: {', '.join(str(p) for p in res.paths)}")
    print(multigpu_table(res.records))
    for x in res.launches:
        if x.get("detail") and not x.get("status"):  # a group stopped after its last case: records complete
            print(f"  note: the launch of {x['world_size']} rank(s): {x['detail']}")
    _print_failed(res.failed, 200)
    return 1 if res.failed else 0


if __name__ == "__main__":
    sys.exit(main())
