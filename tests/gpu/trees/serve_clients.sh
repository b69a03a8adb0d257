#!/usr/bin/env bash
# Sends N POST /work requests, one every 0.2 s, to the mirror at $1 (default 127.0.0.1:8000) once it
# answers; used by scripts/gpu_trees.sh's serve scenario.
url=${1:-http://127.0.0.1:8000}
for _ in $(seq 100); do curl -s -o /dev/null "$url/health" && break; sleep 0.5; done
for i in $(seq "${2:-20}"); do curl -s -o /dev/null -X POST -d '{}' "$url/work"; sleep 0.2; done
