"""The SGLang adapter (python/twinscope/engines/sglang.py) on the fake SGLang (tests/engines/fake/sglang), loaded as `twin --serve` loads it: the shim first on PYTHONPATH, the TWINSCOPE_* settings, the scheduler in its own spawned process (docs/engines.md)."""

import json
import os
import subprocess
import sys
import unittest

from test_engines import FAKE, SHIM, lines, mkdtemp, said, status, step_launches, steps, tearDownModule  # noqa: F401

DRIVE = os.path.join(FAKE, "drive_sglang.py")

# 6 requests: 4 at once, 2 a little later; prompts longer than the 48-token chunk (split over steps).
WORKLOAD = [{"id": "req-%d" % i, "prompt": 9 + 17 * i, "max_tokens": 5 + 2 * i, "at": 0.0 if i < 4 else 0.05}
            for i in range(6)]
# 4 requests whose decodes outgrow a 200-token KV pool: the scheduler retracts.
PREEMPT = [{"id": "pre-%d" % i, "prompt": 40 + i, "max_tokens": 30, "at": 0.0} for i in range(4)]


def run(tmp, role, name, workload=WORKLOAD, follow=None, extra_env=None, args=()):
    """Runs the fake SGLang server as `twin --serve` would; returns (out doc, stderr, paths)."""
    wl = os.path.join(tmp, name + "-workload.json")
    with open(wl, "w") as f:
        json.dump(workload, f)
    paths = {k: os.path.join(tmp, "%s-%s.%s" % (k, name, ext)) for k, ext in
             (("schedule", "jsonl"), ("trace", "jsonl"), ("status", "json"), ("out", "json"))}
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TWINSCOPE_", "FAKE_"))}
    env.update(PYTHONPATH=os.pathsep.join([SHIM, FAKE]), TWINSCOPE_ROLE=role, TWINSCOPE_SCHEDULE_OUT=paths["schedule"],
               TWINSCOPE_REQUEST_TRACE=paths["trace"], TWINSCOPE_ADAPTER_STATUS=paths["status"])
    if follow:
        env["TWINSCOPE_SCHEDULE_FOLLOW"] = follow
    env.update(extra_env or {})
    p = subprocess.run([sys.executable, DRIVE, "--workload", wl, "--out", paths["out"]] + list(args), env=env,
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True, timeout=90)
    if p.returncode != 0:
        raise AssertionError("the fake SGLang failed (%d): %s" % (p.returncode, p.stderr))
    with open(paths["out"]) as f:
        out = json.load(f)
    return out, p.stderr, paths


class SglangRecord(unittest.TestCase):
    """The primary: every batch a step, named in NVTX around its launches, the request trace, the capacity."""

    @classmethod
    def setUpClass(cls):
        cls.tmp = mkdtemp()
        cls.out, cls.err, cls.paths = run(cls.tmp, "primary", "primary")

    def test_header_steps_end(self):
        docs = lines(self.paths["schedule"])
        head = docs[0]
        self.assertEqual((head["type"], head["version"], head["engine"], head["engine_version"]),
                         ("header", 2, "sglang", "0.5.23"))
        cap = head["capacity"]
        self.assertEqual((cap["kv_tokens"], cap["chunked_prefill_size"], cap["max_requests_per_batch"], cap["page_size"]),
                         (4096, 48, 8, 1))
        self.assertEqual(docs[-1], {"type": "end", "steps": len(docs) - 2, "reason": "shutdown"})
        st = status(self.paths)
        self.assertEqual((st["engine"], st["mode"], st["supported"], st["errors"]), ("sglang", "record", True, []))
        self.assertEqual(st["steps"], len(docs) - 2)

    def test_steps_account_for_every_token(self):
        """Each request's prompt is fed once, in chunks whose offsets follow on, then one token per decode step;
        a prompt longer than the chunk budget is split; no step feeds more than the budget."""
        s = steps(self.paths["schedule"])
        fed = {}
        for d in s:
            self.assertLessEqual(sum(e["tokens"] for e in d["batch"]), 48 if d["kind"] == "prefill" else 8)
            self.assertEqual(d["name"], "%s step %d [%s]" % (d["kind"], d["step"],
                                                             ",".join("%s:%d" % (e["id"], e["tokens"]) for e in d["batch"])))
            for e in d["batch"]:
                self.assertEqual(e["offset"], fed.get(e["id"], 0), (d["step"], e))
                fed[e["id"]] = e["offset"] + e["tokens"]
        for r in WORKLOAD:
            self.assertEqual(fed[r["id"]], r["prompt"] + r["max_tokens"] - 1, r["id"])  # the last token is never fed
        split = [d for d in s if d["kind"] == "prefill" and any(e["id"] == "req-5" for e in d["batch"])]
        self.assertGreater(len(split), 1, "req-5's 94-token prompt is not split")
        finished = [i for d in s for i in d["finished"]]
        self.assertEqual(sorted(finished), sorted(r["id"] for r in WORKLOAD))

    def test_ranges_name_each_launch_on_its_thread(self):
        launches, same_thread = step_launches(self.out)
        self.assertTrue(same_thread)
        s = steps(self.paths["schedule"])
        self.assertEqual(len(launches), sum(len(d["batch"]) + 1 for d in s))  # every launch inside its step's range
        self.assertEqual(sorted(set(x[0] for x in launches)), sorted(d["name"] for d in s))

    def test_request_trace(self):
        t = {d["id"]: d for d in lines(self.paths["trace"])}
        self.assertEqual(sorted(t), sorted(r["id"] for r in WORKLOAD))
        s = steps(self.paths["schedule"])
        for r in WORKLOAD:
            d = t[r["id"]]
            self.assertEqual((d["status"], d["finish_reason"], d["prompt_tokens"], d["completion_tokens"], d["max_tokens"]),
                             (200, "length", r["prompt"], r["max_tokens"], r["max_tokens"]))
            self.assertEqual(d["steps"], [x["step"] for x in s if any(e["id"] == r["id"] for e in x["batch"])])


