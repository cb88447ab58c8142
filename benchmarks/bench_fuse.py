"""asv benchmarks: robocache.fuse and its peers, over the harness's grid (robocache.bench.specs).

Cases come from the grid (suite ``ROBOCACHE_SUITE``, default nightly; wall time over the quick suite),
so asv holds no case list of its own. ``Fuse`` reports the harness's device time (us) and bandwidth
(GB/s), ``FuseCeiling`` the % of the copy ceiling measured in the same run; ``FuseWall`` times one call end to end with the GPU
synchronized (quick suite, robocache and torch.compile: ``frontend.WALL_PROVIDERS``). Without a GPU the GPU-only cases raise NotImplementedError in setup (asv: skipped).
``FuseCallCost`` (GPU): the call-cost cases' host time per tiny call (``track_host_us``) and device time
per call beside it; they never feed ``Fuse`` or ``FuseCeiling``, whose figures are device times.
With ``ROBOCACHE_SUITE=multigpu`` the classes above carry the multi-GPU cases (device time = the group's step),
and ``FuseMultiGPU`` (aggregate throughput, scaling efficiency) and ``FuseGather`` (the gather's bandwidth next
to the collective's own) exist; each case runs through torchrun, skipped with fewer GPUs than it needs.
"""
from robocache.bench import frontend as F

F.preload_gpu_libraries()


class Fuse(F.DeviceBenchmark):
    params = [F.device_cases("fuse")]


class FuseCeiling(F.CeilingBenchmark):
    params = [F.device_cases("fuse")]


class FuseWall(F.WallBenchmark):
    params = [F.wall_cases("fuse")]


if F.dispatch_cases("fuse"):  # call cost: GPU only (a class with no case would be an empty asv benchmark)
    class FuseCallCost(F.CallCostBenchmark):
        params = [F.dispatch_cases("fuse")]


if F.multigpu_suite():  # not in the quick/nightly asv passes (see frontend.multigpu_suite)
    class FuseMultiGPU(F.MultiGPUBenchmark):
        params = [F.suite_cases("fuse")]

    class FuseGather(F.GatherBenchmark):
        params = [F.gather_cases("fuse")]
