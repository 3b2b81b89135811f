"""Every test in tests/verify that runs `migrate verify` proves that the user's folder is unchanged.

The autouse fixture watches each `migrate verify` started through subprocess (run or Popen) and
each in-process call of migrate.verify.session.verify: at the call it records every entry of the
script's folder (sha256, mode, symbolic link targets, and the bytes a link points to, inside or
outside the folder); after the test it asserts that nothing of it changed. A `--keep` folder inside
the script's folder is left out (verify is asked to write there).
"""

from __future__ import annotations

import hashlib
import os
import stat
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

Entry = tuple[Any, ...]


def digest(path: str) -> str:
    """sha256 of a regular file's bytes; what is not a regular file is never opened."""
    try:
        if not stat.S_ISREG(os.stat(path).st_mode):
            return "not a regular file"
    except OSError as error:
        return f"unreadable: {error.strerror}"
    hasher = hashlib.sha256()
    with open(path, "rb") as stream:
        for block in iter(lambda: stream.read(1 << 20), b""):
            hasher.update(block)
    return hasher.hexdigest()


def snapshot(folder: Path, leave_out: frozenset[str] = frozenset()) -> dict[str, Entry]:
    """{path relative to folder: what it is} for every entry, links not followed (their targets'
    bytes are recorded, wherever they are)."""
    state: dict[str, Entry] = {}
    for current, folders, files in os.walk(folder):
        folders[:] = [f for f in folders if os.path.abspath(os.path.join(current, f)) not in leave_out]
        for name in [*folders, *files]:
            path = os.path.join(current, name)
            info = os.lstat(path)
            key = os.path.relpath(path, folder)
            if stat.S_ISLNK(info.st_mode):
                state[key] = ("link", os.readlink(path), digest(os.path.realpath(path)))
            elif stat.S_ISREG(info.st_mode):
                state[key] = ("file", stat.S_IMODE(info.st_mode), digest(path))
            elif stat.S_ISDIR(info.st_mode):
                state[key] = ("folder", stat.S_IMODE(info.st_mode))
            else:
                state[key] = ("special", stat.S_IFMT(info.st_mode), stat.S_IMODE(info.st_mode))
    return state


def differences(before: dict[str, Entry], after: dict[str, Entry]) -> list[str]:
    return [f"{key}: {before.get(key)} -> {after.get(key)}" for key in sorted(set(before) | set(after))
            if before.get(key) != after.get(key)]


def verify_command(arguments: Any) -> list[str] | None:
    """The arguments after `verify` when `arguments` runs `migrate verify`, else None."""
    if not isinstance(arguments, (list, tuple)):
        return None
    words = [str(a) for a in arguments]
    for index, word in enumerate(words[:-1]):
        if Path(word).name == "migrate" or word == "migrate":
            if words[index + 1] == "verify":
                return words[index + 2:]
    return None


class Watch:
    """The folders of the scripts verify was started on, as they were then."""

    def __init__(self) -> None:
        self.folders: dict[str, tuple[frozenset[str], dict[str, Entry]]] = {}

    def command(self, arguments: list[str], cwd: Any) -> None:
        base = os.path.abspath(cwd) if cwd else os.getcwd()
        mine = arguments[: arguments.index("--")] if "--" in arguments else arguments
        keep = [os.path.join(base, mine[i + 1]) for i, word in enumerate(mine[:-1]) if word == "--keep"]
        for word in mine:
            path = os.path.join(base, word)
            if os.path.isfile(path):
                self.folder(os.path.dirname(os.path.abspath(path)), keep)

    def folder(self, folder: str, keep: list[str]) -> None:
        leave_out = frozenset(os.path.abspath(k) for k in keep)
        self.folders[folder] = (leave_out, snapshot(Path(folder), leave_out))

    def check(self) -> None:
        for folder, (leave_out, before) in self.folders.items():
            changed = differences(before, snapshot(Path(folder), leave_out))
            assert not changed, f"migrate verify changed the user's folder {folder}:\n" + "\n".join(changed)


@pytest.fixture(autouse=True)
def user_folder_unchanged(monkeypatch: pytest.MonkeyPatch) -> Iterator[Watch]:
    import migrate.verify.session as session

    watch = Watch()
    popen = subprocess.Popen

    class Watched(popen):  # type: ignore[misc, valid-type]
        def __init__(self, args: Any, *more: Any, **options: Any) -> None:
            arguments = verify_command(args)
            if arguments is not None:
                watch.command(arguments, options.get("cwd"))
            super().__init__(args, *more, **options)

    real_verify = session.verify

    def watched_verify(script: str, options: Any) -> Any:
        watch.folder(os.path.dirname(os.path.abspath(script)), [options.keep] if options.keep else [])
        return real_verify(script, options)

    monkeypatch.setattr(subprocess, "Popen", Watched)
    monkeypatch.setattr(session, "verify", watched_verify)
    yield watch
    watch.check()
