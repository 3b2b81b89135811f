"""`--write`: all or nothing, and nothing lost.

Every file a run would write is planned and checked before the first one is written: an existing
launcher or config that differs from what would be generated (it is the user's: never
overwritten), two scripts that would write the same file differently, an output that is a folder
or one of the scripts being converted, a read-only, append-only or immutable file or folder, and a
script that changed on disk or was deleted since it was read.

Then the whole run is written as one unit. First every file is staged: a temporary file beside it
(`.migrate-<pid>-<random>.tmp`), flushed and fsynced, given the original's owner and group, then its
extended attributes (ACLs) and mode bits (in that order: a chown clears the setuid and setgid bits).
Only then are they renamed into place, each script's generated files (launcher, config) before the
script, the script re-checked for edits just before its rename, and each replaced original kept
reachable first (a hard link, or a copy, beside it). If any step fails, every file already renamed
gets its original back, files that did not exist are removed, and the error names the user's
file, not a temporary one. Renames go through a symlink, not over it; new files get the umask's
permissions; a hard-linked script is replaced under its own name only. Temporaries that a killed
run left behind (their process is gone) are removed by the next run that writes in their folder.
"""

from __future__ import annotations

import contextlib
import errno
import os
import re
import secrets
import shutil
import signal
import stat
import struct
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass

from migrate import signals
from migrate.records import FileResult, InputError
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
    elif not os.path.lexists(real):
        return InputError(output.path, 0, 0, "was deleted since it was read")
    else:
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
        flag = _locked_flag(real)
        if flag:
            return InputError(path, 0, 0, f"is {flag}: it cannot be replaced (lsattr shows it; chattr removes it)")
    folder = os.path.dirname(real)
    existing = folder
    while existing and not os.path.isdir(existing):
        existing = os.path.dirname(existing)
    if not os.access(existing or os.curdir, os.W_OK | os.X_OK):
        return InputError(path, 0, 0, f"cannot create a file in {folder}")
    flag = _locked_flag(existing or os.curdir)
    if flag:
        return InputError(path, 0, 0, f"its folder {existing} is {flag}: no file in it can be replaced or removed "
                          "(lsattr -d shows it; chattr removes it)")
    return None


# Linux inode flags (chattr +a, +i): even root cannot rename over, or remove, such a file or an entry
# of such a folder. FS_IOC_GETFLAGS is _IOR('f', 1, long); the kernel writes an int.
_FS_IOC_GETFLAGS, _FLAGS = 0x80086601, ((0x10, "immutable (chattr +i)"), (0x20, "append-only (chattr +a)"))


def _locked_flag(path: str) -> str | None:
    """'append-only (chattr +a)' or 'immutable (chattr +i)' when the file or folder is; None when
    not, or when the file system cannot tell."""
    try:
        import fcntl

        descriptor = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    except (ImportError, OSError):
        return None
    try:
        flags = struct.unpack("i", fcntl.ioctl(descriptor, _FS_IOC_GETFLAGS, bytes(8))[:4])[0]
    except OSError:
        return None
    finally:
        os.close(descriptor)
    return next((name for bit, name in _FLAGS if flags & bit), None)


def _hard_link_note(output: Output) -> str | None:
    try:
        links = os.stat(output.path).st_nlink
    except OSError:
        return None
    if links > 1:
        return (f"{output.path} has {links} hard links: the converted file replaces this name only; "
                "the other names keep the original")
    return None


def write(outputs: list[Output]) -> None:
    """Write every output or none: stage them all, then rename them all into place (see the module
    docstring). Raises InputError, naming the user's file, when anything fails; by then every file
    is as it was."""
    for folder in dict.fromkeys(os.path.dirname(os.path.realpath(o.path)) for o in outputs):
        remove_stale_temporaries(folder)
    staged: list[_Staged] = []
    created: list[str] = []
    with _interrupts_raise():
        try:
            for output in outputs:
                _stage(output, staged, created)
            for item in staged:
                _check_unchanged(item.output)
            _commit(staged)
        except BaseException:
            _discard(staged, created)
            raise
    for folder in dict.fromkeys(os.path.dirname(item.real) for item in staged):
        _fsync_folder(folder)


