"""A fake `transformers` for the engine adapter's CPU tests (tests/engines): only the continuous-batching names the adapter touches, version 5.17.0 unless FAKE_TRANSFORMERS_VERSION says otherwise."""

import os

__version__ = os.environ.get("FAKE_TRANSFORMERS_VERSION", "5.17.0")
