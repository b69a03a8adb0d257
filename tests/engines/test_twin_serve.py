"""`twinscope twin --serve` end to end with the fake engine's HTTP server (tests/engines/fake/serve.py) and its adapter: the primary records, the shadow replays the logged requests and forces the primary's steps; no CUDA, so nothing is joined, but both schedules, statuses and the request trace are checked (docs/engines.md); and a sizing flag given to the primary only reaching the shadow (docs/sequential-serving.md)."""

import http.client
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCE = os.environ.get("TWINSCOPE_TEST_SOURCE", os.path.join(HERE, "..", ".."))
BIN = os.environ.get("TWINSCOPE_TEST_BIN", "")
FAKE = os.path.join(HERE, "fake")


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p


def has_adapters():
    if not BIN or not os.path.exists(BIN):
        return False
    out = subprocess.run([BIN, "twin", "--help"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, universal_newlines=True)
    return "--engine-adapter" in out.stdout


def steps(path):
    with open(path) as f:
        docs = [json.loads(x) for x in f if x.strip()]
    return [{k: v for k, v in d.items() if k not in ("start_us", "dur_us")} for d in docs if d.get("type") == "step"]


@unittest.skipUnless(BIN, "set TWINSCOPE_TEST_BIN to the built twinscope (ctest does)")
class TwinServe(unittest.TestCase):
    def serve(self, twin_args=(), n=6, duration=4):
        """`twin --serve` of the fake engine behind the mirror, n streamed requests at once; (run, stdout+stderr, {id: (status, body)})."""
        self.assertTrue(has_adapters(), "%s twin has no --engine-adapter" % BIN)
        run = tempfile.mkdtemp(prefix="twinscope-engines-serve-")
        self.addCleanup(shutil.rmtree, run, True)
        port = free_port()
        env = dict(os.environ, PYTHONPATH=FAKE, TWINSCOPE_ENGINES_DIR=os.path.join(SOURCE, "python", "twinscope", "engines"))
        for k in [k for k in env if k.startswith(("FAKE_", "TWINSCOPE_TEST_"))]:
            del env[k]
        twin = subprocess.Popen(
            [BIN, "twin", "--serve", "--kernel", "index_copy", "--listen", "127.0.0.1:%d" % port, "--duration", str(duration),
             "-o", run] + list(twin_args) + ["--", sys.executable, os.path.join(FAKE, "serve.py"), "--port", "{port}"],
            env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, universal_newlines=True,
        )
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                c = http.client.HTTPConnection("127.0.0.1", port, timeout=2)
                c.request("GET", "/health")
                ok = c.getresponse().status == 200
                c.close()
                if ok:
                    break
            except OSError:
                time.sleep(0.1)
        got = {}

        def one(i):
            c = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
            body = json.dumps({"messages": [{"role": "user", "content": "w " * (5 + 6 * i)}], "max_tokens": 8 + i, "stream": True})
            c.request("POST", "/v1/chat/completions", body, {"Content-Type": "application/json", "X-Request-Id": "client-%d" % i})
            r = c.getresponse()
            got["client-%d" % i] = (r.status, r.read())
            c.close()

        threads = [threading.Thread(target=one, args=(i,)) for i in range(n)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        out, _ = twin.communicate(timeout=90)
        if os.environ.get("TWINSCOPE_TEST_VERBOSE"):
            print(out)
        self.assertEqual(sorted(s for s, _ in got.values()), [200] * n, out)
        return run, out, got

    def test_the_shadow_runs_the_primarys_steps(self):
        run, out, got = self.serve()
        primary, shadow = os.path.join(run, "schedule-primary.jsonl"), os.path.join(run, "schedule-shadow.jsonl")
        self.assertTrue(os.path.exists(primary), out)
        self.assertTrue(steps(primary), out)
        self.assertEqual(steps(shadow), steps(primary), out)
        with open(os.path.join(run, "adapter-shadow.json")) as f:
            st = json.load(f)
        self.assertEqual((st["mode"], st["forced_steps"], st["timeouts"]), ("force", len(steps(primary)), 0), out)
        with open(os.path.join(run, "requests-primary.jsonl")) as f:
            ids = sorted(json.loads(x)["id"] for x in f if x.strip())
        self.assertEqual(ids, sorted(got), out)
        with open(os.path.join(run, "twin.json")) as f:
            self.assertIn("adapter", f.read(), out)

    def test_a_sizing_flag_given_to_the_primary_reaches_the_shadow(self):
        # The fake engine is named by --engine-adapter (its command is no `transformers serve`). --cb-num-blocks
        # given to the primary only reaches the shadow; --cb-max-batch-tokens given to each side otherwise is
        # kept as given (the shadow has more room, so it still forces: docs/engines.md, "Capacity").
        run, out, _ = self.serve(
            ["--engine-adapter", "transformers", "--primary-args=--cb-num-blocks=48",
             "--primary-args", "--cb-max-batch-tokens", "--primary-args", "32", "--shadow-args=--cb-max-batch-tokens=40"],
            n=4, duration=3)
        self.assertIn("twinscope twin: --cb-num-blocks 48 given to the primary only: passed to the shadow too, so both "
                      "have the same capacity", out)
        self.assertIn("twinscope twin: --cb-max-batch-tokens is 32 for the primary and 40 for the shadow", out)
        status = {}
        for role in ("primary", "shadow"):
            with open(os.path.join(run, "adapter-%s.json" % role)) as f:
                status[role] = json.load(f)
        self.assertEqual(status["primary"]["capacity"]["kv_blocks"], 48, out)
        self.assertEqual(status["shadow"]["capacity"]["kv_blocks"], 48, out)  # the engine's default is 64
        self.assertEqual((status["primary"]["capacity"]["max_batch_tokens"], status["shadow"]["capacity"]["max_batch_tokens"]), (32, 40), out)
        primary = steps(os.path.join(run, "schedule-primary.jsonl"))
        self.assertTrue(primary, out)
        self.assertEqual((status["shadow"]["mode"], status["shadow"]["forced_steps"]), ("force", len(primary)), out)
        with open(os.path.join(run, "twin.json")) as f:
            sizing = json.load(f)["sizing"]
        self.assertEqual(sizing["engine"], "transformers")
        self.assertEqual(sizing["shadow_args"], ["--cb-max-batch-tokens=40", "--cb-num-blocks=48"])
        self.assertEqual(sizing["primary"], {"--cb-num-blocks": "48", "--cb-max-batch-tokens": "32"})
        self.assertEqual(sizing["shadow"], {"--cb-num-blocks": "48", "--cb-max-batch-tokens": "40"})
        self.assertEqual([(d["flag"], d["action"]) for d in sizing["decisions"]],
                         [("--cb-num-blocks", "copied"), ("--cb-max-batch-tokens", "differs")])


if __name__ == "__main__":
    unittest.main()
