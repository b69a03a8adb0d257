"""The fake sglang.srt (tests/engines/fake/sglang)."""
