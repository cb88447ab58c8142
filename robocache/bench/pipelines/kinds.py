"""The pipeline benchmark kinds: what a record of the ``pipelines`` suite names as its case's ``op``.

Declared in the one case list (:mod:`robocache.bench.specs`: ``PIPELINE_UNITS``, ``INFER_BACKENDS``); these
names are kept for the code that imported them from here.
"""
from __future__ import annotations

from ..specs import INFER_BACKENDS, PIPELINE_UNITS

KINDS = PIPELINE_UNITS  # dataload, train, infer -> the unit their ``items`` count
__all__ = ["INFER_BACKENDS", "KINDS"]
