#!/usr/bin/env bash
# GPU checks of the block probe (libtwinscope_blocks.so) on a machine with an
# NVIDIA GPU: builds what it needs (Release, build-gpu), then
#   1. correctness: blocks_workload (steps in NVTX ranges; the reshape_and_cache
#      stand-in at 1, 7, 1000, 65536 tokens x 512 threads with every 5th slot
#      negative; a 3-D grid kernel; kernels of another module) under the probe:
#      every traced launch exactly grid-size complete block records, exit >= enter,
#      orders a permutation, SM ids < SM count, unselected kernels nothing;
#      the same program under libtwinscope_cupti.so: every shadow launch key
#      found in the primary trace;
#   2. graphs: the target in a CUDA graph, replayed (how node launches arrive);
#   3. cost: blocks_bench plain / probe (target in its own module) / naive
#      probe (patch everything, copy after every launch), interleaved, twice;
#   4. `twinscope probe`: the coexistence matrix of FACTS.md on this stack.
# `scripts/gpu_blocks.sh toggle` runs scripts/gpu_blocks_toggle.sh instead (toggle mode).
# Prints a short table last. Logs and traces in $OUT/blocks (or ./gpu-logs/blocks).
# Environment: BUILD_DIR (default build-gpu), SANITIZER_ROOT (default
# /usr/local/cuda/compute-sanitizer), ITERS (bench, default 500).
set -uo pipefail
cd "$(dirname "$0")/.."
# `gpu_blocks.sh toggle`: the toggle-mode checks (patching only around sampled launches).
if [[ ${1:-} == toggle ]]; then exec bash scripts/gpu_blocks_toggle.sh; fi
ROOT=$PWD
BUILD=${BUILD_DIR:-build-gpu}
LOG=${OUT:-$ROOT/gpu-logs}/blocks
SAN=${SANITIZER_ROOT:-/usr/local/cuda/compute-sanitizer}
ITERS=${ITERS:-500}
mkdir -p "$LOG"
export PATH=/usr/local/cuda/bin:$PATH

# shellcheck source=scripts/gpu_common.sh
source scripts/gpu_common.sh
require_gpu "gpu_blocks.sh"

# ---- build ------------------------------------------------------------------------
gpu_build_blocks gpu_blocks.sh "$BUILD" "$LOG" "$SAN" twinscope_blocks blocks_workload blocks_trace_check blocks_bench bare_sanitizer twinscope twinscope_probe_child
# The CUPTI collector, for the key cross-check (optional: its own script tests it).
cmake --build "$BUILD" -j "$(nproc)" --target twinscope_cupti >>"$LOG/build.log" 2>&1 || true
BIN=$ROOT/$BUILD/bin
PROBE=$ROOT/$BUILD/lib/libtwinscope_blocks.so
CUPTI=$ROOT/$BUILD/lib/libtwinscope_cupti.so
export LD_LIBRARY_PATH=$SAN:${LD_LIBRARY_PATH:-}
KERNELS='reshape_and_cache_flash;re:^_Z13grid3d_kernelPf$'

# blocks <trace> <env...> -- <command...>: runs the command under the probe.
blocks() {
  local out=$1
  shift
  rm -f "$out"
  timeout "${RUN_TIMEOUT:-120}" env CUDA_INJECTION64_PATH="$PROBE" NVTX_INJECTION64_PATH="$PROBE" TWINSCOPE_OUTPUT="$out" "$@"
}
json() { python3 -c "import json,sys; d=json.load(open(sys.argv[1])); print(eval(sys.argv[2]))" "$@" 2>/dev/null || echo "?"; }

# ---- 1. correctness ------------------------------------------------------------------
echo "== correctness: blocks_workload under the probe"
blocks "$LOG/correct.tsc" TWINSCOPE_KERNELS="$KERNELS" "$BIN/blocks_workload" "$LOG/correct.expect.json" 3 0 \
  >"$LOG/correct.log" 2>&1
correct_rc=$?
primary_args=()
if [[ -f $CUPTI ]]; then
  echo "== the same program under the CUPTI collector (launch keys)"
  rm -f "$LOG/primary.tsc"
  env CUDA_INJECTION64_PATH="$CUPTI" NVTX_INJECTION64_PATH="$CUPTI" TWINSCOPE_OUTPUT="$LOG/primary.tsc" \
    "$BIN/blocks_workload" "$LOG/primary.expect.json" 3 0 >"$LOG/primary.log" 2>&1 && primary_args=(--primary "$LOG/primary.tsc")
fi
"$BIN/blocks_trace_check" "$LOG/correct.tsc" "$LOG/correct.expect.json" "${primary_args[@]}" >"$LOG/correct.check.json" 2>>"$LOG/correct.log"
check_rc=$?
cat "$LOG/correct.check.json"

