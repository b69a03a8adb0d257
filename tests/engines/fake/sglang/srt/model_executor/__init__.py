"""The fake sglang.srt.model_executor (tests/engines/fake/sglang)."""
