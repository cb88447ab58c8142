"""Multi-GPU benchmarks on the CPU: torchrun with Gloo processes stands in for NCCL ranks on GPUs.

The multi-rank path end to end (2 Gloo processes), the scaling arithmetic, a rank that dies mid-case, a
two-node rendezvous rehearsed on one machine (two launchers on loopback), the schema's versions 1 and 2, and
the asv/pytest-benchmark front ends on multi-GPU cases. Efficiency figures measured here are meaningless
(two processes share two CPU cores); that they are computed, and computed right, is what is tested.
"""
from __future__ import annotations

import json
import math
import os
import socket
import subprocess
import sys
import time
import uuid
from pathlib import Path

import committed
import late_rank
import pytest

from robocache.bench import frontend, specs, store, timing
from robocache.bench.multigpu import launch, scaling
from robocache.bench.schema import SCHEMA_VERSION, Record, parse_file_bytes
from tests.test_store import make_doc, make_env, make_record

ROOT = Path(__file__).resolve().parent.parent
FAST = ["--time-limit", "0.1", "--noise-target", "0.05"]

pytestmark = pytest.mark.skipif(not launch.available("cpu")[0], reason="torch.distributed with Gloo is missing")


# The launcher's grace after the collective timeout in the tests that reach it ($ROBOCACHE_LAUNCH_MARGIN_S; 30 s by
# default): which timeout fires, the records kept and the exit status do not depend on its length, only the wait.
MARGIN_S = 2.0

def _env(tmp_path: Path, **extra: str) -> dict[str, str]:
    """PYTHONPATH with the checkout and tests/ (the fault-injecting provider), a marker every descendant inherits."""
    path = os.pathsep.join([str(ROOT), str(ROOT / "tests")]
                           + ([os.environ["PYTHONPATH"]] if os.environ.get("PYTHONPATH") else []))
    return {**os.environ, "PYTHONPATH": path, "ROBOCACHE_MACHINE": "ci-multigpu", "ROBOCACHE_RESULTS":
            str(tmp_path / "records"), "ROBOCACHE_DEVICE": "cpu", "ROBOCACHE_TEST_MARK": uuid.uuid4().hex,
            launch.MARGIN_ENV: str(MARGIN_S), **extra}


def test_launch_margin_is_configurable_and_validated(monkeypatch):
    """The grace after the collective timeout: the keyword, else $ROBOCACHE_LAUNCH_MARGIN_S, else launch.MARGIN_S;
    anything but a finite number of seconds > 0 is refused in one line. The stuck-group rule uses the one given."""
    monkeypatch.delenv(launch.MARGIN_ENV, raising=False)
    assert launch.launch_margin_s() == launch.MARGIN_S == 30.0
    monkeypatch.setenv(launch.MARGIN_ENV, " 2.5 ")
    assert launch.launch_margin_s() == 2.5 and launch.launch_margin_s(4) == 4.0  # the keyword wins
    for bad in ("0", "-1", "nan", "inf", "soon"):
        monkeypatch.setenv(launch.MARGIN_ENV, bad)
        with pytest.raises(ValueError, match=rf"^\$ROBOCACHE_LAUNCH_MARGIN_S must be a number of seconds > 0, got {bad}$"):
            launch.launch_margin_s()
    for bad in (0, -2.0, math.nan, "x"):
        with pytest.raises(ValueError, match="^margin_s must be a number of seconds > 0"):
            launch.launch_margin_s(bad)
    # every case recorded, the group not gone: stopped once the collective timeout plus the margin has passed
    prog = launch.Progress(index=1, key="k", state="done", time=time.time() - 13.0)
    assert launch._stalled(prog, 20.0, k=2, n_cases=2, case_timeout_s=600, collective_timeout_s=10, margin_s=5) is None
    status, why = launch._stalled(prog, 20.0, k=2, n_cases=2, case_timeout_s=600, collective_timeout_s=10, margin_s=2)
    assert status is None and why.startswith("the group did not exit within 12 s after its last case")


def _cli(args: list[str], env: dict[str, str], timeout: float = 600) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "robocache.bench.cli", "run", "--suite", "multigpu", "--device", "cpu",
                           "--no-progress", *FAST, *args], capture_output=True, text=True, env=env, timeout=timeout,
                          cwd=ROOT)


def _leftovers(env: dict[str, str]) -> list[int]:
    return launch.processes_with_env("ROBOCACHE_TEST_MARK", env["ROBOCACHE_TEST_MARK"])


def _by_id(records: list[Record]) -> dict[str, Record]:
    return {f"{r.case.id}/{r.case.provider}": r for r in records}


# ---------------------------------------------------------------- the grid

