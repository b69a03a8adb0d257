"""The vLLM adapter (python/twinscope/engines/vllm.py) on the fake vLLM (tests/engines/fake/vllm), loaded as `twin --serve` loads it: the shim first on PYTHONPATH, the TWINSCOPE_* settings, the EngineCore in its own process (docs/engines.md)."""

import importlib.util
import json
import os
import subprocess
import sys
import unittest

from test_engines import FAKE, SHIM, SOURCE, FollowFaults, lines, mkdtemp, said, status, steps, tearDownModule  # noqa: F401

DRIVE = os.path.join(FAKE, "drive_vllm.py")

# 8 requests: 4 at once, 4 a little later; prompts long enough to be split over steps (mixed steps).
WORKLOAD = [
    {"id": "req-%d" % i, "prompt": 9 + 7 * i, "max_tokens": 12 + 3 * i, "at": 0.0 if i < 4 else 0.05} for i in range(8)
]


def run(tmp, role, name, workload=WORKLOAD, follow=None, extra_env=None, args=()):
    """Runs the fake vLLM server as `twin --serve` would; returns (out doc, stderr, paths)."""
    wl = os.path.join(tmp, name + "-workload.json")
    with open(wl, "w") as f:
        json.dump(workload, f)
    paths = {
        "schedule": os.path.join(tmp, "schedule-%s.jsonl" % name),
        "trace": os.path.join(tmp, "requests-%s.jsonl" % name),
        "status": os.path.join(tmp, "adapter-%s.json" % name),
        "out": os.path.join(tmp, name + "-out.json"),
    }
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TWINSCOPE_", "FAKE_", "VLLM_"))}
    env.update(
        PYTHONPATH=os.pathsep.join([SHIM, FAKE]),
        TWINSCOPE_ROLE=role,
        TWINSCOPE_SCHEDULE_OUT=paths["schedule"],
        TWINSCOPE_REQUEST_TRACE=paths["trace"],
        TWINSCOPE_ADAPTER_STATUS=paths["status"],
    )
    if follow:
        env["TWINSCOPE_SCHEDULE_FOLLOW"] = follow
    env.update(extra_env or {})
    p = subprocess.run([sys.executable, DRIVE, "--workload", wl, "--out", paths["out"]] + list(args), env=env,
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True, timeout=60)
    if p.returncode != 0:
        raise AssertionError("the fake vLLM failed (%d): %s" % (p.returncode, p.stderr))
    with open(paths["out"]) as f:
        out = json.load(f)
    return out, p.stderr, paths


def step_launches(out):
    """The fake GPU's launches in served steps: (range, kernel, grid); and whether each ran on its range's thread."""
    return [tuple(x[:3]) for x in out["launches"] if x[0] and " step " in x[0]], all(x[3] for x in out["launches"])


def load_adapter_module():
    """python/twinscope/engines/vllm.py as a module of its package (for its pure functions)."""
    pkg = os.path.join(SOURCE, "python", "twinscope", "engines")
    spec = importlib.util.spec_from_file_location("_ts_engines_test", os.path.join(pkg, "__init__.py"),
                                                  submodule_search_locations=[pkg])
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod
    spec.loader.exec_module(mod)
    return importlib.import_module(spec.name + ".vllm")


