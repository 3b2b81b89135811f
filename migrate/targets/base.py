"""What a target is: an ordered tuple of steps, the artifacts it renders, the frameworks it
counts as "already converted". Targets add no logic of their own beyond choosing steps.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from migrate.model import Artifact
from migrate.steps.base import Context, Step

ArtifactMaker = Callable[[str, Context], list[Artifact]]


@dataclass(frozen=True)
class Target:
    name: str  # the CLI's `to-<name>`
    framework: str  # as people call it, for messages
    steps: tuple[Step, ...]
    artifacts: ArtifactMaker
    already: frozenset[str]  # what `analysis.DISTRIBUTED_MARKERS` says when a script is on it
