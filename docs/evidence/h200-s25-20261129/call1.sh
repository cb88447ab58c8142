#!/usr/bin/env bash
# call 1 (nvidia-h200) at b7d079f (wip/flat): tests/gpu (covers a790065 and the flat kernel), then wide_probe on the
# fuse losers of the sampled seeds (flat column beside every other launch, the tuner's choice, torch.compile)
set -u
export ROBOCACHE_GIT_COMMIT=b7d079f1111ca705b48ff1d72f550e741b215a10 ROBOCACHE_MACHINE=nvidia-h200
O=$OUT/r; mkdir -p $O
GPU_TEST_JOBS=12 timeout 280 bash scripts/gpu_check.sh /tmp/t0 tests > $O/tests.out 2>&1
cp /tmp/t0/gpu-tests.log $O/ 2>/dev/null
export PYTHONPATH=$HOME/.cache/robocache-bench/site:$PWD
P=fuse/s7019-40-B181-T1409-2977x7-1841x132,fuse/s7741-47-B2195-T257-182x5-353x4-223x50-88x1
P=$P,fuse/s6113-46-B413-T368-17x2-281x1-530x166-114x21-382x25,fuse/s6427-44-B1118-T592-2862x34-619x1
P=$P,fuse/s7301-40-B13317-T16-27x1-10x1-66x100,fuse/s2741-44-B281-T555-323x42-1508x151-709x5
P=$P,fuse/s5821-42-B5789-T48-43x31-167x25-147x27-16x12,fuse/s7741-43-B5539-T24-51x156-49x6-100x2-60x19
P=$P,fuse/s20261128-26-B47-T3786-4719x20-7598x18-14097x13,fuse/s6427-11-B5-T50-234x717
timeout 270 python3 scripts/wide_probe.py --time-limit 0.15 --cases $P > $O/wide_probe.log 2>&1
cd $OUT && tar czf all.tgz r && rm -rf r
