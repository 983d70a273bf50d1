"""memtool.track(): profiling a block of code in a program memtool run did not start.

The block's trace is exactly what `memtool run` would have written for what
happened inside it: the collector library is loaded into this process (dlopen),
patches the libraries torch loaded (libc10's CPU allocator, libtorch_cpu's shared
memory, the CUDA runtime's calls) and streams to a companion `memtool run --track
PID`, which folds the stream with memtool run's own code and writes the trace
when the block ends. Leaving the block puts every patched call back: the
program runs on with none of memtool's code in its calls.

    with memtool.track("trace.json") as t:
        train()
    print(t.report())

Inside the block, regions, pause/resume, snapshots and `memtool ctl PID ...`
work as under memtool run; subprocesses started there are profiled too, and
fork children (a DataLoader's workers) stream to the same trace. Frees of blocks
allocated before the block began are counted apart (`earlier_frees`).
"""
import ctypes
import json
import os
import shutil
import subprocess
import sys
import sysconfig
import tempfile
import threading
import warnings
import weakref

from . import _collector, _modules

__all__ = ["track", "start", "stop", "Tracker"]

_lock = threading.Lock()
_current = None
_libraries = {}  # collector path -> (PyDLL, CDLL): loaded once, never unloaded

# The variables of memtool run's environment that a subprocess started inside the
# block needs to be profiled as memtool run's own are (cli/run/RunCommand.cpp).
_CHILD_VARIABLES = ("LD_PRELOAD", "MEMTOOL_SOCKET", "MEMTOOL_OPTIONS", "MEMTOOL_BACKUP_DIR",
                    "MEMTOOL_CONTROL_SOCKET", "MEMTOOL_TORCH_BRIDGE")


def _memtool_program():
    """The memtool program: $MEMTOOL_BIN, the one installed beside this package, or on PATH."""
    named = os.environ.get("MEMTOOL_BIN")
    if named:
        if not os.access(named, os.X_OK):
            raise RuntimeError(f"memtool.track: MEMTOOL_BIN names {named}, which is not an executable")
        return named
    here = os.path.dirname(os.path.abspath(__file__))
    candidates = [
        os.path.join(sysconfig.get_path("scripts"), "memtool"),        # the wheel's
        os.path.join(here, "..", "..", "..", "..", "bin", "memtool"),  # PREFIX/lib/memtool/python/memtool
    ]
    for c in candidates:
        if os.access(c, os.X_OK):
            return os.path.normpath(c)
    found = shutil.which("memtool")
    if found:
        return found
    raise RuntimeError("memtool.track: the memtool program was not found (pip install memtool, "
                       "or name it in MEMTOOL_BIN)")


def _load(path):
    """The collector at `path`, loaded once into the process's global scope (the CUDA
    injection and the torch bridge find its functions there)."""
    if path not in _libraries:
        mode = os.RTLD_GLOBAL | os.RTLD_NOW
        _libraries[path] = (ctypes.PyDLL(path, mode=mode), ctypes.CDLL(path, mode=mode))
        py, c = _libraries[path]
        py.memtool_track_start.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p,
                                           ctypes.c_char_p, ctypes.c_size_t]
        py.memtool_track_start.restype = ctypes.c_int
        c.memtool_track_stop.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_size_t]
        c.memtool_track_stop.restype = ctypes.c_int
        c.memtool_track_unhook.argtypes = [ctypes.c_char_p, ctypes.c_size_t]
        c.memtool_track_unhook.restype = ctypes.c_int
        c.memtool_collector_api_version.restype = ctypes.c_int
        if c.memtool_collector_api_version() != _collector.API_VERSION:
            raise RuntimeError(f"memtool.track: {path} is another version of memtool's collector")
    return _libraries[path]


def _events_option(events):
    """--events's words for track(events=...): None, a count of events or "all"."""
    if events is None:
        return []
    if events == "all" or (isinstance(events, int) and not isinstance(events, bool) and events > 0):
        return ["--events", str(events)]
    raise ValueError(f"memtool.track: events is a number of events above 0 or 'all', not {events!r}")


def _options(native=True, python=True, site="user", pausable="none", cuda="auto", backup_dir=None, quiet=True,
             wait_children=10, events=None, modules=False):
    """memtool run's options for the companion, from track()'s."""
    if cuda not in ("auto", "runtime-hooks", "off"):
        raise ValueError(f"memtool.track: cuda is 'auto', 'runtime-hooks' or 'off', not {cuda!r} "
                         "(CUPTI is injected only into a process memtool run starts)")
    if modules and not python:
        raise ValueError("memtool.track: modules=True needs python=True (the modules are named on "
                         "the Python stacks)")
    if cuda == "auto":
        # The runtime's calls are hooked where torch can use a GPU (its modules'
        # imports are many: patching them is most of a track's start), not where it cannot.
        torch = sys.modules.get("torch")
        cuda = "runtime-hooks" if torch is not None and torch.cuda.is_available() else "off"
    args = ["--site", site, "--pausable", pausable, "--cuda", cuda]
    args += ["--no-native"] if not native else []
    args += ["--no-python"] if not python else []
    args += ["--backup-dir", str(backup_dir)] if backup_dir is not None else []
    args += ["-q"] if quiet else []
    args += ["--wait-children", f"{wait_children:g}"]
    return args + _events_option(events)


