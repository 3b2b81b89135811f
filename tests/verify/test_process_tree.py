"""`migrate verify` owns every process it starts, and says where a hang waits.

A launch's processes carry verify's tag (a daemon that forks and calls setsid keeps it) or are
adopted by verify (an orphan that dropped its environment): all of them are killed at the timeout,
when the launcher exits, and on SIGTERM, and a daemon holding the output cannot keep verify
waiting. The fast tests drive session.Launches and ProcessTree with plain Python processes; the
slow ones run `migrate verify` itself.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from migrate.verify import session
from migrate.verify.checks import Launch, RankRecord, Source, check_hang, expected_steps

ROOT = Path(__file__).parents[2]


def alive(pid: int) -> bool:
    """Running: present in /proc and not a zombie."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as stream:
            return stream.read().rsplit(b")", 1)[1].split()[0] != b"Z"
    except OSError:
        return False


def pids(folder: Path) -> list[int]:
    return [int(p.name) for p in folder.iterdir()] if folder.exists() else []


def wait_for(condition, seconds: float) -> bool:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.1)
    return condition()


def kill_all(found: list[int]) -> None:
    for pid in found:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


# A launcher that starts a daemon (fork, setsid, fork) holding its output, and one that starts an
# orphan with an empty environment (no tag: only adoption finds it), then exits.
DAEMON = """
import os, subprocess, sys, time
folder = sys.argv[1]
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        open(os.path.join(folder, str(os.getpid())), "w").close()
        while True:
            time.sleep(1)
    os._exit(0)
orphan = subprocess.Popen(["sleep", "600"], env={}, start_new_session=True)
open(os.path.join(folder, str(orphan.pid)), "w").close()
print("launcher done", flush=True)
"""


def launches(tmp_path: Path, timeout: float = 30) -> tuple[session.Launches, session.ProcessTree]:
    work = tmp_path / "work"
    work.mkdir()
    processes = session.ProcessTree()
    sandbox = session.Sandbox(folder=tmp_path, work=work)
    return session.Launches(session.VerifyOptions(timeout=timeout), sandbox, processes), processes


def test_a_daemon_holding_the_output_neither_delays_nor_outlives_a_launch(tmp_path: Path) -> None:
    started = tmp_path / "pids"
    started.mkdir()
    runs, processes = launches(tmp_path)
    try:
        begin = time.monotonic()
        launch = runs.run("original", [sys.executable, "-c", DAEMON, str(started)], tmp_path)
        assert time.monotonic() - begin < 10
        assert "launcher done" in launch.output and launch.returncode == 0 and not launch.timed_out
        assert len(pids(started)) == 2
        assert wait_for(lambda: not any(alive(pid) for pid in pids(started)), 5)
    finally:
        processes.close()
        kill_all(pids(started))


def test_past_the_timeout_every_process_of_a_launch_is_killed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Even one that ignores SIGTERM: SIGKILL follows."""
    started = tmp_path / "pids"
    started.mkdir()
    monkeypatch.setattr(session, "START_ALLOWANCE", 0.0)
    monkeypatch.setattr(session, "TERM_GRACE", 0.5)
    stubborn = DAEMON.replace('print("launcher done", flush=True)',
                              'import signal\nsignal.signal(signal.SIGTERM, signal.SIG_IGN)\ntime.sleep(600)')
    runs, processes = launches(tmp_path, timeout=1)
    try:
        begin = time.monotonic()
        launch = runs.run("converted", [sys.executable, "-c", stubborn, str(started)], tmp_path)
        assert time.monotonic() - begin < 1 + session.TERM_GRACE + 5
        assert launch.timed_out
        assert wait_for(lambda: not any(alive(pid) for pid in pids(started)), 5)
    finally:
        processes.close()
        kill_all(pids(started))


def test_closing_the_tree_kills_tagged_and_adopted_processes_and_restores_the_subreaper(tmp_path: Path) -> None:
    started = tmp_path / "pids"
    started.mkdir()
    processes = session.ProcessTree()
    try:
        env = {**os.environ, **processes.tag("original")}
        subprocess.run([sys.executable, "-c", DAEMON, str(started)], env=env, timeout=30, stdout=subprocess.DEVNULL)
        assert wait_for(lambda: len(pids(started)) == 2, 10)
        assert set(pids(started)) <= processes.members()
    finally:
        processes.close()
        kill_all(pids(started))
    assert not any(alive(pid) for pid in pids(started))
    assert session.set_subreaper(False) in (False, None)  # close() gave the previous setting back


# -- where a hang waits ---------------------------------------------------------------------------
SOURCE = Source("train.py", "import torch\nloss = model(x)\noptimizer.step()\n")
TIMEOUT_STACK = ('Timeout (0:00:05)!\nThread 0x1 (most recent call first):\n'
                 '  File "/w/lib/wait.py", line 7 in block\n  File "/w/train.py", line 2 in main\n')


def record(rank: int, stack: str, steps: int = 0) -> RankRecord:
    events = [{"kind": "start", "rank": rank, "root": "/w"}] + [{"kind": "step", "n": i + 1, "params": {}} for i in range(steps)]
    return RankRecord(rank=rank, events=events, stack=stack)


def test_an_original_that_hangs_is_reported_as_a_hang_with_the_rank_and_where() -> None:
    launch = Launch(returncode=1, output="", records={0: record(0, TIMEOUT_STACK, steps=1)}, timed_out=False)
    expected, problem = expected_steps(launch, 3, SOURCE)
    assert expected == 0
    assert problem == ("the original script hung, so the conversion cannot be judged: rank 0 waited past the timeout"
                       " after 1 steps, at lib/wait.py:7 (in block)")
    assert "exit 1" not in problem


def test_an_original_stopped_at_the_launch_timeout_says_where_it_was() -> None:
    stack = 'Thread 0x1 (most recent call first):\n  File "/w/train.py", line 3 in main\n'
    launch = Launch(returncode=-15, output="", records={0: record(0, stack)}, timed_out=True)
    _, problem = expected_steps(launch, 3, SOURCE)
    assert problem.endswith("rank 0 was stopped (it timed out) after 0 steps, at train.py:3: `optimizer.step()` (in main)")


def test_ranks_stopped_at_the_launch_timeout_are_named_with_their_line() -> None:
    stack = 'Thread 0x1 (most recent call first):\n  File "/w/train.py", line 2 in main\n'
    launch = Launch(returncode=-9, output="", records={0: record(0, TIMEOUT_STACK), 1: record(1, stack)}, timed_out=True)
    check = check_hang(launch, 2, SOURCE)
    assert check.status == "failed"
    assert check.detail == ["rank 0 waited past the timeout at lib/wait.py:7 (in block)",
                            "rank 1 was still running at the timeout, at train.py:2: `loss = model(x)` (in main)"]


# -- the whole command ----------------------------------------------------------------------------
TRAIN = """\
import os
import time

