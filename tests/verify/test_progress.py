"""A hang is no progress: verify stops a launch when no rank has stepped, written a record or used
CPU time for --timeout seconds, and a slow rank that still works is never called hung.

The fast tests drive processes.supervise with small Python "ranks" that write their record file
as the runner does (a first line naming their pid); the slow one runs `migrate verify` itself.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from migrate.verify import processes, session
from migrate.verify.checks import Launch, RankRecord, Source, check_hang, expected_steps

ROOT = Path(__file__).parents[2]

# One rank: writes its start line, then does what ACTION says.
RANK = """
import json, os, sys, time
records, rank, action = sys.argv[1], int(sys.argv[2]), sys.argv[3]
stream = open(os.path.join(records, f"rank{rank}.jsonl"), "w")
def event(kind, **fields):
    stream.write(json.dumps({"kind": kind, **fields}) + "\\n"); stream.flush()
event("start", rank=rank, pid=os.getpid())
begin = time.monotonic()
if action == "sleep":                      # silent, no CPU: a hang
    time.sleep(600)
elif action.startswith("burn"):            # silent, all CPU: slow, not hung
    seconds = float(action[4:])
    while time.monotonic() - begin < seconds:
        sum(range(1000))
elif action.startswith("steps"):           # a record line every 0.3 s, no CPU in between
    for n in range(int(action[5:])):
        time.sleep(0.3)
        event("step", n=n + 1, params={})
elif action == "wait-for-done":            # idle until another rank says it is done
    while not os.path.exists(os.path.join(records, "done")):
        time.sleep(0.05)
