"""Test-only providers that fail only in the compile pre-pass (robocache.bench.runner.precompile).

Named ``precompile_providers:<NAME>``; the runner pre-compiles a provider whose name (here the attribute)
starts with ``torch_compile``. The pre-pass turns Inductor's autotune cache off in its processes
(``runner._no_tuning_cache``); that is how these know where they run. In the timing pass they are correct.
"""
from __future__ import annotations

import os

from robocache import reference
from robocache.providers import Provider


def _in_prepass() -> bool:
    from torch._inductor import config

    return not config.autotune_local_cache


def _abort_in_prepass(values, src_times, tgt_times):
    if _in_prepass():
        os.abort()  # like a compiler crash taking the pre-pass process down
    return reference.resample(values, src_times, tgt_times, out_dtype=values.dtype)


def _raise_in_prepass(values, src_times, tgt_times):
    if _in_prepass():
        raise RuntimeError("compile failed in the pre-pass")
    return reference.resample(values, src_times, tgt_times, out_dtype=values.dtype)


TORCH_COMPILE_ABORT_IN_PREPASS = Provider("torch_compile_abort_in_prepass", "aborts in the pre-pass", "cpu",
                                          {"resample": _abort_in_prepass})
TORCH_COMPILE_RAISE_IN_PREPASS = Provider("torch_compile_raise_in_prepass", "raises in the pre-pass", "cpu",
                                          {"resample": _raise_in_prepass})
