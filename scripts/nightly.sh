#!/usr/bin/env bash
# The nightly GPU benchmark of one machine, as .github/workflows/nightly.yml runs it (and as anyone can
# rehearse it by hand on a GPU box, or on a CPU with DEVICE=cpu ASV=0):
#
#   scripts/nightly.sh MACHINE OUTDIR
#
#   1. robocache-bench run --suite $SUITE --device $DEVICE --out OUTDIR/records --machine MACHINE
#      (each case in its own process: a failed case becomes a record with its status, the run goes on),
#      then the run's headline table -> OUTDIR/report.md;
#   2. asv over the same grid in this environment (asv machine + asv run --python=same at HEAD), our
#      records also under OUTDIR/records (front end "asv"), asv's own result files copied to OUTDIR/asv;
#   3. robocache-bench check over HISTORY (a checkout of the benchmark-results branch) plus tonight's
#      records -> OUTDIR/alerts.json (robocache-alerts/1) and OUTDIR/alerts.md;
#   4. after a confirmed regression (CONFIRM set; not with RERUNS, whose check may run away from the
#      machine): robocache-bench bisect --all over the alerts, each
#      alert group whose commit range has more than one commit (and that HISTORY/bisect has not bisected
#      yet) within BISECT_BUDGET_S seconds together -> OUTDIR/bisect/*.bisect.json, OUTDIR/bisect.md.
#   With $GITHUB_STEP_SUMMARY set (GitHub Actions), the headline table and the alerts go there too.
#
# Environment:
#   SUITE    nightly (default) or quick            DEVICE  gpu (default; never falls back to the CPU) or cpu
#   HISTORY  folder with the results history; missing or empty: the night is checked against itself only
#   CONFIRM  non-empty: `check --confirm` (re-measures alerted cases into OUTDIR/confirm first)
#   RERUNS   a folder of confirmation reruns measured elsewhere (another job's OUTDIR/confirm): `check --reruns`
#            confirms on those instead of measuring (not with CONFIRM)
#            The newest HISTORY/nights/*/MACHINE/alerts.json is the confirmation's memory (`check
#            --refuted-before`): with CONFIRM or RERUNS, change points refuted on earlier nights are tested at a
#            spent level; without, the memory is carried on (pruned to what can still be proposed)
#   ASV      0 skips step 2                        BISECT  0 skips step 4
#   BISECT_BUDGET_S  seconds of step 4 for every bisection of the night together (default 1800)
#   PRECOMPILE_JOBS  parallel torch.compile pre-pass processes of step 1 (default 4; 0: off)
#   PYTHON   the interpreter with robocache's dependencies (default python3); robocache itself is
#            imported from this checkout (PYTHONPATH), as in scripts/gpu_check.sh
# Exit code: 0 when every step succeeded and no confirmed regression; otherwise 1 (a confirmed regression,
# a failed case, a failed asv run, a failed check or bisection), always AFTER every file above was written.
# 2: bad arguments. Per-step summary lines: "NIGHTLY <step>: ...".
set -euo pipefail

usage() { sed -n '2,/^set -euo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'; }
case "${1:-}" in
  -h|--help) usage; exit 0 ;;
esac
if [ $# -ne 2 ] || [ -z "$1" ] || [ -z "$2" ]; then
  echo "usage: scripts/nightly.sh MACHINE OUTDIR   (--help for more)" >&2
  exit 2
fi
MACHINE=$1
case "$MACHINE" in
  *[!A-Za-z0-9._-]*) echo "nightly.sh: MACHINE must be letters, digits, '.', '_' or '-': $MACHINE" >&2; exit 2 ;;
esac
SUITE=${SUITE:-nightly}
DEVICE=${DEVICE:-gpu}
CONFIRM=${CONFIRM:-}
RERUNS=${RERUNS:-}
if [ -n "$CONFIRM" ] && [ -n "$RERUNS" ]; then
  echo "nightly.sh: CONFIRM measures the reruns here, RERUNS reads them from a folder: set one" >&2
  exit 2
