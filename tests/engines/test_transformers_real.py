"""The transformers adapter on the real transformers 5.17 continuous-batching engine (CPU, a tiny random Llama: tests/engines/real_cb.py), loaded through the shim as `twin --serve` loads it; run with the transformers venv's python by scripts/transformers_real.sh (ctest label engines-transformers-real)."""

import os
import unittest

from real_twins import HERE, lines, mkdtemp, run_driver, status, steps, tearDownModule  # noqa: F401

DRIVE = os.path.join(HERE, "real_cb.py")
REQUESTS = ["req-%d" % i for i in range(8)]  # real_cb.py's 8 requests


def run(tmp, role, name, follow=None, args=()):
    """real_cb.py under the TWINSCOPE_* environment `twin --serve` sets for one twin: (its output, its stderr lines from
    the adapter, the paths of its files)."""
    extra = {}
    # A broken adapter can be tried here: TWINSCOPE_TEST_SHADOW_ADAPTER=off runs every shadow with the adapter off.
    if role == "shadow" and os.environ.get("TWINSCOPE_TEST_SHADOW_ADAPTER"):
        extra["TWINSCOPE_ENGINE_ADAPTER"] = os.environ["TWINSCOPE_TEST_SHADOW_ADAPTER"]
    return run_driver(DRIVE, "real_cb.py", tmp, role, name, args=["--device", "cpu"] + list(args), follow=follow,
                      extra_env=extra, timeout=240)


def tmpdir():
    return mkdtemp("twinscope-transformers-real-")


class Twins(unittest.TestCase):
    """A primary records (requests staggered, or at once in order); a shadow given the requests all at once, last first (as a replay sends
    them), is forced to the primary's steps; a control shadow, not forced, batches otherwise."""

    def twins(self, name, args=(), drop=(), primary_args=()):
        tmp = tmpdir()
        p_out, p_said, p = run(tmp, "primary", name + "-primary", args=list(args) + list(primary_args))
        s_out, s_said, s = run(tmp, "shadow", name + "-shadow", follow=p["schedule"], args=list(args) + ["--all-at-once"])
        c_out, _, c = run(tmp, "shadow", name + "-control", args=list(args) + ["--all-at-once"])
        pst, sst = status(p, missing_ok=True), status(s, missing_ok=True)
        self.assertEqual((pst.get("mode"), pst.get("version"), pst.get("errors")), ("record", "5.17.0", []))
        ps = steps(p["schedule"])
        self.assertGreater(len(ps), 10)
        self.assertEqual(sorted(p_out["results"]), REQUESTS)
        self.assertEqual((sst.get("mode"), sst.get("forced_steps"), sst.get("errors"), sst.get("timeouts")),
                         ("force", len(ps), [], 0), "the shadow's adapter status: %s" % sst)
        self.assertEqual(steps(s["schedule"], drop), steps(p["schedule"], drop))
        self.assertTrue(sst["follow_ended"])
        self.assertEqual((p_said, s_said), ([], []))
        self.assertEqual(s_out["results"], p_out["results"])
        self.assertNotEqual(steps(c["schedule"], drop), steps(p["schedule"], drop),
                            "the control shadow batched as the primary: nothing was forced")
        self.assertEqual(c_out["results"], p_out["results"])
        trace = {d["id"]: d for d in lines(p["trace"])}
        self.assertEqual(sorted(trace), REQUESTS)  # the ids the requests were sent with
        for i, rid in enumerate(REQUESTS):
            d = trace[rid]
            self.assertEqual((d["status"], d["completion_tokens"]), (200, 6 + 2 * i))
            self.assertEqual(d["steps"], [x["step"] for x in ps if any(e["id"] == rid for e in x["batch"])])
        return ps, lines(p["schedule"])[0], steps(s["schedule"])

    def test_staggered_requests_forced_exactly(self):
        # How the staggered requests meet in steps depends on the machine's speed (prefill, decode and, mostly, mixed
        # steps); the forcing must hold whatever they were.
        ps, head, _ = self.twins("sync")
        self.assertIn("decode", {x["kind"] for x in ps})
        cap = head["capacity"]
        self.assertEqual((cap["kv_blocks"], cap["block_size"], cap["max_batch_tokens"]), (64, 16, 64))
        fed = {}
        for x in ps:
            for e in x["batch"]:
                self.assertEqual(e["offset"], fed.get(e["id"], 0))
                fed[e["id"]] = e["offset"] + e["tokens"]
        for i, rid in enumerate(REQUESTS):  # the prompt, then every generated token but the last
            self.assertEqual(fed[rid], 7 + 11 * i + 6 + 2 * i - 1)

    def test_preemption_with_14_blocks(self):
        # 14 blocks of 16 tokens do not hold the 8 requests: the engine preempts, and the shadow, forcing, preempts the
        # same requests in the same steps. The one difference allowed (docs/engines.md): the primary may preempt again
        # a request that is in no batch (made active, it found no block); the shadow preempts only the active requests
        # a step names, so its `preempted` may lack that id, while every batch and every token is the same.
        # The primary gets its 8 requests at once, in order (their prompts alone, 364 tokens, outgrow the 224 of
        # the cache whatever the machine's speed); the shadow gets them last first.
        ps, _, ss = self.twins("preempt", args=["--num-blocks", "14"], drop=("preempted",), primary_args=["--at-once"])
        self.assertTrue([x for x in ps if x["preempted"]], "no preemption with 14 blocks")
        self.assertTrue([x for x in ss if x["preempted"]], "the shadow preempted nothing")
        batched = set()  # the ids of the step before
        for a, b in zip(ps, ss):
            self.assertLessEqual(set(b["preempted"]), set(a["preempted"]), "step %d" % a["step"])
            for rid in set(a["preempted"]) - set(b["preempted"]):
                self.assertNotIn(rid, batched, "step %d: the shadow did not preempt %s, active" % (a["step"], rid))
            batched = {e["id"] for e in a["batch"]}


class Cancel(unittest.TestCase):
    """A request sent and cancelled at once after the engine idled past its last step ends on the end line."""

    def test_late_cancellation_on_the_end_line(self):
        out, said, p = run(tmpdir(), "primary", "cancel", args=["--cancel-late"])
        end = lines(p["schedule"])[-1]
        self.assertEqual((end["type"], end.get("cancelled"), end.get("finished")), ("end", ["late-cancel"], None))
        self.assertNotIn("late-cancel", [e["id"] for x in steps(p["schedule"]) for e in x["batch"]])
        trace = {d["id"]: d for d in lines(p["trace"])}
        self.assertEqual((trace["late-cancel"]["status"], trace["late-cancel"]["finish_reason"]), (499, "cancelled"))
        self.assertEqual(sorted(out["results"]), REQUESTS)
        self.assertEqual((status(p, missing_ok=True)["errors"], said), ([], []))


if __name__ == "__main__":
    unittest.main()
