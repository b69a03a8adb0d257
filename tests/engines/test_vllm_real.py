"""The vLLM adapter on vLLM's real V1 Scheduler (CPU, synthetic requests), loaded through the shim as `twin --serve` loads it, and the fake vLLM checked name by name against the real package; run with the vLLM venv's python by scripts/vllm_real.sh (ctest label engines-vllm-real)."""

import ast
import dataclasses
import importlib
import inspect
import os
import sys
import unittest

from real_twins import HERE, SOURCE, lines, mkdtemp, run_driver, status, steps, tearDownModule  # noqa: F401

FAKE_VLLM = os.path.join(HERE, "fake", "vllm")
DRIVE = os.path.join(HERE, "real_vllm.py")

# 8 requests: 3 before the first step, the others a few steps apart; prompts that the 64-token budget splits.
WORKLOAD = [{"id": "req-%d" % i, "prompt": 9 + 13 * i, "max_tokens": 6 + 2 * i, "step": 0 if i < 3 else 2 * i} for i in range(8)]
# 4 requests whose decodes outgrow 10 blocks of 16 tokens: the scheduler preempts.
PREEMPT = [{"id": "pre-%d" % i, "prompt": 16 + i, "max_tokens": 40, "step": 0} for i in range(4)]


def run(tmp, role, name, workload=WORKLOAD, follow=None, args=()):
    return run_driver(DRIVE, "the real vLLM driver", tmp, role, name, args=args, workload=workload, follow=follow,
                      drop_env=("TWINSCOPE_", "VLLM_"))


class Twins(unittest.TestCase):
    """A primary records; a shadow given the requests all at once, last first, is forced to the same steps."""

    def twins(self, name, workload, args=()):
        tmp = mkdtemp("twinscope-vllm-real-")
        p_out, p_said, p = run(tmp, "primary", name + "-primary", workload, args=args)
        s_out, s_said, s = run(tmp, "shadow", name + "-shadow", workload, follow=p["schedule"],
                               args=list(args) + ["--all-at-once"])
        c_out, _, c = run(tmp, "shadow", name + "-control", workload, args=list(args) + ["--all-at-once"])
        pst, sst = status(p), status(s)
        self.assertEqual((pst["mode"], pst["version"], pst["errors"]), ("record", "0.34.0", []))
        ps = steps(p["schedule"])
        self.assertGreater(len(ps), 10)
        self.assertEqual(steps(s["schedule"]), ps)
        self.assertEqual((sst["mode"], sst["forced_steps"], sst["errors"], sst["timeouts"]), ("force", len(ps), [], 0))
        self.assertEqual((p_said, s_said), ([], []))
        self.assertEqual(s_out["results"], p_out["results"])
        self.assertNotEqual(steps(c["schedule"]), ps, "the control shadow batched as the primary: nothing was forced")
        self.assertEqual(c_out["results"], p_out["results"])
        trace = {d["id"]: d for d in lines(p["trace"])}
        self.assertEqual(sorted(trace), sorted(w["id"] for w in workload))  # the clients' ids
        for w in workload:
            d = trace[w["id"]]
            self.assertRegex(d["engine_id"], r"^chatcmpl-%s-[0-9a-f]{8}$" % w["id"])
            self.assertEqual((d["status"], d["completion_tokens"]), (200, w["max_tokens"]))
            named = [x["step"] for x in ps if any(e["id"] == w["id"] for e in x["batch"])]
            self.assertEqual(d["steps"], named)
        head = lines(p["schedule"])[0]
        return ps, head, p_out, pst

    def test_scheduler(self):
        ps, head, out, st = self.twins("sync", WORKLOAD)
        self.assertEqual(out["scheduler"], "Scheduler")
        self.assertEqual({x["kind"] for x in ps}, {"prefill", "decode", "mixed"})
        cap = head["capacity"]
        self.assertEqual((cap["kv_blocks"], cap["block_size"], cap["max_batch_tokens"], cap["max_requests_per_batch"]),
                         (64, 16, 64, 8))
        fed = {}
        for x in ps:
            for e in x["batch"]:
                self.assertEqual(e["offset"], fed.get(e["id"], 0))
                fed[e["id"]] = e["offset"] + e["tokens"]
        for w in WORKLOAD:
            self.assertEqual(fed[w["id"]], w["prompt"] + w["max_tokens"] - 1)

    def test_async_scheduler(self):
        ps, head, out, st = self.twins("async", WORKLOAD, args=["--async-scheduling"])
        self.assertEqual(out["scheduler"], "AsyncScheduler")
        self.assertTrue(head["capacity"]["async_scheduling"])
        self.assertTrue(any("async scheduling is on" in w for w in st["warnings"]), st["warnings"])

    def test_late_requests_are_waited_for(self):
        # The shadow's requests come 5 engine loops later than the primary's, the ones of a loop in reverse: its
        # scheduler runs empty steps until each forced step's requests are there.
        tmp = mkdtemp("twinscope-vllm-real-")
        p_out, _, p = run(tmp, "primary", "primary")
        late = [dict(w, step=w["step"] + 5) for w in WORKLOAD]
        s_out, said, s = run(tmp, "shadow", "late", late, follow=p["schedule"], args=["--reverse"])
        self.assertEqual(steps(s["schedule"]), steps(p["schedule"]))
        st = status(s)
        self.assertEqual((st["forced_steps"], st["timeouts"], st["errors"], said), (len(steps(p["schedule"])), 0, [], []))
        self.assertEqual(s_out["results"], p_out["results"])
        self.assertGreater(s_out["loops"], p_out["loops"])  # it waited

    def test_preemption(self):
        ps, head, out, st = self.twins("preempt", PREEMPT, args=["--num-blocks", "10"])
        self.assertTrue([x for x in ps if x["preempted"]], "no preemption with 10 blocks")


