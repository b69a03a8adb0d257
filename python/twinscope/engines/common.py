"""What every engine adapter shares: the settings `twin --serve` passes, the status file, the step schedule (version 2) writer and reader, the request trace, and NVTX ranges (docs/engines.md)."""

import json
import os
import sys
import threading
import time

SCHEDULE_VERSION = 2
STATUS_EVERY_S = 1.0
DEFAULT_STEP_TIMEOUT_S = 60.0


def say(text):
    """One line on stderr, prefixed so a user can tell it from the server's own output; never raises."""
    try:
        sys.stderr.write("twinscope adapter: " + text + "\n")
        sys.stderr.flush()
    except Exception:
        pass


def now_us():
    return int(time.monotonic() * 1e6)


def iso_now():
    t = time.time()
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(t)) + ".%06dZ" % int((t % 1) * 1e6)


class Settings:
    """The environment `twin --serve` sets for a server (docs/engines.md, "What twin sets")."""

    def __init__(self, env=None):
        env = os.environ if env is None else env
        self.adapter = (env.get("TWINSCOPE_ENGINE_ADAPTER") or "auto").strip().lower()
        self.role = (env.get("TWINSCOPE_ROLE") or "").strip().lower()
        self.schedule_out = env.get("TWINSCOPE_SCHEDULE_OUT") or ""
        self.schedule_follow = env.get("TWINSCOPE_SCHEDULE_FOLLOW") or ""
        self.request_trace = env.get("TWINSCOPE_REQUEST_TRACE") or ""
        self.status_path = env.get("TWINSCOPE_ADAPTER_STATUS") or ""
        self.step_timeout_s = DEFAULT_STEP_TIMEOUT_S
        self.bad = []  # what in the settings is wrong (said in the status, the defaults are used)
        raw = env.get("TWINSCOPE_FOLLOW_STEP_TIMEOUT_S")
        if raw:
            try:
                self.step_timeout_s = float(raw)
                if not self.step_timeout_s > 0:
                    raise ValueError
            except ValueError:
                self.step_timeout_s = DEFAULT_STEP_TIMEOUT_S
                self.bad.append(
                    "TWINSCOPE_FOLLOW_STEP_TIMEOUT_S=%r is not a positive number of seconds: %g s is used"
                    % (raw, DEFAULT_STEP_TIMEOUT_S)
                )

    @property
    def forcing(self):
        return self.role == "shadow" and bool(self.schedule_follow)


class Status:
    """The adapter's status file (JSON, rewritten atomically at most every second while it changes, and at exit)."""

    def __init__(self, path, engine, version):
        self.path = path
        self._lock = threading.Lock()
        self._last_write = 0.0
        self._dirty = False
        self.doc = {
            "engine": engine,
            "version": version,
            "supported": False,
            "mode": "disabled",
            "message": "",
            "steps": 0,
            "forced_steps": 0,
            "timeouts": 0,
            "errors": [],
            "warnings": [],
            "capacity": {},
        }

    def set(self, **kv):
        with self._lock:
            self.doc.update(kv)
            self._dirty = True

    def add(self, key, n=1):
        with self._lock:
            self.doc[key] = self.doc.get(key, 0) + n
            self._dirty = True

    def append(self, key, text, limit=50):
        with self._lock:
            lst = self.doc.setdefault(key, [])
            if len(lst) < limit:
                lst.append(text)
            elif len(lst) == limit:
                lst.append("... more left out")
            self._dirty = True

    def maybe_write(self):
        if self._dirty and time.monotonic() - self._last_write >= STATUS_EVERY_S:
            self.write()

    def write_if_absent(self):
        """The first word of a server's first Python process; any later process (a worker, a tool the server
        runs) leaves an existing status file alone."""
        import os

        if self.path and not os.path.exists(self.path):
            self.write()

    def write(self):
        """Writes the file now (temporary file + rename, so a reader never sees half of it); never raises."""
        if not self.path:
            return
        try:
            with self._lock:
                text = json.dumps(self.doc, indent=1, sort_keys=True)
                self._dirty = False
                self._last_write = time.monotonic()
            tmp = self.path + ".tmp"
            with open(tmp, "w") as f:
                f.write(text + "\n")
            os.replace(tmp, self.path)
        except Exception as e:  # a status that cannot be written must not stop the server
            say("cannot write the status file %s: %s" % (self.path, e))
            self.path = ""


