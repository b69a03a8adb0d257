#!/usr/bin/env bash
# GPU checks of the CUPTI collector (libtwinscope_cupti.so). Run on a machine
# with an NVIDIA GPU; each mode builds what it needs (Release, build-gpu) and
# prints a short table last. Logs and traces go to $OUT/cupti-<mode> (or
# ./gpu-logs/cupti-<mode>).
#
#   scripts/gpu_cupti.sh stress   the example program traced (keys tied on a real GPU), then
#                                 seed 001: graph of one 64 KiB DtoD copy + one tiny kernel,
#                                 600,000 replays, device buffer pool limit 8, with the
#                                 mitigation and with TWINSCOPE_KERNELS_ONLY=1   (~2 min)
#   scripts/gpu_cupti.sh long     >= 30M graph-replayed kernel records, default pool:
#                                 0 invalid, 0 lost, GPU memory flat, host RSS vs untraced (~4 min)
#   scripts/gpu_cupti.sh bench    overhead: 1M eager launches, graph 100 x 10,000, PyTorch;
#                                 plain / bare CUPTI floor / floor + empty API callbacks /
#                                 twinscope (/ torch.profiler),
#                                 interleaved, 3 repetitions                     (~5 min)
#   scripts/gpu_cupti.sh ablate   what each per-launch step costs: 300,000 eager launches (wall time, and
#                                 the launch calls alone in bursts of 256: bench_kernels --eager-burst) under
#                                 twinscope with TWINSCOPE_CUPTI_SKIP=<step> (benchmark-only knob)
#                                 and without API records, against plain and the floors, ABLATE_REPS (3)
#                                 interleaved rounds (~2 min)
#   scripts/gpu_cupti.sh sigkill  a busy PyTorch program (tests/gpu/sigkill_torch.py) under
#                                 `twinscope record`, SIGKILLed after KILL_AFTER s (default 20);
#                                 `twinscope stats` on its trace: the last counters beside what
#                                 the records in the file prove, and how old the counters were
#                                 at the kill                                       (~1.5 min)
#   scripts/gpu_cupti.sh confirm  added cost per kernel, ROUNDS (7) interleaved rounds of plain / bare
#                                 floor / floor + empty callbacks (bare_cb) / twinscope (CONFIRM_VARIANTS) (eager 200,000 launches; graph 100 x 2,000), and
#                                 TORCH_ROUNDS (5) of a PyTorch eager loop of tiny ops plain /
#                                 twinscope / torch.profiler; ratios per round, median and spread;
#                                 every traced run checked for lost records and keys   (~3.5 min)
#   scripts/gpu_cupti.sh levels   the eager launch call's added cost measured inside one process:
#                                 bench_kernels --levels switches its injection between nothing (0),
#                                 activity only (1, the bare floor) and everything (2) between bursts,
#                                 LEVEL_ROUNDS (8) rounds of EAGER (20,000) calls per level; PROCS (6)
#                                 processes of each of LEVELS_VARIANTS (twinscope bare_cb bare_act_ext
#                                 bare_cb_launch; also ts_skip_<step[+step]> / ts_skip_all: twinscope with
#                                 TWINSCOPE_CUPTI_SKIP, ts_no_api: without API records), interleaved, and
#                                 plain processes to check level 0 against no injection; per variant,
#                                 L2-L1 (what the callbacks and their work cost) and (L2-L0)/(L1-L0); then
#                                 bench_kernels --primitives (clock reads, cuptiGetTimestamp, ...) (~3 min)
# Environment: BUILD_DIR (default build-gpu), REPLAYS (stress, default 600000),
# LONG_REPLAYS (default 300000), PYTHON (default /opt/torch/.venv/bin/python, then python3),
# KILL_AFTER (sigkill, seconds, default 20).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
MODE=${1:-stress}
case "$MODE" in stress | long | bench | ablate | sigkill | confirm | levels) ;; *)
  echo "usage: $0 stress|long|bench|ablate|sigkill|confirm|levels" >&2
  exit 2
  ;;
esac
BUILD=${BUILD_DIR:-build-gpu}
LOG=${OUT:-$ROOT/gpu-logs}/cupti-$MODE
mkdir -p "$LOG"
export PATH=/usr/local/cuda/bin:$PATH

# shellcheck source=scripts/gpu_common.sh
source scripts/gpu_common.sh
require_gpu "gpu_cupti.sh"

