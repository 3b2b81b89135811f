"""The processes of `migrate verify`: each launch started, watched for progress, and ended as a whole.

- Every process a launch starts carries MIGRATE_VERIFY_RUN=<token>:<launch> in its environment, and
  this process adopts the orphans (PR_SET_CHILD_SUBREAPER): `ProcessTree` finds all of them in /proc
  (a daemon that forks and calls setsid keeps the tag) and kills them as a whole.
- `supervise` runs one launch in its own session with its output in a file (a daemon that holds
  the output cannot keep verify waiting) and watches its progress (`Progress`): a rank progresses
  while its record file grows (a step, any event) or its processes use CPU time. The launch is
  stopped when no rank has progressed for `timeout` seconds (it hangs: the ranks wait), or at the
  ceiling `max_time` while some still work ("still working", never called a hang). Stopping sends
  SIGTERM (each rank dumps its stacks), then SIGKILL after a grace; when the launcher ends, what it
  left running is killed.
- SIGTERM and SIGHUP raise `Interrupted` while verify runs, so its cleanup runs; the cleanup itself
  runs with them blocked.
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import secrets
import signal
import socket
import subprocess
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from migrate import signals

TAG = "MIGRATE_VERIFY_RUN"  # every launched process carries TAG=<token>:<launch> in its environment
OUTPUT_TAIL = 20000  # characters of a launch's output kept
IDLE_SHARE = 0.01  # a rank using less CPU than 1% of a core (a polling thread) makes no progress
MIN_CPU = 0.05  # seconds of CPU time that count as progress however short the timeout
CLOCK_TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
NO_PROGRESS, STILL_WORKING = "no progress", "still working"


class Interrupted(KeyboardInterrupt):
    """SIGTERM or SIGHUP while verify runs: raised like Ctrl-C, so everything started is cleaned up."""

    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


@dataclass(frozen=True)
class Watch:
    """How a launch is watched: `timeout` seconds without progress is a hang (`start` more before
    every one of `ranks` ranks has started), `max_time` seconds in all is the ceiling."""

    timeout: float
    max_time: float
    ranks: int
    start: float = 0.0
    grace: float = 3.0  # seconds between SIGTERM (ranks dump their stacks) and SIGKILL


@dataclass(frozen=True)
class Outcome:
    """How a launch ended: `stopped` is "" (by itself), NO_PROGRESS or STILL_WORKING; `idle` the
    ranks that had made no progress for the timeout when it was stopped."""

    returncode: int
    stopped: str
    idle: tuple[int, ...]
    seconds: float


def supervise(tree: ProcessTree, name: str, command: list[str], cwd: Path, env: dict[str, str], log: Path,
              records: Path, watch: Watch) -> Outcome:
    """Run `command` as launch `name` until it ends, hangs or reaches the ceiling (see the module
    docstring); every process of it is gone when this returns."""
    begin = time.monotonic()
    with open(log, "wb") as output:
        process = subprocess.Popen(command, cwd=cwd, env={**env, **tree.tag(name)}, stdout=output,
                                   stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True)
    tree.launched(process.pid)
    progress = Progress(tree, name, records, watch, begin)
    stopped, idle = "", tuple[int, ...]()
    try:
        stopped = wait_for_progress(process, progress, watch, begin)
        if stopped:
            idle = progress.idle_ranks(time.monotonic())
            tree.stop(name, process, watch.grace)
    finally:
        tree.kill(name)
        process.wait()
    return Outcome(process.returncode, stopped, idle, time.monotonic() - begin)


def wait_for_progress(process: subprocess.Popen[bytes], progress: Progress, watch: Watch, begin: float) -> str:
    """"" once the process ends; NO_PROGRESS or STILL_WORKING when it must be stopped."""
    interval = max(0.05, min(1.0, watch.timeout / 20))
    while True:
        try:
            process.wait(timeout=interval)
            return ""
        except subprocess.TimeoutExpired:
            pass
        now = time.monotonic()
        progress.sample(now)
        if progress.hung(now):
            return NO_PROGRESS
        if now - begin >= watch.max_time:
            return STILL_WORKING


@dataclass
class Unit:
    """A rank (its process and their descendants, its record file) or the launcher's own processes:
    when it last progressed, and the CPU time it used since."""

    active_at: float
    cpu: dict[int, float] = field(default_factory=dict)  # pid -> CPU seconds at the last sample
    size: int = -1
    spent: float = 0.0

    def update(self, now: float, cpu: dict[int, float], size: int, threshold: float) -> None:
        self.spent += sum(max(0.0, used - self.cpu.get(pid, 0.0)) for pid, used in cpu.items())
        if size != self.size or self.spent >= threshold:
            self.active_at, self.spent = now, 0.0
        self.cpu, self.size = cpu, size


class Progress:
    """Each rank's progress, from its record file (DIR/rank<R>.jsonl, whose first line names its
    pid) and the CPU time of its processes; before every rank has started, the launcher's too."""

    def __init__(self, tree: ProcessTree, launch: str, records: Path, watch: Watch, now: float) -> None:
        self.tree, self.launch, self.records, self.watch = tree, launch, records, watch
        self.threshold = max(MIN_CPU, IDLE_SHARE * watch.timeout)
        self.pids: dict[int, int] = {}  # rank -> its runner's pid
        self.ranks: dict[int, Unit] = {}
        self.rest = Unit(active_at=now)

    def sample(self, now: float) -> None:
        table = process_table()
        self.find_ranks()
        members = self.tree.members(self.launch, table)
        for rank, pid in self.pids.items():
            mine = descendants({pid}, table) if pid in table else set()
            members -= mine
            size = file_size(self.records / f"rank{rank}.jsonl")
            self.ranks.setdefault(rank, Unit(active_at=now)).update(now, cpu_times(mine), size, self.threshold)
        self.rest.update(now, cpu_times(members), 0, self.threshold)

    def find_ranks(self) -> None:
        for path in self.records.glob("rank*.jsonl"):
            rank = path.stem.removeprefix("rank")
            if rank.isdigit() and int(rank) not in self.pids:
                pid = started_pid(path)
                if pid is not None:
                    self.pids[int(rank)] = pid

    def hung(self, now: float) -> bool:
        """No rank progressed for the timeout (nor the launcher, before every rank started)."""
        units = list(self.ranks.values())
        if len(self.ranks) < self.watch.ranks:
            idle_for = now - self.rest.active_at
            if idle_for < self.watch.timeout + self.watch.start:
                return False
        return all(now - unit.active_at >= self.watch.timeout for unit in units)

    def idle_ranks(self, now: float) -> tuple[int, ...]:
        return tuple(sorted(rank for rank, unit in self.ranks.items() if now - unit.active_at >= self.watch.timeout))


