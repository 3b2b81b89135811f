"""Horovod: a stepped optimizer built again during training, away from the construction
steps.horovod_optimizers wraps first (`def lower_lr(self): self.optimizer = SGD(...)`, which the
epoch loop calls; `optimizer = rebuild(model, lr)` in the epoch loop, where `rebuild()` returns the
wrapped construction).

Each hvd.DistributedOptimizer hooks every parameter's gradient accumulator when it is built, and
Horovod 0.28.1 cannot take those hooks off: the replaced optimizer's hooks keep starting all-reduces
under the same names as the new one's ("a tensor with the same name as another tensor that is
currently being processed"), or, after one step, stop the run on the next backward. So before each
rebinding the optimizer it replaces is retired with `set_backward_passes_per_step(sys.maxsize)`:
its hooks then only count down and never all-reduce again. A torch optimizer built on that line is
wrapped after it like the first construction (by steps.horovod_optimizers: its own named parameters,
the same backward_passes_per_step; steps.scale_lr scales its learning rate like every
construction's); a call of the function that returns the wrapped construction already returns a
wrapped optimizer. A name bound again, after its wrap, to what another call returns without being
handed the optimizer (`if args.resume: gen_opt = restore(gen, path)`, a helper that builds and loads
a new one) is retired and the new one wrapped after the line with the first one's named parameters:
Horovod hooks the parameters when it wraps, so the first wrapper all-reduces on every backward even
if it never steps. A call handed the optimizer (`opt = Lookahead(opt)`) returns what it was given. The new optimizer's state is not broadcast: a fresh optimizer holds none, and the
parameters are already equal on every rank. The replaced optimizer (and its state) stays alive
through its hooks.

A rebinding in another shape (not one `name = ...` line, a value this file cannot follow, nothing
wrapped bound to the name before it (`if args.resume: opt = restore(...)` `else: opt = Adam(...)`), the method also called from `__init__`) leaves the file
unchanged (MIG402), since the new optimizer would average nothing and the ranks would drift apart.
"""

from __future__ import annotations

from dataclasses import dataclass

import libcst as cst

from migrate.analysis.index import Binding, Scope, descendants, spell
from migrate.analysis.trained import calls_of
from migrate.steps.base import Context, statements
from migrate.steps.horovod_synchronize import Wrapped

LEFT = "the file is left unchanged"


@dataclass(frozen=True, eq=False)
class Rebuild:
    """One line that rebinds the stepped name to a new optimizer during training."""

    stmt: cst.SimpleStatementLine  # `self.optimizer = SGD(...)`, `optimizer = rebuild(model, lr)`
    target: str  # the name it rebinds, as the line spells it
    built: cst.Call | None  # the torch optimizer the line builds (to wrap after it); None: the wrapping function's call
    returned: bool = False  # a helper's new optimizer (`restore(gen, path)`): wrapped after it like the first one


def rebuilds(ctx: Context, optimizer: Wrapped) -> list[Rebuild] | None:
    """Every line that binds the wrapped optimizer's name again, away from its construction; None
    after MIG402 for one that cannot be wrapped safely."""
    site = ctx.index.call_site(optimizer.built) if isinstance(optimizer.built, cst.Call) else None
    if site is None:
        return []
    builder = _builder(ctx, optimizer, site.place.scope)
    found: list[Rebuild] = []
    for stmt, target, value in _rebindings(ctx, optimizer, site.place.scope, builder):
        rebuild = _safe(ctx, optimizer, builder, stmt, target, value)
        if rebuild is None:
            _refuse(ctx, optimizer, stmt, target, builder if _calls(ctx, value, builder) else None)
            return None
        if not any(r.stmt is stmt for r in found):
            found.append(rebuild)
    return found


def retire(ctx: Context, rebuild: Rebuild) -> None:
    """`optimizer.set_backward_passes_per_step(sys.maxsize)` before the rebinding."""
    system = ctx.module_name("sys")
    ctx.plan.insert_before(rebuild.stmt, statements(
        f"{rebuild.target}.set_backward_passes_per_step({system}.maxsize)  # the replaced optimizer keeps its "
        "Horovod hooks: they never all-reduce again\n"))


def _builder(ctx: Context, optimizer: Wrapped, scope: Scope) -> Scope | None:
    """The function that returns the wrapped construction (`def rebuild(model, lr): return SGD(...)`)."""
    stmt = ctx.index.statement_holding(optimizer.built)
    if scope.is_module or not isinstance(stmt, cst.SimpleStatementLine) or len(stmt.body) != 1:
        return None
    small = stmt.body[0]
    return scope if isinstance(small, cst.Return) and small.value is optimizer.built else None


