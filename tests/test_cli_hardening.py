"""robocache-bench's options, outputs and exit codes (issue 16): nothing here measures a case.

Exit codes (docs/harness.md "Exit codes"): 2 for every usage error, with one line naming what to fix and no
traceback, before anything is measured or written; 1 only for a failed case or a regression; a reader closing
the pipe ends the output quietly; terminal text carries no markdown escapes.
"""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from robocache.bench import cli, env as envmod, specs

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "results" / "h200-nvidia-h200"


def _main(argv: list[str], capsys: pytest.CaptureFixture) -> tuple[int, str, str]:
    try:
        rc = cli.main(argv)
    except SystemExit as e:  # argparse's usage errors
        rc = e.code
    out, err = capsys.readouterr()
    return rc, out, err


def _one_line_usage_error(rc: int, err: str, *words: str) -> None:
    assert rc == 2, (rc, err)
    assert "Traceback" not in err, err
    last = err.strip().splitlines()[-1]
    for w in words:
        assert w in last, (w, last)


@pytest.fixture
def not_a_folder(tmp_path: Path) -> Path:
    f = tmp_path / "a-file"
    f.write_text("x")
    return f / "sub"  # under a regular file: no one can create it, root included


# --- numeric options ------------------------------------------------------------------------------------

@pytest.mark.parametrize(("flag", "value"), [
    ("--time-limit", "-1"), ("--time-limit", "0"), ("--time-limit", "nan"), ("--time-limit", "inf"),
    ("--noise-target", "nan"), ("--noise-target", "0"), ("--noise-target", "-0.1"), ("--noise-target", "1.5"),
    ("--timeout", "0"), ("--timeout", "-5"), ("--timeout", "nan"), ("--timeout", "1e400"),
    ("--collective-timeout", "-1"), ("--collective-timeout", "inf"), ("--gpus", "0"), ("--gpus", "-2"),
    ("--gpus", "1.5"), ("--nnodes", "0"), ("--node-rank", "-1"), ("--precompile-jobs", "-1"),
    ("--precompile-jobs", "x"), ("--rdzv-endpoint", "nohost"), ("--rdzv-endpoint", "h:99999"),
])
def test_run_numeric_options_refused_before_running(flag: str, value: str, capsys, monkeypatch) -> None:
    monkeypatch.setattr("robocache.bench.runner.run_suite", lambda *a, **k: pytest.fail("measured"))
    rc, _, err = _main(["run", "--device", "cpu", flag, value], capsys)
    _one_line_usage_error(rc, err, flag)


def test_node_rank_must_be_below_nnodes(capsys, monkeypatch) -> None:
    monkeypatch.setattr("robocache.bench.runner.run_suite", lambda *a, **k: pytest.fail("measured"))
    rc, _, err = _main(["run", "--device", "cpu", "--suite", "multigpu", "--nnodes", "2", "--node-rank", "2",
                        "--rdzv-endpoint", "h:29500"], capsys)
    _one_line_usage_error(rc, err, "--node-rank")


def test_number_validator_is_generic() -> None:
    """One validator for every numeric option (check's --floor can use it too)."""
    ratio = cli.number(float, lo=0, hi=1, lo_open=True, hi_open=True)
    assert ratio("0.5") == 0.5
    for bad in ("0", "1", "nan", "inf", "-0.2", "x", "1e999"):
        with pytest.raises(Exception, match="expected"):
            ratio(bad)


# --- case keys --------------------------------------------------------------------------------------------

@pytest.mark.parametrize(("key", "words"), [
    ("garbage", ["op/tag/dtype/provider"]),
    ("resample/B256-S100-T50-D32/float99/robocache", ["dtype", "float99"]),
    ("resample/B256-S100-T50-D32/float32/no_such_provider", ["provider", "no_such_provider"]),
    ("nope/B256-S100-T50-D32/float32/robocache", ["op", "nope"]),
    ("resample/B0-S0/float32/robocache", ["no case"]),
    ("resample//float32/robocache", ["op/tag/dtype/provider"]),
])
def test_run_cases_keys_validated(key: str, words: list[str], capsys, monkeypatch) -> None:
    monkeypatch.setattr("robocache.bench.runner.run_suite", lambda *a, **k: pytest.fail("measured"))
    rc, _, err = _main(["run", "--device", "cpu", "--cases", key], capsys)
    _one_line_usage_error(rc, err, *words)


def test_module_providers_still_accepted() -> None:
    case = specs.find("resample/B256-S100-T50-D32/float32/fault_providers:DIE_RANK1")
    assert case.provider == "fault_providers:DIE_RANK1"


