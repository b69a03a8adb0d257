#!/usr/bin/env bash
# Installs what twinscope needs to build and test, on Debian/Ubuntu (apt-get,
# pip). Looks for each dependency first (a header or a command) and installs
# only what is missing, so it also runs on machines where nothing can be
# installed but everything needed is there (the GPU machine).
#   scripts/setup-deps.sh          everything (tests, fuzzing, benchmarks)
#   scripts/setup-deps.sh --gpu    what the GPU-side build needs (demo)
# Versions are pinned for Debian 12 (bookworm, the CI image); on other
# releases the release's own versions are installed.
set -euo pipefail
mode=${1:-all}

# package | Debian 12 version | how to tell it is present | needed in --gpu mode (gpu: yes; gpu-apt: where
# apt-get works, else the run goes on without it)
deps=(
  "cmake|3.25.1-1|cmd:cmake|gpu"
  "ninja-build|1.11.1-2~deb12u1|cmd:ninja|opt"
  "g++|4:12.2.0-3|cmd:g++|gpu"
  "libzstd-dev|1.5.4+dfsg2-5+deb12u1|file:/usr/include/zstd.h|gpu"
  "libcli11-dev|2.1.2+ds-1|file:/usr/include/CLI/CLI.hpp|gpu"
  "nlohmann-json3-dev|3.11.2-2|file:/usr/include/nlohmann/json.hpp|gpu"
  "libboost-dev|1.74.0.3|file:/usr/include/boost/beast.hpp|all"
  "libgtest-dev|1.12.1-0.2|file:/usr/include/gtest/gtest.h|all"
  "libbenchmark-dev|1.7.1-1|file:/usr/include/benchmark/benchmark.h|all"
  "libsqlite3-dev|3.40.1-2+deb12u2|file:/usr/include/sqlite3.h|all"
  "libprotobuf-dev|3.21.12-3+deb12u1|file:/usr/include/google/protobuf/message_lite.h|all"
  "protobuf-compiler|3.21.12-3+deb12u1|cmd:protoc|all"
  "wrk|4.1.0-3+b2|cmd:wrk|all"
  "valgrind|1:3.19.0-1|cmd:valgrind|all"
  "clang-14|1:14.0.6-12|cmd:clang++|all"
  "clang-format-14|1:14.0.6-12|cmd:clang-format-14|all"
  "libclang-rt-14-dev|1:14.0.6-12|file:/usr/lib/llvm-14/lib/clang/14.0.6/lib/linux/libclang_rt.fuzzer-x86_64.a|all"
  # HTML report: Chart.js inlined at build time (without it the page draws its step chart itself), block
  # detail deflated, and the browser test.
  "libjs-chart.js|3.9.1+~0.2.1-2|file:/usr/share/javascript/chart.js/chart.min.js|gpu-apt"
  "zlib1g-dev|1:1.2.13.dfsg-1|file:/usr/include/zlib.h|all"
  "chromium-headless-shell|156.0.8078.114-1~deb12u1|cmd:chromium-headless-shell|all"
  "fonts-dejavu-core|2.37-6|file:/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf|all"
)
SANITIZER_API_VERSION=13.0.85
# CUPTI with multi-subscriber mode (the program's own CUPTI client runs beside
# twinscope's); `twinscope record` uses the newest CUPTI it finds. GPU side only.
CUPTI_VERSION=13.5.25

present() {
  local how=$1
  case $how in
    cmd:*) command -v "${how#cmd:}" >/dev/null ;;
    file:*) [[ -e ${how#file:} ]] ;;
  esac
}

codename=$( (. /etc/os-release && echo "${VERSION_CODENAME:-}") 2>/dev/null || true)
can_apt=0
[[ $(id -u) -eq 0 ]] && command -v apt-get >/dev/null && can_apt=1
missing=()
optional=()
for d in "${deps[@]}"; do
  IFS='|' read -r pkg ver how need <<<"$d"
  [[ $mode == --gpu && $need != gpu* ]] && continue
  present "$how" && continue
  if [[ $mode == --gpu && $need == gpu-apt ]]; then
    optional+=("$pkg")  # tried below; the build goes on without it
    continue
  fi
  if [[ $codename == bookworm ]]; then missing+=("$pkg=$ver"); else missing+=("$pkg"); fi
done
# Optional packages of the GPU side (Chart.js for the report's step chart): installed where apt-get can
# reach its archive; elsewhere (the GPU machine has apt-get and no network) said once, and the build goes on.
if ((${#optional[@]})); then
  if ((can_apt)) && apt-get update -qq >/dev/null 2>&1 &&
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${optional[@]}" >/dev/null 2>&1; then
    echo "setup-deps: installed ${optional[*]}"
  else
    echo "setup-deps: note: ${optional[*]} not installed (no apt-get, or its archive cannot be reached here); the build goes on without it"
  fi
fi
if ((${#missing[@]})); then
  if ((!can_apt)); then
    echo "setup-deps: missing: ${missing[*]}; install them (as root: apt-get install ...) and run again" >&2
    exit 1
  fi
  echo "setup-deps: installing ${missing[*]}"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

# pip without retries: on a machine that cannot reach the package index this is said once, in one line,
# instead of after five retries. Sets pip_why (why it failed) and returns pip's status; pip's own output is
# shown only when it failed for another reason.
pip_why=""
pip_install() {
  local log
  log=$(mktemp)
  if python3 -m pip install -q --disable-pip-version-check --retries 0 --timeout 5 "$@" >"$log" 2>&1; then
    rm -f "$log"
    return 0
  fi
  if grep -qiE 'connection|resolution|unreachable|timed out|no matching distribution|could not fetch' "$log"; then
    pip_why="pip cannot reach its index (${PIP_INDEX_URL:-https://pypi.org/simple})"
  else
    pip_why="pip failed"
    sed 's/^/  pip: /' "$log" >&2
  fi
  rm -f "$log"
  return 1
}

# Compute Sanitizer API headers and library: the CUDA toolkit's where present,
# else PyPI's package.
if [[ ! -f /usr/local/cuda/compute-sanitizer/include/sanitizer.h ]]; then
  if ! python3 - <<'PY' 2>/dev/null; then
import nvidia, os, sys
sys.exit(0 if any(os.path.exists(os.path.join(p, "cu13/include/sanitizer.h")) for p in nvidia.__path__) else 1)
PY
    pip_install "nvidia-cuda-sanitizer-api==${SANITIZER_API_VERSION}" || {
      echo "setup-deps: $pip_why: nvidia-cuda-sanitizer-api==${SANITIZER_API_VERSION} not installed; install the" \
        "CUDA toolkit's Compute Sanitizer (or that package) and run again" >&2
      exit 1
    }
  fi
fi
# The newest CUPTI (GPU side): PyPI's package where pip works; without it
# twinscope uses the toolkit's CUPTI and builds the same.
if [[ $mode == --gpu ]]; then
  if ! python3 - "$CUPTI_VERSION" <<'PY' 2>/dev/null; then
import importlib.metadata as m, sys
sys.exit(0 if m.version("nvidia-cuda-cupti") == sys.argv[1] else 1)
PY
    pip_install "nvidia-cuda-cupti==${CUPTI_VERSION}" ||
      echo "setup-deps: warning: $pip_why: nvidia-cuda-cupti==${CUPTI_VERSION} not installed; twinscope uses the" \
        "CUDA toolkit's CUPTI (the program's own CUPTI client cannot run beside it)" >&2
  fi
fi
echo "setup-deps: dependencies present"
