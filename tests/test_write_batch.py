"""`--write` writes a whole run or nothing: a failure part way (a full disk, an append-only folder,
a script deleted meanwhile) leaves every file as it was, no temporary file behind, and a message
naming the user's file. Temporaries a killed run left are removed by the next run; setuid bits
survive; `--check` says what `--write` would refuse."""

from __future__ import annotations

import errno
import os
import shutil
import stat
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from migrate import api, writing
from migrate.cli import run
from migrate import DdpOptions
from migrate.records import FileResult, InputError

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "tests" / "cases" / "main_function" / "input.py"


def snapshot(folder: Path) -> dict[str, tuple[bytes, int]]:
    """Every file under `folder`, with its content and mode."""
    return {str(p.relative_to(folder)): (p.read_bytes(), p.stat().st_mode)
            for p in sorted(folder.rglob("*")) if p.is_file()}


def temporaries(folder: Path) -> list[str]:
    return [p.name for p in folder.rglob(".migrate-*")]


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Two scripts to convert, in the current folder."""
    for name in ("a.py", "b.py"):
        shutil.copy(SCRIPT, tmp_path / name)
    monkeypatch.chdir(tmp_path)
    return tmp_path


def failing_on(call: int, original: Callable[..., object], error: OSError,
               later_too: bool = False) -> Callable[..., object]:
    """`original`, except that its `call`-th call (counting from 1) raises `error`, and with
    `later_too` every call after it too."""
    calls = [0]

    def wrapper(*args: object, **kwargs: object) -> object:
        calls[0] += 1
        if calls[0] == call or (later_too and calls[0] > call):
            raise error
        return original(*args, **kwargs)

    return wrapper


def write_run(capfd: pytest.CaptureFixture[str], *paths: str) -> tuple[int, str]:
    status = run("ddp", list(paths), DdpOptions(), write=True, check=False, report="text")
    return status, capfd.readouterr().err


def test_a_rename_failing_mid_batch_puts_back_every_file(project: Path, monkeypatch: pytest.MonkeyPatch,
                                                          capfd: pytest.CaptureFixture[str]) -> None:
    first, _ = write_run(capfd, "a.py")  # its launcher stays, and is replaced below by an identical one
    assert first == 0
    shutil.copy(SCRIPT, project / "a.py")
    launcher = (project / "run_a_ddp.sh").stat()
    before = snapshot(project)
    # renames: run_a_ddp.sh, a.py, run_b_ddp.sh, then b.py fails (disk full)
    monkeypatch.setattr(os, "replace", failing_on(4, os.replace, OSError(errno.ENOSPC, "No space left on device")))
    status, err = write_run(capfd, "a.py", "b.py")
    monkeypatch.undo()
    assert status == 2
    assert "b.py: cannot write it: No space left on device; nothing was written" in err
    assert ".tmp" not in err
    assert snapshot(project) == before
    assert (project / "run_a_ddp.sh").stat().st_ino == launcher.st_ino  # the very same file, put back
    assert temporaries(project) == []


def test_a_full_disk_while_staging_writes_nothing(project: Path, monkeypatch: pytest.MonkeyPatch,
                                                 capfd: pytest.CaptureFixture[str]) -> None:
    before = snapshot(project)
    monkeypatch.setattr(os, "fsync", failing_on(3, os.fsync, OSError(errno.ENOSPC, "No space left on device")))
    status, err = write_run(capfd, "a.py", "b.py")
    monkeypatch.undo()
    assert status == 2
    assert "run_b_ddp.sh: cannot write it: No space left on device; nothing was written" in err
    assert snapshot(project) == before
    assert temporaries(project) == []


def test_a_script_deleted_between_plan_and_write_stops_the_whole_batch(project: Path) -> None:
    results = [api.migrate_file(name, "ddp") for name in ("a.py", "b.py")]
    assert all(isinstance(r, FileResult) for r in results)
    plan = writing.plan(results)  # type: ignore[arg-type]
    assert plan.problems == []
    (project / "b.py").unlink()
    before = snapshot(project)
    with pytest.raises(InputError) as caught:
        writing.write([output for batch in plan.batches for output in batch])
    assert str(caught.value) == "b.py: was deleted since it was read; nothing was written"
    assert snapshot(project) == before
    assert temporaries(project) == []
    assert [str(p) for p in writing.plan(results).problems] == ["b.py: was deleted since it was read"]  # type: ignore[arg-type]


def test_a_script_edited_after_the_first_rename_puts_back_the_ones_before(project: Path,
                                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    results = [api.migrate_file(name, "ddp") for name in ("a.py", "b.py")]
    outputs = [o for batch in writing.plan(results).batches for o in batch]  # type: ignore[arg-type]
    real_replace = os.replace

    def edit_b_after_a(source: str, target: str) -> None:
        real_replace(source, target)
        if os.path.basename(target) == "a.py":
            (project / "b.py").write_text("# saved in an editor meanwhile\n")

    monkeypatch.setattr(os, "replace", edit_b_after_a)
    with pytest.raises(InputError, match="b.py: changed on disk since it was read; nothing was written"):
        writing.write(outputs)
    monkeypatch.undo()
    assert (project / "a.py").read_bytes() == SCRIPT.read_bytes()
    assert (project / "b.py").read_text() == "# saved in an editor meanwhile\n"
    assert sorted(p.name for p in project.iterdir()) == ["a.py", "b.py"]


def test_an_original_that_cannot_be_put_back_is_kept_and_named(project: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    results = [api.migrate_file(name, "ddp") for name in ("a.py", "b.py")]
    outputs = [o for batch in writing.plan(results).batches for o in batch]  # type: ignore[arg-type]
    monkeypatch.setattr(os, "replace", failing_on(4, os.replace, OSError(errno.EIO, "Input/output error"), later_too=True))
    with pytest.raises(InputError) as caught:
        writing.write(outputs)
    monkeypatch.undo()
    message = str(caught.value)
    assert message.startswith("b.py: cannot write it: Input/output error; the files already written could "
                              "not all be put back: a.py (Input/output error, its original is kept as ")
    kept = message.split("its original is kept as ")[1].rstrip(")")
    assert Path(kept).read_bytes() == SCRIPT.read_bytes()  # the user's a.py is still there, under that name


def can_chattr(path: Path) -> bool:
    try:
        subprocess.run(["chattr", "+a", str(path)], check=True, capture_output=True)
    except (OSError, subprocess.CalledProcessError):
        return False
    return True


def test_an_append_only_folder_is_refused_before_anything_is_written(tmp_path: Path) -> None:
    folder = tmp_path / "locked"
    folder.mkdir()
    shutil.copy(SCRIPT, folder / "train.py")
    if not can_chattr(folder):
        pytest.skip("chattr +a needs root and a file system with inode flags")
    try:
        before = snapshot(folder)
        result = subprocess.run([sys.executable, "-m", "migrate", "to-ddp", "--write", "train.py"], cwd=folder,
                                capture_output=True, text=True, timeout=120)
        after = snapshot(folder), temporaries(folder)
    finally:
        subprocess.run(["chattr", "-a", str(folder)], check=True)
    assert result.returncode == 2, result.stderr
    assert f"train.py: its folder {folder} is append-only (chattr +a)" in result.stderr
    assert after == (before, [])


def test_an_append_only_script_is_refused(project: Path, capfd: pytest.CaptureFixture[str]) -> None:
    if not can_chattr(project / "b.py"):
        pytest.skip("chattr +a needs root and a file system with inode flags")
    try:
        before = snapshot(project)
        status, err = write_run(capfd, "a.py", "b.py")
        after = snapshot(project)
    finally:
        subprocess.run(["chattr", "-a", str(project / "b.py")], check=True)
    assert status == 2
    assert "b.py: is append-only (chattr +a): it cannot be replaced" in err
    assert after == before


def dead_pid() -> int:
    finished = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    pid = int(finished.stdout)
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return pid
    pytest.skip("the finished process's id was taken again")


def test_temporaries_of_a_killed_run_are_removed_by_the_next(project: Path, capfd: pytest.CaptureFixture[str]) -> None:
    stale = project / f".migrate-{dead_pid()}-k1ll3d_x.tmp"
    stale.write_text("half a converted script")
    running = project / f".migrate-{os.getppid()}-w0rk1ng.tmp"  # a run still going: left alone
    running.write_text("being written")
    mine = project / ".migrate-notapid.tmp"  # not a name migrate gives
    mine.write_text("someone else's")
    status, err = write_run(capfd, "a.py")
    assert status == 0, err
    assert not stale.exists()
    assert running.exists() and mine.exists()


def test_temporary_names_carry_the_process_id(project: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    result = api.migrate_file("a.py", "ddp")
    seen: list[str] = []
    real_replace = os.replace

    def record(source: str, target: str) -> None:
        seen.append(os.path.basename(source))
        real_replace(source, target)

    monkeypatch.setattr(os, "replace", record)
    writing.write(writing.plan([result]).batches[0])  # type: ignore[list-item]
    assert seen and all(name.startswith(f".migrate-{os.getpid()}-") and name.endswith(".tmp") for name in seen)


def test_setuid_and_setgid_bits_survive_the_write(project: Path, capfd: pytest.CaptureFixture[str]) -> None:
    script = project / "a.py"
    try:
        os.chown(script, os.getuid(), os.getgid())
        script.chmod(0o6755)
    except PermissionError:
        pytest.skip("chown is not permitted here")
    if stat.S_IMODE(script.stat().st_mode) != 0o6755:
        pytest.skip("this file system does not keep setuid and setgid bits")
    status, err = write_run(capfd, "a.py")
    assert status == 0, err
    assert "dist.init_process_group(" in script.read_text()
    assert stat.S_IMODE(script.stat().st_mode) == 0o6755


def test_check_reports_what_write_would_refuse(project: Path, capfd: pytest.CaptureFixture[str]) -> None:
    (project / "run_b_ddp.sh").write_text("#!/bin/sh\necho my own launcher\n")
    status = run("ddp", ["a.py", "b.py"], DdpOptions(), write=False, check=True, report="text")
    captured = capfd.readouterr()
    assert status == 3  # files to change (1) and a refusal (2)
    assert captured.out.splitlines() == ["a.py", "b.py"]
    assert "run_b_ddp.sh: --write would refuse: exists and differs from the file generated for b.py" in captured.err
    clean = run("ddp", ["a.py"], DdpOptions(), write=False, check=True, report="text")
    assert clean == 1 and "--write would refuse" not in capfd.readouterr().err
