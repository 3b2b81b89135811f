"""torch-migrate: codemods from single-GPU PyTorch training scripts to distributed ones.

Public API (libcst is imported only when a conversion runs):
    migrate_source(code, target, options, path, read_module) -> FileResult
    migrate_paths(paths, target, options) -> iterator of FileResult | InputError
    Options (to-dp's) and DdpOptions, FsdpOptions, HorovodOptions, DeepSpeedOptions (one class per
    target), FileResult, Finding, InputError, TARGETS
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from migrate.records import FileResult, Finding, InputError
from migrate.target_options import DdpOptions, DeepSpeedOptions, FsdpOptions, HorovodOptions, Options

if TYPE_CHECKING:
    from collections.abc import Iterable, Iterator

    from migrate.project_files import ReadModule


def __getattr__(name: str) -> object:
    """TARGETS: the names of the targets this version converts to, read from the registry on first
    use (migrate.targets), so that importing the package stays light."""
    if name == "TARGETS":
        from migrate.targets import available

        return tuple(available())
    raise AttributeError(f"module 'migrate' has no attribute {name!r}")


def migrate_source(code: str, target: str, options: Options | None = None, path: str = "train.py",
                   read_module: ReadModule | None = None) -> FileResult:
    """Convert one script's text (see migrate.api.migrate_source). `read_module(path) -> str | None`
    gives the text of a module of the script's folder; by default none is read (pass
    migrate.project_files.read_from_disk to read them from disk, as migrate_paths does)."""
    from migrate.api import migrate_source as convert
    from migrate.project_files import read_nothing

    return convert(code, target, options, path, read_module or read_nothing)


def migrate_paths(paths: Iterable[str], target: str, options: Options | None = None) -> Iterator[FileResult | InputError]:
    from migrate.api import migrate_paths as convert_all

    return convert_all(paths, target, options)


__all__ = ["TARGETS", "DdpOptions", "DeepSpeedOptions", "FileResult", "Finding", "FsdpOptions", "HorovodOptions",
           "InputError", "Options", "migrate_paths", "migrate_source"]
