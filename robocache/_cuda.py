"""The only code that knows where ``kernels/`` is and how its modules are built.

Each op family is one ``kernels/<op>.cu`` file with one ``extern "C"`` entry per
dtype around a templated body (CuPy's own ``cupyx`` habit). Shared helpers in
``kernels/common.cuh`` are inlined into the source text here, so CuPy's on-disk
kernel cache (keyed by source text and options) is invalidated when a header
changes, and the very same text is what the CPU compile test feeds to NVRTC.

Nothing is compiled or queried at import: a module is compiled on first use,
once per (op, device), and memoized.
"""
from __future__ import annotations

import functools
import re
from collections import OrderedDict
from pathlib import Path
from typing import Any

# episodes: robocache.EpisodeCache; rows_wide: the column-split launches of resample and fuse (not grid ops);
# rows_spec: resample one output element a thread (a tuner candidate; its sizes compiled in, an A/B, per shape)
OPS = ("resample", "fuse", "voxelize", "episodes", "rows_wide", "rows_spec")
COMPILE_OPTIONS = ("--std=c++17",)
# Extra NVRTC options (e.g. ("-DRC_V2_UNROLL=2",)) for kernel experiments (scripts/kernel_dev.py); part of
# the module cache key, so changing it compiles a fresh module. Empty in normal use.
EXTRA_OPTIONS: tuple[str, ...] = ()
_INCLUDE = re.compile(r'^\s*#\s*include\s+"([A-Za-z0-9_]+\.cuh)"\s*$', re.MULTILINE)


def kernel_dir() -> Path:
    """Folder holding the .cu/.cuh sources: packaged copy first, else the repo's."""
    here = Path(__file__).resolve().parent
    for cand in (here / "_kernels", here.parent / "kernels"):
        if (cand / "common.cuh").is_file():
            return cand
    raise FileNotFoundError(
        "robocache kernels not found: expected robocache/_kernels/ (installed wheel) or "
        "kernels/ beside the robocache package (source checkout). Reinstall robocache."
    )


@functools.cache
def source(op: str) -> str:
    """Source text of one op family with its local headers inlined (each once)."""
    if op not in OPS:
        raise ValueError(f"unknown op {op!r}; expected one of {OPS}")
    kdir = kernel_dir()
    seen: set[str] = set()

    def inline(match: re.Match) -> str:
        name = match.group(1)
        if name in seen:
            return ""
        seen.add(name)
        text = (kdir / name).read_text()
        return _INCLUDE.sub(inline, text.replace("#pragma once", ""))

    return _INCLUDE.sub(inline, (kdir / f"{op}.cu").read_text())


@functools.cache
def _module(op: str, device_id: int, extra: tuple[str, ...] = ()) -> Any:
    import cupy

    with cupy.cuda.Device(device_id):
        return cupy.RawModule(code=source(op), options=COMPILE_OPTIONS + extra)


def first_entry(op: str) -> str:
    """The name of the first ``extern "C"`` entry point of ``kernels/<op>.cu`` (loading it loads the module): a
    ``RC_..._ENTRY(name, ...)`` use or an ``extern "C" __global__`` function, outside macro definitions."""
    cont = False
    for line in source(op).splitlines():
        skip = cont or line.lstrip().startswith("#")  # a directive, or a line continuing one (a macro's body)
        cont = line.rstrip().endswith("\\")
        if skip or cont:
            continue
        m = re.match(r"\s*RC_\w+_ENTRY\((\w+)", line) or \
            re.match(r'\s*extern\s+"C"\s+__global__\s+void\s+(?:__launch_bounds__\([^)]*\)\s*)?(\w+)\s*\(', line)
        if m:
            return m.group(1)
    raise ValueError(f"no entry point found in kernels/{op}.cu")


# rows_spec with its sizes compiled in (robocache._tune.SPEC_CONSTANTS, a probe's A/B; the library passes them as
# arguments, one module) builds one module per resample shape: at most this many are kept here, least recently used
# first out; a plan holds its own kernel (FastLaunch.keep), so an evicted module stays loaded while a cached plan can
# still launch it.
SPEC_MODULES = 64
_SPEC: OrderedDict[tuple, Any] = OrderedDict()


def function(op: str, name: str, device_id: int, options: tuple[str, ...] = ()) -> Any:
    """The compiled kernel ``name`` of ``kernels/<op>.cu`` for one device (memoized), built with the extra
    NVRTC ``options`` (a launch configuration's build, robocache/_tune.py; one module per option set)."""
    extra = EXTRA_OPTIONS + tuple(options)
    if op != "rows_spec" or not options:  # rows_spec's sizes compiled in (SPEC_CONSTANTS): a module per shape
        return _function(op, name, device_id, extra)
    key = (name, device_id, extra)
    fn = _SPEC.get(key)
    if fn is None:
        import cupy

        with cupy.cuda.Device(device_id):
            fn = cupy.RawModule(code=source(op), options=COMPILE_OPTIONS + extra).get_function(name)
        _SPEC[key] = fn
        while len(_SPEC) > SPEC_MODULES:
            _SPEC.popitem(last=False)
    else:
        try:
            _SPEC.move_to_end(key)
        except KeyError:  # evicted by another thread meanwhile: the function in hand still works
            pass
    return fn


@functools.cache
def _function(op: str, name: str, device_id: int, extra: tuple[str, ...]) -> Any:
    import cupy

    with cupy.cuda.Device(device_id):
        return _module(op, device_id, extra).get_function(name)
