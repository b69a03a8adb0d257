"""Part of the fake vLLM (tests/engines/fake/vllm)."""
