"""The benchmark harness: one grid (specs), one timer, one record schema, one store.

specs (the grid) -> worker (check against the reference, then time, then capture the
environment) -> one record per case -> store (results/) -> report / compare / dashboard.
asv and pytest-benchmark are thin front ends over the same path.
"""
