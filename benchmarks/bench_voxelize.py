"""asv benchmarks: robocache.voxelize and its peers, over the harness's grid (robocache.bench.specs).

Cases come from the grid (suite ``ROBOCACHE_SUITE``, default nightly; wall time over the quick suite),
so asv holds no case list of its own. ``Voxelize`` reports the harness's device time (us) and bandwidth
(GB/s), ``VoxelizeCeiling`` the % of the copy ceiling measured in the same run; ``VoxelizeWall`` times one call end to end with the GPU
synchronized (quick suite, robocache and torch.compile: ``frontend.WALL_PROVIDERS``). Without a GPU the GPU-only cases raise NotImplementedError in setup (asv: skipped).
``VoxelizeCallCost`` (GPU): the call-cost cases' host time per tiny call (``track_host_us``) and device time
per call beside it; they never feed ``Voxelize`` or ``VoxelizeCeiling``, whose figures are device times.
With ``ROBOCACHE_SUITE=multigpu`` the classes above carry the multi-GPU cases (device time = the group's step),
and ``VoxelizeMultiGPU`` (aggregate throughput, scaling efficiency) and ``VoxelizeGather`` (the gather's bandwidth next
to the collective's own) exist; each case runs through torchrun, skipped with fewer GPUs than it needs.
"""
from robocache.bench import frontend as F

F.preload_gpu_libraries()


class Voxelize(F.DeviceBenchmark):
    params = [F.device_cases("voxelize")]


class VoxelizeCeiling(F.CeilingBenchmark):
    params = [F.device_cases("voxelize")]


class VoxelizeWall(F.WallBenchmark):
    params = [F.wall_cases("voxelize")]


if F.dispatch_cases("voxelize"):  # call cost: GPU only (a class with no case would be an empty asv benchmark)
    class VoxelizeCallCost(F.CallCostBenchmark):
        params = [F.dispatch_cases("voxelize")]


if F.multigpu_suite():  # not in the quick/nightly asv passes (see frontend.multigpu_suite)
    class VoxelizeMultiGPU(F.MultiGPUBenchmark):
        params = [F.suite_cases("voxelize")]

    class VoxelizeGather(F.GatherBenchmark):
        params = [F.gather_cases("voxelize")]
