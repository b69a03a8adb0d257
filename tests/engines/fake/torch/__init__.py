"""A fake `torch` for the engine adapter's CPU tests: only torch.cuda.nvtx, which records each range push and pop with its thread (tests/engines/fake)."""

from . import cuda  # noqa: F401
