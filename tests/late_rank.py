"""A two-rank group through the harness's own start (``robocache.bench.multigpu.rank._init``) whose rank 1 starts
late and then never joins a collective: the start must wait for it (``rank.STARTUP_TIMEOUT_S``), and rank 0's
next collective must still end after about the collective timeout (lowered with torch's ``_set_pg_timeout`` once
every rank has started), not the start's. Gloo on the CPU (tests/test_distributed.py), NCCL on two GPUs
(tests/gpu/test_multigpu_gpu.py): the same script, the device its argument.

Gloo raises in rank 0 (``TIMED-OUT`` with the time the barrier took); NCCL's watchdog aborts the communicator
and, by default (``TORCH_NCCL_ASYNC_ERROR_HANDLING``), ends the process: then the time from the barrier's start
(printed before it) to the process's end, as this side saw it, is the figure. Either way rank 1 must still be
alive at that point, or the end says nothing of the timeout (a closed connection ends a collective at once).
"""
from __future__ import annotations

import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

SCRIPT = r"""
import os, sys, time
import msgspec
from robocache.bench.context import LaunchTask
from robocache.bench.multigpu import rank
lt = msgspec.json.decode(open(sys.argv[1], "rb").read(), type=LaunchTask)
me = rank.Rank(lt)
if me.rank == 1:
    time.sleep(float(sys.argv[2]))  # a slow start (importing torch on a loaded machine), longer than the timeout
rank._init(lt, me)
import torch.distributed as dist
if me.rank == 0:
    print(f"BARRIER-START {time.time():.3f}", flush=True)
    t0 = time.monotonic()
    try:
        dist.barrier()  # rank 1 never comes: a hung peer
        if lt.task.device == "gpu":
            import torch
            torch.cuda.synchronize()
        print("BARRIER-RETURNED", flush=True)
    except Exception as e:  # noqa: BLE001
        print(f"TIMED-OUT {time.monotonic() - t0:.2f} {type(e).__name__} {str(e)[:300]!r}", flush=True)
    sys.stdout.flush()
    os._exit(0)
time.sleep(float(sys.argv[3]))  # never returns in the test (killed): its exit would end rank 0's barrier too
os._exit(0)
"""


@dataclass
class Outcome:
    rc: int  # rank 0's exit code (0: it printed TIMED-OUT or BARRIER-RETURNED; negative: a signal, e.g. NCCL's abort)
    out: str
    err: str
    took_s: float | None  # the barrier's start to its end (Gloo: rank 0's own figure; else to rank 0's exit)
    rank1_alive: bool  # when rank 0 ended
    rank1_alive_s: float | None  # how long rank 1 lived after the barrier's start (None: until rank 0 ended)

    @property
    def why(self) -> str:
        """Rank 0's words for the end: the exception (Gloo), else the tail of its stderr (NCCL's watchdog)."""
        if "TIMED-OUT " in self.out:
            return self.out.split("TIMED-OUT ")[1].splitlines()[0]
        return self.err[-3000:]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run(tmp_path: Path, env: dict[str, str], *, device: str, collective_s: float, delay_s: float,
        bound_s: float = 600.0) -> Outcome:
    """Start both ranks (rank 1 ``delay_s`` late), wait for rank 0 to end (at most ``bound_s``: a bound on a hang,
    not a speed test), kill rank 1."""
    from robocache.bench import messages
    from robocache.bench.context import LaunchTask, RunContext
    from tests.test_store import make_env

    run_ctx = RunContext.start(suite="multigpu", device=device, frontend="test", out_dir=tmp_path,
                               env=make_env("ci-mg"), git=("abc", False))
    lt = LaunchTask(task=run_ctx.task(), run=run_ctx, records_name="x-g2", cases=["a"], world_size=2,
                    workdir=str(tmp_path), collective_timeout_s=collective_s)
    messages.write_json(tmp_path / "task.json", lt)
    port = free_port()
    procs = []
    for r in (0, 1):
        e = {**env, "RANK": str(r), "LOCAL_RANK": str(r), "WORLD_SIZE": "2", "LOCAL_WORLD_SIZE": "2",
             "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port)}
        procs.append(subprocess.Popen([sys.executable, "-c", SCRIPT, str(tmp_path / "task.json"), str(delay_s),
                                       "3600"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=e,
                                      cwd=ROOT))
    ended = died = None
    try:
        deadline = time.monotonic() + bound_s
        while procs[0].poll() is None and time.monotonic() < deadline:
            if died is None and procs[1].poll() is not None:
                died = time.time()
            time.sleep(0.05)
        ended = time.time() if procs[0].poll() is not None else None
        alive = procs[1].poll() is None
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
        outs = [p.communicate() for p in procs]
    out, err = outs[0]
    took = lived = None
    start = float(out.split("BARRIER-START ")[1].split()[0]) if "BARRIER-START " in out else None
    if "TIMED-OUT " in out:
        took = float(out.split("TIMED-OUT ")[1].split()[0])
    elif start is not None and ended is not None:
        took = ended - start
    if died is not None and start is not None:
        lived = died - start
    return Outcome(procs[0].returncode, out, err, took, alive, lived)
