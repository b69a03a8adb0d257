"""The Python API and the `twinscope` command of an installed wheel (scripts/test.sh runs it in a fresh venv): versions, the CLI shim, DataFrames of a trace and of a joined run made by the installed CLI."""

import importlib.metadata
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import unittest

import twinscope

SOURCE = os.environ.get("TWINSCOPE_TEST_SOURCE", os.path.join(os.path.dirname(__file__), "..", ".."))
FIXTURE_WRITER = os.environ.get("TWINSCOPE_TEST_FIXTURE_WRITER", "")
TARGET = "_Z23reshape_and_cache_flashv"


def project_version():
    with open(os.path.join(SOURCE, "CMakeLists.txt")) as f:
        return re.search(r"project\(twinscope VERSION ([0-9.]+)", f.read()).group(1)


def twinscope_cmd(*args, env=None):
    """Runs the `twinscope` command of this Python's environment (the wheel's console script)."""
    exe = shutil.which("twinscope", path=os.path.dirname(sys.executable)) or shutil.which("twinscope")
    return subprocess.run(
        [exe] + list(args), stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True, env=env
    )


class Fixture(unittest.TestCase):
    """The join tests' golden twin scene (tests/join/golden/stats.txt), joined by the installed CLI."""

    @classmethod
    def setUpClass(cls):
        if not FIXTURE_WRITER:
            raise RuntimeError("set TWINSCOPE_TEST_FIXTURE_WRITER to build/bin/write_twin_fixture")
        cls.dir = tempfile.mkdtemp(prefix="twinscope-api-")
        subprocess.run([FIXTURE_WRITER, cls.dir], check=True, stdout=subprocess.DEVNULL)
        cls.primary = os.path.join(cls.dir, "primary.tsc")
        cls.shadow = os.path.join(cls.dir, "shadow.tsc")
        cls.run_dir = os.path.join(cls.dir, "run")
        r = twinscope_cmd("join", cls.primary, cls.shadow, "-o", cls.run_dir)
        if r.returncode != 0:
            raise RuntimeError("twinscope join failed: %s" % r.stderr)

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.dir, ignore_errors=True)


