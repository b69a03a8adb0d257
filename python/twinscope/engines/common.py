"""What every engine adapter shares: the settings `twin --serve` passes, the status file, the step schedule (version 2) writer and reader, the request trace, and NVTX ranges (docs/engines.md)."""

import atexit
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

    def end(self, reason, ended_after=None):
        """The end line. ended_after: {"finished": [...], "cancelled": [...]} of requests that ended after the last
        step (nothing was scheduled after them to carry them), kept on the end line rather than lost."""
        if self.closed:
            return
        doc = {"type": "end", "steps": self.steps, "reason": reason}
        for key, ids in (ended_after or {}).items():
            if ids:
                doc[key] = list(ids)
        self._line(doc)
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


def wrap(cls, name, how):
    """Replaces cls.name by how(the original), keeping the original's name, docstring and __wrapped__."""
    orig = cls.__dict__[name]
    wrapped = how(orig)
    wrapped.__name__ = getattr(orig, "__name__", name)
    wrapped.__qualname__ = getattr(orig, "__qualname__", name)
    wrapped.__doc__ = getattr(orig, "__doc__", None)
    wrapped.__wrapped__ = orig
    setattr(cls, name, wrapped)


class AdapterBase:
    """What the transformers, vLLM and SGLang adapters share: the lock file that makes one process per server the
    adapter, the version check, following the primary's schedule, opening the outputs, turning off, the end. A
    subclass sets the class attributes below and the hooks (_first_word, _flush_steps, _generated_id, _stop_message)."""

    ENGINE = ""  # the engine's name in the files and messages ("vllm")
    SUPPORTED = {}  # the versions this adapter knows
    SCHEDULER_NOUN = ""  # "a vLLM": "process N builds <a vLLM> scheduler too"
    SCHEDULER_ATTRS = ()  # what a Scheduler instance must hold
    CAPACITY_AT_LEAST = ()  # capacity keys where the shadow needs at least the primary's number
    CAPACITY_SAME = ()  # capacity keys the shadow must have as the primary has them
    CAPACITY_FLAGS = ""  # the engine's flags for them, said when they differ
    CAPACITY_MORE = ()  # capacity keys where the shadow's larger number is said (a warning: the steps still fit)
    CAPACITY_STOP = "the shadow's engine differs: %s (give both servers the same %s and scheduling flags)"
    CLAIM_AT_IMPORT = False  # True: the lock is taken when the engine is imported, before its version is checked
    SECOND_PROCESS = ""  # what another process of the server did ("imports transformers"); default: builds a scheduler
    WAITING_FOR = "the engine's scheduler"  # the status's message between the version check and the start

    def __init__(self, settings, version):
        self.settings = settings
        self.version = version
        self.status = Status(settings.status_path, self.ENGINE, version)
        self.active = False
        self.refused = False
        self.forcing = False
        self.sched = None  # the scheduler this adapter records (one per process)
        self.lock = threading.RLock()
        self.t0 = now_us()
        self.schedule = None
        self.trace = None
        self.nvtx = None
        self.follow, self.follow_header = [], None
        self.follow_ended = True  # the followed schedule has its end line
        self.next_forced = 0
        self.step_index = 0
        self.loose = []  # (kind, id) of requests that ended outside a step
        self.requests = {}  # id -> what the request trace needs
        self.ended = False
        self.lock_path = self.lock_fd = None
        for b in settings.bad:
            self.status.append("warnings", b)

    # ---- install ---------------------------------------------------------------------------------------

    def check_version(self):
        """At the engine's import: an unknown version is refused here, before the server serves. With
        CLAIM_AT_IMPORT, the first process of the server to import the engine takes the lock first; any other is
        left as it is (said) and keeps its hands off the status file."""
        if self.CLAIM_AT_IMPORT:
            if not self.claim():
                self.refused = True
                self.status.path = ""  # the other process's status
                return False
            atexit.register(self.release)
        if self.version not in self.SUPPORTED:
            self.refused = True
            msg = "%s %s is not one twinscope's adapter knows (known: %s): batches will not be forced" % (
                self.ENGINE,
                self.version,
                ", ".join(sorted(self.SUPPORTED)),
            )
            self.status.set(mode="disabled", supported=False, message=msg)
            if self.CLAIM_AT_IMPORT:  # this process holds the lock already (its release is registered)
                self.status.write()
                say(msg + ": disabled")
            elif self.claim(quiet=True):  # said once per server: by its first process (the API / HTTP server)
                self.status.write()
                say(msg + ": disabled")
                atexit.register(self.release)
            return False
        self.status.set(supported=True, message="%s %s: waiting for %s" % (self.ENGINE, self.version, self.WAITING_FOR))
        self._first_word()
        return True

    def _first_word(self):
        """After a known version is checked: the status written if this process is the first to say anything."""
        self.status.write_if_absent()

    def claim(self, quiet=False):
        """One process per server writes the files: the first whose Scheduler is built. A lock beside the status
        file, as the transformers adapter does."""
        base = self.settings.status_path or self.settings.schedule_out
        if not base:
            return True
        import fcntl

        self.lock_path = base + ".lock"
        fd = os.open(self.lock_path, os.O_CREAT | os.O_RDWR, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            holder = os.read(fd, 32).decode("ascii", "replace").strip()
            os.close(fd)
            self.lock_path = None
            if not quiet:
                did = self.SECOND_PROCESS or "builds %s scheduler" % self.SCHEDULER_NOUN
                say("process %d %s too, but process %s of this server has the adapter: this one is "
                    "left as it is" % (os.getpid(), did, holder or "?"))
            return False
        os.ftruncate(fd, 0)
        os.write(fd, str(os.getpid()).encode())
        self.lock_fd = fd
        return True

    def release(self):
        if self.lock_path:
            try:
                os.unlink(self.lock_path)
                os.close(self.lock_fd)
            except OSError:
                pass
            self.lock_path = None

    def adopt(self, sch):
        """A Scheduler was built: True if this process records it (it holds the lock and the scheduler has every
        attribute the adapter reads); else the adapter stands aside or is off (said)."""
        if self.refused or self.sched is not None:
            return False
        if not self.claim():
            self.refused = True
            return False
        self.sched = sch
        missing = [a for a in self.SCHEDULER_ATTRS if not hasattr(sch, a)]
        if missing:
            self.disable("%s %s's Scheduler lacks %s: the adapter is off" % (self.ENGINE, self.version, ", ".join(missing)))
            return False
        return True

    def start(self, capacity):
        """Reads the primary's schedule (a shadow), opens the schedule writer and the request trace, sets the status's
        mode and message; a schedule that cannot be followed is said and the steps are recorded only. capacity None:
        the engine's capacity is known later, the subclass writes the schedule's header then."""
        not_followed = ""
        if self.settings.forcing:
            try:
                header, steps, ended, note = read_schedule(self.settings.schedule_follow)
                if header.get("engine") != self.ENGINE:
                    raise ScheduleError(
                        "the schedule to follow is of engine %r, not %s" % (header.get("engine"), self.ENGINE)
                    )
            except ScheduleError as e:
                not_followed = str(e) + ": batches will not be forced"
            else:
                self.follow_header, self.follow = header, steps
                if note:
                    self.status.append("warnings", note)
                # A server stopped by a signal (transformers serve, SGLang) writes every step but no end line: that
                # is said only where it matters, when the shadow runs past the last step (stop_forcing).
                self.follow_ended = bool(ended)
                self.status.set(follow_ended=self.follow_ended)
                self.forcing = True
        self.schedule = ScheduleWriter(self.settings.schedule_out)
        if capacity is not None:
            self.schedule.header(self.ENGINE, self.version, capacity, self.settings.role)
        self.trace = RequestTrace(self.settings.request_trace)
        self.active = True
        self.status.set(
            supported=True,
            mode="force" if self.forcing else "record",
            message="forcing the primary's %d steps (%s)" % (len(self.follow), self.settings.schedule_follow)
            if self.forcing else not_followed or "recording every step",
        )
        if not_followed:
            say(not_followed)

    def check_capacity(self, mine, primary):
        """The shadow does not force when it has less room than the primary had (its steps may not fit)."""
        diff = []
        for key in self.CAPACITY_AT_LEAST:
            p, s = primary.get(key), mine.get(key)
            if isinstance(p, int) and isinstance(s, int) and s < p:
                diff.append("%s %d < the primary's %d" % (key, s, p))
        for key in self.CAPACITY_SAME:
            if key in primary and primary[key] != mine.get(key):
                diff.append("%s %s != the primary's %s" % (key, mine.get(key), primary[key]))
        for key in self.CAPACITY_MORE:
            p, s = primary.get(key), mine.get(key)
            if isinstance(p, int) and isinstance(s, int) and s > p:
                self.status.append("warnings", "%s %d > the primary's %d (more room: the steps still fit)" % (key, s, p))
        if diff:
            self.stop_forcing(self.CAPACITY_STOP % ("; ".join(diff), self.CAPACITY_FLAGS))

    def ensure_nvtx(self):
        if self.nvtx is None:
            self.nvtx = Nvtx()
            self.status.set(nvtx=self.nvtx.backend)
            if self.nvtx.backend == "none":
                self.status.append("warnings", "no NVTX library (torch.cuda.nvtx, libnvToolsExt): steps are not named")
        return self.nvtx

    def after_init(self, hook, where, when=lambda: True):
        """For common.wrap of an engine class's __init__: the original, then hook(the new object) when when() is
        true; a hook that raises turns the adapter off (said, naming where), the object is built all the same."""
        adapter = self

        def how(orig):
            def __init__(obj, *a, **kw):
                orig(obj, *a, **kw)
                if when():
                    try:
                        hook(obj)
                    except Exception as e:
                        adapter.fail(where, e)

            return __init__

        return how

    def in_range(self, name, when):
        """For common.wrap: the wrapped call inside one NVTX range `name` (the engine's warmup), opened when when()
        is true; a range that cannot be opened or closed turns the adapter off (said), the call goes on."""
        adapter = self

        def how(orig):
            def call(obj, *a, **kw):
                pushed = False
                if when():
                    try:
                        adapter.ensure_nvtx().push(name)
                        pushed = True
                    except Exception as e:
                        adapter.fail("opening the warmup range", e)
                try:
                    return orig(obj, *a, **kw)
                finally:
                    if pushed:
                        try:
                            adapter.nvtx.pop()
                        except Exception as e:
                            adapter.fail("closing the warmup range", e)

            return call

        return how

    # ---- turning off -----------------------------------------------------------------------------------

    def disable(self, message, error=None, supported=None):
        """Turns the adapter off for the rest of the run, says why (stderr and status); never raises."""
        with self.lock:
            was, self.active, self.forcing = self.active, False, False
            self.status.set(mode="disabled", message=message)
            if supported is not None:
                self.status.set(supported=supported)
            if error:
                self.status.append("errors", error)
            if was and self.schedule is not None:
                try:
                    self._flush_steps(False)
                    self.schedule.end("adapter disabled")
                except Exception:
                    pass
        say(message + ("" if message.endswith("disabled") else ": disabled"))
        self.status.write()

    def fail(self, where, e):
        self.disable("the %s adapter raised in %s (%s: %s); the server goes on without it"
                     % (self.ENGINE, where, type(e).__name__, e),
                     error="%s: %s: %s" % (where, type(e).__name__, e))

    def stop_forcing(self, why):
        with self.lock:
            if not self.forcing:
                return
            self.forcing = False
            if not self.follow_ended and self.next_forced >= len(self.follow):
                why += (" (the primary's schedule has no end line: the primary stopped before writing it, after its "
                        "%d steps)" % len(self.follow))
            said = self._stop_message(why)
        say(said)
        self.status.write()

    def _stop_message(self, why):
        """Sets the status for forcing stopped (under the lock); returns the line to say."""
        self.status.set(mode="force", message="forced %d of the primary's %d steps, then stopped forcing: %s; the "
                        "engine batched on its own from there" % (self.status.doc["forced_steps"], len(self.follow), why))
        return "stopped forcing the primary's steps at step %d: %s" % (self.next_forced, why)

    def _flush_steps(self, at_end):
        """Under the lock, before the end line: at the end (at_end) or when turned off, the steps recorded but not
        written yet."""

    # ---- the end ---------------------------------------------------------------------------------------

    def _generated_id(self, cid):
        """Whether a request's id in the schedule was made by the adapter, not given by the client."""
        return False

    def _trace_line(self, line, t, completion):
        now = now_us()
        line.update(prompt_tokens=t["prompt_tokens"], max_tokens=t["max_tokens"], completion_tokens=completion,
                    arrival_unix_us=t["arrival_unix_us"],
                    queued_us=(t["first_step_us"] - t["arrival_us"]) if "first_step_us" in t else None,
                    first_token_us=t.get("first_token_us"), done_us=now - t["arrival_us"], prefill_step=t["prefill_step"],
                    steps=t["steps"])
        if t.get("preempted"):
            line["preempted"] = t["preempted"]
        if self.trace is not None:
            self.trace.write(line)

    def close(self, reason):
        """At the scheduler's shutdown or exit: the steps left, the end line, requests still in flight (said)."""
        if self.ended or self.schedule is None:  # the schedule is opened (start) only once there is something to record
            return
        self.ended = True
        try:
            with self.lock:
                self._flush_steps(True)
                after = {"finished": [], "cancelled": []}
                for kind, i in self.loose:
                    after[kind].append(i)
                self.loose = []
                self.schedule.end("shutdown", after)
                unfinished = [i for i, t in self.requests.items() if not t.get("done")]
                for i in unfinished:
                    t = self.requests[i]
                    t["done"] = True
                    line = {"id": i, "id_generated": self._generated_id(i)}
                    if "engine_id" in t:  # the transformers adapter's requests have no id of the engine's own
                        line["engine_id"] = t["engine_id"]
                    line.update(status=503, error="the server stopped before it ended")
                    self._trace_line(line, t, 0)
                if unfinished:
                    self.status.append("warnings", "%d requests had not ended when the server stopped" % len(unfinished))
                if self.settings.role == "shadow" and self.follow and self.next_forced < len(self.follow):
                    self.status.append("warnings", "%d of the primary's %d steps were not forced"
                                       % (len(self.follow) - self.next_forced, len(self.follow)))
                if self.trace is not None:
                    self.trace.close()
        except Exception as e:
            self.status.append("errors", "at %s: %s: %s" % (reason, type(e).__name__, e))
        self.status.write()
        self.release()
