"""A fake SGLang for the SGLang adapter's CPU tests: only the module paths, classes and fields the adapter touches, as in SGLang 0.5.23 (tests/engines/test_sglang_real.py checks them against the real package)."""

import os

import transformers  # noqa: F401  (SGLang loads transformers while it is imported: the transformers adapter must stand aside)

__version__ = os.environ.get("FAKE_SGLANG_VERSION", "0.5.23")
