#!/usr/bin/env bash
# The seed-000-sized demo run on a machine with an NVIDIA GPU (issue 13, item 5), in under 8 minutes
# with the build: builds twinscope and its demo server (Release, this GPU's architecture, BUILD_DIR),
# then runs `twinscope demo` with the default model shape (1b), 8 concurrent streaming requests of 48
# tokens (47 decode steps each) three times:
#   replay  the default: the primary serves alone behind the mirror, then a shadow replays its step
#           schedule (--follow FILE) under the block probe; --mirror-latency $LATENCY
#   live    --live: the shadow beside the primary in lockstep (--follow URL); --mirror-latency $LATENCY
#   drift   --live --no-lockstep: the shadow batches the mirrored requests on its own
# and prints a short table last: requests, decode steps, cache-kernel intervals per step, correlation
# misses, drops, exact-match rate of the cache kernel (lockstep) and the drift without lockstep, the
# primary's tokens/s alone (replay) and beside the shadow (live), the mirror's added p50/p99 latency.
# Each run's figures come from its DIR/summary.json and DIR/mirror-latency.json (src/cli/cmd_demo.cpp).
# At most 8 files come back in $OUT/demo_seed (else ./gpu-logs/demo_seed); the work folder is $WORK.
# Environment: RUNS ("replay live drift": which runs), BUILD_DIR (build-gpu-seed), MODEL (1b), REQUESTS (8), MAX_TOKENS (48), LATENCY (20 pairs),
# BUDGET_S (420 s from the start, build included: a run that would start with less than 60 s of it left is
# skipped, and each run is cut at what is left),
# PREBUILT (a build folder with bin/twinscope to use instead of building), ENGINE (gpu; `cpu` is a dry
# run of this script without a GPU: with TWINSCOPE_DEMO_SERVER set to tests/demo's fake-GPU server, the
# lib folder and the fakes' LD_LIBRARY_PATH as demo_e2e_test sets them, every step of it runs).
# Carry .gpu-carry (scripts/carry-chartjs.sh) for the reports' step chart.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
# shellcheck source=scripts/gpu_common.sh
source scripts/gpu_common.sh
demo_run_start gpu_demo_seed.sh demo_seed build-gpu-seed /tmp/twinscope-gpu-demo-seed
LATENCY=${LATENCY:-20}
BUDGET_S=${BUDGET_S:-420}
fail() {
  echo "gpu_demo_seed.sh: FAILED: $*" | tee -a "$LOGS" >&2
  exit 1
}
elapsed() { echo $(($(date +%s) - T0)); }

# ---- build (as scripts/demo.sh, without its dependency step) --------------------------------------------
# build: configures and builds $BUILD; sets TS to its twinscope.
build() {
  local arch=90
  [[ $ENGINE == cpu ]] || arch=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader | head -1 | tr -d ' .')
  [[ -f /usr/include/boost/beast.hpp ]] ||
    fail "Boost.Beast (/usr/include/boost/beast.hpp) is missing: the demo server and the mirror need it (libboost-dev)"
  cmake_generator
  chartjs_arg
  local opts=(-DCMAKE_BUILD_TYPE=Release -DTWINSCOPE_BUILD_TESTS=OFF -DTWINSCOPE_BUILD_EXAMPLES=OFF
    -DTWINSCOPE_WITH_DEMO=ON -DTWINSCOPE_WITH_MIRROR=ON -DTWINSCOPE_CUDA_ARCHITECTURES="${arch:-90}" "${chartjs[@]}")
  [[ -f /usr/include/sqlite3.h ]] || opts+=(-DTWINSCOPE_WITH_SQLITE=OFF)
  # cuBLAS: the toolkit's, else the one in PyTorch's venv (headers and library), as scripts/gpu_demo.sh.
  if [[ ! -f /usr/local/cuda/include/cublas_v2.h ]]; then
    local wheel
    wheel=$(ls -d /opt/torch/.venv/lib/python3*/site-packages/nvidia/{cu13,cublas} 2>/dev/null | while read -r d; do
      [[ -f $d/include/cublas_v2.h ]] && ls "$d"/lib/libcublas.so* >/dev/null 2>&1 && echo "$d"; done | head -1)
    [[ -n $wheel ]] || fail "no cuBLAS: /usr/local/cuda/include/cublas_v2.h is missing and PyTorch's venv has none"
    opts+=(-DCUDA_cublas_LIBRARY="$(ls "$wheel"/lib/libcublas.so* | head -1)" "-DCMAKE_CXX_FLAGS=-I$wheel/include")
    export LD_LIBRARY_PATH=$wheel/lib:${LD_LIBRARY_PATH:-}
  fi
  echo "== build ($BUILD, sm_${arch:-90}${chartjs:+, Chart.js inlined})"
  if ! { cmake -S . -B "$BUILD" "${gen[@]}" "${opts[@]}" &&
    cmake --build "$BUILD" -j "$(nproc)" --target twinscope twinscope_cupti twinscope_guard twinscope_blocks twinscope-demo-server; } \
    >"$WORK/build.log" 2>&1; then
    tail -40 "$WORK/build.log" | tee -a "$LOGS"
    fail "the build failed (log above)"
  fi
  echo "   build took $(elapsed) s"
  TS=$(cd "$BUILD" && pwd)/bin/twinscope
}
if [[ -n ${PREBUILT:-} ]]; then
  TS=$(cd "$PREBUILT" && pwd)/bin/twinscope
  [[ -x $TS ]] || fail "PREBUILT=$PREBUILT has no bin/twinscope"
  echo "== using $TS (PREBUILT)"
