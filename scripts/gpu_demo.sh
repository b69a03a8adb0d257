#!/usr/bin/env bash
# GPU run of the demo server (docs/demo-server.md) on a machine with an
# NVIDIA GPU, in about 3 minutes: builds twinscope-demo-server and its client
# (Release, this GPU's architecture, build-gpu-demo), then
#   1. plain: the server (model $MODEL), $REQUESTS concurrent streaming chat
#      requests of $MAX_TOKENS tokens through twinscope-demo-client, every reply
#      checked against the text the server must produce; the step schedule is
#      written; SIGTERM must stop it cleanly;
#   2. replay: the schedule replayed with --follow FILE --exit-after-schedule
#      (no client), which must run the same steps;
#   3. when the tracer builds: the same serving run under `twinscope record`
#      (cache-kernel launches per step, loss counters), and the replay of that
#      run's schedule under `twinscope blocks --kernel reshape_and_cache_flash`
#      (block records per launch, and how many of the primary's cache-kernel
#      launch keys the shadow has: lockstep makes that exact). The shadow runs
#      its decode steps as graphs, as the primary (SHADOW_EAGER=1: --enforce-eager).
# Prints a short table last. At most 8 files come back in $OUT/demo (or
# ./gpu-logs/demo); the work folder is $WORK (default /tmp/twinscope-gpu-demo).
# Environment: BUILD_DIR (build-gpu-demo), MODEL (1b), REQUESTS (8),
# MAX_TOKENS (48: one prefill + 47 decode steps per request), FRACTION (0.1,
# --gpu-memory-fraction), SANITIZER_ROOT (/usr/local/cuda/compute-sanitizer),
# DEMO_PREBUILT (a build folder with bin/twinscope-demo-server and
# bin/twinscope-demo-client, used when this machine lacks Boost.Beast),
# ENGINE (gpu; `cpu` is a dry run of this script on a machine without a GPU:
# the same steps, no kernels).
set -uo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=scripts/gpu_common.sh
source scripts/gpu_common.sh
demo_run_start gpu_demo.sh demo build-gpu-demo /tmp/twinscope-gpu-demo
SAN=${SANITIZER_ROOT:-/usr/local/cuda/compute-sanitizer}
FRACTION=${FRACTION:-0.1}
fail() {
  echo "gpu_demo.sh: FAILED: $*" | tee -a "$LOGS" >&2
  for f in "$WORK"/*.err; do [[ -f $f ]] && { echo "== $f"; tail -15 "$f"; } >>"$LOGS"; done
  exit 1
}
append_logs() { for f in "$@"; do [[ -f $f ]] && { echo "===== $(basename "$f")"; cat "$f"; } >>"$LOGS"; done; }
py() { python3 - "$@"; }

# ---- build ----------------------------------------------------------------------------
arch=90
[[ $ENGINE == cpu ]] || arch=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader | head -1 | tr -d ' .')
cmake_generator
opts=(-DCMAKE_BUILD_TYPE=Release -DTWINSCOPE_BUILD_TESTS=OFF -DTWINSCOPE_WITH_SQLITE=OFF -DTWINSCOPE_BUILD_EXAMPLES=OFF
  -DTWINSCOPE_CUDA_ARCHITECTURES="${arch:-90}")
[[ -d $SAN ]] && opts+=(-DTWINSCOPE_SANITIZER_ROOT="$SAN")
# cuBLAS: the toolkit's, else the one in PyTorch's venv (headers and library).
if [[ ! -f /usr/local/cuda/include/cublas_v2.h ]]; then
  wheel=$(ls -d /opt/torch/.venv/lib/python3*/site-packages/nvidia/{cu13,cublas} 2>/dev/null | while read -r d; do
    [[ -f $d/include/cublas_v2.h ]] && ls "$d"/lib/libcublas.so* >/dev/null 2>&1 && echo "$d"; done | head -1)
  [[ -n $wheel ]] || fail "no cuBLAS: /usr/local/cuda/include/cublas_v2.h is missing and PyTorch's venv has none either"
  lib=$(ls "$wheel"/lib/libcublas.so* | head -1)
  echo "== cuBLAS from $wheel" | tee -a "$LOGS"
  opts+=(-DCUDA_cublas_LIBRARY="$lib" "-DCMAKE_CXX_FLAGS=-I$wheel/include")
  export LD_LIBRARY_PATH=$wheel/lib:${LD_LIBRARY_PATH:-}
