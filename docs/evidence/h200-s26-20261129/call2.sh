export ROBOCACHE_GIT_COMMIT=e7d8736 ROBOCACHE_MACHINE=nvidia-h200
O=$OUT/r; mkdir -p $O
GPU_TEST_JOBS=12 timeout 300 bash scripts/gpu_check.sh /tmp/t0 tests > $O/tests.out 2>&1; cp /tmp/t0/gpu-tests.log $O/
timeout 130 bash scripts/gpu_check.sh /tmp/u tune > $O/tune.out 2>&1; cp -r /tmp/u/tuned $O/; cp /tmp/u/tune.log $O/
export PYTHONPATH=$HOME/.cache/robocache-bench/site:$PWD
R=results/h200-nvidia-h200-x4
PEERS="$R/20261128T172305Z-2f22aa-sampled.records.json $R/20261128T184408Z-18f85b-sampled.records.json
       $R/20261128T134914Z-f4ff71-sampled.records.json $R/20261128T214907Z-71ccce-sampled.records.json
       $R/20261128T153431Z-6196e3-sampled.records.json results/h200-nvidia-h200/20261128T052651Z-dce920-sampled.records.json"
timeout -s INT 130 python3 scripts/vox_probe.py --seeds 6113,8861,9437,2,3318 --modes mean     --variants "dense=vox_list=False;list=vox_list=True" --time-limit 0.2 --peers $PEERS     --json $O/vox-list-probe.json > $O/vox-list-probe.log 2>&1
echo "vox_probe exit $?" >> $O/vox-list-probe.log
cd $OUT && tar czf all.tgz r && rm -rf r
