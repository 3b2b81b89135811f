"""`--scale-lr` (Horovod: by default): the optimizer's learning rate is multiplied by the world size (the linear
scaling rule), for scripts whose global batch grows with the number of processes.

Parameter groups: each group written as a dict in the call has its own 'lr' scaled, and lr= only when
some group has no 'lr' of its own (otherwise no group reads it); groups built elsewhere (a list
variable, a comprehension, a function of the script) are scaled by a loop over `param_groups` right
after the optimizer is built, before a scheduler reads them, or reported for scaling by hand; a list
of groups written out once, none with an 'lr', only has lr= scaled. A OneCycleLR/CyclicLR rate
written as a list (one per group) is scaled entry by entry. A rate the script writes into the groups
itself (`optimizer.param_groups[0]["lr"] = lr * decay`, or `group["lr"] = lr` in a loop over
`optimizer.param_groups`) would replace the scaled one: it is scaled too. MIG004 says what was scaled.
"""

from __future__ import annotations

from dataclasses import dataclass

import libcst as cst

from migrate.analysis.index import CallSite, descendants, free_name, spell
from migrate.analysis.syntax import argument
from migrate.analysis.training import callee_scope
from migrate.rewrite import with_fields
from migrate.steps.base import Context, expression, statements
from migrate.target_options import ProcessOptions

# findings that say the training data is not split across the ranks
UNSHARDED = ("MIG101", "MIG102", "MIG111")
# expressions that `* world` would bind into instead of scaling whole
LOOSER_THAN_TIMES = (cst.BooleanOperation, cst.Comparison, cst.IfExp, cst.Lambda, cst.NamedExpr)
AS_TIGHT_AS_TIMES = (cst.Multiply, cst.Divide, cst.FloorDivide, cst.Modulo, cst.MatrixMultiply, cst.Power)
# torch 2.13's default learning rates (inspect.signature of each optimizer), written out when scaled
DEFAULT_LR = {f"torch.optim.{name}": value for name, value in {
    "Adam": "1e-3", "AdamW": "1e-3", "SGD": "1e-3", "RMSprop": "1e-2", "Adagrad": "1e-2", "Adadelta": "1.0",
    "Adamax": "2e-3", "NAdam": "2e-3", "RAdam": "1e-3", "ASGD": "1e-2", "Rprop": "1e-2", "SparseAdam": "1e-3",
    "LBFGS": "1"}.items()}


def scale_lr(ctx: Context) -> None:
    """`--scale-lr` (off unless asked)."""
    if ProcessOptions.of(ctx.options).scale_lr:
        report_rate_writes(ctx, scale_learning_rates(ctx))


def scale_lr_unless_declined(ctx: Context) -> None:
    """Horovod's recipe: on unless `--no-scale-lr`, or `--keep-global-batch` keeps the global batch."""
    options = ProcessOptions.of(ctx.options)
    unsharded = next((f for f in ctx.findings if f.code in UNSHARDED), None)
    if options.scale_lr is None and not options.keep_global_batch and unsharded is not None and ctx.sites.optimizers:
        ctx.report("MIG004", f"the learning rate is kept: the conversion did not shard the training data (line "
                   f"{unsharded.line}, {unsharded.code}), so it cannot tell whether the ranks' batches add up to a "
                   "larger global batch; once each rank reads its own share, multiply it by hvd.size() (Horovod's "
                   "recipe) or convert again with --scale-lr", ctx.sites.optimizers[0].node)
        return
    if options.scale_lr or (options.scale_lr is None and not options.keep_global_batch):
        scaled = scale_learning_rates(ctx)
        # one finding for the first optimizer, and one for each other whose groups were scaled
        for each in [s for n, s in enumerate(scaled) if n == 0 or s.what != PLAIN]:
            ctx.report("MIG004", f"{each.what} multiplied by {ctx.world_size()}{each.detail} (Horovod's recipe: each rank "
                       "keeps its batch, so the global batch grows with the ranks); --no-scale-lr keeps the script's",
                       each.node)
        report_rate_writes(ctx, scaled)


