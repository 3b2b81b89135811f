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
  backward's own line, `loss.backward(); opt.step()`, counts as the step after it). The backward
  may run in a function of its own (`def train_g(): ...; loss_g.backward(); opt_g.step()`, the
  discriminator's optimizer stepped in `train_d()`): a backward that ends its function is followed
  to the calls of that function (a step right after every call counts), a parameter it reads to
  what the calls hand in, and the optimizer is named as that function reaches it (a module-level
  name, `self.x` in a method of the same class, the parameter it is handed in); one it cannot
  reach leaves the file unchanged (MIG403, naming both functions);
- with `backward_passes_per_step`, a `zero_grad()` outside the stepping block (an epoch's start)
  may meet micro-steps left over from the last window: `synchronize()` before it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import libcst as cst

from migrate.analysis.index import CallSite, Scope, descendants, read_names, spell
from migrate.analysis.models import requires_grad_switches
from migrate.analysis.syntax import calls_in
from migrate.analysis.trained import Owner, Stepped
from migrate.analysis.training import callee_scope
from migrate.rewrite import RunWrap
from migrate.steps.base import Context, expression, statements

GRADIENT_READERS = ("clip_grad_norm_", "clip_grad_value_", "clip_grad_norm", "unscale_")


# one optimizer as steps.horovod_optimizers wraps it (defined here, where both modules can import it)
@dataclass(eq=False)
class Wrapped:
    """One optimizer as the conversion wraps it."""

    stepped: list[Stepped]  # every place it is stepped
    built: cst.BaseExpression
    owners: list[Owner] | None
    passes: str | None = None  # backward_passes_per_step, as code
    # the other constructions bound to the same name (`if args.adam: opt = Adam(...) else: opt = SGD(...)`)
    alternatives: list[cst.BaseExpression] = field(default_factory=list)
    # the wrap goes after this statement instead of the construction's (where its arguments are known)
    wrap_after: cst.BaseStatement | None = None
    spellings: set[str] = field(default_factory=set)
    after_model: bool = False  # wrap_after is where the model it holds is last moved or cast


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
        stepped_through = spell(step.node.func)
        through_scaler = stepped_through is not None and not stepped_through.startswith(stepped.spelling + ".")
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

def _skip_synchronize(ctx: Context, name: str) -> RunWrap:
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


def _calls_anywhere(ctx: Context, node: cst.CSTNode, wanted: Callable[[str], bool], depth: int) -> bool:
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


@dataclass(frozen=True)
class Crossing:
    """A backward that reaches a model of an optimizer not stepped before the next backward."""

    stmt: cst.BaseStatement  # the backward's statement: `synchronize()` goes after it
    backward: cst.Call
    name: str  # the optimizer, as spelled where the backward runs
    models: tuple[str, ...]  # what the backward reaches of it


def crossing_backwards(ctx: Context, wrapped: list[Wrapped]) -> list[Crossing] | None:
    """Each backward whose loss runs through a model of an optimizer that is not stepped after it
    (before the next backward): a GAN's generator loss through the discriminator, inline or in the
    generator's own function (`train_g()`, the optimizer stepped in `train_d()`), or a loop of
    backwards before one step. A backward that ends its function is followed to the calls of that
    function: a step right after every call counts. None (after MIG403) when the optimizer cannot
    be named where the backward runs."""
    found: list[Crossing] = []
    for backward in ctx.sites.backward_calls:
        block, position = block_position(ctx, backward.place.stmt)
        reached = _reached_names(ctx, backward) if block is not None else None
        if block is None or reached is None:
            continue
        scope = backward.place.scope
        reached |= _arguments_of(ctx, scope, reached)
        later, ends = _until_next_backward(ctx, backward.place.stmt, backward.node, block[position + 1:])
        ends = ends and ctx.index.parent_of.get(backward.place.stmt) is scope.node and not scope.is_module
        for optimizer in wrapped:
            models = {o.spelling for o in optimizer.owners or []} & reached
            models = {model for model in models if not _frozen_at(ctx, backward.place.stmt, model)}
            if not models or not optimizer.stepped or any(_steps(stmt, optimizer) for stmt in later):
                continue
            if ends and _stepped_after_every_call(ctx, scope, optimizer):
                continue
            name = _spelled_in(ctx, optimizer, scope)
            if name is None:
                _refuse_unnamed(ctx, backward, optimizer, sorted(models))
                return None
            found.append(Crossing(backward.place.stmt, backward.node, name, tuple(sorted(models))))
    return found


def _frozen_at(ctx: Context, stmt: cst.BaseStatement, model: str) -> bool:
    """Whether the last switch of `model`'s gradients before `stmt`, in the blocks around it in its
    function, turns them off (a GAN's `for p in netD.parameters(): p.requires_grad = False` before
    the generator's backward): that backward then gives `model` no gradient, and starts no all-reduce."""
    index = ctx.index
    for holder in index.enclosing_statements(stmt):
        if isinstance(holder, (cst.FunctionDef, cst.ClassDef)):
            return False
        located = index.block_of.get(holder)
        if located is None:
            continue
        block, position = located
        for earlier in reversed(block.body[:position]):
            switches = [s for s in requires_grad_switches(index, earlier, {model}) if s.owner == model]
            if switches:
                return switches[-1].on is False
    return False


def synchronize_after_crossing_backwards(ctx: Context, crossings: list[Crossing]) -> None:
    """`optimizer.synchronize()` after each crossing backward (MIG404)."""
    for crossing in crossings:
        name, models = crossing.name, ", ".join(crossing.models)
        ctx.plan.insert_after(crossing.stmt, statements(
            f"{name}.synchronize()  # this backward reached {models}: finish its all-reduces before the next one\n"))
        ctx.report("MIG404", f"this backward runs through `{models}`, whose optimizer "
                   f"`{name}` is not stepped before the next backward: `{name}.synchronize()` completes the all-reduces this one started (Horovod stops on a second backward, or a zero_grad(), before they are complete)",
                   crossing.backward)


def _until_next_backward(ctx: Context, stmt: cst.BaseStatement, call: cst.Call,
                         rest: list[cst.BaseStatement]) -> tuple[list[cst.CSTNode], bool]:
    """What runs after `call` on its line and in its block up to the next backward, and whether
    the block ends first."""
    later: list[cst.CSTNode] = _after_on_its_line(stmt, call)
    for following in rest:
        if _has_backward(ctx, following):
            return later, False
        later.append(following)
    return later, True


def _calls_of(ctx: Context, scope: Scope) -> list[CallSite]:
    """The calls of this file that run the function `scope`."""
    return [site for site in ctx.index.calls if callee_scope(ctx.index, site) is scope]


def _stepped_after_every_call(ctx: Context, scope: Scope, optimizer: Wrapped) -> bool:
    """Every call of the function is followed by a step of the optimizer before the next backward
    (`backward_only(); optimizer.step()`); False when no call of it is found."""
    calls = _calls_of(ctx, scope)
    for site in calls:
        block, position = block_position(ctx, site.place.stmt)
        if block is None:
            return False
        later, _ = _until_next_backward(ctx, site.place.stmt, site.node, block[position + 1:])
        if not any(_steps(stmt, optimizer) for stmt in later):
            return False
    return bool(calls)


def _spelled_in(ctx: Context, optimizer: Wrapped, scope: Scope) -> str | None:
    """How the function `scope` reaches the optimizer: as it is stepped there, as the name it is
    built to at module level (a name the function does not bind itself), as `self.x` in another
    method of the class that steps it, or as the parameter every call hands it in."""
    for stepped in optimizer.stepped:
        if stepped.step.place.scope is scope:
            return stepped.spelling
    for spelling in sorted(optimizer.spellings):
        if _same_object_in(ctx, optimizer, spelling, scope):
            return spelling
    passed = [{param for param, value in _arguments(site, scope).items() if spell(value) in optimizer.spellings}
              for site in _calls_of(ctx, scope)]
    common = set.intersection(*passed) if passed else set()
    return min(common) if common else None


def _same_object_in(ctx: Context, optimizer: Wrapped, spelling: str, scope: Scope) -> bool:
    root = spelling.split(".")[0]
    if root == "self":
        return scope.class_name is not None and any(
            s.spelling == spelling and s.step.place.scope.class_name == scope.class_name for s in optimizer.stepped)
    site = ctx.index.call_site(optimizer.built) if isinstance(optimizer.built, cst.Call) else None
    if site is None:
        return False
    home, built = site.place.scope, {id(optimizer.built), *(id(a) for a in optimizer.alternatives)}
    if not any(id(b.value) in built for b in ctx.index.bindings_of_in(spelling, home)):
        return False
    if scope is home:
        return True
    if root in scope.params or ctx.index.bindings_of_in(root, scope):
        return False
    return home.is_module


def _arguments(site: CallSite, scope: Scope) -> dict[str, cst.BaseExpression]:
    """The function's parameters and what the call hands them (`self` skipped for a method)."""
    params = scope.params[1:] if scope.class_name and scope.params[:1] == ("self",) else scope.params
    given: dict[str, cst.BaseExpression] = {}
    positional = [arg for arg in site.node.args if arg.keyword is None]
    if any(arg.star for arg in site.node.args):
        return given
    for param, arg in zip(params, positional):
        given[param] = arg.value
    for arg in site.node.args:
        if arg.keyword is not None:
            given[arg.keyword.value] = arg.value
    return given


def _arguments_of(ctx: Context, scope: Scope, reached: set[str]) -> set[str]:
    """The names the calls of the function hand to the parameters `reached` holds (`train_g(netG,
    netD)` for `def train_g(G, D)`)."""
    found: set[str] = set()
    if scope.is_module or not set(scope.params) & reached:
        return found
    for site in _calls_of(ctx, scope):
        for param, value in _arguments(site, scope).items():
            if param in reached:
                found |= _undetached_names(value)
    return found


def _refuse_unnamed(ctx: Context, backward: CallSite, optimizer: Wrapped, models: list[str]) -> None:
    """MIG403: the backward reaches another function's optimizer, which it cannot name."""
    name = sorted(s.spelling for s in optimizer.stepped)[0]
    stepping = sorted({s.step.place.scope.name for s in optimizer.stepped})
    ctx.report("MIG403", f"this backward in `{backward.place.scope.name}` runs through `{', '.join(models)}`, whose "
               f"optimizer `{name}` is stepped in `{'`, `'.join(stepping)}` and not before the next backward: "
               "hvd.DistributedOptimizer starts its all-reduces on this backward too and stops the run on the next one "
               "(\"Gradients were computed more than backward_passes_per_step times\"); this function cannot reach "
               f"`{name}` to call its synchronize() here: hand it in and call `{name}.synchronize()` after this "
               "backward, or detach what it reads of the other model; the file is left unchanged", backward.node)


def _after_on_its_line(stmt: cst.BaseStatement, call: cst.Call) -> list[cst.CSTNode]:
    """The small statements after the one holding `call` on its line (`loss.backward(); opt.step()`)."""
    if not isinstance(stmt, cst.SimpleStatementLine):
        return []
    holding = next((i for i, small in enumerate(stmt.body) if any(c is call for c in calls_in(small))), len(stmt.body))
    return list(stmt.body[holding + 1:])


def _steps(stmt: cst.CSTNode, optimizer: Wrapped) -> bool:
    return any(any(s.step.node is call for s in optimizer.stepped) for call in calls_in(stmt))


def _reached_names(ctx: Context, backward: CallSite) -> set[str] | None:
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
            if binding.value is not None:
                pending |= _undetached_names(binding.value)
    return reached


def _undetached_names(value: cst.CSTNode) -> set[str]:
    if isinstance(value, cst.Call) and isinstance(value.func, cst.Attribute) and value.func.attr.value in ("detach", "item"):
        return set()
    if isinstance(value, cst.Attribute) and value.attr.value == "data":
        return set()  # `fake.data`: the tensor without its graph
    spelled = spell(value) if isinstance(value, (cst.Name, cst.Attribute)) else None
    if spelled:
        return read_names(value) | {spelled}
    if isinstance(value, cst.Attribute):
        return _undetached_names(value.value)  # `D(fake.detach()).mean`: what the call reads
    found: set[str] = set()
    for child in value.children:
        if isinstance(child, cst.CSTNode):
            found |= _undetached_names(child)
    return found


def in_header(ctx: Context, call: CallSite) -> bool:
    """A call in an `if`/`while` test: no statement can follow it alone."""
    return not isinstance(call.place.stmt, cst.SimpleStatementLine)