fi
BIN=$ROOT/$BUILD/bin
have_tracer=0
if [[ -f /usr/include/boost/beast.hpp ]]; then
  echo "== build ($BUILD, sm_${arch:-90})"
  if ! { cmake -S . -B "$BUILD" "${gen[@]}" "${opts[@]}" -DTWINSCOPE_WITH_DEMO=ON &&
    cmake --build "$BUILD" -j "$(nproc)" --target twinscope-demo-server twinscope-demo-client; } >"$WORK/build.log" 2>&1; then
    tail -40 "$WORK/build.log" >>"$LOGS"
    tail -25 "$WORK/build.log"
    fail "building the demo server failed (log above and in $LOGS)"
  fi
  DEMO_BIN=$BIN
else
  echo "== Boost.Beast (/usr/include/boost/beast.hpp) is not on this machine: the demo server cannot be built here" | tee -a "$LOGS"
  [[ -n ${DEMO_PREBUILT:-} && -x $DEMO_PREBUILT/bin/twinscope-demo-server && -x $DEMO_PREBUILT/bin/twinscope-demo-client ]] ||
    fail "no Boost.Beast here and no DEMO_PREBUILT: build on a machine with libboost-dev (cmake -DTWINSCOPE_CUDA_ARCHITECTURES=90 ...; cmake --build build --target twinscope-demo-server twinscope-demo-client), carry that build folder and set DEMO_PREBUILT to it"
  DEMO_BIN=$(cd "$DEMO_PREBUILT" && pwd)/bin
  echo "== using the prebuilt demo in $DEMO_BIN" | tee -a "$LOGS"
  cmake -S . -B "$BUILD" "${gen[@]}" "${opts[@]}" -DTWINSCOPE_WITH_DEMO=OFF -DTWINSCOPE_WITH_MIRROR=OFF >"$WORK/build.log" 2>&1
fi
echo "== build the tracer (twinscope, twinscope_cupti, twinscope_blocks) for the record/blocks runs"
if cmake --build "$BUILD" -j "$(nproc)" --target twinscope twinscope_cupti twinscope_guard twinscope_blocks >>"$WORK/build.log" 2>&1; then
  have_tracer=1
else
  echo "   tracer build failed: the record/blocks runs are skipped (tail of the log in logs.txt)" | tee -a "$LOGS"
  tail -20 "$WORK/build.log" >>"$LOGS"
fi
echo "   build took $(($(date +%s) - T0)) s"
SERVER=$DEMO_BIN/twinscope-demo-server
CLIENT=$DEMO_BIN/twinscope-demo-client
COMMON=(--engine "$ENGINE" --model "$MODEL" --port 0 --gpu-memory-fraction "$FRACTION" --max-batch 64)

