"""`--write`: all or nothing, and nothing lost.

Every file a run would write is planned and checked before the first one is written: an existing
launcher or config that differs from what would be generated (it is the user's: never
overwritten), two scripts that would write the same file differently, an output that is a folder
or one of the scripts being converted, a read-only file or folder, and a script that changed on
disk since it was read. Then, script by script, the files a script needs (launcher, config) are
written before the script itself, so an interrupted run never leaves a converted script without
them; a re-run finds them identical and finishes the job.

Each file is written atomically: a temporary file in the same folder, flushed and fsynced, given
the original's mode, owner, group and extended attributes (ACLs), then renamed over the real file
(through a symlink, not over it), with the script re-checked for edits just before the rename.
New files get the umask's permissions. A hard-linked script is replaced under its own name only.
"""

from __future__ import annotations

import contextlib
import os
import signal
import stat
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass

from migrate.model import FileResult, InputError
from migrate.sources import fingerprint, read_regular_file


@dataclass(frozen=True)
class Output:
    """One file a run writes."""

    path: str  # as the user and the diff name it
    data: bytes
    script: str  # the script it belongs to (itself, for a converted script)
    expected: str | None = None  # sha256 the file must still have (a converted script); None: a generated file
    executable: bool = False


@dataclass(frozen=True)
class Plan:
    """What `--write` would write, script by script (generated files first), and why it cannot."""

    batches: list[list[Output]]
    problems: list[InputError]
    notes: list[str]


def plan(results: list[FileResult], replace: frozenset[str] = frozenset(), launch: bool = False) -> Plan:
    """Check every output of every result before anything is written. `launch` (`migrate launch`):
    messages name its options; `replace` (its --force): real paths of generated files that are
    replaced, not kept, when they exist and differ."""
    problems: list[InputError] = []
    notes: list[str] = []
    scripts = {os.path.realpath(r.path): r.path for r in results}
    claimed: dict[str, Output] = {}
    batches: list[list[Output]] = []
    for result in results:
        batch = [Output(a.path, a.text.encode("utf-8"), result.path, executable=a.executable) for a in result.artifacts]
        if result.new != result.old:
            batch.append(Output(result.path, result.new.encode(result.encoding), result.path, expected=result.digest))
        kept: list[Output] = []
        for output in batch:
            problem = _problem(output, scripts, claimed, replace, launch)
            if problem is not None:
                problems.append(problem)
                continue
            real = os.path.realpath(output.path)
            if real in claimed:
                continue  # the same file with the same content, from another script: written once
            claimed[real] = output
            kept.append(output)
            note = _hard_link_note(output)
            if note:
                notes.append(note)
        batches.append(kept)
    return Plan(batches=batches, problems=problems, notes=notes)


def _problem(output: Output, scripts: dict[str, str], claimed: dict[str, Output],
             replace: frozenset[str] = frozenset(), launch: bool = False) -> InputError | None:
    real = os.path.realpath(output.path)
    if output.expected is None:
        option = "--out" if launch else "--config-out"
        if real in scripts:
            return InputError(output.path, 0, 0, f"would be overwritten by a file generated for {output.script}; "
                              f"it is {'the script itself' if launch else 'a script being converted'} (check {option})")
        if os.path.isdir(real):
            return InputError(output.path, 0, 0, f"is a folder; the file generated for {output.script} needs a file "
                              f"name there (check {option})")
        other = claimed.get(real)
        if other is not None and other.data != output.data:
            if launch:
                return InputError(output.path, 0, 0, "the launcher and its hostfile would both be this file: give "
                                  "--out another name")
            return InputError(output.path, 0, 0, f"{other.script} and {output.script} would both write this file, with "
                              "different contents; convert them in separate runs with different --config-out "
                              "names")
        if other is None and os.path.lexists(output.path) and not (real in replace and os.path.isfile(real)):
            return _existing_problem(output, real, launch)
    elif os.path.lexists(real):
        try:
            current = fingerprint(read_regular_file(real))
        except InputError as error:
            return InputError(output.path, 0, 0, f"{error.message}")
        if current != output.expected:
            return InputError(output.path, 0, 0, "changed on disk since it was read (run again)")
    return _writable_problem(output.path, real)