def test_multigpu_grid():
    gpu = specs.cases("multigpu", device="gpu")
    assert 0 < len(gpu) <= 60 and len({c.key for c in gpu}) == len(gpu) and all(c.reason for c in gpu)
    assert {c.provider for c in gpu} == {"robocache"} and {c.world_size for c in gpu} == {1, 2, 4, 8, 16}
    for op in specs.OPS:
        for k in specs.MULTIGPU_COUNTS:
            mine = [c for c in gpu if c.op == op and c.world_size == k]
            assert {c.params["scaling"] for c in mine} == {"weak", "strong"}, (op, k)
    assert {c.params["gather"] for c in gpu if c.op == "resample"} == {"none", "all", "one"}
    c = specs.find("resample/B4096-S100-T50-D32-weak-g4-allgather/float32/robocache")
    assert (c.world_size, c.gpus, c.params["scaling"], c.params["gather"]) == (4, 4, "weak", "all")
    assert c.items == 4 * 4096 and c.bytes == 4 * specs.case_bytes("resample", {**c.params, "B": 4096}, "float32")
    assert c.baseline_key == "resample/B4096-S100-T50-D32-weak-g1-allgather/float32/robocache"
    strong = specs.find("resample/B32768-S100-T50-D32-strong-g8-gather/float32/robocache")
    assert strong.items == 32768 and strong.shard(7).items == 4096 and not strong.shard(7).distributed
    assert strong.shard(0).id != strong.shard(1).id  # every rank its own seeded inputs
    for c in gpu:  # every case's efficiency reference exists in the grid
        assert c.baseline_key is None or specs.find(c.baseline_key).world_size == 1
    cpu = specs.cases("multigpu", device="cpu")
    assert {c.provider for c in cpu} == {"numpy", "torch_eager"} and {c.world_size for c in cpu} == {1, 2}
    assert not {c.key for c in cpu} & {c.key for c in gpu}
    # the quick and nightly suites hold no multi-GPU point: every single-GPU point of theirs and nothing else,
    # each dtype with its suite's GPU providers that implement the op (nightly: every kernel version of the op;
    # quick: no kernel version, torch.compile on float32 only; sampled points: the public API and its peers) or,
    # for call-cost points, the dispatch ones
    from robocache import providers as table

    def provs(pt, dt, suite):
        if pt.params.get("kind") == "dispatch":
            names = specs.DISPATCH_PROVIDERS
        elif pt.params.get("kind") == "sampled":
            names = specs.SAMPLED_PROVIDERS
        elif suite == "quick":
            names = [p for p in specs.QUICK_GPU_PROVIDERS if not table.compile_mode(p) or dt == "float32"]
        else:
            names = specs.GPU_PROVIDERS
        return [p for p in names if pt.op in table.get(p).ops]

    for suite in ("quick", "nightly"):
        single = [pt for pt in specs.POINTS if suite in pt.suites and "multigpu" not in pt.suites
                  and "gpu" in pt.devices]
        want = sum(len(provs(pt, dt, suite)) for pt in single for dt in pt.dtypes)
        assert len(specs.cases(suite, device="gpu")) == want > 0, suite
    assert not any(c.distributed for s in ("quick", "nightly") for d in ("gpu", "cpu")
                   for c in specs.cases(s, device=d))
    assert specs.GRID_VERSION == 2  # tripwire: 2 = bytes are the inputs' minimum traffic (specs.moved_bytes)


# ---------------------------------------------------------------- (b) the arithmetic

def test_scaling_arithmetic():
    assert scaling.step_time_us([10.0, 12.5, 11.0]) == 12.5 and scaling.slowest_rank([10.0, 12.5, 12.5]) == 1
    # 4 ranks x 1000 items, the slowest rank 2 ms: 2e6 items/s (not the mean rank's 1.6e6)
    assert scaling.aggregate_items_per_s(4000, [1000.0, 1500.0, 2000.0, 1900.0]) == pytest.approx(2e6)
    # weak: 1 rank 1000 items in 1 ms (1e6/s); 4 ranks 4000 items in 1.25 ms (3.2e6/s): 3.2e6/4/1e6 = 0.8
    assert scaling.weak_efficiency(3.2e6, 4, 1e6) == pytest.approx(0.8)
    assert scaling.efficiency("weak", 4, step_us=1250.0, items=4000, baseline_step_us=1000.0,
                              baseline_items=1000) == pytest.approx(0.8)
    # strong: 8000 items in 8 ms on one rank, in 1.25 ms on 8 ranks: 8 / (8 x 1.25) = 0.8
    assert scaling.strong_efficiency(8000.0, 8, 1250.0) == pytest.approx(0.8)
    assert scaling.efficiency("strong", 8, step_us=1250.0, items=8000, baseline_step_us=8000.0,
                              baseline_items=8000) == pytest.approx(0.8)
    # both are aggregate(k) / (k aggregate(1)); superlinear is allowed (caches), never clipped
    assert scaling.strong_efficiency(1000.0, 2, 400.0) == pytest.approx(1.25)
    for s, items, base_items in (("weak", 2000, 1000), ("strong", 1000, 1000)):
        e = scaling.efficiency(s, 2, step_us=700.0, items=items, baseline_step_us=1000.0, baseline_items=base_items)
        agg_k, agg_1 = items / 700e-6, base_items / 1000e-6
        assert e == pytest.approx(agg_k / (2 * agg_1))
    assert scaling.efficiency("weak", 2, step_us=1.0, items=2, baseline_step_us=None, baseline_items=None) is None
    with pytest.raises(ValueError, match="weak scaling"):
        scaling.efficiency("weak", 2, step_us=1.0, items=3, baseline_step_us=1.0, baseline_items=1)
    with pytest.raises(ValueError, match="strong scaling"):
        scaling.efficiency("strong", 2, step_us=1.0, items=2, baseline_step_us=1.0, baseline_items=1)
    with pytest.raises(ValueError):
        scaling.step_time_us([])
    with pytest.raises(ValueError):
        scaling.aggregate_items_per_s(10, [0.0])
    # nccl-tests: 8 ranks gather 8 x 128 MiB in 10 ms: algbw 107.4 GB/s, busbw x 7/8
    algbw = scaling.algbw_gb_per_s(8 * 128 * 2**20, 10_000.0)
    assert algbw == pytest.approx(107.374, rel=1e-4)
    assert scaling.allgather_busbw_gb_per_s(algbw, 8) == pytest.approx(algbw * 7 / 8)
    assert scaling.allgather_busbw_gb_per_s(algbw, 1) == 0.0