# start_server NAME CMD...: runs it in the background; sets SRV_PID and PORT once it listens.
start_server() {
  local name=$1
  shift
  "$@" >"$WORK/$name.out" 2>"$WORK/$name.err" &
  SRV_PID=$!
  PORT=
  for _ in $(seq 1 1500); do
    PORT=$(sed -n 's/^listening on 127\.0\.0\.1:\([0-9]*\)$/\1/p' "$WORK/$name.out" | head -1)
    [[ -n $PORT ]] && return 0
    if ! kill -0 "$SRV_PID" 2>/dev/null; then
      tail -20 "$WORK/$name.err"
      fail "$name exited before it listened"
    fi
    sleep 0.1
  done
  kill -KILL "$SRV_PID"
  fail "$name did not listen within 150 s"
}
# stop_server NAME: SIGTERM, then its exit code must be 0.
stop_server() {
  kill -TERM "$SRV_PID"
  local rc
  wait "$SRV_PID"
  rc=$?
  [[ $rc == 0 ]] || { tail -20 "$WORK/$1.err"; fail "$1 exited $rc after SIGTERM"; }
}
# load NAME: the built-in client against PORT; its JSON report in $WORK/NAME.client.json.
load() {
  "$CLIENT" --url "http://127.0.0.1:$PORT" -n "$REQUESTS" --max-tokens "$MAX_TOKENS" --seed 1000 --check \
    --json "$WORK/$1.client.json" >"$WORK/$1.client.txt" 2>&1
  local rc=$?
  tail -1 "$WORK/$1.client.txt"
  [[ $rc == 0 ]] || { cat "$WORK/$1.client.txt"; fail "$1: requests failed or replies differ"; }
}
# steps FILE: "N steps (P prefill, D decode), widest decode batch B" of a schedule.
steps() {
  py "$1" <<'EOF'
import json, sys
s = [json.loads(l) for l in open(sys.argv[1])]
st = [x for x in s if x["type"] == "step"]
d = [x for x in st if x["kind"] == "decode"]
per = {}
for x in d:
    for e in x["batch"]:
        per[e["id"]] = per.get(e["id"], 0) + 1
end = s[-1]["type"] == "end"
print(f"{len(st)} steps ({len(st) - len(d)} prefill, {len(d)} decode), widest decode batch "
      f"{max((len(x['batch']) for x in d), default=0)}, decode steps per request {min(per.values(), default=0)}-"
      f"{max(per.values(), default=0)}, end line {'yes' if end else 'NO'}")
EOF
}
# same_steps A B: the two schedules ran the same steps (names, batches, padding).
same_steps() {
  py "$1" "$2" <<'EOF'
import json, sys
def load(p):
    return [(x["step"], x["kind"], x["padded"], x["name"], x["finished"]) for x in map(json.loads, open(p)) if x["type"] == "step"]
a, b = load(sys.argv[1]), load(sys.argv[2])
same = sum(1 for x, y in zip(a, b) if x == y)
print(f"{same}/{len(a)} steps identical" + ("" if len(a) == len(b) else f" (replay ran {len(b)})"))
sys.exit(0 if a == b else 1)
EOF
}

# ---- 1. plain serving run -------------------------------------------------------------------
echo "== 1. serve ($MODEL), $REQUESTS concurrent streams x $MAX_TOKENS tokens"
start_server plain "$SERVER" "${COMMON[@]}" --schedule-out "$WORK/plain.schedule.jsonl" \
  --trace-requests "$WORK/plain.requests.jsonl"
grep -E "model|engine" "$WORK/plain.err" | sed 's/^/   /'
load plain
stop_server plain
plain_steps=$(steps "$WORK/plain.schedule.jsonl")
echo "   $plain_steps"

# ---- 2. replay of its schedule ------------------------------------------------------------------
echo "== 2. replay: --follow FILE --exit-after-schedule"
t=$(date +%s.%N)
"$SERVER" "${COMMON[@]}" --follow "$WORK/plain.schedule.jsonl" --exit-after-schedule \
  --schedule-out "$WORK/replay.schedule.jsonl" >"$WORK/replay.out" 2>"$WORK/replay.err" ||
  fail "the replay exited $? ($(tail -3 "$WORK/replay.err"))"
replay_s=$(py "$t" <<<'import sys,time; print(f"{time.time()-float(sys.argv[1]):.1f}")')
replay_same=$(same_steps "$WORK/plain.schedule.jsonl" "$WORK/replay.schedule.jsonl") || fail "the replay ran other steps: $replay_same"
echo "   $replay_same (replay process took ${replay_s} s, start-up included)"

