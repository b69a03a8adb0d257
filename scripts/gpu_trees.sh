#!/usr/bin/env bash
# GPU runs of process trees and diverging twins (docs/join.md, "Processes", "Alignment"): a
# multiprocessing program with 2 CUDA workers, a torchrun job of 2 ranks on one GPU (record and
# twin, a planted slow rank), torch.compile(mode="reduce-overhead") under twin with Triton kernels as
# the target, a JAX jit program under twin, and the demo server without lockstep (staggered arrivals).
# Prints a table last (tests/gpu/trees/summarize.py); logs and joined models go to $OUT.
# Usage: scripts/gpu_trees.sh [build-dir] [scenario...]   (default: build-gpu, every scenario)
set -uo pipefail
cd "$(dirname "$0")/.."
BUILD=${1:-build-gpu}
shift || true
SCENARIOS=("$@")
((${#SCENARIOS[@]})) || SCENARIOS=(mp ranks_record ranks_twin compiled jax demo_live serve)
source scripts/gpu_common.sh
require_gpu "gpu_trees"
export PATH=/usr/local/cuda/bin:$PATH PYTHONUNBUFFERED=1
OUTDIR=${OUT:-gpu-logs}
mkdir -p "$OUTDIR"
RUNS=${TREE_RUNS:-/tmp/tree-runs}
rm -rf "$RUNS" && mkdir -p "$RUNS"
PY=/opt/torch/.venv/bin/python3
[[ -x $PY ]] || PY=python3

gpu_build_cli "$BUILD" "$RUNS"
T=$PWD/$BUILD/bin/twinscope
LOG=$OUTDIR/trees.log
: >"$LOG"

run() {  # run LABEL twinscope-args...
  local label=$1
  shift
  echo "=== $label: twinscope $*" | tee -a "$LOG"
  local t0=$SECONDS rc=0
  timeout -k 10 "${RUN_TIMEOUT:-240}" "$T" "$@" >>"$LOG" 2>&1 || rc=$?
  echo "--- $label: exit $rc after $((SECONDS - t0)) s" | tee -a "$LOG"
  echo "$label $rc $((SECONDS - t0))" >>"$RUNS/rcs.txt"
}

G=tests/gpu/trees
for s in "${SCENARIOS[@]}"; do
  case $s in
    mp) run mp twin --kernel silu -o "$RUNS/mp" -- "$PY" $G/mp_workers.py --steps 100 ;;
    ranks_record) run ranks_record record -o "$RUNS/ranks_record" -- "$PY" -m torch.distributed.run \
      --nproc-per-node 2 $G/ranks.py --steps 60 --slow-rank 1 ;;
    ranks_twin) run ranks_twin twin --kernel layer_norm -o "$RUNS/ranks_twin" -- "$PY" -m torch.distributed.run \
      --nproc-per-node 2 $G/ranks.py --steps 60 --slow-rank 1 ;;
    compiled) run compiled twin --kernel triton_ -o "$RUNS/compiled" -- "$PY" $G/compiled.py --steps 60 ;;
    jax) run jax twin --kernel fusion -o "$RUNS/jax" -- "$PY" tests/gpu/jax_twin_step.py ;;
    demo_live) run demo_live demo --live --no-lockstep --requests 16 -o "$RUNS/demo_live" ;;
    # A server that leaves through os._exit on SIGTERM: its summaries exist only through the stop request.
    serve)
      $G/serve_clients.sh http://127.0.0.1:8765 20 &
      run serve twin --serve --kernel silu --listen 127.0.0.1:8765 --duration 25 -o "$RUNS/serve" -- \
        "$PY" $G/torch_server.py --port '{port}'
      wait
      for side in primary shadow; do "$T" stats "$RUNS/serve/$side" >>"$LOG" 2>&1; done ;;
    *) echo "unknown scenario $s" | tee -a "$LOG" ;;
  esac
  # Each run's stats (text and JSON) for the table, and the small joined files for the record.
  if [[ -e $RUNS/$s || -e $RUNS/$s.d ]]; then
    "$T" stats "$RUNS/$s" >"$RUNS/$s.stats.txt" 2>&1 || true
    "$T" stats "$RUNS/$s" --json >"$RUNS/$s.stats.json" 2>>"$RUNS/$s.stats.txt" || true
    cat "$RUNS/$s.stats.txt" >>"$LOG"
    ls -R "$RUNS/$s" >>"$LOG" 2>&1
  fi
done
"$PY" $G/summarize.py "$RUNS" | tee "$OUTDIR/trees-table.txt"
tar czf "$OUTDIR/trees-json.tgz" -C "$RUNS" $(cd "$RUNS" && find . -name '*.json' -size -4M | head -400) 2>/dev/null || true
