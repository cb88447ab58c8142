"""asv benchmarks: robocache.resample and its peers, over the harness's grid (robocache.bench.specs).

Cases come from the grid (suite ``ROBOCACHE_SUITE``, default nightly; wall time over the quick suite),
so asv holds no case list of its own. ``Resample`` reports the harness's device time (us) and bandwidth
(GB/s), ``ResampleCeiling`` the % of the copy ceiling measured in the same run; ``ResampleWall`` times one call end to end with the GPU
synchronized (quick suite, robocache and torch.compile: ``frontend.WALL_PROVIDERS``). Without a GPU the GPU-only cases raise NotImplementedError in setup (asv: skipped).
``ResampleCallCost`` (GPU): the call-cost cases' host time per tiny call (``track_host_us``) and device time
per call beside it; they never feed ``Resample`` or ``ResampleCeiling``, whose figures are device times.
With ``ROBOCACHE_SUITE=multigpu`` the classes above carry the multi-GPU cases (device time = the group's step),
and ``ResampleMultiGPU`` (aggregate throughput, scaling efficiency) and ``ResampleGather`` (the gather's bandwidth next
to the collective's own) exist; each case runs through torchrun, skipped with fewer GPUs than it needs.
"""
from robocache.bench import frontend as F

F.preload_gpu_libraries()


class Resample(F.DeviceBenchmark):
    params = [F.device_cases("resample")]


class ResampleCeiling(F.CeilingBenchmark):
    params = [F.device_cases("resample")]


class ResampleWall(F.WallBenchmark):
    params = [F.wall_cases("resample")]


if F.dispatch_cases("resample"):  # call cost: GPU only (a class with no case would be an empty asv benchmark)
    class ResampleCallCost(F.CallCostBenchmark):
        params = [F.dispatch_cases("resample")]


if F.multigpu_suite():  # not in the quick/nightly asv passes (see frontend.multigpu_suite)
    class ResampleMultiGPU(F.MultiGPUBenchmark):
        params = [F.suite_cases("resample")]

    class ResampleGather(F.GatherBenchmark):
        params = [F.gather_cases("resample")]
