"""The guard of `migrate verify`'s ranks: an audit hook that keeps the user's files out of reach.

The runner (runner.py, `--guard FILE`) installs `Guard` in every rank before the script runs. The
work folder's views (session.py) link into its private copy and to the user's large files; before
anything writes, truncates, appends, chmods or removes through such a link, the link is replaced
by a private copy (`make_private`: a linked folder by a folder of links, a linked file by a copy of
its bytes), and a change that resolves into the user's folder (or a folder or file linked from it)
is refused with PermissionError. `torch.save` (written by C++) is announced by the runner as an
`open` first. Code that bypasses Python's file calls (a subprocess, a native library other than
torch.save) is not seen: session.py reports a linked file that changed anyway.

session.py also calls `make_private` to write the converted script into its view.
"""

from __future__ import annotations

import contextlib
import errno
import os
import shutil
import threading
from collections.abc import Iterator
from typing import Any

WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND
GUARD_LOCK = "guard.lock"


def make_private(path: str, work: str, final: str = "keep") -> None:
    """Replace the links of the work folder on the way to `path` by private copies: a linked folder
    by a new folder of links to its entries; a linked file at the end by a copy of its bytes
    (`final="copy"`) or by nothing (`"truncate"`: it is about to be rewritten); `"keep"` leaves a
    link at the end (removing or renaming it touches only the link). Only paths inside `work`;
    ranks doing it at once take turns (a lock file in `work`)."""
    steps = _steps(os.path.abspath(path), work)
    if not any(os.path.islink(step) for step in steps):
        return
    with _locked(work):
        for index, step in enumerate(steps):
            if not os.path.islink(step):
                continue
            last = index == len(steps) - 1
            if os.path.isdir(step):
                if not (last and final == "keep"):
                    _own_folder(step)
            elif not last:
                return  # a file on the way: nothing lies below it
            elif final == "copy" and os.path.exists(step):
                _own_file(step)
            elif final == "truncate":
                os.unlink(step)


def _steps(path: str, work: str) -> list[str]:
    """`work/a`, `work/a/b`, ... down to `path`; empty when `path` is not inside `work`."""
    if not path.startswith(work.rstrip(os.sep) + os.sep):
        return []
    steps, current = [], work
    for part in os.path.relpath(path, work).split(os.sep):
        current = os.path.join(current, part)
        steps.append(current)
    return steps


@contextlib.contextmanager
def _locked(work: str) -> Iterator[None]:
    import fcntl

    with open(os.path.join(work, GUARD_LOCK), "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


def _own_folder(link: str) -> None:
    target = os.path.realpath(link)
    fresh = f"{link}.verify-{os.getpid()}"
    os.mkdir(fresh)
    for name in os.listdir(target):
        os.symlink(os.path.join(target, name), os.path.join(fresh, name))
    os.unlink(link)
    os.rename(fresh, link)


def _own_file(link: str) -> None:
    fresh = f"{link}.verify-{os.getpid()}"
    shutil.copyfile(link, fresh)
    shutil.copymode(link, fresh)
    os.replace(fresh, link)


class Guard:
    """The audit hook: before a call that changes a file, make_private on its path; then refuse the
    call when the path resolves into a protected folder or file (the user's folder, what it links
    to), outside the work folder. Folders whose name starts with a dot below a protected folder
    (~/.cache when the script lies in the home folder) are not protected."""

    def __init__(self, work: str, protected: list[str]) -> None:
        self.work = os.path.realpath(work)
        self.protected = [os.path.realpath(p) for p in protected]
        self.busy = threading.local()
        # event -> its paths: (argument index, what happens at the path's end, resolves it, dir_fd's index)
        self.events: dict[str, list[tuple[int, str, bool, int | None]]] = {
            "os.remove": [(0, "keep", False, 1)], "os.rmdir": [(0, "keep", False, 1)],
            "os.rename": [(0, "keep", False, 2), (1, "keep", False, 3)], "os.mkdir": [(0, "keep", False, 2)],
            "os.symlink": [(1, "keep", False, 2)], "os.link": [(1, "keep", False, 3)],
            "os.chmod": [(0, "copy", True, 2)], "os.chown": [(0, "copy", True, 3)], "os.utime": [(0, "copy", True, 3)],
            "os.truncate": [(0, "copy", True, None)], "shutil.rmtree": [(0, "keep", False, 1)],
        }

    def __call__(self, event: str, args: tuple[Any, ...]) -> None:
        if event != "open" and event not in self.events:
            return
        if getattr(self.busy, "on", False):
            return  # the guard's own copies
        self.busy.on = True
        try:
            for path, final, resolves in self.paths(event, args):
                make_private(path, self.work, final)
                self.refuse_outside(path, resolves)
        finally:
            self.busy.on = False

    def paths(self, event: str, args: tuple[Any, ...]) -> list[tuple[str, str, bool]]:
        if event == "open":
            path, mode, flags = args
            mode = mode if isinstance(mode, str) else ""
            if not (flags & WRITE_FLAGS or any(c in mode for c in "wax+")):
                return []
            truncates = "w" in mode or (flags & os.O_TRUNC and flags & os.O_CREAT)
            final = "keep" if "x" in mode or flags & os.O_EXCL else "truncate" if truncates else "copy"
            found = [(path, final, True, None)]
        else:
            found = [(args[index], final, resolves, args[fd] if fd is not None and fd < len(args) else None)
                     for index, final, resolves, fd in self.events[event] if index < len(args)]
        return [(_path_of(path, dir_fd), final, resolves) for path, final, resolves, dir_fd in found
                if isinstance(path, (str, bytes, os.PathLike))]

    def refuse_outside(self, path: str, resolves: bool) -> None:
        real = os.path.realpath(path) if resolves else os.path.join(
            os.path.realpath(os.path.dirname(path)), os.path.basename(path))
        if real == self.work or real.startswith(self.work + os.sep):
            return
        for root in self.protected:
            if real == root or (real.startswith(root.rstrip(os.sep) + os.sep)
                                and not any(part.startswith(".") for part in os.path.relpath(real, root).split(os.sep))):
                raise PermissionError(errno.EACCES, "migrate verify keeps the script from changing the user's "
                                      "files: this path lies outside verify's copy of the folder", real)


def _path_of(path: str | bytes | os.PathLike[str], dir_fd: Any = None) -> str:
    """The absolute path (not resolved); relative to `dir_fd`'s folder when one is given."""
    path = os.fsdecode(path)
    if isinstance(dir_fd, int) and not os.path.isabs(path):
        with contextlib.suppress(OSError):
            return os.path.join(os.readlink(f"/proc/self/fd/{dir_fd}"), path)
    return os.path.abspath(path)
