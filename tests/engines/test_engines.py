"""The engine adapters (python/twinscope/engines) on the fake transformers engine (tests/engines/fake), loaded as `twin --serve` loads them: the shim first on PYTHONPATH and the TWINSCOPE_* settings (docs/engines.md)."""

import json
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCE = os.environ.get("TWINSCOPE_TEST_SOURCE", os.path.join(HERE, "..", ".."))
SHIM = os.path.join(SOURCE, "python", "twinscope", "engines", "shim")
FAKE = os.path.join(HERE, "fake")
DRIVE = os.path.join(FAKE, "drive.py")
TIMES = ("start_us", "dur_us")

# 8 requests: 4 at once, 4 a little later; prompts long enough that the fake packs them in chunks (mixed steps).
WORKLOAD = [
    {"id": "req-%d" % i, "prompt": 9 + 7 * i, "max_tokens": 12 + 3 * i, "at": 0.0 if i < 4 else 0.02} for i in range(8)
]


def run(tmp, role, name, workload=WORKLOAD, follow=None, extra_env=None, args=(), pythonpath=None):
    """Runs the fake engine's driver as a server under `twin --serve` would run; returns (out doc, stderr, paths)."""
    wl = os.path.join(tmp, name + "-workload.json")
    with open(wl, "w") as f:
        json.dump(workload, f)
    paths = {
        "schedule": os.path.join(tmp, "schedule-%s.jsonl" % name),
        "trace": os.path.join(tmp, "requests-%s.jsonl" % name),
        "status": os.path.join(tmp, "adapter-%s.json" % name),
        "out": os.path.join(tmp, name + "-out.json"),
    }
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TWINSCOPE_", "FAKE_"))}
    env.update(
        PYTHONPATH=pythonpath or os.pathsep.join([SHIM, FAKE]),
        TWINSCOPE_ROLE=role,
        TWINSCOPE_SCHEDULE_OUT=paths["schedule"],
        TWINSCOPE_REQUEST_TRACE=paths["trace"],
        TWINSCOPE_ADAPTER_STATUS=paths["status"],
        FAKE_ENGINE_SEED="11" if role == "primary" else "29",
    )
    if follow:
        env["TWINSCOPE_SCHEDULE_FOLLOW"] = follow
    env.update(extra_env or {})
    p = subprocess.run(
        [sys.executable, DRIVE, "--workload", wl, "--out", paths["out"]] + list(args),
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        universal_newlines=True,
        timeout=60,
    )
    if p.returncode != 0 and not (p.returncode == -15 and "--die-by-sigterm" in args):
        raise AssertionError("the fake engine failed (%d): %s" % (p.returncode, p.stderr))
    with open(paths["out"]) as f:
        out = json.load(f)
    return out, p.stderr, paths


_TMP = []


def mkdtemp():
    d = tempfile.mkdtemp(prefix="twinscope-engines-")
    _TMP.append(d)
    return d


def tearDownModule():
    for d in _TMP:
        shutil.rmtree(d, ignore_errors=True)


def said(err):
    return [x for x in err.splitlines() if x.startswith("twinscope adapter: ")]


def lines(path):
    if not os.path.exists(path):
        return []
    with open(path) as f:
        return [json.loads(x) for x in f if x.strip()]


def steps(path, keep_times=False):
    return [
        {k: v for k, v in d.items() if keep_times or k not in TIMES} for d in lines(path) if d.get("type") == "step"
    ]


def status(paths):
    with open(paths["status"]) as f:
        return json.load(f)


def step_launches(out):
    """The fake GPU's launches of served steps: (range, kernel, tokens), and whether each ran on the range's thread."""
    return [tuple(x[:3]) for x in out["launches"] if x[0] and " step " in x[0]], all(x[3] for x in out["launches"])


