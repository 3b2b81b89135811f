"""The engine runs the optimizer side of each step: `loss.backward()` -> `engine.backward(loss)`,
`optimizer.step()` -> `engine.step()`, `zero_grad()` removed (the engine clears gradients).

What the engine takes over from the script goes: AMP's GradScaler and autocast blocks (the
config's fp16/bf16 does that), `clip_grad_norm_` (the config's gradient_clipping). With gradient
accumulation the engine counts micro-steps itself, so `engine.step()` runs after every backward
and the script's own `loss / accum_steps` is kept (`scale_wrt_gas=False`).
"""

from __future__ import annotations

import libcst as cst

from migrate.analysis.index import Binding, CallSite, child_nodes, read_names
from migrate.analysis.models import aliases
from migrate.rewrite import small_statement_holding
from migrate.steps.base import Context, expression, statement
from migrate.steps.deepspeed_engine import EngineConfig


def engine_calls(ctx: Context) -> None:
    if EngineConfig not in ctx.records:
        return
    config = ctx.recorded(EngineConfig)
    engine, accumulates = config.engine, config.accumulates
    side = engine.side
    names = aliases(ctx.index, engine.model)
    backward_tops: dict[cst.CSTNode, cst.BaseStatement] = {}  # scope (not its name: two may share one) -> backward
    handled: set[cst.BaseStatement] = set()  # statements that no longer read what they read
    for call in ctx.sites.backward_calls:
        spelled = _engine_in(names, call)
        if spelled is None:
            ctx.report("MIG117", "backward runs where the model is not reachable: call engine.backward(loss) there by hand", call.node)
            continue
        loss = _loss_of(call)
        extra = ", scale_wrt_gas=False" if accumulates else ""
        new = expression(f"{spelled}.backward({ctx.code(loss)}{extra})")
        ctx.plan.replace_with(call.node, new)
        backward_tops[call.place.scope.node] = call.place.stmt
        handled.add(call.place.stmt)
    for call in side.step_calls:
        if _step(ctx, call, names, backward_tops):
            handled.add(call.place.stmt)
    for call in side.zero_grad_calls + side.scaler_calls + side.clip_calls:
        _remove_call(ctx, call)
        if call.place.stmt in ctx.plan.removed:
            handled.add(call.place.stmt)
    for binding in side.scaler_bindings:
        _remove_scaler(ctx, binding, handled)
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


def _step(ctx: Context, call: CallSite, names: set[tuple[str, str]], backward_tops: dict[cst.CSTNode, cst.BaseStatement]) -> bool:
    """`optimizer.step()` -> `engine.step()`; False when it is left for the user (MIG117)."""
    spelled = _engine_in(names, call)
    backward = backward_tops.get(call.place.scope.node)
    if spelled is None or backward is None:
        ctx.report("MIG117", "the optimizer steps where the model is not reachable: call engine.step() there by hand", call.node)
        return False
    stmt = call.place.stmt
    backward_block = ctx.index.block_of.get(_top_in_loop(ctx, backward))
    if backward_block is not None and ctx.index.block_of.get(stmt, (None,))[0] is backward_block[0]:
        ctx.plan.replace_with(call.node, expression(f"{spelled}.step()"))
        return True
    # inside `if (step + 1) % n == 0:` — the engine decides when the optimizer steps
    ctx.plan.remove_part(stmt, call.node)
    ctx.plan.insert_after(_top_in_loop(ctx, backward), [statement(f"{spelled}.step()\n")])
    return True


def _remove_scaler(ctx: Context, binding: Binding, handled: set[cst.BaseStatement]) -> None:
    """`scaler = GradScaler()` goes, unless the script still reads the scaler elsewhere
    (`scaler.get_scale()` in a print, `scaler.state_dict()` in a checkpoint): then it stays, so
    that those reads find it."""
    read = _read_elsewhere(ctx, binding.target, handled | {binding.place.stmt})
    if read is None:
        ctx.plan.remove_part(binding.place.stmt, binding.node)
        return
    ctx.report("MIG004", f"`{binding.target} = ...` (the GradScaler) is kept because the script still reads it here; "
               "DeepSpeed's fp16 scales the loss itself, so this scaler's values no longer describe training", read)


def _read_elsewhere(ctx: Context, name: str, handled: set[cst.BaseStatement]) -> cst.BaseStatement | None:
    """The first statement the conversion leaves as it is that reads `name`."""
    for stmt in ctx.index.scope_of:
        if stmt not in handled and name in _own_reads(stmt):
            return stmt
    return None


def _own_reads(stmt: cst.BaseStatement) -> set[str]:
    """The names a statement reads itself: a line, or a compound statement's header and one-line
    bodies (`if i % 25 == 0: print(scaler.get_scale())`); its indented blocks hold statements of their own."""
    found: set[str] = set()
    stack: list[cst.CSTNode] = [stmt]
    while stack:
        node = stack.pop()
        if isinstance(node, cst.Name):
            found.add(node.value)
        elif isinstance(node, cst.Attribute):
            stack.append(node.value)
        elif not isinstance(node, cst.IndentedBlock):
            stack.extend(child_nodes(node))
    return found


def _top_in_loop(ctx: Context, stmt: cst.BaseStatement) -> cst.BaseStatement:
    """The statement holding `stmt` directly in its loop body (a backward inside `with` blocks)."""
    chain = ctx.index.enclosing_statements(stmt)
    for inner, outer in zip(chain, chain[1:]):
        if isinstance(outer, (cst.For, cst.While)):
            return inner
    return stmt


def _remove_call(ctx: Context, call: CallSite) -> None:
    """Remove the statement the call stands as (`optimizer.zero_grad()`; `norm = clip_grad_norm_(...)`
    unless `norm` is read elsewhere), and nothing else on its line."""
    _holder, small = small_statement_holding(call.place.stmt, call.node)
    if isinstance(small, cst.Expr) and small.value is call.node:
        ctx.plan.remove_part(call.place.stmt, call.node)
    elif isinstance(small, cst.Assign) and small.value is call.node:
        names = {n for target in small.targets for n in read_names(target.target)}
        if not any(_read_elsewhere(ctx, name, {call.place.stmt}) for name in names):
            ctx.plan.remove_part(call.place.stmt, call.node)


def _remove_emptied_ifs(ctx: Context) -> None:
    """An `if` whose whole body was removed goes too (the accumulation boundary test), and then an
    `if` around it left empty in turn. Only the `if`s around removed statements can be emptied, so
    those are checked, outwards, instead of every statement again after each removal."""
    parent_of = ctx.index.parent_of
    pending = [parent_of[stmt] for stmt in ctx.plan.removed if stmt in parent_of]
    while pending:
        parent = pending.pop()
        if (
            isinstance(parent, cst.If)
            and parent not in ctx.plan.removed
            and parent.orelse is None
            and isinstance(parent.body, cst.IndentedBlock)
            and all(s in ctx.plan.removed for s in parent.body.body)
        ):
            ctx.plan.remove(parent)
            if parent in parent_of:
                pending.append(parent_of[parent])


