"""The changed line ranges of a file: what a review comment attaches to.

The same matching as the printed diff (migrate.report.matching_blocks), without context: each run
of lines between two matched blocks is one Hunk, with its range in the original and in the new text.
"""

from __future__ import annotations

from dataclasses import dataclass

from migrate.report import matching_blocks


@dataclass(frozen=True)
class Hunk:
    """old[old_start:old_stop] becomes new[new_start:new_stop] (0-based line indexes)."""

    old_start: int
    old_stop: int
    new_start: int
    new_stop: int

    @property
    def insertion(self) -> bool:
        """A pure insertion: no original line is replaced."""
        return self.old_start == self.old_stop


def text_lines(text: str) -> list[str]:
    """Lines as the diff counts them (split at LF only), without their LF."""
    lines = text.split("\n")
    return lines[:-1] if text.endswith("\n") else lines if text else []


def hunks(old: list[str], new: list[str]) -> list[Hunk]:
    """Every changed range, in order, matched as the printed diff matches lines."""
    encoded_old = [line.encode("utf-8", "surrogatepass") for line in old]
    encoded_new = [line.encode("utf-8", "surrogatepass") for line in new]
    found: list[Hunk] = []
    i = j = 0
    for block_i, block_j, size in matching_blocks(encoded_old, encoded_new):
        if i < block_i or j < block_j:
            found.append(Hunk(i, block_i, j, block_j))
        i, j = block_i + size, block_j + size
    return found
