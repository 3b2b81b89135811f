"""Several DeepSpeed engines in one script (a GAN's generator and discriminator, each with its own
optimizer): the engine each backward belongs to, and the forward of one engine that feeds
another engine's loss.

Measured with DeepSpeed 0.19.8 on samples/gan (2 ranks on CPU, ZeRO 0-3, weights against the
original's): when the generator's loss runs through the discriminator's engine (`D(fake)`), the
generator's backward reaches D's engine too. At stage 0 D's output hook raises ("Direct calls to
tensor.backward() are not supported ... use engine.backward(loss)"); at stage 1 D's next step
silently adds those gradients (weights 3.9e-2 off); at stages 2 and 3 D's next backward asserts
("Gradient computed twice for this partition"). Calling `D.zero_grad()` does not prevent the
assertion. What trains the same at every stage (6e-8 off): in the generator's step, call D
through `D.module(...)` and let D's weights take no gradient from that forward to the generator's
backward (`D.module.requires_grad_(False)` before, `(True)` after). That drops only gradients the
original clears before D's next backward (its `zero_grad()`), which is checked here.

The file is left unchanged (MIG113) when that rewrite would train differently: D's forward there
also feeds D's own backward, it was computed before the previous backward, nothing clears D's
gradients before D's next backward in the original, or the script switches D's gradients itself.
"""

from __future__ import annotations

import dataclasses

import libcst as cst

from migrate.analysis.divergence import target_names
from migrate.analysis.index import CallSite, child_nodes, spell
from migrate.analysis.models import aliases, top_statement
from migrate.analysis.optimizers import OptimizerSide
from migrate.analysis.ordering import ModelOrdering
from migrate.analysis.syntax import contains
from migrate.steps.base import Context, comment_lines, statement, statements
from migrate.steps.engine_refusals import first_line

# calls whose result carries no gradient back to what made their input
DETACHING = frozenset({"detach", "item", "tolist", "numpy"})
NO_GRAD = ("torch.no_grad", "torch.inference_mode")
COMMENT_WIDTH = 90

Flows = dict[int, list[cst.Call]]  # engine index -> that engine's forward calls an expression's gradient reaches


def backward_engines(ctx: Context, engines: tuple[ModelOrdering, ...]) -> dict[int, ModelOrdering] | None:
    """Each backward call (by node id) with its engine: the only one, or, with several, the one
    whose optimizer steps next after it in its block. None (with MIG128) when a backward has none."""
    backward = ctx.sites.backward_calls
    if len(engines) == 1:
        return {id(call.node): engines[0] for call in backward}
    by_optimizer = {each.optimizer: each for each in engines}
    owners: dict[int, ModelOrdering] = {}
    for call in backward:
        engine = _next_stepped(ctx, call, engines[0].side, by_optimizer)
        if engine is None:
            ctx.report("MIG128", f"`{ctx.code(call.node)}` is followed by no optimizer step in its own block; with one "
                       "DeepSpeed engine per model, each backward belongs to the engine whose optimizer steps next; "
                       "the file is left unchanged: convert it by hand", call.node)
            return None
        owners[id(call.node)] = engine
    return owners


def _next_stepped(ctx: Context, call: CallSite, side: OptimizerSide, by_optimizer: dict[str, ModelOrdering]) -> ModelOrdering | None:
    block, position = ctx.index.block_of[call.place.stmt]
    best: tuple[int, ModelOrdering] | None = None
    for step in side.step_calls:
        func = step.node.func
        optimizer = spell(func.value) if isinstance(func, cst.Attribute) and not step.node.args else None
        top = top_statement(ctx.index, step.place.stmt, block)
        if optimizer not in by_optimizer or top is None:
            continue
        at = block.body.index(top)
        if at >= position and (best is None or at < best[0]):
            best = (at, by_optimizer[optimizer])
    return best[1] if best else None


@dataclasses.dataclass
class Crossing:
    """In the step of one engine, forwards of another engine that its loss runs through."""

    backward: CallSite
    own: ModelOrdering  # the engine the backward belongs to
    other: ModelOrdering  # the engine whose forward its loss runs through
    calls: list[cst.Call]


def cross_engine_calls(ctx: Context, engines: tuple[ModelOrdering, ...], owners: dict[int, ModelOrdering]) -> bool:
    """Rewrite each crossing (see the module docstring); False (with MIG113) when one cannot be."""
    crossings: list[Crossing] = []
    for call in ctx.sites.backward_calls:
        flows = _flows_at(ctx, call, engines)
        own = engines.index(owners[id(call.node)])
        for other, calls in flows.items():
            if other != own:
                crossings.append(Crossing(call, engines[own], engines[other], calls))
    for crossing in crossings:
        problem = _unsafe(ctx, crossing, engines, owners)
        if problem is not None:
            names = " and ".join(f"`{e.model.spelling}`" for e in engines)
            ctx.report("MIG113", f"{names} each train with their own optimizer (one DeepSpeed engine each), but {problem}; "
                       "the file is left unchanged", crossing.backward.node)
            return False
    for crossing in crossings:
        _rewrite(ctx, crossing)
    return True


