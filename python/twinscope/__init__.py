"""twinscope's Python API: open a trace, a twin/join run folder or a joined database and read it as pandas DataFrames (docs/python.md)."""

from ._cli import binary
from .data import Run, TwinscopeError, open, pandas_required

try:
    from importlib.metadata import PackageNotFoundError, version as _version

    try:
        __version__ = _version("twinscope")
    except PackageNotFoundError:  # imported from a source checkout
        __version__ = "unknown"
except ImportError:  # Python < 3.8
    __version__ = "unknown"

__all__ = ["Run", "TwinscopeError", "binary", "open", "pandas_required", "__version__"]
