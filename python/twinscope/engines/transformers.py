"""The engine adapter for Hugging Face transformers continuous batching (`transformers serve --continuous-batching`): records each step, names it in NVTX, and in a shadow forces the primary's steps (docs/engines.md)."""

import atexit
import time

from . import common

ENGINE = "transformers"
CB = "transformers.generation.continuous_batching"
CB_API = CB + ".continuous_api"
CB_SCHEDULER = CB + ".scheduler"

# The versions whose every name below was read in their source (docs/engines.md, "transformers"). Any other
# version is refused before serving starts: its batches are not recorded and not forced.
SUPPORTED = {
    "5.17.0": "scheduler.py, continuous_api.py, requests.py, offloading_manager.py and cli/serving read 2026-12-03",
}

# Names of 5.17 this adapter calls or wraps (checked at install; one missing disables the adapter, said).
SCHEDULER_NAMES = (
    "Scheduler",
    "FIFOScheduler",
    "PrefillFirstScheduler",
    "SCHEDULER_MAPPING",
)
SCHEDULER_METHODS = (
    "schedule_batch",
    "_process_candidates",
    "_cleanup_waiting_queue",
    "add_waiting_request",
    "finish_request",
    "clear_cancelled_requests",
)
PROCESSOR_METHODS = ("__init__", "prepare_next_batch", "_update_tp_group_state", "_generation_step", "warmup")

FLUSH_AND_STOP = 1  # BackgroundThreadStatus.FLUSH_AND_STOP in 5.17
ENDED = {"done": True}


def known_versions():
    return ", ".join(sorted(SUPPORTED))


