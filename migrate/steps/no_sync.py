"""Gradient accumulation: micro-steps that do not end in an optimizer step run under
`model.no_sync()`, so gradients are all-reduced once per optimizer step, not once per
micro-step. The forward pass is inside the context too, as DDP requires.
"""

from __future__ import annotations

import libcst as cst

from migrate.analysis.sites import Accumulation
from migrate.rewrite import RunWrap
from migrate.steps.base import Context, expression


def no_sync(ctx: Context) -> None:
    report_syncing_micro_steps(ctx)
    for accumulation in ctx.sites.accumulations:
        if accumulation.first is not None and not steps_leftovers(ctx, accumulation):  # None: MIG109 above
            ctx.plan.wrap_run(accumulation.first, accumulation.last, _builder(ctx, accumulation))


def report_syncing_micro_steps(ctx: Context) -> None:
    """MIG109 for each accumulation whose micro-steps the conversion cannot keep from syncing."""
    for node_code, message, node in ctx.sites.notes:
        if node_code == "MIG109":
            ctx.report("MIG109", f"gradient accumulation left syncing every micro-step: {message}", node)


def steps_leftovers(ctx: Context, accumulation: Accumulation) -> bool:
    """MIG109 when the optimizer steps again after the loop of micro-steps (the ones left over at an
    epoch's end): skipping the gradient sync on them would step unsynced gradients there."""
    after = accumulation.stepped_after_loop
    if after is None:
        return False
    shown = ctx.code(after.body[0]) if isinstance(after, cst.SimpleStatementLine) else ctx.code(after).strip().splitlines()[0]
    ctx.report("MIG109", f"gradient accumulation left syncing every micro-step: `{shown}` "
               f"(line {ctx.position(after)[0]}) steps again after the loop, on the micro-steps left over, so their "
               "gradients must be reduced too", accumulation.step_if or accumulation.last)
    return True


def _builder(ctx: Context, accumulation: Accumulation) -> RunWrap:
    contextlib = ctx.module_name("contextlib")
    skip_sync = negated(ctx, accumulation.condition)
    item = expression(f"{accumulation.model}.no_sync() if {skip_sync} else {contextlib}.nullcontext()")

    def build(run: list[cst.BaseStatement]) -> cst.BaseCompoundStatement:
        return cst.With(items=[cst.WithItem(item)], body=cst.IndentedBlock(body=run))

    return build


def negated(ctx: Context, condition: cst.BaseExpression) -> str:
    """`a % n == 0` <-> `a % n != 0`, `not x` -> `x`; anything else -> `not (...)`."""
    if isinstance(condition, cst.Comparison) and len(condition.comparisons) == 1:
        target = condition.comparisons[0]
        flipped = {cst.Equal: cst.NotEqual, cst.NotEqual: cst.Equal}.get(type(target.operator))
        if flipped is not None:
            return ctx.code(condition.with_changes(comparisons=[target.with_changes(operator=flipped())]))
    if isinstance(condition, cst.UnaryOperation) and isinstance(condition.operator, cst.Not):
        return ctx.code(condition.expression)
    return f"not ({ctx.code(condition)})"