# --- outputs checked before any work ---------------------------------------------------------------------

def test_run_out_unwritable_before_measuring(not_a_folder: Path, capsys, monkeypatch) -> None:
    monkeypatch.setattr("robocache.bench.runner.run_suite", lambda *a, **k: pytest.fail("measured"))
    rc, _, err = _main(["run", "--device", "cpu", "--out", str(not_a_folder)], capsys)
    _one_line_usage_error(rc, err, "--out")


@pytest.mark.parametrize("argv", [
    ["report", str(RESULTS), "--out", "{bad}/r.md"],
    ["compare", str(RESULTS), str(RESULTS), "--out", "{bad}/c.md"],
    ["check", str(RESULTS), "--json", "{bad}/a.json"],
    ["check", str(RESULTS), "--markdown", "{bad}/a.md"],
    ["check", str(RESULTS), "--confirm-out", "{bad}"],
])
def test_unwritable_outputs_are_usage_errors(argv: list[str], not_a_folder: Path, capsys, monkeypatch) -> None:
    from robocache.bench.regressions import changepoints  # the module cli._check reads check from

    monkeypatch.setattr(changepoints, "check", lambda *a, **k: pytest.fail("analysed before checking the outputs"))
    argv = [a.replace("{bad}", str(not_a_folder)) for a in argv]
    flag = next(a for a in argv if a.startswith("--"))
    rc, _, err = _main(argv, capsys)
    _one_line_usage_error(rc, err, flag)


def test_output_that_is_a_folder(tmp_path: Path, capsys) -> None:
    rc, _, err = _main(["report", str(RESULTS), "--out", str(tmp_path)], capsys)
    _one_line_usage_error(rc, err, "--out")


def test_report_out_written(tmp_path: Path, capsys) -> None:
    rc, out, _ = _main(["report", str(RESULTS), "--out", str(tmp_path / "r.md")], capsys)
    assert rc == 0 and (tmp_path / "r.md").read_text().startswith("#")


# --- terminal text ----------------------------------------------------------------------------------------

def test_list_and_show_have_no_markdown_escapes(capsys, monkeypatch) -> None:
    import io

    assert cli.main(["list", "--suite", "quick"]) == 0
    out = capsys.readouterr().out
    assert "torch_eager" in out and "\\_" not in out and "**" not in out

    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    term = Terminal()
    monkeypatch.setattr("sys.stdout", term)  # show on a terminal: plain; into a pipe: escaped markdown (issue 27)
    # a committed quick run (names with underscores: torch_compile, torch_eager), not the folder's newest run,
    # which need not measure a peer (a sampled run of kernel versions)
    quick = sorted(RESULTS.glob("*-quick.records.json"))[-1]
    assert cli.main(["show", str(quick)]) == 0
    out = term.getvalue()
    assert "torch_compile" in out and "\\_" not in out and "**" not in out and "`" not in out


def test_report_to_a_pipe_stays_markdown(capsys) -> None:
    assert cli.main(["report", str(RESULTS), "--headline"]) == 0
    assert "**device**" in capsys.readouterr().out  # a pipe or file gets the markdown document itself


def test_terminal_text() -> None:
    assert cli.terminal_text("**device**: `torch\\_eager` a\\|b \\` ") == "device: torch_eager a|b ` "


