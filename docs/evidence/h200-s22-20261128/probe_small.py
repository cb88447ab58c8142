"""tune_probe over chosen resample shapes with rows_wide kernels built with extra NVRTC options (argv[1]) and the
small-row count offered up to S = 128."""
import runpy
import sys

import robocache._launch as L
import robocache._tune as T

extra = tuple(sys.argv[1].split())
orig = L.kernel
L.kernel = lambda op, name, dev, options=(): orig(op, name, dev, tuple(options) + (extra if op == "rows_wide" else ()))
T.SMALL_MAX_S = 128
sys.argv = ["tune_probe.py", "--tuner-cands", "--ops", "resample", "--n", "0", "--shapes", sys.argv[2], "--json", sys.argv[3]]
runpy.run_path("scripts/tune_probe.py", run_name="__main__")
