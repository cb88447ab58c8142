#!/usr/bin/env bash
# call 3 (nvidia-h200) at b7d079f (wip/flat): the H200 table re-tuned with the flat kernel among fuse's candidates,
# then wide_probe on the rest of the fuse losers and seed 4409's worst
set -u
export ROBOCACHE_GIT_COMMIT=b7d079f1111ca705b48ff1d72f550e741b215a10 ROBOCACHE_MACHINE=nvidia-h200
O=$OUT/r; mkdir -p $O
timeout 170 bash scripts/gpu_check.sh /tmp/u tune > $O/tune.out 2>&1
cp -r /tmp/u/tuned /tmp/u/*.log $O/ 2>/dev/null
export PYTHONPATH=$HOME/.cache/robocache-bench/site:$PWD
P=fuse/s4409-41-B118-T304-270x168-119x15-899x636,fuse/s5821-42-B5789-T48-43x31-167x25-147x27-16x12
P=$P,fuse/s2741-44-B281-T555-323x42-1508x151-709x5,fuse/s7741-43-B5539-T24-51x156-49x6-100x2-60x19
P=$P,fuse/s20261128-26-B47-T3786-4719x20-7598x18-14097x13,fuse/s4409-46-B428-T522-1049x106
timeout 330 python3 scripts/wide_probe.py --time-limit 0.15 --cases $P > $O/wide_probe2.log 2>&1
cd $OUT && tar czf all.tgz r && rm -rf r