class SglangForce(unittest.TestCase):
    """The shadow, given the requests all at once in reverse, runs the primary's batches; recording alone does not."""

    @classmethod
    def setUpClass(cls):
        cls.tmp = mkdtemp()
        cls.p_out, _, cls.p = run(cls.tmp, "primary", "primary")
        cls.s_out, cls.s_err, cls.s = run(cls.tmp, "shadow", "shadow", follow=cls.p["schedule"], args=["--all-at-once"],
                                          extra_env={"FAKE_ENGINE_SEED": "7"})
        cls.r_out, _, cls.r = run(cls.tmp, "shadow", "unforced", args=["--all-at-once"], extra_env={"FAKE_ENGINE_SEED": "7"})

    def test_schedules_equal(self):
        self.assertEqual(steps(self.s["schedule"]), steps(self.p["schedule"]))
        st = status(self.s)
        self.assertEqual((st["mode"], st["errors"], st["timeouts"]), ("force", [], 0))
        self.assertEqual(st["forced_steps"], len(steps(self.p["schedule"])))

    def test_launches_equal(self):
        self.assertEqual(step_launches(self.s_out)[0], step_launches(self.p_out)[0])
        self.assertEqual(self.s_out["results"], self.p_out["results"])

    def test_not_forced_batches_otherwise(self):
        """What an adapter that does nothing gives: another packing (the check above can fail)."""
        self.assertNotEqual(steps(self.r["schedule"]), steps(self.p["schedule"]))
        self.assertEqual(status(self.r)["mode"], "record")


class SglangPreemption(unittest.TestCase):
    """Retractions (KV pool full) are recorded as preempted and come out the same in the forced shadow."""

    @classmethod
    def setUpClass(cls):
        cls.tmp = mkdtemp()
        a = ["--max-total-tokens", "200"]
        cls.p_out, _, cls.p = run(cls.tmp, "primary", "primary", workload=PREEMPT, args=a)
        cls.s_out, _, cls.s = run(cls.tmp, "shadow", "shadow", workload=PREEMPT, follow=cls.p["schedule"],
                                  args=a + ["--all-at-once"], extra_env={"FAKE_ENGINE_SEED": "5"})

    def test_preempted_recorded_and_forced(self):
        p = steps(self.p["schedule"])
        pre = [i for d in p for i in d["preempted"]]
        self.assertTrue(pre, "the 200-token pool retracted nothing")
        self.assertEqual(steps(self.s["schedule"]), p)
        t = {d["id"]: d for d in lines(self.p["trace"])}
        self.assertTrue(all(t[i].get("preempted", 0) >= 1 for i in pre))
        self.assertEqual(self.s_out["results"], self.p_out["results"])


