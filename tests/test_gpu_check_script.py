"""scripts/gpu_check.sh's bench part without a GPU: nvidia-smi and python are stubs that log their arguments, so
the test sees the commands the script would run (machine name, suites, pre-pass) and nothing is measured."""
from __future__ import annotations

import os
import stat
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def _stub(path: Path, body: str) -> None:
    path.write_text("#!/usr/bin/env bash\n" + body)
    path.chmod(path.stat().st_mode | stat.S_IEXEC)


def _bench(tmp_path: Path, gpu_name: str | None, count: int = 1, **env: str) -> list[list[str]]:
    bin_ = tmp_path / "bin"
    bin_.mkdir(exist_ok=True)
    log = tmp_path / "calls.log"
    log.write_text("")
    if gpu_name is not None:
        lines = "\\n".join(f"GPU {i}: {gpu_name} (UUID: x)" for i in range(count))
        _stub(bin_ / "nvidia-smi", f'case "$*" in *noheader*) echo "{gpu_name}";; *-L*) printf "{lines}\\n";; '
                                   '*) echo stub;; esac\n')
    _stub(bin_ / "fakepy", f'[ "${{1:-}}" = -m ] && echo "$*" >> {log}\n[ "${{1:-}}" = - ] && cat > /dev/null\nexit 0\n')
    path = str(bin_) + os.pathsep + "/usr/bin:/bin"
    full = {"PATH": path, "PYTHON": str(bin_ / "fakepy"), "HOME": str(tmp_path), **env}
    run = subprocess.run(["bash", "scripts/gpu_check.sh", str(tmp_path / "out"), "bench"], cwd=ROOT, env=full,
                         capture_output=True, text=True, timeout=60)
    assert run.returncode == 0, run.stdout + run.stderr
    return [line.split() for line in log.read_text().splitlines()]


def _arg(call: list[str], flag: str) -> str:
    return call[call.index(flag) + 1]


@pytest.mark.parametrize(("gpu", "count", "machine"), [
    ("NVIDIA H100 80GB HBM3", 1, "nvidia-h100-x1"), ("NVIDIA H200", 1, "nvidia-h200"),
    ("NVIDIA H200", 4, "nvidia-h200-x4")])
def test_machine_name_from_the_gpu(tmp_path: Path, gpu: str, count: int, machine: str) -> None:
    calls = _bench(tmp_path, gpu, count)
    runs = [c for c in calls if c[2:3] == ["run"]]
    assert [_arg(c, "--suite") for c in runs] == ["quick"]
    assert _arg(runs[0], "--machine") == machine and _arg(runs[0], "--precompile-jobs") == "4"


def test_explicit_machine_wins_and_suites_loop(tmp_path: Path) -> None:
    calls = _bench(tmp_path, "NVIDIA H100 80GB HBM3", ROBOCACHE_MACHINE="lab-box", SUITE="quick nightly",
                   PRECOMPILE_JOBS="2")
    runs = [c for c in calls if c[2:3] == ["run"]]
    assert [_arg(c, "--suite") for c in runs] == ["quick", "nightly"]
    assert {_arg(c, "--machine") for c in runs} == {"lab-box"} and {_arg(c, "--precompile-jobs") for c in runs} == {"2"}
    reports = [c for c in calls if c[2:3] == ["report"]]
    assert [_arg(c, "--out").rsplit("/", 1)[1] for c in reports] == ["report-quick.md", "report-nightly.md",
                                                                     "kernels.md"]
    assert "--kernels" in reports[-1]


def test_unknown_gpu_is_not_named_after_a_lent_machine(tmp_path: Path) -> None:
    calls = _bench(tmp_path, "NVIDIA A100-SXM4-80GB")
    run = next(c for c in calls if c[2:3] == ["run"])
    assert not _arg(run, "--machine").startswith("nvidia-h")