class VersionsAndShim(Fixture):
    def test_one_version_everywhere(self):
        v = project_version()
        self.assertEqual(importlib.metadata.version("twinscope"), v)
        self.assertEqual(twinscope.__version__, v)
        r = twinscope_cmd("--version")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(r.stdout.strip(), "twinscope " + v)
        # A trace written by the installed collector (over the fake CUPTI) carries it in its header.
        driver, fake = os.environ.get("TWINSCOPE_TEST_CUPTI_DRIVER"), os.environ.get("TWINSCOPE_TEST_FAKE_CUPTI")
        self.assertTrue(driver and fake, "set TWINSCOPE_TEST_CUPTI_DRIVER and TWINSCOPE_TEST_FAKE_CUPTI (python-test.env)")
        trace = os.path.join(self.dir, "recorded.tsc")
        # The installed CLI finds the installed collector (site-packages/twinscope/lib): nothing else is reachable.
        env = {k: x for k, x in os.environ.items() if not k.startswith("TWINSCOPE_") and k != "LD_PRELOAD"}
        env.update(LD_LIBRARY_PATH=os.path.dirname(fake), TWINSCOPE_CUPTI_LIBRARY=fake)
        r = twinscope_cmd("record", "-o", trace, "--", "sh", "-c", 'exec "$0" "$CUDA_INJECTION64_PATH" plain', driver, env=env)
        self.assertEqual(r.returncode, 0, r.stderr)
        with twinscope.open(trace) as t:
            self.assertEqual(t.header["twinscope_version"], v)
            self.assertEqual(t.processes()["twinscope_version"].tolist(), [v])
            self.assertGreater(len(t.kernels()), 0)

    def test_installed_cli_finds_pips_cupti_beside_it(self):
        # nvidia-cuda-cupti puts libcupti in site-packages/nvidia/cu13/lib, beside the twinscope package:
        # the installed CLI looks there itself (no activated venv, no python3 that knows the venv).
        fake135 = os.environ.get("TWINSCOPE_TEST_FAKE_CUPTI135")
        self.assertTrue(fake135, "set TWINSCOPE_TEST_FAKE_CUPTI135 (python-test.env)")
        site = os.path.dirname(os.path.dirname(os.path.dirname(twinscope.binary())))  # site/twinscope/bin/twinscope
        libdir = os.path.join(site, "nvidia", "cu13", "lib")
        placed = os.path.join(libdir, "libcupti.so.13")
        self.assertFalse(os.path.exists(placed), "the test venv has no nvidia-cuda-cupti (--no-deps)")
        os.makedirs(libdir)
        try:
            shutil.copy(fake135, placed)
            env = {k: x for k, x in os.environ.items() if not k.startswith("TWINSCOPE_") and k not in ("VIRTUAL_ENV", "LD_PRELOAD")}
            env.update(LD_LIBRARY_PATH=os.path.dirname(os.environ["TWINSCOPE_TEST_FAKE_CUPTI"]), PATH="/usr/bin:/bin")
            trace = os.path.join(self.dir, "pip-cupti.tsc")
            r = subprocess.run(
                [twinscope.binary(), "record", "-o", trace, "--", "sh", "-c", 'exec "$0" "$CUDA_INJECTION64_PATH" plain',
                 os.environ["TWINSCOPE_TEST_CUPTI_DRIVER"]],
                stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True, env=env)
            self.assertEqual(r.returncode, 0, r.stderr)
            first = r.stderr.splitlines()[0]
            self.assertIn(placed, first)
            self.assertIn("pip package nvidia-cuda-cupti", first)
        finally:
            shutil.rmtree(os.path.join(site, "nvidia"), ignore_errors=True)

    def test_wheel_holds_every_program_the_commands_run(self):
        # `twinscope demo` runs the demo server and its client beside the CLI, `probe` its child; the
        # collectors sit in lib/. (The H200 run of 2026-12-02 found the client missing.)
        root = os.path.dirname(os.path.dirname(twinscope.binary()))
        for rel in ("bin/twinscope", "bin/twinscope_probe_child", "bin/twinscope-demo-server",
                    "bin/twinscope-demo-client", "lib/libtwinscope_cupti.so", "lib/libtwinscope_guard.so",
                    "lib/libtwinscope_blocks.so"):
            self.assertTrue(os.path.exists(os.path.join(root, rel)), rel)

    def test_shim_runs_the_packaged_binary_with_argv_and_exit_code(self):
        packaged = twinscope.binary()
        self.assertTrue(packaged.endswith(os.path.join("twinscope", "bin", "twinscope")), packaged)
        self.assertTrue(os.access(packaged, os.X_OK), packaged)
        for args in (["stats", os.path.join(self.dir, "missing.tsc")], ["no-such-command"], ["stats", self.primary]):
            direct = subprocess.run([packaged] + args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True)
            shim = twinscope_cmd(*args)
            self.assertEqual(shim.returncode, direct.returncode, args)
            self.assertEqual(shim.stdout, direct.stdout, args)
        self.assertNotEqual(twinscope_cmd("no-such-command").returncode, 0)
        self.assertEqual(twinscope_cmd("stats", self.primary).returncode, 0)


