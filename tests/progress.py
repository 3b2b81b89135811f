"""Runs launched processes (training, launchers, schedulers) for the tests and tells a hang from
slowness.

A fixed `timeout=` fails a slow run on a busy machine as surely as a hung one. Here a launch fails
only when its whole process tree makes no progress: no new output (stdout, stderr, or a file named
in `watch`, such as a SLURM job's log) and next to no CPU time used by any of its processes
(utime + stime from /proc/<pid>/stat, summed over the session the launch starts and every
descendant) for `quiet_s` seconds. "Next to no" is under IDLE_CPU_SHARE of one core: a hung tree
still polls (torchrun's agent used 0.08 s of CPU in 30 s, measured with 2 ranks stuck in a
barrier), a slow one computes. A generous `ceiling_s` stops a tree that keeps working forever.
The tree is killed either way, and LaunchTimeout says which it was ("hang: no output and no CPU
for N s" or "still working after the ceiling"), with the last lines of output. Processes of a tree
still running when its launch has ended are killed too.

Linux only (/proc). `run` is `subprocess.run(command, capture_output=True, text=True)` with those
limits; `run_together` runs several launches at once (two nodes of one job), any of them making
progress counts for all.
"""

from __future__ import annotations

import os
import signal
import subprocess
import threading
import time
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

QUIET_S = 120.0  # no output and no CPU for this long: a hang
CEILING_S = 1800.0  # still working after this long: stopped all the same
IDLE_CPU_SHARE = 0.02  # CPU below this share of one core counts as none
TAIL_LINES = 25
TICKS_PER_S = os.sysconf("SC_CLK_TCK")


