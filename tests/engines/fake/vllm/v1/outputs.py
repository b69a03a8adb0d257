"""The fake vllm.v1.outputs: what a step's model run returns (tests/engines/fake/vllm)."""

from dataclasses import dataclass, field


@dataclass
class ModelRunnerOutput:
    req_ids: list
    sampled_token_ids: list = field(default_factory=list)
