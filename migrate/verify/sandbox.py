"""The work folder of `migrate verify`: a private copy of the user's folder and its two views.

The user's folder is only read, and nothing verify starts can write into it:
- `base/` is copied once: folders recreated, symbolic links resolved into copies (a link to a folder
  outside the user's folder stays a link, a link loop or a broken link is skipped with a note),
  files up to COPY_LIMIT copied, larger ones cloned (reflink) where the file system can, else linked
  read-only. FIFOs, sockets and devices are never opened: skipped with a note.
- `original/` and `converted/` share base's data: their folders are real, their Python files
  copies, every other entry a link into base. Inside each rank the runner's guard (guard.py)
  replaces such a link with a private copy before anything writes through it, and refuses a write
  that resolves into the user's folder; `guard.json` holds its settings.
- A path of the copies in a message is named as the user's own path (`user_path`, `named_for_user`).
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import shutil
import stat
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from migrate.records import InputError
from migrate.verify.checks import VerifyResult
from migrate.verify.guard import make_private

COPY_LIMIT = 8 * 1024 * 1024  # files above this are cloned or linked read-only, not copied
SKIPPED_FOLDERS = {".git", ".venv", "venv", "__pycache__", ".mypy_cache", ".pytest_cache", "node_modules", ".corpus"}
FICLONE = 0x40049409  # ioctl: share the blocks of a file (btrfs, XFS, ...)


def work_folder(keep: str | None, folder: Path) -> Path:
    """A new temporary folder, or --keep's: refused when it exists and holds anything, is not a
    folder, or is (or holds) the script's folder, so that nothing in it is overwritten."""
    if not keep:  # the real path: the ranks see it so (os.getcwd() resolves links)
        return Path(os.path.realpath(tempfile.mkdtemp(prefix="migrate-verify-")))
    path, real, user = Path(keep), os.path.realpath(keep), os.path.realpath(folder)
    if within(user, real):
        raise InputError(keep, 0, 0, "--keep: this folder holds the script's folder; name a new folder outside it")
    if os.path.lexists(keep) and not path.is_dir():
        raise InputError(keep, 0, 0, "--keep: exists and is not a folder; name a new or empty folder")
    if path.is_dir() and any(path.iterdir()):
        raise InputError(keep, 0, 0, "--keep: the folder is not empty; name a new or empty folder (nothing was written)")
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        raise InputError(keep, 0, 0, f"--keep: cannot create the folder: {error.strerror}") from None
    return Path(os.path.realpath(path))


def within(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip(os.sep) + os.sep)


def user_path(path: str, work: Path, folder: Path) -> str:
    """A path in the work folder's copies, as the user's own path."""
    for copy in ("base", "original", "converted"):
        prefix = str(work / copy)
        if within(path, prefix):
            return str(folder) + path[len(prefix):]
    return path


@dataclass
class Sandbox:
    """The work folder: base/ (the private copy), original/ and converted/ (its two views)."""

    folder: Path  # the user's folder, as named
    work: Path
    notes: list[str] = field(default_factory=list)
    linked: dict[str, tuple[int, int, int]] = field(default_factory=dict)  # user's file linked read-only -> its stat
    outside: set[str] = field(default_factory=set)  # folders outside the user's, linked read-only
    copied: dict[tuple[int, int], Path] = field(default_factory=dict)  # (device, inode) of a folder -> its copy

    @property
    def base(self) -> Path:
        return self.work / "base"

    @property
    def original(self) -> Path:
        return self.work / "original"

    @property
    def converted(self) -> Path:
        return self.work / "converted"

    @property
    def guard(self) -> Path:
        return self.work / "guard.json"

    def changed_files(self) -> list[str]:
        """The user's linked files whose contents changed since they were linked (written by
        something the runner's guard cannot see: a subprocess, a native library)."""
        changed = [path for path, seen in self.linked.items() if signature(path) != seen]
        for path in changed:
            self.linked[path] = signature(path)
        return changed