else
  build
fi

# ---- the three runs -----------------------------------------------------------------------------------------
# run NAME FLAGS...: twinscope demo into $WORK/NAME, cut at the budget left; its exit code in $WORK/NAME.rc.
run() {
  local name=$1
  shift
  local left=$((BUDGET_S - $(elapsed)))
  if ((left < 60)); then
    echo "== $name: skipped, $(elapsed) s of the ${BUDGET_S} s budget used" | tee -a "$LOGS"
    echo skipped >"$WORK/$name.rc"
    return
  fi
  echo "== $name: twinscope demo $* (at most $left s)"
  local t
  t=$(date +%s)
  timeout -k 20 "$left" "$TS" demo -o "$WORK/$name" --engine "$ENGINE" --model "$MODEL" --requests "$REQUESTS" \
    --max-tokens "$MAX_TOKENS" "$@" >"$WORK/$name.out" 2>"$WORK/$name.err"
  local rc=$?
  echo "$rc" >"$WORK/$name.rc"
  echo "   exit $rc after $(($(date +%s) - t)) s"
  sed -n '/^== twinscope demo/,$p' "$WORK/$name.out" | sed 's/^/   /'
  if [[ $rc != 0 ]]; then
    echo "   $name FAILED (exit $rc); the end of its stderr:"
    tail -15 "$WORK/$name.err" | sed 's/^/   | /'
  fi
  { echo "===== $name: stdout"; cat "$WORK/$name.out"; echo "===== $name: stderr"; cat "$WORK/$name.err"; } >>"$LOGS"
}
for name in ${RUNS:-replay live drift}; do
  case $name in
    replay) run replay --mirror-latency "$LATENCY" ;;
    live) run live --live --mirror-latency "$LATENCY" ;;
    drift) run drift --live --no-lockstep ;;
    *) fail "RUNS: unknown run $name (replay, live, drift)" ;;
  esac
done

# ---- what comes back (8 files at most) ------------------------------------------------------------------------
[[ -d $WORK/replay ]] && "$TS" stats "$WORK/replay" >"$LOG/replay-stats.txt" 2>&1
for name in replay live; do
  [[ -f $WORK/$name/report.html ]] && cp "$WORK/$name/report.html" "$LOG/$name-report.html"
done
[[ -f $WORK/build.log ]] && tail -30 "$WORK/build.log" >>"$LOGS"
python3 - "$WORK" "$LOG/results.json" "$(gpu_name)" "$MODEL" \
  "$REQUESTS" "$MAX_TOKENS" "$(elapsed)" <<'EOF' | tee "$LOG/summary.txt"
