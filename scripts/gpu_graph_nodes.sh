#!/usr/bin/env bash
# The block probe and CUDA-graph kernel nodes (GPU only): tests/gpu/graph_nodes.cu
# captures [other, target, other] of one module into a graph, with and without
# cudaGraphUpload, and replays it under `twinscope blocks --kernel graph_target`.
# Prints, per variant: the program's result, traced launches, and how many of
# them have all their 96 blocks. Usage: scripts/gpu_graph_nodes.sh [build-dir]
set -uo pipefail
cd "$(dirname "$0")/.."
BUILD=${1:-build-gpu}
source scripts/gpu_common.sh
require_gpu "gpu_graph_nodes"
export PATH=/usr/local/cuda/bin:$PATH
OUTDIR=${OUT:-gpu-logs}
mkdir -p "$OUTDIR"
W=/tmp/graph-nodes && rm -rf $W && mkdir -p $W
if [[ ! -x $BUILD/bin/twinscope || ! -f $BUILD/lib/libtwinscope_blocks.so ]]; then
  cmake_generator
  cmake -S . -B "$BUILD" "${gen[@]}" -DCMAKE_BUILD_TYPE=Release -DTWINSCOPE_BUILD_TESTS=OFF -DTWINSCOPE_WITH_SQLITE=OFF \
    -DTWINSCOPE_CUDA_ARCHITECTURES=90 >$W/cmake.log 2>&1 && cmake --build "$BUILD" -j "$(nproc)" --target twinscope \
    twinscope_blocks >$W/build.log 2>&1 || { tail -30 $W/build.log; exit 1; }
fi
nvcc -O2 -arch=sm_90 -o $W/graph_nodes tests/gpu/graph_nodes.cu || exit 1
PY=/opt/torch/.venv/bin/python; [[ -x $PY ]] || PY=python3
LOG=$W/graph_nodes.log
: >"$LOG"
# Variants: "UPLOAD REPLAYS EAGER LAYOUT DIAG" (LAYOUT: a = add, t = target,
# s = scale; DIAG: TWINSCOPE_BLOCKS_GRAPH_DIAG, "-" for none). Default: the
# layouts that tell whether a graph node's launch data is its own or the
# graph launch's last one, and which stream hands it over.
VARIANTS=${GRAPH_VARIANTS:-"0 10 0 ats - ; 1 10 0 ats - ; 0 10 3 ats - ; 0 10 0 t - ; 0 10 0 ta - ; 0 10 0 at - ;
  0 10 0 tt - ; 0 10 0 ats node-stream ; 0 10 0 at node-stream ; 0 10 0 ats others-no-data ; 0 10 0 at others-no-data"}
IFS=';' read -ra VLIST <<<"$VARIANTS"
for v in "${VLIST[@]}"; do
  set -- $v
  [[ $# -ge 5 ]] || continue
  tag="upload$1-eager$3-$4-$5"
  diag=$5; [[ $diag == - ]] && diag=
  echo "== $tag" >>"$LOG"
  TWINSCOPE_BLOCKS_GRAPH_DIAG=$diag timeout 120 "$BUILD/bin/twinscope" blocks --kernel graph_target ${EXTRA_BLOCKS:-} \
    -o $W/$tag.tsc -- $W/graph_nodes $1 $2 $3 $4 >>"$LOG" 2>&1
  rc=$?
  "$BUILD/bin/twinscope" stats $W/$tag.tsc --json >$W/$tag.json 2>>"$LOG"
  $PY - "$tag" "$rc" $W/$tag.json <<'PY'
import json, sys
tag, rc, path = sys.argv[1], sys.argv[2], sys.argv[3]
try:
    j = json.load(open(path))
    ls = j.get("shadow_launches", [])
    graph = [l for l in ls if l.get("graph_node")]
    full = sum(1 for l in ls if l["blocks_unique"] == l["blocks_expected"] > 0)
    got = sum(l["blocks_unique"] for l in ls)
    print(f"| {tag} | exit {rc} | {len(ls)} traced ({len(graph)} graph nodes) | {full} with all blocks | {got} blocks |")
except Exception as e:
    print(f"| {tag} | exit {rc} | no stats: {e} |")
PY
done 2>&1 | tee "$OUTDIR/graph_nodes.md"
cp "$LOG" "$OUTDIR/graph_nodes.log" 2>/dev/null
grep -E "graph_nodes:|block probe:|failed|error" "$LOG" | head -40