def signature(path: str) -> tuple[int, int, int]:
    try:
        info = os.stat(path)
    except OSError:
        return (-1, -1, -1)
    return (info.st_size, info.st_mtime_ns, info.st_ino)


def build(sandbox: Sandbox, script_name: str) -> None:
    """base/ copied from the user's folder, original/ and converted/ mirrored from it, and the
    guard's settings for the runner."""
    copy_folder(sandbox)
    for view in (sandbox.original, sandbox.converted):
        mirror(sandbox.base, view, script_name)
    protected = [os.path.realpath(sandbox.folder), *sorted(sandbox.outside), *sorted(sandbox.linked)]
    sandbox.guard.write_text(json.dumps({"work": str(sandbox.work), "protected": protected}))


def copy_folder(sandbox: Sandbox) -> None:
    """Copy the user's folder into base/ (see the module docstring); caches, VCS and the work
    folder itself (`--keep` a folder beside the script) are left out."""
    sandbox.base.mkdir()
    info = os.stat(sandbox.folder)
    sandbox.copied[(info.st_dev, info.st_ino)] = sandbox.base
    pending = [(sandbox.folder, sandbox.base)]
    while pending:
        source, target = pending.pop()
        for name in folder_entries(source):
            copy_entry(sandbox, source / name, target / name, pending)


def folder_entries(folder: Path) -> list[str]:
    try:
        return sorted(os.listdir(folder))
    except OSError as error:
        raise InputError(str(folder), 0, 0, f"cannot read this folder: {error.strerror}; verify copies the "
                         "script's folder (make it readable, or move the script)") from None


def copy_entry(sandbox: Sandbox, path: Path, target: Path, pending: list[tuple[Path, Path]]) -> None:
    try:
        link = os.lstat(path)
        info = os.stat(path) if stat.S_ISLNK(link.st_mode) else link
    except FileNotFoundError:
        if os.path.lexists(path):
            sandbox.notes.append(f"{path}: not copied: a broken symbolic link")
        return
    except OSError as error:
        if error.errno == errno.ELOOP:
            sandbox.notes.append(f"{path}: not copied: a symbolic link loop")
            return
        raise InputError(str(path), 0, 0, f"cannot read: {error.strerror}") from None
    if stat.S_ISDIR(info.st_mode):
        copy_folder_entry(sandbox, path, target, info, stat.S_ISLNK(link.st_mode), pending)
    elif stat.S_ISREG(info.st_mode):
        copy_file(sandbox, path, target, info)
    else:
        sandbox.notes.append(f"{path}: not copied: is {special_kind(info.st_mode)}, not a regular file or folder")


def copy_folder_entry(sandbox: Sandbox, path: Path, target: Path, info: os.stat_result, is_link: bool,
                      pending: list[tuple[Path, Path]]) -> None:
    """A folder: recreated and walked; one already copied (a second link to it, a link to a folder
    above it) becomes a link to that copy; one outside the user's folder is linked read-only."""
    real = os.path.realpath(path)
    if path.name in SKIPPED_FOLDERS or real == os.path.realpath(sandbox.work):
        return
    key = (info.st_dev, info.st_ino)
    if key in sandbox.copied:
        os.symlink(sandbox.copied[key], target)
    elif is_link and not within(real, os.path.realpath(sandbox.folder)):
        os.symlink(real, target)
        sandbox.outside.add(real)
    else:
        target.mkdir()
        sandbox.copied[key] = target
        pending.append((path, target))


def copy_file(sandbox: Sandbox, path: Path, target: Path, info: os.stat_result) -> None:
    """Small files copied; large ones cloned, else linked read-only (the runner's guard copies one
    before a write reaches it)."""
    try:
        if info.st_size <= COPY_LIMIT:
            copied = copy_bytes(path, target)
        else:
            copied = clone(path, target) or link_read_only(sandbox, path, target)
    except OSError as error:  # writing the copy (reading is open_regular's)
        raise InputError(str(path), 0, 0, f"cannot copy it into verify's work folder: {error.strerror}") from None
    if not copied:
        sandbox.notes.append(f"{path}: not copied: it is no longer a regular file")


