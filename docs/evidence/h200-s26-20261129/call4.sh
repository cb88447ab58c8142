export ROBOCACHE_GIT_COMMIT=bc4a426 ROBOCACHE_MACHINE=nvidia-h200
bash scripts/gpu_check.sh /tmp/w none > /dev/null 2>&1
export PYTHONPATH=$HOME/.cache/robocache-bench/site:$PWD
timeout 90 python3 -m pytest -q -p no:cacheprovider -p no:xdist tests/gpu/test_kernels_v2_gpu.py::test_voxelize_mean_list_path .ab/test_diag.py tests/test_kernels_compile.py -s > $OUT/diag.log 2>&1; echo "exit $?" >> $OUT/diag.log
TESTS="tests/gpu/test_kernels_v2_gpu.py tests/gpu/test_kernels_gpu.py tests/gpu/test_first_call_gpu.py" GPU_TEST_JOBS=14 timeout 115 bash scripts/gpu_check.sh /tmp/t tests > $OUT/tests.out 2>&1; echo "exit $?" >> $OUT/tests.out; cp /tmp/t/gpu-tests.log $OUT/ 2>/dev/null