class TransformersAdapter(common.AdapterBase):
    """One per process: what the primary records and what the shadow forces."""

    ENGINE = ENGINE
    SUPPORTED = SUPPORTED
    CAPACITY_AT_LEAST = ("kv_blocks", "max_batch_tokens", "max_requests_per_batch")
    CAPACITY_SAME = ("block_size",)
    CAPACITY_MORE = ("kv_blocks", "max_batch_tokens")
    CAPACITY_STOP = "the shadow's capacity is smaller: %s (give both servers the same %s)"
    CAPACITY_FLAGS = "--cb-num-blocks, --cb-max-batch-tokens and --cb-block-size"
    # One process per server writes the files: the first that imports transformers (a lock beside the status file).
    # Another process of the same server (a worker that imports transformers too) is left alone, said on its stderr.
    CLAIM_AT_IMPORT = True
    SECOND_PROCESS = "imports transformers"
    WAITING_FOR = "continuous batching"

    def __init__(self, settings, version):
        common.AdapterBase.__init__(self, settings, version)
        self.preempt_tried = -1  # the forced step for which the recorded preemption was asked of the engine
        self.pending = None  # the step scheduled last, written when the next one is scheduled or at exit
        self.ending = {}  # id -> state: finish_request seen; an end unless the engine requeues it (a preemption)
        self.preempted = []  # ids requeued since the last step (listed in the next step)

    # ---- install -------------------------------------------------------------------------------------

    def _first_word(self):
        """The process that holds the lock says that it is here (the status file)."""
        self.status.write()

    def install(self, cb_api, scheduler_mod):
        """Wraps 5.17's scheduler classes and batch processor (after continuous_api is imported)."""
        if self.refused:
            return  # refused already (version)
        missing = [n for n in SCHEDULER_NAMES if not hasattr(scheduler_mod, n)]
        proc = getattr(cb_api, "ContinuousBatchProcessor", None)
        if proc is None:
            missing.append("ContinuousBatchProcessor")
        else:
            missing += ["ContinuousBatchProcessor." + m for m in PROCESSOR_METHODS if not hasattr(proc, m)]
        base = getattr(scheduler_mod, "Scheduler", None)
        if base is not None:
            missing += ["Scheduler." + m for m in SCHEDULER_METHODS if not hasattr(base, m)]
        if missing:
            self.disable("transformers %s lacks %s: the adapter is off" % (self.version, ", ".join(missing)))
            return
        classes = {base}
        for name in ("FIFOScheduler", "PrefillFirstScheduler"):
            classes.add(getattr(scheduler_mod, name))
        classes.update(c for c in scheduler_mod.SCHEDULER_MAPPING.values() if isinstance(c, type))
        for cls in classes:
            if "schedule_batch" in cls.__dict__:
                common.wrap(cls, "schedule_batch", self._wrap_schedule)
        for cls in classes:  # the bookkeeping methods where a class defines its own
            for m, how in (
                ("add_waiting_request", self._wrap_arrival),
                ("finish_request", self._wrap_finish),
                ("clear_cancelled_requests", self._wrap_cancel),
            ):
                if m in cls.__dict__:
                    common.wrap(cls, m, how)
        common.wrap(proc, "__init__",
                    self.after_init(self.on_processor, "ContinuousBatchProcessor.__init__", lambda: self.active))
        common.wrap(proc, "prepare_next_batch", self._wrap_prepare)
        common.wrap(proc, "_generation_step", self._wrap_step)
        common.wrap(proc, "warmup", self.in_range("warmup transformers continuous batching", lambda: self.active))
        mgr = getattr(cb_api, "ContinuousBatchingManager", None)
        if mgr is not None and "stop" in mgr.__dict__:
            common.wrap(mgr, "stop", self._wrap_manager_stop)
        self.start(None)  # the header is written when the batch processor is built (its capacity is known then)
        self.status.write()
        atexit.register(self.close, "exit")

    # ---- the processor: capacity, the wait for a forced step's requests, NVTX around the forward ----

    def on_processor(self, proc):
        cache, cfg = proc.cache, getattr(proc, "cb_config", None)
        cuda_graph = getattr(cfg, "cuda_graph_booleans", None) if cfg is not None else None
        capacity = {
            "kv_blocks": int(cache.num_blocks),
            "block_size": int(cache.block_size),
            "max_batch_tokens": int(proc.max_batch_tokens),
            "max_requests_per_batch": int(getattr(proc.scheduler, "max_requests_per_batch", 0) or 0),
            "graph_sizes": [],
            "cuda_graph": list(cuda_graph) if isinstance(cuda_graph, (tuple, list)) else None,
            "q_padding_interval": getattr(cfg, "q_padding_interval_size", None),
            "async_batching": bool(getattr(proc, "use_async_batching", False)),
        }
        self.status.set(capacity=capacity)
        if capacity["async_batching"]:
            # Scheduling and launching a step stay adjacent on the generation thread in async mode: the range
            # around the forward names the step being executed; its results are read one step later.
            self.status.append(
                "warnings",
                "async batching is on: each range names the step being executed; a step's finished requests "
                "are those read back while it ran (one step late)",
            )
        tp = getattr(getattr(proc, "distributed_helper", None), "tp_size", 1)
        if self.forcing and tp != 1:
            self.stop_forcing("tensor parallelism (%s ranks) is not forced by this adapter" % tp)
        if self.forcing and self.follow_header is not None:
            self.check_capacity(capacity, self.follow_header.get("capacity") or {})
        if self.schedule.steps == 0 and not self.schedule.closed:
            self.schedule.header(ENGINE, self.version, capacity, self.settings.role)
        self.status.write()

    def _wrap_prepare(self, orig):
        adapter = self

        def prepare_next_batch(proc, *a, **kw):
            if adapter.active and adapter.forcing:
                try:
                    adapter.wait_for_step(proc)
                except Exception as e:
                    adapter.fail("waiting for a forced step's requests", e)
            ready = orig(proc, *a, **kw)
            if adapter.active and not ready:
                try:
                    adapter.idle(proc)
                except Exception as e:
                    adapter.fail("writing the last step while the engine waits", e)
            return ready

        return prepare_next_batch

    def idle(self, proc):
        """Nothing to schedule: the engine waits for requests. In sync batching the last step's results are all in
        (update_batch ran), so that step and the requests that ended in it are written now rather than at the next
        step. `transformers serve` never stops its engine at shutdown (its lifespan unloads the model) and dies by
        the signal uvicorn raises again, so neither the engine's stop nor atexit would write them."""
        if getattr(proc, "use_async_batching", False):
            return  # the last step's results are still in flight: its finished requests come at the next step
        p = self.pending
        if p is None or "dur_us" not in p:
            return
        self.settle()
        with self.lock:
            if self.pending is p:
                self._flush_pending()
        self.status.write()

    def wait_for_step(self, proc):
        """Holds the engine until every request of the next forced step has arrived (or the step timeout)."""
        if self.next_forced >= len(self.follow):
            return
        want = self.follow[self.next_forced]
        ids = [e["id"] for e in want["batch"]]
        deadline = time.monotonic() + self.settings.step_timeout_s
        while True:
            sch = proc.scheduler
            missing = [i for i in ids if i not in sch.active_requests and i not in sch.waiting_requests]
            if not missing:
                return
            status = getattr(proc, "background_thread_status", None)
            if status is not None and getattr(status, "local_status", 0) >= FLUSH_AND_STOP:
                self.stop_forcing(
                    "the server is stopping with %d of the primary's steps not run" % (len(self.follow) - self.next_forced)
                )
                return
            if time.monotonic() > deadline:
                self.status.add("timeouts")
                self.stop_forcing(
                    "step %d waited %g s (TWINSCOPE_FOLLOW_STEP_TIMEOUT_S) for request%s %s, which did not arrive"
                    % (
                        want["step"],
                        self.settings.step_timeout_s,
                        "s" if len(missing) > 1 else "",
                        ", ".join(missing[:5]) + (" ..." if len(missing) > 5 else ""),
                    )
                )
                return
            if proc._update_tp_group_state():  # takes new requests off the input queue; True: a hard stop
                return
            time.sleep(0.002)

    def _wrap_step(self, orig):
        adapter = self

        def _generation_step(proc, *a, **kw):
            pushed = False
            if adapter.active:
                try:
                    pushed = adapter.step_begins()
                except Exception as e:
                    adapter.fail("opening a step's NVTX range", e)
            try:
                return orig(proc, *a, **kw)
            finally:
                if pushed:
                    try:
                        adapter.step_ends()
                    except Exception as e:
                        adapter.fail("closing a step's NVTX range", e)

        return _generation_step

    def step_begins(self):
        p = self.pending
        if p is None or "start_us" in p:
            return False
        p["start_us"] = common.now_us() - self.t0
        self.ensure_nvtx().push(p["name"])
        return True

    def step_ends(self):
        self.nvtx.pop()
        p = self.pending
        if p is not None and "start_us" in p:
            now = common.now_us()
            p["dur_us"] = now - self.t0 - p["start_us"]
            for rid in p.get("_first", ()):
                r = self.requests.get(rid)
                if r is not None:
                    r.setdefault("first_token_us", now - r["arrival_us"])
        self.status.maybe_write()

    # ---- the scheduler: record each step, or force the primary's ------------------------------------

    def _wrap_schedule(self, orig):
        adapter = self

        def schedule_batch(sch, token_budget, cache_budget, *a, **kw):
            if adapter.active:
                try:
                    adapter.settle()
                except Exception as e:
                    adapter.fail("noting finished requests", e)
            if adapter.active and adapter.forcing and not a and not kw:
                try:
                    forced = adapter.force(sch, token_budget, cache_budget)
                except Exception as e:
                    adapter.fail("forcing a step", e)
                    forced = None
                if forced is not None:
                    if adapter.active:
                        try:
                            adapter.record(sch, forced)
                        except Exception as e:
                            adapter.fail("recording a forced step", e)
                    return forced
            result = orig(sch, token_budget, cache_budget, *a, **kw)
            if adapter.active:
                try:
                    adapter.record(sch, result)
                except Exception as e:
                    adapter.fail("recording a step", e)
            return result

        return schedule_batch

    def force(self, sch, token_budget, cache_budget):
        """The primary's next step, scheduled through the engine's own candidate processing; None: not forced."""
        if self.next_forced >= len(self.follow):
            self.stop_forcing("the primary's schedule has no step %d" % self.next_forced)
            return None
        want = self.follow[self.next_forced]
        # A preemption the primary made before this step: ask the engine's offloading for exactly those requests
        # (reported as starved, "cache full" once), as the primary's cache pressure did.
        to_preempt = [i for i in want.get("preempted") or [] if i in sch.active_requests]
        if to_preempt:
            if self.preempt_tried != self.next_forced and len(sch.active_requests) > len(to_preempt):
                self.preempt_tried = self.next_forced
                n = int(sch.cache.num_blocks) + 1
                sch.starved_requests = [(sch.active_requests[i], n) for i in to_preempt]
                return (None, False, 0, 0)
            self.stop_forcing("the engine did not preempt %s before step %d as the primary did" % (to_preempt, want["step"]))
            return None
        states = []
        for e in want["batch"]:
            st = sch.active_requests.get(e["id"]) or sch.waiting_requests.get(e["id"])
            if st is None:
                self.stop_forcing("request %s of step %d is not here" % (e["id"], want["step"]))
                return None
            states.append(st)
        tokens = sum(e["tokens"] for e in want["batch"])
        saved = (sch.safety_margin, sch.max_requests_per_batch)
        sch.safety_margin, sch.max_requests_per_batch = 0.0, max(saved[1], len(states))
        try:
            remove = set()
            got, failed, fast, nq, kv = sch._process_candidates(states, tokens, cache_budget, remove)
            sch._cleanup_waiting_queue(remove)
        finally:
            sch.safety_margin, sch.max_requests_per_batch = saved
        self.next_forced += 1
        self.status.add("forced_steps")
        have = [(str(fs.state.request_id), int(fs.query_length)) for fs in got]
        wanted = [(e["id"], e["tokens"]) for e in want["batch"]]
        if have != wanted:
            self.status.append(
                "errors", "step %d: forced %s, the engine scheduled %s" % (want["step"], wanted[:8], have[:8])
            )
            self.stop_forcing("step %d could not be run as the primary ran it (see errors)" % want["step"])
        if not got and failed:
            return (None, fast, 0, 0)
        return (got, fast, nq, kv)

    def record(self, sch, result):
        reqs = result[0] if isinstance(result, tuple) else result
        if not reqs:
            return  # None: cache full, the engine offloads and schedules again; []: nothing to run
        with self.lock:
            self._flush_pending()
            preempted, self.preempted = self.preempted, []
            batch, first = [], []
            for fs in reqs:
                st = fs.state
                rid = str(st.request_id)
                e = {
                    "id": rid,
                    "tokens": int(fs.query_length),
                    "offset": int(st.position_offset),
                    "_prompt": len(st.initial_tokens),
                }
                batch.append(e)
                r = self.requests.get(rid, ENDED)
                if r is ENDED:
                    r = self.requests[rid] = self._new_request(st)
                r["steps"].append(self.step_index)
                if r["prefill_step"] < 0:
                    r["prefill_step"] = self.step_index
                    r["first_step_us"] = common.now_us()
                if e["offset"] + e["tokens"] >= e["_prompt"] and "first_token_us" not in r:
                    first.append(rid)
            kind = common.step_kind(batch)
            for e in batch:
                del e["_prompt"]
            self.pending = {
                "type": "step",
                "step": self.step_index,
                "kind": kind,
                "batch": batch,
                "preempted": preempted,
                "finished": [],
                "cancelled": [],
                "name": common.step_name(kind, self.step_index, batch),
                "_first": first,  # requests whose prompt ends in this step: their first token comes from it
            }
            for k, i in self.loose:  # requests that ended while no step was pending (after the last one written)
                self.pending[k].append(i)
            self.loose = []
            self.step_index += 1
            self.status.set(steps=self.step_index)

    def _flush_pending(self):
        p, self.pending = self.pending, None
        if p is not None and self.schedule is not None:
            p.pop("_first", None)
            p.setdefault("start_us", None)
            p.setdefault("dur_us", None)
            self.schedule.step(p)

    # ---- requests: arrival, end (the request trace) ---------------------------------------------------

    def _new_request(self, st):
        return {
            "arrival_us": common.now_us(),
            "arrival_unix_us": int(time.time() * 1e6),
            "prompt_tokens": int(getattr(st, "_true_initial_tokens", 0) or len(st.initial_tokens)),
            "max_tokens": getattr(st, "max_new_tokens", None),
            "steps": [],
            "prefill_step": -1,
        }

    def _wrap_arrival(self, orig):
        adapter = self

        def add_waiting_request(sch, state, *a, **kw):
            if adapter.active:
                try:
                    adapter.arrives(state)
                except Exception as e:
                    adapter.fail("noting a request's arrival", e)
            return orig(sch, state, *a, **kw)

        return add_waiting_request

    def _wrap_finish(self, orig):
        adapter = self

        def finish_request(sch, request_id, *a, **kw):
            state = None
            if adapter.active:
                try:
                    state = sch.active_requests.get(request_id)
                except Exception:
                    state = None
            result = orig(sch, request_id, *a, **kw)
            if adapter.active:
                try:
                    with adapter.lock:
                        adapter.ending[str(request_id)] = state
                except Exception as e:
                    adapter.fail("noting a finished request", e)
            return result

        return finish_request

    def _wrap_manager_stop(self, orig):
        adapter = self

        def stop(mgr, *a, **kw):
            result = orig(mgr, *a, **kw)
            if adapter.active:
                try:
                    adapter.flush_at_stop()
                except Exception as e:
                    adapter.fail("writing the last step at the engine's stop", e)
            return result

        return stop

    def flush_at_stop(self):
        """The engine stopped its generation thread (a server's shutdown): the last step and the requests that
        ended in it are written now, not at the next step or at exit. uvicorn (`transformers serve`) raises its
        stop signal again after its shutdown, so the process dies by SIGTERM and atexit never runs."""
        self.settle()
        with self.lock:
            self._flush_pending()
        self.status.write()

    def _wrap_cancel(self, orig):
        adapter = self

        def clear_cancelled_requests(sch, *a, **kw):
            result = orig(sch, *a, **kw)
            if adapter.active and result:
                try:
                    for st in result:
                        adapter.request_ends(str(st.request_id), st, cancelled=True)
                except Exception as e:
                    adapter.fail("noting a cancelled request", e)
            return result

        return clear_cancelled_requests

    def arrives(self, state):
        """A request reaches the scheduler: new, or requeued right after finish_request (a preemption: the engine
        offloaded or reset it)."""
        rid = str(state.request_id)
        with self.lock:
            if rid in self.ending:
                del self.ending[rid]
                self.preempted.append(rid)
                r = self.requests.get(rid)
                if r is not None:
                    r["preempted"] = r.get("preempted", 0) + 1
            elif self.requests.get(rid, ENDED) is ENDED:  # new, or an id a client used again
                self.requests[rid] = self._new_request(state)

    def settle(self):
        """The requests finish_request let go and the engine did not requeue: they ended (in the last step)."""
        with self.lock:
            ending, self.ending = self.ending, {}
        for rid, state in ending.items():
            self.request_ends(rid, state, cancelled=False)

    def request_ends(self, rid, state, cancelled):
        with self.lock:
            r = self.requests.get(rid)
            if r is None or r.get("done"):
                return
            r["done"] = True
            kind = "cancelled" if cancelled else "finished"
            if self.pending is not None:
                self.pending[kind].append(rid)
            else:  # after the last step was written (the engine idles): on the next step, or on the end line
                self.loose.append((kind, rid))
            doc = {"id": rid, "id_generated": False}
            generated = list(getattr(state, "generated_tokens", []) or []) if state is not None else []
            # A request reset after a preemption carries what it had generated in its prompt (5.17's
            # _true_initial_tokens); its completion counts those tokens too.
            true_initial = int(getattr(state, "_true_initial_tokens", 0) or 0) if state is not None else 0
            carried = len(state.initial_tokens) - true_initial if true_initial else 0
            status_name = getattr(getattr(state, "status", None), "name", "")
            if cancelled:
                doc.update(status=499, finish_reason="cancelled")
            elif status_name == "FAILED" or getattr(state, "error", None):
                doc.update(status=500, error=str(getattr(state, "error", "") or "the engine failed the request"))
            else:
                eos = getattr(state, "_eos_token_ids", set()) or set()
                doc.update(status=200, finish_reason="stop" if generated and generated[-1] in eos else "length")
            self._trace_line(doc, r, carried + len(generated))

    def _trace_line(self, doc, r, completion):
        common.AdapterBase._trace_line(self, doc, r, completion)
        self.requests[doc["id"]] = ENDED  # what is left of an ended request: that it ended

    # ---- the end ---------------------------------------------------------------------------------------

    def _flush_steps(self, at_end):
        """At exit the requests finish_request let go are settled first (they ended in the last step)."""
        if at_end:
            self.settle()
        self._flush_pending()
