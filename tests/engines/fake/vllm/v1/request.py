"""The fake vllm.v1.request: a request's state as 0.34's scheduler keeps it (tests/engines/fake/vllm)."""

import enum
import time

from vllm.v1.engine import FinishReason


class RequestStatus(enum.IntEnum):
    WAITING = enum.auto()
    RUNNING = enum.auto()
    PREEMPTED = enum.auto()
    FINISHED_STOPPED = enum.auto()
    FINISHED_LENGTH_CAPPED = enum.auto()
    FINISHED_ABORTED = enum.auto()
    FINISHED_ERROR = enum.auto()

    @staticmethod
    def is_finished(status):
        return status > RequestStatus.PREEMPTED

    @staticmethod
    def get_finished_reason(status):
        return {
            RequestStatus.FINISHED_STOPPED: FinishReason.STOP,
            RequestStatus.FINISHED_LENGTH_CAPPED: FinishReason.LENGTH,
            RequestStatus.FINISHED_ABORTED: FinishReason.ABORT,
            RequestStatus.FINISHED_ERROR: FinishReason.ERROR,
        }.get(status)


class Request:
    def __init__(self, request_id, prompt_token_ids, sampling_params, pooling_params, client_index=0, arrival_time=None):
        self.request_id = request_id
        self.client_index = client_index
        self.prompt_token_ids = list(prompt_token_ids)
        self.num_prompt_tokens = len(self.prompt_token_ids)
        self.max_tokens = sampling_params.max_tokens
        self.arrival_time = arrival_time if arrival_time is not None else time.time()
        self.status = RequestStatus.WAITING
        self.num_computed_tokens = 0
        self.num_preemptions = 0
        self._output_token_ids = []

    @property
    def num_tokens(self):
        return self.num_prompt_tokens + len(self._output_token_ids)

    @property
    def num_output_tokens(self):
        return len(self._output_token_ids)

    def append_output_token_ids(self, token_ids):
        self._output_token_ids.extend(token_ids)

    def is_finished(self):
        return RequestStatus.is_finished(self.status)

    def get_finished_reason(self):
        return RequestStatus.get_finished_reason(self.status)
