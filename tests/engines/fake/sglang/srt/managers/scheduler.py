"""The fake Scheduler of sglang.srt.managers.scheduler (0.5.23's names): chunked prefill from a waiting queue that its policy reorders at random (FAKE_ENGINE_SEED), so two runs batch differently unless forced; decode of every running request; retraction when the KV pool is full; a fake GPU that records each launch with the NVTX range open on its thread (tests/engines/fake/sglang)."""

import os
import queue
import random
import threading
from collections import namedtuple

from sglang.srt.managers.schedule_batch import FINISH_ABORT, FINISH_LENGTH, Req, SamplingParams, ScheduleBatch
from sglang.srt.model_executor.forward_batch_info import ForwardMode

FAKE_ONLY = ("LAUNCHES", "current_range", "FAKE_ONLY", "token_of", "ServerArgs", "FakeInput", "run_scheduler_process", "_kv_used", "_prefill", "_decode",
             "SpeculativeAlgorithm")
LAUNCHES = []  # (thread id, the outermost open range, kernel, grid)

NextBatchPlan = namedtuple("NextBatchPlan", ["batch_to_run", "running_batch"])


def current_range():
    try:
        from torch.cuda import nvtx

        return nvtx.current()
    except ImportError:
        return None


def token_of(rid, k):
    """The k-th generated token of a request: a function of its id and k only (every run gets the same tokens)."""
    return (sum(map(ord, rid)) * 31 + 7 * k) % 1000


class ServerArgs:
    def __init__(self, max_total_tokens=4096, chunked_prefill_size=48, max_running_requests=8, page_size=1,
                 enable_mixed_chunk=False, schedule_policy="fcfs", disable_cuda_graph=True, tp_size=1):
        self.max_total_tokens = max_total_tokens
        self.chunked_prefill_size = chunked_prefill_size
        self.max_running_requests = max_running_requests
        self.page_size = page_size
        self.enable_mixed_chunk = enable_mixed_chunk
        self.schedule_policy = schedule_policy
        self.disable_cuda_graph = disable_cuda_graph
        self.disable_radix_cache = False
        self.disable_overlap_schedule = True
        self.num_continuous_decode_steps = 1
        self.cuda_graph_bs_decode = None
        self.tp_size = self.dp_size = self.pp_size = tp_size
        self.dp_size = self.pp_size = 1


class FakeInput:
    """What the fake TokenizerManager sends: the request's rid, prompt ids, max_new_tokens."""

    def __init__(self, rid, input_ids, max_new_tokens):
        self.rid = rid
        self.input_ids = input_ids
        self.max_new_tokens = max_new_tokens


class SpeculativeAlgorithm:
    """As sglang.srt.speculative.spec_info.SpeculativeAlgorithm: its name and is_none()."""

    def __init__(self, name):
        self.name = name

    def is_none(self):
        return self.name == "NONE"


class SchedulePolicy:
    def __init__(self, seed):
        self.rng = random.Random(seed)

    def calc_priority(self, waiting_queue, running_batch=None, processed_tokens=0):
        self.rng.shuffle(waiting_queue)  # the fake's "policy": another order each run (the real LPM sorts by prefix)