PLAIN = "the learning rate is"


@dataclass(frozen=True)
class Scaled:
    """One optimizer's scaled rates, as MIG004 words them: `{what} multiplied by <world>{detail}`."""

    node: cst.Call
    what: str = PLAIN
    detail: str = ""


@dataclass(frozen=True)
class Groups:
    """The parameter groups an optimizer call is given: `written` (the dicts of a list written in the
    call, each with its 'lr' entry or None), or built elsewhere (`written` None: the code that holds them)."""

    code: str
    written: tuple[cst.DictElement | None, ...] | None


# schedulers that set the lr from their own arguments: (keyword, position) of each rate they set
SCHEDULER_RATES = {
    "torch.optim.lr_scheduler.OneCycleLR": (("max_lr", 1),),
    "torch.optim.lr_scheduler.CyclicLR": (("base_lr", 1), ("max_lr", 2)),
}


def scale_learning_rates(ctx: Context) -> list[Scaled]:
    """Every optimizer's lr, or its parameter groups' (and a OneCycleLR/CyclicLR's rates, which
    replace them) times the world size; what was scaled in each optimizer, in order."""
    world = ctx.world_size()
    scaled = []
    for call in ctx.sites.optimizers:
        if (ctx.index.qualify(call.node.func) or "").startswith("torch.optim.swa_utils"):
            continue  # AveragedModel / SWALR: not an optimizer
        done = _scale_optimizer(ctx, call, world)
        if done is not None:
            scaled.append(done)
    for name, rates in SCHEDULER_RATES.items():
        for call in ctx.index.calls_named(name):
            for keyword, position in rates:
                rate = argument(call.node, keyword, position)
                if rate is not None:
                    _scale_rates(ctx, rate, world)
    if scaled:
        for write in rate_writes(ctx):
            _scale_written_rate(ctx, write, world)
    return scaled


def report_rate_writes(ctx: Context, scaled: list[Scaled]) -> None:
    """MIG004 at the first rate the script writes into the groups itself, naming each such line."""
    writes = rate_writes(ctx) if scaled else []
    if writes:
        lines = ", ".join(str(ctx.position(w)[0]) for w in writes)
        ctx.report("MIG004", f"the rate the script writes into the parameter groups itself (line{'s' if len(writes) > 1 else ''} "
                   f"{lines}) is multiplied by {ctx.world_size()} too: it replaces the optimizer's scaled one", writes[0])


def rate_writes(ctx: Context) -> list[cst.Assign]:
    """`x.param_groups[i]["lr"] = value`, and `group["lr"] = value` in `for group in x.param_groups:`,
    in the order written. Not one that starts from a rate already scaled: an `*=`, or a value that
    reads the groups' rates or a scheduler's (`group["lr"] * 0.1`, `scheduler.get_last_lr()[0]`),
    itself or through a name bound from them."""
    module = ctx.index.module
    loops = [n for n in descendants(module) if isinstance(n, cst.For) and _over_param_groups(n.iter)]
    group_names = {n.target.value for n in loops if isinstance(n.target, cst.Name)}
    assigns = [n for n in descendants(module) if isinstance(n, cst.Assign) and len(n.targets) == 1]
    derived = {spell(a.targets[0].target) for a in assigns if _reads_a_rate(a.value, group_names)}
    reads = group_names | {name for name in derived if name is not None}
    writes = [n for n in assigns if _writes_rate(n.targets[0].target, group_names) and not _reads_a_rate(n.value, reads)]
    return sorted(writes, key=lambda w: ctx.position(w))


# words of a value that starts from a rate the optimizer or a scheduler already holds
RATE_READS = ("param_groups", "get_lr", "get_last_lr", "_last_lr", "initial_lr")


