"""The one place a conversion reads a file other than the script: a module of the script's own
folder that the script imports (a model class it builds, a helper it hands the model to).

`migrate_source` reads no file by itself: it is handed a `ReadModule` (a path in, the text out,
None when there is nothing to read), and the analyses ask that reader. `read_from_disk` (a
`DiskFiles`, which can also list a folder's Python files) is the one `migrate_file` and the
command line hand over; `read_nothing` (migrate_source's default) keeps a
conversion of text a pure function of the text; a caller with the files elsewhere (in memory, in a
review tool) passes its own.
"""

from __future__ import annotations

import os
from collections.abc import Callable

ReadModule = Callable[[str], "str | None"]

MODULE_SIZE_LIMIT = 1 << 20  # bytes: a larger module of the script's folder is not read


class DiskFiles:
    """Reads the modules of a script's folder from disk, and lists its Python files (MIG119 names the
    entry points of the folder that import a module): the reader `migrate_file` hands over."""

    def __call__(self, path: str) -> str | None:
        """The text of a regular UTF-8 file of at most MODULE_SIZE_LIMIT bytes at `path`, else None."""
        try:
            if not os.path.isfile(path) or os.path.getsize(path) > MODULE_SIZE_LIMIT:
                return None
            with open(path, encoding="utf-8") as handle:
                return handle.read()
        except (OSError, UnicodeDecodeError):
            return None

    def python_files(self, folder: str) -> list[str]:
        """The names of the `*.py` files in `folder` (none when it cannot be listed)."""
        try:
            return sorted(name for name in os.listdir(folder or ".") if name.endswith(".py"))
        except OSError:
            return []


read_from_disk = DiskFiles()


def python_files(read: ReadModule, folder: str) -> list[str]:
    """The `*.py` files of `folder` as the reader sees them: a reader that can list them
    (DiskFiles) lists; any other shows none."""
    lister = getattr(read, "python_files", None)
    return list(lister(folder)) if callable(lister) else []


def read_nothing(path: str) -> None:
    """No module is read: the conversion sees the script alone."""
    return None