class Scheduler:
    def __init__(self, server_args, port_args=None, inq=None, outq=None):
        self.server_args = server_args
        self.max_total_num_tokens = server_args.max_total_tokens
        self.page_size = server_args.page_size
        self.chunked_prefill_size = server_args.chunked_prefill_size
        self.max_prefill_tokens = 16384
        self.max_running_requests = server_args.max_running_requests
        self.enable_overlap = not server_args.disable_overlap_schedule
        self.enable_priority_scheduling = False
        self.spec_algorithm = SpeculativeAlgorithm(os.environ.get("FAKE_SGLANG_SPEC", "NONE"))
        self.policy = SchedulePolicy(int(os.environ.get("FAKE_ENGINE_SEED", "1")))
        self.waiting_queue = []
        self.running_batch = ScheduleBatch([])
        self.chunked_req = None
        self.last_batch = None
        self.gracefully_exit = False
        self._inq, self._outq = inq, outq

    # ---- input --------------------------------------------------------------------------------------

    def ingest_requests(self):
        while self._inq is not None:
            try:
                msg = self._inq.get_nowait()
            except queue.Empty:
                return
            if msg[0] == "add":
                x = msg[1]
                self._add_request_to_queue(Req(x.rid, x.input_ids, SamplingParams(x.max_new_tokens)))
            elif msg[0] == "abort":
                for r in list(self.waiting_queue) + self.running_batch.reqs:
                    if r.rid == msg[1]:
                        r.finished_reason = FINISH_ABORT()
            elif msg[0] == "stop":
                self.gracefully_exit = True

    def _add_request_to_queue(self, req, is_retracted=False):
        self.waiting_queue.append(req)

    # ---- scheduling ---------------------------------------------------------------------------------

    def _kv_used(self):
        reqs = set(self.running_batch.reqs) | ({self.chunked_req} if self.chunked_req else set())
        return sum(r.computed for r in reqs)

    def get_next_batch_to_run(self, running_batch, last_batch):
        if last_batch is not None and last_batch.forward_mode.is_extend():
            for r in last_batch.reqs:
                if r is not self.chunked_req and r not in running_batch.reqs:
                    running_batch.reqs.append(r)
        running_batch.reqs = [r for r in running_batch.reqs if not r.finished()]
        self.waiting_queue = [r for r in self.waiting_queue if not r.finished()]
        batch = self._prefill(running_batch)
        if batch is None and running_batch.reqs:
            batch = self._decode(running_batch)
        return NextBatchPlan(batch, running_batch)

    def _prefill(self, running_batch):
        if not self.waiting_queue and self.chunked_req is None:
            return None
        self.policy.calc_priority(self.waiting_queue, running_batch, processed_tokens=0)
        budget = self.chunked_prefill_size
        free = self.max_total_num_tokens - self._kv_used()
        reqs, ext, pre = [], [], []
        chunked, self.chunked_req = self.chunked_req, None
        cands = ([chunked] if chunked else []) + list(self.waiting_queue)
        for r in cands:
            if budget <= 0 or (r is not chunked and len(running_batch.reqs) + len(reqs) >= self.max_running_requests):
                break
            fill = len(r.origin_input_ids) + len(r.output_ids)
            if getattr(r, "retracted", False) and fill + r.sampling_params.max_new_tokens - len(r.output_ids) > free:
                continue  # a retracted request comes back once it can run to its end (no retract-admit livelock)
            n = min(fill - r.computed, budget)
            if n > free:
                break
            reqs.append(r)
            ext.append(n)
            pre.append(r.computed)
            budget -= n
            free -= n
            if r.computed + n < fill:
                self.chunked_req = r
        if not reqs:
            return None
        self.waiting_queue = [r for r in self.waiting_queue if r not in reqs]
        if os.environ.get("FAKE_SGLANG_BREAK") == "1":
            pre = None  # the adapter finds no prefix lengths: it must turn itself off, not the server
        return ScheduleBatch(reqs, ForwardMode.EXTEND, ext, pre)

    def _decode(self, running_batch):
        while len(running_batch.reqs) > 1 and self._kv_used() + len(running_batch.reqs) > self.max_total_num_tokens:
            r = running_batch.reqs.pop()  # retract the newest: its KV freed, prefilled again later
            r.computed = 0
            r.retracted = True
            self._add_request_to_queue(r, is_retracted=True)
        return ScheduleBatch(running_batch.reqs, ForwardMode.DECODE,
                             seq_lens_cpu=[r.computed + 1 for r in running_batch.reqs])

    # ---- the fake GPU -------------------------------------------------------------------------------

    def run_batch(self, batch):
        tokens = []
        for i, r in enumerate(batch.reqs):
            if batch.forward_mode.is_decode():
                n = 1
            else:
                n = batch.extend_lens[i] if batch.extend_lens else len(r.origin_input_ids) - r.computed
            LAUNCHES.append((threading.get_ident(), current_range(), "attention", n))
            r.computed += n
            done_prefill = r.computed >= len(r.origin_input_ids) + len(r.output_ids)
            tokens.append(token_of(r.rid, len(r.output_ids)) if done_prefill else None)
        LAUNCHES.append((threading.get_ident(), current_range(), "sample", len(batch.reqs)))
        return tokens

    def process_batch_result(self, batch, result):
        for r, t in zip(batch.reqs, result):
            if r.finished():
                continue
            if t is not None:
                r.output_ids.append(t)
                if self._outq is not None:
                    self._outq.put(("out", r.rid, t))
            if len(r.output_ids) >= r.sampling_params.max_new_tokens:
                r.finished_reason = FINISH_LENGTH()
                if self._outq is not None:
                    self._outq.put(("done", r.rid, None))

    def event_loop_normal(self):
        while not self.gracefully_exit:
            self.ingest_requests()
            plan = self.get_next_batch_to_run(running_batch=self.running_batch, last_batch=self.last_batch)
            self.running_batch = plan.running_batch
            batch = plan.batch_to_run
            if batch:
                self.process_batch_result(batch, self.run_batch(batch))
            else:
                import time

                time.sleep(0.001)
            self.last_batch = batch


def run_scheduler_process(server_args, inq, outq):
    sch = Scheduler(server_args, None, inq, outq)
    sch.event_loop_normal()
    try:
        from torch.cuda import nvtx

        ranges = [[op, name, tid == threading.get_ident()] for tid, op, name in nvtx.log]
    except ImportError:
        ranges = []
    outq.put(("report", [[w, k, g, tid == threading.get_ident()] for tid, w, k, g in LAUNCHES], ranges, os.getpid()))
