"""The pipeline benchmark kinds in the op registry, so their records pass the schema's op check.

They hold no single-process grid points (the quick and nightly suites are unchanged): the ``pipelines``
suite's grid is :func:`robocache.bench.pipelines.run.points`, swept by :func:`robocache.bench.pipelines.run.run`.
"""
from __future__ import annotations

from typing import Any

from .. import ops
from ..ops.base import Op


class PipelineKind(Op):
    def __init__(self, name: str, unit: str) -> None:
        self.name = name
        self.items_unit = unit

    def case_bytes(self, p: dict[str, Any], dtype: str) -> int:
        return 0  # a pipeline's bytes are what it read, counted when it runs


KINDS = {"dataload": "trajectories", "train": "trajectories", "infer": "observations"}
for _name, _unit in KINDS.items():
    if _name not in ops.names():
        ops.register(PipelineKind(_name, _unit))
