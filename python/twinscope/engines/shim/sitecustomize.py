"""twinscope's shim (the only file in this folder, which `twin --serve` puts first on PYTHONPATH): runs the user's own sitecustomize, then installs the engine adapters' import hook (docs/engines.md)."""

import os
import sys


def _say(text):
    try:
        sys.stderr.write("twinscope adapter: " + text + "\n")
    except Exception:
        pass


def _run_users_sitecustomize(here):
    """The next `sitecustomize` on sys.path after this folder: Python would have run it without the shim."""
    import importlib.machinery
    import importlib.util

    rest = [p for p in sys.path if os.path.abspath(p or os.curdir) != here]
    spec = importlib.machinery.PathFinder.find_spec("sitecustomize", rest)
    if spec is None or spec.loader is None:
        return
    mod = importlib.util.module_from_spec(spec)
    sys.modules["sitecustomize"] = mod
    try:
        spec.loader.exec_module(mod)
    except Exception as e:  # as site.py does: said, and Python starts anyway
        _say("your sitecustomize (%s) raised %s: %s" % (spec.origin, type(e).__name__, e))


def _install_adapters(engines_dir):
    """Loads this package's engines folder under a private name (no sys.path change) and installs its hook."""
    import importlib.util

    name = "_twinscope_engines"
    spec = importlib.util.spec_from_file_location(
        name, os.path.join(engines_dir, "__init__.py"), submodule_search_locations=[engines_dir]
    )
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    mod.install()


def _main():
    here = os.path.dirname(os.path.abspath(__file__))
    try:
        _run_users_sitecustomize(here)
    except Exception as e:
        _say("looking for your sitecustomize failed (%s: %s)" % (type(e).__name__, e))
    if not os.environ.get("TWINSCOPE_ROLE") or os.environ.get("TWINSCOPE_ENGINE_ADAPTER", "").lower() == "off":
        if os.environ.get("TWINSCOPE_ROLE"):
            try:
                _install_adapters(os.path.dirname(here))  # writes the status file that says "off"
            except Exception:
                pass
        return
    try:
        _install_adapters(os.path.dirname(here))
    except Exception as e:
        _say("the engine adapters could not be loaded (%s: %s): disabled" % (type(e).__name__, e))


_main()