def started_pid(path: Path) -> int | None:
    """The pid the runner wrote in its first record line (the `start` event), once it is there."""
    try:
        with open(path, encoding="utf-8", errors="replace") as stream:
            first = stream.readline()
        pid = json.loads(first).get("pid") if first.endswith("\n") else None
    except (OSError, ValueError, AttributeError):
        return None
    return pid if isinstance(pid, int) else None


def file_size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return -1


def cpu_times(pids: set[int]) -> dict[int, float]:
    """pid -> CPU seconds it used (user and system, its own and its reaped children's)."""
    times = {}
    for pid in pids:
        try:
            with open(f"/proc/{pid}/stat", "rb") as stream:
                fields = stream.read().rsplit(b")", 1)[1].split()
            times[pid] = sum(int(value) for value in fields[11:15]) / CLOCK_TICKS
        except (OSError, IndexError, ValueError):
            continue
    return times


class ProcessTree:
    """Every process a verification starts: those carrying its tag in their environment (a daemon
    that forks and calls setsid keeps it), and the orphans this process adopts as a subreaper (with
    their descendants), found in /proc and killed as a whole."""

    def __init__(self) -> None:
        self.token = secrets.token_hex(8)
        self.me = os.getpid()
        self.subreaper = set_subreaper(True)  # the previous setting, None where unsupported
        self.children_before = {pid for pid, (parent, _) in process_table().items() if parent == self.me}
        self.launchers: set[int] = set()  # Popen's own children: reaped by Popen, not here

    def tag(self, launch: str) -> dict[str, str]:
        return {TAG: f"{self.token}:{launch}"}

    def launched(self, pid: int) -> None:
        self.launchers.add(pid)

    def members(self, launch: str = "", table: dict[int, tuple[int, str]] | None = None) -> set[int]:
        """The live processes of a launch (of every launch: ""), from `table` or /proc now."""
        marker = f"{TAG}={self.token}:{launch}".encode()
        table = process_table() if table is None else table
        roots = {pid for pid, (parent, state) in table.items()
                 if state != "Z" and pid != self.me and (carries(pid, marker) or (
                     parent == self.me and pid not in self.children_before))}
        return descendants(roots, table)

    def stop(self, launch: str, process: subprocess.Popen[bytes], grace: float) -> None:
        """SIGTERM to every process of the launch, and `grace` seconds to dump their stacks."""
        self.signal(self.members(launch), signal.SIGTERM)
        deadline = time.monotonic() + grace
        while time.monotonic() < deadline:
            process.poll()
            self.reap()
            if not self.members(launch):
                break
            time.sleep(0.1)

    def kill(self, launch: str = "") -> None:
        """SIGKILL until no process of the launch (all launches: "") is left."""
        for _ in range(100):
            found = self.members(launch)
            if not found:
                break
            self.signal(found, signal.SIGKILL)
            time.sleep(0.02)
            self.reap()
        self.reap()

    def close(self) -> None:
        self.kill()
        if self.subreaper is not None:
            set_subreaper(self.subreaper)

    def signal(self, pids: set[int], signum: int) -> None:
        for pid in pids:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signum)

    def reap(self) -> None:
        """Collect the adopted orphans that died (zombies that are this process's children)."""
        for pid, (parent, state) in process_table().items():
            if parent == self.me and state == "Z" and pid not in self.launchers | self.children_before:
                with contextlib.suppress(ChildProcessError):
                    os.waitpid(pid, os.WNOHANG)