class VllmRecord(unittest.TestCase):
    """The primary: every schedule() output a step, named in NVTX around its launches, written by the EngineCore."""

    @classmethod
    def setUpClass(cls):
        cls.tmp = mkdtemp()
        cls.out, cls.err, cls.paths = run(cls.tmp, "primary", "primary")

    def test_schedule_header_steps_and_end(self):
        docs = lines(self.paths["schedule"])
        head = docs[0]
        self.assertEqual((head["type"], head["version"], head["engine"], head["engine_version"]),
                         ("header", 2, "vllm", "0.34.0"))
        cap = head["capacity"]
        self.assertEqual((cap["kv_blocks"], cap["block_size"], cap["max_batch_tokens"], cap["max_requests_per_batch"]),
                         (128, 4, 32, 16))
        self.assertEqual(docs[-1], {"type": "end", "steps": len(docs) - 2, "reason": "shutdown"})
        ss = steps(self.paths["schedule"], keep_times=True)
        self.assertGreater(len(ss), 20)
        self.assertEqual([s["step"] for s in ss], list(range(len(ss))))
        for s in ss:
            self.assertTrue(s["name"].startswith("%s step %d [" % (s["kind"], s["step"])), s["name"])
            self.assertLessEqual(sum(e["tokens"] for e in s["batch"]), 32)
            self.assertGreaterEqual(s["dur_us"], 0)
        self.assertEqual({s["kind"] for s in ss}, {"prefill", "decode", "mixed"})

    def test_each_step_is_one_range_around_its_launches_on_the_launching_thread(self):
        names = [s["name"] for s in steps(self.paths["schedule"])]
        launches, same_thread = step_launches(self.out)
        self.assertTrue(same_thread, "a range was open on another thread than the launches")
        self.assertEqual([r for r, k, _ in launches if k == "fake_attention"], names)
        self.assertEqual([r for r, k, _ in launches if k == "fake_sample"], names)  # sampling is inside the range
        tokens = {s["name"]: sum(e["tokens"] for e in s["batch"]) for s in steps(self.paths["schedule"])}
        for r, k, grid in launches:
            if k == "fake_attention":
                self.assertEqual(grid, tokens[r])
        warm = [x for x in self.out["launches"] if x[1] == "fake_profile_run"]
        self.assertTrue(warm[0][0].startswith("warmup vllm engine"), warm)
        pushes = [r for r in self.out["ranges"] if r[0] == "push"]
        self.assertEqual(len(pushes), len(names) + 1)  # one per step and the warmup, none left open
        self.assertEqual(sum(1 for r in self.out["ranges"] if r[0] == "pop"), len(pushes))

    def test_request_trace_has_the_clients_ids_and_ties_each_request_to_its_steps(self):
        trace = {d["id"]: d for d in lines(self.paths["trace"])}
        self.assertEqual(sorted(trace), sorted(r["id"] for r in WORKLOAD))  # not chatcmpl-<id>-<random>
        by_step = {s["step"]: s for s in steps(self.paths["schedule"])}
        for w in WORKLOAD:
            d = trace[w["id"]]
            self.assertRegex(d["engine_id"], r"^chatcmpl-%s-[0-9a-f]{8}$" % w["id"])
            self.assertEqual((d["status"], d["finish_reason"]), (200, "length"))
            self.assertEqual(d["prompt_tokens"], w["prompt"])
            self.assertEqual(d["completion_tokens"], len(self.out["results"][w["id"]]))
            self.assertEqual(d["completion_tokens"], w["max_tokens"])
            named = [s for s, doc in sorted(by_step.items()) if any(e["id"] == w["id"] for e in doc["batch"])]
            self.assertEqual(d["steps"], named)
            self.assertEqual(d["prefill_step"], named[0])
            fed = sum(e["tokens"] for s in named for e in by_step[s]["batch"] if e["id"] == w["id"])
            self.assertEqual(fed, d["prompt_tokens"] + d["completion_tokens"] - 1)  # the last token is never fed
            self.assertIn(w["id"], by_step[named[-1]]["finished"])
            self.assertGreaterEqual(d["first_token_us"], d["queued_us"])

    def test_offsets_are_the_tokens_computed_before_the_step(self):
        self.assertEqual([s for s in steps(self.paths["schedule"]) if s["preempted"]], [])  # (preemption: below)
        seen = {}
        for s in steps(self.paths["schedule"]):
            for e in s["batch"]:
                self.assertEqual(e["offset"], seen.get(e["id"], 0), s)
                seen[e["id"]] = e["offset"] + e["tokens"]

    def test_status_and_the_process_that_writes(self):
        st = status(self.paths)
        self.assertEqual((st["mode"], st["supported"], st["engine"], st["version"]), ("record", True, "vllm", "0.34.0"))
        self.assertEqual(st["steps"], len(steps(self.paths["schedule"])))
        self.assertEqual((st["errors"], st["warnings"], st["nvtx"]), ([], [], "torch.cuda.nvtx"))
        self.assertEqual(said(self.err), [])
        self.assertNotEqual(self.out["core_pid"], self.out["api_pid"])  # the EngineCore process (forked) recorded
        self.assertFalse(os.path.exists(self.paths["status"] + ".lock"))  # released at the scheduler's shutdown


