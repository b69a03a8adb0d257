"""The fake Req and ScheduleBatch of sglang.srt.managers.schedule_batch: the fields the adapter reads (tests/engines/fake/sglang)."""

from sglang.srt.model_executor.forward_batch_info import ForwardMode  # noqa: F401

FAKE_ONLY = ("SeqLens", "FAKE_ONLY")  # not SGLang's: the conformance check skips them


class FINISH_LENGTH:
    def to_json(self):
        return {"type": "length"}


class FINISH_ABORT:
    def to_json(self):
        return {"type": "abort"}


class SamplingParams:
    def __init__(self, max_new_tokens):
        self.max_new_tokens = max_new_tokens


class Req:
    def __init__(self, rid, origin_input_ids, sampling_params):
        self.rid = rid
        self.origin_input_ids = list(origin_input_ids)
        self.output_ids = []
        self.sampling_params = sampling_params
        self.finished_reason = None
        self.computed = 0  # tokens in the KV cache (fake only)

    def finished(self):
        return self.finished_reason is not None


class SeqLens(list):
    def tolist(self):
        return list(self)


class ScheduleBatch:
    def __init__(self, reqs, forward_mode=None, extend_lens=None, prefix_lens=None, seq_lens_cpu=None):
        self.reqs = list(reqs)
        self.forward_mode = forward_mode
        self.extend_lens = extend_lens
        self.prefix_lens = prefix_lens
        self.seq_lens_cpu = SeqLens(seq_lens_cpu or [])

    def is_empty(self):
        return not self.reqs

    def batch_size(self):
        return len(self.reqs)

    def copy(self):
        return ScheduleBatch(self.reqs, self.forward_mode, self.extend_lens, self.prefix_lens, list(self.seq_lens_cpu))
