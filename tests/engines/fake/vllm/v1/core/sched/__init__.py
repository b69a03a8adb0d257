"""The fake vllm.v1.core.sched (tests/engines/fake/vllm)."""
