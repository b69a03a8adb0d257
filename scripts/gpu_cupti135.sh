#!/usr/bin/env bash
# CUPTI 13.5 on the GPU machine (issue 9): PyPI's nvidia-cuda-cupti 13.5.25
# beside the toolkit's 13.0, with the collector in multi-subscriber mode and
# the guard serving the program's own CUPTI client. ~4-5 minutes. Prints a
# short table last; every log is packed into $OUT/cupti135-logs.tgz.
#
#   1. torch.profiler GPU-kernel events in a small PyTorch program alone, under
#      `record` on 13.5 (guard serves it) and on 13.0 (the floor: refused, told)
#      with twinscope's own kernel records; on 13.5 CUPTI refuses Kineto's own
#      (TSC) clock beside twinscope and the guard translates its records'
#      timestamps: the "times" column checks them across clocks (each
#      cudaLaunchKernel, a CUPTI record, inside its aten::add_, Kineto's own);
#   2. the same for a program using the CUPTI activity API itself
#      (tests/gpu/cupti_own_client.cu), and `record` finding the 13.5 wheel
#      by itself (PYTHONPATH, no TWINSCOPE_CUPTI_LIBRARY);
#   3. `twinscope probe` on 13.5 (the v2 / v1 / Sanitizer rows);
#   4. seed 001 against 13.5 (scripts/gpu_cupti.sh stress, TWINSCOPE_CUPTI_LIBRARY);
#   5. overhead against the bare-CUPTI floor, 13.5 vs 13.0 (bench_kernels, as
#      scripts/gpu_cupti.sh bench measures it, fewer launches, 2 interleaved rounds).
#
# The wheel travels in a carried folder. Once, in the repository root of the
# machine that sends the run (it has network):
#   echo /.whl/ >> .git/info/exclude
#   python3 -m pip download --no-deps --only-binary=:all: --platform manylinux_2_25_x86_64 \
#     --platform manylinux_2_28_x86_64 -d .whl nvidia-cuda-cupti==13.5.25
# then run with `.whl` carried:  scripts/gpu_cupti135.sh [.whl]
# Environment: BUILD_DIR (default build-gpu), PYTHON (default /opt/torch/.venv/bin/python).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
WHEELS=${1:-.whl}
BUILD=${BUILD_DIR:-build-gpu}
PY=${PYTHON:-/opt/torch/.venv/bin/python}
OUTDIR=${OUT:-$ROOT/gpu-logs}
LOG=$(mktemp -d /tmp/cupti135-logs.XXXXXX)
mkdir -p "$OUTDIR"
export PATH=/usr/local/cuda/bin:$PATH

# shellcheck source=scripts/gpu_common.sh
source scripts/gpu_common.sh
require_gpu "gpu_cupti135.sh"

pack() { tar -czf "$OUTDIR/cupti135-logs.tgz" -C "$LOG" . 2>/dev/null || true; }
trap pack EXIT
fail() {
  echo "gpu_cupti135.sh: $*" >&2
  exit 1
}
T0=$(date +%s)
elapsed() { echo "$(($(date +%s) - T0)) s"; }

# ---- 1. the 13.5 wheel -------------------------------------------------------------
whl=$(ls "$WHEELS"/nvidia_cuda_cupti-13.5.25-*.whl 2>/dev/null | head -1 || true)
[[ -n $whl ]] || fail "no nvidia_cuda_cupti-13.5.25-*.whl in '$WHEELS': download it as the top of this script says and carry the folder"
SITE=/tmp/cupti135-site
rm -rf "$SITE"
if ! python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target "$SITE" "$whl" \
  >"$LOG/pip.log" 2>&1; then
  echo "== pip could not install the wheel (see pip.log): unpacking it instead"
  python3 -m zipfile -e "$whl" "$SITE" || fail "cannot unpack $whl"
fi
LIB135=$SITE/nvidia/cu13/lib/libcupti.so.13
LIB130=/usr/local/cuda/lib64/libcupti.so.13
[[ -f $LIB135 ]] || fail "the wheel has no nvidia/cu13/lib/libcupti.so.13"
[[ -f $LIB130 ]] || fail "no toolkit CUPTI at $LIB130"

