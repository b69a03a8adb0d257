"""The fake torch.cuda: only nvtx (tests/engines/fake)."""

from . import nvtx  # noqa: F401