def _existing_problem(output: Output, real: str, launch: bool = False) -> InputError | None:
    """A generated file that already exists is left as it is if identical; otherwise it is the user's."""
    if not os.path.exists(real):
        return InputError(output.path, 0, 0, "is a broken symlink; remove it first")
    try:
        current = read_regular_file(real)
    except InputError as error:
        return InputError(output.path, 0, 0, f"{error.message}")
    if current == output.data:
        return None
    if launch:
        return InputError(output.path, 0, 0, f"exists and differs from the launcher generated for {output.script}; "
                          "it is kept: move it away, write another with --out PATH, or replace it with --force")
    return InputError(output.path, 0, 0, f"exists and differs from the file generated for {output.script}; it is "
                      "never overwritten: move it away, or (for a DeepSpeed config) name another with "
                      "--config-out and merge the two by hand")


def _writable_problem(path: str, real: str) -> InputError | None:
    """Read-only mode bits count even for root, who could otherwise write anything."""
    if os.path.exists(real):
        mode = os.stat(real).st_mode
        if not mode & 0o222 or not os.access(real, os.W_OK):
            return InputError(path, 0, 0, "is read-only")
    folder = os.path.dirname(real)
    existing = folder
    while existing and not os.path.isdir(existing):
        existing = os.path.dirname(existing)
    if not os.access(existing or os.curdir, os.W_OK | os.X_OK):
        return InputError(path, 0, 0, f"cannot create a file in {folder}")
    return None


def _hard_link_note(output: Output) -> str | None:
    try:
        links = os.stat(output.path).st_nlink
    except OSError:
        return None
    if links > 1:
        return (f"{output.path} has {links} hard links: the converted file replaces this name only; "
                "the other names keep the original")
    return None


def write(batch: list[Output]) -> None:
    """Write one script's files: generated files first, the script last."""
    with _interrupts_raise():
        for output in batch:
            write_atomically(output)


def write_atomically(output: Output) -> None:
    """Temp file, fsync, metadata of the file it replaces, edit re-check, rename, fsync the folder."""
    real = os.path.realpath(output.path)
    folder = os.path.dirname(real)
    os.makedirs(folder, exist_ok=True)
    existing = os.stat(real) if os.path.exists(real) else None
    handle, temporary = tempfile.mkstemp(dir=folder, prefix=".migrate-", suffix=".tmp")
    try:
        with os.fdopen(handle, "wb") as stream:
            stream.write(output.data)
            stream.flush()
            os.fsync(stream.fileno())
        if existing is not None:
            _copy_metadata(real, temporary, existing)
        else:
            os.chmod(temporary, new_file_mode(output.executable))
        if output.expected is not None and fingerprint(read_regular_file(real)) != output.expected:
            raise InputError(output.path, 0, 0, "changed on disk since it was read; not written (run again)")
        os.replace(temporary, real)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temporary)
        raise
    _fsync_folder(folder)


def new_file_mode(executable: bool) -> int:
    """What `open()` or `touch` would give a new file under the current umask."""
    umask = os.umask(0)
    os.umask(umask)
    return (0o777 if executable else 0o666) & ~umask


def _copy_metadata(real: str, temporary: str, existing: os.stat_result) -> None:
    """Mode bits, owner and group (where the user may set them), and every extended attribute."""
    os.chmod(temporary, stat.S_IMODE(existing.st_mode))
    if hasattr(os, "chown"):
        with contextlib.suppress(PermissionError):
            os.chown(temporary, existing.st_uid, existing.st_gid)
    for name in _xattr_names(real):
        try:
            os.setxattr(temporary, name, os.getxattr(real, name))
        except OSError as error:
            raise InputError(real, 0, 0, f"cannot keep its extended attribute {name} ({error.strerror}); "
                             "not written") from None


def _xattr_names(path: str) -> list[str]:
    if not hasattr(os, "listxattr"):
        return []
    try:
        return os.listxattr(path)
    except OSError:
        return []  # the file system has no extended attributes


def _fsync_folder(folder: str) -> None:
    with contextlib.suppress(OSError):
        descriptor = os.open(folder, os.O_RDONLY)
        try:
            os.fsync(descriptor)
        finally:
            os.close(descriptor)


@contextlib.contextmanager
def _interrupts_raise() -> Iterator[None]:
    """SIGTERM and SIGHUP raise KeyboardInterrupt while writing, so temporary files are removed."""
    def interrupt(signum: int, frame: object) -> None:
        raise KeyboardInterrupt(f"signal {signum}")

    previous = {}
    for signum in (signal.SIGTERM, getattr(signal, "SIGHUP", None)):
        if signum is not None:
            try:
                previous[signum] = signal.signal(signum, interrupt)
            except ValueError:  # not the main thread
                pass
    try:
        yield
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
