#!/usr/bin/env bash
# The GPU bisection of issue 29 in one command, on a lent GPU machine (about 6-8 minutes):
#
#   bash scripts/gpu_bisect.sh OUTDIR
#
# scripts/rehearse_bisect.py --device gpu: a throwaway git history of this checkout (10 commits after the base)
# in which one seeded commit adds a loop of SPINS (256) __syncthreads() to robocache's v2 resample kernel
# (kernels/resample.cu) and the commit at the first probe does not import; then robocache-bench bisect on the GPU
# over resample/B256-S100-T50-D32 and resample/B4096-S100-T50-D32 (float32, robocache), each tested commit
# measured by its own harness in a git worktree, within a 500 s budget. Writes OUTDIR/bisect/seed<N>-plant/
# (the robocache-bisect/1 document and the candidates' run files, *.bisect-run.json), OUTDIR/gpu-bisect.json (the
# rehearsal's result: culprit, planted commit, time) and OUTDIR/gpu-bisect.log. Exit 0 when the planted commit
# was found and the broken one reported untestable.
#
# Environment: SEED (0), SPINS (256), COMMITS (10), BUDGET (500 s), ROBOCACHE_MACHINE (the records' machine
# name; default rehearsal-bisect-gpu), PYTHON (python3). Needs git and, when msgspec is missing, the wheels in
# .whl/ (as scripts/gpu_check.sh: docs/gpu.md).
set -uo pipefail
OUT=${1:?usage: scripts/gpu_bisect.sh OUTDIR}
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
cd "$(dirname "$0")/.."
export PYTHONUNBUFFERED=1
export NCCL_NVLS_ENABLE=0  # never NVLink multicast on shared machines
PY=${PYTHON:-python3}
SITE=${RCB_SITE:-${XDG_CACHE_HOME:-${HOME:?set HOME, XDG_CACHE_HOME or RCB_SITE (where the wheels go)}/.cache}/robocache-bench/site}
if ! $PY -c "import msgspec" 2>/dev/null && ls .whl/*.whl >/dev/null 2>&1; then
  PYTHONPATH="$SITE${PYTHONPATH:+:$PYTHONPATH}" $PY -c "import msgspec" 2>/dev/null ||
    $PY -m pip install -q --upgrade --no-index --no-deps --no-compile --no-cache-dir --target "$SITE" .whl/*.whl
  export PYTHONPATH="$SITE${PYTHONPATH:+:$PYTHONPATH}"
fi
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
command -v git >/dev/null || { echo "gpu_bisect.sh: git is needed (the rehearsal makes a git history)" >&2; exit 2; }
{
  date -u +"%Y-%m-%dT%H:%M:%SZ"
  nvidia-smi -L 2>&1 || true
  "$PY" scripts/rehearse_bisect.py --device gpu --plant-only --seed "${SEED:-0}" --spins "${SPINS:-256}" \
    --commits "${COMMITS:-10}" --budget "${BUDGET:-500}" \
    --machine "${ROBOCACHE_MACHINE:-rehearsal-bisect-gpu}" --out "$OUT/bisect" --json "$OUT/gpu-bisect.json"
} 2>&1 | tee "$OUT/gpu-bisect.log"
rc=${PIPESTATUS[0]}
echo "GPU bisect: exit $rc; the document: $(ls "$OUT"/bisect/*/*.bisect.json 2>/dev/null | head -1)"
exit "$rc"