import json, os, sys
work, out, gpu, model, requests, max_tokens, took = sys.argv[1:8]
runs = {}
for name in ("replay", "live", "drift"):
    r = {"rc": open(f"{work}/{name}.rc").read().strip() if os.path.exists(f"{work}/{name}.rc") else "not run"}
    for key, file in (("summary", "summary.json"), ("mirror_latency", "mirror-latency.json")):
        p = f"{work}/{name}/{file}"
        if os.path.exists(p):
            j = json.load(open(p))
            j.pop("direct_results", None), j.pop("mirror_results", None)
            r[key] = j
    runs[name] = r
json.dump(runs, open(out, "w"), indent=1)

def cell(name, f):
    s = runs[name].get("summary")
    if s is None:
        return "-" if runs[name]["rc"] in ("skipped", "not run") else "FAILED (exit %s)" % runs[name]["rc"]
    try:
        return f(s, runs[name].get("mirror_latency"))
    except (KeyError, TypeError, IndexError) as e:  # a missing field: say so in the cell
        return "? (%s)" % e
def lat(m, k):
    return "%+.2f / %+.2f ms" % (m["added_ms"][k + "_p50"], m["added_ms"][k + "_p99"]) if m else "-"
rows = [
    ("requests ok", lambda s, m: "%d/%d" % (s["requests"]["ok"], s["requests"]["sent"])),
    ("decode steps (each request)", lambda s, m: "%d (%d-%d)" % (s["decode_steps"], *s["decode_steps_per_request"])),
    ("cache intervals (per step)", lambda s, m: "%d (%.1f)" % (s["cache_intervals"], s["cache_intervals_per_step"])),
    ("correlation misses", lambda s, m: str(s["correlation_misses"])),
    ("drops / records missing", lambda s, m: "%d / %d" % (s["drops"], s["kernel_records_missing"])),
    ("cache launches exact", lambda s, m: "%d/%d (%.1f%%)" % (s["exact"], s["shadow_launches"], s["exact_rate_pct"])),
    ("primary's, in steps, exact", lambda s, m: "%d/%d" % (s["primary_target_in_steps_exact"], s["primary_target_in_steps"])),
    ("time only / unmatched", lambda s, m: "%d / %d" % (s["time_only"], s["unmatched_shadow"])),
    ("drifting ranges", lambda s, m: "%d/%d" % (s["drifting_ranges"], s["ranges"])),
    ("primary tokens/s", lambda s, m: "%.0f (%s)" % (s["tokens_per_s"], "alone" if s["mode"] == "replay" else "beside the shadow")),
    ("mirror added TTFT p50/p99", lambda s, m: lat(m, "ttft")),
    ("mirror added total p50/p99", lambda s, m: lat(m, "total")),
]
names = ("replay", "live", "drift")
heads = ("replay (--follow FILE)", "live (lockstep)", "live, no lockstep")
table = [("exit code", [runs[n]["rc"] for n in names])] + [(label, [cell(n, f) for n in names]) for label, f in rows]
w = max(len(label) for label, _ in table)
cw = [max(len(heads[i]), *(len(c[i]) for _, c in table)) for i in range(3)]
print()
print("==== twinscope demo at seed-000 size: %s, model %s, %s requests x %s tokens; %s s in all ====" %
      (gpu, model, requests, max_tokens, took))
print("| %-*s | %s |" % (w, "", " | ".join(h.ljust(cw[i]) for i, h in enumerate(heads))))
for label, c in table:
    print("| %-*s | %s |" % (w, label, " | ".join(x.ljust(cw[i]) for i, x in enumerate(c))))
EOF
status=0
for name in replay live drift; do
  rc=$(cat "$WORK/$name.rc" 2>/dev/null || echo "not run")
  [[ $rc == 0 || $rc == skipped || $rc == "not run" ]] || status=1
done
[[ " ${RUNS:-replay} " != *" replay "* || -f $WORK/replay/summary.json ]] || status=1
((status == 0)) || echo "gpu_demo_seed.sh: FAILED: a run did not finish (table above, logs in $LOGS)" >&2
exit $status
