"""Session set-up for the whole suite, however pytest was started (scripts/test, or
`.venv/bin/python -m pytest tests/...`).

- The environment's own bin folder goes first on PATH, for this process and every one a test
  launches: one `ninja` (.venv's) builds and checks DeepSpeed's op. The system's ninja (1.11 here)
  and .venv's (1.13) each take the other's build log for stale, so a PATH that differs between
  launches rebuilt the op inside timed tests, again and again.
- TORCH_EXTENSIONS_DIR defaults to <environment>/torch_extensions, the folder scripts/bootstrap
  builds the op into (scripts/test sets the same).
- A session that runs `slow` tests (real launches) with DeepSpeed installed stops before the
  first test, with what to run, unless DeepSpeed's CPU shared-memory op is built there and that
  ninja has nothing to redo: building it is set-up's work, never a timed launch's.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

BIN = Path(sys.executable).parent
# ShareMemCommBuilder.NAME (deepspeed/ops/op_builder/cpu/comm.py): the op DeepSpeed loads when a
# process group starts on the CPU accelerator
DEEPSPEED_OP = "deepspeed_shm_comm"
EXTENSIONS = Path(sys.prefix) / "torch_extensions"  # where scripts/bootstrap test builds it


def pytest_configure(config: pytest.Config) -> None:
    entries = os.environ.get("PATH", "").split(os.pathsep)
    os.environ["PATH"] = os.pathsep.join([str(BIN), *(entry for entry in entries if entry != str(BIN))])
    os.environ.setdefault("TORCH_EXTENSIONS_DIR", str(EXTENSIONS))


def pytest_collection_finish(session: pytest.Session) -> None:
    if session.config.option.collectonly or not any(item.get_closest_marker("slow") for item in session.items):
        return
    problem = deepspeed_op_problem(Path(os.environ["TORCH_EXTENSIONS_DIR"]))
    if problem:
        pytest.exit(f"{problem}. scripts/bootstrap test builds it, once, into {EXTENSIONS} (the default "
                    "TORCH_EXTENSIONS_DIR here; scripts/test sets the same)", returncode=pytest.ExitCode.USAGE_ERROR)


def deepspeed_op_problem(extensions: Path) -> str | None:
    """What keeps DeepSpeed's CPU op from loading without a build, or None (also when DeepSpeed
    is not installed). The ninja on PATH checks, with a dry run on a copy of the build folder
    (a ninja that finds the other version's log discards it)."""
    if importlib.util.find_spec("deepspeed") is None:
        return None
    folder = extensions / DEEPSPEED_OP
    if not (folder / f"{DEEPSPEED_OP}.so").is_file():
        return f"DeepSpeed's CPU op is not built in {folder} (TORCH_EXTENSIONS_DIR)"
    ninja = shutil.which("ninja")
    if ninja is None:
        return "no ninja on PATH: DeepSpeed cannot load its CPU op"
    with tempfile.TemporaryDirectory() as scratch:
        copy = Path(scratch) / DEEPSPEED_OP
        shutil.copytree(folder, copy, ignore=shutil.ignore_patterns("lock"))
        dry = subprocess.run([ninja, "-n", "-C", str(copy)], capture_output=True, text=True, timeout=60)
    if dry.returncode != 0 or "no work to do" not in dry.stdout:
        steps = sum(line.startswith("[") for line in dry.stdout.splitlines())
        warnings = [line.removeprefix("ninja: ") for line in dry.stderr.splitlines() if line.strip()][:2]
        why = "; ".join([f"{ninja} would run {steps} build step(s) in a test", *warnings])
        return f"DeepSpeed's CPU op in {folder} is stale ({why})"
    return None
