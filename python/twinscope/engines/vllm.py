"""The engine adapter for vLLM's V1 engine (`vllm serve`): records each `Scheduler.schedule()` step, names it in NVTX on the thread that launches its kernels, and in a shadow forces the primary's steps (docs/engines.md)."""

import atexit
import os
import re
import time

from . import common

ENGINE = "vllm"
SCHED = "vllm.v1.core.sched.scheduler"
QUEUE = "vllm.v1.core.sched.request_queue"
EXECUTOR = "vllm.v1.executor.uniproc_executor"
CORE = "vllm.v1.engine.core"

# The versions whose every name below was read in their source and driven through tests/engines/test_vllm_real.py
# (docs/engines.md, "vLLM"). Any other version is refused before serving starts.
SUPPORTED = {
    "0.34.0": "v1/core/sched/{scheduler,output,request_queue,async_scheduler}.py, v1/engine/{core,input_processor}.py, "
    "v1/executor/uniproc_executor.py and entrypoints/serve read 2026-12-03; its real Scheduler driven on CPU",
}

# Names of 0.34 this adapter calls or wraps (checked when the scheduler module is imported; one missing disables it).
SCHEDULER_METHODS = ("__init__", "schedule", "add_request", "update_from_output", "_free_request", "_preempt_request", "shutdown")
QUEUE_NAMES = ("create_request_queue", "SchedulingPolicy")
EXECUTOR_METHODS = ("execute_model", "sample_tokens")
# What a Scheduler instance must hold (checked at its construction).
SCHEDULER_ATTRS = (
    "running",
    "waiting",
    "kv_holding_waiting",
    "async_kv_waiting",
    "requests",
    "policy",
    "max_num_scheduled_tokens",
    "block_size",
    "vllm_config",
    "scheduler_config",
    "cache_config",
)
WAITING_QUEUES = ("waiting", "kv_holding_waiting", "async_kv_waiting")
STEP_TAG = "_twinscope_step"  # set on a recorded SchedulerOutput: the step's index in this schedule
WAIT_POLL_S = 0.002

# vLLM's OpenAI server names a request `<kind>-<X-Request-Id>` (chatcmpl-, cmpl-, ...) and its input processor adds
# `-<8 hex of a uuid4>` (v1/engine/input_processor.py, assign_request_id): that suffix differs between two servers.
ID_PREFIXES = ("chatcmpl-", "cmpl-", "embd-", "score-", "rerank-", "classify-", "pool-", "tokn-", "resp_")
RANDOM_SUFFIX = re.compile(r"-[0-9a-f]{8}$")


def client_id(engine_id, randomized=True):
    """The id the client gave (X-Request-Id) from the scheduler's request id: the endpoint's prefix and the random
    suffix taken off, so that the same request has the same id in both servers."""
    rid = str(engine_id)
    if randomized:
        rid = RANDOM_SUFFIX.sub("", rid)
    for p in ID_PREFIXES:
        if rid.startswith(p) and len(rid) > len(p):
            return rid[len(p) :]
    return rid


def _randomized(env=None):
    v = (env if env is not None else os.environ).get("VLLM_DISABLE_REQUEST_ID_RANDOMIZATION", "")
    return v.strip().lower() not in ("1", "true", "yes")


