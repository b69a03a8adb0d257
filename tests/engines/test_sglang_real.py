"""The SGLang adapter on SGLang's real Scheduler (CPU, a tiny random Llama, synthetic requests), loaded through the shim as `twin --serve` loads it, and the fake SGLang checked name by name against the real package; run with the SGLang venv's python by scripts/sglang_real.sh (ctest label engines-sglang-real)."""

import ast
import importlib
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
import unittest
import urllib.request

from real_twins import HERE, SHIM, lines, run_driver, status, steps

FAKE_SGLANG = os.path.join(HERE, "fake", "sglang")
DRIVE = os.path.join(HERE, "real_sglang.py")
MAKE_MODEL = os.path.join(HERE, "real_sglang_server.py")

# 6 requests: 3 before the first step, the others while those decode; prompts that the 64-token chunk splits.
WORKLOAD = [{"id": "req-%d" % i, "prompt": 10 + 23 * i, "max_tokens": 4 + 2 * i, "step": 0 if i < 3 else i - 1}
            for i in range(6)]


def run(tmp, role, name, follow=None, args=(), extra_env=None):
    return run_driver(DRIVE, "the real SGLang driver", tmp, role, name, args=args, workload=WORKLOAD, follow=follow,
                      extra_env=extra_env, timeout=600)


class RealScheduler(unittest.TestCase):
    """Normal loop: the primary's batches recorded, forced in a shadow given the requests at once in reverse."""

    overlap = ()
    env = {}

    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="twinscope-sglang-real-")
        cls.p_out, cls.p_said, cls.p = run(cls.tmp, "primary", "primary", args=cls.overlap, extra_env=cls.env)
        cls.s_out, cls.s_said, cls.s = run(cls.tmp, "shadow", "shadow", follow=cls.p["schedule"],
                                           args=("--all-at-once",) + cls.overlap, extra_env=cls.env)
        cls.u_out, _, cls.u = run(cls.tmp, "shadow", "unforced", args=("--all-at-once",) + cls.overlap, extra_env=cls.env)

    def test_primary_recorded(self):
        st = status(self.p)
        self.assertEqual((st["engine"], st["version"], st["mode"], st["errors"]), ("sglang", "0.5.23", "record", []))
        s = steps(self.p["schedule"])
        fed, retracted = {}, set()
        for d in s:
            retracted.update(d["preempted"])
            for e in d["batch"]:
                if e["id"] in retracted:  # prefilled again from what the prefix cache kept of it
                    self.assertLessEqual(e["offset"], fed[e["id"]], (d["step"], e))
                    retracted.discard(e["id"])
                else:
                    self.assertEqual(e["offset"], fed.get(e["id"], 0), (d["step"], e))
                fed[e["id"]] = e["offset"] + e["tokens"]
        for r in WORKLOAD:
            self.assertEqual(fed[r["id"]], r["prompt"] + r["max_tokens"] - 1, r["id"])
        self.assertTrue(any(d["kind"] != "decode" and sum(e["tokens"] for e in d["batch"]) == 64 for d in s))
        self.assertEqual(sorted(d["id"] for d in lines(self.p["trace"])), sorted(r["id"] for r in WORKLOAD))
        self.assertEqual(self.p_said, [])

    def test_shadow_forced_equal(self):
        self.assertEqual(steps(self.s["schedule"]), steps(self.p["schedule"]))
        st = status(self.s)
        self.assertEqual((st["mode"], st["errors"], st["forced_steps"]), ("force", [], len(steps(self.p["schedule"]))))
        self.assertEqual(self.s_said, [])  # nothing to say: every step forced, none left over
        self.assertEqual(self.s_out["tokens"], self.p_out["tokens"])

    def test_unforced_differs(self):
        self.assertNotEqual(steps(self.u["schedule"]), steps(self.p["schedule"]))


class RealSchedulerOverlap(RealScheduler):
    """The same with overlap scheduling (SGLang's default) and its loop's order."""

    overlap = ("--overlap",)

    def test_overlap_said(self):
        st = status(self.p)
        self.assertTrue(st["capacity"]["overlap_schedule"])
        self.assertTrue(any("overlap scheduling is on" in w for w in st["warnings"]))


class RealSchedulerMixed(RealScheduler):
    """--enable-mixed-chunk: prompt chunks beside the running requests' decode tokens (mixed steps)."""

    overlap = ("--mixed",)

    def test_mixed_steps(self):
        s = steps(self.p["schedule"])
        self.assertTrue(any(d["kind"] == "mixed" for d in s))
        self.assertTrue(status(self.p)["capacity"]["mixed_chunk"])


class RealSchedulerRetract(RealScheduler):
    """Retractions: SGLang's own retract_decode, every 7th launch (its SGLANG_TEST_RETRACT hook: the KV pool of
    this tiny model would need a workload too long for a test to fill it), recorded and reproduced."""

    env = {"SGLANG_TEST_RETRACT": "1", "SGLANG_TEST_RETRACT_INTERVAL": "7"}

    def test_retractions_recorded(self):
        pre = [i for d in steps(self.p["schedule"]) for i in d["preempted"]]
        self.assertTrue(pre)
        # a retracted request is prefilled again: its tokens computed before show as a prefix-cache hit or again
        t = {d["id"]: d for d in lines(self.p["trace"])}
        self.assertTrue(all(t[i].get("preempted", 0) >= 1 for i in pre))


