"""Test-only providers that misbehave on purpose, to prove the runner's isolation.

Named in a case as ``fault_providers:<NAME>`` (the worker imports ``module:attr``).
"""
from __future__ import annotations

import os
import time

import numpy as np

from robocache import reference
from robocache.providers import Provider


def _abort(*args, **kwargs):
    os.abort()  # like a CUDA illegal address taking the process down


def _hang(*args, **kwargs):
    time.sleep(3600)


def _slow(*args, **kwargs):
    # a case still running when the runner is interrupted: says so (a file named by $RCB_SLOW_MARK), then works on
    mark = os.environ.get("RCB_SLOW_MARK")
    if mark:
        with open(mark, "a") as f:
            f.write(f"{os.getpid()}\n")
    time.sleep(float(os.environ.get("RCB_SLOW_S", "8")))
    return _wrong(*args, **kwargs)


def _oom(*args, **kwargs):
    # 1 PiB: beyond any machine's address space, so MemoryError at once even with memory overcommit
    return np.ones((1 << 50,), dtype=np.uint8)


def _wrong(values, src_times, tgt_times):
    return (reference.resample(values, src_times, tgt_times) + 0.5).astype(values.dtype)


def _wrong_dtype(values, src_times, tgt_times):
    return reference.resample(values, src_times, tgt_times)  # right numbers, float64 instead of float32


def _raise(*args, **kwargs):
    raise RuntimeError("provider bug")


def _all(fn):
    return {"resample": fn, "fuse": fn, "voxelize": fn}


ABORT = Provider("fault_abort", "aborts", "cpu", _all(_abort))
HANG = Provider("fault_hang", "hangs", "cpu", _all(_hang))
OOM = Provider("fault_oom", "runs out of memory", "cpu", _all(_oom))
SLOW = Provider("fault_slow", "still working when the run is interrupted", "cpu", {"resample": _slow})
WRONG = Provider("fault_wrong", "wrong results", "cpu", {"resample": _wrong})
WRONG_DTYPE = Provider("fault_wrong_dtype", "float64 output", "cpu", {"resample": _wrong_dtype})
RAISE = Provider("fault_raise", "raises", "cpu", _all(_raise))
MISSING = Provider("fault_missing", "needs a module that is not installed", "cpu", _all(_raise),
                   requires=("module_that_does_not_exist_rcb",))


# Multi-GPU: rank 1 dies (os._exit, as a segfaulting or OOM-killed rank would) at its third call, i.e. mid-case
# (after the correctness gate, while its op is being timed); every other rank behaves.
_calls = {"n": 0}


def _die_on_rank1(values, src_times, tgt_times):
    _calls["n"] += 1
    if os.environ.get("RANK") == "1" and _calls["n"] >= 3:
        os._exit(1)
    return reference.resample(values, src_times, tgt_times, out_dtype=values.dtype)


DIE_RANK1 = Provider("fault_die_rank1", "rank 1 dies mid-case", "cpu", {"resample": _die_on_rank1})


# Multi-GPU: rank 1 finishes its cases, then hangs at interpreter exit (as a rank stuck tearing down NCCL would).
def _hang_at_exit_on_rank1(values, src_times, tgt_times):
    if os.environ.get("RANK") == "1" and not _calls.get("atexit"):
        import atexit

        _calls["atexit"] = 1
        atexit.register(time.sleep, 3600)
    return reference.resample(values, src_times, tgt_times, out_dtype=values.dtype)


HANG_AT_EXIT_RANK1 = Provider("fault_hang_at_exit_rank1", "rank 1 hangs at exit", "cpu",
                              {"resample": _hang_at_exit_on_rank1})
