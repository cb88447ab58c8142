"""Ctrl-C during `robocache-bench run`: "interrupted", exit 130, and nothing after it (issue 24).

Each case runs in its own process group (a timeout kills its compile workers with it), so the terminal's Ctrl-C
reaches the runner only. The runner used to leave the case process running: it finished later, wrote its answer
into the temporary folder the interrupted runner had removed, and printed ``FileNotFoundError ...
result.msgpack.tmp`` under "interrupted".
"""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CASE = "resample/B32-S100-T50-D32/float32/fault_providers:SLOW"  # tests/fault_providers.py: marks, then sleeps


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # a zombie (exited, not yet reaped by its parent) is not running
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0] != "Z"
    except OSError:
        return False


def _as_from_a_terminal() -> None:
    """In the child before exec: Ctrl-C's default action, as a shell in a terminal gives a command. A disposition
    the test process inherited (a runner of tests that ignores SIGINT passes SIG_IGN on, and Python then installs
    no KeyboardInterrupt handler) would make the runner ignore the signal and finish its case: exit 1, not 130."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def test_ctrl_c_stops_the_case_process_and_prints_no_worker_traceback(tmp_path: Path) -> None:
    mark = tmp_path / "case-started"
    env = {**os.environ, "RCB_SLOW_MARK": str(mark), "RCB_SLOW_S": "10",
           "PYTHONPATH": os.pathsep.join([str(ROOT), str(ROOT / "tests"), os.environ.get("PYTHONPATH", "")])}
    cmd = [sys.executable, "-m", "robocache.bench.cli", "run", "--device", "cpu", "--cases", CASE,
           "--out", str(tmp_path / "out"), "--no-progress", "--timeout", "600"]
    # its own session: the SIGINT below goes to the runner alone, as a terminal's Ctrl-C reaches only it
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
                            start_new_session=True, preexec_fn=_as_from_a_terminal)
    try:
        deadline = time.monotonic() + 300  # a loaded 2-core machine starts the forkserver slowly
        while not (mark.exists() and mark.read_text().strip()):
            assert proc.poll() is None, proc.communicate()
            assert time.monotonic() < deadline, "the case never started"
            time.sleep(0.1)
        case_pid = int(mark.read_text().split()[0])
        os.kill(proc.pid, signal.SIGINT)
        # communicate() returns once every holder of the pipes has closed them: a case process that outlived the
        # runner would hold them until it finished and printed its traceback
        out, err = proc.communicate(timeout=300)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.communicate()
    assert proc.returncode == 130, (proc.returncode, err, out[-2000:], signal.getsignal(signal.SIGINT))
    assert err.rstrip().endswith("robocache-bench run: interrupted"), err
    assert "Traceback" not in err and "FileNotFoundError" not in err, err
    assert not _alive(case_pid)
