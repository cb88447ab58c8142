#!/usr/bin/env bash
# One command for a GPU check on a CUDA machine (e.g. the H200 device machine):
#   bash scripts/gpu_check.sh OUTDIR [tests|bench|all|aa|sampled|tune|asv|pytest|multigpu|ddp|ncu|pipelines]   (default: all = tests,bench)
#   several parts in one call: comma-separated, e.g. tests,bench,ncu
# tests: the test paths in TESTS (default: "tests/gpu tests/test_kernels_compile.py", the GPU tests and the kernels'
#        compile and register checks; the CPU suite is CI's: TESTS=tests runs it here too) with the machine's own
#        python3 and packages, then the demo; always first, so a broken kernel is seen before any timing;
# bench: the quick suite through robocache-bench (SUITE="quick nightly" runs each in turn), records of every
#        suite under OUTDIR/results/, one report per suite (OUTDIR/report-<suite>.md) and the kernel tables over
#        all of them (OUTDIR/kernels.md: journey, vs torch.compile, call cost). The torch.compile cases are
#        compiled first in PRECOMPILE_JOBS parallel processes (default half the cores, at least one; 0: off), see
#        `run --precompile-jobs` (4 processes on a fresh H200 took 67 s of a 190 s quick run: docs/gpu.md).
#        SAMPLE_SEED=N: the sampled points of seed N (`run --sample-seed`); BENCH_TIMEOUT=S stops each suite's run
#        after S seconds with SIGINT (the runner writes every finished case; its BENCH SUMMARY line then says exit
#        124: docs/gpu.md); RESUME=FILE
#        continues that cut run file (copied into OUTDIR/results/<its folder>/ first, `run --resume`; one suite
#        only, the same command otherwise, on the same still-warm machine).
# aa:    the A/A pair: the quick suite twice on this commit, then `compare` of the two runs with the results'
#        history (every robocache case should be "same"; the peers' verdicts show their run-to-run noise):
#        records under OUTDIR/results, OUTDIR/aa-compare.md. PROCESSES=K (bench and aa): `run --processes K`,
#        each case under 12 us timed in K fresh processes and reported as their median.
# sampled: the sampled suite's ops spread over the machine's GPUs, one op per GPU at once (OPS, default
#        resample,fuse,voxelize, an entry OP:SEED with a seed of its own, e.g. resample:6427,resample:9173; the GPUs:
#        CUDA_VISIBLE_DEVICES's when set, else all, GPUS=N: the first N of them): a two-GPU machine measures two ops
#        side by side, a four-GPU one all three; with more ops than GPUs a GPU takes its ops in turn (BENCH_TIMEOUT
#        is per run: plan the call's time for the longest GPU's turn). Each op is its own run
#        (`run --suite sampled --ops OP`) with SAMPLE_SEED, PROVIDERS_sampled (default robocache,torch_compile),
#        TIME_LIMIT, BENCH_TIMEOUT (each run cut with SIGINT, keeping its finished cases; continue one with the bench
#        part's RESUME) and PRECOMPILE_JOBS (default: half the cores over the runs at once); each GPU has its own
#        ROBOCACHE_CACHE_DIR, SAMPLED_CACHES/g<i> (default ~/.cache/robocache-bench/sampled-cache/g<i>, beside the
#        wheels' site: outside OUTDIR, whose files the device tool returns 8 at most; no run reads another's
#        autotuning). The machine is named after all its GPUs as the kind is (nvidia-h200-x2), records under
#        OUTDIR/results/<arch>-<machine>/, logs OUTDIR/sampled-<op>[-s<seed>].log, OUTDIR/report-sampled.md
#        (`report --sampled` over them).
# tune:  `robocache-bench tune`: the tuned launch configurations of this GPU (robocache/_tune.py) over the sampled
#        distribution's tuning seed, written to OUTDIR/tuned/<gpu>.json (copy it to robocache/tuned/ and commit).
# Machine name (bench, asv, pytest, multigpu): ROBOCACHE_MACHINE when set, else from nvidia-smi's GPU name and
#        count: one H100 -> nvidia-h100-x1, one H200 -> nvidia-h200, N of them -> nvidia-h100-xN / nvidia-h200-xN
#        (the lent machines' names); another GPU -> the hostname (never a name that claims another machine). A lent
#        machine's name in ROBOCACHE_MACHINE (nvidia-h100-x4, ...) must match the GPUs nvidia-smi lists (type, and
#        at least that many): else exit 2 before anything runs (a call for one kind may be given another).
# Needs no network: Python packages missing on the machine (msgspec) are installed from the
# wheels in .whl/ if present (see docs/gpu.md). Writes OUTDIR/gpu-env.txt, gpu-tests.log,
# gpu-tests.xml (JUnit), bench.log, report-<suite>.md, kernels.md and ends with one summary line per part.
# asv:   OUTDIR, then "asv" and asv's --bench regex: the nightly grid through asv --python=same
#        (ROBOCACHE_SUITE overrides), our records under OUTDIR/records, asv's under results/asv
#        (the files this run wrote, copied to OUTDIR/asv); with ASV_COMPARE=<commit> it ends with
#        `asv compare <commit> HEAD`; ASV_TIMEOUT=<seconds> stops asv in time to copy what it has.
# pytest: the pytest-benchmark suite (ROBOCACHE_SUITE, default quick) saved under OUTDIR/pytest.
# multigpu: the multigpu suite on every GPU of the machine (GPUS=N to use fewer): one torchrun per world size
#        1, 2, 4, 8 up to the GPU count (gpu-env.txt adds nvidia-smi topo -m); records under OUTDIR/records/<arch>-<machine>/ (one file per world
#        size), OUTDIR/multigpu.log and OUTDIR/multigpu-report.md. Machine name nvidia-h200-x<N> (H100: -h100-)
#        unless ROBOCACHE_MACHINE is set (a 2-, 4- and 8-GPU machine are different series). MULTIGPU_DEVICE=cpu GPUS=2
#        rehearses it with Gloo processes on a machine without GPUs; MULTIGPU_ARGS adds run options;
#        MULTIGPU_TIMEOUT (default 240 s; 0: none) stops it, keeping every finished case's record (the ranks'
#        writer rewrites the world size's file after each case).
# ddp:   the DDP training pipeline (docs/pipelines.md, robocache/bench/pipelines/ddp.py): one torchrun per rank
#        count 1, 2, 4, 8 up to the GPU count (GPUS=N to use fewer, DDP_RANKS=1,4 to choose), each rank on its own
#        GPU (NCCL) with its own shard of a generated dataset (DDP_MB, default 128 MB), both models trained from
#        the CPU-worker loader, the loader with one robocache.fuse per batch and each rank's resident EpisodeCache
#        (batch 32 per rank, weak scaling, 8 workers, 30 timed steps): steps/s per GPU, the share of the step spent
#        waiting for data and the efficiency against the one-rank launch, as records under
#        OUTDIR/records/<arch>-<machine>/ (<run id>-pipelines-ddp-g<k>.records.json, beside the multigpu part's;
#        machine named as there), OUTDIR/ddp.log and OUTDIR/report-ddp.md. DDP_TIMEOUT (default 240 s; 0: none)
#        stops it, keeping the records of every finished case; DDP_ARGS adds options of
#        `python -m robocache.bench.pipelines run`. MULTIGPU_DEVICE=cpu GPUS=2 rehearses it with Gloo processes.
# ncu:   Nsight Compute counters (ncu time share, DRAM % of peak, SM %, occupancy, L2 hit rate, registers) of the cases
#        named in NCU_KEYS, one profiled call each after the reference gate: the profile suite
#        (`python -m robocache.bench.pipelines profile --cases ...`), records under OUTDIR/results, OUTDIR/ncu.log.
# pipelines: the end-to-end suite (docs/pipelines.md) on one GPU: a generated robot dataset (PIPELINES_MB, default
#        128 MB), data loading at batch 32 and 128 with 4 and 8 workers (CPU workers vs robocache.fuse) and from the
#        EpisodeCache (resident, and streamed within half its size), the training step of both models at batch 32
#        and 128 from all three loaders, inference at batch 1 and 32 for eager, SDPA, torch.compile and
#        max-autotune (in that order, so a cut leaves the slowest compile out); records under
#        OUTDIR/results/<arch>-<machine>/ (traces in traces/ beside them), OUTDIR/pipelines.log and
#        OUTDIR/report-pipelines.md. Took 395-403 s before the EpisodeCache's cases (max-autotune about half; add
#        --parts dataload,train to PIPELINES_ARGS for the loaders alone); PIPELINES_TIMEOUT (default 300 s) stops
#        it, keeping the records of every case finished (the run file is rewritten after each); PIPELINES_ARGS adds
#        options of `python -m robocache.bench.pipelines run`. Then, where ncu is on PATH (PROFILE=0: not), the profile
#        suite: Nsight Compute metrics of each op's representative kernel (OUT/profile.log; PROFILE_TIMEOUT, 180 s).
# Every folder OUTDIR holds at the end (results/, records/, asv/, ...) is also packed into OUTDIR/folders.tgz: the device
# tool returns files at most two folders below its $OUT, and run files sit deeper (tar xzf folders.tgz here).
# Exit code: non-zero when a test failed, no GPU test ran, or a benchmark case failed.
set -uo pipefail
OUT=${1:?usage: scripts/gpu_check.sh OUTDIR [tests|bench|all|aa|sampled|tune|asv REGEX|pytest|multigpu|ddp|ncu|pipelines]}
WHAT=${2:-all}
# WHAT may name several parts, comma-separated (e.g. tests,bench,ncu): one device call, several parts
part() { [ "$WHAT" = all ] && { [ "$1" = tests ] || [ "$1" = bench ]; } && return 0; [[ ",$WHAT," == *",$1,"* ]]; }
if [ -n "${RESUME:-}" ]; then  # checked before any part runs (bench's RESUME: the cut run file it continues)
  [ -f "$RESUME" ] || { echo "gpu_check: RESUME=$RESUME is not a file" >&2; exit 2; }
  [ "$(wc -w <<< "${SUITE:-quick}")" = 1 ] || { echo "gpu_check: RESUME continues one suite's run, SUITE names more" >&2; exit 2; }
  RESUME=$(cd "$(dirname "$RESUME")" && pwd)/$(basename "$RESUME")  # absolute: the script moves to the checkout