class VllmAdapter(common.AdapterBase):
    """One per process; active in the process whose Scheduler is built first (the EngineCore)."""

    ENGINE = ENGINE
    SUPPORTED = SUPPORTED
    SCHEDULER_NOUN = "a vLLM"
    SCHEDULER_ATTRS = SCHEDULER_ATTRS
    CAPACITY_AT_LEAST = ("kv_blocks", "max_batch_tokens", "max_requests_per_batch")
    CAPACITY_SAME = ("block_size", "prefix_caching", "long_prefill_token_threshold", "policy")
    CAPACITY_FLAGS = "--num-gpu-blocks-override, --block-size, --max-num-batched-tokens, --max-num-seqs"

    def __init__(self, settings, version):
        common.AdapterBase.__init__(self, settings, version)
        self.queue_mod = None
        self._follow_ids = None
        self.wait_since = None  # when the forced step began waiting for its requests
        self.unwritten = {}  # step index -> step doc, written once its output is processed
        self.open_range = None  # the step doc whose NVTX range is open
        self.processing = None  # the step doc whose output update_from_output is processing
        self.randomized = _randomized()
        self.ranged = True  # whether the steps' kernels are launched in this process (uniproc executor)

    # ---- install -------------------------------------------------------------------------------------

    def _first_word(self):
        if self._status_is_the_shims():
            self.status.write()

    def _status_is_the_shims(self):
        """No status yet, or the shim's "no engine imported" (engine ""): the first process that imports vllm says
        it is here; a later one (the EngineCore) leaves the status to the process that owns it."""
        import json

        try:
            with open(self.status.path) as f:
                return not json.load(f).get("engine")
        except (OSError, ValueError):
            return bool(self.status.path) and not os.path.exists(self.status.path)

    def install(self, sched_mod, queue_mod):
        """Wraps 0.34's Scheduler (after vllm.v1.core.sched.scheduler is imported): the class, so that every
        scheduler built from it or its subclasses (AsyncScheduler) is seen."""
        if self.refused:
            return
        cls = getattr(sched_mod, "Scheduler", None)
        missing = [n for n in QUEUE_NAMES if not hasattr(queue_mod, n)]
        if cls is None:
            missing.append("Scheduler")
        else:
            missing += ["Scheduler." + m for m in SCHEDULER_METHODS if m not in cls.__dict__]
        if missing:
            self.disable("vllm %s lacks %s: the adapter is off" % (self.version, ", ".join(missing)))
            return
        self.queue_mod = queue_mod
        for m, how in (
            ("__init__", self.after_init(self.on_scheduler, "Scheduler.__init__",
                                         lambda: not self.refused and self.sched is None)),
            ("schedule", self._wrap_schedule),
            ("add_request", self._wrap_add),
            ("update_from_output", self._wrap_update),
            ("_free_request", self._wrap_free),
            ("shutdown", self._wrap_shutdown),
        ):
            common.wrap(cls, m, how)

    def install_executor(self, mod):
        """NVTX around the uniproc executor's execute_model and sample_tokens: with one worker (vLLM's default for
        one GPU) they run the model on the EngineCore's busy-loop thread, which launches the step's kernels."""
        if self.refused:
            return
        cls = getattr(mod, "UniProcExecutor", None)
        if cls is None or any(m not in cls.__dict__ for m in EXECUTOR_METHODS):
            self.status.append("warnings", "vllm %s's UniProcExecutor is not as expected: steps are not named in NVTX" % self.version)
            return
        common.wrap(cls, "execute_model", self._wrap_execute)
        common.wrap(cls, "sample_tokens", self._wrap_sample)

    def install_core(self, mod):
        """The engine's start-up (profiling run, KV cache sizing, CUDA graph capture) in one `warmup` range."""
        if self.refused:
            return
        cls = getattr(mod, "EngineCore", None)
        if cls is not None and "_initialize_kv_caches" in cls.__dict__:
            common.wrap(cls, "_initialize_kv_caches",
                        self.in_range("warmup vllm engine (profiling, KV cache, CUDA graph capture)",
                                      lambda: not self.refused))

    def on_scheduler(self, sch):
        """A Scheduler was built: this process records (and forces) its steps."""
        if not self.adopt(sch):
            return
        if not getattr(type(sch).schedule, "_twinscope", False):
            self.disable("the scheduler class %s.%s has its own schedule(): the adapter is off"
                         % (type(sch).__module__, type(sch).__qualname__))
            return
        capacity = self.capacity(sch)
        self.status.set(capacity=capacity)
        backend = getattr(sch.vllm_config.parallel_config, "distributed_executor_backend", "uni")
        if backend not in (None, "uni"):
            self.ranged = False
            self.status.append("warnings", "executor %r: the steps' kernels run in worker processes, where this adapter "
                               "opens no range: steps are recorded and forced but not named in NVTX" % backend)
        if capacity["async_scheduling"]:
            # Tagged, not turned off: each SchedulerOutput carries its step; the range is opened around that
            # output's execute_model and sample_tokens, and a step's finished requests are those its own output
            # ended (update_from_output of that output, which async scheduling runs after the next schedule()).
            self.status.append("warnings", "async scheduling is on: each step is named by the output being executed; "
                               "the next step is scheduled before this one's tokens are known")
        self.start(capacity)
        if self.forcing:
            self.check_capacity(capacity, self.follow_header.get("capacity") or {})
            if sch.policy != self.queue_mod.SchedulingPolicy.FCFS:
                self.stop_forcing("the scheduling policy is %s: only fcfs is forced" % getattr(sch.policy, "value", sch.policy))
        self.status.write()
        atexit.register(self.close, "exit")
        try:  # a forked EngineCore ends through multiprocessing's exit, which runs no atexit handler
            import multiprocessing.util as mpu

            mpu.Finalize(self, VllmAdapter.close, args=(self, "exit"), exitpriority=10)
        except Exception:
            pass

    def capacity(self, sch):
        sc, cc, vc = sch.scheduler_config, sch.cache_config, sch.vllm_config
        comp = getattr(vc, "compilation_config", None)
        sizes = getattr(comp, "cudagraph_capture_sizes", None) or []
        return {
            "kv_blocks": int(cc.num_gpu_blocks or 0),
            "block_size": int(sch.block_size),
            "max_batch_tokens": int(sc.max_num_batched_tokens),
            "max_scheduled_tokens": int(sch.max_num_scheduled_tokens),
            "max_requests_per_batch": int(sc.max_num_seqs),
            "graph_sizes": sorted(int(x) for x in sizes),
            "async_scheduling": bool(sc.async_scheduling),
            "chunked_prefill": bool(sc.enable_chunked_prefill),
            "prefix_caching": bool(cc.enable_prefix_caching),
            "long_prefill_token_threshold": int(sc.long_prefill_token_threshold or 0),
            "policy": str(getattr(sch.policy, "value", sch.policy)),
        }

    def _stop_message(self, why):
        self.status.set(mode="force", message="forced %d of the primary's %d steps, then stopped forcing: %s; the "
                        "engine batched on its own from there" % (self.status.doc["forced_steps"], len(self.follow), why))
        return "stopped forcing the primary's steps at step %d: %s" % (self.next_forced, why)

    # ---- the scheduler ---------------------------------------------------------------------------------

    def _wrap_schedule(self, orig):
        adapter = self

        def schedule(sch, *a, **kw):
            if not (adapter.active and sch is adapter.sched):
                return orig(sch, *a, **kw)
            out = None
            beyond = adapter.forcing and adapter.next_forced >= len(adapter.follow)
            if adapter.forcing:
                try:
                    out = adapter.force(sch, orig, a, kw)
                except Exception as e:
                    adapter.fail("forcing a step", e)
            if out is None:
                out = orig(sch, *a, **kw)
            if adapter.active:
                try:
                    adapter.record(sch, out)
                    if beyond and out.num_scheduled_tokens:
                        adapter.stop_forcing("the engine scheduled a step past the primary's last step")
                except Exception as e:
                    adapter.fail("recording a step", e)
            return out

        schedule._twinscope = True
        return schedule

    def follow_ids(self):
        if self._follow_ids is None:
            self._follow_ids = set(e["id"] for s in self.follow for e in s["batch"])
        return self._follow_ids

    def _present(self, sch):
        """client id -> the scheduler's unfinished Request."""
        have = {}
        for rid, r in sch.requests.items():
            if not r.is_finished():
                have[client_id(rid, self.randomized)] = r
        return have

    def force(self, sch, orig, a, kw):
        """The primary's next step through the engine's own schedule(), with only that step's requests in view, in
        its order, and a token budget of its tokens; None: not forced (the engine schedules on its own)."""
        have = self._present(sch)
        if self.next_forced >= len(self.follow):
            named = self.follow_ids()
            if any(i not in named for i in have):  # requests the primary's schedule has no step for
                self.stop_forcing("the primary's schedule has no step %d" % self.next_forced)
            return None
        want = self.follow[self.next_forced]
        missing = [e["id"] for e in want["batch"] if e["id"] not in have]
        if missing:
            now = time.monotonic()
            if self.wait_since is None:
                self.wait_since = now
            if now - self.wait_since > self.settings.step_timeout_s:
                self.status.add("timeouts")
                self.stop_forcing("step %d waited %g s (TWINSCOPE_FOLLOW_STEP_TIMEOUT_S) for request%s %s, which did not "
                                  "arrive" % (want["step"], self.settings.step_timeout_s, "s" if len(missing) > 1 else "",
                                              ", ".join(missing[:5]) + (" ..." if len(missing) > 5 else "")))
                return None
            time.sleep(WAIT_POLL_S)
            return self._restricted(sch, orig, a, kw, [], 0)  # an empty step: the busy loop takes new requests
        self.wait_since = None
        for i in want.get("preempted") or []:  # a preemption the primary made: the same request, before the step
            r = have.get(i)
            if r is not None and r in sch.running:
                sch.running.remove(r)
                sch._preempt_request(r, time.monotonic())
        reqs = [have[e["id"]] for e in want["batch"]]
        out = self._restricted(sch, orig, a, kw, reqs, sum(e["tokens"] for e in want["batch"]))
        self.next_forced += 1
        self.status.add("forced_steps")
        got = [(client_id(rid, self.randomized), int(n)) for rid, n in out.num_scheduled_tokens.items()]
        wanted = [(e["id"], e["tokens"]) for e in want["batch"]]
        if got != wanted:
            self.status.append("errors", "step %d: forced %s, the engine scheduled %s" % (want["step"], wanted[:8], got[:8]))
            self.stop_forcing("step %d could not be run as the primary ran it (see errors)" % want["step"])
        return out

    def _restricted(self, sch, orig, a, kw, reqs, budget):
        """Runs the engine's schedule() with only `reqs` running or waiting (in that order) and `budget` tokens; the
        other requests are put back where they were, in their order, after it."""
        keep = set(id(r) for r in reqs)
        order = {id(r): k for k, r in enumerate(reqs)}
        saved_running = list(sch.running)
        saved_queues = {q: list(getattr(sch, q)) for q in WAITING_QUEUES}
        saved_budget = sch.max_num_scheduled_tokens
        mk = self.queue_mod.create_request_queue
        sch.running = sorted((r for r in saved_running if id(r) in keep), key=lambda r: order[id(r)])
        for q in WAITING_QUEUES:
            tmp = mk(sch.policy)
            for r in sorted((r for r in saved_queues[q] if id(r) in keep), key=lambda r: order[id(r)]):
                tmp.add_request(r)
            setattr(sch, q, tmp)
        sch.max_num_scheduled_tokens = budget
        try:
            return orig(sch, *a, **kw)
        finally:
            sch.max_num_scheduled_tokens = saved_budget
            after = list(sch.running)
            in_after = set(id(r) for r in after)
            was = set(id(r) for r in saved_running)
            sch.running = [r for r in saved_running if id(r) in in_after or id(r) not in keep] + [
                r for r in after if id(r) not in was
            ]
            for q in WAITING_QUEUES:
                now = list(getattr(sch, q))
                merged = mk(sch.policy)
                for r in now + [r for r in saved_queues[q] if id(r) not in keep]:
                    merged.add_request(r)
                setattr(sch, q, merged)

    def record(self, sch, out):
        n = out.num_scheduled_tokens
        if not n:
            return
        with self.lock:
            computed = {d.req_id: int(d.num_computed_tokens) for d in out.scheduled_new_reqs}
            cached = out.scheduled_cached_reqs
            computed.update(zip(cached.req_ids, (int(x) for x in cached.num_computed_tokens)))
            batch, first = [], []
            for rid, tokens in n.items():
                req = sch.requests.get(rid)
                cid = client_id(rid, self.randomized)
                e = {"id": cid, "tokens": int(tokens), "offset": computed.get(rid, 0),
                     "_prompt": int(req.num_prompt_tokens) if req is not None else 0}
                batch.append(e)
                r = self.requests.get(cid)
                if r is None or r.get("done"):
                    r = self.requests[cid] = self._new_request(rid, req)
                r["steps"].append(self.step_index)
                if r["prefill_step"] < 0:
                    r["prefill_step"] = self.step_index
                    r["first_step_us"] = common.now_us()
                if e["offset"] + e["tokens"] >= e["_prompt"] and "first_token_us" not in r:
                    first.append(cid)
            kind = common.step_kind(batch)
            for e in batch:
                del e["_prompt"]
            preempted = sorted(client_id(i, self.randomized) for i in (out.preempted_req_ids or ()))
            for i in preempted:
                r = self.requests.get(i)
                if r is not None:
                    r["preempted"] = r.get("preempted", 0) + 1
            doc = {"type": "step", "step": self.step_index, "kind": kind, "batch": batch, "preempted": preempted,
                   "finished": [], "cancelled": [], "name": common.step_name(kind, self.step_index, batch),
                   "_first": first, "_at": common.now_us()}
            for k, i in self.loose:
                doc[k].append(i)
            self.loose = []
            self.unwritten[self.step_index] = doc
            setattr(out, STEP_TAG, self.step_index)
            self.step_index += 1
            self.status.set(steps=self.step_index)

    def _write_steps(self, all_=False):
        """Writes, in order, the steps whose outputs were processed (every one left, at the end)."""
        while self.unwritten:
            k = min(self.unwritten)
            doc = self.unwritten[k]
            if not (all_ or doc.get("_done")):
                break
            del self.unwritten[k]
            for key in ("_first", "_at", "_done"):
                doc.pop(key, None)
            doc.setdefault("start_us", None)
            doc.setdefault("dur_us", None)
            self.schedule.step(doc)

    def _wrap_update(self, orig):
        adapter = self

        def update_from_output(sch, scheduler_output, *a, **kw):
            doc = None
            if adapter.active and sch is adapter.sched:
                try:
                    adapter.range_ends()  # an output that needed no sample_tokens call
                    k = getattr(scheduler_output, STEP_TAG, None)
                    doc = adapter.unwritten.get(k) if k is not None else None
                    adapter.processing = doc
                except Exception as e:
                    adapter.fail("noting a step's output", e)
            try:
                return orig(sch, scheduler_output, *a, **kw)
            finally:
                adapter.processing = None
                if doc is not None and adapter.active:
                    try:
                        with adapter.lock:
                            doc["_done"] = True
                            if doc.get("start_us") is None:  # no range (worker processes): scheduled to processed
                                doc["start_us"] = doc["_at"] - adapter.t0
                                doc["dur_us"] = common.now_us() - doc["_at"]
                            for cid in doc.get("_first", ()):
                                r = adapter.requests.get(cid)
                                if r is not None:
                                    r.setdefault("first_token_us", common.now_us() - r["arrival_us"])
                            adapter._write_steps()
                        adapter.status.maybe_write()
                    except Exception as e:
                        adapter.fail("writing a step", e)

        return update_from_output

    # ---- requests: arrival, end (the request trace) ---------------------------------------------------

    def _new_request(self, rid, req):
        return {"engine_id": str(rid), "arrival_us": common.now_us(), "arrival_unix_us": int(time.time() * 1e6),
                "prompt_tokens": int(getattr(req, "num_prompt_tokens", 0) or 0), "max_tokens": getattr(req, "max_tokens", None),
                "steps": [], "prefill_step": -1}

    def _wrap_add(self, orig):
        adapter = self

        def add_request(sch, request, *a, **kw):
            result = orig(sch, request, *a, **kw)
            if adapter.active and sch is adapter.sched:
                try:
                    cid = client_id(request.request_id, adapter.randomized)
                    with adapter.lock:
                        r = adapter.requests.get(cid)
                        if r is None or r.get("done"):
                            adapter.requests[cid] = adapter._new_request(request.request_id, request)
                        elif r["engine_id"] != str(request.request_id):
                            adapter.status.append("warnings", "two requests in flight have the client id %s (%s, %s): "
                                                  "steps name them alike" % (cid, r["engine_id"], request.request_id))
                except Exception as e:
                    adapter.fail("noting a request's arrival", e)
            return result

        return add_request

    def _wrap_free(self, orig):
        adapter = self

        def _free_request(sch, request, *a, **kw):
            if adapter.active and sch is adapter.sched:
                try:
                    adapter.request_ends(request)
                except Exception as e:
                    adapter.fail("noting a finished request", e)
            return orig(sch, request, *a, **kw)

        return _free_request

    def request_ends(self, req):
        cid = client_id(req.request_id, self.randomized)
        with self.lock:
            r = self.requests.get(cid)
            if r is None or r.get("done"):
                return
            r["done"] = True
            status = getattr(getattr(req, "status", None), "name", "")
            reason = req.get_finished_reason()  # FinishReason: str() is "stop", "length", "abort", ...
            reason = str(reason) if reason is not None else ""
            doc = {"id": cid, "id_generated": False, "engine_id": r["engine_id"]}
            if status == "FINISHED_ABORTED":
                doc.update(status=499, finish_reason="cancelled")
                kind = "cancelled"
            elif status == "FINISHED_ERROR":
                doc.update(status=500, error="the engine failed the request", finish_reason=reason or "error")
                kind = "finished"
            else:
                doc.update(status=200, finish_reason=reason or status.lower())
                kind = "finished"
            where = self.processing
            if where is not None:
                where[kind].append(cid)
            else:
                self.loose.append((kind, cid))
            self._trace_line(doc, r, int(req.num_output_tokens))

    # ---- NVTX: the executor (the thread that launches the step's kernels) --------------------------------

    def range_begins(self, scheduler_output):
        self.range_ends()
        k = getattr(scheduler_output, STEP_TAG, None)
        doc = self.unwritten.get(k) if k is not None else None
        if doc is None or "start_us" in doc:
            return
        doc["start_us"] = common.now_us() - self.t0
        self.ensure_nvtx().push(doc["name"])
        self.open_range = doc

    def range_ends(self):
        doc, self.open_range = self.open_range, None
        if doc is not None:
            self.nvtx.pop()
            doc["dur_us"] = common.now_us() - self.t0 - doc["start_us"]

    def _wrap_execute(self, orig):
        adapter = self

        def execute_model(ex, scheduler_output, *a, **kw):
            if adapter.active and adapter.ranged:
                try:
                    adapter.range_begins(scheduler_output)
                except Exception as e:
                    adapter.fail("opening a step's NVTX range", e)
            return orig(ex, scheduler_output, *a, **kw)

        return execute_model

    def _wrap_sample(self, orig):
        adapter = self

        def sample_tokens(ex, *a, **kw):
            try:
                return orig(ex, *a, **kw)
            finally:
                if adapter.active and adapter.open_range is not None:
                    try:
                        adapter.range_ends()
                    except Exception as e:
                        adapter.fail("closing a step's NVTX range", e)

        return sample_tokens

    # ---- the end ---------------------------------------------------------------------------------------

    def _wrap_shutdown(self, orig):
        adapter = self

        def shutdown(sch, *a, **kw):
            try:
                return orig(sch, *a, **kw)
            finally:
                if sch is adapter.sched:
                    adapter.close("shutdown")

        return shutdown

    def _flush_steps(self, at_end):
        if at_end and self.open_range is not None:
            self.range_ends()
        self._write_steps(all_=True)
