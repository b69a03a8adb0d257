"""The fake vllm.config: the fields of 0.34's configs the adapter reads (tests/engines/fake/vllm)."""


class SchedulerConfig:
    def __init__(self, max_num_batched_tokens=32, max_num_seqs=16, enable_chunked_prefill=True,
                 long_prefill_token_threshold=0, policy="fcfs", async_scheduling=False):
        self.max_num_batched_tokens = max_num_batched_tokens
        self.max_num_seqs = max_num_seqs
        self.enable_chunked_prefill = enable_chunked_prefill
        self.long_prefill_token_threshold = long_prefill_token_threshold
        self.policy = policy
        self.async_scheduling = async_scheduling
        self.max_num_scheduled_tokens = None


class CacheConfig:
    def __init__(self, block_size=16, enable_prefix_caching=False):
        self.block_size = block_size
        self.enable_prefix_caching = enable_prefix_caching
        self.num_gpu_blocks = None


class ParallelConfig:
    def __init__(self, distributed_executor_backend=None):
        self.distributed_executor_backend = distributed_executor_backend


class CompilationConfig:
    def __init__(self, cudagraph_capture_sizes=None):
        self.cudagraph_capture_sizes = cudagraph_capture_sizes


class VllmConfig:
    def __init__(self, scheduler_config=None, cache_config=None, parallel_config=None, compilation_config=None):
        self.scheduler_config = scheduler_config or SchedulerConfig()
        self.cache_config = cache_config or CacheConfig()
        self.parallel_config = parallel_config or ParallelConfig("uni")
        self.compilation_config = compilation_config or CompilationConfig([])