fi
if part sampled; then  # its OPS entries checked before any part runs: OP or OP:SEED
  IFS=, read -r -a _ops <<< "${OPS:-resample,fuse,voxelize}"
  [ ${#_ops[@]} -gt 0 ] || { echo "gpu_check: OPS is empty; name ops, e.g. OPS=resample,fuse:6427" >&2; exit 2; }
  for _e in "${_ops[@]}"; do
    [[ "$_e" =~ ^[a-z_]+(:[0-9]+)?$ ]] || {
      echo "gpu_check: OPS entry '$_e' is not OP or OP:SEED (e.g. resample or resample:6427)" >&2; exit 2; }
  done
fi
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
cd "$(dirname "$0")/.."
export PYTHONUNBUFFERED=1
export NCCL_NVLS_ENABLE=0  # never NVLink multicast on shared machines
PY=${PYTHON:-python3}
# wheels from .whl/ go under the user's own cache (not a fixed /tmp path another user could create first)
SITE=${RCB_SITE:-${XDG_CACHE_HOME:-${HOME:?set HOME, XDG_CACHE_HOME or RCB_SITE (where the wheels go)}/.cache}/robocache-bench/site}
if ! $PY -c "import msgspec, asv" 2>/dev/null && ls .whl/*.whl >/dev/null 2>&1; then
  # (again, --upgrade, when a warm machine's earlier install lacks one: e.g. asv's wheels added later)
  PYTHONPATH="$SITE${PYTHONPATH:+:$PYTHONPATH}" $PY -c "import msgspec, asv" 2>/dev/null ||
    $PY -m pip install -q --upgrade --no-index --no-deps --no-compile --no-cache-dir --target "$SITE" .whl/*.whl
  export PYTHONPATH="$SITE${PYTHONPATH:+:$PYTHONPATH}"
fi
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
export ASV_PYTHONPATH="$PYTHONPATH"  # asv drops PYTHONPATH for benchmark processes unless told
status=0

# The device tool returns files at most two folders below its $OUT: a run file in OUTDIR/results/<arch>-<machine>/
# would stay behind. So when the script ends (its own exit, an error's, SIGINT, SIGHUP or SIGTERM: bash runs no EXIT
# trap when an untrapped SIGTERM kills it; SIGKILL always loses it), every folder of OUTDIR is packed into
# OUTDIR/folders.tgz (written whole, then renamed; docs/gpu.md). tar's exit 1 (a file changed while it was read: a
# run still writing after a signal) still packs every file; anything worse leaves no folders.tgz, never a stale one.
AT_EXIT=()  # other parts' steps to run before the folders are packed (asv copies its results in)
pack_folders() {
  local d f trc dirs=()
  for f in "${AT_EXIT[@]}"; do "$f"; done
  for d in "$OUT"/*/; do
    [ -d "$d" ] && dirs+=("$(basename "$d")")
  done
  rm -f "$OUT/folders.tgz" "$OUT/.folders.tgz.part"
  if [ ${#dirs[@]} -gt 0 ]; then
    tar czf "$OUT/.folders.tgz.part" -C "$OUT" "${dirs[@]}"
    trc=$?
    if [ "$trc" -le 1 ]; then
      mv "$OUT/.folders.tgz.part" "$OUT/folders.tgz"
    else
      rm -f "$OUT/.folders.tgz.part"
      echo "gpu_check: packing OUTDIR's folders failed (tar exit $trc): no folders.tgz" >&2
    fi
  fi
}
trap pack_folders EXIT
trap 'exit 143' TERM  # SIGINT and SIGHUP run the EXIT trap as they are

# the pipelines' dataset is HDF5: h5py from a wheel in .whl/ when the machine lacks it (docs/pipelines.md)
need_h5py() {
  if ! $PY -c "import h5py" 2>/dev/null && ls .whl/h5py-*.whl >/dev/null 2>&1; then
    [ -d "$SITE-h5py" ] || $PY -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target "$SITE-h5py" .whl/h5py-*.whl
    export PYTHONPATH="$SITE-h5py:$PYTHONPATH"
  fi
}

# The bench and aa parts' torch.compile pre-pass processes unless PRECOMPILE_JOBS says: half the machine's cores, at
# least one (nproc without the OpenMP variables, which it would otherwise obey: OMP_NUM_THREADS=1 gives 1).
HALF_CORES=$(( $(env -u OMP_NUM_THREADS -u OMP_THREAD_LIMIT nproc 2>/dev/null || echo 2) / 2 ))
[ "$HALF_CORES" -ge 1 ] || HALF_CORES=1

# The lent machines' names from the GPUs present (see the header); ROBOCACHE_MACHINE, when set, wins. $1: "multi"
# names even one GPU -xN (the multigpu suite's series), $2: the GPU count to name (default: all present).
machine_name() {
  if [ -n "${ROBOCACHE_MACHINE:-}" ]; then echo "$ROBOCACHE_MACHINE"; return; fi
  local gpu n base
  gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1)
  n=${2:-$(nvidia-smi -L 2>/dev/null | grep -c '^GPU ')}
  case "$gpu" in
    *H100*) base=nvidia-h100 ;;
    *H200*) base=nvidia-h200 ;;
    *) hostname; return ;;
  esac
  if [ "$base" = nvidia-h100 ] || [ "${1:-}" = multi ] || [ "${n:-1}" -gt 1 ]; then echo "$base-x${n:-1}"; else echo "$base"; fi
}

