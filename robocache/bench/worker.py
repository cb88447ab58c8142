"""Runs one task in the current process: check a case against the reference, then time it.

The runner starts one process per case (a kernel fault poisons its CUDA context,
and a hang must be killable), passes a task dict, and reads back one record dict
(without the environment, which the run file carries once). Order inside: build
seeded random inputs -> call once -> compare with the float64 reference (a
mismatch is recorded as ``incorrect`` with its error figures and is never timed)
-> time with the project's timer while NVML samples the clocks -> health flags.

The record's ``case.bytes`` is :func:`specs.moved_bytes` of the inputs timed (averaged over the input
sets a warm run rotates through), not the params-only bound. A dispatch case (call cost) is timed with
:func:`timer.time_host_loop` instead, with the device time per call beside it (``Record.dispatch``).
"""
from __future__ import annotations

import functools
import importlib
import itertools
import json
import os
import sys
import time
import traceback
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any

import numpy as np

from . import gate as gate_mod
from . import ops, specs

def resolve_provider(name: str):
    """A provider of the table (:mod:`robocache.providers`, the call-cost cases' own included) or ``module:attr``
    (test-only fault injectors and experiments)."""
    if ":" in name:
        mod, attr = name.split(":", 1)
        return getattr(importlib.import_module(mod), attr)
    from ..providers import get

    return get(name)


def _converter(kind: str, dtype: str, time_dtype: str, device: str):
    if kind == "numpy":
        def conv(a, role):
            return np.ascontiguousarray(a, dtype=dtype if role == "values" else time_dtype)
        return conv
    if kind == "torch":
        import torch

        dev = "cuda" if device == "gpu" else "cpu"

        def conv(a, role):
            t = torch.from_numpy(np.ascontiguousarray(a)).to(dev)
            return t.to(getattr(torch, dtype if role == "values" else time_dtype))
        return conv
    import cupy

    from ..providers import cupy_provider

    def conv(a, role):
        dt = cupy_provider.value_dtype(dtype) if role == "values" else np.dtype(time_dtype)
        return cupy.asarray(np.ascontiguousarray(a).astype(dt))
    return conv


def to_host(x: Any) -> np.ndarray:
    """Any provider output -> NumPy (float64 for floating outputs)."""
    if isinstance(x, np.ndarray):
        h = x
    elif hasattr(x, "detach"):  # torch
        t = x.detach()
        if t.is_floating_point():
            t = t.double()
        h = t.cpu().numpy()
    else:  # cupy
        import cupy

        h = cupy.asnumpy(x.astype(np.float32) if x.dtype.kind == "V" or x.dtype.name == "bfloat16" else x)
    return h.astype(np.float64) if h.dtype.kind == "f" or h.dtype.name == "bfloat16" else h


def _rounded(case: specs.Case, args: tuple) -> dict[str, Any]:
    """The inputs as the provider sees them (rounded to its dtype), back on the host in float64."""
    return ops.get(case.op).rounded(case, args, to_host)


# Errors after which the CUDA context is unusable: the case crashed (not a Python-level error).
_FATAL_CUDA = ("illegal memory access", "illegal address", "misaligned address", "unspecified launch failure",
               "illegal instruction", "device-side assert", "launch timed out", "hardware stack error",
               "cudaerrorillegaladdress", "cuda_error_illegal_address", "cudaerrorlaunchfailure",
               "cuda_error_launch_failed")


def classify(exc: BaseException) -> str:
    """A failed case's status from its exception: ``oom``, ``crash`` (the CUDA context is unusable) or ``error``."""
    text = f"{type(exc).__name__}: {exc}".lower()
    if isinstance(exc, MemoryError) or "out of memory" in text or "outofmemory" in text:
        return "oom"
    if any(s in text for s in _FATAL_CUDA):
        return "crash"
    return "error"


