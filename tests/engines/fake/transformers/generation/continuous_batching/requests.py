"""The fake engine's request state (5.17's names: RequestState, FutureRequestState, RequestStatus), tokens made up from the request id and position so they do not depend on batching (tests/engines/fake)."""

import os
import zlib
from enum import IntEnum

VOCAB = 40
EOS = 0


class RequestStatus(IntEnum):
    PENDING = 0
    PREFILLING = 1
    DECODING = 2
    FINISHED = 3
    FAILED = 4


def next_token(request_id, position):
    """The token a request samples at a position: the same in every run and every batch."""
    return zlib.crc32(("%s:%d" % (request_id, position)).encode()) % VOCAB


class RequestState:
    def __init__(self, request_id, initial_tokens, max_new_tokens=20, eos_token_id=EOS, true_initial=0):
        self.request_id = request_id
        self.initial_tokens = list(initial_tokens)
        self.max_new_tokens = max_new_tokens
        self.remaining_prefill_tokens = self.initial_tokens[:]
        self.tokens_to_process = []
        self.generated_tokens = []
        self.position_offset = 0
        self.allocated_blocks = 0
        self.status = RequestStatus.PENDING
        self.num_children = 0
        self.is_cpu_offloaded = False
        self.error = None
        self._eos_token_ids = {eos_token_id} if eos_token_id is not None else set()
        self._true_initial_tokens = true_initial
        self._new_tokens_limit = max_new_tokens

    def current_len(self):
        return self.position_offset

    def generated_len(self):
        return len(self.generated_tokens)

    def update_and_check_completion(self, token_id):
        if self.status != RequestStatus.DECODING:
            return False
        self.generated_tokens.append(token_id)
        self.tokens_to_process = [token_id]
        if token_id in self._eos_token_ids or self.generated_len() >= self._new_tokens_limit:
            self.status = RequestStatus.FINISHED
            return True
        return False

    def create_equivalent_initial_request(self):
        """A soft reset (the request's cache was evicted): prompt + generated, prefilled again."""
        new = RequestState(
            self.request_id,
            self.initial_tokens + self.generated_tokens,
            max_new_tokens=self.max_new_tokens - self.generated_len(),
            true_initial=self._true_initial_tokens or len(self.initial_tokens),
        )
        new._eos_token_ids = set(self._eos_token_ids)
        new.prior_generated = getattr(self, "prior_generated", []) + self.generated_tokens
        return new

    def all_generated(self):
        return getattr(self, "prior_generated", []) + self.generated_tokens


# FAKE_ENGINE_BREAK=1: an engine whose FutureRequestState renamed query_length (the adapter must fail and say so,
# and the engine must go on serving).
_BROKEN = bool(os.environ.get("FAKE_ENGINE_BREAK"))


class FutureRequestState:
    def __init__(self, state, has_new_token, complete_blocks, query_length):
        self.state = state
        self.has_new_token = has_new_token
        self.complete_blocks = complete_blocks
        if _BROKEN:
            self.q_len = query_length
        else:
            self.query_length = query_length

    @property
    def length(self):
        return self.q_len if _BROKEN else self.query_length
