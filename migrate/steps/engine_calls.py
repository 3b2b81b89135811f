"""The engine runs the optimizer side of each step: `loss.backward()` -> `engine.backward(loss)`,
`optimizer.step()` -> `engine.step()`, `zero_grad()` removed (the engine clears gradients).

What the engine takes over from the script goes: AMP's GradScaler and autocast blocks (the
config's fp16/bf16 does that), `clip_grad_norm_` (the config's gradient_clipping). With gradient
accumulation the engine counts micro-steps itself, so `engine.step()` runs after every backward
and the script's own `loss / accum_steps` is kept (`scale_wrt_gas=False`).
"""

from __future__ import annotations

import libcst as cst

from migrate.analysis.index import CallSite
from migrate.analysis.models import aliases
from migrate.steps.base import Context, expression, statement
from migrate.steps.deepspeed_engine import EngineSite


def engine_calls(ctx: Context) -> None:
    engine = ctx.facts.get("engine")
    if not isinstance(engine, EngineSite):
        return
    accumulates = bool(ctx.facts["ds_values"]["accumulates"])  # type: ignore[index]
    side = engine.side
    names = aliases(ctx.index, engine.model)
    backward_tops: dict[str, cst.BaseStatement] = {}
    for call in ctx.sites.backward_calls:
        spelled = _engine_in(names, call)
        if spelled is None:
            ctx.report("MIG117", "backward runs where the model is not reachable: call engine.backward(loss) there by hand", call.node)
            continue
        loss = _loss_of(call)
        extra = ", scale_wrt_gas=False" if accumulates else ""
        new = expression(f"{spelled}.backward({ctx.code(loss)}{extra})")
        ctx.plan.replace_with(call.node, new)
        backward_tops[call.place.scope.name] = call.place.stmt
    for call in side.step_calls:
        _step(ctx, call, names, backward_tops)
    removed = [c.place.stmt for c in side.zero_grad_calls + side.scaler_calls + side.clip_calls]
    removed += [b.place.stmt for b in side.scaler_bindings]
    for stmt in removed:
        if _is_only_call(stmt):
            ctx.plan.remove(stmt)
    for block in side.autocast_blocks:
        ctx.plan.splice(block)
    _remove_emptied_ifs(ctx)


def _engine_in(names: set[tuple[str, str]], call: CallSite) -> str | None:
    """The engine's spelling in the scope of a call."""
    for spelled, scope in sorted(names):
        if scope == call.place.scope.name:
            return spelled
    return None


def _loss_of(call: CallSite) -> cst.BaseExpression:
    """`loss.backward()` -> loss; `scaler.scale(loss).backward()` -> loss."""
    func = call.node.func
    assert isinstance(func, cst.Attribute)
    value = func.value
    if isinstance(value, cst.Call) and isinstance(value.func, cst.Attribute) and value.func.attr.value == "scale" and value.args:
        return value.args[0].value
    return value


def _step(ctx: Context, call: CallSite, names: set[tuple[str, str]], backward_tops: dict[str, cst.BaseStatement]) -> None:
    spelled = _engine_in(names, call)
    backward = backward_tops.get(call.place.scope.name)
    if spelled is None or backward is None:
        ctx.report("MIG117", "the optimizer steps where the model is not reachable: call engine.step() there by hand", call.node)
        return
    stmt = call.place.stmt
    backward_block = ctx.index.block_of.get(_top_in_loop(ctx, backward))
    if backward_block is not None and ctx.index.block_of.get(stmt, (None,))[0] is backward_block[0]:
        ctx.plan.replace_with(call.node, expression(f"{spelled}.step()"))
        return
    # inside `if (step + 1) % n == 0:` — the engine decides when the optimizer steps
    ctx.plan.remove(stmt)
    ctx.plan.insert_after(_top_in_loop(ctx, backward), [statement(f"{spelled}.step()\n")])


def _top_in_loop(ctx: Context, stmt: cst.BaseStatement) -> cst.BaseStatement:
    """The statement holding `stmt` directly in its loop body (a backward inside `with` blocks)."""
    chain = ctx.index.enclosing_statements(stmt)
    for inner, outer in zip(chain, chain[1:]):
        if isinstance(outer, (cst.For, cst.While)):
            return inner
    return stmt


def _is_only_call(stmt: cst.BaseStatement) -> bool:
    return isinstance(stmt, cst.SimpleStatementLine) and all(
        isinstance(s, (cst.Expr, cst.Assign)) and isinstance(getattr(s, "value", None), cst.Call) for s in stmt.body
    )


def _remove_emptied_ifs(ctx: Context) -> None:
    """An `if` whose whole body was removed goes too (the accumulation boundary test)."""
    changed = True
    while changed:
        changed = False
        for stmt, parent in ctx.index.parent_of.items():
            if (
                isinstance(parent, cst.If)
                and parent not in ctx.plan.removed
                and parent.orelse is None
                and isinstance(parent.body, cst.IndentedBlock)
                and all(s in ctx.plan.removed for s in parent.body.body)
            ):
                ctx.plan.remove(parent)
                changed = True