def test_cases_chosen_for_every_gpu_count_up_to_two_8_gpu_machines():
    """The 8- and 16-GPU cases stay written and chosen right for any GPU count, without running them (no 8-GPU
    machine is lent): one machine of N GPUs runs every world size up to N (the rest not run, saying why), two
    8-GPU nodes run the 16-rank cases (node 0 adds their one-rank baselines)."""
    gpu = specs.cases("multigpu", device="gpu")
    for n in (1, 2, 3, 4, 8, 16):
        res = launch.MultiRunResult(run_id="x")
        got = launch.select_cases(gpu, res, gpus=n, nnodes=1, node_rank=0, baselines=None, add_baselines=True)
        assert {c.world_size for c in got} == {k for k in (1, 2, 4, 8, 16) if k <= n}, n
        assert [c.world_size for c in got] == sorted(c.world_size for c in got)  # the one-GPU cases first
        assert len(got) + len(res.not_run) == len(gpu)
        assert all(why == f"needs {next(c for c in gpu if c.key == key).world_size} GPUs, {n} here"
                   for key, why in res.not_run)
    eight = [c for c in gpu if c.world_size == 8]
    assert {c.op for c in eight} == set(specs.OPS) and all(c.gpus == 8 for c in eight)
    for node in (0, 1):
        res = launch.MultiRunResult(run_id="x")
        got = launch.select_cases(gpu, res, gpus=8, nnodes=2, node_rank=node, baselines=None, add_baselines=True)
        multi = [c for c in got if c.world_size == 16]
        assert multi and {c.op for c in multi} == {"resample"}
        assert {c.world_size for c in got} == ({1, 16} if node == 0 else {16})
        assert all(specs.find(c.baseline_key).world_size == 1 for c in multi)


def test_lockstep_timer_makes_exactly_the_planned_calls():
    calls = []
    t = timing.time_lockstep(lambda: calls.append(1), reps=3, samples=7, device="cpu", warmup_calls=2)
    assert len(calls) == 2 + 3 * 7 and len(t.samples_us) == 7 and t.timer == "host" and t.reps_per_sample == 3
    # one plan for every rank: samples of ~1 ms, as many as the budget holds, within [10, 200]
    assert timing.lockstep_plan(1e-4, time_limit_s=0.5) == (10, 200)
    assert timing.lockstep_plan(0.1, time_limit_s=0.5) == (1, 10)
    assert timing.lockstep_plan(1e-3, time_limit_s=0.05) == (1, 50)


def test_root_cause_and_who_died():
    log = ("Failures:\n[1]:\n  rank      : 0 (local_rank: 0)\n  exitcode  : -15 (pid: 11)\n"
           "Root Cause (first observed failure):\n[0]:\n  time      : x\n  host      : h\n"
           "  rank      : 1 (local_rank: 1)\n  exitcode  : 1 (pid: 12)\n")
    assert launch.root_cause(log) == "rank 1 (local rank 1) exited with code 1"
    got = launch.who_died(log, [0, 1], {0: "RuntimeError: Connection closed by peer"})
    assert got.startswith("rank 1 died without reporting an error (exit code 1)") and "rank 0: RuntimeError" in got
    assert "killed by SIGKILL" in launch.who_died(log.replace("exitcode  : 1", "exitcode  : -9"), [1], {})


# ---------------------------------------------------------------- (a) the multi-rank path end to end

