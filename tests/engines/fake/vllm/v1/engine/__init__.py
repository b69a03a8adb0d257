"""The fake vllm.v1.engine: FinishReason, whose str() the adapter writes (tests/engines/fake/vllm)."""

import enum


class FinishReason(enum.IntEnum):
    STOP = 0
    LENGTH = 1
    ABORT = 2
    ERROR = 3

    def __str__(self):
        return ("stop", "length", "abort", "error")[self.value]
