"""The fake batch processor and manager (5.17's names: ContinuousBatchProcessor with prepare_next_batch, _update_tp_group_state, _generation_step, update_batch, warmup; ContinuousBatchingManager with add_request, cancel_request and a generation thread) whose forward "launches" kernels into a log, keyed by the NVTX range open on its thread (tests/engines/fake)."""

import os
import queue
import threading

from . import scheduler as scheduler_module
from .cache import PagedAttentionCache
from .requests import RequestState, RequestStatus, next_token
from .scheduler import SCHEDULER_MAPPING, FIFOScheduler

LAUNCHES = []  # (thread id, the outermost open range, kernel, grid): the fake GPU's launches


def _current_range():
    try:
        from torch.cuda import nvtx

        return nvtx.current()
    except ImportError:
        return None


class BackgroundThreadStatus:
    DONT_STOP = 0
    FLUSH_AND_STOP = 1
    HARD_STOP = 2
    STOPPED = 3

    def __init__(self):
        self.local_status = self.DONT_STOP
        self.tp_status = self.DONT_STOP


class DistributedHelper:
    tp_size = 1


class CBConfig:
    def __init__(self, num_blocks, block_size, max_batch_tokens, max_requests_per_batch, scheduler_type, async_batching):
        self.num_blocks = num_blocks
        self.block_size = block_size
        self.max_batch_tokens = max_batch_tokens
        self.max_requests_per_batch = max_requests_per_batch
        self.scheduler_type = scheduler_type
        self.use_async_batching = async_batching
        self.cuda_graph_booleans = (False, False)
        self.q_padding_interval_size = 0
        self.safety_margin = None


def _drain(q):
    out = []
    while q is not None:
        try:
            out.append(q.get_nowait())
        except queue.Empty:
            break
    return out


class ContinuousBatchProcessor:
    def __init__(self, cache, cb_config, input_queue, scheduler, status, deliver, cancel_queue=None, io_lock=None):
        self.cache = cache
        self.cb_config = cb_config
        self.input_queue = input_queue
        self.cancel_queue = cancel_queue
        self.io_lock = io_lock or threading.Lock()
        self.scheduler = scheduler
        self.background_thread_status = status
        self.distributed_helper = DistributedHelper()
        self.max_batch_tokens = cache.max_batch_tokens
        self.use_async_batching = cb_config.use_async_batching
        self.deliver = deliver
        self.batch = []

    def _update_tp_group_state(self):
        # As 5.17: the new requests, then the cancellations, taken in one go (the manager's io_lock makes a request
        # and its cancellation queued together arrive together).
        with self.io_lock:
            for state in _drain(self.input_queue):
                self.scheduler.add_waiting_request(state)
            for rid in _drain(self.cancel_queue):
                self.scheduler.set_request_cancellation(rid)
        return self.background_thread_status.tp_status == BackgroundThreadStatus.HARD_STOP

    def offload_requests(self):
        """As 5.17's OffloadingManager (soft reset): evicts starved requests, newest first, never the last active."""
        sch = self.scheduler
        starved = sch.starved_requests
        free = self.cache.get_num_free_blocks()
        demand = sum(n for _, n in starved)
        victims = []
        while demand > free and starved and len(sch.active_requests) - len(victims) > 1:
            state, n = starved.pop()
            victims.append(state)
            demand -= n
            free += self.cache.blocks_in_use(state.request_id)
        victims.reverse()
        for state in victims:
            sch.finish_request(state.request_id)
            sch.add_waiting_request(state.create_equivalent_initial_request())
        sch.block_new_requests = bool(victims)
        return len(victims)

    def prepare_next_batch(self):
        if self._update_tp_group_state():
            return False
        self.scheduler.clear_cancelled_requests()
        if not self.scheduler.has_pending_requests():
            return False
        got, fast, nq, kv = self.scheduler.schedule_batch(self.max_batch_tokens, self.cache.num_pages)
        while got is None:
            if self.offload_requests() == 0:
                raise RuntimeError("No requests can be scheduled and no requests can be offloaded.")
            got, fast, nq, kv = self.scheduler.schedule_batch(self.max_batch_tokens, self.cache.num_pages)
        if not got:
            return False
        if self.scheduler.starved_requests:
            self.offload_requests()
        for fs in got:
            fs.state.position_offset += fs.length
        self.batch = got
        return True

    def _generation_step(self, model):
        q = sum(fs.length for fs in self.batch)
        where = _current_range()
        for kernel in ("fake_attention", "index_copy_kernel_impl"):
            LAUNCHES.append((threading.get_ident(), where, kernel, q))

    def update_batch(self):
        for fs in self.batch:
            state = fs.state
            if not fs.has_new_token:
                continue
            token = next_token(state.request_id, state.position_offset)
            if state.update_and_check_completion(token):
                self.scheduler.finish_request(state.request_id)
                self.scheduler.block_new_requests = False
                self.deliver(state)
        self.batch = []

    def warmup(self, model):
        LAUNCHES.append((threading.get_ident(), _current_range(), "fake_warmup", 0))