def test_cli_multigpu_run_with_a_dead_rank_and_a_group_stuck_at_exit(tmp_path):
    """The multi-rank path end to end through the CLI, and two faults of the launch, in one run (each torchrun
    launch and rank start is seconds of torch import: the faults' own run cost 42 CPU-s, the plain run's 33, and
    together they launch 3 groups instead of 5):

    - every resample case on numpy at 1 and 2 Gloo processes: records, efficiency against the one-process case of
      the same run, honest bytes, and `report` reads the run;
    - rank 1 calls os._exit(1) mid-case: that case is recorded as crash (the reason names the rank, no metrics,
      no aggregate), the run goes on with the next case, exits 1, and no process of the run is left;
    - rank 1 hangs at exit after the last case: the launcher stops the group within the collective timeout plus
      the margin after that case and keeps its (complete) records."""
    env = _env(tmp_path)
    # every collective of a case (and the final barrier, which rank 0 reaches only after writing the records) is
    # under this timeout: 5 s was less than a loaded machine can keep one rank behind the other (a stalled fsync,
    # a rank off the cores), which made the stuck case a crash (issue 16)
    timeout = 20
    dying = "resample/B64-S100-T50-D32-weak-g2-nogather/float32/fault_providers:DIE_RANK1"
    after = "resample/B64-S100-T50-D32-weak-g2-allgather/float32/numpy"
    stuck = "resample/B64-S100-T50-D32-weak-g2-nogather/float32/fault_providers:HANG_AT_EXIT_RANK1"
    plain = [c.key for c in specs.cases("multigpu", device="cpu", ops=["resample"], providers=["numpy"])]
    assert len(plain) == 12 and after in plain
    # the order of --cases is the run's within a world size: the dying case first, the next one after it, the stuck
    # one last (it hangs after the group's last case)
    order = [dying, after, *[k for k in plain if k != after], stuck]
    t0 = time.monotonic()
    run = _cli(["--gpus", "2", "--collective-timeout", str(timeout), "--cases", ",".join(order),
                "--out", str(tmp_path / "out")], env, timeout=2 * (timeout + launch.MARGIN_S) + 600)
    wall = time.monotonic() - t0
    print(f"\n{wall:.1f} s\n{run.stdout}\n{run.stderr[-2000:]}")
    assert run.returncode == 1, run.stdout + run.stderr
    # No wall-clock assertion (CI shares its machine): a launcher that did not stop the group would hang into the
    # subprocess timeout above and fail there; exit 1 with the crash recorded, and the stop message below, are the
    # launcher's own stops.
    assert "FAILED" in run.stdout and "crash 1, ok 15" in run.stdout and "efficiency" in run.stdout
    assert "did not exit within" in run.stdout and "records are complete" in run.stdout
    assert not _leftovers(env)
    loaded = store.load(tmp_path / "out")
    assert loaded.bad == [] and len(loaded.records) == 16  # 12 numpy, the two faults and their one-process cases
    assert len({r.run_id for r in loaded.records}) == 1  # one run, one file per world size
    assert len({r.source for r in loaded.records}) == 2
    every = _by_id(loaded.records)
    # the faults
    dead = every["resample/B64-S100-T50-D32-weak-g2-nogather/fault_providers:DIE_RANK1"]
    assert dead.status == "crash" and "rank 1 died" in dead.reason and "during the case" in dead.reason
    assert dead.metrics is None and dead.method is None and dead.distributed is None
    nxt = every["resample/B64-S100-T50-D32-weak-g2-allgather/numpy"]
    assert nxt.status == "ok" and nxt.distributed.efficiency is not None
    assert every["resample/B64-S100-T50-D32-weak-g1-nogather/fault_providers:DIE_RANK1"].status == "ok"
    assert every[stuck.replace("/float32", "")].status == "ok"
    # the plain cases, measured around the faults
    recs = {k: r for k, r in every.items() if k.endswith("/numpy")}
    assert len(recs) == 12
    for key, r in recs.items():
        d = r.distributed
        k = r.case.params["world_size"]
        assert r.status == "ok" and r.suite == "multigpu" and r.env.device == "cpu"
        assert d.backend == "gloo" and d.world_size == k and d.nodes == 1
        assert len(d.per_rank_us) == len(d.per_rank_step_us) == len(d.items_per_rank) == k
        assert d.step_us == max(d.per_rank_step_us) == r.metrics.time_us.p50
        assert d.aggregate_items_per_s == pytest.approx(r.case.items / (d.step_us * 1e-6))
        assert r.metrics.items_per_s == d.aggregate_items_per_s
        assert r.check.passed and r.method.timer == "host"
        # honest bytes: every rank's shard's minimum traffic summed, never above the params-only bound
        case = specs.find(f"{r.case.id}/{r.case.dtype}/{r.case.provider}")
        moved = sum(specs.moved_bytes(case.shard(i), specs.host_inputs(case.shard(i), 0)) for i in range(k))
        assert r.case.bytes == moved <= case.bytes
        assert r.metrics.gb_per_s == pytest.approx(moved / (d.step_us * 1e-6) / 1e9)
        if r.case.params["gather"] == "none":
            assert d.gather_us is None and d.collective_gb_per_s is None
        else:
            assert d.gather_bytes == k * r.case.params["B_rank"] * 50 * 32 * 4
            assert d.gather_gb_per_s == pytest.approx(d.gather_bytes / (d.gather_us * 1e-6) / 1e9)
            assert d.collective_busbw_gb_per_s == pytest.approx(d.collective_gb_per_s * (k - 1) / k)
        if k == 1:
            assert d.efficiency == 1.0
            continue
        # efficiency against the one-process case of the same run
        base = recs[key.replace("-g2-", "-g1-")]
        assert base.run_id == r.run_id and d.baseline_step_us == base.distributed.step_us
        agg1 = base.distributed.aggregate_items_per_s
        assert d.efficiency == pytest.approx(d.aggregate_items_per_s / (2 * agg1))
        if r.case.params["scaling"] == "strong":
            assert d.efficiency == pytest.approx(base.distributed.step_us / (2 * d.step_us))
        else:
            assert d.items_per_rank == base.distributed.items_per_rank * 2
    assert not _leftovers(env)
    # show and report read the run
    rep = subprocess.run([sys.executable, "-m", "robocache.bench.cli", "report", str(tmp_path / "out")],
                         capture_output=True, text=True, env=env, timeout=120, cwd=ROOT)
    assert rep.returncode == 0 and "## Multi-GPU scaling" in rep.stdout


