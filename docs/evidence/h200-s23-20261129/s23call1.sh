#!/usr/bin/env bash
# session 23, call 1 (nvidia-h200) at wip/guard: the tensor-check test, call cost A/B vs main, spec probe (wip/next), vox zero probe
set -u
export ROBOCACHE_GIT_COMMIT=75eea975fc40258a2440e4f2820d125e9607271c ROBOCACHE_MACHINE=nvidia-h200
O=$OUT/r; mkdir -p $O
T0=$(date +%s)
bash scripts/gpu_check.sh /tmp/w none >/dev/null 2>&1
export PYTHONPATH=$HOME/.cache/robocache-bench/site:$PWD
echo "setup $(($(date +%s)-T0)) s" > $O/times.log
timeout 90 python3 -m pytest -q -p no:cacheprovider tests/gpu/test_kernels_v2_gpu.py -k "recent or plan_cache" > $O/guard-test.log 2>&1
echo "guard test $(($(date +%s)-T0)) s" >> $O/times.log
timeout 110 python3 scripts/call_cost_ab.py --base .ab/main --repeats 2 > $O/ab-vs-main.log 2>&1
echo "ab $(($(date +%s)-T0)) s" >> $O/times.log
SH="51510,12,42,1,float32,float32;56201,6,9,1,float16,float32;63558,31,107,1,float32,float32;64840,4,7,2,bfloat16,float32;52664,15,2,4,float16,float32;45785,36,29,2,float16,float32;65536,100,50,1,float32,float32;8192,64,128,3,float32,float64;20000,20,20,8,bfloat16,float64;70,3,3,1,float16,float32;67,11,16,1,float16,float32"
(cd .ab/next && PYTHONPATH=$HOME/.cache/robocache-bench/site:$PWD timeout 130 python3 scripts/tune_probe.py --tuner-cands --ops resample --n 0 --shapes "$SH" --json $O/spec-probe.json > $O/spec-probe.log 2>&1)
echo "spec $(($(date +%s)-T0)) s" >> $O/times.log
P=""; for f in results/h200-nvidia-h200-x4/20261128T155615Z-971a1c-sampled.records.json results/h200-nvidia-h200-x2/20261128T104906Z-607896-sampled.records.json results/h200-nvidia-h200-x4/20261128T214907Z-71ccce-sampled.records.json; do P="$P $PWD/$f"; done
(cd .ab/next && PYTHONPATH=$HOME/.cache/robocache-bench/site:$PWD timeout 150 python3 scripts/vox_probe.py --seeds 2741,5309,9437 --modes count,occupancy --variants "lib=;zk=vox_zero=kernel" --time-limit 0.2 --peers $P --json $O/vox-zero.json > $O/vox-zero.log 2>&1)
echo "vox $(($(date +%s)-T0)) s" >> $O/times.log
timeout 60 python3 scripts/host_cost_probe.py --n 5000 > $O/host-probe.log 2>&1
echo "host $(($(date +%s)-T0)) s" >> $O/times.log
cd $OUT && tar czf all.tgz r && rm -rf r
