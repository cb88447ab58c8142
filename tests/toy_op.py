"""A fourth, toy op added to the harness from outside it: the proof that an op is one module.

``scale``: ``out = 2 * x + 1`` over ``x[B, L]``. Importing this module registers the op; name it in
``ROBOCACHE_BENCH_OPS=toy_op`` (child processes inherit it) and its NumPy provider as ``toy_op:PROVIDER``.
Nothing else in the repository knows about it.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from robocache.bench import ops
from robocache.bench.ops.base import ITEM_SIZE, Q, Op, Point
from robocache.providers import Provider

NAME = "toyscale"


class ToyScale(Op):
    name = NAME
    items_unit = "elements"

    def points(self) -> tuple[Point, ...]:
        return (Point(NAME, "B4-L64", {"B": 4, "L": 64}, "toy op: the harness runs an op it was never edited for",
                      Q, ("float32",), ("cpu",)),)

    def items(self, p: dict[str, Any]) -> int:
        return p["B"] * p["L"]

    def case_bytes(self, p: dict[str, Any], dtype: str) -> int:
        return 2 * p["B"] * p["L"] * ITEM_SIZE[dtype]  # x read once, out written once

    def host_inputs(self, case: Any, rng: np.random.Generator) -> dict[str, Any]:
        return {"x": rng.standard_normal((case.params["B"], case.params["L"]))}

    def call_args(self, case, inputs, convert):
        return (convert(inputs["x"], "values"),), {}

    def rounded(self, case, args, to_host):
        return {"x": to_host(args[0])}

    def reference(self, case, rounded):
        return 2.0 * rounded["x"] + 1.0


def _scale_numpy(x: np.ndarray) -> np.ndarray:
    return (2 * x + 1).astype(x.dtype)


OP = ops.register(ToyScale())
PROVIDER = Provider("toy_numpy", "NumPy (toy op)", "cpu", {NAME: _scale_numpy})