def _rewrite(ctx: Context, crossing: Crossing) -> None:
    """`D(fake)` -> `D.module(fake)` between `D.module.requires_grad_(False)` and `(True)`."""
    block, _ = ctx.index.block_of[crossing.backward.place.stmt]
    spelled = ctx.code(crossing.calls[0].func)
    own = crossing.own.model.spelling
    for call in crossing.calls:
        ctx.plan.replace_with(call.func, cst.Attribute(value=call.func, attr=cst.Name("module")))
    first = min((_top(ctx, call, block) for call in crossing.calls), key=block.body.index)
    why = (f"{own}'s backward must not reach {spelled}'s engine: {spelled} runs as its plain module here, and its "
           f"weights take no gradient (the original clears them before {spelled}'s next step anyway)")
    comment = comment_lines(why, COMMENT_WIDTH)
    ctx.plan.insert_above(first, statement(f"{comment}{spelled}.module.requires_grad_(False)\n"))
    ctx.plan.insert_after(_top(ctx, crossing.backward.node, block), statements(f"{spelled}.module.requires_grad_(True)\n"))


def _top(ctx: Context, node: cst.Call, block: cst.Module | cst.IndentedBlock) -> cst.BaseStatement:
    site = ctx.index.call_site(node)
    assert site is not None
    top = top_statement(ctx.index, site.place.stmt, block)
    assert top is not None
    return top


def _unsafe(ctx: Context, crossing: Crossing, engines: tuple[ModelOrdering, ...], owners: dict[int, ModelOrdering]) -> str | None:
    """Why `_rewrite` would train differently from the original, if it would."""
    index = ctx.index
    backward = crossing.backward
    other = crossing.other
    block, position = index.block_of[backward.place.stmt]
    loss = ctx.code(backward.node.func.value) if isinstance(backward.node.func, cst.Attribute) else "the loss"
    other_name = other.model.spelling
    start = max((block.body.index(top) + 1 for call in ctx.sites.backward_calls
                 if (top := top_statement(index, call.place.stmt, block)) is not None and block.body.index(top) < position), default=0)
    for call in crossing.calls:
        site = index.call_site(call)
        top = top_statement(index, site.place.stmt, block) if site is not None else None
        if top is None or block.body.index(top) < start:
            return (f"`{loss}` reaches `{other_name}`'s weights through `{ctx.code(call)}`, computed before the previous "
                    "backward")
    for own in ctx.sites.backward_calls:
        if owners[id(own.node)] is other:
            reached = _flows_at(ctx, own, engines).get(engines.index(other), [])
            shared = [c for c in crossing.calls if any(c is r for r in reached)]
            if shared:
                return (f"`{ctx.code(shared[0])}` (line {ctx.position(shared[0])[0]}) feeds both `{loss}` and the loss "
                        f"of `{other_name}`'s own backward (line {ctx.position(own.node)[0]})")
    switch = _switches_gradients(ctx, other)
    if switch is not None:
        return (f"the script switches `{other_name}`'s gradients itself (line {ctx.position(switch)[0]}: "
                f"`{first_line(ctx, switch)}`)")
    if not _cleared_before_next_step(ctx, backward, other, owners):
        return (f"`{loss}` leaves gradients on `{other_name}`'s weights that no `zero_grad()` clears before "
                f"`{other_name}`'s next backward, so its optimizer applies them, and one engine per model cannot")
    return None


def _switches_gradients(ctx: Context, other: ModelOrdering) -> cst.BaseStatement | None:
    """A line of the script that sets `requires_grad` on the other model's weights
    (`D.requires_grad_(False)`), or a loop over its parameters that does (`for p in D.parameters():
    p.requires_grad = False`)."""
    names = {spelled for spelled, _scope in aliases(ctx.index, other.model)}

    def reads(node: cst.CSTNode) -> bool:
        return contains(node, lambda n: isinstance(n, cst.Name | cst.Attribute) and spell(n) in names)

    def switches(node: cst.CSTNode) -> bool:
        return contains(node, lambda n: isinstance(n, cst.Attribute) and n.attr.value in ("requires_grad", "requires_grad_"))

    for stmt in ctx.index.scope_of:
        if isinstance(stmt, cst.SimpleStatementLine) and reads(stmt) and switches(stmt):
            return stmt
        if isinstance(stmt, cst.For) and reads(stmt.iter) and switches(stmt.body):
            return stmt
    return None


