"""The fake vllm.v1.core.sched.output: the fields of 0.34's SchedulerOutput the adapter and the fake worker read (tests/engines/fake/vllm)."""

from dataclasses import dataclass, field


@dataclass
class NewRequestData:
    req_id: str
    prompt_token_ids: list
    num_computed_tokens: int


@dataclass
class CachedRequestData:
    req_ids: list
    num_computed_tokens: list


@dataclass
class SchedulerOutput:
    scheduled_new_reqs: list
    scheduled_cached_reqs: CachedRequestData
    num_scheduled_tokens: dict
    total_num_scheduled_tokens: int
    finished_req_ids: set
    preempted_req_ids: set = field(default_factory=set)
