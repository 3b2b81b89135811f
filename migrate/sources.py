"""Reading a script safely: only regular files of a sane size, names that can be written into a
diff, a shell line and Python source, and the text decoded the way Python would (PEP 263 cookie,
BOM). What was read is fingerprinted, so a write can tell that the file changed since.
"""

from __future__ import annotations

import hashlib
import io
import os
import stat
import tokenize
import unicodedata
from dataclasses import dataclass

from migrate.model import InputError

# A training script is kilobytes; 50,000 lines are about 2 MB. Anything far larger is not a script.
MAX_SCRIPT_BYTES = 16 * 1024 * 1024


@dataclass(frozen=True)
class Source:
    """A script's text as read, with what writing it back needs."""

    text: str
    encoding: str
    digest: str  # sha256 of the bytes read


def read_source(path: str) -> tuple[str, str]:
    """(text, encoding). Honours a PEP 263 cookie and a BOM; raises InputError otherwise."""
    source = read(path)
    return source.text, source.encoding


def read(path: str) -> Source:
    """Read one script. Raises InputError for anything that is not a readable, decodable,
    regular file of at most MAX_SCRIPT_BYTES with a printable name."""
    check_name(path)
    raw = read_regular_file(path)
    encoding = _encoding(path, raw)
    try:
        text = raw.decode(encoding)
    except UnicodeDecodeError as error:
        line = raw[: error.start].count(b"\n") + 1
        col = error.start - (raw.rfind(b"\n", 0, error.start) + 1) + 1
        raise InputError(path, line, col, f"not valid {encoding} (byte 0x{raw[error.start]:02x}); "
                         "add a coding cookie such as `# -*- coding: latin-1 -*-`") from None
    return Source(text=text, encoding=encoding, digest=fingerprint(raw))


def fingerprint(raw: bytes) -> str:
    return hashlib.sha256(raw).hexdigest()


def read_regular_file(path: str, limit: int = MAX_SCRIPT_BYTES) -> bytes:
    """The bytes of a regular file. A FIFO, device or socket is refused before it is opened (reading
    one could block forever or never end), and the size is checked again on the open descriptor."""
    try:
        info = os.stat(path)
    except FileNotFoundError:
        raise InputError(path, 0, 0, "no such file") from None
    except OSError as error:
        raise InputError(path, 0, 0, f"cannot read: {error.strerror}") from None
    if stat.S_ISDIR(info.st_mode):
        raise InputError(path, 0, 0, "is a directory, not a Python file")
    if not stat.S_ISREG(info.st_mode):
        raise InputError(path, 0, 0, f"is {_kind(info.st_mode)}, not a regular file; only regular files are read")
    try:
        descriptor = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    except OSError as error:
        raise InputError(path, 0, 0, f"cannot read: {error.strerror}") from None
    with os.fdopen(descriptor, "rb") as stream:
        opened = os.fstat(stream.fileno())
        if not stat.S_ISREG(opened.st_mode):
            raise InputError(path, 0, 0, f"is {_kind(opened.st_mode)}, not a regular file; only regular files are read")
        raw = stream.read(limit + 1)
    if len(raw) > limit:
        raise InputError(path, 0, 0, f"is larger than {limit // (1024 * 1024)} MiB; not a training script")
    return raw


def _kind(mode: int) -> str:
    if stat.S_ISFIFO(mode):
        return "a FIFO (named pipe)"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return "not a plain file"


def _encoding(path: str, raw: bytes) -> str:
    try:
        encoding, _ = tokenize.detect_encoding(io.BytesIO(raw).readline)
    except SyntaxError as error:
        if b"coding" in b"\n".join(raw.splitlines()[:2]):
            raise InputError(path, 1, 1, f"bad coding cookie: {error}") from None
        return "utf-8"  # undecodable bytes in the first lines: let the decoder say where
    return encoding


def unsafe_name_reason(name: str) -> str | None:
    """Why a file name cannot be written into a diff header, a shell line or a Python comment:
    a control character (a newline would end the comment and start a command), a line or
    paragraph separator, or bytes that are not valid UTF-8. None when the name is fine."""
    for char in name:
        category = unicodedata.category(char)
        if category == "Cs":
            return "is not valid UTF-8"
        if category in ("Cc", "Zl", "Zp"):
            return f"holds the control character {char!r}"
    return None


def check_name(path: str) -> None:
    """Raise InputError for a path whose name is unsafe to write anywhere (see unsafe_name_reason)."""
    reason = unsafe_name_reason(path)
    if reason is not None:
        raise InputError(printable(path), 0, 0, f"the file name {reason}; rename it (nothing was read)")


def printable(path: str) -> str:
    """The path as it can be shown on a terminal: unsafe names in Python's escaped form."""
    if unsafe_name_reason(path) is None:
        return path
    return ascii(path)[1:-1]
