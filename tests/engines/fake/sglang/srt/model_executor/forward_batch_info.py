"""The fake ForwardMode of sglang.srt.model_executor.forward_batch_info (tests/engines/fake/sglang)."""

from enum import IntEnum, auto


class ForwardMode(IntEnum):
    EXTEND = auto()
    DECODE = auto()
    MIXED = auto()
    IDLE = auto()

    def is_extend(self, include_draft_extend_v2=False):
        return self in (ForwardMode.EXTEND, ForwardMode.MIXED)

    def is_decode(self):
        return self == ForwardMode.DECODE

    def is_mixed(self):
        return self == ForwardMode.MIXED