_companions = weakref.WeakSet()  # those running, whose pipes a fork child must let go of


def _after_fork_in_child():
    """A fork child (a DataLoader's worker) must not hold the companion's pipes: the
    end of the block is the end of the companion's stdin, which a copy of its write
    end left open in a worker would never let come. Each is pointed at /dev/null,
    so that whatever closes it later closes nothing else."""
    for companion in list(_companions):
        companion._let_go_in_child()


os.register_at_fork(after_in_child=_after_fork_in_child)


class Companion:
    """The `memtool run --track PID` a track streams to: one per block, or with
    `serve` one for block after block (the pytest plugin's), each block's trace
    named on its stdin."""

    def __init__(self, args, serve=False, quiet=True):
        self.serve = serve
        self._last_error = ""
        self.hooked = None  # the collector whose hooks a block of this companion's left in place
        self._quiet = quiet
        self._errors = tempfile.TemporaryFile()
        command = [_memtool_program(), "run", "--track", str(os.getpid())] + (["--serve"] if serve else []) + args
        # Its own session: the terminal's Ctrl-C is the program's (the block then
        # ends, and the trace is written), not memtool's.
        self._proc = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                      stderr=self._errors, start_new_session=True, close_fds=True)
        line = self._proc.stdout.readline()
        if not line:
            self.close(raise_errors=False)
            raise RuntimeError("memtool.track: " + (self._last_error or "memtool run --track exited"))
        self.setup = json.loads(line)
        if not serve:
            self._proc.stdout.close()
        _companions.add(self)

    def _let_go_in_child(self):
        if self._proc is None:
            return
        null = os.open(os.devnull, os.O_RDWR)
        for stream in (self._proc.stdin, self._proc.stdout):
            if stream is not None and not stream.closed:
                os.dup2(null, stream.fileno())
        os.close(null)
        self._proc = None  # the parent's to wait for

    def _say(self, line):
        self._proc.stdin.write(line.encode() + b"\n")
        self._proc.stdin.flush()

    def begin(self, trace):
        if self.serve:
            self._say("trace " + trace)

    def end(self):
        """The block ended: a serving companion is told; another's stdin closes."""
        if self.serve:
            self._say("end")
        else:
            self._proc.stdin.close()

    def wait(self):
        """Until the block's trace is written; RuntimeError when it was not."""
        if not self.serve:
            return self.close(raise_errors=True)
        answer = self._proc.stdout.readline().decode("utf-8", "replace").rstrip("\n")
        if answer != "written":
            raise RuntimeError("memtool.track: the trace was not written: " +
                               (answer[len("failed "):] if answer.startswith("failed ") else self._stderr() or
                                "memtool exited"))

    def _stderr(self):
        self._errors.seek(0)
        return self._errors.read().decode("utf-8", "replace").strip()

    def close(self, raise_errors=True):
        _companions.discard(self)
        if self.hooked is not None and _current is None:
            out = ctypes.create_string_buffer(1024)
            self.hooked.memtool_track_unhook(out, len(out))
            self.hooked = None
        proc, self._proc = self._proc, None
        if proc is None:
            return
        for stream in (proc.stdin, proc.stdout):
            if stream and not stream.closed:
                stream.close()
        code = proc.wait()
        text = self._stderr()
        self._errors.close()
        self._last_error = text or f"memtool run --track exited with code {code}"
        if code != 0 and raise_errors:
            raise RuntimeError(f"memtool.track: the trace was not written (memtool exited with code {code}): "
                               f"{text}")
        if text and not self._quiet:
            print(text, file=sys.stderr)