event("end", outcome="finished", steps=0)
"""
# A launcher: starts one rank per action, waits for all.
LAUNCHER = """
import subprocess, sys
records, rank_code, actions = sys.argv[1], sys.argv[2], sys.argv[3:]
ranks = [subprocess.Popen([sys.executable, "-c", rank_code, records, str(r), a]) for r, a in enumerate(actions)]
sys.exit(max(p.wait() for p in ranks))
"""
BURN_THEN_DONE = "import os, sys, time\nbegin = time.monotonic()\nwhile time.monotonic() - begin < 1.8:\n    sum(range(1000))\n"


@pytest.fixture
def tree() -> Iterator[processes.ProcessTree]:
    owned = processes.ProcessTree()
    yield owned
    owned.close()


def launch(tree: processes.ProcessTree, tmp_path: Path, actions: list[str], timeout: float = 0.8,
           max_time: float = 60.0, start: float = 0.0) -> processes.Outcome:
    records = tmp_path / "records"
    records.mkdir()
    command = [sys.executable, "-c", LAUNCHER, str(records), RANK, *actions]
    watch = processes.Watch(timeout=timeout, max_time=max_time, ranks=len(actions), start=start, grace=0.5)
    return processes.supervise(tree, "converted", command, tmp_path, dict(os.environ), tmp_path / "out.log", records, watch)


def test_a_silent_sleeper_is_stopped_as_a_hang_soon_after_the_timeout(tree: processes.ProcessTree, tmp_path: Path) -> None:
    outcome = launch(tree, tmp_path, ["sleep", "sleep"])
    assert outcome.stopped == processes.NO_PROGRESS
    assert outcome.idle == (0, 1)
    assert outcome.seconds < 6
    assert not tree.members("converted")


def test_a_silent_cpu_burner_past_the_timeout_is_not_a_hang(tree: processes.ProcessTree, tmp_path: Path) -> None:
    outcome = launch(tree, tmp_path, ["burn1.8", "burn1.8"])
    assert outcome.stopped == ""
    assert outcome.returncode == 0
    assert outcome.seconds > 1.8


def test_a_rank_writing_records_without_cpu_is_not_a_hang(tree: processes.ProcessTree, tmp_path: Path) -> None:
    outcome = launch(tree, tmp_path, ["steps6"])  # 1.8 s of steps 0.3 s apart, timeout 0.8 s
    assert outcome.stopped == ""
    assert outcome.returncode == 0


def test_a_rank_waiting_for_a_slow_working_rank_is_not_a_hang(tree: processes.ProcessTree, tmp_path: Path) -> None:
    """Rank 0 waits without CPU for 1.8 s while rank 1 burns CPU, then says it is done."""
    burn_then_done = RANK.replace('elif action == "wait-for-done":',
                                  'elif action == "slow-then-done":\n'
                                  + textwrap.indent(BURN_THEN_DONE, "    ")
                                  + '    open(os.path.join(records, "done"), "w").close()\n'
                                  'elif action == "wait-for-done":')
    records = tmp_path / "records"
    records.mkdir()
    command = [sys.executable, "-c", LAUNCHER, str(records), burn_then_done, "wait-for-done", "slow-then-done"]
    watch = processes.Watch(timeout=0.8, max_time=60.0, ranks=2, grace=0.5)
    outcome = processes.supervise(tree, "converted", command, tmp_path, dict(os.environ), tmp_path / "out.log",
                                  records, watch)
    assert outcome.stopped == "" and outcome.returncode == 0


def test_a_rank_still_working_at_the_ceiling_is_stopped_as_still_working(tree: processes.ProcessTree,
                                                                          tmp_path: Path) -> None:
    outcome = launch(tree, tmp_path, ["sleep", "burn600"], max_time=1.5)
    assert outcome.stopped == processes.STILL_WORKING
    assert outcome.idle == (0,)  # rank 0 waited; rank 1 still worked
    assert outcome.seconds < 8
    assert not tree.members("converted")


def test_a_launcher_that_never_starts_its_ranks_is_a_hang_after_the_start_allowance(
        tree: processes.ProcessTree, tmp_path: Path) -> None:
    records = tmp_path / "records"
    records.mkdir()
    watch = processes.Watch(timeout=0.5, max_time=60.0, ranks=2, start=0.8, grace=0.5)
    outcome = processes.supervise(tree, "converted", [sys.executable, "-c", "import time; time.sleep(600)"], tmp_path,
                                  dict(os.environ), tmp_path / "out.log", records, watch)
    assert outcome.stopped == processes.NO_PROGRESS and outcome.idle == ()
    assert 1.3 <= outcome.seconds < 6


# -- what the ranks are given ---------------------------------------------------------------------
def test_the_runners_own_watchdog_is_past_the_ceiling_and_to_end_is_passed_on(tmp_path: Path) -> None:
    options = session.VerifyOptions(timeout=10, to_end=True)
    arguments = session.runner_arguments(tmp_path / "train.py", tmp_path / "records", options, tmp_path / "guard.json",
                                         then=("--resume",))
    assert arguments[arguments.index("--timeout") + 1] == str(20 * 10 + session.RUNNER_MARGIN)
    assert "--to-end" in arguments
    assert arguments[-2:] == [str(tmp_path / "train.py"), "--resume"]
    assert "--to-end" not in session.runner_arguments(tmp_path / "train.py", tmp_path, session.VerifyOptions(), tmp_path)
    assert session.VerifyOptions(timeout=10, max_time=30).ceiling == 30


def test_torchrun_keeps_its_logs_in_the_work_folder_and_ranks_get_this_environments_tools(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[list[str]] = []
    monkeypatch.setattr(session.Launches, "run", lambda self, name, command, cwd, ranks=None: seen.append(command))
    tree = processes.ProcessTree()
    try:
        sandbox = session.Sandbox(folder=tmp_path, work=tmp_path / "work")
        session.Launches(session.VerifyOptions(), sandbox, tree).converted(tmp_path / "work" / "converted" / "train.py")
    finally:
        tree.close()
    assert f"--log-dir={tmp_path / 'work' / 'torchelastic'}" in seen[0]
    env = session.environment(session.VerifyOptions(), tmp_path)
    assert env["PATH"].split(os.pathsep)[0] == str(Path(sys.executable).parent)
    assert os.path.isabs(env["TORCH_EXTENSIONS_DIR"])


# -- what the report says -------------------------------------------------------------------------
SOURCE = Source("train.py", "import torch\ndist.barrier()\nloss = model(x)\n")


def record(rank: int, line: int, steps: int = 0) -> RankRecord:
    stack = f'Thread 0x1 (most recent call first):\n  File "/w/train.py", line {line} in main\n'
    events = [{"kind": "start", "rank": rank, "root": "/w"}] + [{"kind": "step", "n": i + 1, "params": {}}
                                                                 for i in range(steps)]
    return RankRecord(rank=rank, events=events, stack=stack)


def test_a_converted_run_without_progress_fails_the_hang_check_with_each_rank_and_its_line() -> None:
    launch = Launch(returncode=-9, output="", records={0: record(0, 2), 1: record(1, 3, steps=1)}, timed_out=True,
                    stopped=processes.NO_PROGRESS, idle=(0, 1), seconds=12.0, timeout=5.0)
    check = check_hang(launch, 2, SOURCE)
    assert check.status == "failed"
    assert check.detail == [
        "rank 0 made no progress (no step, no record, no CPU time) for 5 s after 0 steps, at train.py:2: `dist.barrier()` (in main)",
        "rank 1 made no progress (no step, no record, no CPU time) for 5 s after 1 steps, at train.py:3: `loss = model(x)` (in main)"]


def test_a_run_stopped_at_the_ceiling_is_reported_as_still_working_not_as_a_hang() -> None:
    launch = Launch(returncode=-9, output="", records={0: record(0, 2), 1: record(1, 3, steps=2)}, timed_out=True,
                    stopped=processes.STILL_WORKING, idle=(0,), seconds=100.4, timeout=5.0)
    check = check_hang(launch, 2, SOURCE)
    assert check.status == "skipped"
    assert check.detail[1] == ("rank 1 was still working after 100 s (--max-time), after 2 steps, at train.py:3:"
                               " `loss = model(x)` (in main): slow, not hung")


def test_an_original_still_working_at_the_ceiling_says_so() -> None:
    launch = Launch(returncode=-9, output="", records={0: record(0, 3, steps=1)}, timed_out=True,
                    stopped=processes.STILL_WORKING, seconds=100.0, timeout=5.0)
    _, problem = expected_steps(launch, 3, SOURCE)
    assert problem.startswith("the original script was still working after 100 s (--max-time), so the conversion"
                              " cannot be judged: rank 0 was at train.py:3: `loss = model(x)` (in main)")
    assert "hung" not in problem


# -- the whole command ----------------------------------------------------------------------------
SLOW_START = """\
import time

import torch

begin = time.process_time()
while time.process_time() - begin < 6:  # silent work, longer than --timeout
    sum(range(1000))
model = torch.nn.Linear(2, 1)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
for step in range(3):
    loss = model(torch.ones(4, 2)).pow(2).mean()
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
"""


@pytest.mark.slow
def test_verify_passes_a_script_that_works_silently_longer_than_the_timeout(tmp_path: Path) -> None:
    (tmp_path / "train.py").write_text(SLOW_START)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    process = subprocess.run([sys.executable, "-m", "migrate", "verify", "--report", "json", "--timeout", "5",
                              "train.py"], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    report = json.loads(process.stdout)
    assert report["status"] == "passed", process.stdout + process.stderr
    hang = next(c for c in report["checks"] if c["name"] == "hang")
    assert hang["status"] == "passed"