class RealServerIds(unittest.TestCase):
    """`python -m sglang.launch_server --device cpu` under the shim (primary): SGLang's own HTTP handlers (/generate,
    /v1/chat/completions, streaming, batches, n > 1) reach its scheduler with the client's X-Request-Id as the rid when
    the body names none, the body's rid when it does, and ids shared by both twins for the rest (request trace)."""

    GEN = {"sampling_params": {"max_new_tokens": 3, "temperature": 0}}
    CHAT = {"model": "m", "max_tokens": 3, "temperature": 0}
    # (X-Request-Id or None, path, body, the ids the response names, the ids the scheduler sees)
    CASES = [
        ("gen-hdr", "/generate", dict(GEN, text="t5 t6 t7"), ["gen-hdr"], ["gen-hdr"]),
        ("gen-hdr2", "/generate", dict(GEN, text="t5 t6 t8", rid="gen-body"), ["gen-body"], ["gen-body"]),
        (None, "/generate", dict(GEN, text="t5 t6 t9"), None, None),
        ("gen-batch", "/generate", dict(GEN, text=["t5 t20", "t5 t21"]), ["gen-batch_0", "gen-batch_1"],
         ["gen-batch_0", "gen-batch_1"]),
        ("chat-hdr", "/v1/chat/completions", dict(CHAT, messages=[{"role": "user", "content": "t10 t11"}]),
         ["chat-hdr"], ["chat-hdr"]),
        ("chat-hdr2", "/v1/chat/completions", dict(CHAT, rid="chat-body", messages=[{"role": "user", "content": "t10"}]),
         ["chat-body"], ["chat-body"]),
        ("chat-stream", "/v1/chat/completions", dict(CHAT, stream=True, messages=[{"role": "user", "content": "t12"}]),
         ["chat-stream"], ["chat-stream"]),
        # n > 1: SGLang sends the prompt's prefix (max_new_tokens 0) then each sample under ids it draws at random
        ("chat-n2", "/v1/chat/completions", dict(CHAT, n=2, temperature=0.5, messages=[{"role": "user", "content": "t13"}]),
         None, ["chat-n2_0.0", "chat-n2_0.1", "chat-n2_0.2"]),
    ]

    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="twinscope-sglang-server-")
        model = os.path.join(cls.tmp, "model")
        subprocess.run([sys.executable, MAKE_MODEL, model], check=True, stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL, timeout=300)
        cls.paths = {k: os.path.join(cls.tmp, k + ext) for k, ext in
                     (("schedule", ".jsonl"), ("trace", ".jsonl"), ("status", ".json"), ("log", ".log"))}
        env = {k: v for k, v in os.environ.items() if not k.startswith("TWINSCOPE_")}
        env.update(PYTHONPATH=SHIM, TWINSCOPE_ROLE="primary", TWINSCOPE_SCHEDULE_OUT=cls.paths["schedule"],
                   TWINSCOPE_REQUEST_TRACE=cls.paths["trace"], TWINSCOPE_ADAPTER_STATUS=cls.paths["status"],
                   MASTER_ADDR="127.0.0.1")
        with socket.socket() as so:
            so.bind(("127.0.0.1", 0))
            cls.url = "http://127.0.0.1:%d" % so.getsockname()[1]
        cls.log = open(cls.paths["log"], "w")
        cls.server = subprocess.Popen(
            [sys.executable, "-m", "sglang.launch_server", "--model-path", model, "--device", "cpu", "--host",
             "127.0.0.1", "--port", cls.url.rsplit(":", 1)[1], "--attention-backend", "torch_native",
             "--sampling-backend", "pytorch", "--dtype", "bfloat16", "--disable-cuda-graph", "--max-total-tokens", "2048",
             "--random-seed", "0"], env=env, stdout=cls.log, stderr=subprocess.STDOUT, start_new_session=True)
        try:
            cls.wait_up(600)
            cls.got = [cls.send(case) for case in cls.CASES]
            time.sleep(1)  # the scheduler's last request ends
        finally:
            cls.stop()
        cls.trace = lines(cls.paths["trace"])

    @classmethod
    def wait_up(cls, limit_s):
        end = time.monotonic() + limit_s
        while time.monotonic() < end:
            if cls.server.poll() is not None:
                raise AssertionError("the SGLang server ended (%d): %s" % (cls.server.returncode, cls.tail()))
            try:
                # the server's own warmup request has been answered once /health answers
                with urllib.request.urlopen(cls.url + "/health", timeout=5) as r:
                    if r.status == 200:
                        return
            except OSError:
                pass
            time.sleep(2)
        raise AssertionError("the SGLang server did not answer in %d s: %s" % (limit_s, cls.tail()))

    @classmethod
    def tail(cls):
        cls.log.flush()
        with open(cls.paths["log"]) as f:
            return f.read()[-3000:]

    @classmethod
    def send(cls, case):
        header, path, body = case[:3]
        h = {"Content-Type": "application/json"}
        if header:
            h["X-Request-Id"] = header
        rq = urllib.request.Request(cls.url + path, data=json.dumps(body).encode(), headers=h)
        with urllib.request.urlopen(rq, timeout=120) as r:
            text = r.read().decode()
        if body.get("stream"):
            docs = [json.loads(x[6:]) for x in text.splitlines() if x.startswith("data: {")]
            return sorted({d["id"] for d in docs})
        doc = json.loads(text)
        docs = doc if isinstance(doc, list) else [doc]
        return [d["meta_info"]["id"] if "meta_info" in d else d["id"] for d in docs]

    @classmethod
    def stop(cls):
        if cls.server.poll() is None:
            os.killpg(cls.server.pid, signal.SIGTERM)
            try:
                cls.server.wait(30)
            except subprocess.TimeoutExpired:
                os.killpg(cls.server.pid, signal.SIGKILL)
                cls.server.wait(30)
        cls.log.close()

    def test_response_ids(self):
        for case, got in zip(self.CASES, self.got):
            if case[3] is not None:
                self.assertEqual(got, case[3], case)

    def test_scheduler_ids(self):
        """The rid each request reached the scheduler with, as the adapter's request trace names it."""
        by_engine = {d["engine_id"]: d for d in self.trace}
        named = set()
        for case in self.CASES:
            for rid in case[4] or ():
                self.assertTrue(rid in by_engine, "%s (%s) not among %s" % (rid, case[:2], sorted(by_engine)))
                self.assertEqual((by_engine[rid]["id"], by_engine[rid]["id_generated"]), (rid, False))
                named.add(rid)
        # the rest: the server's warmup, its health checks and the request with neither id, each internal-<k>
        rest = [d for d in self.trace if d["engine_id"] not in named]
        self.assertEqual([d["id"] for d in rest], ["internal-%d" % k for k in range(len(rest))],
                         [d["engine_id"] for d in rest])
        self.assertTrue(any(d["engine_id"].startswith("twinscope-internal-") and d["prompt_tokens"] == 3
                            for d in rest), [d["engine_id"] for d in rest])

    def test_adapter_status(self):
        with open(self.paths["status"]) as f:
            st = json.load(f)
        self.assertEqual((st["engine"], st["version"], st["mode"], st["errors"]), ("sglang", "0.5.23", "record", []))
        self.assertFalse([w for w in st.get("warnings", []) if "not as expected" in w])