class Tracker:
    """One tracked block. `trace`: where the trace is written (memtool run's -o).
    Options as memtool run's: native and Python stacks, the hotspot site ("user",
    "all", "library"), `pausable` ("all" or "none"), `cuda` ("auto": the runtime's
    calls are hooked where torch sees a GPU; "runtime-hooks"; "off". CUPTI can only
    be injected before a process starts), `backup_dir`, `quiet` (memtool's summary
    on stderr when False), `wait_children` (seconds a process forked in the block
    that outlives it, a DataLoader's persistent worker, gets to end its stream; it
    is written as incomplete after them), `events` (memtool run's --events: a
    number of events, or "all", kept in a log beside the trace), `modules` (memtool
    run's --modules: each nn.Module instance named on what its forward and backward
    allocate, for report --group-by module; the hooks go when the block ends).
    With `wait=False`, leaving the block does not wait for the trace to be written
    (naming native frames takes memtool tens of milliseconds): `wait()` or
    `report()` does. `companion`: a serving Companion to stream to (its options
    then hold)."""

    def __init__(self, trace="memtool.trace.json", *, wait=True, companion=None, **options):
        self.trace = os.path.abspath(os.fspath(trace))
        self._args = _options(**options) if companion is None else None
        self._quiet = options.get("quiet", True)
        self._modules = bool(options.get("modules", False)) and companion is None
        self._wait = wait
        self._companion = companion
        self._own = None  # the companion this track started, when it had none given
        self._waiting = False
        self._saved_env = None
        self._c = None
        self._py = None
        self.note = ""

    # ---- start -----------------------------------------------------------------
    def start(self):
        global _current
        with _lock:
            if _current is not None:
                raise RuntimeError("memtool.track: a track is already running in this process (one at a time)")
            import memtool
            if memtool.enabled:
                raise RuntimeError("memtool.track: this process runs under `memtool run`, which records all "
                                   "of it already")
            if sys.modules.get("torch") is None:
                try:
                    import torch  # noqa: F401  (what memtool records is torch's memory)
                except ImportError:
                    raise RuntimeError("memtool.track: torch is not installed here: memtool records "
                                       "torch's CPU and CUDA memory") from None
            companion = self._companion
            if companion is None:
                companion = self._own = Companion(["-o", self.trace] + self._args, quiet=self._quiet)
            try:
                companion.begin(self.trace)
                self._begin(companion.setup)
            except BaseException:
                if self._own is not None:
                    self._own.close(raise_errors=False)
                    self._own = None
                elif companion.serve:
                    companion.end()
                    companion.wait()
                raise
            memtool._collector_handle = _collector.Collector(self._c)
            memtool.enabled = True
            if self._modules:
                _modules.arm(self._py)
            _current = self
        return self

    def _begin(self, setup):
        self._py, self._c = _load(setup["collector"])
        py = self._py
        env = setup["environment"]
        self._enter_environment(env)
        err = ctypes.create_string_buffer(1024)
        backup = env.get("MEMTOOL_BACKUP_DIR")
        if py.memtool_track_start(env["MEMTOOL_SOCKET"].encode(), env["MEMTOOL_OPTIONS"].encode(),
                                  backup.encode() if backup else None, err, len(err)) != 0:
            self._leave_environment()
            raise RuntimeError(err.value.decode("utf-8", "replace"))

    def _enter_environment(self, env):
        self._saved_env = {name: os.environ.get(name) for name in _CHILD_VARIABLES}
        for name in _CHILD_VARIABLES:
            if name in env:
                value = env[name]
                if name == "LD_PRELOAD" and os.environ.get(name):
                    value = value.split(":")[0] + ":" + os.environ[name]
                os.environ[name] = value

    def _leave_environment(self):
        for name, value in (self._saved_env or {}).items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
        self._saved_env = None

    # ---- stop ------------------------------------------------------------------
    def stop(self, wait=None):
        """Ends the block: memtool's hooks come out, and the trace is written (this
        waits for it unless `wait`, or the Tracker's, is False). Raises RuntimeError
        when memtool could not write it."""
        global _current
        with _lock:
            if _current is not self:
                raise RuntimeError("memtool.track: this track is not running")
            import memtool
            out = ctypes.create_string_buffer(1024)
            # A serving companion's next block comes soon (pytest's next test): the
            # hooks stay, idle, until the companion closes (Companion.close).
            serving = self._companion is not None and self._companion.serve
            if self._modules:
                _modules.disarm()
            self._c.memtool_track_stop(1 if serving else 0, out, len(out))
            if serving:
                self._companion.hooked = self._c
            self.note = out.value.decode("utf-8", "replace")
            memtool._collector_handle = None
            memtool.enabled = False
            self._leave_environment()
            _current = None
        if self.note:
            warnings.warn("memtool.track: " + self.note, RuntimeWarning, stacklevel=3)
        (self._own or self._companion).end()
        self._waiting = True
        if self._wait if wait is None else wait:
            self.wait()

    def wait(self):
        """Waits until the trace is written (a no-op once it is). Raises RuntimeError
        when memtool could not write it."""
        if not self._waiting:
            return
        self._waiting = False
        (self._own or self._companion).wait()
        self._own = None

    # ---- as a context manager ----------------------------------------------------
    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()
        return False

    # ---- reading the trace ---------------------------------------------------------
    def report(self, *options):
        """`memtool report TRACE OPTIONS...`'s output, as text ("--lines", "--top", "5",
        "--format", "json", ...)."""
        if _current is not self:
            self.wait()
        done = subprocess.run([_memtool_program(), "report", self.trace, *options], capture_output=True)
        if done.returncode != 0:
            raise RuntimeError("memtool report: " + done.stderr.decode("utf-8", "replace").strip())
        return done.stdout.decode("utf-8", "replace")


def track(trace="memtool.trace.json", **options):
    """A Tracker for `with memtool.track(...) as t:` (options: Tracker's)."""
    return Tracker(trace, **options)


def start(trace="memtool.trace.json", **options):
    """Starts tracking now; memtool.stop() ends it. Returns the Tracker."""
    return Tracker(trace, **options).start()


def stop():
    """Ends the track memtool.start() began; returns its Tracker."""
    t = _current
    if t is None:
        raise RuntimeError("memtool.stop: no track is running")
    t.stop()
    return t
