"""`migrate launch --hostfile PATH` reads the hostfile the way scripts are read: a FIFO or a device
is refused before it is opened (reading one blocks forever, or never ends), a folder, a huge file
or undecodable bytes are refused with the path and what is wrong, and nothing is written. Every
run has a timeout, so a regression fails here instead of hanging."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from migrate.launch import MAX_HOSTFILE_BYTES, LaunchPlan, problems
from migrate.launch_command import launchable

ROOT = Path(__file__).resolve().parents[1]
SAMPLE = ROOT / "samples" / "mlp_regression" / "train.py"


def launch(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "migrate", "launch", *args], cwd=cwd, capture_output=True, text=True,
                          timeout=30)


@pytest.fixture
def project(tmp_path: Path) -> Path:
    shutil.copy(SAMPLE, tmp_path / "train.py")
    return tmp_path


def refused(result: subprocess.CompletedProcess[str], said: str, project: Path, *kept: str) -> None:
    assert result.returncode == 2, result.stderr
    assert said in " ".join(result.stderr.split()), result.stderr
    assert sorted(p.name for p in project.iterdir()) == sorted(["train.py", *kept])


@pytest.mark.parametrize("target", ["deepspeed", "horovod"])
def test_a_fifo_is_refused_without_waiting_for_a_writer(target: str, project: Path) -> None:
    os.mkfifo(project / "hosts")
    result = launch(target, "train.py", "--hostfile", "hosts", cwd=project)
    refused(result, "--hostfile: hosts: is a FIFO (named pipe), not a regular file", project, "hosts")


@pytest.mark.parametrize("target", ["deepspeed", "horovod"])
def test_a_device_that_never_ends_is_refused(target: str, project: Path) -> None:
    result = launch(target, "train.py", "--hostfile", "/dev/zero", cwd=project)
    refused(result, "--hostfile: /dev/zero: is a device, not a regular file", project)


def test_the_library_refuses_a_fifo_too(project: Path) -> None:
    """The check the command line runs is migrate.launch.problems: the library's callers get it."""
    os.mkfifo(project / "hosts")
    code = ("import sys; from migrate.launch import LaunchPlan, problems; from migrate.launchers import HOROVODRUN; "
            "print(problems(LaunchPlan(target='horovod', launcher=HOROVODRUN, script='train.py', hostfile='hosts'))[0])")
    result = subprocess.run([sys.executable, "-c", code], cwd=project, capture_output=True, text=True, timeout=30)
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("--hostfile: hosts: is a FIFO (named pipe)")


@pytest.mark.parametrize(("make", "said"), [
    (lambda path: path.mkdir(), "--hostfile: hosts: is a folder: give the hostfile"),
    (lambda path: path.write_bytes(b"node1 slots=2\n" * (MAX_HOSTFILE_BYTES // 14 + 1)),
     "--hostfile: hosts: is larger than 1024 KiB; not a hostfile"),
    (lambda path: path.write_bytes(b"node1 slots=2\nn\xffde2 slots=2\n"),
     "--hostfile: hosts:2:2: not valid UTF-8 (byte 0xff)"),
    (lambda path: None, "--hostfile: hosts: no such file"),
])
def test_what_is_not_a_hostfile_is_said(make, said: str, project: Path) -> None:  # type: ignore[no-untyped-def]
    make(project / "hosts")
    result = launch("deepspeed", "train.py", "--hostfile", "hosts", cwd=project)
    assert result.returncode == 2, result.stderr
    assert said in " ".join(result.stderr.split()), result.stderr
    assert not list(project.glob("run_*"))


def test_a_regular_hostfile_is_still_read(project: Path) -> None:
    (project / "hosts").write_text("node1 slots=2\nnode2 slots=4\n")
    plan = LaunchPlan(target="horovod", launcher=launchable()["horovod"], script=str(project / "train.py"), hostfile=str(project / "hosts"))
    assert problems(plan) == []
    result = launch("horovod", "train.py", "--hostfile", "hosts", "--out", "-", cwd=project)
    assert result.returncode == 0, result.stderr
    assert "exec horovodrun -np 6 --hostfile" in result.stdout
