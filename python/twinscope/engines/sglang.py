"""The engine adapter for SGLang (`python -m sglang.launch_server`): records each batch the Scheduler runs, names it in NVTX around its launch, and in a shadow forces the primary's batches; in the HTTP server process it makes the client's X-Request-Id the request's rid (docs/engines.md)."""

import atexit
import collections
import os
import threading
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


def known_versions():
    return ", ".join(sorted(SUPPORTED))


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

    _wrap(cls, "generate_request", how)


# ---- the scheduler process --------------------------------------------------------------------------------


class SglangAdapter:
    """One per process; active in the process whose Scheduler is built first (the scheduler process)."""

    def __init__(self, settings, version):
        self.settings = settings
        self.version = version
        self.status = common.Status(settings.status_path, ENGINE, version)
        self.active = False
        self.refused = False
        self.forcing = False
        self.sched = None
        self.lock = threading.RLock()
        self.t0 = common.now_us()
        self.schedule = None
        self.trace = None
        self.nvtx = None
        self.follow, self.follow_header = [], None
        self.next_forced = 0
        self.step_index = 0
        self.to_run = collections.deque()  # recorded steps whose batch has not been launched
        self.to_process = collections.deque()  # launched steps whose result has not been processed
        self.retracted = []  # ids retracted since the last recorded step
        self.loose = []  # (kind, id) of requests that ended outside a processed batch
        self.requests = {}  # id -> what the request trace needs
        self.ids = {}  # the engine's rid -> the id the schedule names
        self.internal = 0
        self.ended = False
        self.lock_path = self.lock_fd = None
        for b in settings.bad:
            self.status.append("warnings", b)

    # ---- install ---------------------------------------------------------------------------------------

    def check_version(self):
        """At `import sglang`: an unknown version is refused here, before the server serves."""
        if self.version not in SUPPORTED:
            self.refused = True
            msg = "sglang %s is not one twinscope's adapter knows (known: %s): batches will not be forced" % (
                self.version,
                known_versions(),
            )
            self.status.set(mode="disabled", supported=False, message=msg)
            if self.claim(quiet=True):  # said once per server: by its first process (the HTTP server)
                self.status.write()
                say(msg + ": disabled")
                atexit.register(self.release)
            return False
        self.status.set(supported=True, message="sglang %s: waiting for the engine's scheduler" % self.version)
        self.status.write_if_absent()
        return True

    def install(self, sched_mod):
        if self.refused:
            return
        cls = getattr(sched_mod, "Scheduler", None)
        missing = ["Scheduler"] if cls is None else ["Scheduler." + m for m in SCHEDULER_METHODS if m not in cls.__dict__]
        if missing:
            self.disable("sglang %s lacks %s: the adapter is off" % (self.version, ", ".join(missing)))
            return
        for m, how in (
            ("__init__", self._wrap_init),
            ("get_next_batch_to_run", self._wrap_next),
            ("run_batch", self._wrap_run),
            ("process_batch_result", self._wrap_result),
            ("_add_request_to_queue", self._wrap_add),
        ):
            _wrap(cls, m, how)

    def claim(self, quiet=False):
        """One process per server writes the files (a lock beside the status file, as the other adapters do)."""
        base = self.settings.status_path or self.settings.schedule_out
        if not base:
            return True
        import fcntl

        self.lock_path = base + ".lock"
        fd = os.open(self.lock_path, os.O_CREAT | os.O_RDWR, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            holder = os.read(fd, 32).decode("ascii", "replace").strip()
            os.close(fd)
            self.lock_path = None
            if not quiet:
                say("process %d builds an SGLang scheduler too, but process %s of this server has the adapter: this "
                    "one is left as it is" % (os.getpid(), holder or "?"))
            return False
        os.ftruncate(fd, 0)
        os.write(fd, str(os.getpid()).encode())
        self.lock_fd = fd
        return True

    def on_scheduler(self, sch):
        """A Scheduler was built: this process records (and forces) its batches."""
        if self.refused or self.sched is not None:
            return
        if not self.claim():
            self.refused = True
            return
        self.sched = sch
        missing = [a for a in SCHEDULER_ATTRS if not hasattr(sch, a)]
        if missing:
            self.disable("sglang %s's Scheduler lacks %s: the adapter is off" % (self.version, ", ".join(missing)))
            return
        capacity = self.capacity(sch)
        self.status.set(capacity=capacity)
        if capacity["overlap_schedule"]:
            # Tagged, not turned off: each recorded batch is named around its own run_batch (the launch); its
            # result is processed after the next batch is launched, so a finish shows one step late, in both twins.
            self.status.append("warnings", "overlap scheduling is on: each step is named around the launch of its own "
                               "batch; finished requests show one step late (the same in both twins)")
        not_followed = ""
        if self.settings.forcing:
            try:
                header, steps, ended, note = common.read_schedule(self.settings.schedule_follow)
                if header.get("engine") != ENGINE:
                    raise common.ScheduleError("the schedule to follow is of engine %r, not sglang" % header.get("engine"))
            except common.ScheduleError as e:
                not_followed = str(e) + ": batches will not be forced"
            else:
                self.follow_header, self.follow = header, steps
                if note:
                    self.status.append("warnings", note)
                if not ended:
                    self.status.append("warnings", "the primary's schedule has no end line (the primary stopped before "
                                       "writing it): its %d steps are followed, then the engine batches on its own" % len(steps))
                self.forcing = True
        self.schedule = common.ScheduleWriter(self.settings.schedule_out)
        self.schedule.header(ENGINE, self.version, capacity, self.settings.role)
        self.trace = common.RequestTrace(self.settings.request_trace)
        self.active = True
        self.status.set(
            supported=True,
            mode="force" if self.forcing else "record",
            message="forcing the primary's %d steps (%s)" % (len(self.follow), self.settings.schedule_follow)
            if self.forcing else not_followed or "recording every step",
        )
        if not_followed:
            say(not_followed)
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

    def check_capacity(self, mine, primary):
        """The shadow does not force when it has less room than the primary had (its batches may not fit)."""
        diff = []
        for key in ("kv_tokens", "max_prefill_tokens", "max_requests_per_batch"):
            p, s = primary.get(key), mine.get(key)
            if isinstance(p, int) and isinstance(s, int) and s < p:
                diff.append("%s %d < the primary's %d" % (key, s, p))
        for key in ("page_size", "chunked_prefill_size", "mixed_chunk", "radix_cache", "policy"):
            if key in primary and primary[key] != mine.get(key):
                diff.append("%s %s != the primary's %s" % (key, mine.get(key), primary[key]))
        if diff:
            self.stop_forcing("the shadow's engine differs: %s (give both servers the same --max-total-tokens, "
                              "--page-size, --chunked-prefill-size, --max-prefill-tokens, --max-running-requests and "
                              "scheduling flags)" % "; ".join(diff))

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

    def disable(self, message, error=None):
        """Turns the adapter off for the rest of the run, says why (stderr and status); never raises."""
        with self.lock:
            was, self.active, self.forcing = self.active, False, False
            self.status.set(mode="disabled", message=message)
            if error:
                self.status.append("errors", error)
            if was and self.schedule is not None:
                try:
                    self.schedule.end("adapter disabled")
                except Exception:
                    pass
        say(message + ": disabled")
        self.status.write()

    def fail(self, what, e):
        self.disable("the sglang adapter raised in %s (%s: %s); the server goes on without it" % (what, type(e).__name__, e),
                     error="%s: %s: %s" % (what, type(e).__name__, e))

    def stop_forcing(self, why):
        with self.lock:
            if not self.forcing:
                return
            self.forcing = False
            msg = "stopped forcing at step %d of %d: %s; the engine batches on its own from here" % (
                self.next_forced, len(self.follow), why)
            self.status.set(message=msg)
            self.status.append("warnings", msg)
        say(msg)
        self.status.write()

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

    def _wrap_init(self, orig):
        adapter = self

        def __init__(sch, *a, **kw):
            orig(sch, *a, **kw)
            try:
                adapter.on_scheduler(sch)
            except Exception as e:
                adapter.fail("installing on the scheduler", e)

        return __init__

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

    def ensure_nvtx(self):
        if self.nvtx is None:
            self.nvtx = common.Nvtx()
            self.status.set(nvtx=self.nvtx.backend)
            if self.nvtx.backend == "none":
                self.status.append("warnings", "no NVTX library (torch.cuda.nvtx, libnvToolsExt): steps are not named")
        return self.nvtx

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
        line = {"id": cid, "id_generated": cid.startswith("internal-"), "engine_id": t["engine_id"]}
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

    def _trace_line(self, line, t, completion):
        now = common.now_us()
        line.update(prompt_tokens=t["prompt_tokens"], max_tokens=t["max_tokens"], completion_tokens=completion,
                    arrival_unix_us=t["arrival_unix_us"],
                    queued_us=(t["first_step_us"] - t["arrival_us"]) if "first_step_us" in t else None,
                    first_token_us=None, done_us=now - t["arrival_us"], prefill_step=t["prefill_step"], steps=t["steps"])
        if t.get("preempted"):
            line["preempted"] = t["preempted"]
        if self.trace is not None:
            self.trace.write(line)

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

    def close(self, reason):
        """At exit: the steps left, the end line, requests still in flight (said)."""
        if self.ended or self.sched is None or self.schedule is None:
            return
        self.ended = True
        try:
            with self.lock:
                for doc in list(self.to_process) + list(self.to_run):
                    self._write(doc)
                self.to_process.clear()
                self.to_run.clear()
                self.schedule.end("shutdown")
                unfinished = [i for i, t in self.requests.items() if not t.get("done")]
                for i in unfinished:
                    t = self.requests[i]
                    t["done"] = True
                    self._trace_line({"id": i, "id_generated": i.startswith("internal-"), "engine_id": t["engine_id"],
                                      "status": 503, "error": "the server stopped before it ended"}, t, 0)
                if unfinished:
                    self.status.append("warnings", "%d requests had not ended when the server stopped" % len(unfinished))
                if self.settings.role == "shadow" and self.follow and self.next_forced < len(self.follow):
                    self.status.append("warnings", "%d of the primary's %d steps were not forced"
                                       % (len(self.follow) - self.next_forced, len(self.follow)))
                if self.trace is not None:
                    self.trace.close()
        except Exception as e:
            self.status.append("errors", "at %s: %s: %s" % (reason, type(e).__name__, e))
        self.status.write()
        self.release()

    def release(self):
        if self.lock_path:
            try:
                os.unlink(self.lock_path)
                os.close(self.lock_fd)
            except OSError:
                pass
            self.lock_path = None


class _KeepOrder:
    """The scheduler's policy for one forced call, its calc_priority leaving the waiting queue as it is."""

    def __init__(self, inner):
        self._inner = inner

    def calc_priority(self, *a, **kw):
        return None

    def __getattr__(self, name):
        return getattr(self._inner, name)


def _wrap(cls, name, how):
    orig = cls.__dict__[name]
    wrapped = how(orig)
    wrapped.__name__ = getattr(orig, "__name__", name)
    wrapped.__qualname__ = getattr(orig, "__qualname__", name)
    wrapped.__doc__ = getattr(orig, "__doc__", None)
    wrapped.__wrapped__ = orig
    setattr(cls, name, wrapped)