class JoinedRun(Fixture):
    def test_kinds_and_tables(self):
        with twinscope.open(self.run_dir) as run:
            self.assertEqual(run.kind, "joined")
            self.assertEqual(os.path.basename(run.database), "join.sqlite")
            for t in ("kernels", "launches", "matches", "blocks", "why_slow", "requests"):
                self.assertIn(t, run.tables())

    def test_matches_and_launches(self):
        with twinscope.open(self.run_dir) as run:
            m = run.matches()
            self.assertEqual(len(m), 8)  # 9 primary launches, one not traced by the shadow
            # The launch of another grid is diverged, never exact (docs/join.md, "Classes").
            self.assertEqual(sorted(m["kind"]), ["diverged"] + ["exact"] * 7)
            self.assertEqual(int(m["shape_differs"].sum()), 1)
            self.assertEqual(set(m[m["kind"] == "diverged"]["shape_differs"]), {1})
            launches = run.launches()
            self.assertEqual((launches["side"] == "primary").sum(), 9)
            self.assertEqual((launches["side"] == "shadow").sum(), 8)
            self.assertEqual(len(run.kernels()), 9)
            self.assertEqual(set(run.kernels()["name"]), {TARGET})

    def test_blocks_agree_with_launches(self):
        with twinscope.open(self.run_dir) as run:
            blocks = run.blocks()
            shadow = run.launches().query("side == 'shadow'")
            self.assertEqual(len(blocks), int(shadow["blocks_seen"].sum()))
            self.assertGreater(len(blocks), 0)
            self.assertTrue({"sm", "block_order", "rel_enter_ns", "launch_id"} <= set(blocks.columns))

    def test_why_slow_names_the_straggler(self):
        with twinscope.open(self.run_dir) as run:
            w = run.why_slow()
            self.assertGreaterEqual(len(w), 1)
            top = w.iloc[0]
            self.assertEqual(top["kernel"], TARGET)
            self.assertAlmostEqual(float(top["ratio"]), 5.0, places=3)
            self.assertIn("straggler", top["verdicts"])

    def test_requests_processes_and_nvtx(self):
        with twinscope.open(self.run_dir) as run:
            self.assertEqual(len(run.requests()), 0)  # not a serving run: the table is there and empty
            self.assertIn("first_token_us", run.requests().columns)
            p = run.processes()
            self.assertEqual(sorted(p["side"]), ["primary", "shadow"])
            self.assertTrue(p["pid"].notna().all())
            self.assertIn("name", run.nvtx_ranges().columns)

    def test_a_twin_folder_without_join_sqlite_is_joined_on_open(self):
        d = os.path.join(self.dir, "unjoined")
        os.makedirs(d, exist_ok=True)
        shutil.copy(self.primary, os.path.join(d, "primary.tsc"))
        shutil.copy(self.shadow, os.path.join(d, "shadow.tsc"))
        with twinscope.open(d) as run:
            self.assertEqual(run.kind, "joined")
            self.assertEqual(len(run.matches()), 8)
            tmp = run.database
        self.assertFalse(os.path.exists(tmp), "the temporary export is removed on close")


class SingleTrace(Fixture):
    def test_trace_frames(self):
        with twinscope.open(self.primary) as t:
            self.assertEqual(t.kind, "trace")
            k = t.kernels()
            self.assertEqual(len(k), 9)
            self.assertEqual(set(k["name"]), {TARGET})
            self.assertTrue((k["duration_ns"] > 0).all())
            self.assertEqual(len(t.launches()), 9)
            self.assertIn("kernel", t.launches().columns)
            self.assertEqual(t.processes()["role"].tolist(), ["primary"])
        with twinscope.open(self.shadow) as s:
            self.assertGreater(len(s.blocks()), 0)

    def test_joined_only_views_say_so(self):
        with twinscope.open(self.primary) as t:
            for f in (t.matches, t.why_slow, t.requests):
                with self.assertRaisesRegex(twinscope.TwinscopeError, "joined run"):
                    f()

    def test_export_kept_where_asked(self):
        out = os.path.join(self.dir, "kept.sqlite")
        with twinscope.open(self.primary, sqlite=out) as t:
            self.assertEqual(len(t.kernels()), 9)
        self.assertTrue(os.path.exists(out))
        with twinscope.open(out) as again:  # a database opens directly
            self.assertEqual(len(again.rows("kernels_named")), 9)

    def test_bad_input_is_a_clear_error(self):
        with self.assertRaisesRegex(twinscope.TwinscopeError, "no such file"):
            twinscope.open(os.path.join(self.dir, "nothing-here.tsc"))
        junk = os.path.join(self.dir, "junk.tsc")
        with open(junk, "w") as f:
            f.write("not a trace")
        with self.assertRaisesRegex(twinscope.TwinscopeError, "export .* failed"):
            twinscope.open(junk)
        empty = os.path.join(self.dir, "empty-folder")
        os.makedirs(empty, exist_ok=True)
        with self.assertRaisesRegex(twinscope.TwinscopeError, "not a twin/join run folder"):
            twinscope.open(empty)


class WithoutPandas(Fixture):
    def test_frames_say_how_to_get_pandas_and_rows_still_work(self):
        saved = sys.modules.get("pandas")
        sys.modules["pandas"] = None  # import pandas now fails as if it were not installed
        try:
            with twinscope.open(self.run_dir) as run:
                with self.assertRaisesRegex(ImportError, r"pip install twinscope\[pandas\]"):
                    run.matches()
                rows = run.rows("matched_launches")
                self.assertEqual(len(rows), 8)
                self.assertEqual(rows[0]["kind"], "exact")
                self.assertEqual(json.loads(run.meta["target_kernels"]), [TARGET])
        finally:
            if saved is None:
                del sys.modules["pandas"]
            else:
                sys.modules["pandas"] = saved


if __name__ == "__main__":
    unittest.main()
