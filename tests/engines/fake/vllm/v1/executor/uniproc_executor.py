"""The fake vllm.v1.executor.uniproc_executor: one worker in the EngineCore process that "launches kernels" on the calling thread (logged with the NVTX range open there) and samples a token that depends on the request only (tests/engines/fake/vllm)."""

import threading
from concurrent.futures import Future

from vllm.v1.outputs import ModelRunnerOutput

FAKE_ONLY = ("LAUNCHES", "current_range", "launch", "FAKE_ONLY")  # not vLLM's: the conformance check skips them
LAUNCHES = []  # (thread id, the outermost open range, kernel, grid): the fake GPU's launches


def current_range():
    try:
        from torch.cuda import nvtx

        return nvtx.current()
    except ImportError:
        return None


def launch(kernel, grid):
    LAUNCHES.append((threading.get_ident(), current_range(), kernel, grid))


class UniProcExecutor:
    def __init__(self, vllm_config):
        self.vllm_config = vllm_config
        self._fake_reqs = {}  # request id -> [prompt ids, tokens generated]
        self._fake_step = None

    def execute_model(self, scheduler_output, non_block=False):
        n = scheduler_output.num_scheduled_tokens
        for d in scheduler_output.scheduled_new_reqs:
            self._fake_reqs.setdefault(d.req_id, [list(d.prompt_token_ids), 0])
        computed = {d.req_id: d.num_computed_tokens for d in scheduler_output.scheduled_new_reqs}
        computed.update(zip(scheduler_output.scheduled_cached_reqs.req_ids,
                            scheduler_output.scheduled_cached_reqs.num_computed_tokens))
        self._fake_step = (n, computed)
        if n:
            launch("fake_attention", sum(n.values()))
        result = None if n else ModelRunnerOutput(req_ids=[], sampled_token_ids=[])
        if not non_block:
            return result
        f = Future()
        f.set_result(result)
        return f

    def sample_tokens(self, grammar_output, non_block=False):
        n, computed = self._fake_step
        ids, sampled = list(n), []
        for rid in ids:
            prompt, made = self._fake_reqs[rid]
            if computed[rid] + n[rid] >= len(prompt) + made:
                sampled.append([(sum(prompt[:5]) + 3 * made) % 100 + 1])
                self._fake_reqs[rid][1] += 1
            else:
                sampled.append([])
        launch("fake_sample", len(ids))
        out = ModelRunnerOutput(req_ids=ids, sampled_token_ids=sampled)
        if not non_block:
            return out
        f = Future()
        f.set_result(out)
        return f
