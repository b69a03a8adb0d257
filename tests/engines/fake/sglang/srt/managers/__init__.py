"""The fake sglang.srt.managers (tests/engines/fake/sglang)."""
