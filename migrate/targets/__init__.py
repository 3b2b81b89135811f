"""The registry of targets, by CLI name. Explicit: a target exists when it is listed here."""

from __future__ import annotations

from migrate.targets.base import Target


def targets() -> dict[str, Target]:
    from migrate.targets.ddp import DDP
    from migrate.targets.deepspeed import DEEPSPEED

    return {"ddp": DDP, "deepspeed": DEEPSPEED}