class LaunchTimeout(AssertionError):
    """A launch stopped for a hang (`kind == "hang"`) or for running past the ceiling."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind


@dataclass(frozen=True)
class Launch:
    """One command to start: its arguments, environment and folder."""

    command: Sequence[str]
    env: dict[str, str] | None = None
    cwd: Path | str | None = None


def run(command: Sequence[str], *, cwd: Path | str | None = None, env: dict[str, str] | None = None,
        quiet_s: float = QUIET_S, ceiling_s: float = CEILING_S,
        watch: Sequence[Path] = ()) -> subprocess.CompletedProcess[str]:
    """`command` to its end, its output captured as text; LaunchTimeout on a hang or past the ceiling."""
    [done] = run_together([Launch(command, env, cwd)], quiet_s=quiet_s, ceiling_s=ceiling_s, watch=watch)
    return done


# torch 2.13 with gloo can abort a rank while the interpreter shuts down, after the script has
# finished (tests/equivalence/harness.py says how it was measured): only that failure is run again.
EXIT_ABORT = "terminate called without an active exception"
RANK_TRIES = 3


def run_ranks(command: Sequence[str], *, cwd: Path | str | None = None,
              env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """`run` for a launch of several ranks (torchrun and the like): run again, up to RANK_TRIES
    times, only when it failed with the abort at exit above; any other failure is returned."""
    for _ in range(RANK_TRIES):
        done = run(command, cwd=cwd, env=env)
        if done.returncode == 0 or EXIT_ABORT not in done.stdout + done.stderr:
            return done
    return done


def run_together(launches: Sequence[Launch], *, quiet_s: float = QUIET_S, ceiling_s: float = CEILING_S,
                 watch: Sequence[Path] = ()) -> list[subprocess.CompletedProcess[str]]:
    """Every launch started at once and run to its end: their finished processes, in order."""
    trees = [_Tree.start(launch) for launch in launches]
    try:
        _wait(trees, quiet_s, ceiling_s, list(watch))
    finally:
        for tree in trees:
            tree.kill()
    return [tree.finished() for tree in trees]


@dataclass
class _Output:
    """What one pipe has said so far, and when it last said something."""

    chunks: list[bytes] = field(default_factory=list)
    last_at: float = field(default_factory=time.monotonic)

    def read_all(self, pipe) -> None:  # type: ignore[no-untyped-def]
        for chunk in iter(lambda: os.read(pipe.fileno(), 65536), b""):
            self.chunks.append(chunk)
            self.last_at = time.monotonic()
        pipe.close()

    def text(self) -> str:
        return b"".join(self.chunks).decode("utf-8", errors="replace")


@dataclass
class _Tree:
    """A started launch: its process (a session leader), the readers of its pipes, and the CPU
    ticks last seen for each process of its tree (kept after a process ends)."""

    launch: Launch
    process: subprocess.Popen[bytes]
    outputs: tuple[_Output, _Output]
    readers: list[threading.Thread]
    ticks: dict[tuple[int, int], int] = field(default_factory=dict)

    @classmethod
    def start(cls, launch: Launch) -> _Tree:
        process = subprocess.Popen(list(launch.command), cwd=launch.cwd, env=launch.env, stdin=subprocess.DEVNULL,
                                   stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)
        outputs = (_Output(), _Output())
        readers = [threading.Thread(target=out.read_all, args=(pipe,), daemon=True)
                   for out, pipe in zip(outputs, (process.stdout, process.stderr))]
        for reader in readers:
            reader.start()
        return cls(launch, process, outputs, readers)

    def running(self) -> bool:
        return self.process.poll() is None or any(reader.is_alive() for reader in self.readers)

    def last_output_at(self) -> float:
        return max(out.last_at for out in self.outputs)

    def cpu_ticks(self, table: dict[int, tuple[int, int, int, int]]) -> int:
        """Every tick this tree's processes have used, as far as seen (`table`: see _processes)."""
        for pid in _members(self.process.pid, table):
            _ppid, _session, start, ticks = table[pid]
            self.ticks[(pid, start)] = ticks
        return sum(self.ticks.values())

    def tail(self) -> str:
        lines = (self.outputs[0].text() + self.outputs[1].text()).splitlines()
        return "\n".join(lines[-TAIL_LINES:])

    def kill(self) -> None:
        """What is left of the tree: the process if it has not been reaped, its session and
        descendants, and any process seen in the tree before that still runs (the same pid and
        start time, so never a stranger that reuses a pid); then the process is reaped."""
        table = _processes()
        left = _members(self.process.pid, table) if self.process.returncode is None else set()
        left |= {pid for pid, start in self.ticks if pid in table and table[pid][2] == start}
        for pid in left:
            try:
                os.kill(pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        self.process.wait()
        for reader in self.readers:
            reader.join(timeout=5)

    def finished(self) -> subprocess.CompletedProcess[str]:
        return subprocess.CompletedProcess(list(self.launch.command), self.process.returncode,
                                           self.outputs[0].text(), self.outputs[1].text())


def _wait(trees: list[_Tree], quiet_s: float, ceiling_s: float, watch: list[Path]) -> None:
    """Until every tree has ended and closed its pipes; LaunchTimeout when they all stop making
    progress for `quiet_s`, or at `ceiling_s`."""
    started = time.monotonic()
    poll_s = min(1.0, quiet_s / 10)
    cpu: deque[tuple[float, int]] = deque()  # (when, the trees' ticks so far), the last quiet_s of them
    sizes: dict[Path, int] = {}
    last_output = started
    while any(tree.running() for tree in trees):
        now = time.monotonic()
        table = _processes()
        cpu.append((now, sum(tree.cpu_ticks(table) for tree in trees)))
        last_output = max(last_output, *(tree.last_output_at() for tree in trees), _grown(watch, sizes, now))
        while len(cpu) > 1 and cpu[1][0] <= now - quiet_s:
            cpu.popleft()
        used_s = (cpu[-1][1] - cpu[0][1]) / TICKS_PER_S
        if now - last_output >= quiet_s and now - cpu[0][0] >= quiet_s and used_s < IDLE_CPU_SHARE * quiet_s:
            raise _stopped(trees, "hang", f"hang: no output and no CPU for {quiet_s:g} s (the process tree used "
                                          f"{used_s:.2f} s of CPU in that time)")
        if now - started >= ceiling_s:
            raise _stopped(trees, "ceiling", f"still working after the ceiling of {ceiling_s:g} s (output "
                                             f"{now - last_output:.0f} s ago, {used_s:.1f} s of CPU in the last "
                                             f"{quiet_s:g} s)")
        time.sleep(poll_s)


def _grown(watch: list[Path], sizes: dict[Path, int], now: float) -> float:
    """`now` when a watched file has grown since the last look, else 0."""
    grew = False
    for path in watch:
        size = path.stat().st_size if path.exists() else 0
        grew = grew or size != sizes.get(path, 0)
        sizes[path] = size
    return now if grew else 0.0


def _stopped(trees: list[_Tree], kind: str, why: str) -> LaunchTimeout:
    for tree in trees:
        tree.kill()
    said = "\n".join(f"$ {' '.join(map(str, tree.launch.command))}\n{tree.tail()}" for tree in trees)
    return LaunchTimeout(kind, f"{why}; killed. The last output:\n{said}")


def _processes() -> dict[int, tuple[int, int, int, int]]:
    """pid -> (parent pid, session id, start time, utime + stime in ticks) for every process now."""
    table: dict[int, tuple[int, int, int, int]] = {}
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            stat = Path(entry.path, "stat").read_text()
        except OSError:  # ended while we looked
            continue
        fields = stat[stat.rindex(")") + 2:].split()  # fields[0] is field 3 of proc(5), `state`
        table[int(entry.name)] = (int(fields[1]), int(fields[3]), int(fields[19]), int(fields[11]) + int(fields[12]))
    return table


def _members(root: int, table: dict[int, tuple[int, int, int, int]]) -> set[int]:
    """`root`, the processes of the session it leads, and every descendant (also one that left
    the session with setsid)."""
    children: dict[int, list[int]] = {}
    for pid, (ppid, _session, _start, _ticks) in table.items():
        children.setdefault(ppid, []).append(pid)
    members = {pid for pid, (_ppid, session, _start, _ticks) in table.items() if session == root}
    stack = [root] if root in table else []
    while stack:
        pid = stack.pop()
        members.add(pid)
        stack.extend(child for child in children.get(pid, []) if child not in members)
    return members