def test_other_ops_and_torch_provider_in_process(tmp_path):
    """fuse and voxelize (int32 counts gathered as bytes) with torch eager, without their one-rank cases: no
    efficiency (None, not a guess), everything else measured."""
    cases = [specs.find("fuse/robot-B8-T100-weak-g2-allgather/float32/torch_eager"),
             specs.find("voxelize/B2-N10000-G32-count-uniform-strong-g2-allgather/float32/torch_eager")]
    res = launch.run_multigpu(cases, device="cpu", gpus=2, out_dir=tmp_path, timing={"time_limit_s": 0.1,
                              "noise_target": 0.05}, machine="ci-multigpu", add_baselines=False)
    assert res.counts() == {"ok": 2}, [(r.case.id, r.status, r.reason) for r in res.records]
    assert [x["world_size"] for x in res.launches] == [2] and res.launches[0]["rc"] == 0
    for r in res.records:
        d = r.distributed
        assert d.efficiency is None and d.baseline_step_us is None
        assert d.gather_gb_per_s > 0 and d.collective_busbw_gb_per_s > 0 and len(d.per_rank_us) == 2
    vox = next(r for r in res.records if r.case.op == "voxelize")
    assert vox.distributed.gather_bytes == 2 * 32**3 * 4  # one int32 grid per rank
    assert set(res.samples) == {c.key for c in cases}
    assert store.load(tmp_path).bad == []


# ---------------------------------------------------------------- (c) a rank that dies

def test_sigterm_to_the_launcher_stops_the_ranks(tmp_path):
    """SIGTERM to robocache-bench while its ranks hang in a case: exit 143 at once, no process left behind."""
    env = _env(tmp_path)
    case = "resample/B64-S100-T50-D32-weak-g2-nogather/float32/fault_providers:HANG"
    proc = subprocess.Popen([sys.executable, "-m", "robocache.bench.cli", "run", "--suite", "multigpu", "--device",
                             "cpu", "--no-progress", *FAST, "--gpus", "2", "--cases", case,
                             "--out", str(tmp_path / "out")], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, env=env, cwd=ROOT)
    # the bounds below are on a hang, not speed tests: each wait ends as soon as its condition holds, and a loaded
    # machine may take minutes to start torch in three processes (issue 16)
    try:
        deadline = time.monotonic() + 600
        while time.monotonic() < deadline and len(_leftovers(env)) < 3:  # torchrun and its 2 ranks
            time.sleep(0.5)
        assert len(_leftovers(env)) >= 3, "the launch did not start"
        proc.terminate()
        out, err = proc.communicate(timeout=300)  # "at once": GRACE_S for torchrun, then SIGKILL
    finally:
        if proc.poll() is None:
            proc.kill()
    print(out, err[-2000:])
    assert proc.returncode == 143, (out, err)
    assert "SIGTERM" in err and "stopped" in err
    deadline = time.monotonic() + 120  # killed processes may take a moment to go on a loaded machine
    while _leftovers(env) and time.monotonic() < deadline:
        time.sleep(0.5)
    assert not _leftovers(env)


def test_a_slow_start_is_waited_for_and_a_hung_peer_still_times_out(tmp_path):
    """Rank 1 starts 8 s after rank 0 with a 3 s collective timeout: the start waits for it (rank.STARTUP_TIMEOUT_S;
    a 5 s timeout failed CI that way while a peer imported torch), and then a collective that rank 1 never joins
    still fails on rank 0 after about the collective timeout, not the start's (tests/late_rank.py; its NCCL twin
    is tests/gpu/test_multigpu_gpu.py::test_nccl_late_rank_is_waited_for_and_a_hung_rank_times_out)."""
    from robocache.bench.multigpu import rank

    if rank._timeout_setter() is None:
        pytest.skip("this torch cannot change a group's timeout: the collective timeout holds from the start")
    coll, delay = 3.0, 8.0
    got = late_rank.run(tmp_path, _env(tmp_path), device="cpu", collective_s=coll, delay_s=delay)
    print(got.out, got.err[-2000:])
    # rank 1 still alive: rank 0's barrier ended on its timeout, not because rank 1's socket closed
    assert got.rank1_alive, "rank 1 exited: the barrier's end says nothing of the timeout"
    assert got.rc == 0, got.err[-3000:]  # the start did not time out after 3 s
    assert "BARRIER-RETURNED" not in got.out and "TIMED-OUT " in got.out
    # not before the collective timeout (a lower bound: a load cannot make a timeout fire early) ...
    assert got.took_s is not None and got.took_s >= coll * 0.8, got.took_s
    why = got.why.lower()
    assert "timed out" in why or "timeout" in why, why  # Gloo's own words: a timeout, not a closed connection
    # ... and the timeout that fired is the collective one (3 s), not the start's (rank.STARTUP_TIMEOUT_S): Gloo
    # names the one it waited, "Timed out waiting 3000ms for recv", whatever the load (no wall-time bound here)
    assert f"waiting {coll * 1000:.0f}ms" in why, why