echo "== graphs: the target in a CUDA graph, 4 replays"
blocks "$LOG/graph.tsc" TWINSCOPE_KERNELS="$KERNELS" "$BIN/blocks_workload" "$LOG/graph.expect.json" 0 4 \
  >"$LOG/graph.log" 2>&1
"$BIN/blocks_trace_check" "$LOG/graph.tsc" "$LOG/graph.expect.json" >"$LOG/graph.check.json" 2>>"$LOG/graph.log"
graph_rc=$?
cat "$LOG/graph.check.json"

# ---- 3. cost ---------------------------------------------------------------------------
echo "== cost: blocks_bench $ITERS iterations x 3, plain / probe / floor / naive, interleaved, twice"
# floor: the probe in always mode with every launch sampled out (TWINSCOPE_EVERY huge): the module is patched but the patch
# returns at once, so this is what the Sanitizer's per-thread patch call alone costs.
for round in 1 2; do
  "$BIN/blocks_bench" "$ITERS" 3 >"$LOG/bench.plain.$round.jsonl" 2>>"$LOG/bench.log"
  blocks "$LOG/bench.probe.tsc" TWINSCOPE_KERNELS=reshape_and_cache_flash TWINSCOPE_QUIET=1 \
    "$BIN/blocks_bench" "$ITERS" 3 >"$LOG/bench.probe.$round.jsonl" 2>>"$LOG/bench.log"
  blocks "$LOG/bench.floor.tsc" TWINSCOPE_KERNELS=reshape_and_cache_flash TWINSCOPE_EVERY=1000000000 TWINSCOPE_BLOCKS_PATCH=always TWINSCOPE_QUIET=1 \
    "$BIN/blocks_bench" "$ITERS" 3 >"$LOG/bench.floor.$round.jsonl" 2>>"$LOG/bench.log"
  floor_rc[$round]=$?
  blocks "$LOG/bench.naive.tsc" TWINSCOPE_KERNELS=reshape_and_cache_flash TWINSCOPE_BLOCKS_NAIVE=1 TWINSCOPE_QUIET=1 \
    "$BIN/blocks_bench" "$ITERS" 3 >"$LOG/bench.naive.$round.jsonl" 2>>"$LOG/bench.log"
done
# A crash of the floor variant (sampling, seen at exit before): a backtrace.
if [[ ${floor_rc[1]} != 0 || ${floor_rc[2]} != 0 ]]; then
  echo "== floor variant exited ${floor_rc[1]} / ${floor_rc[2]}: backtrace under gdb"
  GDB=$(command -v gdb || command -v cuda-gdb || true)
  if [[ -n $GDB ]]; then
    timeout 120 env CUDA_INJECTION64_PATH="$PROBE" NVTX_INJECTION64_PATH="$PROBE" TWINSCOPE_OUTPUT="$LOG/bench.floor.gdb.tsc" \
      TWINSCOPE_KERNELS=reshape_and_cache_flash TWINSCOPE_EVERY=1000000000 TWINSCOPE_BLOCKS_PATCH=always \
      "$GDB" -batch -ex run -ex "thread apply all bt 25" --args "$BIN/blocks_bench" 50 1 >"$LOG/floor.gdb.txt" 2>&1
    grep -A40 "SIGSEGV\|signal" "$LOG/floor.gdb.txt" | head -60
  fi
fi
python3 - "$LOG" >"$LOG/bench.summary.txt" <<'EOF'
import json, sys, statistics
log = sys.argv[1]
res = {}
for mode in ("plain", "probe", "floor", "naive"):
    for rnd in (1, 2):
        try:
            for line in open(f"{log}/bench.{mode}.{rnd}.jsonl"):
                d = json.loads(line)
                res.setdefault((mode, d["phase"]), []).append(d["us_per_iter"])
        except Exception:
            pass
def v(m, p):
    x = res.get((m, p))
    return statistics.median(x) if x else float("nan")
print(f"{'phase':12} {'plain':>8} {'probe':>8} {'floor':>8} {'naive':>8} {'probe/plain':>12} {'floor/plain':>12} {'naive/plain':>12}  (us/iter, median of 2 runs)")
for p in ("other", "target", "mixed", "target_1", "target_65536"):
    a, b, f, c = v("plain", p), v("probe", p), v("floor", p), v("naive", p)
    print(f"{p:12} {a:8.2f} {b:8.2f} {f:8.2f} {c:8.2f} {b/a:12.2f} {f/a:12.2f} {c/a:12.2f}")
EOF
cat "$LOG/bench.summary.txt"