fi
ASV=${ASV:-1}
BISECT=${BISECT:-1}
BISECT_BUDGET_S=${BISECT_BUDGET_S:-1800}
HISTORY=${HISTORY:-}
PY=${PYTHON:-python3}

mkdir -p "$2"
OUT=$(cd "$2" && pwd)
cd "$(dirname "$0")/.."
REPO=$PWD
export PYTHONUNBUFFERED=1
export NCCL_NVLS_ENABLE=0  # never NVLink multicast on shared machines
export PYTHONPATH="$REPO${PYTHONPATH:+:$PYTHONPATH}"
export ASV_PYTHONPATH="$PYTHONPATH"  # asv drops PYTHONPATH for benchmark processes unless told
export ROBOCACHE_MACHINE="$MACHINE"
COMMIT=$(git rev-parse HEAD)  # the records take theirs (and the dirty flag) from git themselves
rcb() { "$PY" -m robocache.bench.cli "$@"; }
summary() { if [ -n "${GITHUB_STEP_SUMMARY:-}" ]; then cat >> "$GITHUB_STEP_SUMMARY"; else cat > /dev/null; fi; }
mkdir -p "$OUT/records"
status=0

# 1. the CLI run (the series the alerts come from), and its headline table, before asv adds a second run
start=$(date +%s)
run_rc=0
# the torch.compile cases compile first in parallel (their timing processes then load from Inductor's cache):
# the grid holds every kernel version and both compile modes (387 cases at grid version 2)
rcb run --suite "$SUITE" --device "$DEVICE" --out "$OUT/records" --machine "$MACHINE" --no-progress \
  --precompile-jobs "${PRECOMPILE_JOBS:-4}" 2>&1 | tee "$OUT/run.log" || run_rc=${PIPESTATUS[0]}
echo "NIGHTLY run: suite $SUITE on $MACHINE ($DEVICE) at $COMMIT: exit $run_rc in $(( $(date +%s) - start )) s"
report_rc=0
rcb report "$OUT/records" --headline > "$OUT/report.md" 2> "$OUT/report.err" || report_rc=$?
[ -s "$OUT/report.err" ] || rm -f "$OUT/report.err"
{
  echo "## Nightly $SUITE on $MACHINE at \`$COMMIT\`"
  echo
  if [ "$report_rc" = 0 ]; then cat "$OUT/report.md"; else echo "(no report: $(tail -1 "$OUT/report.err"))"; fi
  echo
  [ "$run_rc" = 0 ] || echo "**Some cases failed (robocache-bench run exit $run_rc): see run.log in the artifact.**"
  echo
} | summary
[ "$run_rc" = 0 ] || status=1

# 2. asv, in this environment, at this commit
if [ "$ASV" != 0 ]; then
  start=$(date +%s)
  asv_rc=0
  mkdir -p "$OUT/asv"
  touch "$OUT/.asv-start"
  export ROBOCACHE_SUITE="$SUITE" ROBOCACHE_DEVICE="$DEVICE"
  {
    "$PY" -m benchmarks.machine --machine "$MACHINE" > /dev/null &&
    ROBOCACHE_RESULTS="$OUT/records" "$PY" -m asv run --python=same --machine "$MACHINE" \
        --set-commit-hash "$COMMIT" --show-stderr
  } > "$OUT/asv.log" 2>&1 || asv_rc=$?
  # asv's result files this run wrote (results/asv/<machine>/...), for the artifact and the results branch
  if [ -d results/asv ]; then
    find results/asv -type f -newer "$OUT/.asv-start" -printf '%P\n' | while read -r f; do
      mkdir -p "$OUT/asv/$(dirname "$f")" && cp "results/asv/$f" "$OUT/asv/$f"
    done
  fi
  rm -f "$OUT/.asv-start"
  grep -E "failed|Error" "$OUT/asv.log" | tail -20 || true
  echo "NIGHTLY asv: suite $SUITE on $MACHINE at $COMMIT: exit $asv_rc in $(( $(date +%s) - start )) s"
  if [ "$asv_rc" != 0 ]; then
    status=1
    printf '**asv run failed (exit %s): see asv.log in the artifact.**\n\n' "$asv_rc" | summary
  fi
fi

