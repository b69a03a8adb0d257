#!/usr/bin/env bash
# Both ends of the wheel's Sanitizer API range on the GPU machine (issue 32, part 3): for the lowest and the
# newest nvidia-cuda-sanitizer-api that pyproject.toml allows, installs the twinscope wheel carried in .whl/
# with that version (no network: pip --no-index --find-links .whl) into a fresh venv that also sees the
# machine's PyTorch, runs `twinscope probe` and a small `twin` of a PyTorch program, and prints a table last
# (version, the version the probe says it loaded, probe exit and summary, twin exit, exact/total). Logs
# under $OUT. Once both ends ran, add the newest to MeasuredSanitizerVersions() (src/probe/sanitizer_version.h)
# and the run to bench/RESULTS.md; narrow pyproject.toml's range where an end failed.
# Carried in .whl/:
#   twinscope-<version>-py3-none-manylinux_*_x86_64.whl          (BUILD/wheel/dist, scripts/wheel.sh)
#   nvidia_cuda_sanitizer_api-<LO>-...whl, nvidia_cuda_sanitizer_api-<HI>-...whl
#   nvidia_cuda_cupti-13.5.25-...whl
#   (BUILD/wheel/deps holds all three after scripts/wheel.sh; or: pip download --no-deps -d .whl
#    nvidia-cuda-sanitizer-api==LO nvidia-cuda-sanitizer-api==HI nvidia-cuda-cupti==13.5.25)
# Usage: scripts/gpu_sanitizer_range.sh [VERSION...]   (default: both ends of pyproject.toml's range)
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/gpu_common.sh
[[ ${DRY_RUN:-0} == 1 ]] || require_gpu "gpu_sanitizer_range"
OUTDIR=${OUT:-gpu-logs}
mkdir -p "$OUTDIR"
LOG=$OUTDIR/sanitizer-range.log
: >"$LOG"
BASE=/opt/torch/.venv/bin/python3
[[ -x $BASE ]] || BASE=python3
WORK=/tmp/twinscope-sanitizer-range
rm -rf "$WORK" && mkdir -p "$WORK"
whl=$(ls .whl/twinscope-*.whl 2>/dev/null | head -1 || true)
[[ -n $whl ]] || { echo "gpu_sanitizer_range: no .whl/twinscope-*.whl: build it with scripts/wheel.sh" >&2; exit 1; }
versions=("$@")
if ((${#versions[@]} == 0)); then
  read -r lo hi < <(sed -n 's/^ *"nvidia-cuda-sanitizer-api>=\([0-9.]*\),<=\([0-9.]*\)",*$/\1 \2/p' pyproject.toml)
  versions=("$lo" "$hi")
fi
torch_site=$("$BASE" -c 'import site; print(site.getsitepackages()[0])')
rows=()
for v in "${versions[@]}"; do
  echo "=== nvidia-cuda-sanitizer-api $v" | tee -a "$LOG"
  V=$WORK/venv-$v
  # A venv made from PyTorch's venv sees only the base interpreter's packages (--system-site-packages
  # included): PyTorch's site-packages join through a .pth file, after the venv's own (so this venv's
  # nvidia-cuda-sanitizer-api wins over any other).
  "$BASE" -m venv "$V"
  echo "$torch_site" >"$("$V/bin/python" -c 'import site; print(site.getsitepackages()[0])')/torch-site.pth"
  if ! "$V/bin/python" -m pip install --disable-pip-version-check --no-index --find-links .whl "$whl" \
    "nvidia-cuda-sanitizer-api==$v" >>"$LOG" 2>&1; then
    rows+=("| $v | install FAILED | - | - | - | - | - |")
    continue
  fi
  got=$("$V/bin/python" -m pip show nvidia-cuda-sanitizer-api 2>/dev/null | sed -n 's/^Version: //p')
  "$V/bin/python" -m pip check >>"$LOG" 2>&1 && check=ok || check=FAILED
  export_path=$V/bin:/usr/local/cuda/bin:$PATH
  prc=0
  PATH=$export_path twinscope probe --json "$WORK/probe-$v.json" >"$WORK/probe-$v.out" 2>"$WORK/probe-$v.err" || prc=$?
  cat "$WORK/probe-$v.out" "$WORK/probe-$v.err" >>"$LOG"
  loaded=$(grep -m1 -o "Compute Sanitizer API [^ ]*" "$WORK/probe-$v.err" | awk '{print $4}' || true)
  summary=$(sed -n 's/^summary: //p' "$WORK/probe-$v.out" | cut -c1-60)
  trc=0
  PATH=$export_path twinscope twin --kernel layer_norm -o "$WORK/twin-$v" -- python3 tests/gpu/twin_torch.py \
    >>"$LOG" 2>&1 || trc=$?
  exact=$("$V/bin/python" -c "
import json, sys
try:
    s = json.load(open('$WORK/twin-$v/join.json'))['summary']
    print('%d/%d' % (s['exact'], s['shadow_launches']))
except Exception as e:
    print('-')" 2>/dev/null)
  rows+=("| $v | $got, pip check $check | ${loaded:--} | $prc | ${summary:--} | $trc | $exact |")
  [[ -f $WORK/probe-$v.json ]] && cp "$WORK/probe-$v.json" "$OUTDIR/"
done
{
  echo
  echo "## Sanitizer API range on $( (nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null || echo "no GPU") | head -1) ($(basename "$whl"))"
  echo
  echo "| version | installed | probe loaded | probe exit | probe summary | twin exit | exact/total |"
  echo "|---|---|---|---|---|---|---|"
  printf '%s\n' "${rows[@]}"
} | tee "$OUTDIR/sanitizer-range-table.md"
