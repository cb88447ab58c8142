#!/usr/bin/env bash
# call 2 (nvidia-h200) at b7d079f (wip/flat): fuse's sampled suite on a fresh seed, 4409 (never drawn before)
set -u
export ROBOCACHE_GIT_COMMIT=b7d079f1111ca705b48ff1d72f550e741b215a10 ROBOCACHE_MACHINE=nvidia-h200
O=$OUT/r; mkdir -p $O
OPS=fuse:4409 BENCH_TIMEOUT=510 timeout 570 bash scripts/gpu_check.sh /tmp/s sampled > $O/sampled.out 2>&1
cp -r /tmp/s/results /tmp/s/*.md /tmp/s/*.log /tmp/s/gpu-env.txt $O/ 2>/dev/null
cd $OUT && tar czf all.tgz r && rm -rf r
