"""`--scale-lr` (Horovod: by default): the optimizer's learning rate is multiplied by the world size (the linear
scaling rule), for scripts whose global batch grows with the number of processes.
"""

from __future__ import annotations

import libcst as cst

from migrate.analysis.training import argument
from migrate.steps.base import Context, expression

# expressions that `* world` would bind into instead of scaling whole
LOOSER_THAN_TIMES = (cst.BooleanOperation, cst.Comparison, cst.IfExp, cst.Lambda, cst.NamedExpr)
AS_TIGHT_AS_TIMES = (cst.Multiply, cst.Divide, cst.FloorDivide, cst.Modulo, cst.MatrixMultiply, cst.Power)


def scale_lr(ctx: Context) -> None:
    """`--scale-lr` (off unless asked)."""
    if ctx.options.scale_lr:
        scale_learning_rates(ctx)


def scale_lr_unless_declined(ctx: Context) -> None:
    """Horovod's recipe: on unless `--no-scale-lr`, or `--keep-global-batch` keeps the global batch."""
    if ctx.options.scale_lr or (ctx.options.scale_lr is None and not ctx.options.keep_global_batch):
        scale_learning_rates(ctx)
        if ctx.sites.optimizers:
            ctx.report("MIG004", f"the learning rate is multiplied by {ctx.world_size()} (Horovod's recipe: each rank "
                       "keeps its batch, so the global batch grows with the ranks); --no-scale-lr keeps the script's",
                       ctx.sites.optimizers[0].node)


def scale_learning_rates(ctx: Context) -> None:
    world = ctx.world_size()
    for call in ctx.sites.optimizers:
        lr = argument(call.node, "lr", 1)
        if lr is None:
            ctx.report("MIG004", f"--scale-lr: this optimizer uses its default learning rate; pass lr=<default> * {world} by hand", call.node)
            continue
        value = ctx.code(lr.value)
        if _binds_looser_than_times(lr.value):
            value = f"({value})"  # `a + b` scales as a whole, `x if c else y` in both branches
        scaled = expression(f"{value} * {world}")
        ctx.plan.replace(lr, lambda updated, s=scaled: updated.with_changes(value=s))


def _binds_looser_than_times(value: cst.BaseExpression) -> bool:
    if value.lpar:
        return False
    if isinstance(value, cst.BinaryOperation):
        return not isinstance(value.operator, AS_TIGHT_AS_TIMES)
    return isinstance(value, LOOSER_THAN_TIMES)
