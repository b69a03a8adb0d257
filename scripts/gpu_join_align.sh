#!/usr/bin/env bash
# GPU check of the join's alignment (issue 20, docs/join.md "Matching"): a JAX
# jit program under `twinscope twin` must have >= 99% of the shadow's target
# launches exact; the PyTorch workload stays at 100% exact; no pair of
# different shape is ever exact; the demo server without lockstep
# (`twinscope demo --live --no-lockstep`) shows its divergence located and explained.
# Prints a table last; logs and join.json files go to $OUT (default gpu-logs).
# Usage: scripts/gpu_join_align.sh [build-dir]   (default: build-gpu)
#   JAX_PY: a Python with jax[cuda] (default: python3); TORCH_PY: with torch
#   (default /opt/torch/.venv/bin/python); JAX_KERNEL: the target pattern
#   (default: fusion, XLA's fused kernels).
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${1:-build-gpu}
source scripts/gpu_common.sh
require_gpu "gpu_join_align"
export PATH=/usr/local/cuda/bin:$PATH
OUTDIR=${OUT:-gpu-logs}
mkdir -p "$OUTDIR"
RUNS=${ALIGN_RUNS:-/tmp/align-runs}
rm -rf "$RUNS" && mkdir -p "$RUNS"
JAX_PY=${JAX_PY:-python3}
TORCH_PY=${TORCH_PY:-/opt/torch/.venv/bin/python}
[[ -x $TORCH_PY ]] || TORCH_PY=python3
gpu_build_cli "$BUILD" "$RUNS"
T=$BUILD/bin/twinscope
LOG=$OUTDIR/align.log
: >"$LOG"
run() {  # run LABEL twin-args...
  local label=$1
  shift
  echo "=== $label: twinscope twin -o $RUNS/$label $*" | tee -a "$LOG"
  "$T" twin -o "$RUNS/$label" "$@" >>"$LOG" 2>&1 || echo "--- $label: exit $?" | tee -a "$LOG"
  [[ -f $RUNS/$label/join.json ]] && cp "$RUNS/$label/join.json" "$OUTDIR/join-$label.json" || true
}
run jax --kernel "${JAX_KERNEL:-fusion}" -- "$JAX_PY" tests/gpu/jax_twin_step.py
run torch --kernel layer_norm -- "$TORCH_PY" tests/gpu/twin_torch.py
if "$T" demo --help >/dev/null 2>&1; then
  echo "=== demo_no_lockstep: twinscope demo --live --no-lockstep -o $RUNS/demo" | tee -a "$LOG"
  "$T" demo --live --no-lockstep -o "$RUNS/demo" >>"$LOG" 2>&1 || echo "--- demo: exit $?" | tee -a "$LOG"
  [[ -f $RUNS/demo/join.json ]] && cp "$RUNS/demo/join.json" "$OUTDIR/join-demo.json" || true
fi
grep -h "autotune caches\|why they diverged\|remedy:" "$LOG" | sort | uniq -c | head -20 || true
python3 - "$RUNS" <<'PY'
import json, os, sys
runs = sys.argv[1]
need = {"jax": 99.0, "torch": 100.0, "demo": None}
bad = 0
print("| run | shadow launches | exact | exact % | diverged (other shape) | time only | unmatched | regions | exact pairs of another shape | goal |")
print("|---|---|---|---|---|---|---|---|---|---|")
for name, goal in need.items():
    p = os.path.join(runs, name, "join.json")
    if not os.path.exists(p):
        print(f"| {name} | no join.json | | | | | | | | FAIL |"); bad += 1; continue
    j = json.load(open(p)); s = j["summary"]
    n = s["shadow_launches"]; e = s["exact"]; pct = 100.0 * e / n if n else 0.0
    wrong = sum(1 for l in j["launches"] if l["match"] == "exact" and l["shape_differs"])
    ok = wrong == 0 and (goal is None or pct >= goal)
    if name == "demo": ok = ok and (s["diverged"] == 0 or len(j["divergences"]) > 0)
    bad += 0 if ok else 1
    print(f"| {name} | {n} | {e} | {pct:.1f} | {s['diverged']} ({s['diverged_shape']}) | {s['time_only']} | "
          f"{s['unmatched_shadow']} | {len(j['divergences'])} | {wrong} | {'PASS' if ok else 'FAIL'} |")
    for r in j.get("reasons", []):
        print(f"  - {name}: {r['code']}: {r['text']}" + (f" (remedy: {r['remedy']})" if r["remedy"] else ""))
sys.exit(1 if bad else 0)
PY
