"""Multi-GPU benchmarks: ``launch`` (one ``torchrun`` per world size, the watchdog, the records), ``rank`` (one rank of
a launch: its shard, gated and timed, the collectives) and ``scaling`` (the efficiency and bandwidth arithmetic).
docs/multigpu.md describes the suite."""