def _rebindings(ctx: Context, optimizer: Wrapped, scope: Scope,
                builder: Scope | None) -> list[tuple[cst.BaseStatement, str | None, cst.BaseExpression | None]]:
    """(statement, target, value) of each line that may rebind the optimizer: a binding of its
    `self.` name in another method of the class, and every call of the wrapping function but the
    one that binds it first."""
    found: list[tuple[cst.BaseStatement, str | None, cst.BaseExpression | None]] = []
    known = {id(b) for b in (optimizer.built, *optimizer.alternatives)}
    for spelling in sorted(s for s in optimizer.spellings if s.startswith("self.")):
        for binding in ctx.index.bindings_of_in_class(spelling, scope.class_name):
            value = binding.value
            if binding.place.scope is scope or id(value) in known or _no_optimizer(value):
                continue
            found.append((binding.place.stmt, spelling, value))
    found.extend(_helper_rebindings(ctx, optimizer, scope, builder))
    if builder is None:
        return found
    calls = calls_of(ctx.index, builder)
    if len(calls) == 1 and not calls[0].place.loops:
        return found
    for call in calls:
        stmt = call.place.stmt
        target = _assigned_name(stmt, call.node)
        if target is not None and _first(ctx, stmt, target, call.place.loops):
            continue
        found.append((stmt, target, call.node))
    return found


def _helper_rebindings(ctx: Context, optimizer: Wrapped, scope: Scope,
                       builder: Scope | None) -> list[tuple[cst.BaseStatement, str | None, cst.BaseExpression | None]]:
    """`gen_opt = restore(gen, args.resume)`: the name the construction binds, bound again in its
    function to what a call returns that is no torch optimizer and not the wrapping function's, and
    that is not handed the optimizer (`opt = Lookahead(opt)` returns what it wraps)."""
    stmt = ctx.index.statement_holding(optimizer.built)
    name = _assigned_name(stmt, optimizer.built)
    if name is None or "." in name:
        return []
    constructions = {id(call.node) for call in ctx.sites.optimizers}
    known = {id(b) for b in (optimizer.built, *optimizer.alternatives)} | constructions
    found: list[tuple[cst.BaseStatement, str | None, cst.BaseExpression | None]] = []
    for binding in ctx.index.bindings_of_in(name, scope):
        value = binding.value
        if (isinstance(value, cst.Call) and id(value) not in known and not _calls(ctx, value, builder)
                and not _handed(value, name)):
            found.append((binding.place.stmt, name, value))
    return found


def _handed(call: cst.Call, name: str) -> bool:
    return any(isinstance(n, cst.Name) and n.value == name for n in descendants(call))


def _no_optimizer(value: cst.BaseExpression | None) -> bool:
    """`self.optimizer = None`: a value that is no optimizer (a literal)."""
    return isinstance(value, cst.Name) and value.value == "None" or isinstance(value, cst.BaseNumber | cst.BaseString)


def _first(ctx: Context, stmt: cst.BaseStatement, target: str, loops: tuple[cst.For | cst.While, ...]) -> bool:
    """The line binds `target` first: outside any loop, with no binding of it before (in
    `__init__` for a `self.` name)."""
    scope = ctx.index.scope_of.get(stmt)
    if loops or scope is None or (target.startswith("self.") and not scope.name.endswith(".__init__")):
        return False
    return not _earlier(ctx, stmt, ctx.index.bindings_of_in(target, scope))


def _earlier(ctx: Context, stmt: cst.BaseStatement, bindings: list[Binding]) -> list[Binding]:
    order = ctx.index.statement_order()
    return [b for b in bindings if order.get(b.place.stmt, 0) < order.get(stmt, 0) and not b.place.loops]


def _safe(ctx: Context, optimizer: Wrapped, builder: Scope | None, stmt: cst.BaseStatement,
          target: str | None, value: cst.BaseExpression | None) -> Rebuild | None:
    """The rebinding as it can be written, or None: one `name = value` line, its value a torch
    optimizer or a call of the wrapping function, and a wrapped optimizer bound to the name before."""
    if target is None or value is None or _assigned_name(stmt, value) != target or not isinstance(stmt, cst.SimpleStatementLine):
        return None
    constructions = {id(call.node) for call in ctx.sites.optimizers}
    built = value if isinstance(value, cst.Call) and id(value) in constructions else None
    returned = built is None and not _calls(ctx, value, builder) and "." not in target
    if built is None and not _calls(ctx, value, builder) and not returned:
        return None
    if not _bound_before(ctx, optimizer, builder, stmt, target):
        return None
    return Rebuild(stmt=stmt, target=target, built=built, returned=returned)