class VllmForce(unittest.TestCase):
    """The shadow (its EngineCore spawned, requests all at once, last first): the primary's steps exactly."""

    @classmethod
    def setUpClass(cls):
        cls.tmp = mkdtemp()
        cls.p_out, _, cls.p = run(cls.tmp, "primary", "primary")
        cls.s_out, cls.s_err, cls.s = run(cls.tmp, "shadow", "shadow", follow=cls.p["schedule"],
                                          args=["--all-at-once", "--mp", "spawn"])

    def test_shadow_schedule_equals_the_primarys_but_for_times(self):
        self.assertEqual(steps(self.s["schedule"]), steps(self.p["schedule"]))
        self.assertEqual(step_launches(self.s_out), step_launches(self.p_out))
        self.assertEqual(self.s_out["results"], self.p_out["results"])
        st = status(self.s)
        self.assertEqual((st["mode"], st["forced_steps"], st["timeouts"], st["errors"]),
                         ("force", len(steps(self.p["schedule"])), 0, []))
        self.assertEqual(said(self.s_err), [])

    def test_without_forcing_the_fake_batches_otherwise(self):
        out, _, paths = run(self.tmp, "shadow", "recording-shadow", args=["--all-at-once", "--mp", "spawn"])
        self.assertNotEqual(steps(paths["schedule"]), steps(self.p["schedule"]))
        self.assertNotEqual(step_launches(out)[0], step_launches(self.p_out)[0])
        self.assertEqual(out["results"], self.p_out["results"])  # the tokens never depend on the batches
        off, _, off_paths = run(self.tmp, "shadow", "off", follow=self.p["schedule"],
                                extra_env={"TWINSCOPE_ENGINE_ADAPTER": "off"}, args=["--all-at-once"])
        self.assertEqual(steps(off_paths["schedule"]), [])
        self.assertEqual(status(off_paths)["mode"], "disabled")
        self.assertNotEqual([k[1:] for k in off["launches"]], [k[1:] for k in self.p_out["launches"]])

    def test_the_vllm_adapter_by_name(self):
        out, err, paths = run(self.tmp, "shadow", "named", follow=self.p["schedule"],
                              extra_env={"TWINSCOPE_ENGINE_ADAPTER": "vllm"}, args=["--all-at-once"])
        self.assertEqual(steps(paths["schedule"]), steps(self.p["schedule"]))
        self.assertEqual(said(err), [])


class VllmPreemption(unittest.TestCase):
    """A KV cache too small for the batch: the primary's scheduler preempts; the shadow preempts the same requests."""

    def test_preemptions_are_recorded_and_forced(self):
        tmp = mkdtemp()
        work = [{"id": "pre-%d" % i, "prompt": 6 + i, "max_tokens": 24, "at": 0.0} for i in range(4)]
        small = ["--num-blocks", "18"]
        p_out, _, p = run(tmp, "primary", "primary", workload=work, args=small)
        pre = [i for s in steps(p["schedule"]) for i in s["preempted"]]
        self.assertTrue(pre, "no preemption with 18 blocks")
        trace = {d["id"]: d for d in lines(p["trace"])}
        self.assertEqual(sum(d.get("preempted", 0) for d in trace.values()), len(pre))
        s_out, err, s = run(tmp, "shadow", "shadow", workload=work, follow=p["schedule"], args=small + ["--all-at-once"])
        self.assertEqual(steps(s["schedule"]), steps(p["schedule"]))
        self.assertEqual(s_out["results"], p_out["results"])
        self.assertEqual(status(s)["errors"], [], err)
        c_out, _, c = run(tmp, "shadow", "control", workload=work, args=small + ["--all-at-once"])
        self.assertNotEqual(steps(c["schedule"]), steps(p["schedule"]))


