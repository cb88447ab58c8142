#!/usr/bin/env bash
# call 4 (nvidia-h200): CuPy-call cost A/B (this tree vs .ab/main = ecd9772), a torch A/B, a profile, then tests/gpu
set -u
export ROBOCACHE_MACHINE=nvidia-h200
O=$OUT/r; mkdir -p $O
bash scripts/gpu_check.sh /tmp/w none >/dev/null 2>&1
export PYTHONPATH=$HOME/.cache/robocache-bench/site:$PWD
timeout 90 python3 scripts/call_cost_ab.py --base .ab/main --arrays cupy --repeats 2 --json $O/ab-cupy.json > $O/ab-cupy.log 2>&1
timeout 60 python3 scripts/call_cost_ab.py --base .ab/main --repeats 2 --json $O/ab-torch.json > $O/ab-torch.log 2>&1
timeout 60 python3 .ab/cupy_profile.py > $O/profile.log 2>&1
GPU_TEST_JOBS=12 timeout 300 bash scripts/gpu_check.sh /tmp/t0 tests > $O/tests.out 2>&1
cp /tmp/t0/gpu-tests.log $O/ 2>/dev/null
cd $OUT && tar czf all.tgz r && rm -rf r