def _reads_a_rate(value: cst.BaseExpression, names: set[str]) -> bool:
    """Whether `value` reads the optimizer's groups or a scheduler's rates, or one of `names` (a
    loop's group, a name bound from such a read)."""
    for node in descendants(value):
        if isinstance(node, cst.Name) and (node.value in RATE_READS or node.value in names):
            return True
        if isinstance(node, cst.Attribute) and node.attr.value in RATE_READS:
            return True
    return False


def _writes_rate(target: cst.BaseExpression, group_names: set[str]) -> bool:
    """`<group>["lr"]`, where the group is `x.param_groups[i]` or a loop's name over them."""
    if not isinstance(target, cst.Subscript) or len(target.slice) != 1:
        return False
    key = target.slice[0].slice
    if not (isinstance(key, cst.Index) and isinstance(key.value, cst.SimpleString) and key.value.evaluated_value == "lr"):
        return False
    group = target.value
    if isinstance(group, cst.Name):
        return group.value in group_names
    return isinstance(group, cst.Subscript) and _over_param_groups(group.value)


def _over_param_groups(value: cst.BaseExpression) -> bool:
    return isinstance(value, cst.Attribute) and value.attr.value == "param_groups"


def _scale_written_rate(ctx: Context, write: cst.Assign, world: str) -> None:
    value = ctx.code(write.value)
    if _binds_looser_than_times(write.value):
        value = f"({value})"
    ctx.plan.replace(write, with_fields(value=expression(f"{value} * {world}")))


def _scale_optimizer(ctx: Context, call: CallSite, world: str) -> Scaled | None:
    """One optimizer's rates scaled; None when nothing was (a MIG004 then says what to do by hand)."""
    groups = _groups(ctx, call)
    if groups is not None and groups.written is None:
        return _scale_groups_after(ctx, call, groups, world)
    entries = [e for e in groups.written or () if e is not None] if groups is not None else []
    for entry in entries:
        _scale(ctx, entry, world)
    unset = len(groups.written or ()) - len(entries) if groups is not None else 0
    if entries and not unset:
        kept = "; lr= is kept: every group sets its own, so no group reads it" if argument(call.node, "lr", 1) else ""
        return Scaled(call.node, f"the 'lr' of each of the {len(entries)} parameter groups is", kept)
    if not _scale_default_rate(ctx, call, world):
        return Scaled(call.node, f"the 'lr' of {_setting(len(entries))} is") if entries else None
    if entries:
        return Scaled(call.node, f"the 'lr' of {_setting(len(entries))}, and lr= (the rate of the "
                      f"{_groups_word(unset)} without one), are")
    return Scaled(call.node)


def _setting(count: int) -> str:
    """`the 2 parameter groups that set one`."""
    return f"the {_groups_word(count)} that {'sets' if count == 1 else 'set'} one"


def _groups_word(count: int) -> str:
    return f"{count} parameter group{'s' if count != 1 else ''}"


def _scale_default_rate(ctx: Context, call: CallSite, world: str) -> bool:
    """lr=, or torch's default rate written out, times the world size; False (with a MIG004) when
    the default is not known here."""
    lr = argument(call.node, "lr", 1)
    default = DEFAULT_LR.get(ctx.index.qualify(call.node.func) or "")
    if lr is None and (default is None or not _assigned_whole(call)):
        ctx.report("MIG004", f"--scale-lr: this optimizer uses its default learning rate; pass lr=<default> * {world} by hand", call.node)
        return False
    if lr is None:
        _scale_default(ctx, call.node, default or "", world)
    else:
        _scale(ctx, lr, world)
    return True