def _cli(args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run(["bash", "-c", f"set -o pipefail; {sys.executable} -m robocache.bench.cli {args} | head -1"],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)


def test_closed_pipe_is_quiet() -> None:
    run = _cli(f"report {RESULTS}")
    assert run.returncode == 0, run.stderr
    assert "Traceback" not in run.stderr and "BrokenPipe" not in run.stderr, run.stderr
    assert run.stdout.strip()


# --- where an ad-hoc run goes, and its machine name -------------------------------------------------------

def test_run_default_out_is_ignored_folder() -> None:
    args = cli._parser().parse_args(["run"])
    assert Path(args.out) == Path("results/local")
    ignored = subprocess.run(["git", "check-ignore", "-q", "results/local/x/y.records.json"], cwd=ROOT)
    assert ignored.returncode == 0


@pytest.mark.parametrize(("name", "count", "machine"), [
    ("NVIDIA H100 80GB HBM3", 1, "nvidia-h100-80gb-hbm3"), ("NVIDIA H200", 1, "nvidia-h200"),
    ("NVIDIA H200", 4, "nvidia-h200-x4"), ("NVIDIA H100 80GB HBM3", 8, "nvidia-h100-80gb-hbm3-x8")])
def test_machine_name_from_the_gpu(name: str, count: int, machine: str, monkeypatch) -> None:
    monkeypatch.delenv("ROBOCACHE_MACHINE", raising=False)
    monkeypatch.setattr(envmod, "nvml", lambda: (None, "stubbed"))
    monkeypatch.setattr(envmod, "_torch_gpu", lambda i: {"gpu_name": name, "gpu_count": count})
    env = envmod.capture_env("gpu")
    assert env["machine"] == machine
    assert not env["machine"].endswith("-x1")  # lent-machine names only when asked
    assert envmod.capture_env("gpu", machine="nvidia-h100-x1")["machine"] == "nvidia-h100-x1"
    monkeypatch.setenv("ROBOCACHE_MACHINE", "lab")
    assert envmod.capture_env("gpu")["machine"] == "lab"


def test_cpu_and_unknown_gpu_keep_the_hostname(monkeypatch) -> None:
    import socket

    monkeypatch.delenv("ROBOCACHE_MACHINE", raising=False)
    assert envmod.capture_env("cpu")["machine"] == socket.gethostname()
    monkeypatch.setattr(envmod, "nvml", lambda: (None, "stubbed"))
    monkeypatch.setattr(envmod, "_torch_gpu", lambda i: {})
    assert envmod.capture_env("gpu")["machine"] == socket.gethostname()


def test_internal_error_is_not_exit_1(capsys, monkeypatch) -> None:
    from robocache.bench.views import report

    monkeypatch.setattr(report, "show", lambda recs: 1 / 0)
    rc, _, err = _main(["show", str(RESULTS)], capsys)
    assert rc == 3 and "internal error" in err.strip().splitlines()[-1]


def test_usage_error_is_one_line(capsys) -> None:
    rc, _, err = _main(["run", "--noise-target", "nan"], capsys)
    assert rc == 2 and len(err.strip().splitlines()) == 1, err
    assert "--noise-target" in err and "--help" in err


# --- issue 27: usage errors leave nothing behind; only unreadable inputs are an error with their reason -------

@pytest.mark.parametrize("argv", [
    ["run", "--device", "cpu", "--ops", "bogus", "--out", "{dir}"],
    ["run", "--device", "cpu", "--providers", "nope", "--out", "{dir}"],
    ["run", "--device", "cpu", "--suite", "pipelines", "--ops", "fuse", "--out", "{dir}"],
    ["run", "--device", "cpu", "--suite", "quick", "--gpus", "2", "--out", "{dir}"],
    ["check", str(RESULTS), "--confirm-out", "{dir}", "--reruns", str(RESULTS)],
])
def test_usage_errors_leave_no_folder_behind(argv: list[str], tmp_path: Path, capsys, monkeypatch) -> None:
    """Every option is judged before anything is created: the output folder (and its parents) of a refused
    command does not exist afterwards (it used to be created by the writability check)."""
    monkeypatch.setattr("robocache.bench.runner.run_suite", lambda *a, **k: pytest.fail("measured"))
    out = tmp_path / "new" / "out"
    rc, _, err = _main([a.replace("{dir}", str(out)) for a in argv], capsys)
    assert rc == 2, err
    assert "Traceback" not in err
    assert not (tmp_path / "new").exists(), "a refused command created its output folder"
    assert sorted(p.name for p in tmp_path.iterdir()) == [], "a probe or a folder was left behind"


def test_writable_out_folder_is_checked_but_made_only_by_the_writer(tmp_path: Path) -> None:
    import argparse

    out = tmp_path / "a" / "b"
    cli.check_outputs(argparse.Namespace(cmd="run", out=str(out)))  # writable: no error
    assert not (tmp_path / "a").exists()
    (tmp_path / "f").write_text("x")
    with pytest.raises(ValueError, match="is a file"):
        cli.check_outputs(argparse.Namespace(cmd="run", out=str(tmp_path / "f")))


@pytest.fixture
def newer_file(tmp_path: Path) -> Path:
    """A results file of a schema version newer than this robocache-bench reads (a copy of a committed one)."""
    import json

    from robocache.bench.schema import SCHEMA_VERSION

    src = sorted(RESULTS.glob("*.records.json"))[0]
    doc = json.loads(src.read_text())
    doc["schema_version"] = SCHEMA_VERSION + 1
    f = tmp_path / "v-next.records.json"
    f.write_text(json.dumps(doc))
    return f


@pytest.mark.parametrize("argv", [
    ["show", "{f}"], ["show", "{f}", "--format", "json"], ["report", "{f}"], ["report", "{f}", "--kernels"],
    ["compare", "{f}", "{f}"], ["check", "{f}"], ["show", "{d}"],
])
def test_a_command_whose_only_inputs_are_unreadable_fails_with_their_reason(argv, newer_file: Path, capsys) -> None:
    """`show FILE` on a file of a newer schema version: exit 2, and the error line itself gives the reason (it
    said "no records found; run `robocache-bench run` first", the reason only in a warning above)."""
    argv = [a.replace("{f}", str(newer_file)).replace("{d}", str(newer_file.parent)) for a in argv]
    rc, out, err = _main(argv, capsys)
    _one_line_usage_error(rc, err, "is newer than this robocache-bench", "v-next.records.json")
    assert "run` first" not in err.strip().splitlines()[-1]


def test_an_unreadable_input_beside_a_readable_one_is_a_warning(newer_file: Path, capsys) -> None:
    src = sorted(RESULTS.glob("*.records.json"))[0]
    rc, out, err = _main(["show", str(newer_file), str(src)], capsys)
    assert rc == 0 and "is newer than" in err and out


@pytest.mark.parametrize("argv", [
    ["bisect", "--series", "resample/B32-S100-T50-D32/float32/numpy", "--good", "0" * 40, "--bad", "1" * 40,
     "--machine", "m"],
    ["check", "no-such-folder-here"],
    ["compare", "no-such-run-a", "no-such-run-b"],
])
def test_each_command_with_bad_input_is_a_usage_error_not_a_bug(argv, capsys):
    """Options shared by commands are read only where the command has them: ``bisect`` once failed with an internal
    error (exit 3) on an option only ``check`` has (``--reruns``)."""
    from robocache.bench import cli

    rc = cli.main(argv)
    err = capsys.readouterr().err
    assert rc == 2, err
    assert "internal error" not in err and "Traceback" not in err, err


# --- check --confirm --time-limit: the reruns' sampling bound (the rehearsal's cost) ----------------------------

def test_check_time_limit_bounds_the_confirmation_reruns(tmp_path: Path, capsys, monkeypatch) -> None:
    """``check --confirm --time-limit S`` hands S to every confirmation rerun as its time limit (without it, run's
    own default: no timing passed); without --confirm it is a usage error (there is nothing to measure)."""
    import copy
    from types import SimpleNamespace

    from test_regress import _noisy, _write_hist, series
    from test_store import make_env

    from robocache.bench import runner, store

    vals = _noisy(5, n=20, sigma=0.03) + [v * 2.0 for v in _noisy(6, n=6, sigma=0.03)]
    hist = series(vals, provider="numpy")
    _write_hist(tmp_path / "hist", hist)
    timings = []

    def fake_run_suite(suite, *, device, cases, out_dir, machine, cache, progress, **kw):
        timings.append(kw.get("timing"))
        r = copy.deepcopy(hist[-1])
        r.run_id, r.created = f"confirm-{len(timings)}", f"2026-02-01T00:00:{len(timings):02d}+00:00"
        r.metrics.time_us.p50 = vals[-1]  # still twice as slow: confirmed
        return SimpleNamespace(path=store.write_records(out_dir, make_env(), [r], name=r.run_id))

    monkeypatch.setattr(runner, "run_suite", fake_run_suite)
    monkeypatch.setattr(runner, "detect_device", lambda: "cpu")
    base = ["check", str(tmp_path / "hist"), "--machine", "ci-synthetic", "--fail-on-regression"]
    # the reruns are faked (no process: the fast tier's guard in tests/conftest.py fails a test that starts one)
    confirm = [*base, "--confirm"]
    rc, _, err = _main([*confirm, "--time-limit", "0.3", "--confirm-out", str(tmp_path / "a")], capsys)
    assert rc == 1 and timings and all(t == {"time_limit_s": 0.3} for t in timings), (rc, timings, err)
    timings.clear()
    rc, _, err = _main([*confirm, "--confirm-out", str(tmp_path / "b")], capsys)
    assert rc == 1 and timings and all(t is None for t in timings), (rc, timings, err)
    timings.clear()
    rc, _, err = _main([*base, "--time-limit", "0.3"], capsys)
    _one_line_usage_error(rc, err, "--time-limit", "--confirm")
    assert not timings
    rc, _, err = _main([*confirm, "--time-limit", "0"], capsys)
    _one_line_usage_error(rc, err, "--time-limit")


def test_the_write_probe_says_why_or_nothing(tmp_path: Path) -> None:
    """The one probe both output checks (a folder, a file) use: nothing where a file can be made (and nothing
    left behind), the OS's reason where it cannot."""
    assert cli._cannot_write_in(tmp_path) is None and list(tmp_path.iterdir()) == []
    assert cli._cannot_write_in(tmp_path / "missing") == "No such file or directory"
