"""Where Horovod's gradient all-reduces must be completed by hand, with `optimizer.synchronize()`.

hvd.DistributedOptimizer starts a parameter's all-reduce from a gradient hook during backward and
waits for it in `step()`. Three shapes read or reset gradients before that step, or run another
backward first:
- the script reads the gradients between backward and the step (clipping, a GradScaler's
  unscale, directly or in a helper of this file): `synchronize()` before the first read, the step
  under `skip_synchronize()`, so the script reads averaged gradients, as with DDP; a step inside
  an `if`/`else` or `with` is traced back through the statements before that block too;
- a backward reaches an optimizer that is not stepped before the next backward (a GAN's generator
  loss through the discriminator, backwards in an inner loop before one step): `synchronize()`
  right after it, or Horovod stops on the next backward or `zero_grad()` (a step later on the
  backward's own line, `loss.backward(); opt.step()`, counts as the step after it);
- with `backward_passes_per_step`, a `zero_grad()` outside the stepping block (an epoch's start)
  may meet micro-steps left over from the last window: `synchronize()` before it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import libcst as cst

from migrate.analysis.index import descendants, read_names, spell
from migrate.analysis.training import callee_scope, calls_in
from migrate.steps.base import Context, expression, statements

if TYPE_CHECKING:
    from migrate.steps.horovod_optimizers import Wrapped

GRADIENT_READERS = ("clip_grad_norm_", "clip_grad_value_", "clip_grad_norm", "unscale_")


def synchronize_leftovers(ctx: Context, optimizer: Wrapped) -> None:
    """With accumulation, a `zero_grad()` outside the block that steps (an epoch's start) may find
    micro-steps left over from the last window, whose all-reduces Horovod still holds (it stops on
    a zero_grad() then): `synchronize()` completes them first."""
    if optimizer.passes is None:
        return
    stepping = {id(ctx.index.parent_of.get(s.step.place.stmt)) for s in optimizer.stepped}
    for call in ctx.index.calls:
        func = call.node.func
        if not (isinstance(func, cst.Attribute) and func.attr.value == "zero_grad" and spell(func.value) in optimizer.spellings):
            continue
        if not call.place.loops or id(ctx.index.parent_of.get(call.place.stmt)) in stepping or in_header(ctx, call):
            continue
        ctx.plan.insert_before(call.place.stmt, statements(
            f"{spell(func.value)}.synchronize()  # micro-steps left over from the last window: finish their all-reduces\n"))


def synchronize_before_reads(ctx: Context, optimizer: Wrapped) -> None:
    """Clipping or unscaling between backward and the step reads the averaged gradients."""
    placed = ctx.index.memo("horovod_synchronized")  # one synchronize() before a reader two steps share
    for stepped in optimizer.stepped:
        step = stepped.step
        if block_position(ctx, step.place.stmt)[0] is None:
            continue
        through_scaler = spell(step.node.func) is not None and not spell(step.node.func).startswith(stepped.spelling + ".")  # type: ignore[union-attr]
        first_reader = None
        for stmt in _statements_before(ctx, step.place.stmt):
            if _has_backward(ctx, stmt):
                break
            if _reads_gradients(ctx, stmt):
                first_reader = stmt
        if first_reader is None and not through_scaler:
            continue
        sync_before = first_reader or step.place.stmt
        name = stepped.spelling
        if (id(sync_before), name) not in placed:
            placed[(id(sync_before), name)] = True
            ctx.plan.insert_before(sync_before, statements(
                f"{name}.synchronize()  # average the gradients across ranks before they are read\n"))
            ctx.report("MIG404", f"`{name}.synchronize()` before the gradients are read ({'clipping or unscaling' if first_reader else 'the GradScaler step'}), "
                       f"and the step under `{name}.skip_synchronize()`: the script reads averaged gradients, as with DDP",
                       sync_before)
        ctx.plan.wrap_run(step.place.stmt, step.place.stmt, _skip_synchronize(ctx, name))


def _statements_before(ctx: Context, stmt: cst.BaseStatement) -> list[cst.BaseStatement]:
    """The statements that run before `stmt` in its block, nearest first; from a block of an
    `if`/`else` or `with`, on through the statements before that compound statement."""
    found: list[cst.BaseStatement] = []
    while True:
        block, position = block_position(ctx, stmt)
        if block is None:
            return found
        found += reversed(block[:position])
        parent = ctx.index.parent_of.get(stmt)
        if not isinstance(parent, (cst.If, cst.With)):
            return found
        stmt = parent

def _skip_synchronize(ctx: Context, name: str):  # type: ignore[no-untyped-def]
    item = expression(f"{name}.skip_synchronize()")

    def build(run: list[cst.BaseStatement]) -> cst.BaseCompoundStatement:
        return cst.With(items=[cst.WithItem(item)], body=cst.IndentedBlock(body=run))

    return build


def block_position(ctx: Context, stmt: cst.BaseStatement) -> tuple[list[cst.BaseStatement] | None, int]:
    """The statements of the block `stmt` is in, and its place there."""
    parent = ctx.index.parent_of.get(stmt)
    blocks = [ctx.index.module] if parent is None else [n for n in descendants(parent) if isinstance(n, cst.IndentedBlock)]
    for block in blocks:
        for position, sibling in enumerate(block.body):
            if sibling is stmt:
                return list(block.body), position
    return None, 0


def _has_backward(ctx: Context, stmt: cst.CSTNode) -> bool:
    """A backward in `stmt`, or in a function of this file it calls."""
    return _calls_anywhere(ctx, stmt, lambda name: name == "backward", 0)


def _reads_gradients(ctx: Context, stmt: cst.CSTNode) -> bool:
    """Clipping or unscaling in `stmt`, or in a function of this file it calls (`clip(model)`)."""
    return _calls_anywhere(ctx, stmt, lambda name: name in GRADIENT_READERS, 0)


def _calls_anywhere(ctx: Context, node: cst.CSTNode, wanted, depth: int) -> bool:  # type: ignore[no-untyped-def]
    """A call whose last name passes `wanted`, under `node` or in the functions of this file it
    calls (four calls deep)."""
    for call in calls_in(node):
        func = call.func
        name = func.attr.value if isinstance(func, cst.Attribute) else func.value if isinstance(func, cst.Name) else ""
        if wanted(name):
            return True
        site = ctx.index.call_site(call) if depth < 4 else None
        callee = callee_scope(ctx.index, site) if site is not None else None
        if callee is not None and not callee.is_module and callee.node is not node and _calls_anywhere(ctx, callee.node, wanted, depth + 1):
            return True
    return False


def synchronize_after_crossing_backwards(ctx: Context, wrapped: list[Wrapped]) -> None:
    """A backward whose loss runs through a model of an optimizer that is not stepped after it
    (before the next backward): a GAN's generator loss through the discriminator, or a loop of
    backwards before one step."""
    for backward in ctx.sites.backward_calls:
        block, position = block_position(ctx, backward.place.stmt)
        if block is None:
            continue
        reached = _reached_names(ctx, backward)
        if reached is None:
            continue
        later: list[cst.CSTNode] = _after_on_its_line(backward.place.stmt, backward.node)
        for stmt in block[position + 1:]:
            if _has_backward(ctx, stmt):
                break
            later.append(stmt)
        for optimizer in wrapped:
            roots = {o.spelling for o in optimizer.owners or []}
            if not roots & reached or any(_steps(stmt, optimizer) for stmt in later):
                continue
            name = next((s.spelling for s in optimizer.stepped if s.step.place.scope is backward.place.scope), None)
            if name is None:
                continue
            ctx.plan.insert_after(backward.place.stmt, statements(
                f"{name}.synchronize()  # this backward reached {', '.join(sorted(roots & reached))}: finish its all-reduces before the next one\n"))
            ctx.report("MIG404", f"this backward runs through `{', '.join(sorted(roots & reached))}`, whose optimizer "
                       f"`{name}` is not stepped before the next backward: `{name}.synchronize()` completes the all-reduces this one started (Horovod stops on a second backward, or a zero_grad(), before they are complete)",
                       backward.node)


def _after_on_its_line(stmt: cst.BaseStatement, call: cst.Call) -> list[cst.CSTNode]:
    """The small statements after the one holding `call` on its line (`loss.backward(); opt.step()`)."""
    if not isinstance(stmt, cst.SimpleStatementLine):
        return []
    holding = next((i for i, small in enumerate(stmt.body) if any(c is call for c in calls_in(small))), len(stmt.body))
    return list(stmt.body[holding + 1:])


def _steps(stmt: cst.CSTNode, optimizer: Wrapped) -> bool:
    return any(any(s.step.node is call for s in optimizer.stepped) for call in calls_in(stmt))


def _reached_names(ctx: Context, backward) -> set[str] | None:  # type: ignore[no-untyped-def]
    """The names the loss of `backward` is computed from, through the assignments before it in
    its function (`.detach()` cuts a path); None when it is not `name.backward()`."""
    func = backward.node.func
    if not isinstance(func, cst.Attribute):
        return None
    scope = backward.place.scope
    order = ctx.index.statement_order()
    here = order.get(backward.place.stmt, 0)
    pending = _undetached_names(func.value)
    reached: set[str] = set()
    while pending:
        name = pending.pop()
        if name in reached:
            continue
        reached.add(name)
        earlier = sorted((b for b in ctx.index.bindings_of_in(name, scope)
                          if b.value is not None and order.get(b.place.stmt, here) < here),
                         key=lambda b: order[b.place.stmt])
        if earlier and ctx.index.parent_of.get(earlier[-1].place.stmt) is ctx.index.parent_of.get(backward.place.stmt):
            earlier = earlier[-1:]  # rebound in the backward's own block: the last value is the one it reads
        for binding in earlier:
            pending |= _undetached_names(binding.value)  # type: ignore[arg-type]
    return reached


def _undetached_names(value: cst.CSTNode) -> set[str]:
    if isinstance(value, cst.Call) and isinstance(value.func, cst.Attribute) and value.func.attr.value in ("detach", "item"):
        return set()
    if isinstance(value, cst.Attribute) and value.attr.value == "data":
        return set()  # `fake.data`: the tensor without its graph
    if isinstance(value, (cst.Name, cst.Attribute)):
        return read_names(value) | ({spell(value)} if spell(value) else set())  # type: ignore[arg-type]
    found: set[str] = set()
    for child in value.children:
        if isinstance(child, cst.CSTNode):
            found |= _undetached_names(child)
    return found


def in_header(ctx: Context, call) -> bool:  # type: ignore[no-untyped-def]
    """A call in an `if`/`while` test: no statement can follow it alone."""
    return not isinstance(call.place.stmt, cst.SimpleStatementLine)