import torch

{before}
model = torch.nn.Linear(1, 1)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
for step in range(3):
    loss = model(torch.ones(4, 1)).pow(2).mean()
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
"""
START_DAEMON = """\
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        open(os.path.join(os.environ["VERIFY_TEST_PIDS"], str(os.getpid())), "w").close()
        while True:
            time.sleep(1)
    os._exit(0)
"""
WAIT_FOREVER = """\
open(os.path.join(os.environ["VERIFY_TEST_PIDS"], str(os.getpid())), "w").close()
time.sleep(600)
"""


def project(tmp_path: Path, before: str) -> tuple[Path, Path, Path, dict[str, str]]:
    folder, started, scratch = tmp_path / "project", tmp_path / "pids", tmp_path / "tmp"
    for made in (folder, started, scratch):
        made.mkdir()
    (folder / "train.py").write_text(TRAIN.format(before=before))
    env = {**os.environ, "PYTHONPATH": str(ROOT), "VERIFY_TEST_PIDS": str(started), "TMPDIR": str(scratch)}
    return folder, started, scratch, env


def tagged_processes(scratch: Path) -> list[int]:
    """Processes carrying verify's tag that were started with this test's TMPDIR."""
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit() and alive(int(entry)):
            try:
                environ = Path(f"/proc/{entry}/environ").read_bytes().split(b"\0")
            except OSError:
                continue
            if any(v.startswith(b"MIGRATE_VERIFY_RUN=") for v in environ) and f"TMPDIR={scratch}".encode() in environ:
                found.append(int(entry))
    return found


@pytest.mark.slow
def test_verify_with_a_daemon_ends_near_its_timeout_and_leaves_nothing_running(tmp_path: Path) -> None:
    folder, started, scratch, env = project(tmp_path, START_DAEMON)
    begin = time.monotonic()
    try:
        process = subprocess.run([sys.executable, "-m", "migrate", "verify", "--report", "json", "--steps", "1",
                                  "--timeout", "5", "train.py"], cwd=folder, env=env, capture_output=True, text=True,
                                 timeout=150)
        wall = time.monotonic() - begin
        assert wall < 5 + 50, f"verify took {wall:.0f} s"
        assert json.loads(process.stdout)["status"] in ("passed", "failed", "error")
        assert pids(started), "the daemon never started"
        assert not [pid for pid in pids(started) if alive(pid)]
        assert not tagged_processes(scratch)
        assert not [p.name for p in scratch.iterdir() if p.name.startswith("migrate-verify-")]
    finally:
        kill_all(pids(started) + tagged_processes(scratch))


@pytest.mark.slow
def test_sigterm_to_verify_ends_its_training_and_removes_its_work_folder(tmp_path: Path) -> None:
    folder, started, scratch, env = project(tmp_path, WAIT_FOREVER)
    process = subprocess.Popen([sys.executable, "-m", "migrate", "verify", "--steps", "1", "--timeout", "120",
                                "train.py"], cwd=folder, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               text=True)
    try:
        assert wait_for(lambda: pids(started), 60), "the original run never started"
        assert [p.name for p in scratch.iterdir() if p.name.startswith("migrate-verify-")]
        process.send_signal(signal.SIGTERM)
        _, errors = process.communicate(timeout=30)
        assert process.returncode == 128 + signal.SIGTERM, errors
        assert "verify interrupted: its processes were stopped and its work folder removed" in errors
        assert wait_for(lambda: not any(alive(pid) for pid in pids(started)), 5)
        assert not tagged_processes(scratch)
        assert not [p.name for p in scratch.iterdir() if p.name.startswith("migrate-verify-")]
    finally:
        process.kill()
        kill_all(pids(started) + tagged_processes(scratch))
