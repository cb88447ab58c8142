"""The launch floor of a dispatch case: a bare CuPy RawKernel launch with the op's argument list
(:class:`BareLaunch`), what the public call's host cost is judged against (as the copy ceiling is the ceiling
of a memory-bound kernel), and the two timed interleaved in one process (:func:`time_interleaved`,
:func:`interleaved_call_cost`).

Why interleaved (issue 25): measured as separate cases in separate processes, the bare launch read 11.5 us beside
resample and 6.3 us beside fuse in one H100 run, and a public call came out at 0.97x of it, while a minimal launch
in a tight loop takes 4.7-4.9 us: the host's state (clocks, caches, other processes) drifts between processes and
between seconds. Loops of the public call and of the bare launch alternating in one process, round after round,
see the same drift; the ratio of each round is the figure, and its spread (p20/p50/p80 over the rounds) says how
far it can be trusted.
"""
from __future__ import annotations

import gc
import time
from collections.abc import Callable
from typing import Any

from .stats import quantile, stop_rule

# Each op's entry point's argument list (kernels/<op>.cu, v1: what the wrappers pass) is the op's
# ``launch_floor_args`` (robocache/bench/ops/<op>.py), for the bare launch: "ptr" a device pointer (uint64),
# "out" the one-element int32 output, "i32"/"i64" integers, "f32" floats. The launch cost grows with the
# argument count, so the floor keeps the same count.
def _launch_floor_args() -> dict[str, tuple[str, ...]]:
    from .. import ops

    return {op.name: op.launch_floor_args for op in ops.registered() if op.launch_floor_args}


def __getattr__(name: str) -> Any:
    if name == "LAUNCH_FLOOR_ARGS":  # the registered ops' argument lists, op -> kinds
        return _launch_floor_args()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


_C_TYPE = {"ptr": "const void*", "out": "int*", "i32": "int", "i64": "long long", "f32": "float"}


def launch_floor_source(op: str) -> str:
    """CUDA source of the bare kernel for ``op``: the op's argument list; thread 0 of block 0 writes the sum
    of the integer arguments to the output (so a launch can be checked), nothing else."""
    kinds = _launch_floor_args()[op]
    params = ", ".join(f"{_C_TYPE[k]} a{i}" for i, k in enumerate(kinds))
    out = next(f"a{i}" for i, k in enumerate(kinds) if k == "out")
    total = " + ".join(f"(int)a{i}" for i, k in enumerate(kinds) if k in ("i32", "i64")) or "0"
    return (f'extern "C" __global__ void rc_launch_floor_{op}({params}) {{\n'
            f"    if (blockIdx.x == 0 && threadIdx.x == 0) {{ *{out} = {total}; }}\n}}\n")


