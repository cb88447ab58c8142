"""Views of records: what ``show``, ``report`` and ``report kernels`` print, and what the dashboard reuses.

- :mod:`.tables`: markdown text (escaping, number formats, :func:`~.tables.table`, sections and their JSON form).
- :mod:`.records`: selecting and indexing records (runs, one measurement per machine and op, record kinds).
- :mod:`.report`: one run's ``show`` and ``report`` (header, headline, dtypes, scaling, peers, roofline, health).
- :mod:`.kernels`: across machines: the kernel versions' journey, torch.compile at its best, the call cost.
- :mod:`.multigpu`: the multi-GPU scaling table. :mod:`.pipelines`: the end-to-end pipelines' tables.

Every table is built from the records alone. Speedups are ratios of medians measured side by side in one run
on one GPU; bandwidth is judged against the copy ceiling measured in that same run.
"""
