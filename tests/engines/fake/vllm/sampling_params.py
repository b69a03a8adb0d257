"""The fake vllm.sampling_params: max_tokens only (tests/engines/fake/vllm)."""


class SamplingParams:
    def __init__(self, max_tokens=16, ignore_eos=False):
        self.max_tokens = max_tokens
        self.ignore_eos = ignore_eos