@dataclass
class _Staged:
    """One output on its way: its temporary file, and the original kept while the batch commits."""

    output: Output
    real: str  # where it goes (through a symlink)
    temporary: str | None  # None once renamed into place
    backup: str | None = None  # the replaced original, until the whole batch is in place


def _stage(output: Output, staged: list[_Staged], created: list[str]) -> None:
    """The output's temporary file beside its real path, fsynced, with the original's metadata;
    listed in `staged` as soon as it exists, so a failure anywhere removes it."""
    real = os.path.realpath(output.path)
    with _naming(output):
        created.extend(_make_folders(os.path.dirname(real)))
        existing = os.stat(real) if os.path.exists(real) else None
        if existing is None and output.expected is not None:
            raise InputError(output.path, 0, 0, "was deleted since it was read; nothing was written")
        handle, temporary = tempfile.mkstemp(dir=os.path.dirname(real), prefix=f"{TEMPORARY_PREFIX}{os.getpid()}-",
                                             suffix=TEMPORARY_SUFFIX)
        staged.append(_Staged(output, real, temporary))
        with os.fdopen(handle, "wb") as stream:
            stream.write(output.data)
            stream.flush()
            os.fsync(stream.fileno())
        if existing is not None:
            _copy_metadata(real, temporary, existing, output.path)
        else:
            os.chmod(temporary, new_file_mode(output.executable))


def _commit(staged: list[_Staged]) -> None:
    """Rename every staged file into place, keeping each original until all are; on any failure
    put back what was renamed. Signals wait until the batch is whole again."""
    done: list[_Staged] = []
    with signals.deferred():
        try:
            for item in staged:
                with _naming(item.output):
                    if os.path.lexists(item.real):  # looked at now: a file made since staging is kept too
                        item.backup = _keep_original(item.real)
                    _check_unchanged(item.output)
                    os.replace(item.temporary, item.real)  # type: ignore[arg-type]  # a staged item holds its temporary until this rename
                item.temporary = None
                done.append(item)
        except BaseException as error:
            _undo(done, error)
            raise
        for item in staged:
            _remove(item.backup)
            item.backup = None


def _undo(done: list[_Staged], cause: BaseException) -> None:
    """Put every original back (newest first) and remove files that did not exist before. An
    original that cannot be put back stays where it was kept, and the error says where."""
    failed: list[str] = []
    for item in reversed(done):
        try:
            if item.backup is not None:
                os.replace(item.backup, item.real)
            else:
                os.unlink(item.real)
        except OSError as error:
            kept = f", its original is kept as {item.backup}" if item.backup else ""
            failed.append(f"{item.output.path} ({error.strerror}{kept})")
        item.backup = None
    if failed:
        path, what = ((cause.path, cause.message.replace("; nothing was written", "")) if isinstance(cause, InputError)
                      else (done[-1].output.path, f"interrupted ({type(cause).__name__})"))
        raise InputError(path, 0, 0, f"{what}; the files already written could not all be put back: "
                         f"{'; '.join(failed)}") from cause


def _discard(staged: list[_Staged], created: list[str]) -> None:
    """Remove the temporary files and originals' copies still there, and folders made for nothing."""
    for item in staged:
        _remove(item.temporary)
        _remove(item.backup)
    for folder in reversed(created):
        with contextlib.suppress(OSError):
            os.rmdir(folder)


def _keep_original(real: str) -> str:
    """A second name for the file about to be replaced, in its folder: a hard link (the same file,
    metadata and all), or a copy where the file system has no hard links."""
    folder = os.path.dirname(real)
    for _ in range(100):
        backup = os.path.join(folder, f"{TEMPORARY_PREFIX}{os.getpid()}-{secrets.token_hex(4)}{TEMPORARY_SUFFIX}")
        try:
            os.link(real, backup)
            return backup
        except FileExistsError:
            continue
        except OSError:
            return _copy_original(real)
    raise FileExistsError(errno.EEXIST, "no free temporary name", folder)