def _calls(ctx: Context, value: cst.BaseExpression | None, builder: Scope | None) -> bool:
    """`value` is a call of the function that returns the wrapped construction."""
    return builder is not None and any(c.node is value for c in calls_of(ctx.index, builder))


def _bound_before(ctx: Context, optimizer: Wrapped, builder: Scope | None, stmt: cst.BaseStatement, target: str) -> bool:
    """A wrapped optimizer is bound to `target` whenever `stmt` runs: for `self.x`, `__init__` binds
    it (to the wrapped construction, or the function returning it) and does not call the method of
    `stmt`; for a name, such a binding outside loops before it in its function."""
    here = ctx.index.scope_of.get(stmt)
    if here is None:
        return False
    if target.startswith("self."):
        init = next((s for s in ctx.index.functions.values() if s.class_name == here.class_name
                     and s.name.endswith(".__init__")), None)
        if init is None or here is init or any(c.place.scope is init for c in calls_of(ctx.index, here)):
            return False
        return any(_wrapped_value(ctx, optimizer, builder, b.value) for b in ctx.index.bindings_of_in(target, init))
    return any(_wrapped_value(ctx, optimizer, builder, b.value) for b in _earlier(ctx, stmt, ctx.index.bindings_of_in(target, here)))


def _wrapped_value(ctx: Context, optimizer: Wrapped, builder: Scope | None, value: cst.BaseExpression | None) -> bool:
    """`value` is the wrapped construction, or a call of the function that returns it."""
    if value is None:
        return False
    if any(value is b for b in (optimizer.built, *optimizer.alternatives)):
        return True
    return _calls(ctx, value, builder)


def _refuse(ctx: Context, optimizer: Wrapped, stmt: cst.BaseStatement, target: str | None, builder: Scope | None) -> None:
    """MIG402, MIG129's reason for Horovod: the new optimizer would average nothing."""
    line = ctx.position(stmt)[0]
    scope = ctx.index.scope_of.get(stmt)
    where = f", in `{scope.name}()`" if scope is not None and not scope.is_module else ""
    name = f"`{target}`" if target else f"`{sorted(optimizer.spellings)[0]}`" if optimizer.spellings else "the optimizer"
    why = ("only the first construction would be wrapped in hvd.DistributedOptimizer, so the new optimizer's "
           "gradients would not be averaged, and the first wrapper's hooks, which Horovod cannot take off, would stop "
           "the run on the second backward after the switch" if builder is None else
           f"each call of `{builder.name}()` returns a new hvd.DistributedOptimizer, and the one it replaces keeps its "
           "hooks (Horovod cannot take them off), which all-reduce under the same names and stop the run")
    if builder is None and target is not None and not _bound_before(ctx, optimizer, None, stmt, target):
        why = ("only the torch optimizer built on another line would be wrapped in hvd.DistributedOptimizer, so where "
               "this line runs the stepped optimizer's gradients are not averaged and the ranks drift apart")
    ctx.report("MIG402", f"{name} is built again during training (line {line}{where}: "
               f"`{ctx.code(stmt).strip().splitlines()[0][:80]}`): {why}; the conversion handles a rebuild written as "
               "one line binding the stepped name, `name = <torch optimizer>(...)`, `name = <the function returning "
               "the wrapped one>(...)` or `name = <a helper returning a new optimizer>(...)`, once a wrapped optimizer is bound to that name (outside loops, or in "
               "`__init__`); " + LEFT, stmt)


def _assigned_name(stmt: cst.BaseStatement | None, value: cst.BaseExpression) -> str | None:
    """`optimizer` for a line that is only `optimizer = <value>`."""
    if not isinstance(stmt, cst.SimpleStatementLine) or len(stmt.body) != 1:
        return None
    small = stmt.body[0]
    if isinstance(small, cst.Assign) and len(small.targets) == 1 and small.value is value:
        return spell(small.targets[0].target)
    if isinstance(small, cst.AnnAssign) and small.value is value:
        return spell(small.target)
    return None