class RecordUntilSigterm(unittest.TestCase):
    """A server that dies by SIGTERM after its shutdown (uvicorn raises the signal again: atexit never runs) still
    has its last step and every request that ended, written when the engine stopped."""

    def test_the_last_step_and_every_request_are_written_at_the_engines_stop(self):
        tmp = mkdtemp()
        out, _, paths = run(tmp, "primary", "sigterm", args=["--die-by-sigterm"])
        trace = {d["id"]: d for d in lines(paths["trace"])}
        self.assertEqual(sorted(trace), sorted(r["id"] for r in WORKLOAD))
        self.assertTrue(all(d["status"] == 200 for d in trace.values()))
        ss = steps(paths["schedule"])
        last = max(max(d["steps"]) for d in trace.values())
        self.assertEqual(len(ss), last + 1)  # the step in which the last request ended is in the schedule
        launches, _ = step_launches(out)
        self.assertEqual([s["name"] for s in ss], [r for r, k, _ in launches if k == "index_copy_kernel_impl"])
        self.assertEqual(status(paths)["steps"], len(ss))

    # `transformers serve` never stops its engine at shutdown (the lifespan unloads the model) and dies by SIGTERM:
    # the last step and the request that ended in it are written while the engine idles after it. (A method of this
    # class, which ctest runs: it was a class of its own that no ctest named.)
    def test_the_last_step_and_every_request_are_written_while_the_engine_idles(self):
        tmp = mkdtemp()
        out, _, paths = run(tmp, "primary", "nostop", args=["--die-by-sigterm", "--no-engine-stop"])
        trace = {d["id"]: d for d in lines(paths["trace"])}
        self.assertEqual(sorted(trace), sorted(r["id"] for r in WORKLOAD))
        self.assertTrue(all(d["status"] == 200 for d in trace.values()))
        ss = steps(paths["schedule"])
        last = max(max(d["steps"]) for d in trace.values())
        self.assertEqual(len(ss), last + 1)
        ended = {i for s in ss for i in s["finished"]}
        self.assertEqual(ended, set(trace))  # each request's end is in the step it ended in, the last one too
        self.assertEqual(status(paths)["steps"], len(ss))


