#!/usr/bin/env bash
# The twinscope wheel beside each end of its Sanitizer API range (scripts/wheel.sh step 3b; docs/python.md,
# "Dependencies"). For the lowest and the newest nvidia-cuda-sanitizer-api that pyproject.toml allows, in one
# venv (the wheel installed once, the Sanitizer API swapped): `pip check`; the loader resolves
# libsanitizer-public.so for libtwinscope_blocks.so and twinscope_probe_child; the library it resolves defines
# every sanitizer* symbol those two need; `twinscope probe` names that version. Prints one line per version.
# The dependency wheels come from PyPI once, into WORK/deps, and are kept.
# Usage: scripts/wheel_sanitizer_range.sh TWINSCOPE.whl WORK [PYTHON]
set -euo pipefail
cd "$(dirname "$0")/.."
WHL=$1
W=$2
PY=${3:-python3}
DEPS=$W/deps
V=$W/sanitizer-venv
t0=$SECONDS
# The range as pyproject.toml declares it: "nvidia-cuda-sanitizer-api>=LO,<=HI".
range=$(sed -n 's/^ *"nvidia-cuda-sanitizer-api>=\([0-9.]*\),<=\([0-9.]*\)",*$/\1 \2/p' pyproject.toml)
read -r lo hi <<<"$range"
[[ -n ${lo:-} && -n ${hi:-} ]] || { echo "wheel: pyproject.toml declares no nvidia-cuda-sanitizer-api>=LO,<=HI range" >&2; exit 1; }
cupti_req=$(sed -n 's/^ *"\(nvidia-cuda-cupti[^"]*\)",*$/\1/p' pyproject.toml)
mkdir -p "$DEPS"
pipq=(--disable-pip-version-check -q)
fetch() {  # fetch REQUIREMENT GLOB: downloads the wheel unless one matching GLOB is there
  compgen -G "$DEPS/$2" >/dev/null && return 0
  "$PY" -m pip download "${pipq[@]}" --no-deps --only-binary=:all: -d "$DEPS" "$1" ||
    { echo "wheel: cannot download $1 from PyPI (needed to check the Sanitizer API range)" >&2; exit 1; }
}
fetch "nvidia-cuda-sanitizer-api==$lo" "nvidia_cuda_sanitizer_api-$lo-*.whl"
fetch "nvidia-cuda-sanitizer-api==$hi" "nvidia_cuda_sanitizer_api-$hi-*.whl"
fetch "$cupti_req" "nvidia_cuda_cupti-*.whl"
rm -rf "$V"
# A venv without pip of its own (ensurepip alone takes tens of seconds on a loaded machine): this Python's pip
# installs into it (pip >= 22.3, --python); an older pip gets a venv with pip.
if "$PY" -m venv --without-pip "$V" && "$PY" -m pip --python "$V/bin/python" --version >/dev/null 2>&1; then
  vpip=("$PY" -m pip --python "$V/bin/python")
else
  rm -rf "$V"
  "$PY" -m venv "$V"
  vpip=("$V/bin/python" -m pip)
fi
pipi=("${vpip[@]}" install "${pipq[@]}" --no-index --find-links "$DEPS")
"${pipi[@]}" "$WHL" "nvidia-cuda-sanitizer-api==$lo"
PKG=$("$V/bin/python" -c 'import os, twinscope; print(os.path.dirname(twinscope.__file__))')
users=("$PKG/lib/libtwinscope_blocks.so" "$PKG/bin/twinscope_probe_child")
for u in "${users[@]}"; do [[ -f $u ]] || { echo "wheel: $u is not in the wheel" >&2; exit 1; }; done
mapfile -t needed < <(nm -D --undefined-only "${users[@]}" | awk '$2 ~ /^sanitizer/ {print $2}' | sort -u)
((${#needed[@]})) || { echo "wheel: no sanitizer* symbol needed by ${users[*]}: the check would be empty" >&2; exit 1; }
for v in "$lo" "$hi"; do
  [[ $v == "$lo" ]] || "${pipi[@]}" "nvidia-cuda-sanitizer-api==$v"
  got=$("${vpip[@]}" show nvidia-cuda-sanitizer-api 2>/dev/null | sed -n 's/^Version: //p')
  [[ $got == "$v" ]] || { echo "wheel: nvidia-cuda-sanitizer-api $v asked, $got installed" >&2; exit 1; }
  "${vpip[@]}" check >/dev/null || { "${vpip[@]}" check >&2; exit 1; }
  for u in "${users[@]}"; do
    lib=$(ldd "$u" | awk '$1 == "libsanitizer-public.so" {print $3}')
    [[ -n $lib && $lib != not ]] ||
      { echo "wheel: with the Sanitizer API $v, ${u#"$PKG"/} cannot find libsanitizer-public.so:" >&2; ldd "$u" >&2; exit 1; }
    missing=$(comm -23 <(printf '%s\n' "${needed[@]}") <(nm -D --defined-only "$lib" | awk '{print $3}' | sort -u))
    [[ -z $missing ]] || { echo "wheel: the Sanitizer API $v ($lib) lacks: $missing" >&2; exit 1; }
  done
  # What `twinscope probe` says it loads (no GPU here: the line comes before the experiments).
  said=$("$V/bin/twinscope" probe --launches 1 --timeout 20 2>&1 >/dev/null | grep -m1 "Compute Sanitizer API" || true)
  [[ $said == *"Compute Sanitizer API $v at "* ]] ||
    { echo "wheel: twinscope probe with the Sanitizer API $v said: ${said:-nothing about it}" >&2; exit 1; }
  echo "wheel: with nvidia-cuda-sanitizer-api $v: pip check ok; libsanitizer-public.so at ${lib#"$V"/} defines the" \
    "${#needed[@]} entry points the block probe and the probe child use; probe: ${said#twinscope probe: }"
done
echo "wheel: the Sanitizer API range $lo..$hi checked in $((SECONDS - t0)) s"