def fake_names():
    """(module, kind, name, detail) of everything the fake vLLM defines, read from its source (it cannot be imported
    beside the real package): functions and methods with their parameters, dataclass fields, enum members."""
    found = []
    for root, _, files in os.walk(FAKE_VLLM):
        for fn in sorted(files):
            if not fn.endswith(".py"):
                continue
            rel = os.path.relpath(os.path.join(root, fn), os.path.dirname(FAKE_VLLM))[:-3].replace(os.sep, ".")
            mod = rel[: -len(".__init__")] if rel.endswith(".__init__") else rel
            with open(os.path.join(root, fn)) as f:
                tree = ast.parse(f.read())
            skip = set()
            for node in tree.body:
                if isinstance(node, ast.Assign) and any(getattr(t, "id", "") == "FAKE_ONLY" for t in node.targets):
                    skip = set(ast.literal_eval(node.value))
            for node in tree.body:
                if isinstance(node, ast.FunctionDef) and node.name not in skip:
                    found.append((mod, "function", node.name, [a.arg for a in node.args.args]))
                elif isinstance(node, ast.ClassDef) and node.name not in skip:
                    found.append((mod, "class", node.name, None))
                    for item in node.body:
                        if isinstance(item, ast.FunctionDef) and any(getattr(d, "id", "") == "property" for d in item.decorator_list):
                            found.append((mod, "property", node.name + "." + item.name, None))
                        elif isinstance(item, ast.FunctionDef) and not item.name.startswith("_fake"):
                            found.append((mod, "method", node.name + "." + item.name, [a.arg for a in item.args.args]))
                        elif isinstance(item, ast.AnnAssign):
                            found.append((mod, "field", node.name + "." + item.target.id, None))
                        elif isinstance(item, ast.Assign):
                            for t in item.targets:
                                found.append((mod, "member", node.name + "." + t.id, None))
    return found


def resolve(mod, dotted):
    obj = importlib.import_module(mod)
    for part in dotted.split("."):
        obj = inspect.getattr_static(obj, part) if inspect.isclass(obj) else getattr(obj, part)
    return obj