class Record(unittest.TestCase):
    """The primary: every step in the schedule and in an NVTX range on the thread that launches its kernels."""

    @classmethod
    def setUpClass(cls):
        cls.tmp = mkdtemp()
        cls.out, cls.err, cls.paths = run(cls.tmp, "primary", "primary")

    def test_schedule_header_steps_and_end(self):
        docs = lines(self.paths["schedule"])
        head = docs[0]
        self.assertEqual(head["type"], "header")
        self.assertEqual(head["version"], 2)
        self.assertEqual((head["engine"], head["engine_version"]), ("transformers", "5.17.0"))
        self.assertEqual(head["capacity"]["kv_blocks"], 64)
        self.assertEqual(head["capacity"]["block_size"], 4)
        self.assertEqual(head["capacity"]["max_batch_tokens"], 32)
        self.assertIn("graph_sizes", head["capacity"])
        self.assertEqual(docs[-1], {"type": "end", "steps": len(docs) - 2, "reason": "shutdown"})
        ss = steps(self.paths["schedule"], keep_times=True)
        self.assertGreater(len(ss), 20)
        self.assertEqual([s["step"] for s in ss], list(range(len(ss))))
        for s in ss:
            self.assertIn(s["kind"], ("prefill", "decode", "mixed"))
            self.assertTrue(s["name"].startswith("%s step %d [" % (s["kind"], s["step"])), s["name"])
            self.assertLessEqual(sum(e["tokens"] for e in s["batch"]), 32)
            self.assertGreaterEqual(s["dur_us"], 0)

    def test_each_step_is_one_range_around_its_launches_on_the_launching_thread(self):
        names = [s["name"] for s in steps(self.paths["schedule"])]
        launches, same_thread = step_launches(self.out)
        self.assertTrue(same_thread, "a range was open on another thread than the launches")
        self.assertEqual([r for r, k, _ in launches if k == "index_copy_kernel_impl"], names)
        tokens = {s["name"]: sum(e["tokens"] for e in s["batch"]) for s in steps(self.paths["schedule"])}
        for r, _, q in launches:
            self.assertEqual(q, tokens[r])  # the kernels' shape is the step's tokens
        warm = [x for x in self.out["launches"] if x[1] == "fake_warmup"]
        self.assertEqual(warm[0][0], "warmup transformers continuous batching")

    def test_request_trace_ties_each_request_to_its_steps(self):
        trace = {d["id"]: d for d in lines(self.paths["trace"])}
        self.assertEqual(sorted(trace), sorted(r["id"] for r in WORKLOAD))
        by_step = {s["step"]: s for s in steps(self.paths["schedule"])}
        for w in WORKLOAD:
            d = trace[w["id"]]
            self.assertEqual(d["status"], 200)
            self.assertEqual(d["prompt_tokens"], w["prompt"])
            self.assertEqual(d["completion_tokens"], len(self.out["results"][w["id"]]))
            named = [s for s, doc in sorted(by_step.items()) if any(e["id"] == w["id"] for e in doc["batch"])]
            self.assertEqual(d["steps"], named)
            self.assertEqual(d["prefill_step"], named[0])
            fed = sum(e["tokens"] for s in named for e in by_step[s]["batch"] if e["id"] == w["id"])
            self.assertEqual(fed, d["prompt_tokens"] + d["completion_tokens"] - 1)  # the last token is never fed
            self.assertIn(w["id"], by_step[named[-1]]["finished"])
            self.assertGreaterEqual(d["first_token_us"], d["queued_us"])

    def test_mixed_steps_carry_prefill_chunks_and_decode_tokens(self):
        prompt = {w["id"]: w["prompt"] for w in WORKLOAD}
        mixed = [s for s in steps(self.paths["schedule"]) if s["kind"] == "mixed"]
        self.assertTrue(mixed, "the workload made no mixed step")
        for s in mixed:
            parts = {e["offset"] < prompt[e["id"]] for e in s["batch"]}
            self.assertEqual(parts, {True, False}, s)
        chunks = [
            e for s in steps(self.paths["schedule"]) for e in s["batch"] if 0 < e["offset"] < prompt[e["id"]]
        ]
        self.assertTrue(chunks, "no prompt was split over steps")

    def test_a_request_cancelled_after_the_last_step_is_on_the_end_line(self):
        # The engine idles after the last step (written then); a request that comes and is cancelled at once ends
        # with no step after it: it is on the end line, as vLLM's and SGLang's are, not lost from the schedule.
        tmp = mkdtemp()
        _, _, paths = run(tmp, "primary", "late", args=["--cancel-late", "late-0"])
        trace = {d["id"]: d for d in lines(paths["trace"])}
        self.assertEqual(trace["late-0"]["status"], 499)
        self.assertEqual(trace["late-0"]["steps"], [])
        ss = steps(paths["schedule"])
        self.assertFalse([s["step"] for s in ss if "late-0" in s["finished"] + s["cancelled"]])
        end = lines(paths["schedule"])[-1]
        self.assertEqual(end, {"type": "end", "steps": len(ss), "reason": "shutdown", "cancelled": ["late-0"]})
        ended = [i for s in ss for i in s["finished"] + s["cancelled"]] + end.get("finished", []) + end["cancelled"]
        self.assertEqual(sorted(ended), sorted(trace))  # every request of the trace ends once in the schedule

    def test_status(self):
        st = status(self.paths)
        self.assertEqual((st["mode"], st["supported"], st["engine"], st["version"]), ("record", True, "transformers", "5.17.0"))
        self.assertEqual(st["steps"], len(steps(self.paths["schedule"])))
        self.assertEqual(st["errors"], [])
        self.assertEqual(st["nvtx"], "torch.cuda.nvtx")
        self.assertEqual(said(self.err), [])


