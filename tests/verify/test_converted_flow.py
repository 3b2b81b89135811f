"""The README's flow: `migrate to-ddp --write train.py`, then `migrate verify train.py`.

The script now already uses the target (MIG001): verify checks the working-tree file as the
converted script against its committed version (git HEAD) as the original; where there is none,
it says why and gives the exact `--converted` command.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from migrate.verify.checks import VerifyResult
from migrate.verify.committed import Unavailable, committed_text
from migrate.verify.sandbox import Sandbox
from migrate.verify.session import VerifyOptions, conversion_of

ROOT = Path(__file__).parents[2]
TRAIN = """\
import torch

model = torch.nn.Linear(4, 2)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
data = torch.utils.data.TensorDataset(torch.randn(32, 4), torch.randn(32, 2))
loader = torch.utils.data.DataLoader(data, batch_size=4, shuffle=True)
for x, y in loader:
    loss = (model(x) - y).pow(2).mean()
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
"""
GIT = ["git", "-c", "user.name=verify test", "-c", "user.email=verify@test", "-c", "init.defaultBranch=main",
       "-c", "commit.gpgsign=false"]


def committed_then_converted(folder: Path) -> Path:
    """train.py committed in a new repository, then converted in place with --write."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "train.py").write_text(TRAIN)
    for command in (["init", "-q"], ["add", "train.py"], ["commit", "-q", "-m", "the single-GPU script"]):
        subprocess.run([*GIT, *command], cwd=folder, check=True, capture_output=True)
    subprocess.run([sys.executable, "-m", "migrate", "to-ddp", "--write", "train.py"], cwd=folder, check=True,
                   capture_output=True, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert (folder / "train.py").read_text() != TRAIN
    return folder / "train.py"


def sandbox_for(script: Path, tmp_path: Path) -> Sandbox:
    work = tmp_path / "work"
    work.mkdir()
    return Sandbox(folder=script.parent, work=work)


def test_a_script_converted_in_place_is_checked_against_its_committed_version(tmp_path: Path) -> None:
    script = committed_then_converted(tmp_path / "project")
    converted = script.read_text()
    sandbox = sandbox_for(script, tmp_path)
    conversion = conversion_of(str(script), converted, sandbox, VerifyOptions())
    assert not isinstance(conversion, VerifyResult), conversion
    assert (conversion.old, conversion.new) == (TRAIN, converted)
    assert conversion.path == str(sandbox.converted / "train.py")
    assert sandbox.notes == [f"{script} already uses the target (MIG001): verified as the converted script against"
                             " its committed version (git HEAD) as the original"]


def test_outside_git_it_says_why_and_gives_the_converted_command(tmp_path: Path) -> None:
    script = committed_then_converted(tmp_path / "project")
    subprocess.run(["rm", "-rf", str(script.parent / ".git")], check=True)
    result = conversion_of(str(script), script.read_text(), sandbox_for(script, tmp_path), VerifyOptions())
    assert isinstance(result, VerifyResult) and result.status == "error"
    assert result.message.startswith(f"{script} already uses the target (MIG001), so verify needs its original;"
                                     " git has no committed version of it (")
    assert result.message.endswith(f"migrate verify --target ddp --converted {script} {script.parent / 'ORIGINAL.py'}")


def test_a_committed_version_that_is_converted_too_is_no_original(tmp_path: Path) -> None:
    script = committed_then_converted(tmp_path / "project")
    subprocess.run([*GIT, "commit", "-q", "-am", "converted"], cwd=script.parent, check=True, capture_output=True)
    result = conversion_of(str(script), script.read_text(), sandbox_for(script, tmp_path), VerifyOptions())
    assert isinstance(result, VerifyResult)
    assert "its committed version (git HEAD) is no single-GPU script to convert (MIG001" in result.message
    assert "--converted" in result.message


def test_git_runs_without_the_repositorys_hooks_or_fsmonitor(tmp_path: Path) -> None:
    script = committed_then_converted(tmp_path / "project")
    marker = tmp_path / "ran"
    monitor = tmp_path / "monitor.sh"
    monitor.write_text(f"#!/bin/sh\ntouch {marker}\n")
    monitor.chmod(0o755)
    subprocess.run(["git", "config", "core.fsmonitor", str(monitor)], cwd=script.parent, check=True)
    assert committed_text(str(script)) == TRAIN
    assert not marker.exists()


def test_a_file_git_does_not_track_is_unavailable(tmp_path: Path) -> None:
    script = committed_then_converted(tmp_path / "project")
    (script.parent / "other.py").write_text("print(1)\n")
    with pytest.raises(Unavailable, match="git has no committed version of it"):
        committed_text(str(script.parent / "other.py"))


@pytest.mark.slow
def test_the_readme_flow_write_then_verify_passes(tmp_path: Path) -> None:
    script = committed_then_converted(tmp_path / "project")
    process = subprocess.run([sys.executable, "-m", "migrate", "verify", "--report", "json", "--timeout", "60", "train.py"],
                             cwd=script.parent, env={**os.environ, "PYTHONPATH": str(ROOT)}, capture_output=True,
                             text=True, timeout=300)
    report = json.loads(process.stdout)
    assert report["status"] == "passed", json.dumps(report, indent=1) + process.stderr[-2000:]
    assert any("verified as the converted script against its committed version" in note for note in report["notes"])
