"""Simulated bisections of one case through load spells: how often each outcome comes, per seed.

The measurer is tests/test_bisect.py's ``Sim`` (log-normal samples around each commit's level, a share of them
30% slower, a clock that advances by the samples taken); on top, every ``--stretch`` seconds of that clock the
machine is loaded by ``--spell`` with probability ``--share`` (one invocation of the harness sees one load).
Seed s plants the change at commit 1 + s % commits. With ``--module FILE``, another copy of bisect.py is run (an
older commit's, to compare): ``git show REV:robocache/bench/bisect.py > /tmp/b.py``, relative imports rewritten to
``robocache.bench``. No GPU, no git: the statistics and the search only (docs/regressions.md, "Bisection").

    python scripts/simulate_bisect_load.py --seeds 40 --sigma 0.15 --spell 1.8 --step 1.3 --expect 1.2
"""
from __future__ import annotations

import argparse
import collections
import importlib.util
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0], allow_abbrev=False)
    p.add_argument("--seeds", type=int, default=40)
    p.add_argument("--first-seed", type=int, default=0, help="seeds --first-seed .. --first-seed + --seeds - 1")
    p.add_argument("--commits", type=int, default=8)
    p.add_argument("--sigma", type=float, default=0.15, help="log-normal noise of one sample")
    p.add_argument("--tail", type=float, default=0.2, help="share of samples 30%% slower (a noisy neighbour)")
    p.add_argument("--spell", type=float, default=1.8, help="the load spell's factor on every sample")
    p.add_argument("--share", type=float, default=0.3, help="the chance that a stretch of the clock is loaded")
    p.add_argument("--stretch", type=float, default=30.0, help="seconds of the clock one load lasts")
    p.add_argument("--step", type=float, default=1.3, help="the real change (1.0: none)")
    p.add_argument("--expect", type=float, default=1.2, help="the change the alert is sure of")
    p.add_argument("--samples", type=int, default=10)
    p.add_argument("--max-samples", type=int, default=160)
    p.add_argument("--why", action="store_true", help="print the reason of each wrong \"not reproducible\"")
    p.add_argument("--module", default=None, help="a copy of bisect.py to run instead of this checkout's")
    a = p.parse_args(argv)
    sys.path[:0] = [str(ROOT), str(ROOT / "tests")]  # this checkout's robocache, whatever the venv installed
    import test_bisect as T

    if a.module:
        spec = importlib.util.spec_from_file_location("bisect_under_test", a.module)
        B = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = B  # dataclasses look their module up
        spec.loader.exec_module(B)
        T.B = B
    else:
        from robocache.bench import bisect as B
    out: collections.Counter[str] = collections.Counter()
    for s in range(a.first_seed, a.first_seed + a.seeds):
        rng, spells = np.random.default_rng(10_000 + s), {}

        def load(now: float, rng=rng, spells=spells) -> float:
            b = int(now // a.stretch)
            if b not in spells:
                spells[b] = a.spell if rng.random() < a.share else 1.0
            return spells[b]

        at = 1 + s % a.commits
        commits = [B.Commit(f"{i:040x}", i, f"c{i}") for i in range(a.commits + 1)]
        st = B.State(id="0123456789ab", machine="sim", commits=commits, cases=[B.CaseSpec(T.A)],
                     settings=B.Settings(samples=a.samples, max_samples=a.max_samples), expect={T.A: a.expect},
                     created="2026-11-28T00:00:00+00:00")
        sim = T.Sim([{T.A: (a.step if i >= at else 1.0)} for i in range(a.commits + 1)], sigma=a.sigma, seed=s,
                    tail=a.tail, load=load)
        B.bisect(st, sim, clock=sim.clock)
        right = st.status == "found" and st.culprit == at and a.step != 1.0
        if st.status == "not_reproducible" and a.step != 1.0 and a.why:
            print(f"  seed {s}: {st.reason[-160:]}")
        out["found, right" if right else "found, wrong" if st.status == "found" else st.status] += 1
    print(f"{a.seeds} seeds, step x{a.step:g}, expect x{a.expect:g}, sigma {a.sigma:g}, spells x{a.spell:g}: "
          + ", ".join(f"{k} {v}" for k, v in sorted(out.items())))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
