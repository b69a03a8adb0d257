# Sourced by scripts/vllm_real.sh, scripts/sglang_real.sh and scripts/transformers_real.sh: their arguments, the skip unless ctest opted in, and the venv of one engine version (reused, else made).
# shellcheck shell=bash
# The caller sets SCRIPT (its name in messages), ENGINE (the package), ENGINE_VERSION, VENV (the default venv), REAL (the
# variable that opts ctest in), LABEL (its ctest label), SKIP (what a run costs, said when skipped), NEED_PY and
# MAKING (what the messages add after "python3.11 is needed" and after the version in "making"), optionally NEED_GB
# (the free space a new venv needs, checked before making one), and defines
# engine_install, which fills a new venv once the wheel is in (PY and PIP are set), then calls engine_args "$@" and
# engine_venv, and may end with engine_tests MODULE.

engine_args() {
  CTEST=0
  while [ $# -gt 0 ]; do
    case "$1" in
      --venv) VENV="$2"; shift 2 ;;
      --ctest) CTEST=1; shift ;;
      *) echo "$SCRIPT: unknown argument $1 (usage: $SCRIPT [--venv DIR] [--ctest])" >&2; exit 2 ;;
    esac
  done
  if [ "$CTEST" = 1 ] && [ "${!REAL:-}" != 1 ]; then
    echo "$SCRIPT: skipped ($SKIP): run $REAL=1 ctest -L $LABEL"
    exit 77
  fi
  PY="$VENV/bin/python"
}

# A venv whose making did not finish holds this file and is never reused.
INCOMPLETE=twinscope-incomplete

engine_have() {
  [ -x "$PY" ] && [ ! -e "$VENV/$INCOMPLETE" ] &&
    "$PY" -c "import importlib.metadata as m, sys; sys.exit(m.version('$ENGINE') != '$ENGINE_VERSION')" 2>/dev/null
}

engine_failed() {
  echo "$SCRIPT: making $VENV failed (pip's message above: is PyPI reachable, is there room on the disk? df -h" \
    "$(dirname "$VENV")). It stays marked incomplete ($VENV/$INCOMPLETE) and is not reused: remove $VENV and run" \
    "again, or give --venv DIR" >&2
}

engine_venv() {
  if engine_have; then
    echo "$SCRIPT: reusing $VENV ($ENGINE $ENGINE_VERSION)"
  else
    command -v python3.11 >/dev/null || { echo "$SCRIPT: python3.11 is needed$NEED_PY" >&2; exit 2; }
    if [ -n "${NEED_GB:-}" ]; then
      local parent free
      parent="$(dirname "$VENV")"
      mkdir -p "$parent"
      free="$(df -Pk "$parent" | awk 'NR == 2 { print int($4 / 1048576) }')"
      if [ "$free" -lt "$NEED_GB" ]; then
        echo "$SCRIPT: making $VENV needs about $NEED_GB GB free on its disk, $parent has $free GB: free some" \
          "or give --venv DIR on a disk with room" >&2
        exit 2
      fi
    fi
    echo "$SCRIPT: making $VENV ($ENGINE $ENGINE_VERSION$MAKING)"
    python3.11 -m venv "$VENV"
    touch "$VENV/$INCOMPLETE"
    PIP=("$PY" -m pip install --no-cache-dir --disable-pip-version-check -q)
    set -E
    trap engine_failed ERR
    "${PIP[@]}" --no-deps "$ENGINE==$ENGINE_VERSION"
    engine_install
    trap - ERR
    set +E
    rm -f "$VENV/$INCOMPLETE"
    engine_have || { echo "$SCRIPT: $VENV has no $ENGINE $ENGINE_VERSION after the install" >&2; exit 1; }
  fi
}

# engine_requirements FILE DROP_MARKED NAME...: writes to FILE the requirements of the installed ENGINE wheel but the
# packages NAME... (names compared as pip does: case, "-", "_" and "." alike) and, with DROP_MARKED=1, every one with an
# environment marker; says how many.
engine_requirements() {
  "$PY" - "$ENGINE" "$SCRIPT" "$@" <<'PYEOF'
import importlib.metadata as m, re, sys
engine, script, path, drop_marked = sys.argv[1:5]
norm = lambda name: re.sub(r"[-_.]+", "-", name).lower()  # as pip compares names (flashinfer_python, flashinfer-python)
left_out = set(norm(n) for n in sys.argv[5:])
keep = [r for r in m.requires(engine) if not (drop_marked == "1" and ";" in r)
        and norm(re.split(r"[\s\[<>=!~;]", r, 1)[0]) not in left_out]
open(path, "w").write("\n".join(keep) + "\n")
print("%s: %d requirements, left out: %s" % (script, len(keep), ", ".join(sorted(left_out)) or "none"))
PYEOF
}

# engine_tests MODULE: runs tests/engines/MODULE.py in the venv (full log in $TMPDIR or /tmp, MODULE.log), prints a
# table of each test's result and the tracebacks of the failed ones, and exits with the run's status.
engine_tests() {
  local module=$1 log="${TMPDIR:-/tmp}/$1.log" rc
  cd "$HERE/tests/engines"
  set +e
  TWINSCOPE_TEST_SOURCE="$HERE" PYTHONDONTWRITEBYTECODE=1 "$PY" - "$log" "$module" "$SCRIPT" <<'PYEOF'
import sys, unittest
log, module, script = open(sys.argv[1], "w"), sys.argv[2], sys.argv[3]
suite = unittest.defaultTestLoader.loadTestsFromName(module)
def each(s):
    for t in s:
        yield from (each(t) if isinstance(t, unittest.TestSuite) else [t])
ids = [t.id() for t in each(suite)]  # before the run: a suite lets its tests go as they finish
result = unittest.TextTestRunner(stream=log, verbosity=2).run(suite)
bad = {t.id(): "FAIL" for t, _ in result.failures}
bad.update({t.id(): "ERROR" for t, _ in result.errors})
print("\n%s: %s (full log: %s)" % (script, module, sys.argv[1]))
print("%-72s %s" % ("test", "result"))
for i in ids:
    print("%-72s %s" % (i.replace(module + ".", ""), bad.get(i, "ok")))
for t, tb in result.failures + result.errors:
    print("\n%s:\n%s" % (t.id(), tb[-2000:]))
sys.exit(0 if result.wasSuccessful() else 1)
PYEOF
  rc=$?
  set -e
  exit $rc
}
