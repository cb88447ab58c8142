export ROBOCACHE_GIT_COMMIT=df7076d ROBOCACHE_MACHINE=nvidia-h200
O=$OUT/r; mkdir -p $O
GPU_TEST_JOBS=12 timeout 290 bash scripts/gpu_check.sh /tmp/t0 tests > $O/tests.out 2>&1; cp /tmp/t0/gpu-tests.log $O/
export PYTHONPATH=$HOME/.cache/robocache-bench/site:$PWD
P=fuse/s4409-41-B118-T304-270x168-119x15-899x636,fuse/s7741-47-B2195-T257-182x5-353x4-223x50-88x1
P=$P,fuse/s6427-44-B1118-T592-2862x34-619x1,resample/s20261128-37-B4262-S58-T65-D7
P=$P,resample/s20261128-26-B12-S25076-T40922-D34,resample/s5821-43-B30108-S55-T26-D27
P=$P,resample/s20261128-27-B1873-S475-T471-D39,resample/s7301-33-B11966-S6-T28-D73-t64
timeout 270 python3 scripts/wide_probe.py --time-limit 0.15 --cases $P > $O/wide_probe.log 2>&1
cd $OUT && tar czf all.tgz r && rm -rf r