def _copy_original(real: str) -> str:
    handle, backup = tempfile.mkstemp(dir=os.path.dirname(real), prefix=f"{TEMPORARY_PREFIX}{os.getpid()}-",
                                      suffix=TEMPORARY_SUFFIX)
    try:
        with os.fdopen(handle, "wb") as stream, open(real, "rb") as original:
            shutil.copyfileobj(original, stream)
            stream.flush()
            os.fsync(stream.fileno())
        _copy_metadata(real, backup, os.stat(real), real)
    except BaseException:
        _remove(backup)
        raise
    return backup


def _check_unchanged(output: Output) -> None:
    """A script must still hold the bytes it was converted from."""
    if output.expected is None:
        return
    try:
        current = fingerprint(read_regular_file(os.path.realpath(output.path)))
    except InputError as error:
        raise InputError(output.path, 0, 0, f"{error.message} (since it was read); nothing was written") from None
    if current != output.expected:
        raise InputError(output.path, 0, 0, "changed on disk since it was read; nothing was written (run again)")


@contextlib.contextmanager
def _naming(output: Output) -> Iterator[None]:
    """An OSError while writing `output` becomes an InputError naming the user's file."""
    try:
        yield
    except OSError as error:
        raise InputError(output.path, 0, 0, f"cannot write it: {_reason(error)}; nothing was written") from None


def _reason(error: BaseException) -> str:
    if isinstance(error, OSError) and error.strerror:
        return error.strerror
    if isinstance(error, InputError):
        return error.message
    return type(error).__name__


def _make_folders(folder: str) -> list[str]:
    """Create `folder` and any missing parents; the ones created, outermost first."""
    missing: list[str] = []
    while folder and not os.path.isdir(folder):
        missing.append(folder)
        folder = os.path.dirname(folder)
    for path in reversed(missing):
        os.mkdir(path)
    return list(reversed(missing))


def _remove(path: str | None) -> None:
    if path is not None:
        with contextlib.suppress(OSError):
            os.unlink(path)


TEMPORARY_PREFIX, TEMPORARY_SUFFIX = ".migrate-", ".tmp"
_TEMPORARY = re.compile(r"\.migrate-(\d+)-[A-Za-z0-9_]+\.tmp")


def remove_stale_temporaries(folder: str) -> list[str]:
    """Remove the temporary files a killed run left in `folder` (their process is gone); the names."""
    removed: list[str] = []
    try:
        entries = list(os.scandir(folder))
    except OSError:
        return removed
    for entry in entries:
        match = _TEMPORARY.fullmatch(entry.name)
        if match is None or _alive(int(match.group(1))) or not entry.is_file(follow_symlinks=False):
            continue
        with contextlib.suppress(OSError):
            os.unlink(entry.path)
            removed.append(entry.path)
    return removed


def _alive(pid: int) -> bool:
    """Whether a process with this id runs (another user's counts: it may not be signalled)."""
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:
        return True
    return True


def new_file_mode(executable: bool) -> int:
    """What `open()` or `touch` would give a new file under the current umask."""
    umask = os.umask(0)
    os.umask(umask)
    return (0o777 if executable else 0o666) & ~umask


def _copy_metadata(real: str, temporary: str, existing: os.stat_result, path: str) -> None:
    """Owner and group (where the user may set them) first, as a chown clears the setuid and setgid
    bits; then every extended attribute (an ACL may set group bits); the mode bits last."""
    if hasattr(os, "chown"):
        with contextlib.suppress(PermissionError):
            os.chown(temporary, existing.st_uid, existing.st_gid)
    for name in _xattr_names(real):
        try:
            os.setxattr(temporary, name, os.getxattr(real, name))
        except OSError as error:
            raise InputError(path, 0, 0, f"cannot keep its extended attribute {name} ({error.strerror}); "
                             "nothing was written") from None
    os.chmod(temporary, stat.S_IMODE(existing.st_mode))


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
    """SIGTERM and SIGHUP raise KeyboardInterrupt while writing, so temporary files are removed
    (during the renames they wait, see migrate.signals.deferred)."""
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
