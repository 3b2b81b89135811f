"""Plain records passed between the stages (the data model, not a torch model): findings and file
results out (the options in are migrate.target_options: one class per target).

Everything here is a frozen dataclass of builtins, so results pickle across worker
processes and the CLI can print them without touching syntax trees.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum


class Severity(str, Enum):
    """How much a finding asks of the user."""

    NOTE = "note"  # informational: what was done, or why nothing was
    WARNING = "warning"  # a manual step is left for the user
    ERROR = "error"  # the file could not be converted


@dataclass(frozen=True)
class Finding:
    """Something the user should know about one place in a file."""

    code: str
    severity: Severity
    message: str
    line: int = 0
    col: int = 0

    def render(self, path: str) -> str:
        """`path:line:col: severity: MIGnnn message`, the form compilers use and editors jump to."""
        return f"{path}:{self.line}:{self.col}: {self.severity.value}: {self.code} {self.message}"


@dataclass(frozen=True)
class Artifact:
    """A file the conversion creates beside the script (launch script, config)."""

    path: str
    text: str
    executable: bool = False


@dataclass(frozen=True)
class FileResult:
    """The outcome of converting one file."""

    path: str
    old: str
    new: str
    findings: tuple[Finding, ...] = ()
    artifacts: tuple[Artifact, ...] = ()
    skipped: bool = False  # not a training script, or already on the target: left alone
    error: bool = False  # could not be read, parsed or converted: left alone
    encoding: str = "utf-8"  # the file's own (coding cookie, BOM): the diff and the write use it
    digest: str = ""  # sha256 of the bytes read: a write refuses a file edited since
    # the modules of the script's project its conversion edits too (issue 27): one result each,
    # written with the script as one unit (api.settle lists them beside it)
    modules: tuple["FileResult", ...] = ()

    @property
    def changed(self) -> bool:
        return self.new != self.old or bool(self.artifacts)


@dataclass  # not frozen: raising sets __traceback__ on it
class InputError(Exception):
    """A file that cannot be converted at all (missing, undecodable, bad syntax)."""

    path: str
    line: int
    col: int
    message: str
    code: str = "MIG900"  # MIG901: our own failure (an internal error), not the input's

    def __str__(self) -> str:
        """`path:line:col: message`, or `path: message` when it is about the whole file."""
        if self.line <= 0:
            return f"{self.path}: {self.message}"
        return f"{self.path}:{self.line}:{self.col}: {self.message}"
