#!/usr/bin/env bash
# session 23, call 4 (nvidia-h200-x2) at dbb573c4fcccaa52e67200df05fdf6ff62f5bab5: sampled resample and fuse on a fresh seed (5821), one op a GPU
set -u
export ROBOCACHE_GIT_COMMIT=dbb573c4fcccaa52e67200df05fdf6ff62f5bab5 ROBOCACHE_MACHINE=nvidia-h200-x2
O=$OUT/r; mkdir -p $O
OPS=resample:5821,fuse:5821 BENCH_TIMEOUT=545 timeout 585 bash scripts/gpu_check.sh /tmp/s sampled > $O/sampled.out 2>&1
cp -r /tmp/s/results $O/sampled-results; cp /tmp/s/report-sampled.md /tmp/s/sampled-*.log $O/ 2>/dev/null
cd $OUT && tar czf all.tgz r && rm -rf r
