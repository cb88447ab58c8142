"""robocache: GPU preprocessing for robot learning.

Public API: :func:`resample`, :func:`fuse`, :func:`voxelize` (semantics in
``docs/semantics.md``), and :class:`EpisodeCache`: a dataset's episodes kept on
the device, training batches sampled and resampled there in one launch
(docs/pipelines.md). Inputs may be CuPy arrays or PyTorch CUDA tensors (zero
copy, result of the same kind on the same device and stream) or NumPy arrays /
CPU tensors (computed by the NumPy reference). Importing robocache compiles
nothing and touches no device: each op's CUDA module is compiled on first use.
"""
from .episodes import EpisodeBatch, EpisodeCache
from .fuse import fuse
from .resample import resample
from .voxelize import voxelize

__version__ = "0.1.0"
__all__ = ["resample", "fuse", "voxelize", "EpisodeCache", "EpisodeBatch", "__version__"]
