"""DeepSpeed's CPU op is made ready before verify's clock starts, and a stale build lock is named.

A killed build leaves `<extensions>/deepspeed_shm_comm/lock`, on which every later DeepSpeed run on
the CPU waits forever. verify removes a lock no process holds (with a note naming it), waits for a
live build, and refuses a lock it cannot judge with the command that removes it. The slow tests
use a copy of the environment's built op, never the environment's own folder (other runs use it).
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from migrate.records import InputError
from migrate.verify import deepspeed_op
from migrate.verify.deepspeed_op import OP, clear_stale_lock, extensions_folder, lock_holders

ROOT = Path(__file__).parents[2]
# Holds the lock open as cpp_extension's FileBaton does while it builds, for HOLD seconds, then
# releases it (closes and removes it).
HOLDER = """
import os, sys, time
lock, hold = sys.argv[1], float(sys.argv[2])
fd = os.open(lock, os.O_CREAT | os.O_EXCL)
print("held", flush=True)
time.sleep(hold)
os.close(fd)
os.remove(lock)
"""


@pytest.fixture
def lock(tmp_path: Path) -> Path:
    (tmp_path / OP).mkdir()
    return tmp_path / OP / "lock"


@pytest.fixture
def holder(lock: Path) -> Iterator[subprocess.Popen[str]]:
    process = subprocess.Popen([sys.executable, "-c", HOLDER, str(lock), "1.0"], stdout=subprocess.PIPE, text=True)
    assert process.stdout is not None and process.stdout.readline() == "held\n"
    yield process
    process.kill()
    process.wait()


def test_the_extensions_folder_is_the_environments_own_unless_set(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert extensions_folder({}) == Path(sys.prefix) / "torch_extensions"
    monkeypatch.chdir(tmp_path)
    assert extensions_folder({"TORCH_EXTENSIONS_DIR": "exts"}) == tmp_path / "exts"  # absolute for the ranks


def test_a_lock_no_process_holds_is_removed_with_a_note_naming_it(lock: Path) -> None:
    lock.write_text("")
    assert lock_holders(lock) == []
    notes = clear_stale_lock(lock, limit=5)
    assert notes == [f"{lock}: removed a stale build lock of DeepSpeed's CPU op (no process held it: a killed build left it)"]
    assert not lock.exists()


def test_a_lock_held_by_a_live_build_is_waited_for_not_removed(lock: Path, holder: subprocess.Popen[str]) -> None:
    assert lock_holders(lock) == [holder.pid]
    begin = time.monotonic()
    assert clear_stale_lock(lock, limit=30) == []
    assert 0.3 < time.monotonic() - begin < 10
    assert holder.wait(timeout=10) == 0  # the holder removed it itself


def test_a_build_holding_the_lock_past_the_limit_is_refused_with_the_command(lock: Path,
                                                                            holder: subprocess.Popen[str]) -> None:
    with pytest.raises(InputError) as raised:
        clear_stale_lock(lock, limit=0.2)
    assert raised.value.path == str(lock)
    assert f"(process {holder.pid}) has held this lock" in raised.value.message
    assert raised.value.message.endswith(f"rm {lock}")


def test_a_lock_that_cannot_be_judged_is_refused_not_removed(lock: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A process of the lock's owner whose descriptors cannot be read might hold it."""
    lock.write_text("")
    listdir = os.listdir

    def hidden(path: str) -> list[str]:
        if str(path).startswith("/proc/") and str(path).endswith("/fd") and str(path) != f"/proc/{os.getpid()}/fd":
            raise PermissionError(13, "Permission denied")
        return listdir(path)

    monkeypatch.setattr(deepspeed_op.os, "listdir", hidden)
    assert lock_holders(lock) is None
    with pytest.raises(InputError) as raised:
        clear_stale_lock(lock, limit=5)
    assert "verify cannot tell whether a build still holds it" in raised.value.message
    assert raised.value.message.endswith(f"rm {lock}")
    assert lock.exists()


# -- with DeepSpeed itself ------------------------------------------------------------------------
needs_deepspeed = pytest.mark.skipif(importlib.util.find_spec("deepspeed") is None, reason="DeepSpeed is not installed")


def built_copy(tmp_path: Path) -> Path:
    """A copy of the environment's built op folder (mtimes kept, so ninja has nothing to do), with a
    stale lock in it."""
    built = extensions_folder(os.environ) / OP
    if not (built / f"{OP}.so").is_file():
        pytest.skip(f"DeepSpeed's CPU op is not built in {built}: run scripts/bootstrap test")
    extensions = tmp_path / "extensions"
    shutil.copytree(built, extensions / OP, symlinks=True, ignore=shutil.ignore_patterns("lock"))
    (extensions / OP / "lock").write_text("")
    return extensions


@pytest.mark.slow
@needs_deepspeed
def test_prepare_removes_a_stale_lock_and_loads_the_op_before_the_run(tmp_path: Path) -> None:
    extensions = built_copy(tmp_path)
    env = {**os.environ, "TORCH_EXTENSIONS_DIR": str(extensions), "DS_ACCELERATOR": "cpu", "CUDA_VISIBLE_DEVICES": "",
           "PATH": os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")])}
    begin = time.monotonic()
    notes = deepspeed_op.prepare(env, limit=120)
    assert notes == [f"{extensions / OP / 'lock'}: removed a stale build lock of DeepSpeed's CPU op (no process"
                     " held it: a killed build left it)"]
    assert not (extensions / OP / "lock").exists()
    assert time.monotonic() - begin < 60  # found up to date, not rebuilt


TRAIN = """\
import torch

model = torch.nn.Linear(4, 2)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
for step in range(3):
    loss = model(torch.ones(8, 4)).pow(2).mean()
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
"""


@pytest.mark.slow
@needs_deepspeed
def test_verify_deepspeed_runs_past_a_stale_lock_and_says_it_removed_it(tmp_path: Path) -> None:
    """Before: every rank waited on the lock until verify called it a hang at init_distributed."""
    extensions = built_copy(tmp_path)
    folder = tmp_path / "project"
    folder.mkdir()
    (folder / "train.py").write_text(TRAIN)
    env = {**os.environ, "PYTHONPATH": str(ROOT), "TORCH_EXTENSIONS_DIR": str(extensions)}
    process = subprocess.run([sys.executable, "-m", "migrate", "verify", "--target", "deepspeed", "--report", "json",
                              "--timeout", "30", "train.py"], cwd=folder, env=env, capture_output=True, text=True,
                             timeout=400)
    report = json.loads(process.stdout)
    assert f"{extensions / OP / 'lock'}: removed a stale build lock" in "\n".join(report["notes"]), process.stdout
    hang = [c for c in report["checks"] if c["name"] == "hang"]
    assert hang and hang[0]["status"] == "passed", process.stdout + process.stderr[-3000:]
