"""What the runner's forkserver imports before it forks the case processes (runner.preload_for, runner._context).

A GPU run preloads torch, CuPy, Dynamo and Inductor; a CPU run only what its cases' providers need: importing
torch, Dynamo and Inductor costs a CPU run of NumPy cases about 12 CPU-s it never uses. A forkserver already
running without what a later run needs is restarted with both sets. No process is started here: the forkserver
and the context are stand-ins that record what they were told.
"""
from __future__ import annotations

import dataclasses
import multiprocessing.forkserver

import pytest

from robocache.bench import runner, specs
from robocache.providers import torch_compile

HEAVY = {"torch", "cupy", *torch_compile.PRELOAD}


def _cases(*keys: str) -> list[specs.Case]:
    return [specs.find(k) for k in keys]


NUMPY = "resample/B32-S100-T50-D32/float32/numpy"
EAGER = "resample/B32-S100-T50-D32/float32/torch_eager"
COMPILED = "resample/B32-S100-T50-D32/float32/torch_compile"


def test_a_cpu_run_preloads_what_its_providers_need():
    assert set(runner.preload_for(_cases(NUMPY), "cpu")) == set(runner.BASE_PRELOAD)
    eager = runner.preload_for(_cases(NUMPY, EAGER), "cpu")
    assert "torch" in eager and not set(torch_compile.PRELOAD) & set(eager) and "cupy" not in eager
    compiled = runner.preload_for(_cases(COMPILED), "cpu")
    assert {"torch", *torch_compile.PRELOAD} <= set(compiled) and "cupy" not in compiled
    for got in (eager, compiled):  # PRELOAD's order (numpy and torch before the modules that import them)
        assert got == [m for m in runner.PRELOAD if m in got]


def test_a_gpu_run_and_an_unknown_provider_preload_everything():
    assert runner.preload_for(_cases(NUMPY), "gpu") == runner.PRELOAD
    unknown = dataclasses.replace(specs.find(NUMPY), provider="fault_providers:DIE_RANK1")  # a test's module:attr
    assert runner.preload_for([unknown], "cpu") == runner.PRELOAD


class _Server:
    def __init__(self) -> None:
        self.stops = 0

    def _stop(self) -> None:
        self.stops += 1


class _Ctx:
    def __init__(self) -> None:
        self.preloads: list[list[str]] = []

    def get_start_method(self) -> str:
        return "forkserver"

    def set_forkserver_preload(self, mods: list[str]) -> None:
        self.preloads.append(list(mods))


@pytest.fixture()
def fake_server(monkeypatch):
    server, ctx = _Server(), _Ctx()
    monkeypatch.setattr(multiprocessing.forkserver, "_forkserver", server)
    monkeypatch.setattr(runner.mp, "get_context", lambda method: ctx)
    monkeypatch.setattr(runner, "_CTX", None)
    monkeypatch.setattr(runner, "_PRELOADED", frozenset())
    return server, ctx


def test_a_later_run_needing_more_restarts_the_forkserver_with_both(fake_server):
    server, ctx = fake_server
    numpy_only = runner.preload_for(_cases(NUMPY), "cpu")
    assert runner._context(numpy_only) is ctx
    assert ctx.preloads == [numpy_only] and server.stops == 0  # its first start: nothing to stop
    runner._context(numpy_only)
    runner._context()  # run_in_process: whatever runs
    assert len(ctx.preloads) == 1 and server.stops == 0
    eager = runner.preload_for(_cases(EAGER), "cpu")
    runner._context(eager)
    assert server.stops == 1 and set(ctx.preloads[-1]) == set(numpy_only) | set(eager)
    runner._context(numpy_only)  # a subset of what runs: kept
    assert server.stops == 1 and len(ctx.preloads) == 2


def test_before_any_run_the_context_preloads_everything(fake_server):
    server, ctx = fake_server
    runner._context()
    assert ctx.preloads == [runner.PRELOAD] and not HEAVY - set(ctx.preloads[0])
