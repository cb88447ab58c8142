export ROBOCACHE_GIT_COMMIT=d3bd8d5 ROBOCACHE_MACHINE=nvidia-h200
O=$OUT/r; mkdir -p $O
bash scripts/gpu_check.sh /tmp/w none > $O/none.out 2>&1
export PYTHONPATH=$HOME/.cache/robocache-bench/site:$PWD
PY=python3; echo "PY=$(command -v python3)" > $O/diag.log
$PY -c "from cuda.bindings import nvrtc; print('nvrtc alone', nvrtc.nvrtcVersion())" >> $O/diag.log 2>&1
$PY -c "import cupy, torch; cupy.RawKernel('extern \"C\" __global__ void k(){}','k').compile(); from cuda.bindings import nvrtc; print('nvrtc after cupy', nvrtc.nvrtcVersion(), cupy.cuda.nvrtc.getVersion())" >> $O/diag.log 2>&1
timeout 80 $PY -m pytest -q -p no:cacheprovider -p no:xdist tests/test_kernels_compile.py > $O/compile-alone.log 2>&1; echo "exit $?" >> $O/compile-alone.log
timeout 120 $PY -m pytest -q -p no:cacheprovider -p no:xdist tests/gpu/test_kernels_v2_gpu.py::test_voxelize_mean_list_path tests/test_kernels_compile.py > $O/compile-after-list.log 2>&1; echo "exit $?" >> $O/compile-after-list.log
R=results/h200-nvidia-h200-x4
PEERS="$R/20261128T172305Z-2f22aa-sampled.records.json $R/20261128T184408Z-18f85b-sampled.records.json
       $R/20261128T134914Z-f4ff71-sampled.records.json $R/20261128T214907Z-71ccce-sampled.records.json
       $R/20261128T153431Z-6196e3-sampled.records.json results/h200-nvidia-h200/20261128T052651Z-dce920-sampled.records.json"
timeout -s INT 200 $PY scripts/vox_probe.py --seeds 9437,2,3318 --modes mean     --variants "dense=vox_list=False;list=vox_list=True;rule=vox_list=None" --time-limit 0.2 --peers $PEERS     > $O/vox-list-probe.log 2>&1
echo "vox_probe exit $?" >> $O/vox-list-probe.log
P=resample/s5821-43-B30108-S55-T26-D27,resample/s20261128-27-B1873-S475-T471-D39,resample/s7301-33-B11966-S6-T28-D73-t64
timeout 100 $PY scripts/wide_probe.py --time-limit 0.15 --cases $P > $O/wide_probe.log 2>&1
cd $OUT && tar czf all.tgz r && rm -rf r
