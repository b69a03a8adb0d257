"""The fake TokenizerManager of sglang.srt.managers.tokenizer_manager: generate_request gives a request without a rid a random one, as GenerateReqInput's normalisation does; GenerateReqInput.regenerate_rid as 0.5.23's (tests/engines/fake/sglang)."""

import uuid


class TokenizerManager:
    def __init__(self, send):
        self.send = send  # where the tokenized request goes (the scheduler's input queue)

    def generate_request(self, obj, request=None):
        if obj.rid is None:
            obj.rid = uuid.uuid4().hex
        self.send(obj)
        return obj.rid


class GenerateReqInput:
    """Only what the adapter wraps: regenerate_rid, which 0.5.23's parallel sampling (n > 1) calls on a copy of the
    request for its prefix and for each sample (the real class is sglang.srt.managers.io_struct's)."""

    def __init__(self, rid=None):
        self.rid = rid

    def regenerate_rid(self):
        self.rid = uuid.uuid4().hex
        return self.rid
