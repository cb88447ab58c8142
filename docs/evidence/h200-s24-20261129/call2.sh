#!/usr/bin/env bash
# call 2 (nvidia-h200) at bf64e90: the tuner's GPU tests (every stage, the element kernel's new dividers), then tune
set -u
export ROBOCACHE_GIT_COMMIT=bf64e90b6946d177994787b224b7a1f64d632b79 ROBOCACHE_MACHINE=nvidia-h200
O=$OUT/r; mkdir -p $O
TESTS="tests/gpu/test_tune_gpu.py tests/gpu/test_kernels_v2_gpu.py" GPU_TEST_JOBS=12 timeout 250 bash scripts/gpu_check.sh /tmp/t1 tests > $O/tests.out 2>&1
cp /tmp/t1/gpu-tests.log $O/ 2>/dev/null
export PYTHONPATH=$HOME/.cache/robocache-bench/site:$PWD
timeout 300 bash scripts/gpu_check.sh /tmp/t2 tune > $O/tune.out 2>&1
cp -r /tmp/t2/tuned $O/ 2>/dev/null; cp /tmp/t2/*.log $O/ 2>/dev/null
cd $OUT && tar czf all.tgz r && rm -rf r
