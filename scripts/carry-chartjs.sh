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
# SQLite's headers too: the GPU machine has libsqlite3.so.0 (Python's sqlite3 uses it) but no sqlite3.h, so
# twinscope built there had no SQLite views; with these (an older header on a newer library is what SQLite's
# compatibility promises) gpu_build_cli builds them against that library.
if [[ -f /usr/include/sqlite3.h ]]; then
  mkdir -p .gpu-carry/sqlite
  cp /usr/include/sqlite3.h /usr/include/sqlite3ext.h .gpu-carry/sqlite/
  echo "carry-chartjs: .gpu-carry/sqlite/ (sqlite3.h $(grep -m1 -o 'SQLITE_VERSION  *"[0-9.]*"' /usr/include/sqlite3.h))"
fi
echo "carry-chartjs: .gpu-carry/chart.umd.js ($(head -c 200 "$src" | grep -o 'Chart.js v[0-9.]*'), $(stat -c %s "$src") bytes); run with carry [\".gpu-carry\"]"
