"""Engine adapters for `twin --serve` (docs/engines.md): a lazy import hook that, when a serving engine's module is imported, wraps its scheduler to record (primary) or force (shadow) its steps."""

import importlib.abc
import sys
import threading

from . import common
from .common import say

# name -> (the module whose import triggers the adapter, the adapter's module in this package)
ENGINES = {
    "transformers": "transformers.generation.continuous_batching.continuous_api",
    "vllm": "vllm.v1.core.sched.scheduler",
    "sglang": "sglang.srt.managers.scheduler",
}

_state = {"installed": False, "engine": None, "status": None}
_lock = threading.Lock()


class _AfterExec(importlib.abc.Loader):
    """A module's own loader, plus a call once the module has run (the adapter's wrapping)."""

    def __init__(self, inner, after):
        self._inner = inner
        self._after = after

    def create_module(self, spec):
        return self._inner.create_module(spec)

    def exec_module(self, module):
        self._inner.exec_module(module)
        try:
            self._after(sys.modules.get(module.__name__, module))
        except Exception as e:  # the engine's import goes on whatever the adapter does
            say("installing the adapter failed (%s: %s): disabled" % (type(e).__name__, e))

    def __getattr__(self, name):  # get_data, get_filename, is_package, ... of the real loader
        return getattr(self._inner, name)


class _Hook(importlib.abc.MetaPathFinder):
    """Watches for the engines' modules; every other import is left to the other finders."""

    def __init__(self, watch):
        self.watch = dict(watch)  # module name -> callback(module)

    def find_spec(self, name, path=None, target=None):
        after = self.watch.get(name)
        if after is None:
            return None
        del self.watch[name]  # once
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(name, path, target)
            if spec is not None:
                break
        else:
            return None
        if spec.loader is None or not hasattr(spec.loader, "exec_module"):
            return spec
        spec.loader = _AfterExec(spec.loader, after)
        return spec


def _transformers_hooks(settings):
    from . import transformers as tf

    box = {}

    def on_transformers(mod):
        if "vllm" in settings_engines(settings) and "vllm" in sys.modules:
            return  # vLLM imports transformers: its server is the vllm adapter's, the transformers one stands aside
        if "sglang" in settings_engines(settings) and "sglang" in sys.modules:
            return  # so does SGLang
        version = str(getattr(mod, "__version__", "") or "")
        if not version:
            try:
                from importlib.metadata import version as dist_version

                version = dist_version("transformers")
            except Exception:
                version = "unknown"
        adapter = tf.TransformersAdapter(settings, version)
        box["adapter"] = adapter
        _state["engine"] = adapter
        adapter.check_version()

    def on_cb_api(mod):
        adapter = box.get("adapter")
        if adapter is None and "vllm" in sys.modules and "vllm" in settings_engines(settings):
            return
        if adapter is None and "sglang" in sys.modules and "sglang" in settings_engines(settings):
            return
        if adapter is None:  # continuous_api imported without `transformers` first: not possible, but say it
            on_transformers(sys.modules.get("transformers"))
            adapter = box["adapter"]
        scheduler_mod = sys.modules.get(tf.CB_SCHEDULER)
        if scheduler_mod is None:
            import importlib

            scheduler_mod = importlib.import_module(tf.CB_SCHEDULER)
        try:
            adapter.install(mod, scheduler_mod)
        except Exception as e:  # the wrappers pass through while the adapter is not active
            adapter.fail("installing", e)

    return {"transformers": on_transformers, tf.CB_API: on_cb_api}


def settings_engines(settings):
    return list(ENGINES) if settings.adapter == "auto" else [settings.adapter]


def _lazy_adapter(settings, name, make):
    """The adapter of engine `name`, made (make(settings, version)) and its version checked at its first use, and
    `guarded(what, call)`: an import callback that runs call(adapter, module), the adapter turned off if it raises."""
    box = {}

    def adapter():
        a = box.get("adapter")
        if a is None:
            mod = sys.modules.get(name)
            version = str(getattr(mod, "__version__", "") or "")
            if not version:
                try:
                    from importlib.metadata import version as dist_version

                    version = dist_version(name)
                except Exception:
                    version = "unknown"
            a = box["adapter"] = make(settings, version)
            _state["engine"] = a
            a.check_version()
        return a

    def guarded(what, call):
        def after(mod):
            a = adapter()
            try:
                call(a, mod)
            except Exception as e:
                a.fail(what, e)

        return after

    return adapter, guarded


def _vllm_hooks(settings):
    from . import vllm as vl

    adapter, guarded = _lazy_adapter(settings, "vllm", vl.VllmAdapter)

    def on_scheduler(a, mod):
        import importlib

        a.install(mod, sys.modules.get(vl.QUEUE) or importlib.import_module(vl.QUEUE))

    return {
        "vllm": lambda mod: adapter(),
        vl.SCHED: guarded("installing", on_scheduler),
        vl.EXECUTOR: guarded("installing the NVTX ranges", lambda a, mod: a.install_executor(mod)),
        vl.CORE: guarded("installing the warmup range", lambda a, mod: a.install_core(mod)),
    }


def _sglang_hooks(settings):
    from . import sglang as sg

    adapter, guarded = _lazy_adapter(settings, "sglang", sg.SglangAdapter)

    def on_tokenizer(a, mod):
        if not a.refused:
            sg.install_tokenizer(mod, a)

    return {
        "sglang": lambda mod: adapter(),
        sg.SCHED: guarded("installing", lambda a, mod: a.install(mod)),
        sg.TOKENIZER: guarded("installing the request ids", on_tokenizer),
    }


def install(env=None):
    """Called by the shim: reads what `twin` set and installs the import hook; never raises."""
    with _lock:
        if _state["installed"]:
            return
        _state["installed"] = True
    try:
        settings = common.Settings(env)
        if not settings.role:
            return  # not under `twin --serve`
        status = common.Status(settings.status_path, "", "")
        _state["status"] = status
        if settings.adapter == "off":
            status.set(message="engine adapters are off (--engine-adapter off): batches are not recorded or forced")
            status.write_if_absent()
            return
        names = settings_engines(settings)
        unknown = [n for n in names if n not in ENGINES]
        if unknown:
            status.set(
                message="no engine adapter named %r (known: %s, auto, off): batches will not be forced"
                % (settings.adapter, ", ".join(sorted(ENGINES)))
            )
            status.write_if_absent()
            say(status.doc["message"] + ": disabled")
            return
        watch = {}
        if "transformers" in names:
            watch.update(_transformers_hooks(settings))
        if "vllm" in names:
            watch.update(_vllm_hooks(settings))
        if "sglang" in names:
            watch.update(_sglang_hooks(settings))
        for b in settings.bad:
            status.append("warnings", b)
        status.set(
            message="no engine twinscope has an adapter for (%s) has been imported: batches are not recorded"
            % ", ".join(names)
        )
        status.write_if_absent()
        sys.meta_path.insert(0, _Hook(watch))
    except Exception as e:
        say("the adapters could not be installed (%s: %s): disabled" % (type(e).__name__, e))
