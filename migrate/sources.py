"""Reading a script safely: only regular files of a sane size, names that can be written into a
diff, a shell line and Python source, and the text decoded the way Python would (PEP 263 cookie,
BOM). What was read is fingerprinted, so a write can tell that the file changed since. Before a
script is parsed, the memory its syntax tree will take is estimated from its tokens and compared
with what the process may still use (`ulimit -v`/`-d`, the machine's available memory): libcst's
parser aborts the whole process when it runs out, so a file too big for what is left is refused.
"""

from __future__ import annotations

import hashlib
import io
import os
import re
import stat
import tokenize
import unicodedata
from dataclasses import dataclass

from migrate.records import InputError

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


# Converting a file holds its syntax tree (libcst's, and the rewrite's copy) at once. Peak resident
# memory per token, measured on generated scripts of 20k lines (module-level code, one long loop,
# a chain of functions, many classes) and on files with 100k-400k-element literal lists: 1.8-2.4 KB.
# 3 KB leaves room for the allocator's own overhead (what `ulimit -v` counts).
BYTES_PER_TOKEN = 3 * 1024
# Tokens as Python's tokenizer sees them, near enough: a comment, a string (prefix, quotes and all),
# a name or number, or one character of punctuation.
_TOKEN = re.compile(r"""#[^\n]*|[rRbBuUfF]{0,2}(?:\"\"\"[\s\S]*?\"\"\"|'\'\'[\s\S]*?'\'\'|"(?:\\.|[^"\\\n])*"|'(?:\\.|[^'\\\n])*')|\w+|[^\w\s]""")
GB = 1024 ** 3


def parse_memory(text: str) -> int:
    """About how many bytes converting `text` needs (see BYTES_PER_TOKEN)."""
    return _TOKEN.subn("", text)[1] * BYTES_PER_TOKEN


def check_memory(path: str, text: str) -> None:
    """Raise InputError when converting `text` would need more memory than is left to this process."""
    need = parse_memory(text)
    left = available_memory()
    if left is None or need <= left[0]:
        return
    raise InputError(path, 0, 0, f"parsing it would need about {need / GB:.1f} GB, {max(left[0], 0) / GB:.1f} GB "
                     f"available ({left[1]}); left unchanged: split the file, or move its data into a file it "
                     "loads, or convert it where more memory is free")


def available_memory() -> tuple[int, str] | None:
    """(bytes this process may still allocate, what limits it), from its address-space and data
    limits (`ulimit -v`, `ulimit -d`) and the machine's MemAvailable; None where none is known."""
    found: list[tuple[int, str]] = []
    try:
        import resource
    except ImportError:
        resource = None  # type: ignore[assignment]  # no `resource` module on Windows: None stands for it
    if resource is not None:
        for limit, used, name in ((resource.RLIMIT_AS, "VmSize", "ulimit -v"), (resource.RLIMIT_DATA, "VmData", "ulimit -d")):
            soft = resource.getrlimit(limit)[0]
            current = _proc_kilobytes("/proc/self/status", used)
            if soft != resource.RLIM_INFINITY and current is not None:
                found.append((soft - current, f"{name} leaves it"))
    free = _proc_kilobytes("/proc/meminfo", "MemAvailable")
    if free is not None:
        found.append((free, "free memory"))
    return min(found) if found else None


def _proc_kilobytes(path: str, key: str) -> int | None:
    """A `Key:   1234 kB` line of a /proc file, in bytes; None where there is no such file or line."""
    try:
        with open(path, encoding="ascii", errors="replace") as stream:
            for line in stream:
                if line.startswith(key + ":"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        return None
    return None
