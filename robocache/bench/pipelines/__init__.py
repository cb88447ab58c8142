"""End-to-end benchmarks (suite ``pipelines``): data loading, training step, policy inference, profiles.

New benchmark kinds in the one harness (same record schema, store, report, regression check, dashboard),
not a second framework: :mod:`.dataset` writes the synthetic robot dataset, :mod:`.loading` the data loaders
(CPU workers, robocache.fuse per batch, robocache.EpisodeCache) and their equality gate, :mod:`.training` the
policies and the loss-curve gate, :mod:`.inference` the transformer policy's backends, :mod:`.run` the sweep and
its records. See docs/pipelines.md.
"""
from __future__ import annotations

from .kinds import KINDS  # noqa: F401 - dataload, train, infer: the case kinds of the suite
