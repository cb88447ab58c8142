"""The pipelines suite run by the one CLI (issue 28): ``robocache-bench run --suite pipelines`` takes the suite's
knobs, and ``python -m robocache.bench.pipelines run`` (the alias scripts and docs use) builds the same config
from the same flags. Parsing only: nothing runs."""
from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from robocache.bench import cli, specs
from robocache.bench.pipelines import __main__ as alias
from robocache.bench.pipelines import command

KNOBS = ["--size-mb", "2", "--min-s", "1", "--max-s", "2", "--rgb", "--seed", "3", "--parts", "dataload,train",
         "--batch-sizes", "2,4", "--workers", "0,1", "--load-batches", "3", "--models", "mlp", "--train-batch", "2",
         "--train-batches", "2,4", "--train-workers", "1", "--train-steps", "3", "--profile-steps", "0",
         "--infer-batches", "1", "--backends", "eager", "--infer-time", "0.1", "--cache-regimes", "resident",
         "--cache-budget-mb", "1.5", "--prefetch-depth", "2", "--ddp-ranks", "1,2"]


def test_the_one_cli_and_the_alias_build_the_same_config() -> None:
    one = cli._parser().parse_args(["run", "--suite", "pipelines", "--device", "cpu", *KNOBS])
    other = alias.parser().parse_args(["run", "--device", "cpu", *KNOBS])
    a, b = command.checked_config(one, "cpu"), command.checked_config(other, "cpu")
    assert isinstance(a, specs.PipelineConfig) and a == b
    assert a.batch_sizes == (2, 4) and a.ddp_ranks == (1, 2) and a.rgb is True and a.infer_time_s == 0.1
    assert sorted(command.given(one)) == sorted(k for k in KNOBS if k.startswith("--"))


def test_defaults_are_the_devices_sweep() -> None:
    for device in ("cpu", "gpu"):
        args = cli._parser().parse_args(["run", "--suite", "pipelines"])
        assert command.given(args) == []
        assert dataclasses.asdict(command.checked_config(args, device)) == \
            dataclasses.asdict(specs.pipeline_defaults(device))


def _run(argv: list[str]) -> int:
    """``robocache-bench run ARGV`` as far as its checks go (parsed, then the command; nothing here runs)."""
    return cli._run(cli._parser().parse_args(["run", *argv]))


def test_knobs_are_usage_errors_elsewhere(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    assert _run(["--suite", "quick", "--device", "cpu", "--batch-sizes", "2", "--workers", "1",
                 "--out", str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip()
    assert err == "--batch-sizes, --workers: options of --suite pipelines, not of --suite quick"
    assert _run(["--suite", "pipelines", "--device", "cpu", "--batch-sizes", "0", "--out", str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip()
    assert err == "robocache-bench run --suite pipelines: batch_sizes must be one or more integers >= 1"
    assert _run(["--suite", "pipelines", "--device", "cpu", "--dataset", str(tmp_path / "none.h5"),
                 "--out", str(tmp_path)]) == 2
    assert "none.h5" in capsys.readouterr().err
    assert not list(tmp_path.iterdir())  # nothing written


def test_the_grid_is_declared_in_specs() -> None:
    cfg = specs.pipeline_defaults("cpu")
    info = {"episodes": 23, "seed": 0, "rgb": False, "payload_bytes": 4_000_000, "cached_bytes": 4_000_000}
    pts = specs.pipeline_points(cfg, info)
    assert {p["kind"] for p in pts} == set(specs.PIPELINE_PARTS)
    assert {p["provider"] for p in pts if p["kind"] == "infer"} == set(cfg.backends)
    assert all(p["kind"] in specs.PIPELINE_UNITS and p["reason"] for p in pts)
    assert len({(p["kind"], p["tag"], p["provider"]) for p in pts}) == len(pts)  # no case twice


def test_list_through_the_one_cli_is_the_alias_list(capsys: pytest.CaptureFixture) -> None:
    assert cli.main(["list", "--suite", "pipelines", "--device", "cpu", "--batch-sizes", "2,4"]) == 0
    one = capsys.readouterr().out
    assert alias.main(["list", "--device", "cpu", "--batch-sizes", "2,4"]) == 0
    assert capsys.readouterr().out == one and "dataload/B4-W2-Nep-s0" in one
    assert cli.main(["list", "--suite", "pipelines", "--ops", "fuse"]) == 2
    assert capsys.readouterr().err.strip() == "list --suite pipelines takes --device and the pipelines options only " \
                                              "(got --ops)"
    assert cli.main(["list", "--suite", "quick", "--workers", "2"]) == 2
    assert "--workers: options of --suite pipelines" in capsys.readouterr().err


def test_a_bad_launch_margin_is_refused_before_any_part_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                              capsys: pytest.CaptureFixture) -> None:
    """$ROBOCACHE_LAUNCH_MARGIN_S is read by the DDP launches, after the dataset and the other parts: a bad value is
    a usage error up front (exit 2, one line, nothing written), and matters only when DDP launches are asked."""
    monkeypatch.setenv("ROBOCACHE_LAUNCH_MARGIN_S", "soon")
    out = tmp_path / "out"
    assert alias.main(["run", "--device", "cpu", "--out", str(out), "--parts", "", "--ddp-ranks", "1"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "ROBOCACHE_LAUNCH_MARGIN_S must be a number of seconds > 0, got soon" in err[0]
    assert not out.exists()
    args = cli._parser().parse_args(["run", "--suite", "pipelines", "--device", "cpu", "--parts", "dataload"])
    assert command.checked_config(args, "cpu").ddp_ranks == ()  # no launch: the variable is not read


@pytest.mark.parametrize(("exc", "code", "says"), [("stopped", 143, "stopped by SIGTERM; the launch's processes"),
                                                   ("interrupt", 130, "interrupted")])
def test_a_stopped_run_says_so_in_one_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                           capsys: pytest.CaptureFixture, exc: str, code: int, says: str) -> None:
    """A timeout's SIGTERM during a DDP launch (gpu_check.sh's DDP_TIMEOUT) ends the alias with one line and the
    one CLI's exit code, never a traceback (seen on the 4-GPU H200 of 2026-11-28)."""
    from robocache.bench.multigpu import launch

    def stop(*_a, **_k):
        raise launch.Stopped("stopped by SIGTERM") if exc == "stopped" else KeyboardInterrupt

    monkeypatch.setattr(alias, "run_and_print", stop)
    assert alias.main(["run", "--device", "cpu", "--out", str(tmp_path), *KNOBS]) == code
    err = capsys.readouterr().err
    assert says in err and "Traceback" not in err and len(err.strip().splitlines()) == 1
    if exc == "stopped":
        assert code == cli.EXIT_STOPPED