# ---- 2. build -------------------------------------------------------------------------
SAN=${SANITIZER_ROOT:-/usr/local/cuda/compute-sanitizer}
cmake_generator
targets=(twinscope twinscope_cupti twinscope_guard twinscope_probe_child cupti_own_client cupti_graph_stress
  cupti_trace_check bench_kernels bare_cupti)
echo "== build ($BUILD)"
if ! {
  cmake -S . -B "$BUILD" "${gen[@]}" -DCMAKE_BUILD_TYPE=Release -DTWINSCOPE_BUILD_GPU_TESTS=ON \
    -DTWINSCOPE_BUILD_BENCH=ON -DTWINSCOPE_WITH_SQLITE=OFF -DTWINSCOPE_WITH_MIRROR=OFF \
    -DTWINSCOPE_CUDA_ARCHITECTURES=90 -DTWINSCOPE_SANITIZER_ROOT="$SAN" &&
    cmake --build "$BUILD" -j "$(nproc)" --target "${targets[@]}"
} >"$LOG/build.log" 2>&1; then
  tail -40 "$LOG/build.log"
  fail "build failed (build.log in $OUTDIR/cupti135-logs.tgz)"
fi
BIN=$ROOT/$BUILD/bin
LIB=$ROOT/$BUILD/lib/libtwinscope_cupti.so
BARE=$ROOT/$BUILD/lib/libbare_cupti.so
[[ -f $BARE ]] || BARE=$(find "$ROOT/$BUILD" -name 'libbare_cupti.so' | head -1)
[[ -f $ROOT/$BUILD/lib/libtwinscope_guard.so && -x $BIN/twinscope && -f $BARE ]] || fail "build products missing"
export LD_LIBRARY_PATH=$SAN:${LD_LIBRARY_PATH:-}
echo "   built ($(elapsed))"

# alone <name> <command...>: the program by itself.
alone() {
  local name=$1
  shift
  timeout 180 "$@" >"$LOG/$name.out" 2>"$LOG/$name.err" || echo "   $name: exit $? (see $name.err)"
}
# rec <name> <libcupti|default> <command...>: under `twinscope record`, then its stats as JSON.
rec() {
  local name=$1 lib=$2
  shift 2
  local env=(env -u TWINSCOPE_CUPTI_LIBRARY)
  [[ $lib != default ]] && env+=(TWINSCOPE_CUPTI_LIBRARY="$lib")
  timeout 180 "${env[@]}" "$BIN/twinscope" record -o "$LOG/$name.tsc" -- "$@" >"$LOG/$name.out" 2>"$LOG/$name.err" ||
    echo "   $name: exit $? (see $name.err)"
  "$BIN/twinscope" stats --json "$LOG/$name.tsc" >"$LOG/$name.stats.json" 2>>"$LOG/$name.err" || true
  "$BIN/twinscope" stats "$LOG/$name.tsc" >"$LOG/$name.stats.txt" 2>&1 || true
  rm -f "$LOG/$name.tsc"
}

# ---- 3. the program's own CUPTI client ------------------------------------------------------
if "$PY" -c 'import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)' 2>/dev/null; then
  echo "== torch.profiler alone / under record on 13.5 / on 13.0 ($(elapsed))"
  TP=(tests/gpu/torch_profiler_count.py --eager 2000 --replays 20)
  alone torch_alone "$PY" "${TP[@]}"
  rec torch_rec135 "$LIB135" "$PY" "${TP[@]}"
  rec torch_rec130 "$LIB130" "$PY" "${TP[@]}"
else
  echo "== no CUDA-enabled torch at $PY: torch.profiler rows left out" | tee "$LOG/torch.missing"
fi
echo "== activity-API program alone / under record on 13.5 / on 13.0 / record finding 13.5 itself ($(elapsed))"
OC=("$BIN/cupti_own_client" --eager 200000 --replays 1000)
alone own_alone "${OC[@]}"
rec own_rec135 "$LIB135" "${OC[@]}"
rec own_rec130 "$LIB130" "${OC[@]}"
PYTHONPATH=$SITE rec own_default default "$BIN/cupti_own_client" --eager 1000 --replays 10

