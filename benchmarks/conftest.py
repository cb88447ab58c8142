"""pytest-benchmark front end: saved runs default to results/pytest, one front-end session per pytest run, the
GPU (or "no GPU") in every saved run's ``machine_info``, and the GPU in every saved run's name.

A saved run's name starts with the machine's GPU (``--benchmark-save=nightly`` on an H200 saves
``0003_h200_nightly.json``; on a CPU ``0003_cpu_nightly.json``; a name that already starts with it is kept), so the
source label that ``pytest-benchmark compare`` prints beside every row names the GPU the row was measured on: that
label keeps only the first 12 characters of the file name (``0003_h200_ni``), so the GPU goes first
(``--benchmark-autosave``: the GPU, then pytest-benchmark's own tag, commit and time).

``.benchmarks`` at the repository root is a link to ``results/pytest``, so pytest-benchmark's own tool finds the
saved runs from there without options (``pytest-benchmark list``, ``pytest-benchmark compare 0001 0002``).
"""
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
    save, auto = getattr(config.option, "benchmark_save", None), getattr(config.option, "benchmark_autosave", False)
    if (save or auto) and not getattr(config.option, "benchmark_disable", False):
        config.option.benchmark_save = save_name(save, gpu_slug(_env()))


_ENV: dict | None = None


def _env() -> dict:
    """The harness's environment capture (once per pytest run, in a child process: this one stays CUDA-free, as
    the front end's processes must)."""
    global _ENV
    if _ENV is None:
        from robocache.bench import frontend
        from robocache.bench.context import capture_env_in_child

        _ENV = capture_env_in_child(frontend.device_here(), None)
    return _ENV


def gpu_slug(env: dict) -> str:
    """``h200`` (``h200-x4`` for four GPUs), ``gpu`` when the arch is unknown, ``cpu`` on a CPU run."""
    if env.get("device") != "gpu":
        return "cpu"
    slug = str(env.get("arch") or "gpu").lower().replace(" ", "-")
    n = env.get("gpu_count") or 1
    return f"{slug}-x{n}" if n > 1 else slug


def save_name(given: str | None, slug: str) -> str:
    """The saved run's name: the GPU ``slug``, then ``given`` (pytest-benchmark's own tag for
    --benchmark-autosave), unless ``given`` already starts with the slug. First, because ``pytest-benchmark
    compare`` shows only the first 12 characters of a saved run's file name (``0003_h200_ni``)."""
    from pytest_benchmark.utils import get_tag

    name = given or get_tag()
    return name if name.lower().startswith(slug) else f"{slug}_{name}"


@pytest.fixture(scope="session")
def rcb_session():
    from robocache.bench import frontend

    return frontend.Session("pytest-benchmark", frontend.process_key(os.getpid()))


def gpu_machine_info() -> dict:
    """What pytest-benchmark's ``machine_info["gpu"]`` says: the harness's environment capture
    (:func:`robocache.bench.env.capture_env`, in a child process so this one stays CUDA-free, as the front end's
    processes must) and one NVML clock reading (:class:`robocache.bench.env.ClockSampler`). A CPU run says
    ``"no GPU"``; a fact NVML cannot give is None."""
    from robocache.bench import env as envmod, frontend

    device = frontend.device_here()
    env = _env()
    out = {"device": device, "name": "no GPU" if device == "cpu" else env.get("gpu_name"),
           "count": 0 if device == "cpu" else env.get("gpu_count"), "machine": env.get("machine")}
    out.update({k: env.get(k) for k in ("arch", "compute_capability", "gpu_memory_gb", "sm_count", "driver", "cuda")})
    clocks: dict = {}
    if device == "gpu":
        sampler = envmod.ClockSampler(0)
        sampler.start()  # one reading on entry, one on exit: no thread time needed
        sampler.stop()
        clocks = sampler.stats()
        out["nvml"] = env.get("nvml") if sampler.error is None else f"unknown: {sampler.error}"
    out["sm_mhz"] = clocks.get("sm_mhz_median")
    out["sm_mhz_max"] = clocks.get("sm_mhz_max_supported")
    out["mem_mhz"] = clocks.get("mem_mhz_median")
    return out


def pytest_benchmark_update_machine_info(config, machine_info):
    # pytest-benchmark calls this only when it saves or compares a run
    machine_info["gpu"] = gpu_machine_info()
