"""The `twinscope` command of the wheel: runs the packaged C++ CLI (site-packages/twinscope/bin/twinscope) with the same arguments and exit code."""

import os
import sys

_ENV_BINARY = "TWINSCOPE_CLI_BINARY"


def binary():
    """Path of the twinscope CLI: $TWINSCOPE_CLI_BINARY if set, else the one packaged with this module."""
    override = os.environ.get(_ENV_BINARY)
    if override:
        return override
    return os.path.join(os.path.dirname(os.path.abspath(__file__)), "bin", "twinscope")


def main():
    exe = binary()
    if not os.access(exe, os.X_OK):
        sys.stderr.write(
            "twinscope: the CLI binary is missing at %s: this twinscope package was installed without it "
            "(a source checkout?). Install the wheel (pip install twinscope) or set %s to a built "
            "twinscope (build/bin/twinscope).\n" % (exe, _ENV_BINARY)
        )
        return 127
    # exec: the CLI becomes this process (signals, exit code, /proc/self/exe
    # for finding its libraries next to it).
    os.execv(exe, [exe] + sys.argv[1:])
    return 127  # not reached


if __name__ == "__main__":
    sys.exit(main())
