#!/usr/bin/env bash
# The formatting check (ctest FormatCheck.*): fails, naming each file, when a C++ or CUDA file that git tracks
# is not as clang-format writes it with the repository's .clang-format. Usage: format_check.sh CLANG_FORMAT
set -euo pipefail
cf=$1
mapfile -t files < <(git ls-files '*.cpp' '*.h' '*.cu')
((${#files[@]})) || { echo "format check: git lists no C++ file here ($PWD)"; exit 1; }
bad=$("$cf" --dry-run "${files[@]}" 2>&1 | grep -oE '^[^:]+:[0-9]+:[0-9]+: (warning|error)' | cut -d: -f1 | sort -u || true)
if [[ -n $bad ]]; then
  echo "not formatted as .clang-format says (fix: clang-format -i FILE...):"
  echo "$bad" | sed 's/^/  /'
  exit 1
fi
echo "${#files[@]} files formatted"
