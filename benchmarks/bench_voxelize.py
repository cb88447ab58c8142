"""asv benchmarks of robocache.voxelize and its peers over the harness's grid (base classes: benchmarks/common.py).

``Voxelize.time_device``: the harness's device time per call, its samples as asv's. ``VoxelizeWall.time_wall``: one call end
to end with the GPU synchronized (quick suite, robocache and torch.compile; NumPy on a CPU run).
``VoxelizeCallCost`` (GPU): a tiny call's host time per call (``time_host``) and device time per call beside it.
``VoxelizeMultiGPU.time_step`` (``ROBOCACHE_SUITE=multigpu``): the group's step, through torchrun.
Parameters: case (shape), dtype, provider, the same on every machine; what this machine, suite or filter does not
run is skipped with the reason.
"""
from . import common as C

C.F.preload_gpu_libraries()


class Voxelize(C.DeviceTime):
    op = "voxelize"


class VoxelizeWall(C.WallTime):
    op = "voxelize"


class VoxelizeCallCost(C.CallCost):
    op = "voxelize"


class VoxelizeMultiGPU(C.MultiGPUTime):
    op = "voxelize"
