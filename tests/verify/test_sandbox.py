"""`migrate verify` never touches the user's files.

The work folder shares nothing writable with the user's folder: links are resolved into copies,
large files are linked read-only and the runner's guard replaces such a link by a private copy
before anything writes through it; a write that resolves into the user's folder is refused.
--keep never overwrites; what verify cannot copy is noted, never opened; errors name the user's
paths, and --report json prints the error as JSON. The last test runs the whole thing on a folder
that holds each of these traps (real processes, slow).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from migrate.records import InputError
from migrate.verify import session
from migrate.verify.checks import Check, VerifyResult
from migrate.verify.runner import Guard, make_private
from tests.verify.conftest import snapshot

LARGE = session.COPY_LIMIT + 1024


def user_folder(root: Path) -> tuple[Path, Path]:
    """A script folder with every trap: the script a link to another file, a large checkpoint, a
    log linked to a file outside, a folder linked from outside, a link back up, a FIFO, a broken
    link and a link loop. Returns (folder, outside)."""
    folder, outside = root / "project", root / "outside"
    (outside / "data").mkdir(parents=True)
    (outside / "data" / "samples.txt").write_text("outside samples\n")
    (outside / "log.txt").write_text("the user's own log\n")
    (folder / "sub").mkdir(parents=True)
    (folder / "train_v2.py").write_text("print('the user\\'s script')\n")
    (folder / "train.py").symlink_to("train_v2.py")
    with open(folder / "model.pt", "wb") as model:
        model.truncate(LARGE)
    (folder / "log.txt").symlink_to(outside / "log.txt")
    (folder / "data").symlink_to(outside / "data")
    (folder / "sub" / "up").symlink_to("..")
    (folder / "sub" / "notes.md").write_text("notes\n")
    os.mkfifo(folder / "pipe")
    (folder / "gone").symlink_to("nowhere")
    (folder / "loop1").symlink_to("loop2")
    (folder / "loop2").symlink_to("loop1")
    return folder, outside


def built(tmp_path: Path) -> tuple[session.Sandbox, Path, Path]:
    folder, outside = user_folder(tmp_path)
    work = tmp_path / "work"
    work.mkdir()
    sandbox = session.Sandbox(folder=folder, work=work)
    session.build(sandbox, "train.py")
    return sandbox, folder, outside


def test_the_copy_resolves_links_and_notes_what_it_cannot_copy(tmp_path: Path) -> None:
    sandbox, folder, outside = built(tmp_path)
    for view in (sandbox.base, sandbox.original, sandbox.converted):
        assert (view / "train.py").is_file() and not (view / "train.py").is_symlink()
        assert not any(os.path.lexists(view / name) for name in ("pipe", "gone", "loop1", "loop2"))
    assert (sandbox.base / "sub").is_dir() and not (sandbox.base / "sub").is_symlink()
    assert os.readlink(sandbox.base / "sub" / "up") == str(sandbox.base)  # the copy, not the user's folder
    assert not (sandbox.base / "log.txt").is_symlink()  # a small linked file: copied
    assert os.readlink(sandbox.base / "model.pt") == str(folder / "model.pt")  # large: linked read-only
    assert os.readlink(sandbox.base / "data") == str(outside / "data")  # a folder outside: linked read-only
    assert os.readlink(sandbox.original / "sub" / "notes.md") == str(sandbox.base / "sub" / "notes.md")  # shared
    notes = "\n".join(sandbox.notes)
    assert f"{folder / 'pipe'}: not copied: is a FIFO (named pipe), not a regular file or folder" in notes
    assert f"{folder / 'gone'}: not copied: a broken symbolic link" in notes
    assert f"{folder / 'loop1'}: not copied: a symbolic link loop" in notes
    guard = json.loads(sandbox.guard.read_text())
    assert guard["work"] == str(sandbox.work)
    assert {str(folder), str(outside / "data"), str(folder / "model.pt")} <= set(guard["protected"])


def test_the_guard_copies_a_link_before_anything_writes_through_it(tmp_path: Path) -> None:
    sandbox, folder, outside = built(tmp_path)
    before = snapshot(tmp_path, frozenset({str(sandbox.work)}))
    guard = Guard(str(sandbox.work), json.loads(sandbox.guard.read_text())["protected"])
    view = sandbox.original
    guard("open", (str(view / "model.pt"), "wb", 0))  # rewritten: the link goes, the open creates a file
    assert not os.path.lexists(view / "model.pt")
    guard("open", (str(view / "log.txt"), None, os.O_WRONLY | os.O_APPEND))  # appended: a private copy first
    assert not (view / "log.txt").is_symlink() and (view / "log.txt").read_text() == "the user's own log\n"
    guard("open", (str(view / "data" / "samples.txt"), "r+", 0))  # through a linked folder
    assert not (view / "data").is_symlink() and not (view / "data" / "samples.txt").is_symlink()
    guard("os.chmod", (str(view / "sub" / "notes.md"), 0o600, None))
    assert not (view / "sub" / "notes.md").is_symlink()
    guard("os.remove", (str(view / "train_v2.py"), None))  # only the link goes: nothing to copy
    guard("open", (str(view / "model.pt"), "r", 0))  # reading: nothing happens
    assert snapshot(tmp_path, frozenset({str(sandbox.work)})) == before


@pytest.mark.parametrize("path", ["model.pt", "data/samples.txt", "data/new.txt", "sub/notes.md"])
def test_the_guard_refuses_a_write_that_resolves_into_the_user_s_files(tmp_path: Path, path: str) -> None:
    sandbox, folder, outside = built(tmp_path)
    guard = Guard(str(sandbox.work), json.loads(sandbox.guard.read_text())["protected"])
    resolved = os.path.realpath(sandbox.base / path)  # what Path(...).resolve() in the script gives
    if path == "sub/notes.md":
        resolved = str(folder / path)  # an absolute path into the user's folder
    with pytest.raises(PermissionError, match="outside verify's copy"):
        guard("open", (resolved, "w", 0))
    with pytest.raises(PermissionError):
        guard("os.remove", (resolved, None))
    guard("open", (str(folder / ".cache" / "x"), "w", 0))  # a dot-folder (~/.cache beside a script in ~): allowed


def test_the_guard_in_a_process_keeps_every_file_call_inside_the_copy(tmp_path: Path) -> None:
    """The hook installed as the runner installs it, and the calls a script makes."""
    sandbox, folder, outside = built(tmp_path)
    before = snapshot(tmp_path, frozenset({str(sandbox.work)}))
    script = textwrap.dedent(f"""
        import json, os, shutil, sys
        from pathlib import Path
        from migrate.verify.runner import Guard
        settings = json.loads(Path({str(sandbox.guard)!r}).read_text())
        sys.addaudithook(Guard(settings["work"], settings["protected"]))
        os.chdir({str(sandbox.converted)!r})
        with open("model.pt", "wb") as f: f.write(b"new")
        with open("log.txt", "a") as f: f.write("more\\n")
        os.truncate("sub/notes.md", 1)
        with open("data/samples.txt", "w") as f: f.write("changed")
        os.replace("train_v2.py", "renamed.py")
        shutil.rmtree("data")
        try:
            open(Path("sub/up/model.pt").resolve(), "r+b")
        except PermissionError as error:
            print("refused", error.filename)
    """)
    process = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60,
                             cwd=Path(__file__).parents[2])
    assert process.returncode == 0, process.stderr
    assert process.stdout.strip() == f"refused {folder / 'model.pt'}"  # resolved through the links: refused
    assert (sandbox.converted / "model.pt").read_bytes() == b"new"
    assert snapshot(tmp_path, frozenset({str(sandbox.work)})) == before


def test_make_private_replaces_a_linked_folder_with_a_folder_of_links(tmp_path: Path) -> None:
    sandbox, folder, outside = built(tmp_path)
    make_private(str(sandbox.converted / "data" / "new.txt"), str(sandbox.work), "truncate")
    assert (sandbox.converted / "data").is_dir() and not (sandbox.converted / "data").is_symlink()
    assert os.readlink(sandbox.converted / "data" / "samples.txt") == str(outside / "data" / "samples.txt")
    assert (sandbox.original / "data").is_symlink()  # the other view is left as it was


def test_a_linked_file_changed_behind_the_guard_s_back_is_reported(tmp_path: Path) -> None:
    """A subprocess or a native library writing through a read-only link: said, not hidden."""
    sandbox, folder, outside = built(tmp_path)
    assert sandbox.changed_files() == []
    with open(folder / "model.pt", "ab") as model:  # its size changes (a timestamp may not, within a tick)
        model.write(b"changed")
    assert sandbox.changed_files() == [str(folder / "model.pt")]
    assert sandbox.changed_files() == []  # said once


def test_keep_refuses_a_folder_that_holds_files_or_the_script(tmp_path: Path) -> None:
    folder = tmp_path / "project"
    folder.mkdir()
    (folder / "train.py").write_text("x = 1\n")
    full = tmp_path / "full"
    full.mkdir()
    (full / "notes.txt").write_text("the user's notes\n")
    (tmp_path / "file").write_text("a file\n")
    cases = {str(full): "is not empty", str(folder): "holds the script's folder",
             str(tmp_path): "holds the script's folder", str(tmp_path / "file"): "is not a folder"}
    for keep, message in cases.items():
        with pytest.raises(InputError, match=message) as raised:
            session.work_folder(keep, folder)
        assert raised.value.path == keep
    assert (full / "notes.txt").read_text() == "the user's notes\n" and sorted(os.listdir(full)) == ["notes.txt"]
    kept = session.work_folder(str(tmp_path / "new" / "keep"), folder)
    assert kept.is_dir() and not any(kept.iterdir())


def migrate_verify(*arguments: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "migrate", "verify", *arguments], capture_output=True, text=True,
                          timeout=120, cwd=cwd, env={**os.environ, "PYTHONPATH": str(Path(__file__).parents[2])})


def test_report_json_prints_the_error_of_a_verify_that_cannot_run(tmp_path: Path) -> None:
    (tmp_path / "train.py").write_text("x = 1\n")
    (tmp_path / "keep").mkdir()
    (tmp_path / "keep" / "notes.txt").write_text("mine\n")
    process = migrate_verify("--report", "json", "--keep", "keep", "train.py", cwd=tmp_path)
    assert process.returncode == 2
    report = json.loads(process.stdout)
    assert report["status"] == "error" and report["checks"] == []
    assert report["message"] == "keep: --keep: the folder is not empty; name a new or empty folder (nothing was written)"
    assert "migrate: keep: --keep: the folder is not empty" in process.stderr


def test_a_syntax_error_names_the_user_s_script_not_the_copy(tmp_path: Path) -> None:
    (tmp_path / "train.py").write_text("import torch\nloss.backward(\n")
    process = migrate_verify("--report", "json", "train.py", cwd=tmp_path)
    assert process.returncode == 2
    message = json.loads(process.stdout)["message"]
    assert message.startswith("train.py:") and "migrate-verify" not in message + process.stderr


def test_an_unreadable_file_in_the_folder_is_named(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Root reads any file: the refusal of the open is simulated."""
    folder, _ = user_folder(tmp_path)
    (folder / "secret.txt").write_text("x\n")
    real_open = os.open

    def refusing(path: object, flags: int, *more: object, **options: object) -> int:
        if str(path) == str(folder / "secret.txt"):
            raise PermissionError(13, "Permission denied")
        return real_open(path, flags, *more, **options)  # type: ignore[arg-type]

    monkeypatch.setattr(os, "open", refusing)
    work = tmp_path / "work"
    work.mkdir()
    with pytest.raises(InputError) as raised:
        session.build(session.Sandbox(folder=folder, work=work), "train.py")
    assert str(raised.value).startswith(f"{folder / 'secret.txt'}: cannot read: Permission denied")