# ---- build ----------------------------------------------------------------------
cmake_generator
echo "== build ($BUILD, log $LOG/build.log)"
targets=(twinscope_cupti twinscope_example cupti_graph_stress cupti_trace_check bench_kernels bare_cupti)
[[ $MODE == sigkill ]] && targets=(twinscope twinscope_cupti)
[[ $MODE == confirm || $MODE == levels ]] && targets=(twinscope_cupti cupti_trace_check bench_kernels bare_cupti)
if ! {
  cmake -S . -B "$BUILD" "${gen[@]}" -DCMAKE_BUILD_TYPE=Release -DTWINSCOPE_BUILD_GPU_TESTS=ON \
    -DTWINSCOPE_BUILD_BENCH=ON -DTWINSCOPE_WITH_SQLITE=OFF -DTWINSCOPE_WITH_MIRROR=OFF \
    -DTWINSCOPE_CUDA_ARCHITECTURES=90 &&
    cmake --build "$BUILD" -j "$(nproc)" --target "${targets[@]}"
} >"$LOG/build.log" 2>&1; then
  tail -40 "$LOG/build.log"
  echo "gpu_cupti.sh: build failed (full log: $LOG/build.log)" >&2
  exit 1
fi
BIN=$ROOT/$BUILD/bin
LIB=$ROOT/$BUILD/lib/libtwinscope_cupti.so
BARE=$ROOT/$BUILD/lib/libbare_cupti.so
[[ -f $BARE ]] || BARE=$(find "$ROOT/$BUILD" -name 'libbare_cupti.so' | head -1)

# traced <trace.tsc> <command...>: runs the command under the collector.
traced() {
  local out=$1
  shift
  rm -f "$out"
  env CUDA_INJECTION64_PATH="$LIB" NVTX_INJECTION64_PATH="$LIB" TWINSCOPE_OUTPUT="$out" "$@"
}

# floor_variant <variant>: sets `floor` to the env prefix that runs a command under that variant of the bare
# floor (bench/gpu/bare_cupti.cpp); returns 1 when <variant> is not one. bare: activity only; bare_cb: empty
# callbacks on the launch/copy APIs of both domains (bare_cb_driver / bare_cb_runtime: one domain;
# bare_cb_launch: cudaLaunchKernel only); bare_act: API activity records instead (bare_act_ext: and external
# correlation).
floor_variant() {
  floor=(env CUDA_INJECTION64_PATH="$BARE")
  case $1 in
    bare) ;;
    bare_cb) floor+=(BARE_CUPTI_CALLBACKS=1) ;;
    bare_cb_driver | bare_cb_runtime | bare_cb_launch) floor+=(BARE_CUPTI_CALLBACKS="${1#bare_cb_}") ;;
    bare_act) floor+=(BARE_CUPTI_API_ACTIVITY=1) ;;
    bare_act_ext) floor+=(BARE_CUPTI_API_ACTIVITY=ext) ;;
    *) return 1 ;;
  esac
}

# check <case> <trace>: trace summary as JSON into $LOG/<case>.trace.json.
check() {
  "$BIN/cupti_trace_check" "$2" >"$LOG/$1.trace.json" 2>>"$LOG/$1.log" || true
}

# ---- stress -----------------------------------------------------------------------
if [[ $MODE == stress ]]; then
  REPLAYS=${REPLAYS:-600000}
  echo "== example program under the collector"
  traced "$LOG/example.tsc" "$BIN/twinscope_example" >"$LOG/example.log" 2>&1 || true
  check example "$LOG/example.tsc"
  for case in mitigated kernels_only; do
    echo "== graph stress ($case): $REPLAYS replays, device buffer pool limit 8"
    extra=()
    [[ $case == kernels_only ]] && extra=(TWINSCOPE_KERNELS_ONLY=1)
    traced "$LOG/$case.tsc" env TWINSCOPE_DEVICE_BUFFER_POOL_LIMIT=8 TWINSCOPE_BUFFER_SIZE_KB=8192 "${extra[@]}" \
      "$BIN/cupti_graph_stress" --replays "$REPLAYS" --kernels 1 --copy-bytes 65536 \
      >"$LOG/$case.prog.json" 2>"$LOG/$case.log" || true
    check "$case" "$LOG/$case.tsc"
    rm -f "$LOG/$case.tsc"
  done
  echo
  echo "== seed 001 on $(nvidia-smi --query-gpu=name --format=csv,noheader | head -1) (logs: $LOG)"
  python3 tests/gpu/cupti_report.py stress "$LOG"
  exit $?
