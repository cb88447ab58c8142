#!/usr/bin/env bash
# One command for a GPU check on a CUDA machine (e.g. the H200 device machine):
#   bash scripts/gpu_check.sh OUTDIR
# Runs the whole test suite (CPU tests, kernel compile checks, and the GPU tests that
# skip elsewhere) with the machine's own python3 and packages (no install, no network),
# then the demo. Writes OUTDIR/gpu-env.txt, gpu-tests.log, gpu-tests.xml (JUnit) and
# ends with one summary line. Exit code: non-zero when any test failed or no GPU test ran.
set -uo pipefail
OUT=${1:?usage: scripts/gpu_check.sh OUTDIR}
mkdir -p "$OUT"
cd "$(dirname "$0")/.."
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
export NCCL_NVLS_ENABLE=0  # never NVLink multicast on shared machines
PY=${PYTHON:-python3}

{
  date -u +"%Y-%m-%dT%H:%M:%SZ"
  git rev-parse HEAD 2>/dev/null || echo "commit unknown"
  nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.sm,clocks.mem --format=csv 2>&1
  $PY - <<'PYEOF'
import platform, importlib
print("python", platform.python_version())
for m in ("numpy", "cupy", "torch", "hypothesis", "pytest", "cuda.bindings"):
    try:
        mod = importlib.import_module(m)
        print(m, getattr(mod, "__version__", "?"))
    except Exception as e:
        print(m, "missing:", type(e).__name__)
PYEOF
} 2>&1 | tee "$OUT/gpu-env.txt"

start=$(date +%s)
$PY -m pytest tests -q -rfEs -p no:cacheprovider --junitxml="$OUT/gpu-tests.xml" 2>&1 | tee "$OUT/gpu-tests.log"
rc=${PIPESTATUS[0]}
$PY -m robocache.demo 2>&1 | tee -a "$OUT/gpu-tests.log"

$PY - "$OUT/gpu-tests.xml" "$(( $(date +%s) - start ))" "$rc" <<'PYEOF'
import sys, xml.etree.ElementTree as ET
root = ET.parse(sys.argv[1]).getroot()
gpu = {"passed": 0, "failed": 0, "skipped": 0}
allc = {"passed": 0, "failed": 0, "skipped": 0}
for tc in root.iter("testcase"):
    st = "failed" if tc.find("failure") is not None or tc.find("error") is not None else \
         "skipped" if tc.find("skipped") is not None else "passed"
    allc[st] += 1
    if tc.get("classname", "").startswith("tests.gpu"):
        gpu[st] += 1
print(f"GPU CHECK SUMMARY: gpu tests {gpu['passed']} passed, {gpu['failed']} failed, {gpu['skipped']} skipped; "
      f"all tests {allc['passed']} passed, {allc['failed']} failed, {allc['skipped']} skipped; "
      f"{sys.argv[2]} s; pytest exit {sys.argv[3]}")
sys.exit(1 if (int(sys.argv[3]) != 0 or gpu["passed"] == 0) else 0)
PYEOF