def test_paths_of_the_copies_are_shown_as_the_user_s(tmp_path: Path) -> None:
    sandbox = session.Sandbox(folder=tmp_path / "project", work=tmp_path / "work")
    result = VerifyResult(script="train.py", target="ddp", status="error",
                          message=f"FileNotFoundError: '{sandbox.original}/data.csv'",
                          checks=[Check("steps", "failed", [f'File "{sandbox.converted}/helper.py", line 3'])])
    session.named_for_user(result, sandbox)
    assert result.message == f"FileNotFoundError: '{tmp_path / 'project'}/data.csv'"
    assert result.checks[0].detail == [f'File "{tmp_path / "project"}/helper.py", line 3']


TRAIN = """\
import torch

model = torch.nn.Linear(1, 1)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
for step in range(3):
    loss = model(torch.ones(4, 1) * (step + 1)).pow(2).mean()
    optimizer.zero_grad()
    loss.backward()
    torch.save(model.state_dict(), "model.pt")
    with open("log.txt", "w") as log:
        log.write(f"{loss.item()}\\n")
    optimizer.step()
"""


@pytest.mark.slow
def test_verify_leaves_the_user_s_folder_as_it_was(tmp_path: Path) -> None:
    """A linked script, a large checkpoint the script overwrites, a log linked to a file outside:
    the runs write their own copies (kept with --keep), never the user's files (the autouse
    fixture compares the folder too)."""
    folder, outside = user_folder(tmp_path)
    (folder / "train_v2.py").write_text(TRAIN)
    before = snapshot(tmp_path)
    process = migrate_verify("--report", "json", "--steps", "1", "--timeout", "60", "--keep", str(tmp_path / "keep"),
                             "train.py", cwd=folder)
    report = json.loads(process.stdout)
    assert report["status"] == "passed", json.dumps(report, indent=1)
    assert any("is a FIFO (named pipe)" in note for note in report["notes"])
    kept = tmp_path / "keep"
    for view in ("original", "converted"):  # the runs wrote, into their own files
        assert (kept / view / "model.pt").stat().st_size < LARGE and not (kept / view / "model.pt").is_symlink()
        assert not (kept / view / "log.txt").is_symlink()
    assert "init_process_group" in (kept / "converted" / "train.py").read_text()
    assert not differences_outside(before, snapshot(tmp_path), "keep")
    shutil.rmtree(kept)


def differences_outside(before: dict, after: dict, leave_out: str) -> list[str]:
    keys = {k for k in set(before) | set(after) if not k.startswith(leave_out)}
    return [k for k in keys if before.get(k) != after.get(k)]