class Force(unittest.TestCase):
    """The shadow: the primary's steps exactly, though the fake batches differently on its own."""

    @classmethod
    def setUpClass(cls):
        cls.tmp = mkdtemp()
        cls.p_out, _, cls.p = run(cls.tmp, "primary", "primary")
        cls.s_out, cls.s_err, cls.s = run(cls.tmp, "shadow", "shadow", follow=cls.p["schedule"], args=["--all-at-once"])

    def test_shadow_schedule_equals_the_primarys_but_for_times(self):
        self.assertEqual(steps(self.s["schedule"]), steps(self.p["schedule"]))
        self.assertEqual(step_launches(self.s_out), step_launches(self.p_out))
        self.assertEqual(self.s_out["results"], self.p_out["results"])
        st = status(self.s)
        self.assertEqual(st["mode"], "force")
        self.assertEqual(st["forced_steps"], len(steps(self.p["schedule"])))
        self.assertEqual((st["timeouts"], st["errors"]), (0, []))
        self.assertEqual(said(self.s_err), [])

    def test_without_forcing_the_fake_batches_otherwise(self):
        # The control: the same shadow recording only (an adapter that does not force) and with the adapters off.
        out, _, paths = run(self.tmp, "shadow", "recording-shadow", args=["--all-at-once"])
        self.assertNotEqual(steps(paths["schedule"]), steps(self.p["schedule"]))
        self.assertNotEqual(step_launches(out)[0], step_launches(self.p_out)[0])
        off, _, off_paths = run(
            self.tmp, "shadow", "off", follow=self.p["schedule"], extra_env={"TWINSCOPE_ENGINE_ADAPTER": "off"}, args=["--all-at-once"]
        )
        self.assertEqual(steps(off_paths["schedule"]), [])
        self.assertEqual(off["results"], self.p_out["results"])  # the tokens never depend on the batches
        self.assertNotEqual([k for k in off["launches"] if k[1] != "fake_warmup"], [k for k in self.p_out["launches"] if k[1] != "fake_warmup"])
        st = status(off_paths)
        self.assertEqual(st["mode"], "disabled")
        self.assertIn("--engine-adapter off", st["message"])


class Preemption(unittest.TestCase):
    """A cache too small for the batch: the primary's engine preempts; the shadow preempts the same requests."""

    def test_preemptions_are_recorded_and_forced(self):
        tmp = mkdtemp()
        small = ["--num-blocks", "30", "--scheduler", "prefill_first"]
        p_out, _, p = run(tmp, "primary", "primary", args=small)
        pre = [i for s in steps(p["schedule"]) for i in s["preempted"]]
        self.assertTrue(pre, "no preemption with 30 blocks")
        trace = {d["id"]: d for d in lines(p["trace"])}
        self.assertEqual(sum(d.get("preempted", 0) for d in trace.values()), len(pre))
        for i, d in trace.items():
            self.assertEqual(d["completion_tokens"], len(p_out["results"][i]))  # tokens from before the reset count
        s_out, err, s = run(tmp, "shadow", "shadow", follow=p["schedule"], args=small + ["--all-at-once"])
        self.assertEqual(steps(s["schedule"]), steps(p["schedule"]))
        self.assertEqual(s_out["results"], p_out["results"])
        self.assertEqual(status(s)["errors"], [], err)


class FollowFaults:
    """Faults in following the primary's schedule, the same for every engine's adapter: a test class mixes this in
    beside unittest.TestCase, runs its engine's primary in setUpClass (tmp, p, p_out) and sets `engine_run` (its
    module's run) and `smaller` (the shadow's --num-blocks below the primary's, and the message that says so)."""

    def test_a_smaller_shadow_does_not_force(self):
        blocks, message = self.smaller
        out, err, s = self.engine_run(self.tmp, "shadow", "small", follow=self.p["schedule"],
                                      args=["--num-blocks", blocks, "--all-at-once"])
        st = status(s)
        self.assertIn(message, st["message"])
        self.assertEqual(st["forced_steps"], 0)
        self.assertIn("stopped forcing", err)
        self.assertEqual(out["results"], self.p_out["results"])

    def test_every_step_without_the_end_line_is_followed_without_a_warning(self):
        # A server stopped by a signal writes every step but no end line: the shadow, given the same requests, forces
        # every step and has nothing to warn of (before: a warning on every such run).
        unended = os.path.join(self.tmp, "unended.jsonl")
        with open(self.p["schedule"]) as f:
            text = f.read().splitlines()
        self.assertEqual(json.loads(text[-1])["type"], "end")
        with open(unended, "w") as f:
            f.write("\n".join(text[:-1]) + "\n")
        out, err, s = self.engine_run(self.tmp, "shadow", "unended", follow=unended, args=["--all-at-once"])
        st = status(s)
        self.assertEqual(st["forced_steps"], len(text) - 2)
        self.assertFalse(st["follow_ended"])
        self.assertEqual(st["warnings"], [])
        self.assertNotIn("stopped forcing", st["message"])
        self.assertEqual(steps(s["schedule"]), steps(self.p["schedule"]))
        self.assertEqual(out["results"], self.p_out["results"])

    def test_a_schedule_cut_short_is_followed_as_far_as_it_goes(self):
        cut = os.path.join(self.tmp, "cut.jsonl")
        with open(self.p["schedule"]) as f:
            text = f.read().splitlines()
        with open(cut, "w") as f:
            f.write("\n".join(text[:11]) + "\n" + text[11][:20])  # header, 10 steps, half a step, no end
        out, err, s = self.engine_run(self.tmp, "shadow", "cut", follow=cut, args=["--all-at-once"])
        st = status(s)
        self.assertEqual(st["forced_steps"], 10)
        self.assertTrue(any("cut short" in w for w in st["warnings"]), st["warnings"])
        self.assertFalse(st["follow_ended"])
        self.assertIn("no end line", st["message"])  # the shadow ran past the last step: said where forcing stopped
        self.assertEqual(steps(s["schedule"])[:10], steps(self.p["schedule"])[:10])
        self.assertEqual(out["results"], self.p_out["results"])


