"""What a rank of `migrate verify` writes: every file it changes and everything it prints.

Installed by the runner (runner.py) in every rank before the script runs, whatever function the
script (or a library it calls) writes with:

- Files: an audit hook (`sys.addaudithook`) sees every `open` for writing, appending or creating
  (builtins.open, io.open, os.open, so pathlib, numpy.save, PIL's Image.save, matplotlib's savefig
  and logging's FileHandler too; torch.save, written by C++, is announced by the runner), and
  os.rename/replace, os.remove, os.mkdir, os.truncate, os.symlink and os.link. Each is recorded
  once per (what, path, line) as a `write` event with `op` (write, append, create, rename, remove,
  mkdir, link) and the line of the user's code (the script or a file of its folder, --root) that
  caused it, found by walking the stack through the libraries in between; a frame of DeepSpeed's,
  torch.distributed's or torch's private modules ends the walk (their own files are not the
  script's), as does the guard's (its private copies). Writes into verify's own records, /dev,
  /proc, ~/.cache, the Python installation and the private folders multiprocessing makes for
  itself in the temporary folder (`pymp-*`: a DataLoader's workers make and remove one per
  process) are left out.
- Output, at the file descriptors: fd 1 and 2 of the rank are pipes read by a thread that passes
  everything on to the launcher's stdout and stderr. `sys.stdout` and `sys.stderr` become streams
  that write straight to the launcher's descriptors and note, line by line, what the user's code
  writes (`print`, `sys.stdout.write`, logging's stream handlers, `traceback.print_exc`: the
  first frame outside those modules must be the user's) as `print` events. What reaches fd 1 or 2 without passing through them (a subprocess, native code,
  `os.write`) is read from the pipe and recorded as `output` events, attributed to the user's
  line that started a process (subprocess, os.system: an audit event) in the last PROCESS_WINDOW
  seconds, else to the user's line the main thread is at when it arrives (a ctypes call): best
  effort, since output of native code may arrive after the script moved on; output with no user
  line is recorded (up to MAX_UNATTRIBUTED lines) with `where` null and is not the script's.
  `sys.stdout.buffer` is noted like `sys.stdout`. Warnings are not the user's output (torch warns
  from ops on the user's lines), nor is what a library prints or logs on its own.

At most MAX_EVENTS print/output/write events are kept per rank (a script that prints every step
of a long run); those with a user's line left out are counted in a final `dropped` event.
"""

from __future__ import annotations

import codecs
import contextlib
import io
import os
import select
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from types import FrameType
from typing import Any, Protocol

MAX_TEXT = 300  # characters of a printed line kept in the record
MAX_EVENTS = 200  # print, output and write events kept per rank
MAX_UNATTRIBUTED = 20  # lines of output with no user line kept per rank
FINISH_WAIT = 1.0  # seconds the exiting rank waits for its output readers (a daemon may hold the pipe)
WRITE_DEPTH = 40  # frames between open() and the user's call (matplotlib's savefig is ~15 deep)
# Frames of these libraries end the search for the user's frame: what they print or write on
# their own (DeepSpeed's op builds, torch.distributed's rendezvous) is not the script's output.
LIBRARY_INTERNALS = ("/deepspeed/", "/torch/distributed/", "/torch/utils/cpp_extension", "/torch/_")
HERE = os.path.dirname(os.path.abspath(__file__))
GUARD = os.path.join(HERE, "guard.py")
# modules that write for the code that calls them: printing through them is the caller's printing
# (not warnings.py: a warning torch raises from an op on the user's line is the library's output)
PRINT_HELPERS = tuple(os.path.join(os.path.dirname(os.__file__), name)
                      for name in ("logging" + os.sep, "traceback.py", "pprint.py"))
# modules between a user's line and a process it starts (subprocess.run, os.popen)
PROCESS_HELPERS = tuple(os.path.join(os.path.dirname(os.__file__), name)
                        for name in ("subprocess.py", "os.py", "threading.py"))
OPEN_WRITES = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND
PROCESS_EVENTS = frozenset({"subprocess.Popen", "os.system", "os.posix_spawn", "os.spawn", "os.exec", "os.startfile"})
PROCESS_WINDOW = 5.0  # seconds after a process the user's code started during which unattributed output is its
# audit event -> (index of the path changed, what happens to it)
PATH_EVENTS = {"os.rename": (1, "rename"), "os.remove": (0, "remove"), "os.mkdir": (0, "mkdir"),
               "os.truncate": (0, "write"), "os.symlink": (1, "link"), "os.link": (1, "link")}


