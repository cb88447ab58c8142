"""The pipeline benchmark kinds: what a record of the ``pipelines`` suite names as its case's ``op``.

They are not ops of the kernel grid (``robocache.bench.ops``: the quick and nightly suites and every view of the
op registry are unchanged); the schema accepts them for records of this suite
(``schema.PIPELINE_KINDS``), with the unit their ``items`` count.
"""
from __future__ import annotations

from ... import providers
from ..schema import PIPELINE_KINDS

KINDS = dict(zip(PIPELINE_KINDS, ("trajectories", "trajectories", "observations")))
# The inference benchmark's backends, in the report's order: eager, SDPA, then torch.compile in every mode the
# provider table holds (the kernel grid's peer: the same names, labels and colours).
INFER_BACKENDS = ("eager", "sdpa", *(n for n in providers.names() if n.split("@")[0] == providers.COMPILE))