def dtype_name(x: Any) -> str:
    """Canonical dtype name of a NumPy/CuPy array or torch tensor."""
    if hasattr(x, "detach"):
        return str(x.dtype).removeprefix("torch.")
    return np.dtype(x.dtype).name


def expected_dtype(case: specs.Case) -> str:
    """The dtype the case's output must have (the op's: voxel counts int32, occupancy bool, else the case's)."""
    return ops.get(case.op).expected_dtype(case)


MAX_INPUT_SETS = 64


def _l2_bytes() -> int:
    import torch

    return int(getattr(torch.cuda.get_device_properties(torch.cuda.current_device()), "L2_cache_size", 0) or 0)


def base_record(task: dict[str, Any], case: specs.Case) -> dict[str, Any]:
    return {"run_id": task["run_id"], "created": datetime.now(timezone.utc).isoformat(timespec="seconds"),
            "git_commit": task.get("git_commit"), "git_dirty": task.get("git_dirty"), "suite": task["suite"],
            "frontend": task.get("frontend", "cli"), "case": case.to_record_case(), "method": None,
            "metrics": None, "check": None, "clocks": None,
            "health": {"throttled": False, "contended": False, "noisy": False, "reasons": []},
            "status": "error", "reason": None, "duration_s": 0.0, "synthetic": False}


@dataclass
class Prepared:
    """A case ready to call: the provider's op and its arguments on the provider's device."""

    fn_op: Any
    args: tuple
    kwargs: dict
    conv: Any  # (host array, role) -> the provider's array kind, for more input sets
    call: Any  # the zero-argument call of fn_op on args, kwargs (a plain closure: what the timers time)
    moved_bytes: int | None = None  # specs.moved_bytes of these inputs
    bare: Any = None  # timer.BareLaunch of a bare_launch case (then ``call`` is its launch)


def prepare(case: specs.Case, device: str, seed: int = 0) -> tuple[Prepared | None, str | None]:
    """The provider's op on the case's seeded inputs, or ``(None, why)`` when the case must be skipped."""
    prov = resolve_provider(case.provider)
    ok, why = prov.available()
    if not ok:
        return None, f"provider {case.provider} unavailable: {why}"
    fn_op = prov.ops.get(case.op)
    if fn_op is None:
        return None, prov.not_applicable.get(case.op, f"{case.provider} has no {case.op}")
    kind = getattr(prov, "array_kind", None) or ("numpy" if getattr(prov, "device", "cpu") == "cpu" else "torch")
    conv = _converter(kind, case.dtype, case.params.get("time_dtype", "float32"), device)
    host = specs.host_inputs(case, seed)
    moved = specs.moved_bytes(case, host)
    args, kwargs = specs.call_args(case, host, conv)
    del host
    if getattr(prov, "role", "") == "floor":
        from . import timer

        bare = timer.BareLaunch(case.op, *_bare_args(case, args))
        return Prepared(fn_op, args, kwargs, conv, bare.launch, moved, bare), None
    if case.dispatch and getattr(prov, "public_call", False):
        fn_op = getattr(importlib.import_module("robocache"), case.op)
        return Prepared(fn_op, args, kwargs, conv, functools.partial(fn_op, *args, **kwargs), moved), None

    def call():
        return fn_op(*args, **kwargs)
    return Prepared(fn_op, args, kwargs, conv, call, moved), None


def _bare_args(case: specs.Case, args: tuple) -> tuple[list[int], list[int], list[float], list[Any]]:
    """(pointers, integers, floats, arrays to keep alive) of the bare launch, from the case's CuPy arrays, in
    the order of the op's ``launch_floor_args`` (the output is the launch's own). Built once, untimed."""
    return ops.get(case.op).bare_args(case, args)


