#!/usr/bin/env bash
# GPU run of a plain Triton @triton.autotune program under `twin` (issue 31; docs/join.md, "Alignment",
# "Autotuning"): five configs of different BLOCK sizes (different grids), 100 NVTX steps "step N"
# (tests/gpu/autotune/triton_autotune.py); then tests/gpu/autotune/check.py prints, per step after the
# first, the shadow's exact launches against the primary's target launches, the diverged ones, the
# shadow's grid against the primary's final choice, and the launches the join called autotuning.
# Also two plain runs without twinscope (which config each chose). Logs and the joined files go to $OUT.
# Usage: scripts/gpu_autotune.sh [build-dir] [steps]   (default: build-gpu, 100)
set -uo pipefail
cd "$(dirname "$0")/.."
BUILD=${1:-build-gpu}
STEPS=${2:-100}
source scripts/gpu_common.sh
require_gpu "gpu_autotune"
export PATH=/usr/local/cuda/bin:$PATH PYTHONUNBUFFERED=1
OUTDIR=${OUT:-gpu-logs}
mkdir -p "$OUTDIR"
RUNS=${AUTOTUNE_RUNS:-/tmp/autotune-runs}
rm -rf "$RUNS" && mkdir -p "$RUNS"
PY=/opt/torch/.venv/bin/python3
[[ -x $PY ]] || PY=python3
LOG=$OUTDIR/autotune.log
: >"$LOG"

gpu_build_cli "$BUILD" "$RUNS"
T=$PWD/$BUILD/bin/twinscope
PROG=tests/gpu/autotune/triton_autotune.py

# Two plain runs, each with a cache of its own: do they choose the same config?
for i in 1 2; do
  echo "=== plain run $i" | tee -a "$LOG"
  TRITON_CACHE_DIR="$RUNS/plain-cache-$i" timeout -k 10 300 "$PY" "$PROG" --steps "$STEPS" 2>&1 | tee -a "$LOG" | tail -1
done

echo "=== twin --kernel scale_add_kernel -o $RUNS/twin -- $PY $PROG --steps $STEPS" | tee -a "$LOG"
t0=$SECONDS
rc=0
timeout -k 10 "${RUN_TIMEOUT:-600}" "$T" twin --kernel scale_add_kernel -o "$RUNS/twin" -- "$PY" "$PROG" --steps "$STEPS" \
  >>"$LOG" 2>&1 || rc=$?
echo "--- twin: exit $rc after $((SECONDS - t0)) s" | tee -a "$LOG"
"$T" stats "$RUNS/twin" >"$OUTDIR/autotune-stats.txt" 2>&1 || true
cp "$RUNS"/twin/join.json "$OUTDIR/autotune-join.json" 2>/dev/null || true
ls -R "$RUNS/twin" >>"$LOG" 2>&1

echo "=== check (tests/gpu/autotune/check.py)" | tee -a "$LOG"
crc=0
"$PY" tests/gpu/autotune/check.py "$RUNS/twin" >"$OUTDIR/autotune-table.txt" 2>&1 || crc=$?
cat "$OUTDIR/autotune-table.txt" >>"$LOG"
# The table last: its head, the summary lines and the verdict (every step's row is in autotune-table.txt).
head -8 "$OUTDIR/autotune-table.txt"
grep -E "^(launches called|alignment|reason|steps after|check)" "$OUTDIR/autotune-table.txt"
echo "gpu_autotune: twin exit $rc, check exit $crc ($(gpu_name))"
exit $((rc || crc))
