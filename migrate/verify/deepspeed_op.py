"""DeepSpeed's CPU op, made ready before a verification's clock starts.

On the CPU accelerator DeepSpeed JIT-builds its shared-memory all-reduce op (`deepspeed_shm_comm`)
the first time a process group starts, with torch's cpp_extension, in TORCH_EXTENSIONS_DIR. Built
inside the timed ranks, that looked like a hang at `deepspeed.init_distributed`; so verify:
- uses the environment's own folder: TORCH_EXTENSIONS_DIR when set, else <sys.prefix>/torch_extensions
  (scripts/bootstrap builds the op there), and hands the same to every rank;
- builds the op there (or finds it up to date: torch runs ninja, which has nothing to do) in a
  process of its own before the launch;
- recognises a stale build lock: cpp_extension holds `<folder>/deepspeed_shm_comm/lock` open while
  it builds and removes it after; a killed build leaves it, and every later load waits on it
  forever. A lock no process holds open (every process of the lock's owner inspected in /proc) is
  removed, with a note naming it; a lock held by a live build is waited for; one verify cannot
  prove free is refused with the command that removes it.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Mapping
from pathlib import Path

from migrate.records import InputError

OP = "deepspeed_shm_comm"  # ShareMemCommBuilder.NAME (deepspeed/ops/op_builder/cpu/comm.py)
# What DeepSpeed's comm/torch.py build_shm_op does when a process group starts on the CPU.
BUILD = """\
import deepspeed
from deepspeed.accelerator import get_accelerator
builder = get_accelerator().create_op_builder("ShareMemCommBuilder")
if builder is not None and deepspeed.ops.__compatible_ops__.get(builder.NAME, False):
    builder.load(verbose=True)
"""
OUTPUT_LINES = 15  # lines of a failed build's output kept in the note


def extensions_folder(environ: Mapping[str, str]) -> Path:
    """Where torch's cpp_extension builds and finds ops for the ranks."""
    configured = environ.get("TORCH_EXTENSIONS_DIR")
    return Path(os.path.abspath(configured)) if configured else Path(sys.prefix) / "torch_extensions"


def prepare(environ: Mapping[str, str], limit: float) -> list[str]:
    """Make the op ready for ranks started with `environ` (which names the extensions folder);
    the notes for the report. Raises InputError for a lock verify cannot prove stale."""
    lock = extensions_folder(environ) / OP / "lock"
    notes = clear_stale_lock(lock, limit)
    try:
        build = subprocess.run([sys.executable, "-c", BUILD], env=dict(environ), capture_output=True, text=True,
                               timeout=limit, stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        return [*notes, f"DeepSpeed's CPU op did not build within {limit:.0f} s (in {lock.parent}); the ranks build it"]
    if build.returncode != 0:
        output = "\n".join((build.stdout + build.stderr).strip().splitlines()[-OUTPUT_LINES:])
        notes.append(f"DeepSpeed's CPU op could not be built in {lock.parent} before the run (exit"
                     f" {build.returncode}); the ranks will try again:\n{output}")
    return notes


def clear_stale_lock(lock: Path, limit: float) -> list[str]:
    """Wait out a live build's lock; remove a stale one (a note); refuse one that cannot be judged."""
    deadline = time.monotonic() + limit
    while os.path.lexists(lock):
        holders = lock_holders(lock)
        if holders is None:
            raise InputError(str(lock), 0, 0, f"a build lock of DeepSpeed's CPU op ({OP}): every DeepSpeed run on the"
                             " CPU waits while it exists, and verify cannot tell whether a build still holds it (a"
                             " process of its owner cannot be inspected); if no build is running, remove it:"
                             f" rm {lock}")
        if not holders:
            with_note = f"{lock}: removed a stale build lock of DeepSpeed's CPU op (no process held it: a killed build left it)"
            lock.unlink(missing_ok=True)
            return [with_note]
        if time.monotonic() > deadline:
            raise InputError(str(lock), 0, 0, f"a build of DeepSpeed's CPU op (process {', '.join(map(str, holders))})"
                             f" has held this lock for over {limit:.0f} s; let it finish, or stop it and remove"
                             f" the lock: rm {lock}")
        time.sleep(0.5)
    return []


def lock_holders(lock: Path) -> list[int] | None:
    """The processes that hold `lock` open ([] when none); None when a process of the lock's owner
    (only its owner's processes can have created it) cannot be inspected."""
    try:
        info = os.stat(lock)
    except FileNotFoundError:
        return []
    holders, unseen = [], False
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            owner = os.stat(f"/proc/{entry}").st_uid
        except OSError:  # gone
            continue
        try:
            descriptors = os.listdir(f"/proc/{entry}/fd")
        except PermissionError:
            unseen = unseen or owner == info.st_uid
            continue
        except OSError:
            continue
        if any(same_file(f"/proc/{entry}/fd/{fd}", info) for fd in descriptors):
            holders.append(int(entry))
    return None if unseen else holders


def same_file(descriptor: str, info: os.stat_result) -> bool:
    try:
        seen = os.stat(descriptor)
    except OSError:
        return False
    return (seen.st_dev, seen.st_ino) == (info.st_dev, info.st_ino)
