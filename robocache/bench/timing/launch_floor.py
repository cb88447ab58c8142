"""The launch floor of a dispatch case: a bare CuPy RawKernel launch with the op's argument list
(:class:`BareLaunch`), what the public call's host cost is judged against (as the copy ceiling is the ceiling
of a memory-bound kernel)."""
from __future__ import annotations

from typing import Any

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