class FakeConforms(unittest.TestCase):
    """Every module, class, function and method the fake SGLang defines exists in the real package (0.5.23)."""

    def test_names(self):
        import sglang

        self.assertEqual(sglang.__version__, "0.5.23")
        missing = []
        for root, _, files in os.walk(FAKE_SGLANG):
            for fn in files:
                if not fn.endswith(".py"):
                    continue
                rel = os.path.relpath(os.path.join(root, fn), os.path.dirname(FAKE_SGLANG))
                modname = rel[:-3].replace(os.sep, ".").replace(".__init__", "")
                with open(os.path.join(root, fn)) as f:
                    tree = ast.parse(f.read())
                fake_only = set()
                for node in tree.body:
                    if isinstance(node, ast.Assign) and any(getattr(t, "id", "") == "FAKE_ONLY" for t in node.targets):
                        fake_only = set(ast.literal_eval(node.value))
                try:
                    real = importlib.import_module(modname)
                except Exception as e:
                    missing.append("%s (%s)" % (modname, e))
                    continue
                for node in tree.body:
                    if isinstance(node, (ast.ClassDef, ast.FunctionDef)) and node.name not in fake_only:
                        obj = getattr(real, node.name, None)
                        if obj is None:
                            missing.append("%s.%s" % (modname, node.name))
                            continue
                        if isinstance(node, ast.ClassDef):
                            for m in node.body:
                                if isinstance(m, ast.FunctionDef) and m.name not in fake_only and not hasattr(obj, m.name):
                                    missing.append("%s.%s.%s" % (modname, node.name, m.name))
        self.assertEqual(missing, [])

    def test_what_the_adapter_wraps(self):
        """The parameters the adapter's wrappers pass on, as 0.5.23 declares them."""
        import inspect

        from sglang.srt.managers import scheduler, tokenizer_manager

        def params(f):
            return list(inspect.signature(f).parameters)

        S = scheduler.Scheduler
        self.assertEqual(params(S.get_next_batch_to_run), ["self", "running_batch", "last_batch"])
        self.assertEqual(params(S.run_batch)[:2], ["self", "batch"])
        self.assertEqual(params(S.process_batch_result)[:3], ["self", "batch", "result"])
        self.assertEqual(params(S._add_request_to_queue), ["self", "req", "is_retracted"])
        self.assertEqual(params(S.ingest_requests), ["self", "stop_at_pause"])
        g = tokenizer_manager.TokenizerManager.generate_request
        self.assertEqual(params(g), ["self", "obj", "request"])
        self.assertTrue(inspect.isasyncgenfunction(g))  # the wrapper returns the generator it makes


if __name__ == "__main__":
    unittest.main()