@contextlib.contextmanager
def open_regular(path: Path) -> Iterator[int | None]:
    """A read descriptor of `path`, or None when what is there now is not a regular file (never
    blocks on a FIFO put in its place). InputError, naming the user's path, when it cannot be read."""
    try:
        descriptor = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    except OSError as error:
        raise InputError(str(path), 0, 0, f"cannot read: {error.strerror}; verify copies the script's folder "
                         "(make the file readable, or move it out of the folder)") from None
    try:
        yield descriptor if stat.S_ISREG(os.fstat(descriptor).st_mode) else None
    finally:
        os.close(descriptor)


def copy_bytes(path: Path, target: Path) -> bool:
    with open_regular(path) as descriptor:
        if descriptor is None:
            return False
        info = os.fstat(descriptor)
        with open(descriptor, "rb", closefd=False) as source, open(target, "xb") as copy:
            shutil.copyfileobj(source, copy, 1 << 20)
        os.chmod(target, stat.S_IMODE(info.st_mode) & 0o777)
        os.utime(target, ns=(info.st_atime_ns, info.st_mtime_ns))
    return True


def clone(path: Path, target: Path) -> bool:
    """A copy that shares the file's blocks (FICLONE); False where the file system cannot."""
    import fcntl

    with open_regular(path) as descriptor:
        if descriptor is None:
            return False
        with open(target, "xb") as copy:
            try:
                fcntl.ioctl(copy.fileno(), FICLONE, descriptor)
            except OSError:
                cloned = False
            else:
                cloned = True
        if not cloned:
            target.unlink()
            return False
        os.chmod(target, stat.S_IMODE(os.fstat(descriptor).st_mode) & 0o777)
    return True


def link_read_only(sandbox: Sandbox, path: Path, target: Path) -> bool:
    real = os.path.realpath(path)
    with open_regular(Path(real)) as descriptor:  # readable, and a regular file
        if descriptor is None:
            return False
    os.symlink(real, target)
    sandbox.linked[real] = signature(real)
    return True


def special_kind(mode: int) -> str:
    if stat.S_ISFIFO(mode):
        return "a FIFO (named pipe)"
    if stat.S_ISSOCK(mode):
        return "a socket"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    return "not a plain file"


def mirror(base: Path, view: Path, script_name: str) -> None:
    """A view of base/: its folders recreated, its Python files (and the script) copied, every
    other entry a link into base/, so the two runs share the data without copying it twice."""
    for current, folders, files in os.walk(base):
        here = view / os.path.relpath(current, base)
        here.mkdir(exist_ok=True)
        for name in [*folders, *files]:
            entry = Path(current) / name
            script = here == view and name == script_name  # the runner names the user's frames by it
            if script or (name.endswith(".py") and entry.is_file() and not entry.is_symlink()):
                shutil.copy2(entry, here / name)
            elif entry.is_symlink() or not entry.is_dir():
                os.symlink(entry, here / name)


def write_private(path: Path, text: str, work: Path) -> None:
    """Write a file of the converted view; a link on the way (into base/) is replaced first."""
    make_private(str(path), str(work), "truncate")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def named_for_user(result: VerifyResult, sandbox: Sandbox) -> VerifyResult:
    """Paths of the work folder's copies, in the message and each detail, as the user's own."""
    prefixes = [f"{sandbox.work / copy}{os.sep}" for copy in ("base", "original", "converted")]

    def named(text: str) -> str:
        for prefix in prefixes:
            text = text.replace(prefix, f"{sandbox.folder}{os.sep}")
        return text

    result.message = named(result.message)
    result.notes = [named(note) for note in result.notes]
    for check in result.checks:
        check.detail = [named(line) for line in check.detail]
    return result
