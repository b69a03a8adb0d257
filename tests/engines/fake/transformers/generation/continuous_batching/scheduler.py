"""The fake scheduler (5.17's names and signatures: Scheduler, FIFOScheduler, PrefillFirstScheduler, SCHEDULER_MAPPING, schedule_batch(token_budget, cache_budget) -> 4-tuple) that, unless forced, packs each step with a random token budget (FAKE_ENGINE_SEED), so two runs batch differently (tests/engines/fake)."""

import os
import random
import threading
import time
from collections import deque

from .requests import FutureRequestState, RequestStatus

_rng = random.Random(int(os.environ.get("FAKE_ENGINE_SEED", "0")) or time.time_ns())


class Scheduler:
    def __init__(self, cache, safety_margin, max_requests_per_batch):
        self.cache = cache
        self.safety_margin = safety_margin
        self.max_requests_per_batch = max_requests_per_batch
        self._cancellation_lock = threading.Lock()
        self.reset()

    def reset(self):
        self.active_requests = {}
        self.waiting_requests = {}
        self.waiting_requests_order = deque()
        self._requests_to_cancel = set()
        self.block_new_requests = False
        self.starved_requests = []

    def add_waiting_request(self, state):
        self.waiting_requests[state.request_id] = state
        self.waiting_requests_order.append(state.request_id)

    def schedule_batch(self, token_budget, cache_budget):
        raise NotImplementedError  # abstract in 5.17 too

    def has_pending_requests(self):
        return bool(self.active_requests or self.waiting_requests)

    def finish_request(self, request_id):
        self.cache.free_blocks(request_id)
        self.active_requests.pop(request_id, None)

    def set_request_cancellation(self, request_id):
        with self._cancellation_lock:
            self._requests_to_cancel.add(request_id)

    def clear_cancelled_requests(self):
        out = []
        with self._cancellation_lock:
            for rid in self._requests_to_cancel:
                st = self.active_requests.pop(rid, None) or self.waiting_requests.pop(rid, None)
                if st is not None:
                    out.append(st)
                if rid in self.waiting_requests_order:
                    self.waiting_requests_order.remove(rid)
                self.cache.free_blocks(rid)
            self._requests_to_cancel = set()
        return out

    def _allocate_blocks_if_needed(self, state, len_next_tokens):
        occupancy = state.allocated_blocks * self.cache.block_size - state.current_len()
        if occupancy < len_next_tokens or state.allocated_blocks == 0:
            needed = ((len_next_tokens - occupancy + 1) // self.cache.block_size) + 1
            got = self.cache.allocate_blocks(needed, state.request_id, state.allocated_blocks)
            if got is None:
                if state.request_id in self.active_requests:
                    self.starved_requests.append((state, needed))
                return False
            state.allocated_blocks += got
        return True

    def _infer_request_tokens(self, state, remove):
        return state.tokens_to_process if state.status == RequestStatus.DECODING else state.remaining_prefill_tokens

    def _schedule_request(self, state, request_tokens, token_budget, remove):
        if len(request_tokens) <= token_budget:
            if state.status == RequestStatus.PENDING:
                self.active_requests[state.request_id] = state
                remove.add(state.request_id)
            if state.status <= RequestStatus.PREFILLING:
                state.tokens_to_process = state.remaining_prefill_tokens
                state.remaining_prefill_tokens = []
                state.status = RequestStatus.DECODING
        else:
            if state.status == RequestStatus.PENDING:
                self.active_requests[state.request_id] = state
                state.status = RequestStatus.PREFILLING
                remove.add(state.request_id)
            state.remaining_prefill_tokens = request_tokens[token_budget:]
            state.tokens_to_process = request_tokens[:token_budget]

    def _process_candidates(self, candidates, token_budget, cache_budget, remove):
        scheduled, failed = [], False
        self.starved_requests = []
        margins = self.safety_margin * self.cache.num_blocks
        original = token_budget
        requests_left = self.max_requests_per_batch
        for state in candidates:
            free = self.cache.get_num_free_blocks()
            if free < margins and scheduled and state.status != RequestStatus.DECODING:
                break
            tokens = self._infer_request_tokens(state, remove)
            n = min(len(tokens), token_budget)
            if not self._allocate_blocks_if_needed(state, n):
                failed = True
                if free == 0 and state.request_id in self.waiting_requests:
                    break
                continue
            self._schedule_request(state, tokens, token_budget, remove)
            n = len(state.tokens_to_process)
            token_budget -= n
            requests_left -= 1
            scheduled.append(FutureRequestState(state, not state.remaining_prefill_tokens, 0, n))
            if self.waiting_requests.pop(state.request_id, None) is not None:
                remove.add(state.request_id)
            if token_budget == 0 or requests_left <= 0:
                break
        return scheduled, failed, False, original - token_budget, 0

    def _cleanup_waiting_queue(self, remove):
        self.waiting_requests_order = deque(i for i in self.waiting_requests_order if i not in remove)

    def _budget(self, token_budget):
        """The fake's own packing: a random share of the budget each step (a real engine's is as unrepeatable)."""
        return _rng.randint(max(1, token_budget // 4), token_budget)

    def _finish(self, candidates, token_budget, cache_budget):
        remove = set()
        got, failed, fast, nq, kv = self._process_candidates(candidates, self._budget(token_budget), cache_budget, remove)
        self._cleanup_waiting_queue(remove)
        if not got and failed:
            return None, fast, 0, 0
        return got, fast, nq, kv


class FIFOScheduler(Scheduler):
    def __init__(self, cache, safety_margin, max_requests_per_batch):
        super().__init__(cache, 0.15 if safety_margin is None else safety_margin, max_requests_per_batch)

    def schedule_batch(self, token_budget, cache_budget):
        first = [s for s in self.active_requests.values() if s.status == RequestStatus.DECODING]
        second = [s for s in self.active_requests.values() if s.status == RequestStatus.PREFILLING]
        if not self.block_new_requests:
            second += [self.waiting_requests[i] for i in self.waiting_requests_order]
        return self._finish(first + second, token_budget, cache_budget)


class PrefillFirstScheduler(Scheduler):
    def __init__(self, cache, safety_margin, max_requests_per_batch):
        super().__init__(cache, 0.0 if safety_margin is None else safety_margin, max_requests_per_batch)

    def schedule_batch(self, token_budget, cache_budget):
        first = [s for s in self.active_requests.values() if s.status == RequestStatus.PREFILLING]
        second = [s for s in self.active_requests.values() if s.status == RequestStatus.DECODING]
        if not self.block_new_requests:
            second += [self.waiting_requests[i] for i in self.waiting_requests_order]
        return self._finish(first + second, token_budget, cache_budget)


SCHEDULER_MAPPING = {"fifo": FIFOScheduler, "prefill_first": PrefillFirstScheduler}
