#!/usr/bin/env bash
# The formatting check (ctest FormatCheck.*): fails, naming each file, when a C++ or CUDA file that git tracks
# is not as clang-format writes it with the repository's .clang-format. Usage: format_check.sh CLANG_FORMAT
set -euo pipefail
cf=$1
# safe.directory: a checkout owned by another user than the one running the tests (CI as root) still lists.
if ! list=$(git -c safe.directory='*' ls-files '*.cpp' '*.h' '*.cu' 2>&1); then
  echo "format check: git cannot list the tracked files here ($PWD): $list"
  exit 1
fi
mapfile -t files <<<"$list"
((${#files[@]})) || { echo "format check: git lists no C++ file here ($PWD)"; exit 1; }
bad=$("$cf" --dry-run "${files[@]}" 2>&1 | grep -oE '^[^:]+:[0-9]+:[0-9]+: (warning|error)' | cut -d: -f1 | sort -u || true)
if [[ -n $bad ]]; then
  echo "not formatted as .clang-format says (fix: clang-format -i FILE...):"
  echo "$bad" | sed 's/^/  /'
  exit 1
fi
echo "${#files[@]} files formatted"
