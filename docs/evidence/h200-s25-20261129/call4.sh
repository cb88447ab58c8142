#!/usr/bin/env bash
# call 4 (nvidia-h200) at d2075eb (wip/flat with the re-tuned H200 table): the quick suite
set -u
export ROBOCACHE_GIT_COMMIT=d2075eb9b27ef814124958511fb9a77021943069 ROBOCACHE_MACHINE=nvidia-h200
O=$OUT/r; mkdir -p $O
BENCH_TIMEOUT=170 timeout 200 bash scripts/gpu_check.sh /tmp/q bench > $O/bench.out 2>&1
cp -r /tmp/q/results /tmp/q/*.md /tmp/q/bench.log $O/ 2>/dev/null
cd $OUT && tar czf all.tgz r && rm -rf r