def _cleared_before_next_step(ctx: Context, backward: CallSite, other: ModelOrdering, owners: dict[int, ModelOrdering]) -> bool:
    """In the original, a zero_grad of the other model (or its optimizer) runs between this
    backward and each backward of the other model that can follow it."""
    index = ctx.index
    block, position = index.block_of[backward.place.stmt]
    names = {spelled for spelled, _scope in aliases(index, other.model)} | {other.optimizer}
    clears = [call for call in other.side.zero_grad_calls
              if isinstance(call.node.func, cst.Attribute) and spell(call.node.func.value) in names]
    theirs = [call for call in ctx.sites.backward_calls if owners[id(call.node)] is other]
    for their in theirs:
        their_block, their_position = index.block_of[their.place.stmt]
        if their_block is block:
            positions = [p for c in clears if (p := _position_in(ctx, c, block)) is not None]
            if their_position > position:
                ok = any(position < p <= their_position for p in positions)
            else:  # the next iteration of the loop: after this backward, or before theirs
                ok = any(p > position or p <= their_position for p in positions)
        else:
            ok = any((p := _position_in(ctx, c, their_block)) is not None and p <= their_position for c in clears)
        if not ok:
            return False
    return True


def _position_in(ctx: Context, call: CallSite, block: cst.Module | cst.IndentedBlock) -> int | None:
    top = top_statement(ctx.index, call.place.stmt, block)
    return block.body.index(top) if top is not None else None


# -- where gradients flow ------------------------------------------------------------------------

def _flows_at(ctx: Context, backward: CallSite, engines: tuple[ModelOrdering, ...]) -> Flows:
    """The engines whose forward the loss of `backward` runs through without a detach, following
    the names assigned by the statements before it in its block."""
    index = ctx.index
    spelled = {(name, scope): i for i, each in enumerate(engines) for name, scope in aliases(index, each.model)}
    scope = backward.place.scope.name
    engine_names = {name: i for (name, where), i in spelled.items() if where == scope}
    block, position = index.block_of[backward.place.stmt]
    env: dict[str, Flows] = {}
    for stmt in block.body[:position]:
        _walk(ctx, stmt, env, engine_names, no_grad=False)
    func = backward.node.func
    loss = func.value if isinstance(func, cst.Attribute) else backward.node
    return _flows(loss, env, engine_names)


def _walk(ctx: Context, stmt: cst.CSTNode, env: dict[str, Flows], engines: dict[str, int], no_grad: bool) -> None:
    if isinstance(stmt, cst.FunctionDef | cst.ClassDef):
        return
    if isinstance(stmt, cst.SimpleStatementLine):
        for small in stmt.body:
            _assign(small, env, engines, no_grad)
        return
    if isinstance(stmt, cst.With) and any((ctx.index.qualify(item.item.func) or "") in NO_GRAD
                                          for item in stmt.items if isinstance(item.item, cst.Call)):
        no_grad = True
    for child in child_nodes(stmt):
        if isinstance(child, cst.IndentedBlock | cst.Else | cst.ExceptHandler | cst.Finally | cst.BaseStatement):
            for inner in child_nodes(child) if not isinstance(child, cst.BaseStatement) else [child]:
                _walk(ctx, inner, env, engines, no_grad)


def _assign(small: cst.BaseSmallStatement, env: dict[str, Flows], engines: dict[str, int], no_grad: bool) -> None:
    if isinstance(small, cst.Assign):
        flows = {} if no_grad else _flows(small.value, env, engines)
        for target in small.targets:
            for name in target_names(target.target):
                env[name] = flows
    elif isinstance(small, cst.AnnAssign) and small.value is not None:
        for name in target_names(small.target):
            env[name] = {} if no_grad else _flows(small.value, env, engines)
    elif isinstance(small, cst.AugAssign) and not no_grad:
        for name in target_names(small.target):
            env[name] = _merge(env.get(name, {}), _flows(small.value, env, engines))


def _flows(node: cst.CSTNode, env: dict[str, Flows], engines: dict[str, int]) -> Flows:
    if isinstance(node, cst.Call):
        func = node.func
        if isinstance(func, cst.Attribute) and func.attr.value in DETACHING:
            return {}
        called = spell(func)
        found: Flows = {}
        if called in engines:
            found = {engines[called]: [node]}
        for arg in node.args:
            found = _merge(found, _flows(arg.value, env, engines))
        return _merge(found, _flows(func, env, engines)) if called not in engines else found
    if isinstance(node, cst.Attribute):
        if node.attr.value == "data":
            return {}
        spelled = spell(node)
        if spelled is not None and spelled in env:
            return env[spelled]
        return _flows(node.value, env, engines)
    if isinstance(node, cst.Name):
        return env.get(node.value, {})
    if isinstance(node, cst.Lambda | cst.FunctionDef):
        return {}
    found = {}
    for child in child_nodes(node):
        found = _merge(found, _flows(child, env, engines))
    return found


def _merge(a: Flows, b: Flows) -> Flows:
    merged = {key: list(value) for key, value in a.items()}
    for key, calls in b.items():
        merged.setdefault(key, []).extend(c for c in calls if not any(c is m for m in merged[key]))
    return merged
