"""The multi-GPU path on NCCL (skipped without a GPU; the 2-rank test needs two GPUs).

The same launcher as ``robocache-bench run --suite multigpu``: torchrun, one process per GPU, NCCL. Short
sampling: these tests check that the path works and its figures hang together; the suite's own run
(``scripts/gpu_check.sh OUT multigpu``) measures.
"""
from __future__ import annotations

import pytest

from robocache.bench import env, specs, store
from robocache.bench.multigpu import launch

FAST = {"time_limit_s": 0.2}


def _need(n: int) -> None:
    ok, why = launch.available("gpu")
    if not ok:
        pytest.skip(why)
    have = launch.gpu_count()
    if have < n:
        pytest.skip(f"needs {n} GPUs; {have} present")


def _processes_on(gpu: int) -> int | None:
    """How many processes hold a context on CUDA device ``gpu`` now (NVML), None when NVML cannot say.

    In a whole-suite run the test process itself has one on the GPUs earlier tests used: for the ranks it
    is honestly "another process" on their GPU, so the health check may say so, but never count a peer rank.
    """
    nv, _ = env.nvml()
    if nv is None:
        return None
    try:
        procs = nv.nvmlDeviceGetComputeRunningProcesses(env._handle(nv, gpu))
    except Exception:  # noqa: BLE001 - NVML cannot list processes here
        return None
    return len({p.pid for p in procs})


def test_one_rank_nccl(tmp_path):
    _need(1)
    case = specs.find("resample/B4096-S100-T50-D32-weak-g1-allgather/float32/robocache")
    res = launch.run_multigpu([case], device="gpu", gpus=1, out_dir=tmp_path, timing=FAST, machine="gpu-test")
    (rec,) = res.records
    assert rec.status == "ok", rec.reason
    d = rec.distributed
    assert d.backend == "nccl" and d.world_size == 1 and d.efficiency == 1.0
    assert rec.method.timer == "cuda_event" and d.gather_gb_per_s > 0
    assert store.load(tmp_path).bad == []


def test_two_ranks_nccl_weak_and_strong(tmp_path):
    _need(2)
    cases = [specs.find("resample/B4096-S100-T50-D32-weak-g2-allgather/float32/robocache"),
             specs.find("voxelize/B32-N100000-G64-count-uniform-strong-g2-nogather/float32/robocache"),
             specs.find("fuse/robot-B256-T100-weak-g2-allgather/float32/robocache")]
    before = {g: _processes_on(g) for g in range(2)}
    res = launch.run_multigpu(cases, device="gpu", gpus=2, out_dir=tmp_path, timing=FAST, machine="gpu-test")
    assert res.counts() == {"ok": 6}, [(r.case.id, r.status, r.reason) for r in res.records]
    assert store.load(tmp_path).bad == []
    for r in res.records:
        d = r.distributed
        print(f"\n{r.case.id}: step {d.step_us:.1f} us, per rank {d.per_rank_us}, efficiency "
              f"{d.efficiency:.3f}, gather {d.gather_gb_per_s}, all_gather busbw {d.collective_busbw_gb_per_s}")
        assert d.backend == "nccl" and len(d.per_rank_us) == d.world_size
        # the peer rank is not "another process": only processes that were on the GPU before the launch count
        for rank in range(d.world_size):
            said = [x for x in r.health.reasons if x.startswith(f"rank {rank}: contended")]
            if before[rank] is not None:
                want = [f"rank {rank}: contended: {before[rank]} other process{'es' if before[rank] != 1 else ''} "
                        "on the GPU"] if before[rank] else []
                assert said == want, (r.health.reasons, before)
        if d.world_size == 2:
            assert d.efficiency is not None and d.efficiency > 0
            if d.gather != "none":
                assert d.collective_busbw_gb_per_s == pytest.approx(d.collective_gb_per_s / 2)


def test_nccl_late_rank_is_waited_for_and_a_hung_rank_times_out(tmp_path):
    """The rank start timeout on NCCL (issue 30): rank 1 starts 20 s after rank 0 with a 5 s collective timeout;
    the start waits for it (``rank.STARTUP_TIMEOUT_S``: the rendezvous, the communicator bound eagerly to the
    GPU, the ranks' agreement), then ``_set_pg_timeout`` lowers the NCCL group's timeout and a barrier rank 1
    never joins ends rank 0 after about 5 s (NCCL's watchdog aborts the communicator; by default the process
    ends), not 300 s. The same script as the Gloo test in tests/test_distributed.py (tests/late_rank.py)."""
    import os

    import late_rank

    from robocache.bench.multigpu import rank

    _need(2)
    if rank._timeout_setter() is None:
        pytest.skip("this torch cannot change a group's timeout (no _set_pg_timeout): the collective timeout "
                    "holds from the start")
    coll, delay = 5.0, 20.0
    env = {**launch.child_env(), "PYTHONPATH": os.pathsep.join(
        [str(late_rank.ROOT), str(late_rank.ROOT / "tests"), *filter(None, [os.environ.get("PYTHONPATH")])])}
    got = late_rank.run(tmp_path, env, device="gpu", collective_s=coll, delay_s=delay)
    print(f"\nrank 0 exit {got.rc}, barrier to end {got.took_s} s, rank 1 alive {got.rank1_alive} "
          f"(lived {got.rank1_alive_s} s past the barrier's start)\n{got.out}\n"
          f"{got.err[-3000:]}")
    # the late start was waited for: rank 0 reached the barrier (its start did not time out after 5 s)
    assert "BARRIER-START " in got.out, got.err[-3000:]
    # rank 1 still alive when rank 0's timeout came due: the end was the timeout, not a peer's exit (NCCL may
    # end rank 1 afterwards: a rank that timed out signals the others through the store to dump their traces)
    assert got.rank1_alive or (got.rank1_alive_s is not None and got.rank1_alive_s >= 0.8 * coll), (
        "rank 1 exited before the timeout: the barrier's end says nothing of it", got.rank1_alive_s)
    # not before the collective timeout (a lower bound: a load cannot make a timeout fire early) ...
    assert got.took_s is not None and got.took_s >= coll * 0.8, got.took_s
    said = (got.out + got.err).lower()
    assert "timeout" in said or "timed out" in said, got.why
    # ... and the timeout that fired is the lowered collective one (5 s), not the start's: NCCL's watchdog names
    # the work's timeout ("WorkNCCL(SeqNum=.., OpType=BARRIER, .., Timeout(ms)=5000) ran for .. milliseconds"),
    # whatever the load (no wall-time bound here)
    assert f"timeout(ms)={coll * 1000:.0f})" in said, got.why
