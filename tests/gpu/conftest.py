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


@pytest.fixture(scope="session", autouse=True)
def _tuning_cache(tmp_path_factory):
    """The autotuner's choices (robocache/_tune.py) go to a folder of this session, never the user's cache:
    every GPU test run tunes from scratch, so a stale or foreign cache cannot hide a wrong launch."""
    import os

    d = tmp_path_factory.mktemp("robocache-tune")
    old = os.environ.get("ROBOCACHE_CACHE_DIR")
    os.environ["ROBOCACHE_CACHE_DIR"] = str(d)
    yield d
    if old is None:
        os.environ.pop("ROBOCACHE_CACHE_DIR", None)
    else:
        os.environ["ROBOCACHE_CACHE_DIR"] = old
