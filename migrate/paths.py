"""Which files a run converts: the files named on the command line, and the Python files found in
the folders named there.

Inside a git work tree a folder yields what git would track: tracked files and untracked files
that are not ignored (a folder that is itself ignored, named on purpose, is walked instead). Elsewhere the walk skips virtual environments (a folder holding
`pyvenv.cfg`), `site-packages`, VCS and tool folders and build output. Either way only regular
files ending in `.py` count (a folder named `x.py` is a folder, a FIFO is skipped), `--exclude`
globs drop paths, and a file named twice (`train.py ./train.py`, or through a symlink) is
converted once.

Reading runs nothing. The folder may be an unpacked archive whose `.git/config` is hostile, so git
is asked (`rev-parse`, `check-ignore`, `ls-files`; none of them hashes file contents, so no
clean/process filter runs) with every setting that could make those commands start a program
overridden on its command line, which wins over any config file, included ones too: `core.fsmonitor`
(a hook git runs on every index read), the built-in monitor daemon, hooks (`post-index-change`), the
untracked cache (no reason to write the index), the pager. Its environment drops every inherited
`GIT_*` variable (GIT_DIR, GIT_WORK_TREE, GIT_CONFIG_PARAMETERS...) and reads no system or global
config (so a repository of another owner that only the user's `safe.directory` admits is walked like
any folder); no optional locks, no prompts. Aliases cannot shadow these built-in commands, and
transport settings (`core.sshCommand`, credential helpers, `core.alternateRefsCommand`) and diff
settings (`diff.external`, textconv) are never reached. Git is asked rather than the index parsed
here: its index formats (v2-v4, split and sparse indexes) and ignore rules (nested .gitignore,
info/exclude, negation, `**`) are what "what git would track" means, and a second implementation of
them would drift.
"""

from __future__ import annotations

import fnmatch
import os
import stat
import subprocess
from collections.abc import Iterable
from dataclasses import dataclass, field

from migrate.records import InputError
from migrate.sources import check_name

SKIPPED_FOLDERS = frozenset({
    ".git", ".hg", ".svn", ".tox", ".nox", ".venv", "venv", "site-packages", "node_modules", "build",
    "__pycache__", ".mypy_cache", ".pytest_cache", ".eggs",
})


@dataclass(frozen=True)
class Found:
    """A file to convert, and whether the user named it (rather than a folder search finding it)."""

    path: str
    named: bool


@dataclass
class Selection:
    """The outcome of expanding the command line's paths."""

    files: list[Found] = field(default_factory=list)
    errors: list[InputError] = field(default_factory=list)
    searched: list[str] = field(default_factory=list)  # folders searched


def select(paths: Iterable[str], exclude: Iterable[str] = ()) -> Selection:
    """Expand folders, drop excluded and duplicate files; bad names become errors."""
    patterns = tuple(exclude)
    selection = Selection()
    seen: set[str] = set()
    for path in paths:
        try:
            check_name(path)
        except InputError as error:
            selection.errors.append(error)
            continue
        if os.path.isdir(path):
            selection.searched.append(path)
            found = [Found(p, named=False) for p in search_folder(path, patterns)]
            if not found:
                selection.errors.append(InputError(path, 0, 0, "no Python files found in this folder"))
        else:
            found = [Found(path, named=True)]
        for item in found:
            key = os.path.realpath(item.path)
            if key not in seen:
                seen.add(key)
                selection.files.append(item)
    return selection


def search_folder(folder: str, patterns: tuple[str, ...] = ()) -> list[str]:
    """The regular `*.py` files under `folder`, sorted, minus excluded and skipped folders."""
    listed = _git_files(folder)
    candidates = listed if listed is not None else _walk(folder)
    kept = [p for p in candidates if _is_regular(p) and not _excluded(folder, p, patterns) and not _skipped(folder, p)]
    return sorted(kept)