def _groups(ctx: Context, call: CallSite) -> Groups | None:
    """The parameter groups the call is given; None for plain parameters (or what cannot be told
    from plain parameters: the default rate is scaled then, as for a single group)."""
    params = argument(call.node, "params", 0)
    if params is None:
        return None
    value = params.value
    code = ctx.code(value)
    if isinstance(value, (cst.List, cst.Tuple)) and any(isinstance(e.value, cst.Dict) or isinstance(e, cst.StarredElement)
                                                          for e in value.elements):
        dicts = [e.value for e in value.elements if isinstance(e, cst.Element) and isinstance(e.value, cst.Dict)]
        if len(dicts) < len(value.elements) or not all(_lr_is_known(group) for group in dicts):
            return Groups(code, None)  # `[*groups, {...}]`, a group that is not a dict, a `**` that may set 'lr'
        return Groups(code, tuple(_lr_entry(group) for group in dicts))
    parts = [e.value for e in value.elements] if isinstance(value, (cst.List, cst.Tuple)) else [value]
    sources = {id(part): _sources(ctx, part, call) for part in parts}
    if isinstance(value, cst.Name) and _rateless(sources[id(value)]):
        return None  # `groups = [{"params": ..., "weight_decay": 0.0}, ...]`: every group takes lr=
    if any(_holds_groups(part) or any(_holds_groups(source) for source in sources[id(part)]) for part in parts):
        return Groups(code, None)  # `groups`, `[groups[0], extra]`, `param_groups(model)`
    return None


def _rateless(sources: list[cst.CSTNode]) -> bool:
    """A name's one value is a list of groups written out (or one comprehension of a group), none
    of which sets or may set an 'lr' of its own."""
    if len(sources) != 1:
        return False
    value = sources[0]
    if isinstance(value, (cst.ListComp, cst.GeneratorExp)):
        groups: list[cst.CSTNode] = [value.elt]
    elif isinstance(value, (cst.List, cst.Tuple)):
        groups = [e.value if isinstance(e, cst.Element) else e for e in value.elements]
    else:
        return False
    return bool(groups) and all(isinstance(g, cst.Dict) and _lr_is_known(g) and _lr_entry(g) is None for g in groups)


def _lr_entry(group: cst.Dict) -> cst.DictElement | None:
    """A group's last 'lr' entry (the one Python keeps); None when it has none."""
    entries = [e for e in group.elements if isinstance(e, cst.DictElement) and _is_key(e, "lr")]
    return entries[-1] if entries else None


def _lr_is_known(group: cst.Dict) -> bool:
    """Whether no `**` splat comes after the group's last 'lr' entry (or, without one, at all)."""
    entry = _lr_entry(group)
    after = group.elements[list(group.elements).index(entry) + 1:] if entry is not None else group.elements
    return not any(isinstance(e, cst.StarredDictElement) for e in after)


def _is_key(element: cst.DictElement, key: str) -> bool:
    return isinstance(element.key, cst.SimpleString) and element.key.evaluated_value == key


def _holds_groups(node: cst.CSTNode) -> bool:
    """Whether a dict with a "params" key is written under `node`: a parameter group."""
    return any(isinstance(d, cst.Dict) and any(isinstance(e, cst.DictElement) and _is_key(e, "params") for e in d.elements)
               for d in descendants(node))


def _sources(ctx: Context, value: cst.BaseExpression, call: CallSite) -> list[cst.CSTNode]:
    """Where a params expression is made: a name's values and what is appended or added to it in
    the call's scope, or the body of the script's function that returns it."""
    index = ctx.index
    while isinstance(value, cst.Subscript):
        value = value.value  # `groups[0]`: made where `groups` is
    if isinstance(value, cst.Name):
        scope = call.place.scope
        bindings = index.bindings_of_in(value.value, scope) or index.module_bindings_of(value.value)
        found: list[cst.CSTNode] = [b.value for b in bindings if b.value is not None]
        found += [c.node for c in index.calls_from(scope) if (c.name or "").rpartition(".")[0] == value.value]
        found += [n.value for n in descendants(scope.node) if isinstance(n, cst.AugAssign) and spell(n.target) == value.value]
        return found
    site = index.call_site(value) if isinstance(value, cst.Call) else None
    callee = callee_scope(index, site) if site is not None else None
    return [callee.node] if callee is not None else []


