#!/usr/bin/env bash
# call 5 (nvidia-h200) at ddf1013: tests/gpu, the quick suite, then the call-cost A/B against ecd9772 (CuPy, torch)
set -u
export ROBOCACHE_GIT_COMMIT=ddf1013c353057cd37547552811f6a58152d21ad ROBOCACHE_MACHINE=nvidia-h200
O=$OUT/r; mkdir -p $O
GPU_TEST_JOBS=12 timeout 290 bash scripts/gpu_check.sh /tmp/t0 tests > $O/tests.out 2>&1
cp /tmp/t0/gpu-tests.log $O/ 2>/dev/null
export PYTHONPATH=$HOME/.cache/robocache-bench/site:$PWD
BENCH_TIMEOUT=170 timeout 200 bash scripts/gpu_check.sh /tmp/q bench > $O/bench.out 2>&1
cp -r /tmp/q/results /tmp/q/*.md /tmp/q/bench.log $O/ 2>/dev/null
timeout 45 python3 scripts/call_cost_ab.py --base .ab/main --arrays cupy --ops resample,fuse --repeats 2 --time-limit 1.5 > $O/ab-cupy.log 2>&1
timeout 35 python3 scripts/call_cost_ab.py --base .ab/main --ops voxelize,fuse --repeats 2 --time-limit 1.5 > $O/ab-torch.log 2>&1
cd $OUT && tar czf all.tgz r && rm -rf r
