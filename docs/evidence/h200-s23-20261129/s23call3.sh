#!/usr/bin/env bash
# session 23, call 3 (nvidia-h200) at wip/s23 dbb573c4fcccaa52e67200df05fdf6ff62f5bab5: the GPU tests
set -u
export ROBOCACHE_GIT_COMMIT=dbb573c4fcccaa52e67200df05fdf6ff62f5bab5 ROBOCACHE_MACHINE=nvidia-h200
O=$OUT/r; mkdir -p $O
GPU_TEST_JOBS=12 timeout 575 bash scripts/gpu_check.sh /tmp/t0 tests > $O/tests.out 2>&1
cp /tmp/t0/gpu-tests.log $O/ 2>/dev/null
cd $OUT && tar czf all.tgz r && rm -rf r