class SglangFaults(unittest.TestCase):
    def setUp(self):
        self.tmp = mkdtemp()

    def test_unknown_version_refused_before_serving(self):
        out, err, paths = run(self.tmp, "primary", "old", extra_env={"FAKE_SGLANG_VERSION": "0.5.22"})
        st = status(paths)
        self.assertEqual((st["mode"], st["supported"]), ("disabled", False))
        self.assertIn("sglang 0.5.22 is not one twinscope's adapter knows (known: 0.5.23): batches will not be forced",
                      st["message"])
        self.assertEqual(len([x for x in said(err) if "0.5.22" in x]), 1)  # said once, by the first process
        self.assertEqual(lines(paths["schedule"]), [])
        self.assertEqual(out["unfinished"], [])

    def test_step_timeout_said(self):
        _, _, p = run(self.tmp, "primary", "primary")
        short = [r for r in WORKLOAD if r["id"] != "req-0"]
        out, err, s = run(self.tmp, "shadow", "shadow", workload=short, follow=p["schedule"],
                          extra_env={"TWINSCOPE_FOLLOW_STEP_TIMEOUT_S": "0.5"})
        st = status(s)
        self.assertEqual(st["timeouts"], 1)
        self.assertTrue(any("req-0" in x and "had not arrived after 0.5 s" in x for x in said(err)), said(err))
        self.assertEqual(out["unfinished"], [])  # the engine went on, batching on its own

    def test_adapter_that_raises_leaves_the_server_serving(self):
        out, err, paths = run(self.tmp, "primary", "broken", extra_env={"FAKE_SGLANG_BREAK": "1"})
        st = status(paths)
        self.assertEqual(st["mode"], "disabled")
        self.assertTrue(st["errors"])
        self.assertTrue(any("raised" in x and x.endswith("disabled") for x in said(err)), said(err))
        self.assertEqual(out["unfinished"], [])
        self.assertEqual(lines(paths["schedule"])[-1]["reason"], "adapter disabled")

    def test_shadow_given_more_requests_forces_then_batches_on_its_own(self):
        _, _, p = run(self.tmp, "primary", "primary3", workload=WORKLOAD[:3])
        out, err, s = run(self.tmp, "shadow", "more", workload=WORKLOAD, follow=p["schedule"], args=["--all-at-once"],
                          extra_env={"TWINSCOPE_FOLLOW_STEP_TIMEOUT_S": "1"})
        n = len(steps(p["schedule"]))
        st = status(s)
        self.assertEqual((st["forced_steps"], st["errors"]), (n, []))
        self.assertEqual(steps(s["schedule"])[:n], steps(p["schedule"]))
        self.assertTrue(any("stopped forcing at step %d of %d: the engine scheduled a step past the primary's schedule"
                            % (n, n) in x for x in said(err)), said(err))
        self.assertEqual(out["unfinished"], [])

    def test_speculative_decoding_not_forced(self):
        _, _, p = run(self.tmp, "primary", "primary")
        _, err, s = run(self.tmp, "shadow", "spec", follow=p["schedule"], extra_env={"FAKE_SGLANG_SPEC": "EAGLE"})
        st = status(s)
        self.assertEqual((st["forced_steps"], st["mode"]), (0, "force"))
        self.assertIn("speculative decoding (EAGLE): its draft and verify steps are not forced", st["message"])

    def test_shadow_smaller_does_not_force(self):
        _, _, p = run(self.tmp, "primary", "primary")
        _, err, s = run(self.tmp, "shadow", "small", follow=p["schedule"], args=["--max-total-tokens", "2000"])
        st = status(s)
        self.assertEqual(st["forced_steps"], 0)
        self.assertIn("kv_tokens 2000 < the primary's 4096", st["message"])


class SglangIds(unittest.TestCase):
    """The client's X-Request-Id becomes the rid; a body's rid is kept; a request with neither is internal-<k>."""

    def test_ids(self):
        tmp = mkdtemp()
        wl = [{"id": "client-a", "prompt": 5, "max_tokens": 2, "at": 0.0},
              {"id": "client-b", "prompt": 6, "max_tokens": 2, "at": 0.0, "rid": "body-rid"},
              {"id": "warm", "prompt": 4, "max_tokens": 2, "at": 0.0, "no_header": True}]
        out, _, paths = run(tmp, "primary", "ids", workload=wl)
        self.assertEqual(out["rids"]["client-a"], "client-a")
        self.assertEqual(out["rids"]["client-b"], "body-rid")
        self.assertTrue(out["rids"]["warm"].startswith("twinscope-internal-"))
        ids = sorted(d["id"] for d in lines(paths["trace"]))
        self.assertEqual(ids, ["body-rid", "client-a", "internal-0"])

    def test_parallel_sample_ids(self):
        """A request with n > 1: its prefix and samples get <rid>.0, <rid>.1, ... instead of random ids, counted per
        rid (as both twins send them); SGLang's own regenerate_rid without the adapter."""
        code = ("import copy\n"
                "from sglang.srt.managers.tokenizer_manager import GenerateReqInput as G\n"
                "a, b = G('chat-n2_0'), G('twinscope-internal-x_0')\n"
                "print(' '.join(copy.copy(o).regenerate_rid() for o in (a, a, b, a)), a.rid)\n")
        tmp = mkdtemp()
        for role, want in (("primary", "chat-n2_0.0 chat-n2_0.1 twinscope-internal-x_0.0 chat-n2_0.2 chat-n2_0"),
                           ("", None)):
            env = {k: v for k, v in os.environ.items() if not k.startswith(("TWINSCOPE_", "FAKE_"))}
            env.update(PYTHONPATH=os.pathsep.join([SHIM, FAKE]), TWINSCOPE_ADAPTER_STATUS=os.path.join(tmp, "st.json"))
            if role:
                env["TWINSCOPE_ROLE"] = role
            p = subprocess.run([sys.executable, "-c", code], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               universal_newlines=True, timeout=60)
            self.assertEqual(p.returncode, 0, p.stderr)
            got = p.stdout.split()
            if want:
                self.assertEqual(" ".join(got), want)
            else:  # not under twin: SGLang's random ids
                self.assertEqual(len(set(got[:4])), 4)
                self.assertFalse(any(x.startswith("chat-n2") for x in got[:4]))


if __name__ == "__main__":
    unittest.main()
