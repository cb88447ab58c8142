"""The ops the harness benchmarks: one module per op, each registering one :class:`~.base.Op`.

``names()`` is the grid order (resample, fuse, voxelize, then ops registered later). The built-in ops are
registered on first use; more op modules are named in ``ROBOCACHE_BENCH_OPS`` (comma-separated importable
modules, each calling :func:`register` when imported), which child processes inherit: that is how a test
adds an op to ``robocache-bench run`` without editing the harness. Importing this package has no side
effect beyond defining the registry.
"""
from __future__ import annotations

import importlib
import os

from .base import Op, Point

__all__ = ["Op", "Point", "get", "names", "order", "register", "registered", "unregister"]

ENV_VAR = "ROBOCACHE_BENCH_OPS"
BUILTIN = ("resample", "fuse", "voxelize")
RECIPE = "docs/architecture.md, 'Add an op with a kernel'"

_REGISTRY: dict[str, Op] = {}
_loaded = False
generation = 0  # bumped on every change, so callers can cache what they derive from the registry


def _load() -> None:
    global _loaded
    if _loaded:
        return
    _check_builtin()  # before _loaded: a recipe step left out fails every use, not only the first
    _loaded = True
    for mod in BUILTIN:
        try:
            op = importlib.import_module(f"{__name__}.{mod}").OP
        except ModuleNotFoundError as e:
            if e.name != f"{__name__}.{mod}":
                raise
            raise ImportError(f"robocache/bench/ops/{mod}.py is missing: {mod} is in BUILTIN ({RECIPE})") from None
        register(op)
    for mod in filter(None, (m.strip() for m in os.environ.get(ENV_VAR, "").split(","))):
        importlib.import_module(mod)  # the module registers its op(s)


def _check_builtin() -> None:
    """The built-in ops are the library's (``robocache.providers.OPS``), each with its harness module: a step of
    the recipe left out is named here."""
    from ...providers import OPS

    if set(BUILTIN) - set(OPS):
        raise ImportError(f"robocache/bench/ops/__init__.py: BUILTIN names {sorted(set(BUILTIN) - set(OPS))}, not "
                          f"library ops: add them to robocache/providers/__init__.py OPS ({RECIPE})")
    if set(OPS) - set(BUILTIN):
        raise ImportError(f"library op(s) {sorted(set(OPS) - set(BUILTIN))} (robocache.providers.OPS) not in "
                          f"robocache/bench/ops/__init__.py BUILTIN: the harness would never measure them ({RECIPE})")


def register(op: Op) -> Op:
    """Add ``op`` (an :class:`Op` instance with a unique ``name``) after the ops already registered."""
    global generation
    if not isinstance(op, Op) or not op.name or "/" in op.name:
        raise ValueError(f"not a registrable op: {op!r} (an Op instance with a name without '/')")
    _load()
    old = _REGISTRY.get(op.name)
    if old is not None and old is not op:
        raise ValueError(f"op {op.name!r} is already registered")
    _REGISTRY[op.name] = op
    generation += 1
    return op


def unregister(name: str) -> None:
    """Remove an op (tests that register a toy op in-process)."""
    global generation
    _load()
    _REGISTRY.pop(name, None)
    generation += 1


def registered() -> tuple[Op, ...]:
    """Every registered op, in grid order."""
    _load()
    return tuple(_REGISTRY.values())


def names() -> tuple[str, ...]:
    """The registered ops' names, in grid order."""
    _load()
    return tuple(_REGISTRY)


def get(name: str) -> Op:
    """The op called ``name``; ``KeyError`` naming the known ones otherwise."""
    _load()
    try:
        return _REGISTRY[name]
    except KeyError:
        raise KeyError(f"unknown op {name!r}; expected one of {', '.join(_REGISTRY)}") from None


def order(name: str) -> int:
    """Sort key of an op name: its grid position; unknown names after every registered op."""
    known = names()
    return known.index(name) if name in known else len(known)
