"""The fake TokenizerManager of sglang.srt.managers.tokenizer_manager: generate_request gives a request without a rid a random one, as GenerateReqInput's normalisation does (tests/engines/fake/sglang)."""

import uuid


class TokenizerManager:
    def __init__(self, send):
        self.send = send  # where the tokenized request goes (the scheduler's input queue)

    def generate_request(self, obj, request=None):
        if obj.rid is None:
            obj.rid = uuid.uuid4().hex
        self.send(obj)
        return obj.rid
