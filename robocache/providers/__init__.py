"""The peers robocache is compared against, all with the reference's signatures.

Each :class:`Provider` maps op names (``resample``, ``fuse``, ``voxelize``) to
callables. Tests use them as cross-checks, the benchmark harness as baselines.
Importing this package imports only the standard library and NumPy: torch and
cupy are imported inside the op functions and in :meth:`Provider.available`.
"""
from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from . import cupy_provider, numpy_cpu, torch_compile, torch_eager
from .._versions import VERSIONS

OPS = ("resample", "fuse", "voxelize")


@dataclass(frozen=True)
class Provider:
    """One peer: its ops, where it runs, and why it lacks an op (if it does)."""

    name: str
    label: str  # human-readable, for reports and the dashboard
    device: str  # "cuda" | "cpu" | "any" (runs wherever its inputs are)
    ops: dict[str, Callable[..., Any]]
    not_applicable: dict[str, str] = field(default_factory=dict)  # op -> why there is no implementation
    requires: tuple[str, ...] = ()  # modules that must import for it to run

    def available(self) -> tuple[bool, str]:
        """``(True, "")`` when it can run here, else ``(False, reason)``; never raises."""
        for mod in self.requires:
            try:
                importlib.import_module(mod)
            except Exception as e:  # noqa: BLE001 - a broken install is "unavailable", not a crash
                return False, f"{mod} cannot be imported: {type(e).__name__}: {e}"
        if self.device == "cuda":
            ok, why = _cuda_device_present()
            if not ok:
                return False, why
        return True, ""


def _cuda_device_present() -> tuple[bool, str]:
    # The CUDA providers run through CuPy, so ask CuPy's runtime (not torch).
    try:
        import cupy

        n = cupy.cuda.runtime.getDeviceCount()
    except Exception as e:  # noqa: BLE001 - no driver raises CUDARuntimeError
        return False, f"no CUDA device: {type(e).__name__}: {e}"
    if n < 1:
        return False, "no CUDA device: CuPy sees 0 GPUs"
    return True, ""


# robocache/__init__.py imports the CUDA wrappers; import it on first call only.
def _rc_resample(*args: Any, **kwargs: Any) -> Any:
    import robocache

    return robocache.resample(*args, **kwargs)


def _rc_fuse(*args: Any, **kwargs: Any) -> Any:
    import robocache

    return robocache.fuse(*args, **kwargs)


def _rc_voxelize(*args: Any, **kwargs: Any) -> Any:
    import robocache

    return robocache.voxelize(*args, **kwargs)


def _rc_version(op: str, version: str) -> Callable[..., Any]:
    """One kernel version of ``op`` through the public wrapper's validation (provider ``robocache@<v>``)."""
    def call(*args: Any, **kwargs: Any) -> Any:
        import robocache

        return getattr(robocache, op)(*args, _version=version, **kwargs)
    call.__name__ = f"{op}_{version}"
    return call


def _versioned() -> tuple[Provider, ...]:
    names_ = sorted({v for vs in VERSIONS.values() for v in vs}, key=lambda v: int(v[1:]))
    out = []
    for v in names_:
        ops = {op: _rc_version(op, v) for op, vs in VERSIONS.items() if v in vs}
        missing = {op: f"robocache has no kernel version {v} of {op}" for op in VERSIONS if op not in ops}
        out.append(Provider(f"robocache@{v}", f"robocache {v} (CUDA)", "cuda", ops, missing, requires=("cupy",)))
    return tuple(out)


def _ops(mod: Any) -> dict[str, Callable[..., Any]]:
    return {op: getattr(mod, op) for op in OPS}


_PROVIDERS: tuple[Provider, ...] = (
    Provider("robocache", "robocache (CUDA)", "cuda",
             {"resample": _rc_resample, "fuse": _rc_fuse, "voxelize": _rc_voxelize}, requires=("cupy",)),
    *_versioned(),  # robocache@v1, robocache@v2, ...: every kernel version, for the optimisation journey
    Provider("torch_eager", "PyTorch eager", "any", _ops(torch_eager), requires=("torch",)),
    Provider("torch_compile", "PyTorch torch.compile", "any", _ops(torch_compile), requires=("torch",)),
    # mode="max-autotune-no-cudagraphs": the second compiled peer; the faster mode is the one to beat
    Provider("torch_compile@max-autotune", "PyTorch torch.compile max-autotune", "any",
             torch_compile.ops("max-autotune"), requires=("torch",)),
    Provider("cupy", "CuPy", "cuda", _ops(cupy_provider), requires=("cupy",)),
    Provider("numpy", "NumPy (CPU)", "cpu", _ops(numpy_cpu)),
)


def names() -> list[str]:
    """Provider names, robocache first."""
    return [p.name for p in _PROVIDERS]


def get(name: str) -> Provider:
    """The provider called ``name``; ``ValueError`` naming the valid ones otherwise."""
    for p in _PROVIDERS:
        if p.name == name:
            return p
    raise ValueError(f"unknown provider {name!r}; expected one of {', '.join(names())}")


def all_providers() -> list[Provider]:
    """Every provider, in :func:`names` order."""
    return list(_PROVIDERS)