# ---- 3. under the tracer ----------------------------------------------------------------------------
record_line="skipped (no tracer build)"
blocks_line="skipped (no tracer build)"
match_line="skipped"
TS=$BIN/twinscope
if [[ $have_tracer == 1 ]]; then
  echo "== 3a. the same serving run under twinscope record"
  start_server record "$TS" record -o "$WORK/primary.tsc" -- "$SERVER" "${COMMON[@]}" \
    --schedule-out "$WORK/record.schedule.jsonl" --trace-requests "$WORK/record.requests.jsonl"
  load record
  stop_server record
  "$TS" stats --json "$WORK/primary.tsc" >"$WORK/record.stats.json" 2>>"$WORK/record.err" || echo "   stats failed"
  "$TS" export "$WORK/primary.tsc" --format chrome -o "$WORK/primary.json" >>"$WORK/record.err" 2>&1 || echo "   export failed"
  echo "   $(steps "$WORK/record.schedule.jsonl")"

  # The shadow replays with the graphs, as the primary ran; SHADOW_EAGER=1 replays
  # eagerly (an eager step's launch keys equal the graph nodes' keys).
  eager=()
  [[ ${SHADOW_EAGER:-0} == 1 ]] && eager=(--enforce-eager)
  echo "== 3b. replay of that schedule under twinscope blocks --kernel reshape_and_cache_flash ${eager[*]:-(graphs)}"
  export LD_LIBRARY_PATH=$SAN:${LD_LIBRARY_PATH:-}
  timeout 300 "$TS" blocks --kernel reshape_and_cache_flash -o "$WORK/shadow.tsc" -- "$SERVER" "${COMMON[@]}" \
    "${eager[@]}" --follow "$WORK/record.schedule.jsonl" --exit-after-schedule >"$WORK/blocks.out" 2>"$WORK/blocks.err" ||
    { tail -5 "$WORK/blocks.err"; echo "   the replay under the block probe failed"; }
  "$TS" stats --json "$WORK/shadow.tsc" >"$WORK/blocks.stats.json" 2>>"$WORK/blocks.err" || echo "   shadow stats failed"

  py "$WORK" "${eager[*]:-}" >"$WORK/steps.json" 2>"$WORK/analysis.err" <<'EOF'
import json, re, sys, collections
w, eager = sys.argv[1], sys.argv[2]
def step_of(path):  # "decode step 17 [..]#0" -> ("decode", 17)
    m = re.match(r"(prefill|decode) step (\d+) ", path or "")
    return (m.group(1), int(m.group(2))) if m else None
out = {"eager_shadow": bool(eager)}
# Primary: cache-kernel launches per step, from the kernel events of the Chrome export.
try:
    ev = json.load(open(f"{w}/primary.json"))
    ev = ev["traceEvents"] if isinstance(ev, dict) else ev
    prim = collections.Counter()
    keys = set()
    other = 0
    for e in ev:
        if e.get("cat") != "kernel" or "reshape_and_cache_flash" not in e.get("name", ""):
            continue
        a = e.get("args", {})
        s = step_of(a.get("key_path"))
        if s:
            prim[s] += 1
            keys.add((a.get("key_path"), a.get("key_ordinal"), tuple(a.get("grid", []))))
        else:
            other += 1
    dec = [n for (k, _), n in prim.items() if k == "decode"]
    pre = [n for (k, _), n in prim.items() if k == "prefill"]
    out["primary"] = {"cache_launches_in_steps": sum(prim.values()), "outside_steps": other,
                      "decode_steps": len(dec), "per_decode_step_min": min(dec, default=0),
                      "per_decode_step_max": max(dec, default=0), "prefill_steps": len(pre)}
except Exception as ex:
    out["primary_error"] = str(ex); keys = set()
try:
    st = json.load(open(f"{w}/record.stats.json"))
    out["primary_loss"] = st.get("loss", {})
except Exception as ex:
    out["primary_loss_error"] = str(ex)
# Shadow: traced launches, their blocks, and the launch keys matched against the primary's.
try:
    sh = json.load(open(f"{w}/blocks.stats.json"))
    launches = sh.get("shadow_launches", [])
    per = collections.Counter()
    skeys = set()
    complete = 0
    for l in launches:
        if "reshape_and_cache_flash" not in l.get("kernel", ""):
            continue
        s = step_of(l.get("key_path"))
        if not s:
            continue
        per[s] += 1
        skeys.add((l["key_path"], l["key_ordinal"], tuple(l["grid"])))
        complete += l["blocks_unique"] == l["blocks_expected"]
    dec = [n for (k, _), n in per.items() if k == "decode"]
    out["shadow"] = {"cache_launches_in_steps": sum(per.values()), "complete": complete,
                     "per_decode_step_min": min(dec, default=0), "per_decode_step_max": max(dec, default=0),
                     "problems": sh.get("problems", [])}
    both = keys & skeys
    out["match"] = {"primary_keys": len(keys), "shadow_keys": len(skeys), "matched": len(both),
                    "rate": round(len(both) / len(keys), 4) if keys else None}
except Exception as ex:
    out["shadow_error"] = str(ex)