# A lent machine's name in ROBOCACHE_MACHINE must be this machine: a call for one kind may be given another (an
# nvidia-h100-x4 call may run on H200s when no H100 comes), and its records must not claim the other's name.
if [[ "${ROBOCACHE_MACHINE:-}" =~ ^nvidia-(h100|h200)(-x([0-9]+))?$ ]] && command -v nvidia-smi >/dev/null 2>&1; then
  want=${BASH_REMATCH[1]^^} n_want=${BASH_REMATCH[3]:-1}
  have=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1)
  n_have=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU ')
  if [[ "$have" != *"$want"* ]] || [ "$n_have" -lt "$n_want" ]; then
    echo "gpu_check.sh: ROBOCACHE_MACHINE=$ROBOCACHE_MACHINE, but this machine has $n_have x ${have:-no GPU}:" \
         "unset it (the name then follows the GPUs) or run on that machine" >&2
    exit 2
  fi
fi

if [ -z "${ROBOCACHE_GIT_COMMIT:-}" ]; then  # a lent machine's .git can be another commit's than its files (docs/gpu.md)
  echo "gpu_check: warning: ROBOCACHE_GIT_COMMIT is unset: the records take this copy's git HEAD, which on a lent" \
       "machine may not be the files' commit (robocache-bench provenance checks it afterwards)" >&2
