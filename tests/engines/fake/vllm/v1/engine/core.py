"""The fake vllm.v1.engine.core: 0.34's EngineCore step (schedule, execute_model, sample_tokens, update_from_output) and its start-up (tests/engines/fake/vllm)."""

from vllm.v1.core.sched.scheduler import Scheduler
from vllm.v1.executor import uniproc_executor


class EngineCore:
    def __init__(self, vllm_config, executor_class, log_stats, executor_fail_callback=None, include_finished_set=False):
        self.vllm_config = vllm_config
        self.model_executor = executor_class(vllm_config)
        kv_cache_config = self._initialize_kv_caches(vllm_config)
        self.scheduler = Scheduler(vllm_config=vllm_config, kv_cache_config=kv_cache_config, structured_output_manager=None,
                                   include_finished_set=include_finished_set, log_stats=log_stats,
                                   block_size=vllm_config.cache_config.block_size)

    def _initialize_kv_caches(self, vllm_config):
        uniproc_executor.launch("fake_profile_run", 0)
        return None

    def step(self):
        if not self.scheduler.has_requests():
            return {}, False
        scheduler_output = self.scheduler.schedule()
        future = self.model_executor.execute_model(scheduler_output, non_block=True)
        model_output = future.result()
        if model_output is None:
            model_output = self.model_executor.sample_tokens(None)
        outputs = self.scheduler.update_from_output(scheduler_output, model_output)
        return outputs, scheduler_output.total_num_scheduled_tokens > 0

    def shutdown(self):
        if self.scheduler:
            self.scheduler.shutdown()