print(json.dumps(out, indent=1))
EOF
  record_line=$(py "$WORK/steps.json" "$WORK/record.client.json" <<'EOF'
import json, sys
d = json.load(open(sys.argv[1])); c = json.load(open(sys.argv[2]))
p = d.get("primary", {}); l = d.get("primary_loss", {})
print(f"{c['tokens_per_s']:.0f} tokens/s; cache-kernel launches {p.get('cache_launches_in_steps')} in steps, "
      f"{p.get('per_decode_step_min')}-{p.get('per_decode_step_max')} per decode step ({p.get('decode_steps')} decode steps); "
      f"missing records {l.get('missing')}, CUPTI drops {l.get('cupti_dropped')}, writer drops {l.get('writer_dropped')}"
      + (f"; ERROR {d['primary_error']}" if "primary_error" in d else ""))
EOF
  )
  blocks_line=$(py "$WORK/steps.json" <<'EOF'
import json, sys
d = json.load(open(sys.argv[1])); s = d.get("shadow", {})
print(f"{s.get('cache_launches_in_steps')} traced cache launches in steps, {s.get('complete')} with all blocks, "
      f"{s.get('per_decode_step_min')}-{s.get('per_decode_step_max')} per decode step"
      + (" (eager replay)" if d.get("eager_shadow") else " (graph replay)") + (f"; problems {s['problems'][:2]}" if s.get("problems") else "")
      + (f"; ERROR {d['shadow_error']}" if "shadow_error" in d else ""))
EOF
  )
  match_line=$(py "$WORK/steps.json" <<'EOF'
import json, sys
m = json.load(open(sys.argv[1])).get("match", {})
print(f"{m.get('matched')}/{m.get('primary_keys')} primary cache-kernel launch keys found in the shadow (rate {m.get('rate')})")
EOF
  )
fi

# ---- what comes back (8 files at most) ------------------------------------------------------------
append_logs "$WORK"/plain.err "$WORK"/plain.client.txt "$WORK"/replay.err "$WORK"/record.err "$WORK"/record.client.txt \
  "$WORK"/blocks.err "$WORK"/analysis.err
tail -30 "$WORK/build.log" >>"$LOGS"
cp "$WORK/plain.client.json" "$LOG/client.json"
cp "$WORK/plain.schedule.jsonl" "$LOG/schedule.jsonl"
cp "$WORK/plain.requests.jsonl" "$LOG/requests.jsonl"
[[ -f $WORK/record.stats.json ]] && cp "$WORK/record.stats.json" "$LOG/record-stats.json"
[[ -f $WORK/blocks.stats.json ]] && cp "$WORK/blocks.stats.json" "$LOG/blocks-stats.json"
[[ -f $WORK/steps.json ]] && cp "$WORK/steps.json" "$LOG/steps.json"

plain_line=$(py "$WORK/plain.client.json" <<'EOF'
import json, sys
c = json.load(open(sys.argv[1]))
print(f"{c['ok']}/{c['requests']} ok, {c['tokens']} tokens, {c['tokens_per_s']:.0f} tokens/s, ttft p50 {c['ttft_ms_p50']:.1f} ms, "
      f"latency p50 {c['latency_ms_p50']:.0f} ms p99 {c['latency_ms_p99']:.0f} ms, replies as expected")
EOF
)
{
  echo
  echo "================ demo server on $(gpu_name), model $MODEL ================"
  printf "%-26s %s\n" "serving (plain)" "$plain_line"
  printf "%-26s %s\n" "schedule" "$plain_steps"
  printf "%-26s %s\n" "replay (--follow FILE)" "$replay_same, ${replay_s} s"
  printf "%-26s %s\n" "under twinscope record" "$record_line"
  printf "%-26s %s\n" "replay under blocks" "$blocks_line"
  printf "%-26s %s\n" "lockstep key match" "$match_line"
  echo "total $(($(date +%s) - T0)) s; files in $LOG"
} | tee "$LOG/summary.txt"
if [[ $have_tracer == 1 ]] && grep -q '_error"' "$WORK/steps.json" 2>/dev/null; then
  echo "gpu_demo.sh: FAILED: the record/blocks runs gave no usable trace (see ERROR above and logs.txt)" | tee -a "$LOGS" >&2
  exit 1
fi