class Events(Protocol):
    """What the runner's Recorder offers: an event sink and where the user's code lies."""

    root: str
    folder: str

    def event(self, kind: str, **fields: Any) -> None: ...


def user_frame(frame: FrameType | None, root: str, folder: str, within: int = 1000,
               passing: tuple[str, ...] = ()) -> str | None:
    """`file:line` (relative to `root`) of the innermost frame at or above `frame` in the user's
    code (a file under `root`, not under verify's record `folder`), looking at most `within`
    frames; frames of `passing` files (and verify's own runner) are passed without counting. None
    when a library internal or the guard comes first."""
    root, folder = root.rstrip(os.sep) + os.sep, folder.rstrip(os.sep) + os.sep
    while frame is not None and within > 0:
        filename = frame.f_code.co_filename
        if filename.startswith(root) and not filename.startswith(folder):
            return f"{os.path.relpath(filename, root)}:{frame.f_lineno}"
        if filename == GUARD or any(part in filename for part in LIBRARY_INTERNALS):
            return None
        if not (filename.startswith(HERE) or filename.startswith(passing)):
            within -= 1
        frame = frame.f_back
    return None


class Budget:
    """The events of one rank: at most MAX_EVENTS (MAX_UNATTRIBUTED without a line); those of the
    user's lines left out are counted (a `dropped` event at the end)."""

    def __init__(self, recorder: Events) -> None:
        self.recorder = recorder
        self.kept = self.unattributed = self.dropped = 0
        self.lock = threading.Lock()
        os.register_at_fork(after_in_child=self._fresh_lock)  # a DataLoader worker forked mid-event

    def _fresh_lock(self) -> None:
        self.lock = threading.Lock()

    def event(self, kind: str, **fields: Any) -> None:
        with self.lock:
            anonymous = fields.get("where") is None
            if self.kept >= MAX_EVENTS or (anonymous and self.unattributed >= MAX_UNATTRIBUTED):
                self.dropped += not anonymous
                return
            self.kept += 1
            self.unattributed += anonymous
        self.recorder.event(kind, **fields)

    def close(self) -> None:
        if self.dropped:
            self.recorder.event("dropped", count=self.dropped)


class WriteWatch:
    """The audit hook that records the files a rank changes (see the module docstring), and notes
    the last line of the user's code that started a process."""

    def __init__(self, recorder: Events, budget: Budget) -> None:
        self.recorder, self.budget = recorder, budget
        self.ignored = (recorder.folder, "/dev/", "/proc/", os.path.expanduser("~/.cache"), sys.prefix, sys.base_prefix,
                        os.path.join(tempfile.gettempdir(), "pymp-"))
        self.seen: set[tuple[str, str, str | None]] = set()
        self.busy = threading.local()
        self.process: tuple[str, float] | None = None  # the user's line that last started a process, and when
        self.before_process: Callable[[], None] = lambda: None  # output of the processes before it: noted first

    def __call__(self, event: str, args: tuple[Any, ...]) -> None:
        if event in PROCESS_EVENTS:
            where = user_frame(sys._getframe(1), self.recorder.root, self.recorder.folder, 1, PROCESS_HELPERS)
            if where is not None:
                self.before_process()
                self.process = (where, time.monotonic())
            return
        if event != "open" and event not in PATH_EVENTS:
            return
        found = self.change(event, args)
        if found is None or getattr(self.busy, "on", False):
            return
        self.busy.on = True
        try:
            self.note(*found)
        finally:
            self.busy.on = False

    def change(self, event: str, args: tuple[Any, ...]) -> tuple[str, str] | None:
        """(what happens, the path) when the event changes a file, else None."""
        if event == "open":
            path, mode, flags = args
            mode = mode if isinstance(mode, str) else ""
            flags = flags if isinstance(flags, int) else 0
            if not (flags & OPEN_WRITES or any(c in mode for c in "wax+")):
                return None
            op = ("create" if "x" in mode or flags & os.O_EXCL else
                  "append" if "a" in mode or flags & os.O_APPEND else "write")
        else:
            index, op = PATH_EVENTS[event]
            path = args[index] if index < len(args) else None
        if not isinstance(path, (str, bytes, os.PathLike)):
            return None  # a file descriptor: opened before
        return op, os.path.abspath(os.fsdecode(path))

    def note(self, op: str, path: str) -> None:
        if path.startswith(self.ignored):
            return
        where = user_frame(sys._getframe(2), self.recorder.root, self.recorder.folder, WRITE_DEPTH)
        if where is None or (op, path, where) in self.seen:
            return
        self.seen.add((op, path, where))
        self.budget.event("write", op=op, path=path, where=where)