def _scale_groups_after(ctx: Context, call: CallSite, groups: Groups, world: str) -> Scaled | None:
    """`for group in optimizer.param_groups: group["lr"] *= world` right after the optimizer is
    built (before a scheduler reads the rates); a MIG004 to do it by hand where it is not assigned."""
    stmt = call.place.stmt
    target = spell(stmt.body[0].targets[0].target) if _assigned_whole(call) and isinstance(stmt, cst.SimpleStatementLine) \
        and isinstance(stmt.body[0], cst.Assign) and len(stmt.body[0].targets) == 1 else None
    if target is None:
        ctx.report("MIG004", f"--scale-lr: the parameter groups (`{groups.code}`) are built elsewhere and this optimizer "
                   "is not assigned to a name here, so their rates are kept; multiply each group's 'lr' by "
                   f"{world} by hand once it is built (`for group in <optimizer>.param_groups: group[\"lr\"] *= {world}`)",
                   call.node)
        return None
    group = free_name("group", ctx.index.names_under(call.place.scope.node))
    ctx.plan.insert_after(stmt, statements(f"for {group} in {target}.param_groups:  # each group's rate, scaled\n"
                                           f"    {group}[\"lr\"] *= {world}\n"))
    return Scaled(call.node, "every parameter group's 'lr' is",
                  f" right after `{target}` is built, since its groups (`{groups.code}`) are built elsewhere")


def _scale_rates(ctx: Context, arg: cst.Arg, world: str) -> None:
    """A scheduler's rate, or each of a list written in the call (one per parameter group)."""
    if isinstance(arg.value, (cst.List, cst.Tuple)):
        for element in arg.value.elements:
            if isinstance(element, cst.Element):
                _scale(ctx, element, world)
        return
    _scale(ctx, arg, world)


def _scale(ctx: Context, arg: cst.Arg | cst.DictElement | cst.Element, world: str) -> None:
    value = ctx.code(arg.value)
    if _binds_looser_than_times(arg.value):
        value = f"({value})"  # `a + b` scales as a whole, `x if c else y` in both branches
    scaled = expression(f"{value} * {world}")
    ctx.plan.replace(arg, with_fields(value=scaled))


def _assigned_whole(call: CallSite) -> bool:
    """`optimizer = Adam(params)`: the call is the whole value of its statement, so no other step
    rewrites it in place (a call inside `Wrapper(Adam(...))` may be, and a wrapper may set the rate)."""
    stmt = call.place.stmt
    return (isinstance(stmt, cst.SimpleStatementLine) and len(stmt.body) == 1
            and isinstance(stmt.body[0], (cst.Assign, cst.AnnAssign)) and stmt.body[0].value is call.node)


def _scale_default(ctx: Context, call: cst.Call, default: str, world: str) -> None:
    """`Adam(params)` -> `Adam(params, lr=1e-3 * world)`: torch's default rate, written out and scaled."""
    added = cst.Arg(keyword=cst.Name("lr"), value=expression(f"{default} * {world}"),
                    equal=cst.AssignEqual(whitespace_before=cst.SimpleWhitespace(""), whitespace_after=cst.SimpleWhitespace("")))

    def with_lr(updated: cst.CSTNode) -> cst.CSTNode:
        assert isinstance(updated, cst.Call)
        args = list(updated.args)
        if args and args[-1].comma is cst.MaybeSentinel.DEFAULT:
            args[-1] = args[-1].with_changes(comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" ")))
        return updated.with_changes(args=[*args, added])

    ctx.plan.replace(call, with_lr)


def _binds_looser_than_times(value: cst.BaseExpression) -> bool:
    if value.lpar:
        return False
    if isinstance(value, cst.BinaryOperation):
        return not isinstance(value.operator, AS_TIGHT_AS_TIMES)
    return isinstance(value, LOOSER_THAN_TIMES)