# ---- 4. probe -----------------------------------------------------------------------------
echo "== twinscope probe on 13.5 ($(elapsed))"
PYTHONPATH=$SITE timeout 300 "$BIN/twinscope" probe --json "$LOG/probe.json" >"$LOG/probe.txt" 2>"$LOG/probe.err" ||
  echo "   probe: exit $? (see probe.err)"
cat "$LOG/probe.txt"

# ---- 5. seed 001 against 13.5 ---------------------------------------------------------------
echo "== seed 001 on 13.5: scripts/gpu_cupti.sh stress with TWINSCOPE_CUPTI_LIBRARY ($(elapsed))"
TWINSCOPE_CUPTI_LIBRARY=$LIB135 OUT=$LOG/stress BUILD_DIR=$BUILD timeout 420 scripts/gpu_cupti.sh stress \
  >"$LOG/stress135.txt" 2>&1 || echo "   stress: exit $? (see stress135.txt)"
tail -5 "$LOG/stress135.txt"
# The stress traces' own header says which CUPTI recorded them.
grep -ho '"cupti_library":"[^"]*"' "$LOG"/stress/cupti-stress/*.trace.json 2>/dev/null | sort -u | head -2 || true

# ---- 6. overhead against the floor, 13.5 vs 13.0 ----------------------------------------------------
echo "== overhead: plain / floor / twinscope on 13.0 and 13.5, 2 interleaved rounds ($(elapsed))"
BK=("$BIN/bench_kernels" --eager 300000 --graph-kernels 100 --graph-replays 3000)
for round in 1 2; do
  for v in plain floor130 floor135 ts130 ts135; do
    run=(env)
    case $v in
      floor130) run=(env CUDA_INJECTION64_PATH="$BARE") ;;
      floor135) run=(env CUDA_INJECTION64_PATH="$BARE" LD_PRELOAD="$LIB135") ;; # its SONAME stands for the linked one
      ts130) run=(env CUDA_INJECTION64_PATH="$LIB" NVTX_INJECTION64_PATH="$LIB" TWINSCOPE_CUPTI_LIBRARY="$LIB130") ;;
      ts135) run=(env CUDA_INJECTION64_PATH="$LIB" NVTX_INJECTION64_PATH="$LIB" TWINSCOPE_CUPTI_LIBRARY="$LIB135") ;;
    esac
    timeout 120 "${run[@]}" TWINSCOPE_QUIET=1 TWINSCOPE_OUTPUT="$LOG/bench.tsc" "${BK[@]}" >>"$LOG/bench.$v.jsonl" \
      2>>"$LOG/bench.$v.err" || echo "   bench $v: exit $?"
    rm -f "$LOG/bench.tsc"
  done
done
echo "   done ($(elapsed))"

# ---- the table -------------------------------------------------------------------------------
echo
echo "================ CUPTI 13.5 on $(nvidia-smi --query-gpu=name --format=csv,noheader | head -1) ($(elapsed) in all) ================"
python3 - "$LOG" "$LIB135" <<'EOF' | tee "$OUTDIR/cupti135-summary.txt"
import glob, json, os, statistics, sys
log, lib135 = sys.argv[1], sys.argv[2]

def last_json(path):
    try:
        lines = [l for l in open(path).read().splitlines() if l.strip().startswith("{")]
        return json.loads(lines[-1]) if lines else None
    except (OSError, ValueError):
        return None

def stats(name):
    try:
        return json.load(open(os.path.join(log, name + ".stats.json")))
    except (OSError, ValueError):
        return None

def ts(name):
    s = stats(name)
    if not s:
        return "no trace"
    l = s["loss"]
    return f'{s["counts"].get("kernel", 0)} kernels (seen {l["launches_seen"]}, missing {l["missing"]})'

def guard(name):
    s = stats(name)
    p = (s or {}).get("status", {}).get("tool_state", {}).get("program_cupti")
    if not p:
        return "-"
    g = f'{p.get("mode")}: refused {p.get("refused", 0)}, failed {p.get("failed", 0)}'
    t = p.get("timestamps")
    if t:
        g += (f'; clock {t.get("how")} ({t.get("cupti_result")}): {t.get("records_translated", 0)} records, '
              f'{t.get("untranslated_records", 0)} untranslated {t.get("untranslated_kinds", {})}, '
              f'pair +-{t.get("max_pair_uncertainty_ns", "?")} ns')
    return g

def times(j):
    if not j or "launches" not in j:
        return (j or {}).get("time_check", "-")
    return f'{j["launches_inside_ops"]} of {j["launches"]} launches inside their op'

rows = [("program", "run", "program's own count", "twinscope trace", "times", "guard")]
for prog, key, runs in (("torch.profiler", "torch_kernel_events", ("torch_alone", "torch_rec135", "torch_rec130")),
                        ("activity API", "own_kernel_records", ("own_alone", "own_rec135", "own_rec130"))):
    for r in runs:
        j = last_json(os.path.join(log, r + ".out"))
        own = f'{j[key]} of {j.get("launched", j.get("launches"))}' if j and key in j else "no output"
        rows.append((prog, {"alone": "alone", "rec135": "record, 13.5", "rec130": "record, 13.0"}[r.split("_")[1]],
                     own, "-" if r.endswith("alone") else ts(r), times(j) if prog == "torch.profiler" else "-",
                     "-" if r.endswith("alone") else guard(r)))
w = [max(len(str(r[i])) for r in rows) for i in range(6)]
for r in rows:
    print("  ".join(str(c).ljust(x) for c, x in zip(r, w)))
s = stats("own_default")
used = (s or {}).get("header", {}).get("cupti_library", "?")
print(f'record with no TWINSCOPE_CUPTI_LIBRARY (13.5 on PYTHONPATH) used: {used} '
      f'[{"PASS" if used == lib135 else "FAIL"}]')
try:
    p = json.load(open(os.path.join(log, "probe.json")))
    print("probe:", p.get("summary", "?")[:150])
    print("probe, CUPTI clients:", (p.get("cupti_summary") or "?")[:200])
except (OSError, ValueError):
    print("probe: no result (see probe.err)")
try:
    lines = open(os.path.join(log, "stress135.txt")).read().splitlines()
    ko = [l for l in lines if l.startswith("kernels_only") or l.startswith("mitigated")]
    print("seed 001 on 13.5 (pool 8, 600,000 replays):", *(" | " + " ".join(l.split()) for l in ko) or [" no table"])
except OSError:
    print("seed 001: no output")
print(f'{"overhead ns/kernel (median of 2)":34} {"plain":>8} {"floor13.0":>10} {"ts13.0":>8} {"floor13.5":>10} '
      f'{"ts13.5":>8}  ts/floor 13.0, 13.5 (added over plain)')
med = {}
for path in glob.glob(os.path.join(log, "bench.*.jsonl")):
    v = os.path.basename(path).split(".")[1]
    for line in open(path):
        try:
            j = json.loads(line)
        except ValueError:
            continue
        med.setdefault(j["workload"], {}).setdefault(v, []).append(j["ns_per_kernel"])
for wl, vs in sorted(med.items()):
    m = {v: statistics.median(x) for v, x in vs.items()}
    def ratio(ts, fl):
        if "plain" not in m or ts not in m or fl not in m or m[fl] - m["plain"] <= 0:
            return "n/a"
        return f'{(m[ts] - m["plain"]) / (m[fl] - m["plain"]):.2f}'
    cell = lambda v: f'{m[v]:.0f}' if v in m else "-"
    print(f'{wl:34} {cell("plain"):>8} {cell("floor130"):>10} {cell("ts130"):>8} {cell("floor135"):>10} '
          f'{cell("ts135"):>8}  {ratio("ts130", "floor130")}, {ratio("ts135", "floor135")}')
EOF
