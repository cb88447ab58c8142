#!/usr/bin/env bash
# session 23, call 2 (nvidia-h200) at wip/s23: element kernel generic vs constants; call cost vs main; tune table
set -u
export ROBOCACHE_GIT_COMMIT=db6f25baa2531b7cc7b6dcfe37b0e0bd6101609c ROBOCACHE_MACHINE=nvidia-h200
O=$OUT/r; mkdir -p $O
T0=$(date +%s)
bash scripts/gpu_check.sh /tmp/w none >/dev/null 2>&1
export PYTHONPATH=$HOME/.cache/robocache-bench/site:$PWD
echo "setup $(($(date +%s)-T0)) s" > $O/times.log
SH="51510,12,42,1,float32,float32;56201,6,9,1,float16,float32;63558,31,107,1,float32,float32;64840,4,7,2,bfloat16,float32;45785,36,29,2,float16,float32;65536,100,50,1,float32,float32;70,3,3,1,float16,float32;67,11,16,1,float16,float32;4096,2000,1000,1,float32,float64;1,200000,50000,1,float32,float32"
timeout 100 python3 scripts/tune_probe.py --tuner-cands --ops resample --n 0 --shapes "$SH" --json $O/elem-probe.json > $O/elem-probe.log 2>&1
echo "elem $(($(date +%s)-T0)) s" >> $O/times.log
timeout 100 python3 -c "import sys, runpy; import robocache._tune as T; T.SPEC_CONSTANTS = True; sys.argv = ['tune_probe.py', '--tuner-cands', '--ops', 'resample', '--n', '0', '--shapes', sys.argv[1], '--json', sys.argv[2]]; runpy.run_path('scripts/tune_probe.py', run_name='__main__')" "$SH" $O/const-probe.json > $O/const-probe.log 2>&1
echo "const $(($(date +%s)-T0)) s" >> $O/times.log
timeout 100 python3 scripts/call_cost_ab.py --base .ab/main --repeats 2 > $O/ab-vs-main.log 2>&1
echo "ab $(($(date +%s)-T0)) s" >> $O/times.log
timeout 200 bash scripts/gpu_check.sh $O/tune tune > $O/tune.out 2>&1
echo "tune $(($(date +%s)-T0)) s" >> $O/times.log
cd $OUT && tar czf all.tgz r && rm -rf r