class ContinuousBatchingManager:
    def __init__(self, num_blocks=64, block_size=4, max_batch_tokens=32, max_requests_per_batch=16, scheduler_type="fifo"):
        self.config = CBConfig(
            num_blocks,
            block_size,
            max_batch_tokens,
            max_requests_per_batch,
            scheduler_type,
            bool(os.environ.get("FAKE_ASYNC_BATCHING")),
        )
        self.input_queue = queue.Queue()
        self.cancel_queue = queue.Queue()
        self.io_lock = threading.Lock()  # held by a caller that queues a request and its cancellation together
        self.batch_processor = None
        self.status = BackgroundThreadStatus()
        self.results = {}
        self.done = {}
        self._lock = threading.Lock()
        self._thread = None
        self.error = None

    def add_request(self, input_ids, request_id=None, max_new_tokens=None, eos_token_id=0):
        with self._lock:
            self.done[request_id] = threading.Event()
        self.input_queue.put(RequestState(request_id, input_ids, max_new_tokens, eos_token_id))
        return request_id

    def cancel_request(self, request_id):
        self.cancel_queue.put(request_id)

    def _deliver(self, state):
        with self._lock:
            self.results[state.request_id] = state.all_generated()
            ev = self.done.get(state.request_id)
        if ev is not None:
            ev.set()

    def start(self):
        self._thread = threading.Thread(target=self._run_generation_loop, name="cb-generation")
        self._thread.start()

    def stop(self, timeout=30):
        self.status.local_status = self.status.tp_status = BackgroundThreadStatus.FLUSH_AND_STOP
        if self._thread is not None:
            self._thread.join(timeout)

    def _create_batch_processor(self):
        c = self.config
        cache = PagedAttentionCache(c.num_blocks, c.block_size, c.max_batch_tokens)
        cls = SCHEDULER_MAPPING.get(c.scheduler_type, FIFOScheduler)
        sch = cls(cache=cache, safety_margin=c.safety_margin, max_requests_per_batch=c.max_requests_per_batch)
        return ContinuousBatchProcessor(
            cache, c, self.input_queue, sch, self.status, self._deliver, cancel_queue=self.cancel_queue, io_lock=self.io_lock
        )

    def _run_generation_loop(self):
        try:
            proc = self.batch_processor = self._create_batch_processor()
            proc.warmup(None)
            while True:
                if proc.prepare_next_batch():
                    proc._generation_step(None)
                    proc.update_batch()
                elif self.status.tp_status >= BackgroundThreadStatus.FLUSH_AND_STOP and not proc.scheduler.has_pending_requests():
                    break
                else:
                    threading.Event().wait(0.001)
        except Exception as e:  # as 5.17: the loop's error fails the requests, the thread ends
            self.error = e
            for ev in self.done.values():
                ev.set()


__all__ = ["ContinuousBatchProcessor", "ContinuousBatchingManager", "BackgroundThreadStatus", "scheduler_module"]
