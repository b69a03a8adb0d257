"""The fake vllm.v1.core.sched.scheduler: 0.34's Scheduler reduced to what shapes a batch (running requests first, then waiting ones in FCFS order, a token budget, chunked prefill, KV blocks, preemption of the last running request), with its method signatures (tests/engines/fake/vllm)."""

import os
import time

from vllm.v1.core.sched.output import CachedRequestData, NewRequestData, SchedulerOutput
from vllm.v1.core.sched.request_queue import SchedulingPolicy, create_request_queue
from vllm.v1.request import RequestStatus


class Scheduler:
    def __init__(self, vllm_config, kv_cache_config, structured_output_manager, block_size, hash_block_size=None,
                 mm_registry=None, include_finished_set=False, log_stats=False):
        self.vllm_config = vllm_config
        self.scheduler_config = vllm_config.scheduler_config
        self.cache_config = vllm_config.cache_config
        self.max_num_running_reqs = self.scheduler_config.max_num_seqs
        self.max_num_scheduled_tokens = (self.scheduler_config.max_num_scheduled_tokens
                                         or self.scheduler_config.max_num_batched_tokens)
        self.block_size = block_size
        self.requests = {}
        self.policy = SchedulingPolicy(self.scheduler_config.policy)
        self.waiting = create_request_queue(self.policy)
        self.kv_holding_waiting = create_request_queue(self.policy)
        self.async_kv_waiting = create_request_queue(self.policy)
        self.running = []
        self.finished_req_ids = set()
        self.reset_preempted_req_ids = set()
        self.current_step = 0
        self._fake_free_blocks = self.cache_config.num_gpu_blocks
        self._fake_blocks = {}  # request id -> blocks held

    # ---- the fake KV cache -------------------------------------------------------------------------------

    def _fake_allocate(self, request, num_new_tokens):
        need = -(-(request.num_computed_tokens + num_new_tokens) // self.block_size)
        more = need - self._fake_blocks.get(request.request_id, 0)
        if more > self._fake_free_blocks:
            return False
        if more > 0:
            self._fake_free_blocks -= more
            self._fake_blocks[request.request_id] = need
        return True

    def _fake_release(self, request):
        self._fake_free_blocks += self._fake_blocks.pop(request.request_id, 0)

    # ---- 0.34's methods ------------------------------------------------------------------------------------

    def schedule(self, throttle_prefills=False):
        self.current_step += 1
        token_budget = self.max_num_scheduled_tokens
        new_reqs, cached_ids, cached_computed, num_scheduled, preempted = [], [], [], {}, []
        i = 0
        while i < len(self.running) and token_budget > 0:
            request = self.running[i]
            n = min(request.num_tokens - request.num_computed_tokens, token_budget)
            if n <= 0:
                i += 1
                continue
            while not self._fake_allocate(request, n):
                victim = self.running.pop()
                self._preempt_request(victim, time.monotonic())
                preempted.append(victim)
                if victim is request:
                    break
            if request.status != RequestStatus.RUNNING:
                break
            num_scheduled[request.request_id] = n
            cached_ids.append(request.request_id)
            cached_computed.append(request.num_computed_tokens)
            token_budget -= n
            i += 1
        if not preempted:
            while self.waiting and token_budget > 0 and len(self.running) < self.max_num_running_reqs:
                request = self.waiting.peek_request()
                n = request.num_tokens - request.num_computed_tokens
                if not self.scheduler_config.enable_chunked_prefill and n > token_budget:
                    break
                n = min(n, token_budget)
                if not self._fake_allocate(request, n):
                    break
                self.waiting.pop_request()
                self.running.append(request)
                request.status = RequestStatus.RUNNING
                num_scheduled[request.request_id] = n
                new_reqs.append(NewRequestData(request.request_id, request.prompt_token_ids, request.num_computed_tokens))
                token_budget -= n
        out = SchedulerOutput(
            scheduled_new_reqs=new_reqs,
            scheduled_cached_reqs=CachedRequestData(cached_ids, cached_computed),
            num_scheduled_tokens=num_scheduled,
            total_num_scheduled_tokens=sum(num_scheduled.values()),
            finished_req_ids=self.finished_req_ids,
            preempted_req_ids=self.reset_preempted_req_ids,
        )
        if os.environ.get("FAKE_ENGINE_BREAK") and num_scheduled:
            out.preempted_req_ids = 5  # not what 0.34 gives: the adapter raises reading it
        for rid, n in num_scheduled.items():
            self.requests[rid].num_computed_tokens += n
        self.finished_req_ids = set()
        self.reset_preempted_req_ids = set()
        return out

    def _preempt_request(self, request, timestamp, drop_stale_output=False):
        assert request.status == RequestStatus.RUNNING, "Only running requests can be preempted"
        self._fake_release(request)
        request.status = RequestStatus.PREEMPTED
        request.num_computed_tokens = 0
        request.num_preemptions += 1
        self.waiting.prepend_request(request)
        self.reset_preempted_req_ids.add(request.request_id)

    def add_request(self, request):
        self.requests[request.request_id] = request
        self.waiting.add_request(request)

    def update_from_output(self, scheduler_output, model_runner_output):
        outputs = {}
        index = {rid: k for k, rid in enumerate(model_runner_output.req_ids)}
        for rid in scheduler_output.num_scheduled_tokens:
            request = self.requests.get(rid)
            if request is None or request.is_finished():
                continue
            k = index.get(rid)
            new = model_runner_output.sampled_token_ids[k] if k is not None else []
            if not new:
                continue
            request.append_output_token_ids(new)
            if request.num_output_tokens >= request.max_tokens:
                request.status = RequestStatus.FINISHED_LENGTH_CAPPED
                self.running.remove(request)
                self._free_request(request)
            outputs.setdefault(request.client_index, []).append(
                (rid, list(new), str(request.get_finished_reason()) if request.is_finished() else None)
            )
        return outputs

    def finish_requests(self, request_ids, finished_status):
        if isinstance(request_ids, str):
            request_ids = (request_ids,)
        done = []
        for rid in request_ids:
            request = self.requests.get(rid)
            if request is None or request.is_finished():
                continue
            if request.status == RequestStatus.RUNNING:
                self.running.remove(request)
            else:
                self.waiting.remove_request(request)
            request.status = finished_status
            self._free_request(request)
            done.append(request)
        return done

    def _free_request(self, request, delay_free_blocks=False):
        assert request.is_finished()
        self._fake_release(request)
        self.finished_req_ids.add(request.request_id)
        del self.requests[request.request_id]
        return None, None

    def has_requests(self):
        return bool(self.requests) or bool(self.finished_req_ids)

    def shutdown(self):
        pass
