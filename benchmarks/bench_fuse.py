"""asv benchmarks of robocache.fuse and its peers over the harness's grid (base classes: benchmarks/common.py).

``Fuse.time_device``: the harness's device time per call, its samples as asv's. ``FuseWall.time_wall``: one call end
to end with the GPU synchronized (quick suite, robocache and torch.compile; NumPy on a CPU run).
``FuseCallCost`` (GPU): a tiny call's host time per call (``time_host``) and device time per call beside it.
``FuseMultiGPU.time_step`` (``ROBOCACHE_SUITE=multigpu``): the group's step, through torchrun.
Parameters: case (shape), dtype, provider, the same on every machine; what this machine, suite or filter does not
run is skipped with the reason.
"""
from . import common as C

C.F.preload_gpu_libraries()


class Fuse(C.DeviceTime):
    op = "fuse"


class FuseWall(C.WallTime):
    op = "fuse"


class FuseCallCost(C.CallCost):
    op = "fuse"


class FuseMultiGPU(C.MultiGPUTime):
    op = "fuse"
