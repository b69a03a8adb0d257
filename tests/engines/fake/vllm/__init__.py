"""A fake vLLM for the vLLM adapter's CPU tests: only the module paths, classes and fields the adapter touches, as in vLLM 0.34.0 (tests/engines/test_vllm_real.py checks them against the real package)."""

import os

import transformers  # noqa: F401  (vLLM loads transformers while it is imported: the transformers adapter must stand aside)

__version__ = os.environ.get("FAKE_VLLM_VERSION", "0.34.0")