class VllmFaults(FollowFaults, unittest.TestCase):
    engine_run = staticmethod(run)
    smaller = ("64", "kv_blocks 64 < the primary's 128")

    @classmethod
    def setUpClass(cls):
        cls.tmp = mkdtemp()
        cls.p_out, _, cls.p = run(cls.tmp, "primary", "primary")

    def test_a_step_whose_request_never_comes_times_out_said_and_the_engine_batches_on(self):
        missing = "req-5"
        work = [w for w in WORKLOAD if w["id"] != missing]
        out, err, s = run(self.tmp, "shadow", "timeout", workload=work, follow=self.p["schedule"],
                          extra_env={"TWINSCOPE_FOLLOW_STEP_TIMEOUT_S": "0.3"}, args=["--all-at-once"])
        st = status(s)
        self.assertEqual(st["timeouts"], 1)
        self.assertIn("waited 0.3 s", st["message"])
        self.assertIn(missing, st["message"])
        self.assertIn("twinscope adapter: stopped forcing", err)
        first = next(x["step"] for x in steps(self.p["schedule"]) if any(e["id"] == missing for e in x["batch"]))
        self.assertEqual(st["forced_steps"], first)
        self.assertEqual(steps(s["schedule"])[:first], steps(self.p["schedule"])[:first])
        self.assertEqual(out["unfinished"], [])
        self.assertEqual(sorted(k for k, v in out["results"].items() if v), sorted(w["id"] for w in work))

    def test_an_adapter_that_raises_is_disabled_said_and_the_server_serves_on(self):
        out, err, paths = run(self.tmp, "primary", "broken", extra_env={"FAKE_ENGINE_BREAK": "1"})
        self.assertEqual(out["results"], self.p_out["results"])
        self.assertEqual(out["exitcode"], 0)
        got = said(err)
        self.assertEqual(len(got), 1, err)
        self.assertIn("the vllm adapter raised in recording a step (TypeError", got[0])
        self.assertTrue(got[0].endswith("disabled"), got[0])
        st = status(paths)
        self.assertEqual(st["mode"], "disabled")
        self.assertIn("TypeError", st["errors"][0])
        self.assertEqual(lines(paths["schedule"])[-1], {"type": "end", "steps": 0, "reason": "adapter disabled"})

    def test_an_unknown_version_is_refused_before_serving(self):
        out, err, paths = run(self.tmp, "primary", "v099", extra_env={"FAKE_VLLM_VERSION": "0.99.0"})
        msg = "vllm 0.99.0 is not one twinscope's adapter knows (known: 0.34.0): batches will not be forced"
        st = status(paths)
        self.assertEqual((st["supported"], st["mode"], st["message"]), (False, "disabled", msg))
        order = err.splitlines()
        self.assertEqual(order[0], "twinscope adapter: " + msg + ": disabled")
        self.assertEqual(order[1], "fake vllm: serving")  # said before the server served
        self.assertEqual(len(said(err)), 1)  # once, though the EngineCore process imports vllm too
        self.assertFalse(os.path.exists(paths["schedule"]))
        self.assertEqual(out["results"], self.p_out["results"])

    def test_another_engines_schedule_is_not_followed(self):
        other = os.path.join(self.tmp, "transformers.jsonl")
        with open(self.p["schedule"]) as f, open(other, "w") as g:
            g.write(f.read().replace('"engine":"vllm"', '"engine":"transformers"', 1))
        out, err, s = run(self.tmp, "shadow", "other", follow=other, args=["--all-at-once"])
        st = status(s)
        self.assertEqual(st["mode"], "record")
        self.assertIn("of engine 'transformers', not vllm: batches will not be forced", st["message"])
        self.assertGreater(len(steps(s["schedule"])), 0)

    def test_an_aborted_request_is_cancelled_in_the_trace_and_its_step(self):
        work = [dict(w, max_tokens=5000) if w["id"] == "req-2" else w for w in WORKLOAD]  # aborted long before its end
        out, err, paths = run(self.tmp, "primary", "abort", workload=work, args=["--abort", "req-2"])
        d = {x["id"]: x for x in lines(paths["trace"])}["req-2"]
        self.assertEqual((d["status"], d["finish_reason"]), (499, "cancelled"))
        self.assertLess(d["completion_tokens"], 5000)
        # In the step that was the latest when it ended, or on the end line when no step came after it (the other
        # requests had all ended first: it depends on timing).
        end = [d for d in lines(paths["schedule"]) if d.get("type") == "end"]
        self.assertEqual(len(end), 1)
        in_steps = sum("req-2" in s["cancelled"] for s in steps(paths["schedule"]))
        self.assertEqual(in_steps + end[0].get("cancelled", []).count("req-2"), 1)

    def test_a_request_cancelled_after_the_last_step_is_on_the_end_line(self):
        work = [dict(w, max_tokens=5000) for w in WORKLOAD if w["id"] == "req-2"]  # alone: no step comes after
        out, err, paths = run(self.tmp, "primary", "abort-last", workload=work, args=["--abort", "req-2"])
        self.assertEqual(sum("req-2" in s["cancelled"] for s in steps(paths["schedule"])), 0)
        end = [d for d in lines(paths["schedule"]) if d.get("type") == "end"]
        self.assertEqual([e.get("cancelled") for e in end], [["req-2"]])

    def test_worker_processes_are_said_and_the_steps_still_recorded(self):
        out, err, paths = run(self.tmp, "primary", "mp", args=["--executor", "mp"])
        st = status(paths)
        self.assertTrue(any("executor 'mp'" in w for w in st["warnings"]), st["warnings"])
        self.assertGreater(len(steps(paths["schedule"])), 20)
        self.assertEqual(sorted(d["id"] for d in lines(paths["trace"])), sorted(w["id"] for w in WORKLOAD))
        self.assertEqual([x for x in out["launches"] if x[0] and " step " in x[0]], [])  # no range in this process

    def test_async_scheduling_is_said(self):
        _, _, paths = run(self.tmp, "primary", "async", args=["--async-scheduling"])
        st = status(paths)
        self.assertTrue(st["capacity"]["async_scheduling"])
        self.assertTrue(any("async scheduling is on" in w for w in st["warnings"]), st["warnings"])


