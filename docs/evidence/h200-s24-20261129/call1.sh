#!/usr/bin/env bash
# next session, call 1 (nvidia-h200), checked out at wip/elem2 (main + the element kernel's unrolled search and
# 32-bit dividers): the element kernel's A/B, then tests/gpu (covers main's post-GPU review fixes too)
set -u
export ROBOCACHE_GIT_COMMIT=47b1b079540ad8488ddb4897a42fafc518f168d8 ROBOCACHE_MACHINE=nvidia-h200
O=$OUT/r; mkdir -p $O
bash scripts/gpu_check.sh /tmp/w none >/dev/null 2>&1
export PYTHONPATH=$HOME/.cache/robocache-bench/site:$PWD
SH="51510,12,42,1,float32,float32;56201,6,9,1,float16,float32;63558,31,107,1,float32,float32;64840,4,7,2,bfloat16,float32;45785,36,29,2,float16,float32;65536,100,50,1,float32,float32;70,3,3,1,float16,float32;52664,15,2,4,float16,float32;8192,64,128,3,float32,float64;3339,3,9,1,float32,float64"
timeout 140 python3 -c "import sys, runpy; import robocache._tune as T; T.SPEC_MAX_BYTES = 16; sys.argv = ['tune_probe.py', '--tuner-cands', '--ops', 'resample', '--n', '0', '--shapes', sys.argv[1], '--variants', 'new=;loop=-DRC_SPEC_POW2=0;div64=-DRC_SPEC_DIV32=0;old=-DRC_SPEC_POW2=0 -DRC_SPEC_DIV32=0', '--json', sys.argv[2]]; runpy.run_path('scripts/tune_probe.py', run_name='__main__')" "$SH" $O/elem2.json > $O/elem2.log 2>&1
timeout 90 python3 -c "import sys, runpy; import robocache._tune as T; T.SPEC_CONSTANTS = True; T.SPEC_MAX_BYTES = 16; sys.argv = ['tune_probe.py', '--tuner-cands', '--ops', 'resample', '--n', '0', '--shapes', sys.argv[1], '--json', sys.argv[2]]; runpy.run_path('scripts/tune_probe.py', run_name='__main__')" "$SH" $O/const.json > $O/const.log 2>&1
GPU_TEST_JOBS=12 timeout 310 bash scripts/gpu_check.sh /tmp/t0 tests > $O/tests.out 2>&1
cp /tmp/t0/gpu-tests.log $O/ 2>/dev/null
cd $OUT && tar czf all.tgz r && rm -rf r