# Kernels of another module under the probe: a small figure (~8 us/iter) with a between-process spread larger
# than the 5% goal, so: 8 interleaved rounds of plain / bare Sanitizer subscriber (the same callbacks,
# returning at once: bench/gpu/bare_sanitizer.cpp) / probe, "other" phase only, ratio per round.
echo "== cost of the other module's kernels: 8 interleaved rounds"
rm -f "$LOG"/other.plain.jsonl "$LOG"/other.bare.jsonl "$LOG"/other.probe.jsonl
for round in 1 2 3 4 5 6 7 8; do
  "$BIN/blocks_bench" 2000 3 other >>"$LOG/other.plain.jsonl" 2>>"$LOG/bench.log"
  CUDA_INJECTION64_PATH=$ROOT/$BUILD/lib/libbare_sanitizer.so "$BIN/blocks_bench" 2000 3 other \
    >>"$LOG/other.bare.jsonl" 2>>"$LOG/bench.log"
  blocks "$LOG/other.probe.tsc" TWINSCOPE_KERNELS=reshape_and_cache_flash TWINSCOPE_QUIET=1 \
    "$BIN/blocks_bench" 2000 3 other >>"$LOG/other.probe.jsonl" 2>>"$LOG/bench.log"
done
python3 - "$LOG" >"$LOG/other.summary.txt" <<'EOF'
import json, sys, statistics
log = sys.argv[1]
plain = [json.loads(l)["us_per_iter"] for l in open(f"{log}/other.plain.jsonl")]
bare = [json.loads(l)["us_per_iter"] for l in open(f"{log}/other.bare.jsonl")]
probe = [json.loads(l)["us_per_iter"] for l in open(f"{log}/other.probe.jsonl")]
print("plain us/iter: " + " ".join(f"{x:.2f}" for x in plain))
print("bare  us/iter: " + " ".join(f"{x:.2f}" for x in bare))
print("probe us/iter: " + " ".join(f"{x:.2f}" for x in probe))
for name, xs in (("bare/plain", bare), ("probe/plain", probe)):
    r = [b / a for a, b in zip(plain, xs)]
    print(f"{name} per round: {' '.join(f'{x:.3f}' for x in r)}; median {statistics.median(r):.3f}")
r = [b / a for a, b in zip(bare, probe)]
print(f"probe/bare median {statistics.median(r):.3f}")
EOF
cat "$LOG/other.summary.txt"

# ---- 4. twinscope probe -----------------------------------------------------------------
echo "== twinscope probe"
"$BIN/twinscope" probe --json "$LOG/probe.json" --child "$BIN/twinscope_probe_child" >"$LOG/probe.txt" 2>&1
probe_rc=$?
cat "$LOG/probe.txt"

# ---- table --------------------------------------------------------------------------------
C=$LOG/correct.check.json
G=$LOG/graph.check.json
echo
echo "================ block probe on $(nvidia-smi --query-gpu=name --format=csv,noheader | head -1) ================"
printf "%-44s %s\n" "correctness (workload rc=$correct_rc)" "$( [[ $check_rc == 0 ]] && echo PASS || echo FAIL) $(json "$C" "str(d['launches'])+' launches, '+str(d['blocks_checked'])+' blocks; failures: '+str(d['failures'][:2])")"
printf "%-44s %s\n" "launch keys shadow vs CUPTI primary" "$(json "$C" "str(d.get('keys_matched','n/a'))+' / '+str(d.get('keys_total','n/a'))")"
printf "%-44s %s\n" "target kernel name as the Sanitizer gives it" "$(json "$C" "[n for n in d['kernel_names'] if 'reshape' in n]")"
printf "%-44s %s\n" "graph replays (rc=$graph_rc)" "$(json "$G" "d['graph_mode']+', '+str(d['graph_target_launches'])+' flagged; failures: '+str(d['failures'][:2])")"
printf "%-44s %s\n" "modules loaded / patched" "$(json "$C" "str(d['counters'].get('modules_loaded'))+' / '+str(d['counters'].get('modules_patched'))")"
sed 's/^/cost  /' "$LOG/bench.summary.txt"
printf "%-44s %s\n" "probe bench trace: loss counters" \
  "$("$BIN/twinscope" stats --json "$LOG/bench.probe.tsc" 2>/dev/null | python3 -c "import json,sys; c=json.load(sys.stdin)['status']['counters']; print({k:v for k,v in c.items() if any(w in k for w in ('drop','lost','overflow','missing','incomplete','decoder','forced','traced'))})" 2>/dev/null || echo '?')"
sed 's/^/other /' "$LOG/other.summary.txt"
echo "cost  goals: other probe/plain <= 1.05; target probe/plain < 2 (1000 tokens); FACTS naive mixed = 252 us/iter"
printf "%-44s %s\n" "floor (sampled-out) exit codes" "${floor_rc[1]} / ${floor_rc[2]}"
printf "%-44s %s\n" "twinscope probe (rc=$probe_rc)" "$(grep '^summary' "$LOG/probe.txt" | cut -c1-160)"
echo "logs: $LOG"
