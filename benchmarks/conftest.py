"""pytest-benchmark front end: saved runs default to results/pytest, one front-end session per pytest run."""
from __future__ import annotations

import os
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config):
    # Default storage for --benchmark-save/--benchmark-compare: results/pytest (pytest-benchmark's own
    # default is .benchmarks/). An explicit --benchmark-storage wins.
    opt = getattr(config.option, "benchmark_storage", None)
    if opt in (None, "file://./.benchmarks"):
        config.option.benchmark_storage = f"file://{ROOT / 'results' / 'pytest'}"


@pytest.fixture(scope="session")
def rcb_session():
    from robocache.bench import frontend

    return frontend.Session("pytest-benchmark", str(os.getpid()))
