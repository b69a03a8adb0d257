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
# Variants: "UPLOAD REPLAYS EAGER LAYOUT EXTRA" (LAYOUT: a = add, t = target,
# s = scale; EXTRA: "-", "log" (TWINSCOPE_BLOCKS_GRAPH_DIAG=log) or "everyN"
# (--every N)). Every traced target node must have all its 96 blocks.
VARIANTS=${GRAPH_VARIANTS:-"0 10 0 ats - ; 1 10 0 ats - ; 0 10 3 ats - ; 0 10 0 t - ; 0 10 0 tt - ; 0 10 0 tat - ;
  1 10 0 tsatt - ; 0 12 0 tatt every3 ; 1 6 2 atta every2"}
# One line: `read` stops at the first newline (the last three variants were never run before this).
IFS=';' read -ra VLIST <<<"$(tr '\n' ' ' <<<"$VARIANTS")"
for v in "${VLIST[@]}"; do
  set -- $v
  [[ $# -ge 5 ]] || continue
  tag="upload$1-eager$3-$4-$5"
  diag=; every=()
  [[ $5 == log ]] && diag=log
  [[ $5 == every* ]] && every=(--every "${5#every}")
  echo "== $tag" >>"$LOG"
  TWINSCOPE_BLOCKS_GRAPH_DIAG=$diag timeout 120 "$BUILD/bin/twinscope" blocks --kernel graph_target "${every[@]}" ${EXTRA_BLOCKS:-} \
    -o $W/$tag.tsc -- $W/graph_nodes $1 $2 $3 $4 >>"$LOG" 2>&1
  rc=$?
  "$BUILD/bin/twinscope" stats $W/$tag.tsc --json >$W/$tag.json 2>>"$LOG"
  $PY - "$tag" "$rc" $W/$tag.json "$2" "$3" "$4" "$5" <<'PY'
import json, sys
tag, rc, path = sys.argv[1], sys.argv[2], sys.argv[3]
replays, eager, layout, extra = int(sys.argv[4]), int(sys.argv[5]), sys.argv[6], sys.argv[7]
every = int(extra[5:]) if extra.startswith("every") else 1
nodes = replays * layout.count("t") + eager
want = (nodes + every - 1) // every
try:
    j = json.load(open(path))
    ls = j.get("shadow_launches", [])
    graph = [l for l in ls if l.get("graph_node")]
    full = sum(1 for l in ls if l["blocks_unique"] == l["blocks_expected"] > 0)
    got = sum(l["blocks_unique"] for l in ls)
    ok = rc == "0" and len(ls) == want and full == want
    print(f"| {tag} | exit {rc} | {len(ls)} traced ({len(graph)} graph nodes), want {want} | {full} with all blocks | {got} blocks | {'PASS' if ok else 'FAIL'} |")
except Exception as e:
    print(f"| {tag} | exit {rc} | no stats: {e} |")
PY
done 2>&1 | tee "$OUTDIR/graph_nodes.md"
cp "$LOG" "$OUTDIR/graph_nodes.log" 2>/dev/null
grep -E "graph_nodes:|block probe:|failed|error" "$LOG" | head -40
