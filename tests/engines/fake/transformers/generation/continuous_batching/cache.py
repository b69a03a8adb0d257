"""The fake paged KV cache: block accounting only, the sizes the adapter records as capacity (tests/engines/fake)."""


class PagedAttentionCache:
    def __init__(self, num_blocks, block_size, max_batch_tokens):
        self.num_blocks = num_blocks
        self.block_size = block_size
        self.max_batch_tokens = max_batch_tokens
        self.num_pages = num_blocks * block_size
        self.use_prefix_sharing = False
        self.allow_block_sharing = False
        self.max_blocks_per_request = 0  # no decode fast path
        self.num_full_attention_groups = 1
        self._used = {}  # request id -> blocks

    def get_num_free_blocks(self):
        return self.num_blocks - sum(self._used.values())

    def allocate_blocks(self, n, request_id, allocated_blocks):
        if n > self.get_num_free_blocks():
            return None
        self._used[request_id] = self._used.get(request_id, 0) + n
        return n

    def blocks_needed(self, n, allocated_blocks):
        return n

    def blocks_in_use(self, request_id):
        return self._used.get(request_id, 0)

    def free_blocks(self, request_id):
        self._used.pop(request_id, None)