class BareLaunch:
    """The launch floor of one op: a bare CuPy RawKernel launch with precomputed arguments and a
    preallocated output, no validation and no allocation per call (what :meth:`launch` does is all a
    call costs). ``pointers``, ``ints`` and ``floats`` fill the op's ``launch_floor_args`` in order
    (the output pointer is this object's own); ``keep`` holds arrays they point into. The kernel is compiled once (CuPy's RawKernel cache) on the
    current CuPy device, launched as one block of 32 threads on CuPy's current stream.
    """

    def __init__(self, op: str, pointers: list[int], ints: list[int], floats: list[float] = (),
                 keep: list[Any] = ()) -> None:
        import numpy as np

        floor_args = _launch_floor_args()
        if op not in floor_args:
            raise ValueError(f"no bare launch for op {op!r}; expected one of {', '.join(floor_args)}")
        kinds = floor_args[op]
        want = {k: sum(1 for x in kinds if x in ks) for k, ks in (("ptr", ("ptr",)), ("int", ("i32", "i64")),
                                                                   ("f32", ("f32",)))}
        if (len(pointers), len(ints), len(floats)) != (want["ptr"], want["int"], want["f32"]):
            raise ValueError(f"{op}: the bare launch takes {want['ptr']} pointers, {want['int']} integers and "
                             f"{want['f32']} floats, got {len(pointers)}, {len(ints)}, {len(floats)}")
        import cupy  # after the checks above, which need no GPU

        self.op = op
        self.keep = tuple(keep)  # device arrays the pointers point into (e.g. a stream table): kept alive
        self.out = cupy.zeros(1, dtype=cupy.int32)
        self.expected = int(np.int32(sum(int(np.int32(x)) for x in ints)))
        ps, is_, fs = iter(pointers), iter(ints), iter(floats)
        conv = {"ptr": lambda: np.uint64(next(ps)), "out": lambda: np.uint64(self.out.data.ptr),
                "i32": lambda: np.int32(next(is_)), "i64": lambda: np.int64(next(is_)),
                "f32": lambda: np.float32(next(fs))}
        self.args = tuple(conv[k]() for k in kinds)
        self.kernel = cupy.RawKernel(launch_floor_source(op), f"rc_launch_floor_{op}")
        kernel, args = self.kernel, self.args

        def launch() -> None:
            kernel((1,), (32,), args)
        self.launch = launch  # a closure over locals: no attribute lookups in the timed call

    def check(self) -> dict[str, Any]:
        """Launch once, synchronize, and check the output (schema ``Check``; exact, tolerance 0)."""
        import cupy

        self.out.fill(-1)
        self.launch()
        got = int(cupy.asnumpy(self.out)[0])
        diff = abs(got - self.expected)
        return {"passed": diff == 0, "max_abs_err": float(diff), "max_rel_err": None, "tolerance": 0.0,
                "bad_fraction": float(diff != 0)}


# --- the public call and the bare launch, interleaved --------------------------------------------------------

_LOOP_MAX_CALLS = 200  # calls per loop at most: a loop never fills the launch queue (as time_host_loop)


def time_interleaved(variants: dict[str, Callable[[], Any]], floor: str, *, sync: Callable[[], Any] | None = None,
                     min_rounds: int = 15, max_rounds: int = 400, time_limit_s: float = 1.0, noise_target: float = 0.02,
                     warmup_s: float = 0.05, target_loop_s: float = 1e-3, max_calls_per_loop: int = _LOOP_MAX_CALLS,
                     clock: Callable[[], int] = time.perf_counter_ns) -> dict[str, Any]:
    """Host time per call of each of ``variants`` (name -> zero-argument call), timed interleaved: every round
    times one loop of each (the same number of calls, ``calls_per_loop``), in an order rotated by one each round
    (so no variant always follows another); ``sync`` (the device's synchronize) runs before every loop, outside the
    clock, so each loop starts with an empty launch queue. Per round, each variant's time per call over the
    ``floor`` variant's time per call of the same round is one ratio sample.

    Stops when every ratio's median is known to ``noise_target`` (the timers' :func:`stop_rule`) after
    ``min_rounds``, or at ``max_rounds``, or after ``time_limit_s`` of rounds. The garbage collector stays on, as in
    ``time_host_loop`` (a call's allocations are part of its cost); one collection runs before the rounds.

    Returns ``rounds``, ``calls_per_loop``, ``us`` (name -> median time per call over the rounds), ``ratio`` (name
    -> {p20, p50, p80} of the per-round ratios; the floor's own is left out), ``noise`` (name -> the ratio median's
    relative 95% half-width) and ``noise_target_met``.
    """
    if floor not in variants or len(variants) < 2:
        raise ValueError(f"need the floor {floor!r} and at least one other variant, got {list(variants)}")
    if min_rounds < 1 or max_rounds < min_rounds or time_limit_s <= 0 or max_calls_per_loop < 1:
        raise ValueError("need 1 <= min_rounds <= max_rounds, time_limit_s > 0 and max_calls_per_loop >= 1")
    drain = sync if sync is not None else (lambda: None)
    names = list(variants)
    # warm-up: every variant at least twice (the first call may compile, import or allocate a cache), then
    # round-robin until warmup_s has passed; the slowest variant's time per call sizes the loops
    per_call: dict[str, list[int]] = {n: [] for n in names}
    for n in names:
        variants[n]()
    drain()
    t0 = time.perf_counter()
    while min(len(v) for v in per_call.values()) < 2 or time.perf_counter() - t0 < warmup_s:
        for n in names:
            a = clock()
            variants[n]()
            per_call[n].append(clock() - a)
        drain()
    slowest = max(sum(v) / len(v) for v in per_call.values()) / 1e9
    reps = max(1, min(max_calls_per_loop, round(target_loop_s / slowest) if slowest > 0 else 1))
    gc.collect()
    us: dict[str, list[float]] = {n: [] for n in names}
    ratios: dict[str, list[float]] = {n: [] for n in names if n != floor}
    noise: dict[str, float | None] = {n: None for n in ratios}
    met = False
    start = time.perf_counter()
    rounds = 0
    while True:
        order = names[rounds % len(names):] + names[:rounds % len(names)]
        this: dict[str, float] = {}
        for n in order:
            fn = variants[n]
            drain()
            a = clock()
            for _ in range(reps):
                fn()
            this[n] = (clock() - a) / 1e3 / reps
        rounds += 1
        for n in names:
            us[n].append(this[n])
        if this[floor] > 0:
            for n in ratios:
                ratios[n].append(this[n] / this[floor])
        checks = [stop_rule(r, noise_target, min_rounds) for r in ratios.values()]
        noise = {n: c[1] for n, c in zip(ratios, checks)}
        met = all(c[0] for c in checks)
        if met or rounds >= max_rounds or (rounds >= min_rounds and time.perf_counter() - start >= time_limit_s):
            break
    drain()
    return {"rounds": rounds, "calls_per_loop": reps,
            "us": {n: quantile(sorted(v), 0.5) for n, v in us.items()},
            "ratio": {n: {q: quantile(sorted(v), x) for q, x in (("p20", 0.2), ("p50", 0.5), ("p80", 0.8))}
                      for n, v in ratios.items()},
            "noise": noise, "noise_target_met": met}


