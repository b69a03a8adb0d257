#!/usr/bin/env bash
# GPU run of the merged views of a run of several processes (docs/processes.md, "Every process in one
# view"): a multiprocessing program (a parent that touches CUDA, 2 CUDA workers) under `record` into a
# run folder, then `export` of the folder as Chrome JSON, Perfetto and SQLite, each checked per process
# against `stats --json` (tests/gpu/procviews_check.py). Logs and the small outputs go to $OUT.
# Usage: scripts/gpu_procviews.sh [build-dir]   (default: build-gpu)
set -uo pipefail
cd "$(dirname "$0")/.."
BUILD=${1:-build-gpu}
source scripts/gpu_common.sh
require_gpu "gpu_procviews"
export PATH=/usr/local/cuda/bin:$PATH PYTHONUNBUFFERED=1
OUTDIR=${OUT:-gpu-logs}
mkdir -p "$OUTDIR"
RUNS=${PROCVIEWS_RUNS:-/tmp/procviews-runs}
rm -rf "$RUNS" && mkdir -p "$RUNS"
PY=/opt/torch/.venv/bin/python3
[[ -x $PY ]] || PY=python3

gpu_build_cli "$BUILD" "$RUNS" twinscope twinscope_cupti
T=$PWD/$BUILD/bin/twinscope
LOG=$OUTDIR/procviews.log
: >"$LOG"
step() {  # step LABEL command...
  echo "=== $1" | tee -a "$LOG"
  shift
  "$@" >>"$LOG" 2>&1
  local rc=$?
  echo "--- exit $rc" | tee -a "$LOG"
  return $rc
}
rc=0
step record "$T" record -o "$RUNS/mp/" -- "$PY" tests/gpu/trees/mp_workers.py --steps 50 || rc=1
step stats "$T" stats "$RUNS/mp" || rc=1
"$T" stats --json "$RUNS/mp" >"$OUTDIR/procviews-stats.json" 2>>"$LOG" || rc=1
step chrome "$T" export "$RUNS/mp" --format chrome -o "$RUNS/mp.json" || rc=1
step perfetto "$T" export "$RUNS/mp" --format perfetto -o "$RUNS/mp.perfetto-trace" || rc=1
if [[ -f /usr/include/sqlite3.h ]]; then
  step sqlite "$T" export "$RUNS/mp" --format sqlite -o "$RUNS/mp.sqlite" || rc=1
else
  echo "=== sqlite: not built on this machine (no sqlite3.h): not checked" | tee -a "$LOG"
fi
echo "=== check" | tee -a "$LOG"
"$PY" tests/gpu/procviews_check.py "$OUTDIR/procviews-stats.json" "$RUNS/mp.json" "$RUNS/mp.sqlite" \
  "$RUNS/mp.perfetto-trace" 2>&1 | tee -a "$LOG"
((PIPESTATUS[0] == 0)) || rc=1
cp "$RUNS/mp.perfetto-trace" "$OUTDIR/" 2>/dev/null
echo "gpu_procviews: $([[ $rc == 0 ]] && echo OK || echo FAILED) (log: $LOG)"
exit $rc
