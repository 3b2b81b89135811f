"""Gradient accumulation under FSDP2: `model.set_requires_gradient_sync(<the script's own step
test>)` before each micro-step, so gradients are reduce-scattered once per optimizer step and
kept unsharded in between (FSDP2's own way; it has no `no_sync()` context).
"""

from __future__ import annotations

from migrate.steps.base import Context, statements
from migrate.steps.no_sync import report_syncing_micro_steps, steps_leftovers


def fsdp_accumulation(ctx: Context) -> None:
    report_syncing_micro_steps(ctx)
    for accumulation in ctx.sites.accumulations:
        if accumulation.first is None or steps_leftovers(ctx, accumulation):  # MIG109 says why
            continue
        test = ctx.code(accumulation.condition)
        ctx.plan.insert_before(accumulation.first, statements(
            f"{accumulation.model}.set_requires_gradient_sync({test})  # reduce gradients only on the micro-step that steps\n"))
