"""NumPy ground truth for every op, with the public API's signatures.

Inputs are NumPy arrays; arithmetic is float64; the result is float64 unless
``out_dtype`` says otherwise. Tests, the benchmark harness's correctness gate and
the NumPy CPU peer all call these functions: there is one definition of what
each op means (see ``docs/semantics.md``).
"""
from .fuse import fuse
from .resample import resample, bracket
from .voxelize import voxelize, voxel_index, voxel_geometry

__all__ = ["resample", "fuse", "voxelize", "bracket", "voxel_index", "voxel_geometry"]