class Faults(FollowFaults, unittest.TestCase):
    engine_run = staticmethod(run)
    smaller = ("32", "kv_blocks 32 < the primary's 64")

    @classmethod
    def setUpClass(cls):
        cls.tmp = mkdtemp()
        cls.p_out, _, cls.p = run(cls.tmp, "primary", "primary")

    def test_a_step_whose_request_never_comes_times_out_said_and_the_engine_batches_on(self):
        missing = "req-5"
        work = [w for w in WORKLOAD if w["id"] != missing]
        out, err, s = run(
            self.tmp,
            "shadow",
            "timeout",
            workload=work,
            follow=self.p["schedule"],
            extra_env={"TWINSCOPE_FOLLOW_STEP_TIMEOUT_S": "0.3"},
            args=["--all-at-once"],
        )
        st = status(s)
        self.assertEqual(st["timeouts"], 1)
        self.assertIn("waited 0.3 s", st["message"])
        self.assertIn(missing, st["message"])
        self.assertIn("twinscope adapter: stopped forcing", err)
        first = next(s_["step"] for s_ in steps(self.p["schedule"]) if any(e["id"] == missing for e in s_["batch"]))
        self.assertEqual(st["forced_steps"], first)
        self.assertEqual(steps(s["schedule"])[:first], steps(self.p["schedule"])[:first])
        self.assertEqual(sorted(out["results"]), sorted(w["id"] for w in work))  # every other request served

    def test_an_adapter_that_raises_is_disabled_said_and_the_server_serves_on(self):
        out, err, paths = run(self.tmp, "primary", "broken", extra_env={"FAKE_ENGINE_BREAK": "1"})
        self.assertEqual(sorted(out["results"]), sorted(w["id"] for w in WORKLOAD))
        self.assertIsNone(out["error"])
        lines_ = said(err)
        self.assertEqual(len(lines_), 1, err)
        self.assertIn("raised in recording a step (AttributeError", lines_[0])
        self.assertTrue(lines_[0].endswith("disabled"), lines_[0])
        st = status(paths)
        self.assertEqual(st["mode"], "disabled")
        self.assertIn("AttributeError", st["errors"][0])

    def test_an_unknown_version_is_refused_before_serving(self):
        out, err, paths = run(self.tmp, "primary", "v599", extra_env={"FAKE_TRANSFORMERS_VERSION": "5.99.0"})
        msg = "transformers 5.99.0 is not one twinscope's adapter knows (known: 5.17.0): batches will not be forced"
        st = status(paths)
        self.assertEqual((st["supported"], st["mode"], st["message"]), (False, "disabled", msg))
        order = err.splitlines()
        self.assertEqual(order[0], "twinscope adapter: " + msg + ": disabled")
        self.assertEqual(order[1], "fake engine: serving")  # said before the engine served
        self.assertEqual(steps(paths["schedule"]), [])
        self.assertEqual(sorted(out["results"]), sorted(w["id"] for w in WORKLOAD))

    def test_a_schedule_that_cannot_be_read_is_said_and_the_shadow_records_on_its_own(self):
        out, err, s = run(self.tmp, "shadow", "nofile", follow=os.path.join(self.tmp, "missing.jsonl"), args=["--all-at-once"])
        st = status(s)
        self.assertEqual(st["mode"], "record")
        self.assertIn("cannot be read", st["message"])
        self.assertIn("batches will not be forced", st["message"])
        self.assertIn("twinscope adapter: the schedule to follow", err)
        self.assertGreater(len(steps(s["schedule"])), 0)
        self.assertEqual(out["results"], self.p_out["results"])

    def test_async_batching_is_said(self):
        _, _, paths = run(self.tmp, "primary", "async", extra_env={"FAKE_ASYNC_BATCHING": "1"})
        st = status(paths)
        self.assertTrue(st["capacity"]["async_batching"])
        self.assertTrue(any("async batching is on" in w for w in st["warnings"]), st["warnings"])


