"""``python -m robocache.bench.regressions fit-priors results/``: refit the noise priors (:func:`.noise.main`)."""
import sys

from .noise import main

sys.exit(main())