fi
{
  date -u +"%Y-%m-%dT%H:%M:%SZ"
  echo "commit ${ROBOCACHE_GIT_COMMIT:-$(git rev-parse HEAD 2>/dev/null || echo unknown)}"
  nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.sm,clocks.mem --format=csv 2>&1
  $PY - <<'PYEOF'
import platform, importlib
print("python", platform.python_version())
try:  # the hash every record of this call carries (env.sources): `robocache-bench provenance` checks it
    from robocache.bench.provenance import tree_sources
    print("sources", tree_sources())
except Exception as e:  # noqa: BLE001
    print("sources unknown:", e)
for m in ("numpy", "cupy", "torch", "hypothesis", "pytest", "cuda.bindings", "msgspec", "tqdm", "pynvml"):
    try:
        mod = importlib.import_module(m)
        print(m, getattr(mod, "__version__", "?"))
    except Exception as e:
        print(m, "missing:", type(e).__name__)
PYEOF
  # how the GPUs are linked (NVLink/NVSwitch or PCIe): the multi-GPU figures depend on it
  part multigpu && nvidia-smi topo -m 2>&1
} 2>&1 | tee "$OUT/gpu-env.txt"

if part tests; then
  start=$(date +%s)
  # Correctness tests run in GPU_TEST_JOBS pytest-xdist processes sharing the GPU (default 6; their torch.compile
  # peers' compiles dominate: ~380 s serially on the H100, 2026-11-27), tests handed out one by one as workers
  # free up (--dist worksteal: with --dist loadfile the peers' module, 190 s of the 528 s, kept one worker busy
  # while the others idled: 267 s of wall on the H200); the tests that time or need the whole GPU
  # (SERIAL_TESTS) run alone after them. Without xdist (or GPU_TEST_JOBS=0) everything runs serially.
  SERIAL_TESTS=${SERIAL_TESTS:-tests/gpu/test_timer_gpu.py tests/gpu/test_multigpu_gpu.py tests/gpu/test_tune_gpu.py tests/gpu/test_ncu_gpu.py}
  JOBS=${GPU_TEST_JOBS:-6}
  $PY -c "import xdist" 2>/dev/null || JOBS=0
  rm -f "$OUT/gpu-tests.xml" "$OUT/gpu-tests-serial.xml"  # an earlier run's results are never counted
  # the serial tests TESTS reaches: named themselves (taken out of the parallel pass) or inside a named folder
  # (--ignore'd there); PAR: what the parallel pass runs
  IGN=""; SER=""; PAR=""
  for t in ${TESTS:-tests/gpu tests/test_kernels_compile.py}; do
    named=0
    for f in $SERIAL_TESTS; do
      [ -e "$f" ] || continue
      case "$f" in "$t") named=1; SER="$SER $f" ;; "$t"/*) IGN="$IGN --ignore=$f"; SER="$SER $f" ;; esac
    done
    [ "$named" = 1 ] || PAR="$PAR $t"
  done
  if [ "$JOBS" -gt 0 ] && [ -n "$SER" ]; then
    rc=5
    if [ -n "$PAR" ]; then
      $PY -m pytest $PAR $IGN -n "$JOBS" --dist worksteal -q -rfEs \
          -p no:cacheprovider --junitxml="$OUT/gpu-tests.xml" 2>&1 | tee "$OUT/gpu-tests.log"
      rc=${PIPESTATUS[0]}
    fi
    $PY -m pytest $SER -q -rfEs -p no:cacheprovider --junitxml="$OUT/gpu-tests-serial.xml" 2>&1 | tee -a "$OUT/gpu-tests.log"
    rc2=${PIPESTATUS[0]}
    # 5: a pass that collected nothing (every test of it elsewhere) is no failure; the other pass decides
    if [ "$rc" = 5 ]; then rc=$rc2; elif [ "$rc" = 0 ] && [ "$rc2" != 5 ]; then rc=$rc2; fi
  else
    $PY -m pytest ${TESTS:-tests/gpu tests/test_kernels_compile.py} -q -rfEs -p no:cacheprovider \
        --junitxml="$OUT/gpu-tests.xml" 2>&1 | tee "$OUT/gpu-tests.log"
    rc=${PIPESTATUS[0]}
  fi
  $PY -m robocache.demo 2>&1 | tee -a "$OUT/gpu-tests.log"
  $PY - "$(( $(date +%s) - start ))" "$rc" "$OUT/gpu-tests.xml" "$OUT/gpu-tests-serial.xml" <<'PYEOF' || status=1
import os, sys, xml.etree.ElementTree as ET
gpu = {"passed": 0, "failed": 0, "skipped": 0}
allc = {"passed": 0, "failed": 0, "skipped": 0}
for path in sys.argv[3:]:
    if not os.path.exists(path):
        continue
    for tc in ET.parse(path).getroot().iter("testcase"):
        st = "failed" if tc.find("failure") is not None or tc.find("error") is not None else \
             "skipped" if tc.find("skipped") is not None else "passed"
        allc[st] += 1
        if tc.get("classname", "").startswith("tests.gpu"):
            gpu[st] += 1
print(f"GPU CHECK SUMMARY: gpu tests {gpu['passed']} passed, {gpu['failed']} failed, {gpu['skipped']} skipped; "
      f"all tests {allc['passed']} passed, {allc['failed']} failed, {allc['skipped']} skipped; "
      f"{sys.argv[1]} s; pytest exit {sys.argv[2]}")
sys.exit(1 if (int(sys.argv[2]) != 0 or gpu["passed"] == 0 or gpu["failed"] or allc["failed"]) else 0)
PYEOF
fi

if part bench; then
  MACHINE=$(machine_name)
  : > "$OUT/bench.log"
  resume=()
  if [ -n "${RESUME:-}" ]; then  # the cut run's file where --out finds it (its folder is <arch>-<machine>)
    rdir="$OUT/results/$(basename "$(dirname "$RESUME")")"
    mkdir -p "$rdir" || exit 2
    if [ "$RESUME" != "$rdir/$(basename "$RESUME")" ]; then
      cp "$RESUME" "$rdir/" || { echo "gpu_check: RESUME=$RESUME could not be copied into $rdir" >&2; exit 2; }
    fi
    resume=(--resume "$rdir/$(basename "$RESUME")")
  fi
  limit=()
  [ -n "${BENCH_TIMEOUT:-}" ] && limit=(timeout --signal=INT --kill-after=30 "$BENCH_TIMEOUT")
  for S in ${SUITE:-quick}; do
    start=$(date +%s)
    # PROVIDERS_<suite> (e.g. PROVIDERS_nightly=robocache,robocache@v1,torch_compile) narrows a suite's
    # providers when the device time cannot cover all of them; OPS (e.g. fuse,voxelize) narrows the ops;
    # TIME_LIMIT caps each case's sampling (s).
    pvar="PROVIDERS_$S"
    "${limit[@]}" $PY -m robocache.bench.cli run --suite "$S" --device gpu --out "$OUT/results" --machine "$MACHINE" \
        --precompile-jobs "${PRECOMPILE_JOBS:-$HALF_CORES}" ${!pvar:+--providers "${!pvar}"} \
        ${OPS:+--ops "$OPS"} ${TIME_LIMIT:+--time-limit "$TIME_LIMIT"} ${SAMPLE_SEED:+--sample-seed "$SAMPLE_SEED"} \
        ${PROCESSES:+--processes "$PROCESSES"} "${resume[@]}" --no-progress 2>&1 | tee -a "$OUT/bench.log"
    brc=${PIPESTATUS[0]}
    # the latest run in OUT/results is the one just measured
    $PY -m robocache.bench.cli report "$OUT/results" --out "$OUT/report-$S.md" 2>&1 | tail -1
    echo "BENCH SUMMARY: suite $S machine $MACHINE wall $(( $(date +%s) - start )) s; exit $brc"
    [ "$brc" = 0 ] || status=1
  done
  $PY -m robocache.bench.cli report "$OUT/results" --kernels --out "$OUT/kernels.md" 2>&1 | tail -1
fi
if part aa; then
  MACHINE=$(machine_name)
  start=$(date +%s)
  : > "$OUT/aa.log"
  for i in 1 2; do
    $PY -m robocache.bench.cli run --suite quick --device gpu --out "$OUT/results" --machine "$MACHINE" \
        --precompile-jobs "${PRECOMPILE_JOBS:-$HALF_CORES}" ${TIME_LIMIT:+--time-limit "$TIME_LIMIT"} \
        ${PROCESSES:+--processes "$PROCESSES"} --no-progress >> "$OUT/aa.log" 2>&1
    arc=$?
    [ "$arc" = 0 ] || status=1
  done
  # the two newest quick runs of this machine: a records file is <run id>-<suite>.records.json, the run id
  # <UTC time>-<hex>, so the names sort oldest first
  mapfile -t RUNS < <(ls "$OUT/results/"*"-$MACHINE"/*-quick.records.json 2>/dev/null | xargs -r -n1 basename |
                      sed -E 's/^([0-9]+T[0-9]+Z-[0-9a-f]+)-.*/\1/' | sort | tail -2)
  if [ "${#RUNS[@]}" = 2 ]; then
    $PY -m robocache.bench.cli compare "${RUNS[0]}" "${RUNS[1]}" --results "$OUT/results" results \
        --history "$OUT/results" results --out "$OUT/aa-compare.md"
    crc=$?
    grep -E "^\| (robocache|same|faster|slower)|Verdicts|verdict" "$OUT/aa-compare.md" | head -5
  else
    echo "aa: expected two quick runs in $OUT/results, found ${#RUNS[@]}"; crc=2
  fi
  echo "AA SUMMARY: machine $MACHINE runs ${RUNS[*]:-none} wall $(( $(date +%s) - start )) s; compare exit $crc"
  [ "$crc" = 0 ] || status=1