def _git_files(folder: str) -> list[str] | None:
    """Tracked plus untracked-but-not-ignored `.py` files, or None outside a git work tree."""
    try:
        inside = _git(folder, "rev-parse", "--is-inside-work-tree", timeout=60)
        if inside.returncode != 0 or inside.stdout.strip() != b"true":
            return None
        if _git(folder, "check-ignore", "-q", ".", timeout=60).returncode == 0:
            return None  # a folder git ignores, named on purpose: search it like any other folder
        listed = _git(folder, "ls-files", "-z", "--cached", "--others", "--exclude-standard", "--", "*.py", timeout=300)
    except (OSError, subprocess.SubprocessError):
        return None
    if listed.returncode != 0:
        return None
    names = {os.fsdecode(name) for name in listed.stdout.split(b"\0") if name}
    return [os.path.join(folder, name) for name in names if name.endswith(".py")]


# `-c` settings win over every config file (the repository's, and what it includes): none of these
# can then start a program while git reads the index and the ignore files
NEUTRAL_CONFIG = (
    "core.fsmonitor=false",  # a hook program, run on every index read (and `true`: the monitor daemon)
    "core.useBuiltinFSMonitor=false",  # git 2.26-2.35's spelling of the monitor daemon
    "core.hooksPath=/dev/null",  # no hook (post-index-change would run on an index write)
    "core.untrackedCache=false",  # nothing to update, so nothing to write
    "core.pager=cat",
)


def _git(folder: str, *args: str, timeout: float) -> subprocess.CompletedProcess[bytes]:
    """`git -C folder ARGS` with the configuration neutralised (see the module docstring)."""
    settings = [word for setting in NEUTRAL_CONFIG for word in ("-c", setting)]
    return subprocess.run(["git", "--no-pager", *settings, "-C", folder, *args], capture_output=True,
                          stdin=subprocess.DEVNULL, env=git_environment(), timeout=timeout)


def git_environment() -> dict[str, str]:
    """This process's environment less every `GIT_*` variable, with git told to read no system or
    global config, take no optional lock and never prompt."""
    kept = {name: value for name, value in os.environ.items() if not name.startswith("GIT_")}
    return {**kept, "GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_GLOBAL": os.devnull, "GIT_OPTIONAL_LOCKS": "0",
            "GIT_TERMINAL_PROMPT": "0", "GIT_PAGER": "cat", "GIT_ATTR_NOSYSTEM": "1"}


def _walk(folder: str) -> list[str]:
    files: list[str] = []
    for root, folders, names in os.walk(folder):
        folders[:] = sorted(f for f in folders if not _skipped_folder(os.path.join(root, f)))
        files.extend(os.path.join(root, name) for name in names if name.endswith(".py"))
    return files


def _skipped_folder(path: str) -> bool:
    return os.path.basename(path) in SKIPPED_FOLDERS or os.path.exists(os.path.join(path, "pyvenv.cfg"))


def _skipped(folder: str, path: str) -> bool:
    """Whether a folder between `folder` and `path` is one a search never enters."""
    relative = os.path.relpath(os.path.dirname(path), folder)
    if relative == os.curdir:
        return False
    current = folder
    for part in relative.split(os.sep):
        current = os.path.join(current, part)
        if _skipped_folder(current):
            return True
    return False


def _excluded(folder: str, path: str, patterns: tuple[str, ...]) -> bool:
    """`--exclude GLOB` matches the path relative to the searched folder, or any part of it."""
    if not patterns:
        return False
    relative = os.path.relpath(path, folder).replace(os.sep, "/")
    parts = relative.split("/")
    prefixes = ["/".join(parts[: i + 1]) for i in range(len(parts))]
    return any(fnmatch.fnmatchcase(candidate, pattern) for pattern in patterns for candidate in parts + prefixes)


def _is_regular(path: str) -> bool:
    try:
        return stat.S_ISREG(os.stat(path).st_mode)
    except OSError:
        return False
