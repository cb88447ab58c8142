"""Shared fixtures; a loud banner when the GPU tests could not run."""
from __future__ import annotations

import numpy as np
import pytest


@pytest.fixture
def rng() -> np.random.Generator:
    """Seeded per test: random inputs, never zeros."""
    return np.random.default_rng(20261120)


def pytest_terminal_summary(terminalreporter, exitstatus, config):  # noqa: ARG001
    skipped = terminalreporter.stats.get("skipped", [])
    gpu_skips = [r for r in skipped if "/gpu/" in str(getattr(r, "fspath", "")) or "tests/gpu" in r.nodeid]
    if gpu_skips:
        reason = str(gpu_skips[0].longrepr[-1]) if isinstance(gpu_skips[0].longrepr, tuple) else ""
        terminalreporter.write_sep(
            "!", f"{len(gpu_skips)} GPU tests SKIPPED, NOT PASSED ({reason.removeprefix('Skipped: ')}); "
                 "run scripts/gpu_check.sh on a GPU machine", yellow=True, bold=True)