def _as_cupy(x: Any) -> Any:
    """``x`` with every torch CUDA tensor in it (also inside lists and tuples) a zero-copy CuPy view (DLPack)."""
    if hasattr(x, "detach") and hasattr(x, "is_cuda"):
        import cupy

        return cupy.from_dlpack(x.detach())
    if isinstance(x, (list, tuple)):
        return type(x)(_as_cupy(v) for v in x)
    return x


def interleaved_call_cost(case: Any, args: tuple, kwargs: dict[str, Any], public: Callable[[], Any], *,
                          sync: Callable[[], Any] | None = None, **options: Any) -> dict[str, Any]:
    """The call-cost case ``case``'s public call (``public``: ``robocache.<op>`` on the case's torch CUDA tensors
    ``args``), the same public call on zero-copy CuPy views of the same tensors, and the bare launch of the op's
    argument list on those views, timed interleaved in this process (:func:`time_interleaved`; ``options`` are
    its). Returns the schema's ``Interleaved`` dict: the rounds, calls per loop, each variant's median time per
    call, and the p20/p50/p80 of the per-round ratios of each public call to the bare launch."""
    import robocache

    from .. import ops

    views = _as_cupy(args)
    pointers, ints, floats, keep = ops.get(case.op).bare_args(case, views)
    bare = BareLaunch(case.op, pointers, ints, floats, keep)
    chk = bare.check()
    if not chk["passed"]:
        raise RuntimeError(f"the bare launch wrote a wrong value (off by {chk['max_abs_err']:g})")
    fn = getattr(robocache, case.op)

    def public_cupy() -> Any:
        return fn(*views, **kwargs)

    got = time_interleaved({"bare": bare.launch, "public": public, "public_cupy": public_cupy}, "bare", sync=sync,
                           **options)
    r, rc = got["ratio"]["public"], got["ratio"]["public_cupy"]
    return {"rounds": got["rounds"], "calls_per_loop": got["calls_per_loop"], "bare_us": got["us"]["bare"],
            "public_us": got["us"]["public"], "public_cupy_us": got["us"]["public_cupy"],
            "ratio_p20": r["p20"], "ratio_p50": r["p50"], "ratio_p80": r["p80"],
            "cupy_ratio_p20": rc["p20"], "cupy_ratio_p50": rc["p50"], "cupy_ratio_p80": rc["p80"],
            "noise_target_met": bool(got["noise_target_met"])}