fi

if part sampled; then
  # the GPUs to use: the visible ones when CUDA_VISIBLE_DEVICES narrows them (nvidia-smi lists every GPU), else
  # 0..N-1; GPUS=N takes the first N of them, never more than there are (two runs never share a GPU)
  IFS=, read -r -a DEVS <<< "${CUDA_VISIBLE_DEVICES:-}"
  if [ ${#DEVS[@]} = 0 ]; then
    n=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU ')
    for ((g = 0; g < (n > 0 ? n : 1); g++)); do DEVS+=("$g"); done
  fi
  NGPU=${GPUS:-${#DEVS[@]}}
  [ "$NGPU" -ge 1 ] 2>/dev/null || NGPU=1
  if [ "$NGPU" -gt ${#DEVS[@]} ]; then
    echo "gpu_check.sh sampled: GPUS=$NGPU, but ${#DEVS[@]} GPU(s) to use (${DEVS[*]}): using ${#DEVS[@]}" >&2
    NGPU=${#DEVS[@]}
  fi
  MACHINE=$(machine_name)
  IFS=, read -r -a SOPS <<< "${OPS:-resample,fuse,voxelize}"
  # each GPU's autotuning cache outside OUTDIR: the device tool returns at most 8 files, and a cache's tune-<gpu>.json
  # and .lock in OUTDIR/.cache-g<i>/ would come back in place of the logs, the report or folders.tgz
  CACHES=${SAMPLED_CACHES:-$(dirname "$SITE")/sampled-cache}
  AT_ONCE=$(( ${#SOPS[@]} < NGPU ? ${#SOPS[@]} : NGPU ))
  CORES=$(nproc 2>/dev/null || echo 2)
  JOBS=${PRECOMPILE_JOBS:-$(( CORES / 2 / AT_ONCE > 1 ? CORES / 2 / AT_ONCE : 1 ))}
  limit=()
  [ -n "${BENCH_TIMEOUT:-}" ] && limit=(timeout --signal=INT --kill-after=30 "$BENCH_TIMEOUT")
  start=$(date +%s)
  pids=()
  for ((g = 0; g < AT_ONCE; g++)); do
    dev=${DEVS[$g]}
    (
      grc=0
      for ((i = g; i < ${#SOPS[@]}; i += AT_ONCE)); do
        op=${SOPS[$i]%%:*} seed=${SAMPLE_SEED:-}  # an entry OP:SEED draws its own seed
        [[ "${SOPS[$i]}" == *:* ]] && seed=${SOPS[$i]#*:}
        log="$OUT/sampled-$op${seed:+-s$seed}.log"
        CUDA_VISIBLE_DEVICES=$dev ROBOCACHE_CACHE_DIR="$CACHES/g$g" "${limit[@]}" $PY -m robocache.bench.cli run \
            --suite sampled --device gpu --ops "$op" --out "$OUT/results" --machine "$MACHINE" \
            --providers "${PROVIDERS_sampled:-robocache,torch_compile}" --precompile-jobs "$JOBS" \
            ${seed:+--sample-seed "$seed"} ${TIME_LIMIT:+--time-limit "$TIME_LIMIT"} --no-progress > "$log" 2>&1
        orc=$?
        line=$(grep -h '^run ' "$log" | tail -1)
        echo "SAMPLED: op $op${seed:+ seed $seed} on GPU $dev, exit $orc$( [ "$orc" = 124 ] && echo " (cut by BENCH_TIMEOUT=$BENCH_TIMEOUT s)")${line:+; $line}"
        [ "$orc" = 0 ] || grc=1
      done
      exit $grc
    ) &
    pids+=($!)
  done
  src=0
  for p in "${pids[@]}"; do wait "$p" || src=1; done
  $PY -m robocache.bench.cli report "$OUT/results" --sampled --out "$OUT/report-sampled.md" 2>&1 | tail -1
  echo "SAMPLED SUMMARY: ops ${SOPS[*]} on $AT_ONCE GPUs at once, machine $MACHINE, wall $(( $(date +%s) - start )) s; exit $src"
  [ "$src" = 0 ] || status=1
fi

if part tune; then
  start=$(date +%s)
  $PY -m robocache.bench.cli tune --out "$OUT/tuned" ${TUNE_ARGS:-} 2>&1 | tee "$OUT/tune.log" | tail -15
  trc=${PIPESTATUS[0]}
  echo "TUNE SUMMARY: wall $(( $(date +%s) - start )) s; exit $trc"
  [ "$trc" = 0 ] || status=1
fi

if part asv; then
  COMMIT=${ROBOCACHE_GIT_COMMIT:-$(git rev-parse HEAD)}
  # asv resolves the commit in the repository: a copied working tree may come without history, so a
  # bundle of it (git bundle create .gitbundle/repo.bundle --all; carried along) is fetched first.
  if ! git rev-parse -q --verify "$COMMIT^{commit}" >/dev/null 2>&1 && [ -f .gitbundle/repo.bundle ]; then
    git fetch -q --update-head-ok .gitbundle/repo.bundle "+refs/heads/*:refs/heads/*" 2>&1 | tail -2
  fi
  MACHINE=$(machine_name)
  export ROBOCACHE_RESULTS="$OUT/records" ROBOCACHE_MACHINE="$MACHINE" ROBOCACHE_DEVICE=gpu
  start=$(date +%s)
  mkdir -p "$OUT/asv"
  # asv's results come back even if cut short; only the files this run wrote (the device tool returns few)
  touch "$OUT/.asv-start"
  asv_copy() {  # run at exit, before the folders are packed (pack_folders)
    (find results/asv -type f -newer "$OUT/.asv-start" -printf "%P\n" | while read -r f; do
       mkdir -p "$OUT/asv/$(dirname "$f")"; cp "results/asv/$f" "$OUT/asv/$f"; done; rm -f "$OUT/.asv-start")
  }
  AT_EXIT+=(asv_copy)
  $PY -m benchmarks.machine --machine "$MACHINE" > /dev/null  # asv machine --yes plus the GPU, driver and CUDA
  timeout "${ASV_TIMEOUT:-0}" $PY -m asv run --python=same --machine "$MACHINE" --set-commit-hash "$COMMIT" --bench "${3:-.}" \
      --show-stderr 2>&1 | tee "$OUT/asv.log" | grep -E "^\[|failed|Error" | tail -40
  arc=${PIPESTATUS[0]}
  echo "ASV SUMMARY: suite ${ROBOCACHE_SUITE:-nightly} bench '${3:-.}' commit $COMMIT wall $(( $(date +%s) - start )) s; exit $arc"
  if [ -n "${ASV_COMPARE:-}" ]; then
    $PY -m asv compare "$ASV_COMPARE" "$COMMIT" --machine "$MACHINE" 2>&1 | tee "$OUT/asv-compare.txt" | tail -25
  fi
  [ "$arc" = 0 ] || status=1
fi

if part pytest; then
  MACHINE=$(machine_name)
  export ROBOCACHE_RESULTS="$OUT/records" ROBOCACHE_MACHINE="$MACHINE" ROBOCACHE_DEVICE=gpu
  start=$(date +%s)
  $PY -m pytest benchmarks -q -p no:cacheprovider ${PYTEST_K:+-k "$PYTEST_K"} --benchmark-save="${ROBOCACHE_SUITE:-quick}" \
      --benchmark-storage="file://$OUT/pytest" --benchmark-columns=min,median,max,rounds 2>&1 | tail -25
  prc=${PIPESTATUS[0]}
  echo "PYTEST-BENCHMARK SUMMARY: wall $(( $(date +%s) - start )) s; exit $prc"
  [ "$prc" = 0 ] || status=1
fi
if part multigpu; then
  NGPU=${GPUS:-$(nvidia-smi -L 2>/dev/null | grep -c '^GPU ')}
  MACHINE=$(machine_name multi "$NGPU")
  start=$(date +%s)
  # NCCL_NVLS_ENABLE=0 is exported above; the launcher keeps it for every rank. A timeout's SIGTERM stops the
  # launch (the launcher kills its ranks); the finished cases' records stay.
  timeout "${MULTIGPU_TIMEOUT:-240}" $PY -m robocache.bench.cli run --suite multigpu --device "${MULTIGPU_DEVICE:-gpu}" \
      --gpus "$NGPU" --out "$OUT/records" --machine "$MACHINE" ${MULTIGPU_ARGS:-} 2>&1 | tee "$OUT/multigpu.log"
  mrc=${PIPESTATUS[0]}
  $PY -m robocache.bench.cli report "$OUT/records" --out "$OUT/multigpu-report.md" 2>&1 | tail -1
  echo "MULTIGPU SUMMARY: $NGPU GPUs, machine $MACHINE, wall $(( $(date +%s) - start )) s; exit $mrc$( [ "$mrc" = 124 ] && echo " (cut by MULTIGPU_TIMEOUT=${MULTIGPU_TIMEOUT:-240} s)")"
  [ "$mrc" = 0 ] || status=1
fi
if part ddp; then
  need_h5py
  NGPU=${GPUS:-$(nvidia-smi -L 2>/dev/null | grep -c '^GPU ')}
  MACHINE=$(machine_name multi "$NGPU")
  # rank counts 1, 2, 4, 8, 16 up to the GPUs (the one-rank launch first: the efficiency's reference)
  RANKS=${DDP_RANKS:-}
  if [ -z "$RANKS" ]; then
    for k in 1 2 4 8 16; do [ "$k" -le "${NGPU:-0}" ] && RANKS="${RANKS:+$RANKS,}$k"; done
  fi
  start=$(date +%s)
  if [ -z "$RANKS" ]; then
    echo "gpu_check.sh ddp: no GPU here (GPUS=N, or MULTIGPU_DEVICE=cpu GPUS=2 to rehearse with Gloo)" >&2
    drc=2
  else
    timeout "${DDP_TIMEOUT:-240}" $PY -m robocache.bench.pipelines run --device "${MULTIGPU_DEVICE:-gpu}" \
        --out "$OUT/records" --machine "$MACHINE" --parts "" --ddp-ranks "$RANKS" --size-mb "${DDP_MB:-128}" \
        --batch-sizes 32 --train-batches 32 --workers 8 --train-steps 30 --profile-steps 0 --models mlp,diffusion \
        ${DDP_ARGS:-} 2>&1 | tee "$OUT/ddp.log"
    drc=${PIPESTATUS[0]}
    # the latest run in OUT/records is the one just measured
    $PY -m robocache.bench.cli report "$OUT/records" --out "$OUT/report-ddp.md" 2>&1 | tail -1
  fi
  echo "DDP SUMMARY: ranks ${RANKS:-none}, machine $MACHINE, wall $(( $(date +%s) - start )) s; exit $drc$( [ "$drc" = 124 ] && echo " (cut by DDP_TIMEOUT=${DDP_TIMEOUT:-240} s)")"
  [ "$drc" = 0 ] || status=1
fi
if part ncu; then
  # Nsight Compute counters of the cases named in NCU_KEYS (space-separated <op>/<tag>/<dtype>/<provider>): the
  # profile suite (robocache/bench/pipelines/ncu.py), records under OUTDIR/results like every other suite
  MACHINE=$(machine_name)
  start=$(date +%s)
  if [ -z "${NCU_KEYS:-}" ]; then
    echo "gpu_check.sh ncu: NCU_KEYS names the cases to profile (space-separated op/tag/dtype/provider)" >&2
    nrc=2
  else
    $PY -m robocache.bench.pipelines profile --device gpu --out "$OUT/results" --machine "$MACHINE" \
        --cases "$(echo "$NCU_KEYS" | tr ' ' ',')" 2>&1 | tee "$OUT/ncu.log" | tail -40
    nrc=${PIPESTATUS[0]}
  fi
  echo "NCU SUMMARY: machine $MACHINE wall $(( $(date +%s) - start )) s; exit $nrc"
  [ "$nrc" = 0 ] || status=1
fi
if part pipelines; then
  need_h5py
  MACHINE=$(machine_name)
  start=$(date +%s)
  timeout "${PIPELINES_TIMEOUT:-300}" $PY -m robocache.bench.pipelines run --device gpu --out "$OUT/results" \
      --machine "$MACHINE" --size-mb "${PIPELINES_MB:-128}" --batch-sizes 32,128 --workers 4,8 --load-batches 40 \
      --train-steps 30 --train-batches 32,128 --profile-steps 2 --infer-batches 1,32 --infer-time 1 \
      ${PIPELINES_ARGS:-} 2>&1 | tee "$OUT/pipelines.log"
  prc=${PIPESTATUS[0]}
  # the latest run in OUT/results is the one just measured
  $PY -m robocache.bench.cli report "$OUT/results" --out "$OUT/report-pipelines.md" 2>&1 | tail -1
  echo "PIPELINES SUMMARY: machine $MACHINE wall $(( $(date +%s) - start )) s; exit $prc"
  [ "$prc" = 0 ] || status=1
  # suite profile: Nsight Compute metrics of each op's representative kernel (skipped without ncu or PROFILE=0)
  if [ "${PROFILE:-1}" != 0 ] && command -v ncu >/dev/null 2>&1; then
    start=$(date +%s)
    timeout "${PROFILE_TIMEOUT:-180}" $PY -m robocache.bench.pipelines profile --device gpu --out "$OUT/results" \
        --machine "$MACHINE" 2>&1 | tee "$OUT/profile.log"
    nrc=${PIPESTATUS[0]}
    echo "PROFILE SUMMARY: machine $MACHINE wall $(( $(date +%s) - start )) s; exit $nrc"
    [ "$nrc" = 0 ] || status=1
  fi
fi
exit $status
