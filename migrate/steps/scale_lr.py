"""`--scale-lr`: the optimizer's learning rate is multiplied by the world size (the linear
scaling rule), for scripts whose global batch grows with the number of processes.
"""

from __future__ import annotations

from migrate.analysis.training import argument
from migrate.steps.base import Context, expression


def scale_lr(ctx: Context) -> None:
    if not ctx.options.scale_lr:
        return
    world = f"{ctx.dist}.get_world_size()"
    for call in ctx.sites.optimizers:
        lr = argument(call.node, "lr", 1)
        if lr is None:
            ctx.report("MIG004", f"--scale-lr: this optimizer uses its default learning rate; pass lr=<default> * {world} by hand", call.node)
            continue
        scaled = expression(f"{ctx.code(lr.value)} * {world}")
        ctx.plan.replace(lr, lambda updated, s=scaled: updated.with_changes(value=s))
