#!/usr/bin/env bash
# GPU run of the read side (issue 21) and the merged views of several processes (issue 19), in one call:
#   1. the README's main command (scripts/demo.sh): requests, exact rate, and the report it writes;
#   2. `stats` and `export --format perfetto` of the demo's folder, which read its saved model
#      (join.model) instead of joining again: each says so, timed against a join of the same traces;
#   3. scripts/gpu_procviews.sh on the same build: a multiprocessing run's Chrome, Perfetto and SQLite
#      views checked per process against `stats --json`.
# Logs under $OUT (default gpu-logs); prints a short table last.
# Usage: scripts/gpu_readside.sh [build-dir]   (default: build-demo)
set -uo pipefail
cd "$(dirname "$0")/.."
BUILD=${1:-build-demo}
OUTDIR=${OUT:-gpu-logs}
mkdir -p "$OUTDIR"
DEMO=/tmp/readside-demo
rows=()
row() { rows+=("$(printf '%-44s %s' "$1" "$2")"); }

t0=$SECONDS
TWINSCOPE_DEMO_OUT=$DEMO scripts/demo.sh "$BUILD" >"$OUTDIR/demo.log" 2>&1
rc=$?
row "demo.sh exit (s)" "$rc ($((SECONDS - t0)) s)"
row "demo requests" "$(grep -m1 -oE '[0-9]+/[0-9]+ requests[^,;]*' "$OUTDIR/demo.log" || echo '?')"
row "demo exact" "$(grep -m1 -iE 'exact' "$OUTDIR/demo.log" | head -c 90 || echo '?')"
if [[ -f $DEMO/report.html ]]; then
  row "report: 'reports losses' lines" "$(grep -c 'reports losses' "$DEMO/report.html")"
  row "report: step chart" "$(grep -q 'id="ts-steps"' "$DEMO/report.html" && echo present || echo absent)"
else
  row "report" "missing"
fi
row "join.model present" "$([[ -f $DEMO/join.model ]] && echo yes || echo no)"
T=$PWD/$BUILD/bin/twinscope
if [[ -x $T && -f $DEMO/join.model ]]; then
  s=$SECONDS
  "$T" stats "$DEMO" >"$OUTDIR/stats-saved.txt" 2>&1
  row "stats DIR exit, saved model said" "$? $(grep -c 'saved' "$OUTDIR/stats-saved.txt") ($((SECONDS - s)) s)"
  s=$SECONDS
  "$T" export "$DEMO" --format perfetto -o /tmp/readside.perfetto-trace >"$OUTDIR/export-saved.txt" 2>&1
  row "export DIR exit (s)" "$? ($((SECONDS - s)) s, $(stat -c %s /tmp/readside.perfetto-trace 2>/dev/null) bytes)"
  p=$(ls "$DEMO"/primary/*.tsc "$DEMO"/primary.tsc 2>/dev/null | head -1)
  sh=$(ls "$DEMO"/shadow/*.tsc "$DEMO"/shadow.tsc 2>/dev/null | head -1)
  if [[ -n $p && -n $sh ]]; then
    s=$SECONDS
    "$T" join "$p" "$sh" -o /tmp/readside-join >"$OUTDIR/join-again.txt" 2>&1
    row "join again exit (s)" "$? ($((SECONDS - s)) s)"
    # The same model, save for the traces' paths and the options a twin folder gives (concurrent, requests).
    row "join again: same matches as the saved model" "$(python3 - "$DEMO/join.json" /tmp/readside-join/join.json <<'PY'
import json, sys
a, b = (json.load(open(p)) for p in sys.argv[1:3])
sa, sb = a.get("summary", {}), b.get("summary", {})
keys = ("shadow_launches", "exact", "diverged", "time_only", "unmatched_shadow")
print("yes" if all(sa.get(k) == sb.get(k) for k in keys) else "no: " + str({k: (sa.get(k), sb.get(k)) for k in keys}))
PY
)"
  fi
  cp "$DEMO/join.json" "$OUTDIR/" 2>/dev/null
fi
OUT=$OUTDIR scripts/gpu_procviews.sh "$BUILD" >"$OUTDIR/procviews-run.log" 2>&1
row "gpu_procviews exit" "$? ($(tail -1 "$OUTDIR/procviews-run.log"))"
echo "== gpu_readside ($(date -u +%FT%TZ), $(nvidia-smi --query-gpu=name --format=csv,noheader | head -1))"
printf '%s\n' "${rows[@]}"
