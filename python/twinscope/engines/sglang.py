"""The engine adapter for SGLang (`python -m sglang.launch_server`): records each batch the Scheduler runs, names it in NVTX around its launch, and in a shadow forces the primary's batches; in the HTTP server process it makes the client's X-Request-Id the request's rid (docs/engines.md)."""

import atexit
import collections
import time
import uuid

from . import common
from .common import say

ENGINE = "sglang"
SCHED = "sglang.srt.managers.scheduler"
TOKENIZER = "sglang.srt.managers.tokenizer_manager"

# The versions whose every name below was read in their source and driven through tests/engines/test_sglang_real.py
# (docs/engines.md, "SGLang"). Any other version is refused before serving starts.
SUPPORTED = {
    "0.5.23": "srt/managers/{scheduler,schedule_batch,schedule_policy,io_struct,tokenizer_manager}.py and "
    "srt/entrypoints/{http_server,openai/serving_chat}.py read 2026-12-03; its real Scheduler driven on CPU",
}

# Names of 0.5.23 this adapter wraps (checked when the scheduler module is imported; one missing disables it).
SCHEDULER_METHODS = ("__init__", "get_next_batch_to_run", "run_batch", "process_batch_result", "_add_request_to_queue")
# What a Scheduler instance must hold (checked at its construction).
SCHEDULER_ATTRS = (
    "waiting_queue",
    "running_batch",
    "chunked_req",
    "chunked_prefill_size",
    "max_total_num_tokens",
    "max_prefill_tokens",
    "max_running_requests",
    "page_size",
    "enable_overlap",
    "policy",
    "server_args",
    "ingest_requests",
)
WAIT_POLL_S = 0.002
# Requests that reach the scheduler without a client id (the server's own warmup, /health_generate): named
# `internal-<k>` in the schedule, k counting them in arrival order, the same in both twins.
INTERNAL_PREFIX = "twinscope-internal-"
HEALTH_PREFIX = "HEALTH_CHECK"


# ---- the HTTP server process: the client's X-Request-Id as the rid ------------------------------------


def install_tokenizer(mod, adapter=None):
    """Wraps TokenizerManager.generate_request: a request whose body names no rid gets the client's X-Request-Id
    (the mirror sets it), so both twins' schedulers see the same ids; one without either gets a marked id."""
    cls = getattr(mod, "TokenizerManager", None)
    if cls is None or "generate_request" not in cls.__dict__:
        if adapter is not None:
            adapter.status.append("warnings", "sglang's TokenizerManager.generate_request is not as expected: "
                                  "requests keep SGLang's own ids")
        return

    def how(orig):
        def generate_request(tm, obj, request=None, *a, **kw):
            try:
                if getattr(obj, "rid", None) is None:
                    cid = None
                    if request is not None:
                        cid = request.headers.get("x-request-id")
                    obj.rid = cid if cid else INTERNAL_PREFIX + uuid.uuid4().hex
            except Exception as e:  # the request goes on with SGLang's own id
                say("taking X-Request-Id as the rid failed (%s: %s)" % (type(e).__name__, e))
            return orig(tm, obj, request, *a, **kw)

        return generate_request

    common.wrap(cls, "generate_request", how)
    req = getattr(mod, "GenerateReqInput", None)
    if req is None or "regenerate_rid" not in req.__dict__:
        if adapter is not None:
            adapter.status.append("warnings", "sglang's GenerateReqInput.regenerate_rid is not as expected: the "
                                  "samples of a request with n > 1 keep SGLang's random ids, which the twins do not share")
        return
    common.wrap(req, "regenerate_rid", _derive_rid)


# How many ids were derived from each rid (the newest DERIVED_KEEP rids): a request with n > 1 is sent to the
# scheduler as its prompt's prefix (max_new_tokens 0) then n samples, each under a new rid that 0.5.23 draws at random
# (GenerateReqInput.regenerate_rid, from TokenizerManager's parallel sampling); here they are <rid>.0 (the prefix),
# <rid>.1 ... <rid>.n, the same in both twins.
DERIVED_KEEP = 4096
_derived = collections.OrderedDict()


def _derive_rid(orig):
    def regenerate_rid(obj):
        try:
            base = obj.rid
            if isinstance(base, str):
                k = _derived.pop(base, 0)
                _derived[base] = k + 1
                while len(_derived) > DERIVED_KEEP:
                    _derived.popitem(last=False)
                obj.rid = "%s.%d" % (base, k)
                return obj.rid
        except Exception as e:  # the sample goes on with SGLang's own id
            say("deriving the rid of a parallel sample failed (%s: %s)" % (type(e).__name__, e))
        return orig(obj)

    return regenerate_rid


