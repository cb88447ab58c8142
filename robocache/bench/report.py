"""The old import path of the views, kept only for ``tests/test_regress.py`` (owned elsewhere this session) until
it imports :mod:`robocache.bench.views` itself; nothing in ``robocache/``, ``dashboard/``, ``benchmarks/`` or
``scripts/`` uses it. Delete this file with that change.
"""
from __future__ import annotations

from .views.kernels import call_cost_rows, journey_rows, vs_compile_cases, vs_compile_summary
from .views.pipelines import (INFERENCE_HEADER, TRAINING_HEADER, latest_pipeline_runs, pipeline_dataload_rows,
                              pipeline_inference_rows, pipeline_training_rows)
from .views.records import is_dispatch, is_pipeline, runs_per_op

__all__ = ["INFERENCE_HEADER", "TRAINING_HEADER", "call_cost_rows", "is_dispatch", "is_pipeline", "journey_rows",
           "latest_pipeline_runs", "pipeline_dataload_rows", "pipeline_inference_rows", "pipeline_training_rows",
           "runs_per_op", "vs_compile_cases", "vs_compile_summary"]