# 3. regressions over the whole history of this machine
hist=()
if [ -n "$HISTORY" ] && [ -d "$HISTORY" ]; then
  hist=("$HISTORY")
else
  echo "NIGHTLY check: no history folder (HISTORY='${HISTORY}'): tonight's records are checked alone" >&2
  printf '_No results history was available: tonight was checked against itself only._\n\n' | summary
fi
# --confirm measures the alerted cases again; those records go to OUTDIR/confirm (in the artifact), not
# into OUTDIR/records, so the history keeps one point per night and series
confirm=()
if [ -n "$CONFIRM" ]; then confirm=(--confirm --confirm-out "$OUT/confirm"); fi
# reruns measured by another job (check --reruns): the same confirmation, on records anyone can audit
if [ -n "$RERUNS" ]; then confirm=(--reruns "$RERUNS"); fi
# the confirmation's memory: the previous night's alerts.json of this machine in the history (the results branch's
# nights/DATE/MACHINE/), whose refuted change points are tested at a spent level tonight (docs/regressions.md)
# (also without a confirmation: the check carries the memory on unchanged, so a manual run without CONFIRM does
# not wipe it from the results branch)
if [ ${#hist[@]} -gt 0 ]; then
  prev=$({ find "$HISTORY/nights" -mindepth 3 -maxdepth 3 -path "*/$MACHINE/alerts.json" 2>/dev/null || true; } | sort | tail -1)
  if [ -n "$prev" ]; then confirm+=(--refuted-before "$prev"); fi
fi
rm -f "$OUT/alerts.json" "$OUT/alerts.md"  # whatever is there afterwards was written by this check
check_rc=0
rcb check "${hist[@]}" "$OUT/records" --machine "$MACHINE" --json "$OUT/alerts.json" \
  --markdown "$OUT/alerts.md" "${confirm[@]}" --fail-on-regression || check_rc=$?
if [ -f "$OUT/alerts.md" ]; then
  summary < "$OUT/alerts.md"
else
  printf '**robocache-bench check failed (exit %s) and wrote no alerts.**\n' "$check_rc" | summary
fi
# exit 1 is a regression only with the alerts written; a crash (a Python traceback also exits 1) is not
if [ "$check_rc" = 0 ] && [ -s "$OUT/alerts.json" ]; then
  echo "NIGHTLY check: $MACHINE: no confirmed regression"
elif [ "$check_rc" = 1 ] && [ -s "$OUT/alerts.json" ]; then
  echo "NIGHTLY check: $MACHINE: CONFIRMED REGRESSION (see $OUT/alerts.md)"; status=1
else
  written=missing
  if [ -s "$OUT/alerts.json" ]; then written=written; fi
  echo "NIGHTLY check: $MACHINE: check failed (exit $check_rc; alerts.json $written)"
  status=1
fi

# 4. the culprit of each confirmed regression whose range has more than one commit: bisect picks the groups
# (confirmed, slower, range > 1, not yet in HISTORY/bisect), measures each tested commit with its own harness
if [ "$check_rc" = 1 ] && [ -s "$OUT/alerts.json" ] && [ -n "$CONFIRM" ] && [ "$BISECT" != 0 ]; then
  start=$(date +%s)
  known=()
  if [ -n "$HISTORY" ] && [ -d "$HISTORY/bisect" ]; then known=(--known "$HISTORY/bisect"); fi
  bisect_rc=0
  rcb bisect --alerts "$OUT/alerts.json" --all --machine "$MACHINE" --device "$DEVICE" --suite "$SUITE" \
    --budget "$BISECT_BUDGET_S" --out "$OUT/bisect" "${known[@]}" > "$OUT/bisect.md" 2> "$OUT/bisect.log" \
    || bisect_rc=$?
  summary < "$OUT/bisect.md"
  echo "NIGHTLY bisect: $MACHINE: exit $bisect_rc in $(( $(date +%s) - start )) s (see $OUT/bisect.md)"
  if [ "$bisect_rc" != 0 ]; then
    printf '**robocache-bench bisect failed (exit %s): see bisect.log in the artifact.**\n' "$bisect_rc" | summary
    status=1
  fi
fi
exit $status
