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


def _check_ops() -> None:
    """Every op with kernel versions wired through the recipe's files (docs/architecture.md, 'Add an op with a
    kernel'): a step left out fails here, at import, naming its file (never an AttributeError at first call)."""
    import sys

    from . import _cuda, _versions, reference

    recipe = "docs/architecture.md, 'Add an op with a kernel'"
    for op in _versions.VERSIONS:
        mod = sys.modules.get(f"{__name__}.{op}")
        step = ("robocache/__init__.py does not import it" if not callable(globals().get(op)) else
                f"robocache/{op}.py has no _LAUNCH table" if getattr(mod, "_LAUNCH", None) is None else
                "robocache/_cuda.py: OPS does not list it" if op not in _cuda.OPS else
                f"robocache/reference/__init__.py does not export {op}" if not callable(getattr(reference, op, None))
                else None)
        if step is None:
            try:
                kdir = _cuda.kernel_dir()
            except FileNotFoundError:  # no kernels at all: said at first GPU use (_cuda.kernel_dir's message)
                continue
            if not (kdir / f"{op}.cu").is_file():
                step = f"kernels/{op}.cu is missing"
        if step is not None:
            raise ImportError(f"robocache: op {op!r} has kernel versions (robocache/_versions.py) but {step} "
                              f"({recipe})")


_check_ops()
