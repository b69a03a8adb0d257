"""`twinscope twin --serve` end to end with the fake engine's HTTP server (tests/engines/fake/serve.py) and its adapter: the primary records, the shadow replays the logged requests and forces the primary's steps; no CUDA, so nothing is joined, but both schedules, statuses and the request trace are checked (docs/engines.md)."""

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
    def test_the_shadow_runs_the_primarys_steps(self):
        self.assertTrue(has_adapters(), "%s twin has no --engine-adapter" % BIN)
        run = tempfile.mkdtemp(prefix="twinscope-engines-serve-")
        self.addCleanup(shutil.rmtree, run, True)
        port = free_port()
        env = dict(os.environ, PYTHONPATH=FAKE, TWINSCOPE_ENGINES_DIR=os.path.join(SOURCE, "python", "twinscope", "engines"))
        for k in [k for k in env if k.startswith(("FAKE_", "TWINSCOPE_TEST_"))]:
            del env[k]
        twin = subprocess.Popen(
            [BIN, "twin", "--serve", "--kernel", "index_copy", "--listen", "127.0.0.1:%d" % port, "--duration", "4",
             "-o", run, "--", sys.executable, os.path.join(FAKE, "serve.py"), "--port", "{port}"],
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

        threads = [threading.Thread(target=one, args=(i,)) for i in range(6)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        out, _ = twin.communicate(timeout=90)
        if os.environ.get("TWINSCOPE_TEST_VERBOSE"):
            print(out)
        self.assertEqual(sorted(s for s, _ in got.values()), [200] * 6, out)
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


if __name__ == "__main__":
    unittest.main()
