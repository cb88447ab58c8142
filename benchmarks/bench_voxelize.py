"""asv benchmarks: robocache.voxelize and its peers, over the harness's grid (robocache.bench.specs).

Cases come from the grid (suite ``ROBOCACHE_SUITE``, default nightly; wall time over the quick suite),
so asv holds no case list of its own. ``Voxelize`` reports the harness's device time (us) and bandwidth
(GB/s), ``VoxelizeCeiling`` the % of the copy ceiling measured in the same run; ``VoxelizeWall`` times one call end to end with the GPU
synchronized (quick suite, robocache and torch.compile: ``frontend.WALL_PROVIDERS``). Without a GPU the GPU-only cases raise NotImplementedError in setup (asv: skipped).
"""
from robocache.bench import frontend as F

F.preload_gpu_libraries()


class Voxelize(F.DeviceBenchmark):
    params = [F.suite_cases("voxelize")]


class VoxelizeCeiling(F.CeilingBenchmark):
    params = [F.suite_cases("voxelize")]


class VoxelizeWall(F.WallBenchmark):
    params = [F.wall_cases("voxelize")]
