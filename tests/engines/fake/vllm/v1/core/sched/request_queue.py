"""The fake vllm.v1.core.sched.request_queue: 0.34's FCFS queue (a deque) and its factory (tests/engines/fake/vllm)."""

from collections import deque
from enum import Enum


class SchedulingPolicy(Enum):
    FCFS = "fcfs"
    PRIORITY = "priority"


class FCFSRequestQueue(deque):
    def add_request(self, request):
        self.append(request)

    def pop_request(self):
        return self.popleft()

    def peek_request(self):
        return self[0]

    def prepend_request(self, request):
        self.appendleft(request)

    def remove_request(self, request):
        self.remove(request)

    def remove_requests(self, requests):
        drop = set(id(r) for r in requests)
        keep = [r for r in self if id(r) not in drop]
        self.clear()
        self.extend(keep)


def create_request_queue(policy):
    if policy == SchedulingPolicy.FCFS:
        return FCFSRequestQueue()
    raise ValueError(f"Unknown scheduling policy: {policy}")