class Shim(unittest.TestCase):
    """The shim runs a user's own sitecustomize first, and does nothing outside `twin --serve`."""

    def test_the_users_sitecustomize_runs_and_the_adapter_still_records(self):
        tmp = mkdtemp()
        user = os.path.join(tmp, "user")
        os.mkdir(user)
        marker = os.path.join(tmp, "ran")
        with open(os.path.join(user, "sitecustomize.py"), "w") as f:
            f.write("open(%r, 'w').write('yes')\n" % marker)
        _, err, paths = run(tmp, "primary", "primary", pythonpath=os.pathsep.join([SHIM, user, FAKE]))
        with open(marker) as f:
            self.assertEqual(f.read(), "yes")
        self.assertGreater(len(steps(paths["schedule"])), 0)
        with open(os.path.join(user, "sitecustomize.py"), "w") as f:
            f.write("raise RuntimeError('broken on purpose')\n")
        _, err, paths = run(tmp, "primary", "primary2", pythonpath=os.pathsep.join([SHIM, user, FAKE]))
        self.assertIn("your sitecustomize", err)
        self.assertIn("broken on purpose", err)
        self.assertGreater(len(steps(paths["schedule"])), 0)

    def test_a_second_process_of_the_server_leaves_the_files_to_the_first(self):
        tmp = mkdtemp()
        status_path = os.path.join(tmp, "adapter-primary.json")
        env = dict(
            {k: v for k, v in os.environ.items() if not k.startswith(("TWINSCOPE_", "FAKE_"))},
            PYTHONPATH=os.pathsep.join([SHIM, FAKE]),
            TWINSCOPE_ROLE="primary",
            TWINSCOPE_ADAPTER_STATUS=status_path,
            TWINSCOPE_SCHEDULE_OUT=os.path.join(tmp, "schedule-primary.jsonl"),
        )
        code = "import sys, transformers; sys.stdout.write('imported\\n'); sys.stdout.flush(); sys.stdin.read()"
        first = subprocess.Popen([sys.executable, "-c", code], env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                 stderr=subprocess.PIPE, universal_newlines=True)
        self.assertEqual(first.stdout.readline(), "imported\n")
        second = subprocess.run([sys.executable, "-c", "import transformers"], env=env, stderr=subprocess.PIPE,
                                universal_newlines=True, timeout=60)
        first.communicate("", timeout=60)
        self.assertIn("process %d of this server has the adapter" % first.pid, second.stderr)
        with open(status_path) as f:
            self.assertEqual(json.load(f)["message"], "transformers 5.17.0: waiting for continuous batching")
        self.assertFalse(os.path.exists(status_path + ".lock"))  # removed at exit

    def test_without_a_role_nothing_is_written(self):
        tmp = mkdtemp()
        _, err, paths = run(tmp, "", "norole")
        self.assertFalse(os.path.exists(paths["schedule"]))
        self.assertFalse(os.path.exists(paths["status"]))
        self.assertEqual(said(err), [])

    def test_an_unknown_adapter_name_is_said(self):
        tmp = mkdtemp()
        _, err, paths = run(tmp, "primary", "nosuch", extra_env={"TWINSCOPE_ENGINE_ADAPTER": "nosuchengine"})
        self.assertRegex(status(paths)["message"],
                         r"^no engine adapter named 'nosuchengine' \(known: (\w+, )*transformers, (\w+, )*auto, off\)")
        self.assertIn("twinscope adapter: no engine adapter named 'nosuchengine'", err)


if __name__ == "__main__":
    unittest.main()
