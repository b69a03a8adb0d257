#!/usr/bin/env bash
# Copies Debian's Chart.js bundle into .gpu-carry/chart.umd.js (gitignored), for GPU runs: carry
# ".gpu-carry" and the GPU scripts configure with -DTWINSCOPE_CHARTJS=$PWD/.gpu-carry/chart.umd.js
# (scripts/gpu_common.sh: chartjs_arg), so reports built there have their charts.
set -euo pipefail
cd "$(dirname "$0")/.."
src=/usr/share/javascript/chart.js/chart.min.js
if [[ ! -f $src ]]; then
  echo "carry-chartjs: $src not found: install libjs-chart.js (scripts/setup-deps.sh)" >&2
  exit 1
fi
mkdir -p .gpu-carry
cp "$src" .gpu-carry/chart.umd.js
echo "carry-chartjs: .gpu-carry/chart.umd.js ($(head -c 200 "$src" | grep -o 'Chart.js v[0-9.]*'), $(stat -c %s "$src") bytes); run with carry [\".gpu-carry\"]"
