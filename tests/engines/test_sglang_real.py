"""The SGLang adapter on SGLang's real Scheduler (CPU, a tiny random Llama, synthetic requests), loaded through the shim as `twin --serve` loads it, and the fake SGLang checked name by name against the real package; run with the SGLang venv's python by scripts/sglang_real.sh (ctest label engines-sglang-real)."""

import ast
import importlib
import json
import os
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCE = os.environ.get("TWINSCOPE_TEST_SOURCE", os.path.join(HERE, "..", ".."))
SHIM = os.path.join(SOURCE, "python", "twinscope", "engines", "shim")
FAKE_SGLANG = os.path.join(HERE, "fake", "sglang")
DRIVE = os.path.join(HERE, "real_sglang.py")
TIMES = ("start_us", "dur_us")

# 6 requests: 3 before the first step, the others while those decode; prompts that the 64-token chunk splits.
WORKLOAD = [{"id": "req-%d" % i, "prompt": 10 + 23 * i, "max_tokens": 4 + 2 * i, "step": 0 if i < 3 else i - 1}
            for i in range(6)]


def run(tmp, role, name, follow=None, args=()):
    wl = os.path.join(tmp, name + "-workload.json")
    with open(wl, "w") as f:
        json.dump(WORKLOAD, f)
    paths = {k: os.path.join(tmp, "%s-%s.%s" % (k, name, ext)) for k, ext in
             (("schedule", "jsonl"), ("trace", "jsonl"), ("status", "json"), ("out", "json"))}
    env = {k: v for k, v in os.environ.items() if not k.startswith("TWINSCOPE_")}
    env.update(PYTHONPATH=SHIM, TWINSCOPE_ROLE=role, TWINSCOPE_SCHEDULE_OUT=paths["schedule"],
               TWINSCOPE_REQUEST_TRACE=paths["trace"], TWINSCOPE_ADAPTER_STATUS=paths["status"],
               TWINSCOPE_FOLLOW_STEP_TIMEOUT_S="20")
    if follow:
        env["TWINSCOPE_SCHEDULE_FOLLOW"] = follow
    p = subprocess.run([sys.executable, DRIVE, "--workload", wl, "--out", paths["out"]] + list(args), env=env,
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True, timeout=600)
    if p.returncode != 0:
        raise AssertionError("the real SGLang driver failed (%d): %s" % (p.returncode, p.stderr[-3000:]))
    with open(paths["out"]) as f:
        out = json.load(f)
    return out, [x for x in p.stderr.splitlines() if x.startswith("twinscope adapter: ")], paths


def lines(path):
    with open(path) as f:
        return [json.loads(x) for x in f if x.strip()]


def steps(path):
    return [{k: v for k, v in d.items() if k not in TIMES} for d in lines(path) if d["type"] == "step"]


def status(paths):
    with open(paths["status"]) as f:
        return json.load(f)


class RealScheduler(unittest.TestCase):
    """Normal loop: the primary's batches recorded, forced in a shadow given the requests at once in reverse."""

    overlap = ()

    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="twinscope-sglang-real-")
        cls.p_out, cls.p_said, cls.p = run(cls.tmp, "primary", "primary", args=cls.overlap)
        cls.s_out, cls.s_said, cls.s = run(cls.tmp, "shadow", "shadow", follow=cls.p["schedule"],
                                           args=("--all-at-once",) + cls.overlap)
        cls.u_out, _, cls.u = run(cls.tmp, "shadow", "unforced", args=("--all-at-once",) + cls.overlap)

    def test_primary_recorded(self):
        st = status(self.p)
        self.assertEqual((st["engine"], st["version"], st["mode"], st["errors"]), ("sglang", "0.5.23", "record", []))
        s = steps(self.p["schedule"])
        fed = {}
        for d in s:
            for e in d["batch"]:
                self.assertEqual(e["offset"], fed.get(e["id"], 0), (d["step"], e))
                fed[e["id"]] = e["offset"] + e["tokens"]
        for r in WORKLOAD:
            self.assertEqual(fed[r["id"]], r["prompt"] + r["max_tokens"] - 1, r["id"])
        self.assertTrue(any(d["kind"] == "prefill" and sum(e["tokens"] for e in d["batch"]) == 64 for d in s))
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


if __name__ == "__main__":
    unittest.main()