# ---------------------------------------------------------------- (d) two nodes, rehearsed on loopback

def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_two_node_rendezvous_on_loopback(tmp_path):
    """Two launchers (node ranks 0 and 1, one process each) meet at a c10d rendezvous on 127.0.0.1 and form
    one world of 2; node 0 also runs the one-process baseline, and writes the only record set."""
    env = _env(tmp_path)
    cases = "resample/B64-S100-T50-D32-weak-g2-allgather/float32/numpy,resample/B128-S100-T50-D32-strong-g2-nogather/" \
            "float32/numpy"
    common = ["--gpus", "1", "--nnodes", "2", "--rdzv-endpoint", f"127.0.0.1:{_free_port()}",
              "--rdzv-id", f"ci-{uuid.uuid4().hex[:8]}", "--collective-timeout", "60", "--cases", cases]
    cmd = [sys.executable, "-m", "robocache.bench.cli", "run", "--suite", "multigpu", "--device", "cpu",
           "--no-progress", *FAST, *common]
    t0 = time.monotonic()
    nodes = [subprocess.Popen(cmd + ["--node-rank", str(i), "--out", str(tmp_path / f"node{i}")], env=env, cwd=ROOT,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for i in (0, 1)]
    try:  # a bound on a hang for both nodes together (a loaded machine is many times slower), not a speed test
        outs = [p.communicate(timeout=max(1.0, t0 + 900 - time.monotonic())) for p in nodes]
    finally:
        for p in nodes:  # SIGTERM first: a launcher stops its own torchrun on it
            if p.poll() is None:
                p.terminate()
                try:
                    p.communicate(timeout=60)
                except subprocess.TimeoutExpired:
                    p.kill()
                    p.communicate()
    print(f"\n{time.monotonic() - t0:.1f} s\n" + "\n".join(o + e[-1500:] for o, e in outs))
    assert [p.returncode for p in nodes] == [0, 0]
    assert "records are written on the node with --node-rank 0" in outs[1][0]
    # node 1 writes no record (its --out folder is created and probed by the output check before any work)
    assert not [f for f in (tmp_path / "node1").rglob("*") if f.is_file()]
    loaded = store.load(tmp_path / "node0")
    assert loaded.bad == [] and len(loaded.records) == 4
    assert len({r.run_id for r in loaded.records}) == 1
    two = [r for r in loaded.records if r.distributed.world_size == 2]
    assert len(two) == 2
    for r in two:
        d = r.distributed
        assert d.nodes == 2 and len(d.per_rank_us) == 2 and d.efficiency is not None
    assert not _leftovers(env)


# ---------------------------------------------------------------- (e) schema versions 1 and 2

def _multigpu_record() -> dict:
    r = make_record(7)
    r["suite"] = "multigpu"
    r["distributed"] = {
        "world_size": 2, "nodes": 1, "backend": "gloo", "scaling": "weak", "gather": "all",
        "items_per_rank": [128, 128],
        "per_rank_us": [10.0, 11.0], "per_rank_step_us": [12.0, 12.5], "step_us": 12.5,
        "aggregate_items_per_s": 256 / 12.5e-6, "efficiency": 0.9, "baseline_step_us": 11.25, "gather_bytes": 4096,
        "gather_us": 2.0, "gather_gb_per_s": 2.048, "collective_us": 1.5, "collective_gb_per_s": 2.73,
        "collective_busbw_gb_per_s": 1.365}
    return r


def test_schema_v1_loads_and_multigpu_round_trips(tmp_path):
    assert SCHEMA_VERSION == 3  # tripwire: 2 added the distributed section, 3 timer host_loop and dispatch
    v1 = tmp_path / "old.records.json"
    v1.write_text(json.dumps(make_doc(3)))  # a file as robocache-bench wrote it before version 2
    got = store.load(v1)
    assert got.bad == [] and len(got.records) == 3 and all(r.distributed is None for r in got.records)
    assert "distributed" not in store.to_plain(got.records[0])  # omitted when None: v1 records stay as they were
    # the current version: written with the distributed section, read back identical
    recs = [make_record(1), _multigpu_record()]
    path = store.write_records(tmp_path / "new", make_env(), recs, name="v2")
    assert json.loads(path.read_text())["schema_version"] == SCHEMA_VERSION
    back = store.load(path)
    assert back.bad == [] and [store.to_plain(r) for r in back.records] == recs
    # loaded v1 records can be written again (as the current version)
    again = store.write_records(tmp_path / "again", make_env(), got.records, name="again")
    assert store.load(again).bad == []
    # a version-1 file cannot carry what version 2 added; a newer version is reported as such
    bad = make_doc(1)
    bad["records"][0]["distributed"] = _multigpu_record()["distributed"]
    with pytest.raises(Exception, match="unknown field `distributed`"):
        parse_file_bytes(json.dumps(bad).encode())
    with pytest.raises(Exception, match="newer"):
        parse_file_bytes(json.dumps(make_doc(1, schema_version=SCHEMA_VERSION + 1)).encode())
    # a distributed section must be whole and finite
    broken = _multigpu_record()
    broken["distributed"]["efficiency"] = math.inf
    with pytest.raises(ValueError, match="distributed.efficiency"):  # the schema's SchemaError
        store.write_records(tmp_path / "x", make_env(), [broken], name="x")


def test_gather_checksum_sees_changed_and_moved_bytes():
    import torch

    from robocache.bench.multigpu import rank as distributed

    # several chunks and a tail, positions past the weights' modulus (65521): chunks of 64 KiB instead of the
    # 16 MiB a rank uses (the same loop; 48 MiB four times was 33 s of the rest tier)
    chunk = 1 << 16
    x = torch.randint(0, 256, (3 * chunk + 5,), dtype=torch.uint8)
    base = distributed._checksum(x, chunk)
    assert base == distributed._checksum(x.clone(), chunk) == distributed._checksum(x)  # the chunks do not matter
    swapped = x.clone()
    i = int(torch.nonzero(swapped[:-1] != swapped[1:])[0])  # two different neighbours
    swapped[i], swapped[i + 1] = x[i + 1].item(), x[i].item()
    changed = x.clone()
    changed[-1] ^= 1
    assert distributed._checksum(swapped, chunk) != base and distributed._checksum(changed, chunk) != base
    assert distributed._checksum(x[:-1], chunk) != base


def test_report_marks_host_bound_steps():
    from robocache.bench.views.multigpu import multigpu as table
    from tests import typed

    def multigpu(recs):  # the view reads typed records (issue 28): the dict built here, typed
        return table(typed.records(recs))

    r = _multigpu_record()
    r["case"]["params"] = {**r["case"]["params"], "world_size": 2, "scaling": "weak", "gather": "all"}
    r["health"] = {"throttled": False, "contended": False, "noisy": False, "reasons": []}
    assert "host-bound" not in multigpu([r]).splitlines()[-1]
    r["health"]["reasons"] = ["rank 1: host-bound: enqueueing op + gather took 120.0 of the step's 125.0 us per call"]
    assert multigpu([r]).splitlines()[-1].endswith("| host-bound |")
    r["health"]["reasons"] = ["efficiency against a host-bound one-GPU step (90.0 us, paced by the host's launches)"]
    assert multigpu([r]).splitlines()[-1].endswith("| host-bound baseline |")
    r["health"]["reasons"].append("rank 0: host-bound: enqueueing op + gather took 120.0 of the step's 125.0 us")
    assert multigpu([r]).splitlines()[-1].endswith("| host-bound,host-bound baseline |")


def test_committed_results_still_load():
    loaded = committed.load()
    assert loaded.bad == [] and loaded.records
    versions = {json.loads(Path(p).read_bytes())["schema_version"] for p in {r.source for r in loaded.records}}
    assert versions <= set(range(1, SCHEMA_VERSION + 1))  # every version a reader still accepts


# ---------------------------------------------------------------- front ends

def test_frontends_skip_multigpu_cases_without_enough_gpus(monkeypatch, tmp_path):
    monkeypatch.setenv("ROBOCACHE_RESULTS", str(tmp_path))
    monkeypatch.setenv("ROBOCACHE_DEVICE", "gpu")
    monkeypatch.setenv("ROBOCACHE_GPUS", "1")
    monkeypatch.setenv("ASV_COMMIT", uuid.uuid4().hex)  # a fresh asv session (its cache holds the skip)
    monkeypatch.setattr(launch, "available", lambda device: (True, ""))
    frontend.device_here.cache_clear()
    launch.gpu_count.cache_clear()
    try:
        from benchmarks import common

        monkeypatch.setenv("ROBOCACHE_SUITE", "multigpu")

        class ResampleMultiGPU(common.MultiGPUTime):
            op = "resample"

        with pytest.raises(NotImplementedError, match="needs 2 GPUs; 1 present"):
            ResampleMultiGPU().setup("B4096-S100-T50-D32-weak-g2-allgather", "float32", "robocache")
        with pytest.raises(frontend.Unavailable, match="needs 8 GPUs"):
            frontend.measure("voxelize/B4-N100000-G64-count-uniform-weak-g8-nogather/float32/robocache",
                             frontend.Session("pytest-benchmark", uuid.uuid4().hex))
        monkeypatch.setattr(launch, "available", lambda device: (False, "this torch build has no NCCL backend"))
        with pytest.raises(frontend.Unavailable, match="no NCCL"):
            frontend.measure("resample/B4096-S100-T50-D32-weak-g1-nogather/float32/robocache",
                             frontend.Session("pytest-benchmark", uuid.uuid4().hex))
    finally:
        frontend.device_here.cache_clear()
        launch.gpu_count.cache_clear()


def test_asv_multigpu_benchmarks_run_only_in_the_multigpu_suite(monkeypatch):
    """``<Op>MultiGPU`` always exists with the same params (asv's benchmarks.json never depends on the suite: see
    tests/test_frontends.py); outside ``ROBOCACHE_SUITE=multigpu`` its cases skip, and `asv check` passes."""
    from benchmarks import common

    class ResampleMultiGPU(common.MultiGPUTime):
        op = "resample"

    monkeypatch.setenv("ROBOCACHE_DEVICE", "cpu")
    monkeypatch.delenv("ROBOCACHE_PROVIDERS", raising=False)
    frontend.device_here.cache_clear()
    try:
        keys = common.grid_keys("resample", "multigpu")
        assert keys == {c.key for d in ("gpu", "cpu") for c in specs.cases("multigpu", device=d, ops=["resample"])}
        tag, dtype, prov = sorted(k for k in keys if k.endswith("/numpy"))[0].split("/")[1:]
        monkeypatch.setenv("ROBOCACHE_SUITE", "nightly")
        with pytest.raises(NotImplementedError, match="runs in the multigpu suite"):
            ResampleMultiGPU().setup(tag, dtype, prov)
    finally:
        frontend.device_here.cache_clear()
    chk = subprocess.run([sys.executable, "-m", "asv", "check", "--python=same"], capture_output=True, text=True,
                         env={**os.environ, "ROBOCACHE_SUITE": "multigpu", "ROBOCACHE_DEVICE": "cpu"}, timeout=300,
                         cwd=ROOT)
    assert chk.returncode == 0 and "No problems found" in chk.stdout, chk.stdout[-2000:] + chk.stderr[-2000:]


def test_asv_multigpu_benchmark_in_process(monkeypatch, tmp_path):
    """asv's setup on a one-process case: one torchrun launch, its step samples replayed as asv's samples; a
    second benchmark of the same asv invocation reuses the record (no second launch)."""
    from benchmarks import common

    class ResampleMultiGPU(common.MultiGPUTime):
        op = "resample"

    monkeypatch.setenv("ROBOCACHE_RESULTS", str(tmp_path))
    monkeypatch.setenv("ROBOCACHE_DEVICE", "cpu")
    monkeypatch.setenv("ROBOCACHE_SUITE", "multigpu")
    monkeypatch.setenv("ASV_COMMIT", uuid.uuid4().hex)  # a fresh asv session
    monkeypatch.setattr(frontend, "FRONTEND_TIMING", {"time_limit_s": 0.1, "noise_target": 0.05})
    frontend.device_here.cache_clear()
    try:
        args = ("B64-S100-T50-D32-weak-g1-allgather", "float32", "numpy")
        bench = ResampleMultiGPU()
        bench.setup(*args)
        n = bench.repeat[0]
        assert n == bench.rec.method.samples and bench.rec.distributed.world_size == 1
        t0 = common.CLOCK()
        bench.time_step(*args)
        assert common.CLOCK() > t0
        again = ResampleMultiGPU()
        again.setup(*args)  # the same asv invocation: the cached record, no second launch
        assert again.rec == bench.rec
        recs = store.load(tmp_path).records
        assert len(recs) == 1 and recs[0].frontend == "asv" and recs[0].distributed.world_size == 1
    finally:
        frontend.device_here.cache_clear()


def test_pytest_benchmark_runs_a_multigpu_case(tmp_path):
    """pytest-benchmark on a 2-process case: torchrun underneath, the slowest rank's step samples saved as the
    benchmark's stats, the record (and its one-process baseline, measured first) in our store."""
    env = _env(tmp_path, ROBOCACHE_SUITE="multigpu", ROBOCACHE_PROVIDERS="numpy", ROBOCACHE_TIME_LIMIT="0.1")
    storage = tmp_path / "pytest"
    run = subprocess.run([sys.executable, "-m", "pytest", str(ROOT / "benchmarks"), "-q", "-p", "no:cacheprovider",
                          "-k", "resample and B128 and strong and g2 and allgather", "--benchmark-save=multigpu",
                          f"--benchmark-storage=file://{storage}"], env=env, capture_output=True, text=True,
                         timeout=600, cwd=ROOT)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-2000:]
    (saved,) = storage.rglob("*multigpu.json")
    (bench,) = json.loads(saved.read_text())["benchmarks"]
    recs = {r.case.id: r for r in store.load(tmp_path / "records").records}
    rec = recs["resample/B128-S100-T50-D32-strong-g2-allgather"]
    assert "resample/B128-S100-T50-D32-strong-g1-allgather" in recs  # the baseline, same session
    assert rec.frontend == "pytest-benchmark" and rec.distributed.efficiency is not None
    assert bench["extra_info"]["world_size"] == 2 and bench["extra_info"]["backend"] == "gloo"
    assert bench["stats"]["rounds"] == rec.method.samples
    assert abs(bench["stats"]["median"] * 1e6 - rec.metrics.time_us.p50) < 1e-3
    assert not _leftovers(env)
