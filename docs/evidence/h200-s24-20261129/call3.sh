#!/usr/bin/env bash
# call 3 (nvidia-h200) at ecd9772: the quick suite (call cost interleaved, peers, wall time)
set -u
export ROBOCACHE_GIT_COMMIT=ecd97724059a2a7352bf64117b6c10ec690768a7 ROBOCACHE_MACHINE=nvidia-h200
O=$OUT/r; mkdir -p $O
bash scripts/gpu_check.sh /tmp/w none >/dev/null 2>&1
BENCH_TIMEOUT=230 timeout 300 bash scripts/gpu_check.sh /tmp/q bench > $O/bench.out 2>&1
cp -r /tmp/q/results /tmp/q/*.md /tmp/q/bench.log $O/ 2>/dev/null
cd $OUT && tar czf all.tgz r && rm -rf r