class Lines:
    """Text written in pieces (print writes each argument, then the end), as whole lines with the
    line of the user's code that wrote them."""

    def __init__(self, budget: Budget, kind: str, stream: str) -> None:
        self.budget, self.kind, self.stream = budget, kind, stream
        self.text = ""
        self.where: str | None = None
        self.lock = threading.Lock()
        self.anonymous = kind == "output"  # a line no user's code wrote: kept for output only
        os.register_at_fork(after_in_child=self._fresh_lock)  # a DataLoader worker forked mid-line

    def _fresh_lock(self) -> None:
        self.lock = threading.Lock()

    def add(self, text: str, where: str | None) -> None:
        with self.lock:
            if where != self.where and self.text:
                self.emit(self.text)
                self.text = ""
            self.where = where
            self.text += text
            *complete, self.text = self.text.split("\n")
            for line in complete:
                self.emit(line)

    def flush(self) -> None:
        with self.lock:
            if self.text:
                self.emit(self.text)
                self.text = ""

    def emit(self, line: str) -> None:
        if line.strip() and (self.where is not None or self.anonymous):
            self.budget.event(self.kind, text=line.rstrip()[:MAX_TEXT], where=self.where, stream=self.stream)


class Stream(io.TextIOBase):
    """sys.stdout or sys.stderr: writes go to the launcher's descriptor; what the user's code
    writes is noted. `fileno()` is the rank's fd 1 or 2 (the pipe), so a subprocess handed
    `sys.stdout` is seen there; `buffer` is noted too."""

    def __init__(self, target: io.TextIOWrapper, fd: int, lines: Lines, recorder: Events) -> None:
        super().__init__()
        self.target, self.fd, self.lines, self.recorder = target, fd, lines, recorder
        self.buffer = Bytes(self)

    def write(self, text: str) -> int:
        self.note(text, sys._getframe(1))
        written = self.target.write(text)
        self.target.flush()
        return written

    def note(self, text: str, frame: FrameType) -> None:
        where = user_frame(frame, self.recorder.root, self.recorder.folder, 1, PRINT_HELPERS)
        if where is not None or self.lines.text:
            self.lines.add(text, where)

    def writelines(self, lines: Any) -> None:
        for line in lines:
            self.write(line)

    def flush(self) -> None:
        self.target.flush()

    def fileno(self) -> int:
        return self.fd

    def isatty(self) -> bool:
        return self.target.isatty()

    def writable(self) -> bool:
        return True

    @property
    def encoding(self) -> str:  # type: ignore[override]  # typeshed declares it a plain attribute of TextIO; read-only here
        return self.target.encoding

    @property
    def errors(self) -> str | None:  # type: ignore[override]  # typeshed declares it a plain attribute of TextIO; read-only here
        return self.target.errors

    def __getattr__(self, name: str) -> Any:
        return getattr(self.target, name)


class Bytes(io.RawIOBase):
    """`sys.stdout.buffer`: bytes noted like text, then written to the launcher's descriptor."""

    def __init__(self, stream: Stream) -> None:
        super().__init__()
        self.stream = stream

    def write(self, data: Any) -> int:
        data = bytes(data)
        self.stream.target.flush()
        self.stream.note(data.decode("utf-8", errors="replace"), sys._getframe(1))
        _write_all(self.stream.target.buffer.raw.fileno(), data)  # type: ignore[attr-defined]  # a TextIOWrapper's buffer is a BufferedWriter; typeshed's BinaryIO has no `raw`
        return len(data)

    def writable(self) -> bool:
        return True

    def fileno(self) -> int:
        return self.stream.fd


