"""Control flow that may differ between ranks is reported, never rewritten: a loop left or a step
skipped on a per-rank value (MIG121), a random number of backward passes (MIG122), weights drawn
again after the wrapper copied rank 0's (MIG123). Each finding names the line and what happens:
ranks that run different numbers of gradient all-reduces wait for each other forever; replicas
that start from different weights train apart. Training gated on state each rank gathered from
its own environment (a replay buffer's size, an episode's `done`) is MIG121 too, and refused: the
converted script would hang for certain.
"""

from __future__ import annotations

import libcst as cst

from migrate.analysis.divergence import per_rank_control, reinitialized_after_wrap
from migrate.analysis.episodes import environment_control
from migrate.analysis.models import aliases, is_after
from migrate.steps.base import Context


def rank_divergence(ctx: Context) -> None:
    """All three (DDP: the wrap sites are where the wrapper goes)."""
    rank_divergent_control(ctx)
    if ctx.refused:
        return
    sharded = ctx.distributed.module == "torch.distributed" and ctx.wrapper is not None and not ctx.wrapper.through_module  # FSDP2: nothing is copied from rank 0
    for divergence in reinitialized_after_wrap(ctx.sites, aliases, is_after, sharded):
        ctx.report(divergence.code, _text(ctx, divergence.parts), divergence.node)


def rank_divergent_control(ctx: Context) -> None:
    """MIG121 and MIG122 only (targets whose engine is created elsewhere than the wrap site).
    Training gated on each rank's own environment hangs for certain: the file is left unchanged."""
    for divergence in per_rank_control(ctx.sites) + environment_control(ctx.sites):
        ctx.report(divergence.code, _text(ctx, divergence.parts), divergence.node)
        ctx.refused = ctx.refused or divergence.hangs


def _text(ctx: Context, parts: list[str | cst.CSTNode]) -> str:
    return "".join(part if isinstance(part, str) else str(ctx.position(part)[0]) for part in parts)