class VllmIds(unittest.TestCase):
    """The scheduler's request id back to the client's: what differs between two servers taken off; and what the
    status says between `import vllm` and the engine's scheduler."""

    def test_importing_vllm_says_it_waits_for_the_scheduler(self):
        tmp = mkdtemp()
        path = os.path.join(tmp, "adapter-primary.json")
        env = dict({k: v for k, v in os.environ.items() if not k.startswith(("TWINSCOPE_", "FAKE_"))},
                   PYTHONPATH=os.pathsep.join([SHIM, FAKE]), TWINSCOPE_ROLE="primary", TWINSCOPE_ADAPTER_STATUS=path)
        p = subprocess.run([sys.executable, "-c", "import vllm"], env=env, stderr=subprocess.PIPE,
                           universal_newlines=True, timeout=60)
        self.assertEqual((p.returncode, said(p.stderr)), (0, []))
        with open(path) as f:
            st = json.load(f)
        self.assertEqual((st["engine"], st["supported"], st["message"]),
                         ("vllm", True, "vllm 0.34.0: waiting for the engine's scheduler"))

    def test_prefix_and_random_suffix(self):
        vl = load_adapter_module()
        self.assertEqual(vl.client_id("chatcmpl-client-7-0a1b2c3d"), "client-7")
        self.assertEqual(vl.client_id("cmpl-client-7-0-0a1b2c3d"), "client-7-0")  # a completion's second prompt
        self.assertEqual(vl.client_id("plain-id-0a1b2c3d"), "plain-id")
        self.assertEqual(vl.client_id("chatcmpl-client-7", randomized=False), "client-7")
        self.assertEqual(vl.client_id("chatcmpl-abc-deadbeef", randomized=False), "abc-deadbeef")
        self.assertFalse(vl._randomized({"VLLM_DISABLE_REQUEST_ID_RANDOMIZATION": "1"}))
        self.assertTrue(vl._randomized({}))


if __name__ == "__main__":
    unittest.main()