def params(fn):
    fn = fn.__func__ if isinstance(fn, (staticmethod, classmethod)) else fn
    if isinstance(fn, property):
        return None
    return list(inspect.signature(fn).parameters.values())


class Conformance(unittest.TestCase):
    """Every name of the fake vLLM exists in the real package, with the same parameters (the fake's a prefix of the
    real's, the rest defaulted); a config's constructor takes every parameter the fake's does."""

    def test_the_fake_is_the_real_packages_shape(self):
        names = fake_names()
        self.assertGreater(len(names), 40)
        wrong = []
        for mod, kind, name, detail in names:
            if kind == "field":
                cls = resolve(mod, name.split(".")[0])
                if not dataclasses.is_dataclass(cls) or name.split(".")[1] not in {f.name for f in dataclasses.fields(cls)}:
                    wrong.append("%s.%s: not a field of vLLM's dataclass" % (mod, name))
                continue
            try:
                real = resolve(mod, name)
            except (ImportError, AttributeError) as e:
                wrong.append("%s.%s: not in vLLM (%s)" % (mod, name, e))
                continue
            if kind == "property" and not isinstance(real, property):
                wrong.append("%s.%s: not a property in vLLM" % (mod, name))
            if kind not in ("function", "method"):
                continue
            real_params = params(real)
            if real_params is None:
                wrong.append("%s.%s: a property in vLLM" % (mod, name))
                continue
            real_names = [p.name for p in real_params]
            config = mod in ("vllm.config", "vllm.sampling_params") and name.endswith(".__init__")
            if config:
                if not inspect.isclass(resolve(mod, name.split(".")[0])):
                    continue
                cls = resolve(mod, name.split(".")[0])
                known = set(real_names) | {f.name for f in dataclasses.fields(cls)} if dataclasses.is_dataclass(cls) else set(real_names)
                known |= set(getattr(cls, "__struct_fields__", ()))
                extra = [a for a in detail[1:] if a not in known]
                if extra:
                    wrong.append("%s.%s: vLLM takes no %s" % (mod, name, extra))
                continue
            if real_names[: len(detail)] != detail or any(
                p.default is inspect.Parameter.empty and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)
                for p in real_params[len(detail):]
            ):
                wrong.append("%s.%s: the fake takes %s, vLLM %s" % (mod, name, detail, real_names))
        self.assertEqual(wrong, [], "\n".join(wrong))

    def test_what_the_adapter_names_is_in_the_real_package(self):
        sys.path.insert(0, os.path.join(SOURCE, "python"))
        try:
            from twinscope.engines import vllm as vl
        finally:
            sys.path.pop(0)
        import vllm
        from vllm.v1.core.sched import request_queue, scheduler
        from vllm.v1.engine import core
        from vllm.v1.executor import uniproc_executor

        self.assertIn(vllm.__version__, vl.SUPPORTED)
        self.assertEqual([m for m in vl.SCHEDULER_METHODS if m not in scheduler.Scheduler.__dict__], [])
        self.assertEqual([n for n in vl.QUEUE_NAMES if not hasattr(request_queue, n)], [])
        self.assertEqual([m for m in vl.EXECUTOR_METHODS if m not in uniproc_executor.UniProcExecutor.__dict__], [])
        self.assertIn("_initialize_kv_caches", core.EngineCore.__dict__)
        sys.path.insert(0, HERE)
        try:
            import real_vllm
        finally:
            sys.path.pop(0)

        class A:
            async_scheduling, block_size, num_blocks, max_batch_tokens, max_seqs = False, 16, 64, 64, 8

        sch = real_vllm.build(A)
        self.assertEqual([a for a in vl.SCHEDULER_ATTRS if not hasattr(sch, a)], [])
        self.assertEqual(sorted(vl.VllmAdapter.capacity(None, sch)), sorted(
            ["kv_blocks", "block_size", "max_batch_tokens", "max_scheduled_tokens", "max_requests_per_batch", "graph_sizes",
             "async_scheduling", "chunked_prefill", "prefix_caching", "long_prefill_token_threshold", "policy"]))


if __name__ == "__main__":
    unittest.main()