# ---- the scheduler process --------------------------------------------------------------------------------


class SglangAdapter(common.AdapterBase):
    """One per process; active in the process whose Scheduler is built first (the scheduler process)."""

    ENGINE = ENGINE
    SUPPORTED = SUPPORTED
    SCHEDULER_NOUN = "an SGLang"
    SCHEDULER_ATTRS = SCHEDULER_ATTRS
    CAPACITY_AT_LEAST = ("kv_tokens", "max_prefill_tokens", "max_requests_per_batch")
    CAPACITY_SAME = ("page_size", "chunked_prefill_size", "mixed_chunk", "radix_cache", "policy")
    CAPACITY_FLAGS = "--max-total-tokens, --page-size, --chunked-prefill-size, --max-prefill-tokens, --max-running-requests"

    def __init__(self, settings, version):
        common.AdapterBase.__init__(self, settings, version)
        self.to_run = collections.deque()  # recorded steps whose batch has not been launched
        self.to_process = collections.deque()  # launched steps whose result has not been processed
        self.retracted = []  # ids retracted since the last recorded step
        self.ids = {}  # the engine's rid -> the id the schedule names
        self.internal = 0

    # ---- install ---------------------------------------------------------------------------------------

    def install(self, sched_mod):
        if self.refused:
            return
        cls = getattr(sched_mod, "Scheduler", None)
        missing = ["Scheduler"] if cls is None else ["Scheduler." + m for m in SCHEDULER_METHODS if m not in cls.__dict__]
        if missing:
            self.disable("sglang %s lacks %s: the adapter is off" % (self.version, ", ".join(missing)))
            return
        for m, how in (
            ("__init__", self.after_init(self.on_scheduler, "installing on the scheduler")),
            ("get_next_batch_to_run", self._wrap_next),
            ("run_batch", self._wrap_run),
            ("process_batch_result", self._wrap_result),
            ("_add_request_to_queue", self._wrap_add),
        ):
            common.wrap(cls, m, how)

    def on_scheduler(self, sch):
        """A Scheduler was built: this process records (and forces) its batches."""
        if not self.adopt(sch):
            return
        capacity = self.capacity(sch)
        self.status.set(capacity=capacity)
        if capacity["overlap_schedule"]:
            # Tagged, not turned off: each recorded batch is named around its own run_batch (the launch); its
            # result is processed after the next batch is launched, so a finish shows one step late, in both twins.
            self.status.append("warnings", "overlap scheduling is on: each step is named around the launch of its own "
                               "batch; finished requests show one step late (the same in both twins)")
        self.start(capacity)
        if self.forcing:
            self.check_capacity(capacity, self.follow_header.get("capacity") or {})
            why = self.unforceable(sch, capacity)
            if why:
                self.stop_forcing(why)
        self.status.write()
        atexit.register(self.close, "exit")

    def capacity(self, sch):
        sa = sch.server_args
        graph = getattr(sa, "cuda_graph_bs_decode", None) or getattr(sa, "cuda_graph_bs", None) or []
        return {
            "kv_tokens": int(sch.max_total_num_tokens),
            "page_size": int(sch.page_size),
            "chunked_prefill_size": int(sch.chunked_prefill_size or 0),
            "max_prefill_tokens": int(sch.max_prefill_tokens),
            "max_requests_per_batch": int(sch.max_running_requests),
            "graph_sizes": sorted(int(x) for x in graph),
            "cuda_graph": not bool(getattr(sa, "disable_cuda_graph", False)),
            "overlap_schedule": bool(sch.enable_overlap),
            "mixed_chunk": bool(getattr(sa, "enable_mixed_chunk", False)),
            "radix_cache": not bool(getattr(sa, "disable_radix_cache", False)),
            "policy": str(getattr(sa, "schedule_policy", "")),
            "continuous_decode_steps": int(getattr(sa, "num_continuous_decode_steps", 1) or 1),
            "tp_size": int(getattr(sa, "tp_size", 1) or 1),
            "dp_size": int(getattr(sa, "dp_size", 1) or 1),
            "pp_size": int(getattr(sa, "pp_size", 1) or 1),
        }

    def unforceable(self, sch, capacity):
        if capacity["tp_size"] > 1 or capacity["dp_size"] > 1 or capacity["pp_size"] > 1:
            return "tensor, data or pipeline parallelism (tp %d, dp %d, pp %d): the wait would desynchronise the ranks" % (
                capacity["tp_size"], capacity["dp_size"], capacity["pp_size"])
        if capacity["continuous_decode_steps"] != 1:
            return "--num-continuous-decode-steps %d: only one decode step per scheduling round is forced" % capacity[
                "continuous_decode_steps"]
        spec = getattr(sch, "spec_algorithm", None)
        if spec is not None and not spec.is_none():
            return "speculative decoding (%s): its draft and verify steps are not forced" % getattr(spec, "name", spec)
        if getattr(sch, "enable_priority_scheduling", False):
            return "priority scheduling (it preempts running requests on its own): not forced"
        return ""

    def _stop_message(self, why):
        msg = "stopped forcing at step %d of %d: %s; the engine batches on its own from here" % (
            self.next_forced, len(self.follow), why)
        self.status.set(message=msg)
        self.status.append("warnings", msg)
        return msg

    # ---- ids -------------------------------------------------------------------------------------------

    def id_of(self, req):
        rid = str(req.rid)
        cid = self.ids.get(rid)
        if cid is None:
            if rid.startswith(INTERNAL_PREFIX) or rid.startswith(HEALTH_PREFIX):
                cid = "internal-%d" % self.internal
                self.internal += 1
            else:
                cid = rid
            self.ids[rid] = cid
        return cid

    # ---- recording -------------------------------------------------------------------------------------

    def _wrap_next(self, orig):
        adapter = self

        def get_next_batch_to_run(sch, *a, **kw):
            if not (adapter.active and sch is adapter.sched):
                return orig(sch, *a, **kw)
            forced = None
            beyond = adapter.forcing and adapter.next_forced >= len(adapter.follow)
            if adapter.forcing and not beyond:
                try:
                    forced = adapter.prepare_forced(sch, *a, **kw)
                except Exception as e:
                    adapter.fail("preparing a forced step", e)
            try:
                plan = orig(sch, *a, **kw)
            finally:
                if forced is not None:
                    try:
                        adapter.restore_forced(sch, forced)
                    except Exception as e:
                        adapter.fail("restoring the scheduler after a forced step", e)
            if adapter.active:
                try:
                    doc = adapter.record(sch, getattr(plan, "batch_to_run", None))
                    if forced is not None and adapter.forcing:
                        adapter.check_forced(forced, doc)
                    elif beyond and doc is not None and adapter.forcing:
                        adapter.stop_forcing("the engine scheduled a step past the primary's schedule (a shadow "
                                             "given more requests than the primary served)")
                    adapter.status.maybe_write()
                except Exception as e:
                    adapter.fail("recording a step", e)
            return plan

        return get_next_batch_to_run

    def record(self, sch, batch):
        if batch is None or not getattr(batch, "reqs", None):
            return None
        fm = batch.forward_mode
        if fm.is_decode():
            kind = "decode"
            seq = batch.seq_lens_cpu.tolist()  # after prepare_for_decode: the lengths with this step's token
            batch_doc = [{"id": self.id_of(r), "tokens": 1, "offset": int(seq[i]) - 1} for i, r in enumerate(batch.reqs)]
        elif fm.is_extend():
            kind = "mixed" if fm.is_mixed() else "prefill"
            batch_doc = [{"id": self.id_of(r), "tokens": int(batch.extend_lens[i]), "offset": int(batch.prefix_lens[i])}
                         for i, r in enumerate(batch.reqs)]
        else:  # idle (data parallelism) and other modes: not a step of this engine's own
            return None
        with self.lock:
            for e, r in zip(batch_doc, batch.reqs):
                t = self.requests.get(e["id"])
                if t is None or t.get("done"):
                    t = self.requests[e["id"]] = self._new_request(r)
                t["steps"].append(self.step_index)
                if t["prefill_step"] < 0:
                    t["prefill_step"] = self.step_index
                    t["first_step_us"] = common.now_us()
            preempted, self.retracted = sorted(set(self.retracted)), []
            for i in preempted:
                t = self.requests.get(i)
                if t is not None:
                    t["preempted"] = t.get("preempted", 0) + 1
            doc = {"type": "step", "step": self.step_index, "kind": kind, "batch": batch_doc, "preempted": preempted,
                   "finished": [], "cancelled": [], "name": common.step_name(kind, self.step_index, batch_doc),
                   "_batch": batch}
            for k, i in self.loose:
                doc[k].append(i)
            self.loose = []
            self.to_run.append(doc)
            self.step_index += 1
            self.status.set(steps=self.step_index)
        return doc

    def _wrap_add(self, orig):
        adapter = self

        def _add_request_to_queue(sch, req, *a, **kw):
            result = orig(sch, req, *a, **kw)
            if adapter.active and sch is adapter.sched:
                try:
                    retracted = kw.get("is_retracted", a[0] if a else False)
                    cid = adapter.id_of(req)
                    with adapter.lock:
                        if retracted:
                            adapter.retracted.append(cid)
                        else:
                            t = adapter.requests.get(cid)
                            if t is None or t.get("done"):
                                adapter.requests[cid] = adapter._new_request(req)
                except Exception as e:
                    adapter.fail("noting a request's arrival", e)
            return result

        return _add_request_to_queue

    def _new_request(self, req):
        sp = getattr(req, "sampling_params", None)
        return {"engine_id": str(req.rid), "arrival_us": common.now_us(), "arrival_unix_us": int(time.time() * 1e6),
                "prompt_tokens": len(req.origin_input_ids), "max_tokens": getattr(sp, "max_new_tokens", None),
                "steps": [], "prefill_step": -1}

    # ---- NVTX around the launch; the result ------------------------------------------------------------

    def _wrap_run(self, orig):
        adapter = self

        def run_batch(sch, batch, *a, **kw):
            doc = None
            if adapter.active and sch is adapter.sched:
                try:
                    with adapter.lock:
                        while adapter.to_run and adapter.to_run[0]["_batch"] is not batch:
                            adapter.to_run.popleft()  # a recorded batch that was never launched
                        if adapter.to_run:
                            doc = adapter.to_run.popleft()
                            adapter.to_process.append(doc)
                    if doc is not None:
                        doc["start_us"] = common.now_us() - adapter.t0
                        adapter.ensure_nvtx().push(doc["name"])
                except Exception as e:
                    adapter.fail("opening a step's NVTX range", e)
                    doc = None
            try:
                return orig(sch, batch, *a, **kw)
            finally:
                if doc is not None:
                    try:
                        adapter.nvtx.pop()
                        doc["dur_us"] = common.now_us() - adapter.t0 - doc["start_us"]
                    except Exception as e:
                        adapter.fail("closing a step's NVTX range", e)

        return run_batch

    def _wrap_result(self, orig):
        adapter = self

        def process_batch_result(sch, batch, *a, **kw):
            try:
                return orig(sch, batch, *a, **kw)
            finally:
                if adapter.active and sch is adapter.sched:
                    try:
                        adapter.on_result(batch)
                    except Exception as e:
                        adapter.fail("writing a step", e)

        return process_batch_result

    def on_result(self, batch):
        """The result of the oldest launched step was processed: its finished requests, then its line."""
        with self.lock:
            doc = self.to_process.popleft() if self.to_process else None
            for r in getattr(batch, "reqs", None) or ():
                if r.finished():
                    self.request_ends(r, doc)
            if doc is not None:
                self._write(doc)
        self.status.maybe_write()

    def _write(self, doc):
        doc = {k: v for k, v in doc.items() if not k.startswith("_")}
        doc.setdefault("start_us", None)
        doc.setdefault("dur_us", None)
        self.schedule.step(doc)

    def request_ends(self, req, doc):
        cid = self.id_of(req)
        t = self.requests.get(cid)
        if t is None or t.get("done"):
            return
        t["done"] = True
        fr = getattr(req, "finished_reason", None)
        kind = "finished"
        try:
            reason = (fr.to_json() or {}).get("type", "") if fr is not None else ""
        except Exception:
            reason = ""
        line = {"id": cid, "id_generated": self._generated_id(cid), "engine_id": t["engine_id"]}
        if reason == "abort":
            line.update(status=499, finish_reason="cancelled")
            kind = "cancelled"
        else:
            line.update(status=200, finish_reason=reason or "length")
        if doc is not None:
            doc[kind].append(cid)
        else:
            self.loose.append((kind, cid))
        self._trace_line(line, t, len(req.output_ids))

    # ---- forcing (the shadow) --------------------------------------------------------------------------

    def present(self, sch, running_batch, last_batch):
        """id -> Req of every request the scheduler holds: waiting, running, in the last batch, the chunked one."""
        out = {}
        for r in list(sch.waiting_queue) + list(getattr(running_batch, "reqs", None) or ()) + list(
                getattr(last_batch, "reqs", None) or ()):
            out.setdefault(self.id_of(r), r)
        if sch.chunked_req is not None:
            out.setdefault(self.id_of(sch.chunked_req), sch.chunked_req)
        return out

    def prepare_forced(self, sch, running_batch=None, last_batch=None, *a, **kw):
        """Before the engine builds its next batch: wait for step N's requests, then leave in the waiting queue only
        those step N admits, in the primary's order, with a chunk budget of step N's tokens."""
        running_batch = kw.get("running_batch", running_batch)
        last_batch = kw.get("last_batch", last_batch)
        live = [r for r in list(getattr(running_batch, "reqs", None) or ()) + list(getattr(last_batch, "reqs", None) or ())
                if not r.finished()]
        if not (sch.waiting_queue or live or sch.chunked_req is not None):
            return None  # nothing to run: the engine idles, nothing is waited for
        step = self.follow[self.next_forced]
        want = [e["id"] for e in step["batch"]]
        since = time.monotonic()
        while True:
            have = self.present(sch, running_batch, last_batch)
            missing = [i for i in want if i not in have]
            if not missing:
                break
            if time.monotonic() - since > self.settings.step_timeout_s or getattr(sch, "gracefully_exit", False):
                self.status.add("timeouts")
                self.stop_forcing("step %d's requests %s had not arrived after %g s (TWINSCOPE_FOLLOW_STEP_TIMEOUT_S)"
                                  % (self.next_forced, ", ".join(missing[:8]), self.settings.step_timeout_s))
                return None
            time.sleep(WAIT_POLL_S)
            sch.ingest_requests()
        saved = {"waiting": list(sch.waiting_queue), "chunk": sch.chunked_prefill_size, "step": step,
                 "policy": sch.policy}
        order = {i: k for k, i in enumerate(want)}
        admit = [r for r in saved["waiting"] if self.id_of(r) in order]
        admit.sort(key=lambda r: order[self.id_of(r)])
        saved["admitted"] = set(id(r) for r in admit)
        if step.get("kind") == "decode":
            sch.waiting_queue = []
        else:
            sch.waiting_queue = admit
            sch.chunked_prefill_size = sum(int(e["tokens"]) for e in step["batch"])
            sch.policy = _KeepOrder(saved["policy"])  # the waiting queue stays in the primary's order
        return saved

    def restore_forced(self, sch, saved):
        sch.chunked_prefill_size = saved["chunk"]
        sch.policy = saved["policy"]
        now = list(sch.waiting_queue)
        in_now = set(id(r) for r in now)
        was = set(id(r) for r in saved["waiting"])
        # the requests the forced call did not see, back where they were; those it added (retracted) after them
        sch.waiting_queue = [r for r in saved["waiting"] if id(r) in in_now or id(r) not in saved["admitted"]] + [
            r for r in now if id(r) not in was]

    def check_forced(self, saved, doc):
        step = saved["step"]
        k = self.next_forced
        self.next_forced += 1
        want = [(e["id"], e["tokens"], e.get("offset")) for e in step["batch"]]
        got = [(e["id"], e["tokens"], e["offset"]) for e in doc["batch"]] if doc else []
        ok = doc is not None and got == want and doc["kind"] == step.get("kind") and \
            doc["preempted"] == sorted(step.get("preempted") or [])
        if ok:
            self.status.add("forced_steps")
            return
        what = "no batch" if doc is None else "%s %s (preempted %s)" % (doc["kind"], got, doc["preempted"])
        self.status.append("errors", "step %d came out as %s, not the primary's %s %s (preempted %s)" % (
            k, what, step.get("kind"), want, step.get("preempted")))
        self.stop_forcing("step %d did not come out as the primary's" % k)

    # ---- the end ---------------------------------------------------------------------------------------

    def _flush_steps(self, at_end):
        if at_end:  # not when turned off: the schedule ends without the steps not written yet
            for doc in list(self.to_process) + list(self.to_run):
                self._write(doc)
            self.to_process.clear()
            self.to_run.clear()

    def _generated_id(self, cid):
        return cid.startswith("internal-")


class _KeepOrder:
    """The scheduler's policy for one forced call, its calc_priority leaving the waiting queue as it is."""

    def __init__(self, inner):
        self._inner = inner

    def calc_priority(self, *a, **kw):
        return None

    def __getattr__(self, name):
        return getattr(self._inner, name)

