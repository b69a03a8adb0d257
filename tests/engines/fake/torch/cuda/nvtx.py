"""A fake torch.cuda.nvtx: a per-thread stack of open ranges and a log of pushes and pops (tests/engines/fake)."""

import threading

log = []  # (thread id, "push"|"pop", name)
_local = threading.local()
_lock = threading.Lock()


def _stack():
    if not hasattr(_local, "stack"):
        _local.stack = []
    return _local.stack


def range_push(name):
    _stack().append(name)
    with _lock:
        log.append((threading.get_ident(), "push", name))
    return len(_stack()) - 1


def range_pop():
    s = _stack()
    name = s.pop() if s else None
    with _lock:
        log.append((threading.get_ident(), "pop", name))
    return len(s)


def current():
    """The outermost open range on this thread (the one the join keys a launch by), or None."""
    s = _stack()
    return s[0] if s else None