def gate(case: specs.Case, prep: Prepared) -> tuple[Any, dict[str, Any], str | None]:
    """Call once and compare with the float64 reference: (output, schema ``Check``, why it failed or None).

    A wrong output dtype fails the gate too (it would move other bytes than the case counts). A bare
    launch has no op output: its check is that the kernel ran with the arguments it was given.
    """
    if prep.bare is not None:
        chk = prep.bare.check()
        return None, chk, None if chk["passed"] else (f"the bare launch wrote {prep.bare.expected} "
                                                      f"+/- {chk['max_abs_err']:g}")
    out = prep.call()
    got_dt, want_dt = dtype_name(out), expected_dtype(case)
    ref = specs.reference_output(case, _rounded(case, prep.args))
    chk = gate_mod.check(to_host(out), ref, case.dtype)
    if got_dt != want_dt:
        chk["passed"] = False
        return out, chk, f"output dtype {got_dt}, expected {want_dt}"
    if not chk["passed"]:
        return out, chk, (f"output differs from the reference: max rel err {chk['max_rel_err']}, "
                          f"{100 * (chk['bad_fraction'] or 0):.3g}% of elements beyond {chk['tolerance']}")
    return out, chk, None


def rotating_call(case: specs.Case, prep: Prepared, *, device: str, cache: str, seed: int = 0,
                  rotate: bool = True, moved: list[int] | None = None) -> tuple[Any, int]:
    """(the callable to time, input sets it walks). Warm mode on a GPU rotates input sets totalling at least
    2x L2 (at most :data:`MAX_INPUT_SETS`; counted with the params-only bound :attr:`specs.Case.bytes`), so a
    small case is timed from HBM, not from the L2 left by the previous call. ``moved``, when given, gets
    :func:`specs.moved_bytes` of every set walked appended (the first set's from ``prep``)."""
    n_sets = 1
    if device == "gpu" and cache == "warm" and rotate:
        l2 = _l2_bytes()
        if 0 < case.bytes < 2 * l2:
            n_sets = min(MAX_INPUT_SETS, -(-2 * l2 // case.bytes))
    if moved is not None and prep.moved_bytes is not None:
        moved.append(prep.moved_bytes)
    if n_sets == 1:
        return prep.call, 1
    fn_op = prep.fn_op
    sets = [(prep.args, prep.kwargs)]
    for i in range(1, n_sets):
        host = specs.host_inputs(case, seed + i)
        if moved is not None:
            moved.append(specs.moved_bytes(case, host))
        sets.append(specs.call_args(case, host, prep.conv))
    cycle = itertools.cycle(sets)

    def call():
        a, k = next(cycle)
        return fn_op(*a, **k)
    return call, n_sets


def measure(task: dict[str, Any], extras: dict[str, Any] | None = None) -> dict[str, Any]:
    """Run one case task; returns a schema Record dict (without env). Never raises for case failures.

    ``task["check_only"]``: stop after the correctness gate (front ends running as tests).
    ``extras``: when given, filled with ``timing`` (the :class:`timer.Timing`) and ``call`` (the
    zero-argument callable that was timed), for front ends that report samples in their own format.
    """
    from . import env as envmod
    from . import timer

    t_start = time.perf_counter()
    case = specs.find(task["case_key"])
    rec = base_record(task, case)
    device = task["device"]
    if case.dispatch and task.get("cache", "warm") != "warm" and not task.get("check_only"):
        rec.update(status="skipped", reason="a call-cost (dispatch) case is timed warm only: its figure is the "
                                            "host's time per call, which an L2 flush does not change")
        return rec
    try:
        prep, skip = prepare(case, device, task.get("seed", 0))
        if prep is None:
            rec.update(status="skipped", reason=skip)
            return rec
        call = prep.call
        if prep.moved_bytes is not None:
            rec["case"]["bytes"] = prep.moved_bytes

        # 1. correctness gate (also the warm-up that compiles torch.compile / loads CUDA modules)
        out, chk, failed = gate(case, prep)
        rec["check"] = chk
        del out
        if failed:
            rec.update(status="incorrect", reason=failed)
            return rec
        if extras is not None:
            extras["call"] = call
        if task.get("check_only"):
            rec.update(status="ok", reason="correctness check only: not timed")
            return rec

        # 2. timing, with clocks sampled.
        opts = task.get("timing", {})
        cache = task.get("cache", "warm")
        if case.dispatch:
            _time_dispatch(rec, case, prep, device, opts, task, extras)
            return rec
        moved: list[int] = []
        call, n_sets = rotating_call(case, prep, device=device, cache=cache, seed=task.get("seed", 0),
                                     rotate=task.get("rotate_inputs", True), moved=moved)
        if moved:  # bytes per call: the mean over the input sets the timer walks
            rec["case"]["bytes"] = round(sum(moved) / len(moved))
        graph_us = None
        with envmod.ClockSampler(task.get("device_index", 0)) if device == "gpu" else _NullSampler() as cs:
            if device == "gpu":
                t = timer.time_gpu(call, method="cuda_event", cache=cache, **opts)
            else:
                t = timer.time_host(call, **opts)
        clocks = cs.stats()
        if extras is not None:
            extras["timing"] = t
        note = None
        if device == "gpu" and cache == "warm" and task.get("graph_check", True):
            no_graph = getattr(resolve_provider(case.provider), "no_graph", "")
            if no_graph:
                note = f"no graph replay check: {no_graph}"
            else:
                try:
                    graph_us = timer.time_gpu(call, method="cuda_graph", cache="warm", **opts).median_us
                except timer.GraphUnavailable as e:
                    note = f"no graph replay check: {e}"
        med_s = t.median_us * 1e-6
        ceiling = task.get("ceiling_gb_per_s")
        gbps = rec["case"]["bytes"] / med_s / 1e9 if med_s > 0 else 0.0
        rec["method"] = {**t.method(), "input_sets": n_sets}
        rec["metrics"] = {
            "time_us": t.quantiles(),
            "items_per_s": case.items / med_s if med_s > 0 else 0.0,
            "gb_per_s": gbps,
            "ceiling_gb_per_s": ceiling,
            "pct_of_ceiling": 100.0 * gbps / ceiling if ceiling else None,
            "graph_time_us": graph_us,
            "event_vs_graph": (t.median_us - graph_us) / graph_us if graph_us else None,
        }
        rec["clocks"] = clocks if device == "gpu" else None
        rec["health"] = envmod.assess_health(clocks if device == "gpu" else None, t.noise_target_met)
        uncovered = getattr(t, "uncovered_batches", 0)
        if uncovered:  # the callable waits on the GPU itself: launch gaps are in the figure
            rec["health"]["noisy"] = True
            rec["health"]["reasons"].append(f"noisy: {uncovered} of {t.batches} batches could not be queued "
                                            "behind a blocked stream (the call synchronizes)")
        evg = rec["metrics"]["event_vs_graph"]
        if evg is not None and abs(evg) > 0.10:  # informational: launch gaps between a call's kernels
            rec["health"]["reasons"].append(f"timers differ: CUDA events {100 * evg:+.1f}% vs graph replay")
        if device == "cpu":  # a host timer has no clocks to read: not a health problem
            rec["health"]["reasons"] = [r for r in rec["health"]["reasons"] if not r.startswith("clocks unknown")]
        rec.update(status="ok", reason=note)
    except BaseException as e:  # noqa: BLE001 - every failure becomes a status, the run goes on
        tb = traceback.format_exc(limit=6).strip().splitlines()
        rec.update(status=classify(e), reason=f"{type(e).__name__}: {str(e)[:800]}\n" + "\n".join(tb[-6:]))
    finally:
        rec["duration_s"] = time.perf_counter() - t_start
    return rec


_HOST_LOOP_OPTS = ("noise_target", "min_samples", "max_samples", "time_limit_s", "warmup_s", "target_sample_s")
# The device time of a dispatch case only has to be compared with the host's (a factor of several
# apart when the GPU keeps up): a short, looser measurement is enough.
_DISPATCH_DEVICE_OPTS = {"noise_target": 0.02, "time_limit_s": 0.3, "warmup_s": 0.02}


def _time_dispatch(rec: dict[str, Any], case: specs.Case, prep: Prepared, device: str,
                   opts: dict[str, Any], task: dict[str, Any], extras: dict[str, Any] | None) -> None:
    """Time a dispatch case into ``rec``: host time per call in a tight loop (``timer.time_host_loop``),
    then the device time per call (``timer.time_gpu``) for the GPU-keeps-up check (``Record.dispatch``)."""
    from . import env as envmod
    from . import timer

    on_gpu = device == "gpu"
    sync = None
    if on_gpu:
        import torch

        sync = torch.cuda.synchronize  # device-wide: covers CuPy's stream and torch's alike
    host_opts = {k: v for k, v in opts.items() if k in _HOST_LOOP_OPTS}
    with envmod.ClockSampler(task.get("device_index", 0)) if on_gpu else _NullSampler() as cs:
        t = timer.time_host_loop(prep.call, sync=sync, **host_opts)
    clocks = cs.stats()
    device_us = None
    if on_gpu:
        dev_opts = {**_DISPATCH_DEVICE_OPTS, "time_limit_s": min(_DISPATCH_DEVICE_OPTS["time_limit_s"],
                                                                 float(opts.get("time_limit_s", 2.0)))}
        device_us = timer.time_gpu(prep.call, method="cuda_event", cache="warm", **dev_opts).median_us
    if extras is not None:
        extras["timing"] = t
    host_us = t.median_us
    med_s = host_us * 1e-6
    rec["method"] = {**t.method(), "input_sets": 1}
    rec["metrics"] = {
        "time_us": t.quantiles(),
        "items_per_s": case.items / med_s if med_s > 0 else 0.0,
        # bytes over host time: a true figure, never judged against the copy ceiling
        "gb_per_s": rec["case"]["bytes"] / med_s / 1e9 if med_s > 0 else 0.0,
        "ceiling_gb_per_s": None, "pct_of_ceiling": None, "graph_time_us": None, "event_vs_graph": None,
    }
    keeps_up = device_us < host_us if device_us is not None else None
    rec["dispatch"] = {"device_us": device_us, "gpu_keeps_up": keeps_up}
    rec["clocks"] = clocks if on_gpu else None
    rec["health"] = envmod.assess_health(clocks if on_gpu else None, t.noise_target_met)
    if keeps_up is False:
        rec["health"]["reasons"].append(
            f"gpu-bound: {device_us:.2f} us of device time per call >= {host_us:.2f} us of host time: "
            "a loop of these calls runs at the GPU's rate, not the host's")
    if not on_gpu:
        rec["health"]["reasons"] = [r for r in rec["health"]["reasons"] if not r.startswith("clocks unknown")]
    rec.update(status="ok", reason=None)


class _NullSampler:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

    def stats(self):
        return None


def ceiling_task(task: dict[str, Any]) -> dict[str, Any]:
    """Measure the device-to-device copy bandwidth (the roofline ceiling of this run)."""
    from . import timer

    try:
        return {"status": "ok", **timer.copy_ceiling(**task.get("ceiling", {}))}
    except BaseException as e:  # noqa: BLE001
        return {"status": classify(e), "reason": f"{type(e).__name__}: {str(e)[:800]}"}


def run_task(task: dict[str, Any], result_path: str) -> None:
    """Process entry point: run ``task`` and write the result JSON atomically to ``result_path``."""
    if hasattr(os, "setsid"):
        try:
            os.setsid()  # own process group, so a timeout kills compile workers too
        except OSError:
            pass
    res = ceiling_task(task) if task.get("kind") == "ceiling" else measure(task)
    tmp = result_path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(res, f, allow_nan=False, default=float)
    os.replace(tmp, result_path)


if __name__ == "__main__":
    with open(sys.argv[1]) as fh:
        run_task(json.load(fh), sys.argv[2])