fi

# ---- sigkill ----------------------------------------------------------------------------
if [[ $MODE == sigkill ]]; then
  KILL_AFTER=${KILL_AFTER:-20}
  PY=${PYTHON:-/opt/torch/.venv/bin/python}
  if ! "$PY" -c 'import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)' >"$LOG/torch_check.log" 2>&1; then
    cat "$LOG/torch_check.log" >&2
    echo "gpu_cupti.sh sigkill: $PY has no CUDA-enabled torch (set PYTHON)" >&2
    exit 1
  fi
  trace=$LOG/sigkill.tsc
  rm -f "$trace" "$LOG/progress.json"
  echo "== PyTorch under twinscope record, SIGKILL after ${KILL_AFTER} s"
  "$BIN/twinscope" record -o "$trace" -- "$PY" tests/gpu/sigkill_torch.py --progress "$LOG/progress.json" \
    --seconds 120 >"$LOG/record.log" 2>&1 &
  rec=$!
  sleep "$KILL_AFTER"
  # The program is record's only child (record execs it directly), forked by one of its threads.
  child=$(cat /proc/"$rec"/task/*/children 2>/dev/null | tr ' ' '\n' | grep -m1 . || true)
  if [[ -z $child ]]; then
    tail -20 "$LOG/record.log" >&2
    echo "gpu_cupti.sh sigkill: the program under record (pid $rec) is not running: see $LOG/record.log" >&2
    exit 1
  fi
  kill -KILL "$child"
  kill_ns=$(python3 -c 'import time; print(time.monotonic_ns())')  # just after: the age shown is an upper bound
  rc=0
  wait "$rec" || rc=$?
  echo "record exit code $rc (137: the program died of SIGKILL); progress: $(cat "$LOG/progress.json" 2>/dev/null)"
  ls -l "$trace" >>"$LOG/record.log" 2>&1 || true
  "$BIN/twinscope" stats "$trace" >"$LOG/stats.txt" 2>&1 || true
  "$BIN/twinscope" stats --json "$trace" >"$LOG/stats.json" 2>"$LOG/stats_json.err" || true
  rm -f "$trace"
  echo
  echo "== the loss block of twinscope stats (full output: $LOG/stats.txt)"
  sed -n '/^loss accounting/,/^top kernels/p' "$LOG/stats.txt" | grep -v '^top kernels' || true
  echo
  echo "== SIGKILLed run on $(nvidia-smi --query-gpu=name --format=csv,noheader | head -1) (logs: $LOG)"
  python3 tests/gpu/cupti_report.py sigkill "$LOG" "$kill_ns"
  exit $?
fi

# ---- long ---------------------------------------------------------------------------
if [[ $MODE == long ]]; then
  LONG_REPLAYS=${LONG_REPLAYS:-300000}
  args=(--replays "$LONG_REPLAYS" --kernels 100 --copy-bytes 65536)
  echo "== untraced: graph of 64 KiB copy + 100 tiny kernels x $LONG_REPLAYS replays"
  "$BIN/cupti_graph_stress" "${args[@]}" >"$LOG/long_untraced.prog.json" 2>"$LOG/long_untraced.log" || true
  echo "== traced (default device buffer pool)"
  traced "$LOG/long.tsc" "$BIN/cupti_graph_stress" "${args[@]}" \
    >"$LOG/long_traced.prog.json" 2>"$LOG/long_traced.log" || true
  ls -l "$LOG/long.tsc" >>"$LOG/long_traced.log" 2>&1 || true
  echo "== reading the trace back"
  check long_traced "$LOG/long.tsc"
  rm -f "$LOG/long.tsc"
  echo
  echo "== long run (logs: $LOG)"
  python3 tests/gpu/cupti_report.py long "$LOG"
  exit $?
fi

# ---- ablate ---------------------------------------------------------------------------
if [[ $MODE == ablate ]]; then
  rm -f "$LOG"/*.jsonl
  # ABLATE_VARIANTS picks some; bare_cb_driver / bare_cb_runtime: the floor with empty callbacks on one domain.
  read -r -a variants <<<"${ABLATE_VARIANTS:-plain bare bare_cb twinscope skip_pending skip_capture skip_stream skip_key skip_all no_api}"
  for rep in $(seq "${ABLATE_REPS:-3}"); do
    for v in "${variants[@]}"; do
      run=(env)
      case $v in
        bare*) floor_variant "$v" && run=("${floor[@]}") ;;
        twinscope) run=(traced "$LOG/a.tsc") ;;
        skip_all) run=(traced "$LOG/a.tsc" TWINSCOPE_CUPTI_SKIP=pending,capture,stream,key) ;;
        skip_*) run=(traced "$LOG/a.tsc" TWINSCOPE_CUPTI_SKIP="${v#skip_}") ;;
        no_api) run=(traced "$LOG/a.tsc" TWINSCOPE_KINDS=kernel,memcpy,memset,nvtx) ;;
      esac
      "${run[@]}" TWINSCOPE_QUIET=1 "$BIN/bench_kernels" --eager 300000 --eager-burst 256 --graph-kernels 1 \
        --graph-replays 1 2>>"$LOG/$v.log" | grep '"eager' >>"$LOG/$v.jsonl"
    done
  done
  python3 - "$LOG" "${variants[@]}" <<'EOF'
import json, statistics, sys
log, variants = sys.argv[1], sys.argv[2:]
# eager: wall time of the loop through its sync; eager_call: the launch calls alone, in bursts
# (bench/gpu/bench_kernels.cu says why the second is the application thread's cost).
for workload in ("eager", "eager_call"):
    med = {}
    for v in variants:
        try:
            xs = [j["ns_per_kernel"] for j in map(json.loads, filter(str.strip, open(f"{log}/{v}.jsonl")))
                  if j.get("workload") == workload]
            if xs:
                med[v] = (statistics.median(xs), xs)
        except Exception:
            pass
    plain = med.get("plain", (None,))[0]
    ts = med.get("twinscope", (None,))[0]
    bare = med.get("bare", (None,))[0]
    print(f"{workload}: {'variant':14} {'median ns/launch':>16} {'added vs plain':>15} {'saved vs twinscope':>19}  runs")
    for v in variants:
        if v not in med:
            print(f"{v:14} (no result)")
            continue
        m, xs = med[v]
        added = f"{m - plain:+.0f}" if plain else "-"
        saved = f"{ts - m:+.0f}" if ts and v not in ("plain", "bare", "bare_cb", "twinscope") else ""
        print(f"{v:14} {m:16.0f} {added:>15} {saved:>19}  {' '.join(f'{x:.0f}' for x in xs)}")
    if plain and ts and bare and bare > plain:
        print(f"twinscope added / bare added ({workload}, medians): {(ts - plain) / (bare - plain):.2f}")
EOF
  exit 0
fi

# ---- levels ------------------------------------------------------------------------------
if [[ $MODE == levels ]]; then
  LEVEL_ROUNDS=${LEVEL_ROUNDS:-8}
  EAGER=${EAGER:-20000}
  PROCS=${PROCS:-6}
  read -r -a lvariants <<<"${LEVELS_VARIANTS:-twinscope bare_cb bare_act_ext bare_cb_launch}"
  lvariants=(plain "${lvariants[@]}")
  RESULTS=$LOG/results.jsonl
  RUNS=$LOG/runs.log
  rm -f "$RESULTS" "$RUNS" "$LOG"/*.tsc
  failures=0
  start=$SECONDS
  for ((p = 1; p <= PROCS; p++)); do
    for ((i = 0; i < ${#lvariants[@]}; i++)); do
      v=${lvariants[$(((i + p) % ${#lvariants[@]}))]}  # the order rotates per process round
      run=(env)
      case $v in
        plain) run=(env TWINSCOPE_QUIET=1) ;;
        twinscope | ts_skip_* | ts_no_api)
          run=(env CUDA_INJECTION64_PATH="$LIB" NVTX_INJECTION64_PATH="$LIB" TWINSCOPE_OUTPUT="$LOG/levels.tsc"
            TWINSCOPE_BENCH_LEVELS=1 TWINSCOPE_QUIET=1)
          # ts_skip_<steps>: TWINSCOPE_CUPTI_SKIP=<steps> ('+' between steps; all: every one), to see what each costs.
          if [[ $v == ts_skip_* ]]; then
            skip=${v#ts_skip_}
            [[ $skip == all ]] && skip=pending+capture+stream+key+clock
            run+=(TWINSCOPE_CUPTI_SKIP="${skip//+/,}")
          fi
          [[ $v == ts_no_api ]] && run+=(TWINSCOPE_KINDS=kernel,memcpy,memset,nvtx)
          ;;
        *)
          floor_variant "$v" || {
            echo "gpu_cupti.sh levels: unknown variant $v" >&2
            exit 2
          }
          run=("${floor[@]}")
          ;;
      esac
      [[ -n ${PIN:-} ]] && run+=(taskset -c "$PIN")
      if [[ $v == plain ]]; then
        args=(--eager "$EAGER" --eager-burst 256 --graph-replays 0)
      else
        args=(--eager "$EAGER" --levels "$LEVEL_ROUNDS")
      fi
      echo "== process round $p: $v" >>"$RUNS"
      if ! "${run[@]}" "$BIN/bench_kernels" "${args[@]}" >"$LOG/run.out" 2>>"$RUNS"; then
        echo "gpu_cupti.sh levels: $v failed in process round $p (see $RUNS)" | tee -a "$RUNS" >&2
        failures=$((failures + 1))
      fi
      while read -r line; do
        [[ $line == "{"* ]] && echo "{\"proc\": $p, \"variant\": \"$v\", \"result\": $line}" >>"$RESULTS"
      done <"$LOG/run.out"
      rm -f "$LOG/levels.tsc" "$LOG/run.out"
    done
    echo "== process round $p of $PROCS done ($((SECONDS - start)) s)"
  done
  echo
  echo "== launch call cost by level, one process each, on $(nvidia-smi --query-gpu=name --format=csv,noheader | head -1):" \
    "$PROCS processes per variant x $LEVEL_ROUNDS rounds x $EAGER calls; results: $RESULTS"
  python3 bench/gpu/summarize_levels.py "$RESULTS" | tee "$LOG/summary.txt"
  rc=${PIPESTATUS[0]}
  # What the launch path's primitives cost on this host, under the collector (CUPTI loaded, tracing).
  echo "== primitives per call on this host (bench_kernels --primitives, under twinscope):" | tee -a "$LOG/summary.txt"
  traced "$LOG/levels.tsc" TWINSCOPE_QUIET=1 "$BIN/bench_kernels" --primitives "${PRIMITIVES:-1000000}" \
    2>>"$RUNS" | tee -a "$LOG/summary.txt" || rc=1
  rm -f "$LOG/levels.tsc"
  ((failures == 0 && rc == 0))
  exit $?
fi

# ---- bench and confirm: a python with a CUDA-enabled torch -----------------------------
PY=${PYTHON:-}
if [[ -z $PY ]]; then
  for p in /opt/torch/.venv/bin/python python3; do
    if command -v "$p" >/dev/null && "$p" -c 'import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)' \
      2>/dev/null; then
      PY=$p
      break
    fi
  done
fi
[[ -n $PY ]] || echo "== no python with a CUDA-enabled torch found: PyTorch rows are left out" | tee "$LOG/torch.missing"

# ---- confirm ----------------------------------------------------------------------------
if [[ $MODE == confirm ]]; then
  ROUNDS=${ROUNDS:-7}
  TORCH_ROUNDS=${TORCH_ROUNDS:-5}
  EAGER=${EAGER:-200000}
  GRAPH_REPLAYS=${GRAPH_REPLAYS:-2000}
  BURSTS=${BURSTS:-256}
  RESULTS=$LOG/results.jsonl
  RUNS=$LOG/runs.log
  rm -f "$RESULTS" "$RUNS" "$LOG"/*.tsc
  failures=0
  # record <round> <variant> <workload set> <command...>: each JSON line it prints becomes a result.
  record() {
    local round=$1 variant=$2 set=$3 line
    shift 3
    echo "== round $round: $set $variant" >>"$RUNS"
    if ! "$@" >"$LOG/run.out" 2>>"$RUNS"; then
      echo "gpu_cupti.sh confirm: $set $variant failed in round $round (see $RUNS)" | tee -a "$RUNS" >&2
      failures=$((failures + 1))
    fi
    while read -r line; do
      if [[ $line == "{"* ]]; then
        echo "{\"round\": $round, \"variant\": \"$variant\", \"result\": $line}" >>"$RESULTS"
      fi
    done <"$LOG/run.out"
    if [[ $variant == twinscope && -f $LOG/confirm.tsc ]]; then
      local check
      check=$("$BIN/cupti_trace_check" "$LOG/confirm.tsc" 2>>"$RUNS" || true)
      [[ $check == "{"* ]] || check='{"read_end": "unreadable (see runs.log)"}'
      echo "{\"round\": $round, \"variant\": \"$variant\", \"workload_set\": \"$set\", \"check\": $check}" >>"$RESULTS"
    fi
    rm -f "$LOG/confirm.tsc" "$LOG/run.out"
  }
  # as_variant <variant> <command...>: runs the command as that variant (on the CPUs in PIN, if set:
  # the same CPUs for every run, so placement does not differ between variants).
  as_variant() {
    local v=$1
    shift
    [[ -n ${PIN:-} ]] && set -- taskset -c "$PIN" "$@"
    case $v in
      plain) env TWINSCOPE_QUIET=1 "$@" ;;
      twinscope) traced "$LOG/confirm.tsc" TWINSCOPE_QUIET=1 "$@" ;;
      *)
        floor_variant "$v" || {
          echo "gpu_cupti.sh confirm: unknown variant $v" >&2
          return 2
        }
        "${floor[@]}" "$@"
        ;;
    esac
  }
  # bare_cb (the floor plus empty launch callbacks) shows what enabling callbacks alone costs.
  read -r -a kvariants <<<"${CONFIRM_VARIANTS:-plain bare bare_cb twinscope}"
  tvariants=(plain twinscope profiler)
  start=$SECONDS
  for ((r = 1; r <= ROUNDS; r++)); do
    # The order rotates each round, so drift over the run does not favour one variant.
    for ((i = 0; i < ${#kvariants[@]}; i++)); do
      v=${kvariants[$(((i + r) % ${#kvariants[@]}))]}
      record "$r" "$v" kernels as_variant "$v" "$BIN/bench_kernels" --eager "$EAGER" --eager-burst "$BURSTS" \
        --graph-kernels 100 --graph-replays "$GRAPH_REPLAYS"
    done
    if [[ -n $PY && $r -le $TORCH_ROUNDS ]]; then
      for ((i = 0; i < 3; i++)); do
        v=${tvariants[$(((i + r) % 3))]}
        targs=(--eager 20000 --replays 200)
        if [[ $v == profiler ]]; then
          record "$r" "$v" torch env TWINSCOPE_QUIET=1 "$PY" bench/gpu/bench_torch.py "${targs[@]}" --profiler
        else
          record "$r" "$v" torch as_variant "$v" "$PY" bench/gpu/bench_torch.py "${targs[@]}"
        fi
      done
    fi
    echo "== round $r of $ROUNDS done ($((SECONDS - start)) s)"
  done
  echo
  echo "== added cost per kernel on $(nvidia-smi --query-gpu=name --format=csv,noheader | head -1):" \
    "$ROUNDS rounds (PyTorch $([[ -n $PY ]] && echo "$TORCH_ROUNDS" || echo 0)); results: $RESULTS"
  python3 bench/gpu/summarize_rounds.py "$RESULTS" | tee "$LOG/summary.txt"
  rc=${PIPESTATUS[0]}
  ((failures == 0)) || echo "gpu_cupti.sh confirm: $failures runs failed (see $RUNS)" >&2
  ((failures == 0 && rc == 0))
  exit $?
fi

# ---- bench ----------------------------------------------------------------------------
rm -f "$LOG"/*.json
for rep in 1 2 3; do
  for variant in plain bare bare_cb twinscope profiler; do
    echo "== rep $rep: $variant"
    run=()
    case $variant in
      plain) run=(env) ;;
      bare*) floor_variant "$variant" && run=("${floor[@]}") ;;
      twinscope) run=(traced "$LOG/bench.tsc") ;;
      profiler) run=() ;;
    esac
    if [[ $variant != profiler ]]; then
      "${run[@]}" "$BIN/bench_kernels" --eager 1000000 --graph-kernels 100 --graph-replays 10000 \
        >>"$LOG/$variant.$rep.json" 2>>"$LOG/$variant.log" || echo "bench_kernels ($variant) failed: see $LOG/$variant.log"
    fi
    if [[ -n $PY ]]; then
      targs=(--eager 100000 --replays 2000)
      [[ $variant == profiler ]] && targs+=(--profiler)
      "${run[@]}" "$PY" bench/gpu/bench_torch.py "${targs[@]}" >>"$LOG/$variant.$rep.json" 2>>"$LOG/$variant.log" ||
        echo "bench_torch ($variant) failed: see $LOG/$variant.log"
    fi
    rm -f "$LOG/bench.tsc"
  done
done
echo
echo "== overhead per kernel on $(nvidia-smi --query-gpu=name --format=csv,noheader | head -1) (medians of 3; logs: $LOG)"
python3 bench/gpu/summarize_cupti.py "$LOG"
