"""``python -m robocache.bench.regressions fit-priors results/`` (refit the noise priors, :func:`.noise.main`) or
``python -m robocache.bench.regressions replay`` (the out-of-sample replay of the nightly check, :func:`.replay.main`)."""
import sys

if len(sys.argv) > 1 and sys.argv[1] == "replay":
    from .replay import main as replay_main

    sys.exit(replay_main(sys.argv[2:]))

from .noise import main

sys.exit(main())