def process_table() -> dict[int, tuple[int, str]]:
    """pid -> (parent pid, state) of every process /proc shows."""
    table = {}
    for entry in os.listdir("/proc") if os.path.isdir("/proc") else ():
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as stream:
                fields = stream.read().rsplit(b")", 1)[1].split()
        except (OSError, IndexError):
            continue
        table[int(entry)] = (int(fields[1]), fields[0].decode())
    return table


def carries(pid: int, marker: bytes) -> bool:
    try:
        with open(f"/proc/{pid}/environ", "rb") as stream:
            return any(variable.startswith(marker) for variable in stream.read().split(b"\0"))
    except OSError:
        return False


def descendants(roots: set[int], table: dict[int, tuple[int, str]]) -> set[int]:
    children: dict[int, list[int]] = {}
    for pid, (parent, state) in table.items():
        if state != "Z":
            children.setdefault(parent, []).append(pid)
    found, pending = set(roots), list(roots)
    while pending:
        for child in children.get(pending.pop(), ()):
            if child not in found:
                found.add(child)
                pending.append(child)
    return found


def set_subreaper(on: bool) -> bool | None:
    """Make this process adopt its orphaned descendants (Linux); the previous setting, or None."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        previous = ctypes.c_int(0)
        if libc.prctl(37, ctypes.byref(previous), 0, 0, 0) != 0:  # PR_GET_CHILD_SUBREAPER
            return None
        if libc.prctl(36, int(on), 0, 0, 0) != 0:  # PR_SET_CHILD_SUBREAPER
            return None
        return bool(previous.value)
    except (OSError, AttributeError):
        return None


@contextlib.contextmanager
def signals_raise() -> Iterator[None]:
    """SIGTERM and SIGHUP raise Interrupted while verify runs (main thread only; Ctrl-C already
    raises KeyboardInterrupt), so its cleanup runs."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def interrupt(signum: int, frame: object) -> None:
        raise Interrupted(signum)

    previous = {signum: signal.signal(signum, interrupt) for signum in (signal.SIGTERM, signal.SIGHUP)}
    try:
        yield
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)


signals_blocked = signals.deferred  # Ctrl-C, SIGTERM and SIGHUP wait until the cleanup is done


def output_tail(log: Path) -> str:
    with open(log, "rb") as stream:
        stream.seek(max(0, os.fstat(stream.fileno()).st_size - 4 * OUTPUT_TAIL))
        return stream.read().decode("utf-8", errors="replace")[-OUTPUT_TAIL:]



def remove_deepspeed_buffers(port: int | str) -> None:
    """DeepSpeed's CPU all-reduce op leaves its shared-memory buffers (2 x 66 MB per rank pair,
    named after the master port) in /dev/shm even when the script ends normally: remove them, or
    repeated runs fill shared memory."""
    for buffer in Path("/dev/shm").glob(f"deepspeed_allreduce_buffer_*_{port}_*"):
        buffer.unlink(missing_ok=True)


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])
