"""GPU tests: skipped (with the reason, and a banner at the end) when no CUDA device is usable."""
from __future__ import annotations

import functools

import pytest


@functools.lru_cache(maxsize=1)
def gpu_status() -> tuple[bool, str]:
    try:
        import cupy
    except Exception as e:  # noqa: BLE001
        return False, f"no CUDA GPU usable: CuPy not importable ({type(e).__name__})"
    try:
        n = cupy.cuda.runtime.getDeviceCount()
    except Exception as e:  # noqa: BLE001
        return False, f"no CUDA GPU usable: {type(e).__name__}: {str(e).splitlines()[0][:120]}"
    if n < 1:
        return False, "no CUDA GPU usable: 0 devices"
    return True, ""


def pytest_collection_modifyitems(config, items):  # noqa: ARG001
    ok, why = gpu_status()
    if ok:
        return
    mark = pytest.mark.skip(reason=why)
    for item in items:
        if "tests/gpu/" in item.nodeid or "/gpu/" in str(item.fspath):
            item.add_marker(mark)