class ScheduleWriter:
    """The step schedule, version 2 (docs/engines.md): a header, one line per step, flushed per line, an end line."""

    def __init__(self, path):
        self.path = path
        self._f = None
        self._lock = threading.Lock()
        self.steps = 0
        self.closed = False
        if path:
            self._f = open(path, "w")

    def header(self, engine, engine_version, capacity, role):
        self._line(
            {
                "type": "header",
                "version": SCHEDULE_VERSION,
                "engine": engine,
                "engine_version": engine_version,
                "role": role,
                "capacity": capacity,
                "started": iso_now(),
            }
        )

    def step(self, doc):
        self._line(doc)
        self.steps += 1

    def end(self, reason):
        if self.closed:
            return
        self._line({"type": "end", "steps": self.steps, "reason": reason})
        self.closed = True
        with self._lock:
            if self._f:
                self._f.close()
                self._f = None

    def _line(self, doc):
        with self._lock:
            if self._f and not self.closed:
                self._f.write(json.dumps(doc, separators=(",", ":")) + "\n")
                self._f.flush()


def step_name(kind, index, batch):
    """The NVTX range name of a step, as the join parses it: `<kind> step <N> [id:tokens,...]`."""
    return "%s step %d [%s]" % (kind, index, ",".join("%s:%d" % (e["id"], e["tokens"]) for e in batch))


def step_kind(batch):
    """prefill (every entry feeds prompt tokens), decode (every entry one generated token) or mixed."""
    prefill = [e["offset"] < e.get("_prompt", 0) for e in batch]
    if all(prefill):
        return "prefill"
    if not any(prefill):
        return "decode"
    return "mixed"


class ScheduleError(Exception):
    pass


def read_schedule(path):
    """A primary's schedule: (header, [step docs in order], ended, note); raises ScheduleError saying what is wrong.

    A last line cut short (a primary killed mid-write) is left out and noted; a bad line before it is an error."""
    try:
        with open(path) as f:
            lines = [(n, line) for n, line in enumerate(f, 1) if line.strip()]
    except OSError as e:
        raise ScheduleError("the schedule to follow, %s, cannot be read (%s)" % (path, e.strerror or e))
    header, steps, ended, note = None, [], False, ""
    for k, (n, line) in enumerate(lines):
        try:
            doc = json.loads(line)
        except ValueError:
            if k == len(lines) - 1:
                note = "the last line of %s is cut short (the primary stopped mid-write): left out" % path
                break
            raise ScheduleError("line %d of %s is not JSON: not a schedule twinscope wrote" % (n, path))
        t = doc.get("type") if isinstance(doc, dict) else None
        if t == "header":
            header = doc
        elif t == "step":
            if doc.get("step") != len(steps):
                raise ScheduleError(
                    "line %d of %s is step %r where step %d was expected" % (n, path, doc.get("step"), len(steps))
                )
            batch = doc.get("batch")
            if not isinstance(batch, list) or not all(
                isinstance(e, dict) and isinstance(e.get("id"), str) and isinstance(e.get("tokens"), int) for e in batch
            ):
                raise ScheduleError("line %d of %s: a step's batch must list {id, tokens} entries" % (n, path))
            steps.append(doc)
        elif t == "end":
            ended = True
    if header is None:
        raise ScheduleError("%s has no header line: not a schedule" % path)
    if header.get("version") != SCHEDULE_VERSION:
        raise ScheduleError(
            "%s is a version %r schedule; engine adapters follow version %d"
            % (path, header.get("version"), SCHEDULE_VERSION)
        )
    return header, steps, ended, note


class RequestTrace:
    """The request trace (docs/demo-server.md, "Request trace"): one JSON line per request when it ends."""

    def __init__(self, path):
        self._f = open(path, "w") if path else None
        self._lock = threading.Lock()

    def write(self, doc):
        with self._lock:
            if self._f:
                self._f.write(json.dumps(doc, separators=(",", ":")) + "\n")
                self._f.flush()

    def close(self):
        with self._lock:
            if self._f:
                self._f.close()
                self._f = None


class Nvtx:
    """NVTX ranges: torch.cuda.nvtx where torch is loaded, else libnvToolsExt through ctypes, else none (said)."""

    def __init__(self):
        self.backend = "none"
        self._push = self._pop = None
        torch = sys.modules.get("torch")
        try:
            if torch is None:
                import torch  # noqa: F401  (the engines run on torch; a server without it has no CUDA kernels of torch)
            nv = torch.cuda.nvtx
            self._push, self._pop = nv.range_push, nv.range_pop
            self.backend = "torch.cuda.nvtx"
            return
        except Exception:
            pass
        try:
            import ctypes

            for name in ("libnvToolsExt.so.1", "libnvToolsExt.so", "libnvtx3interop.so.1"):
                try:
                    lib = ctypes.CDLL(name)
                    lib.nvtxRangePushA.argtypes = [ctypes.c_char_p]
                    self._push = lambda s, f=lib.nvtxRangePushA: f(s.encode("utf-8", "replace"))
                    self._pop = lib.nvtxRangePop
                    self.backend = name
                    return
                except (OSError, AttributeError):
                    continue
        except Exception:
            pass

    def push(self, name):
        if self._push is not None:
            self._push(name)

    def pop(self):
        if self._pop is not None:
            self._pop()
