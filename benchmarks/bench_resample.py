"""asv benchmarks of robocache.resample and its peers over the harness's grid (base classes: benchmarks/common.py).

``Resample.time_device``: the harness's device time per call, its samples as asv's. ``ResampleWall.time_wall``: one call end
to end with the GPU synchronized (quick suite, robocache and torch.compile; NumPy on a CPU run).
``ResampleCallCost`` (GPU): a tiny call's host time per call (``time_host``) and device time per call beside it.
``ResampleMultiGPU.time_step`` (``ROBOCACHE_SUITE=multigpu``): the group's step, through torchrun.
Parameters: case (shape), dtype, provider, the same on every machine; what this machine, suite or filter does not
run is skipped with the reason.
"""
from . import common as C

C.F.preload_gpu_libraries()


class Resample(C.DeviceTime):
    op = "resample"


class ResampleWall(C.WallTime):
    op = "resample"


class ResampleCallCost(C.CallCost):
    op = "resample"


class ResampleMultiGPU(C.MultiGPUTime):
    op = "resample"