class Output:
    """fd 1 and 2 of this process as pipes, read by a thread each (see the module docstring)."""

    def __init__(self, recorder: Events, budget: Budget, watch: WriteWatch) -> None:
        self.recorder, self.budget, self.watch = recorder, budget, watch
        self.main = threading.main_thread().ident
        self.pipes: dict[int, tuple[int, int]] = {}  # fd -> (read end, the launcher's descriptor)
        self.lines = {fd: Lines(budget, "output", name) for fd, name in ((1, "stdout"), (2, "stderr"))}
        self.printed = {fd: Lines(budget, "print", name) for fd, name in ((1, "stdout"), (2, "stderr"))}
        self.locks = {1: threading.Lock(), 2: threading.Lock()}
        self.decoders = {fd: codecs.getincrementaldecoder("utf-8")(errors="replace") for fd in (1, 2)}
        self.threads: list[threading.Thread] = []
        os.register_at_fork(after_in_child=self._forked)

    def _forked(self) -> None:
        """A forked child (a DataLoader worker) writes into the pipes; only this process reads them."""
        self.locks = {1: threading.Lock(), 2: threading.Lock()}
        self.watch.before_process = lambda: None

    def install(self) -> None:
        for fd, name in ((1, "stdout"), (2, "stderr")):
            old: io.TextIOWrapper = getattr(sys, name)
            with contextlib.suppress(Exception):
                old.flush()
            launcher = os.dup(fd)
            read, write = os.pipe()
            os.dup2(write, fd)
            os.close(write)
            self.pipes[fd] = (read, launcher)
            target = io.TextIOWrapper(io.open(launcher, "wb", closefd=False), encoding=old.encoding,  # noqa: SIM115
                                      errors=old.errors, line_buffering=True, write_through=True)
            setattr(sys, name, Stream(target, fd, self.printed[fd], self.recorder))
            thread = threading.Thread(target=self.pump, args=(fd,), name=f"migrate-verify-{name}", daemon=True)
            thread.start()
            self.threads.append(thread)

    def pump(self, fd: int) -> None:
        """Until the pipe ends: wait for output, then pass it on and note it."""
        read = self.pipes[fd][0]
        while True:
            try:
                select.select([read], [], [])
            except InterruptedError:
                continue
            except (OSError, ValueError):
                return
            if not self.drain(fd):
                return

    def drain(self, fd: int) -> bool:
        """Pass on and note what the pipe holds now, never waiting; False at its end. Only under
        the lock, and only when select says there is something, does anyone read the pipe."""
        read, launcher = self.pipes[fd]
        with self.locks[fd]:
            while select.select([read], [], [], 0)[0]:
                try:
                    data = os.read(read, 65536)
                except InterruptedError:
                    continue
                except OSError:
                    return False
                if not data:
                    return False
                _write_all(launcher, data)
                self.lines[fd].add(self.decoders[fd].decode(data), self.where_now())
        return True

    def drain_all(self) -> None:
        for fd in self.pipes:
            self.drain(fd)

    def where_now(self) -> str | None:
        """The user's line the main thread is at, or that started a process moments ago."""
        started = self.watch.process
        if started is not None and time.monotonic() - started[1] < PROCESS_WINDOW:
            return started[0]
        frame = sys._current_frames().get(self.main) if self.main is not None else None
        return user_frame(frame, self.recorder.root, self.recorder.folder, 1, PROCESS_HELPERS)

    def finish(self) -> None:
        """Before the process exits: flush Python's and C's buffers, pass on what the pipes hold."""
        for name in ("stdout", "stderr"):
            with contextlib.suppress(Exception):
                getattr(sys, name).flush()
        with contextlib.suppress(Exception):
            import ctypes

            ctypes.CDLL(None).fflush(None)
        for fd, (_, launcher) in self.pipes.items():
            os.dup2(launcher, fd)  # the pipe's last write end here: its reader sees the end
        for thread in self.threads:
            thread.join(timeout=FINISH_WAIT)
        for fd in self.pipes:
            with contextlib.suppress(OSError, ValueError):
                self.drain(fd)
            self.lines[fd].flush()
            self.printed[fd].flush()
        self.budget.close()


def install(recorder: Events) -> Output:
    """The write hook and the output capture of this rank; call `finish()` on the result before exiting."""
    budget = Budget(recorder)
    watch = WriteWatch(recorder, budget)
    sys.addaudithook(watch)
    output = Output(recorder, budget, watch)
    watch.before_process = output.drain_all
    output.install()
    return output


def _write_all(fd: int, data: bytes) -> None:
    while data:
        try:
            data = data[os.write(fd, data):]
        except InterruptedError:
            continue
        except OSError:
            return  # the launcher stopped reading
