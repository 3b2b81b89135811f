"""Wraps each trained model once, after it is placed and its weights loaded, before
torch.compile and before training (DDP goes after the last statement before training that
still casts, moves or freezes it, after a compile too: steps.ddp_models); an existing
nn.DataParallel is replaced in place, and a load the script made into it that now runs before the
wrap takes `module.` off the keys. Before the new wrap, `model.module` loses `.module` in every
branch (the model there is the module itself), and a helper handed the removed wrapper alone
(`patch_replication_callback(model)`, in this file or a module of the script's folder) goes with
it when it is for nn.DataParallel only (named for it, asserting it, patching `.replicate`); one
that reads what only the wrapper has (`x.module`) leaves the file unchanged (MIG104).

After the wrap, the user's own module is reached through `.module`: state dicts (so
checkpoints keep plain keys and load into the original script), attributes such as
`model.num_classes`, custom methods, items of a model that is a container (`model[0]`,
`model[-1].weight` of an nn.Sequential: the wrapper cannot be indexed), copies (`copy.deepcopy(model)`: an evaluation or EMA
copy is a copy of the module, not a second wrapper), and the model handed to a function of
another module of the script's folder that reads its attributes (`evaluate(model, loader)` reading
`net.n_classes`; that module is not edited; inside the training loop this is reported instead). Custom methods called while training bypass the
wrapper's gradient hooks and are reported.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

import libcst as cst

from migrate.analysis.index import AttributeUse, CallSite, child_nodes, descendants, spell
from migrate.analysis.models import (
    SELF_RETURNING,
    ForeignReads,
    aliases,
    foreign_callees,
    foreign_reads,
    is_after,
    parameters_only_when,
    unwrapped_too,
)
from migrate.analysis.sites import ModelSite
from migrate.analysis.syntax import calls_in
from migrate.rewrite import small_statement_holding, with_fields
from migrate.steps.base import WRAPPER_SAFE, Context, Wrapper, expression, statements  # Wrapper: for its importers
from migrate.target_options import DdpOptions, keeps_global_batch

STATE_DICT = frozenset({"state_dict", "load_state_dict"})


def ddp_wrap_code(ctx: Context, site: ModelSite) -> str:
    """`model = DDP(model)`: no device_ids, which torch allows for a module on one device (the
    script moves its inputs itself) and requires for a CPU module (`--device cpu` on a GPU host)."""
    ddp = ctx.imported("torch.nn.parallel", "DistributedDataParallel", "DDP")
    name = site.spelling
    unused = UnusedParameters in ctx.records and id(site) in ctx.recorded(UnusedParameters).sites
    code = f"{name} = {ddp}({name}{', find_unused_parameters=True' if unused else ''})\n"
    sometimes = parameters_only_when(ctx.index, site, os.path.dirname(ctx.path), ctx.read_module)
    if sometimes is not None:  # DDP raises for a module without a parameter that requires a gradient
        code = (f"if any(p.requires_grad for p in {name}.parameters()):  # {sometimes.cls} makes its parameters only "
                f"when `{sometimes.condition}`; DDP refuses a module without any\n    " + code)
    if isinstance(ctx.options, DdpOptions) and ctx.options.sync_batchnorm:
        code = (
            f"if next({name}.parameters()).is_cuda:  # SyncBatchNorm needs CUDA\n"
            f"    {name} = {ctx.torch}.nn.SyncBatchNorm.convert_sync_batchnorm({name})\n" + code
        )
    return code


@dataclass
class UnusedParameters:
    """The models whose DDP wrap looks for parameters that get no gradient (ids of their sites),
    as steps.ddp_models decides."""

    sites: set[int] = field(default_factory=set)


DDP_WRAPPER = Wrapper(code=ddp_wrap_code)


def wrap_models(ctx: Context) -> None:
    """Insert the target's wrapper for every model site and send later uses through `.module`."""
    wrapper = ctx.wrapper
    assert wrapper is not None and wrapper.code is not None, "wrap_models runs for a target without a wrap statement"
    if not ctx.sites.models:
        report_unwrapped_model(ctx)
        ctx.refused = True
        return
    for site in ctx.sites.models:
        new = statements(wrapper.code(ctx, site))
        remove_data_parallel(ctx, site, load_former_data_parallel_keys(ctx, site))
        if site.wrap_before is not None:
            ctx.plan.insert_before(site.wrap_before, new)
        elif site.wrap_after is not None:
            ctx.plan.insert_after(site.wrap_after, new)
        if isinstance(ctx.options, DdpOptions) and ctx.options.sync_batchnorm:
            ctx.report("MIG107", "SyncBatchNorm conversion runs only when the model is on a GPU (it cannot run on the CPU)",
                       site.wrap_after or site.wrap_before)
        if not wrapper.through_module:
            if site.data_parallel:
                without_module(ctx, site)
            continue
        # replacing nn.DataParallel: its checkpoints already carry `module.`, and so do the wrapper's
        if site.data_parallel:
            unwrap_later_uses(ctx, site, wrapper.safe | STATE_DICT, route_saves=False)
        else:
            unwrap_later_uses(ctx, site, wrapper.safe)


def maybe_bare(ctx: Context, site: ModelSite) -> set[tuple[str, str]]:
    """The (name, function) pairs where the model may be the bare module after the wrap: reached
    as `getattr(x, "module", x)` there. Every alias of a model wrapped only when it has parameters
    (`parameters_only_when`); else those that other callers hand something else (`unwrapped_too`)."""
    if ctx.wrapper is DDP_WRAPPER and parameters_only_when(ctx.index, site, os.path.dirname(ctx.path), ctx.read_module):
        return aliases(ctx.index, site)
    return unwrapped_too(ctx.index, site)


def load_former_data_parallel_keys(ctx: Context, site: ModelSite) -> list[int]:
    """`model.load_state_dict(sd)` that now runs before the wrap, where the script loaded into its
    nn.DataParallel (keys `module.x`, as its own checkpoints have them): the bare module it now
    loads into has the keys without `module.`, so the prefix is taken off (a checkpoint without it
    loads as before). `model.module.load_state_dict(sd)` there loses `.module` (`_module_reads_before_wrap`)
    and takes the prefix off too, so either branch loads either script's checkpoints. Returns the
    lines of the loads changed."""
    if not site.data_parallel:
        return []
    lines: list[int] = []
    wrapped_at = min(ctx.position(stmt)[0] for stmt in site.data_parallel)
    names = aliases(ctx.index, site)
    for use in ctx.index.attributes:
        owner = use.owner.removesuffix(".module")
        if (not use.called or use.node.attr.value != "load_state_dict" or (owner, use.place.scope.name) not in names
                or is_after(ctx.index, use.place.stmt, site) or ctx.position(use.node)[0] <= wrapped_at):
            continue
        call = next((c for c in ctx.index.calls_under(use.place.stmt) if c.func is use.node), None)
        if call is not None and call.args:
            ctx.plan.replace(call, _without_module_keys)
            lines.append(ctx.position(call)[0])
    return lines


def _without_module_keys(updated: cst.CSTNode) -> cst.CSTNode:
    """`model.load_state_dict(sd)` -> `model.load_state_dict({key.removeprefix("module."): ... in sd.items()})`,
    from the call as other steps left it."""
    assert isinstance(updated, cst.Call)
    first = updated.args[0]
    state = cst.Module([]).code_for_node(first.value)
    stripped = expression(f'{{key.removeprefix("module."): value for key, value in {state}.items()}}')
    return updated.with_changes(args=[first.with_changes(value=stripped), *updated.args[1:]])


def without_module(ctx: Context, site: ModelSite) -> None:
    """`model.module.x` -> `model.x`: the wrapper that held the module (DataParallel, DDP) is gone,
    and the target keeps the user's class (fully_shard, Horovod)."""
    names = aliases(ctx.index, site)
    for use in ctx.index.attributes:
        if use.node.attr.value == "module" and (use.owner, use.place.scope.name) in names:
            ctx.plan.replace_with(use.node, use.node.value)


def report_unwrapped_model(ctx: Context) -> None:
    """MIG104, naming the method the model is driven through when that is the reason."""
    node = ctx.sites.backward_calls[0].node if ctx.sites.backward_calls else None
    owners = {
        spell(call.func.value)
        for optimizer in ctx.sites.optimizers
        for call in calls_in(optimizer.node)
        if isinstance(call.func, cst.Attribute) and call.func.attr.value in ("parameters", "named_parameters")
    }
    for use in ctx.index.attributes:
        if use.owner in owners and use.called and use.node.attr.value not in WRAPPER_SAFE and use.place.scope.name in ctx.sites.training_scopes:
            ctx.report("MIG104", f"`{use.owner}` is trained through `{use.owner}.{use.node.attr.value}(...)`, not its forward(): "
                       "a wrapper only sees forward(); route the training computation through forward(); "
                       "the file is left unchanged", use.node)
            return
    ctx.report("MIG104", "no model is called in the training loop that this file builds; the file is left unchanged", node)


def remove_data_parallel(ctx: Context, site: ModelSite, loads: list[int] | None = None) -> None:
    """Every existing `model = nn.DataParallel(model)` (and an `if` that only holds it) goes: a
    script that wraps on two paths (resume or not) keeps none around the distributed wrapper.
    `loads`: the lines of the loads that now take `module.` off the keys (MIG003 names them).
    A helper handed the removed wrapper goes with it, or the file is refused (`handed_wrapper`);
    `model.module` read before the new wrap, where it is now the module itself, loses `.module`."""
    handed = handed_wrapper(ctx, site)
    refused = next((each for each in handed if each.verdict != DROPPED), None)
    if refused is not None:
        _refuse_handed_wrapper(ctx, site, refused)
        return
    dropped = _drop_handed_wrapper(ctx, site, handed)
    reads = _module_reads_before_wrap(ctx, site)
    for stmt in site.data_parallel:
        if any(stmt is each for each in dropped):
            continue  # the `if` that held it is gone whole
        wrap = _data_parallel_call(ctx, stmt)
        inner = wrap.args[0].value if wrap is not None and wrap.args else None
        if wrap is not None and inner is not None and spell(inner) != site.spelling:
            ctx.plan.replace_with(wrap, inner)  # `model = DataParallel(Net())` keeps `model = Net()`
        else:
            _remove_wrap(ctx, stmt, wrap)
            _drop_emptied_else(ctx, stmt, site.data_parallel)
    # DataParallel split each batch across the GPUs; every process now gets a whole batch
    batch = ("; each process now takes a whole batch where DataParallel split one across the GPUs "
             "(--keep-global-batch keeps the global batch)" if not keeps_global_batch(ctx.options) else "")
    batch += _dropped_helpers_said(ctx, handed) + _module_reads_said(ctx, site, reads)
    if loads:
        before = "now runs before the wrap, into" if ctx.wrapper is None or ctx.wrapper.through_module else "now loads into"
        several = len(loads) > 1
        batch += (f"; the load{'s' if several else ''} on line{'s' if several else ''} {', '.join(map(str, loads))} "
                  f"{before.replace('runs', 'run').replace('loads into', 'load into') if several else before} "
                  f"the module itself, so {'they take' if several else 'it takes'} `module.` off the keys (checkpoints "
                  "of the original script and of the converted one both load)")
    if len(site.data_parallel) == 1:
        ctx.report("MIG003", f"nn.DataParallel on `{site.spelling}` removed, replaced by {_replaced_by(ctx)}{batch}",
                   site.data_parallel[0])
    elif site.data_parallel:
        lines = ", ".join(str(ctx.position(stmt)[0]) for stmt in site.data_parallel)
        ctx.report("MIG003", f"nn.DataParallel on `{site.spelling}` removed in {len(site.data_parallel)} places (lines {lines}), "
                   f"each replaced by {_replaced_by(ctx)}{batch}", site.data_parallel[0])


# -- what was done to the removed nn.DataParallel before the new wrap ---------------------------

# helpers named for nn.DataParallel (sync-BN's `patch_replication_callback`, `enable_data_parallel`)
DATA_PARALLEL_WORDS = ("replicat", "data_parallel", "dataparallel")
# attributes only nn.DataParallel has: a helper that reads them on what it is handed wants the wrapper
WRAPPER_ONLY = frozenset({"module", "device_ids", "output_device", "src_device_obj"})
DROPPED, NEEDS_WRAPPER = "dropped", "needs the wrapper"


@dataclass(frozen=True, eq=False)
class HandedWrapper:
    """`patch_replication_callback(model)` after `model = nn.DataParallel(model)` and before the new
    wrap: a statement calling a helper (of this file or of the script's folder) with the wrapper the
    conversion removes as its only argument; it now receives the bare module."""

    stmt: cst.BaseStatement  # the statement that is the call alone
    call: cst.Call
    verdict: str  # DROPPED: it is for nn.DataParallel only; NEEDS_WRAPPER: it reads what only the wrapper has
    why: str  # what shows it, for the finding


def handed_wrapper(ctx: Context, site: ModelSite) -> list[HandedWrapper]:
    """The helpers handed the removed wrapper that are about it: those named for it, those whose
    body asserts `isinstance(x, DataParallel)` or patches `x.replicate` (DROPPED), and those that
    read `x.module` or `x.device_ids` without testing for DataParallel (NEEDS_WRAPPER). A helper
    whose body is not found, or that works on any module, is kept (it took the wrapper as a module)."""
    if not site.data_parallel:
        return []
    found: list[HandedWrapper] = []
    wrapped_at = min(ctx.position(stmt)[0] for stmt in site.data_parallel)
    names = aliases(ctx.index, site)
    for call in ctx.index.calls:
        stmt = call.place.stmt
        if (not _alone_on_its_line(stmt, call.node) or len(call.node.args) != 1 or not isinstance(call.node.func, cst.Name)
                or call.node.args[0].keyword is not None or call.node.args[0].star
                or (ctx.index.qualify(call.node.args[0].value), call.place.scope.name) not in names
                or ctx.position(stmt)[0] <= wrapped_at or is_after(ctx.index, stmt, site)):
            continue
        judged = _judge_helper(ctx, call.node.func.value, call.name)
        if judged is not None:
            found.append(HandedWrapper(stmt, call.node, *judged))
    return found


def _alone_on_its_line(stmt: cst.BaseStatement, call: cst.Call) -> bool:
    """`helper(model)` is the whole statement: its value is not used."""
    return (isinstance(stmt, cst.SimpleStatementLine) and len(stmt.body) == 1 and isinstance(stmt.body[0], cst.Expr)
            and stmt.body[0].value is call)


def _judge_helper(ctx: Context, name: str, qualified: str | None) -> tuple[str, str] | None:
    """(verdict, why) for the helper `name`, or None when it is kept."""
    if any(word in name.lower() for word in DATA_PARALLEL_WORDS):
        return DROPPED, "its name says it is for nn.DataParallel"
    function = _helper_body(ctx, name, qualified)
    params = [*function.params.posonly_params, *function.params.params] if function is not None else []
    if function is None or not params:
        return None
    param = params[0].name.value
    nodes = list(descendants(function.body))
    for node in nodes:
        if isinstance(node, cst.Assert) and isinstance(node.test, cst.Call) and spell(node.test.func) == "isinstance" \
                and _names_data_parallel(node.test):
            return DROPPED, "its body asserts that it is handed an nn.DataParallel"
        if isinstance(node, cst.Attribute) and isinstance(node.value, cst.Name) and node.value.value == param \
                and node.attr.value == "replicate":
            return DROPPED, f"its body patches `{param}.replicate`, which only nn.DataParallel has"
    if _names_data_parallel(function.body):
        return None  # it tests for the wrapper itself, and takes the bare module too
    read = sorted({node.attr.value for node in nodes if isinstance(node, cst.Attribute) and isinstance(node.value, cst.Name)
                   and node.value.value == param and node.attr.value in WRAPPER_ONLY})
    if read:
        return NEEDS_WRAPPER, f"it reads {', '.join(f'`{param}.{attr}`' for attr in read)}, which only the wrapper has"
    return None


def _names_data_parallel(node: cst.CSTNode) -> bool:
    """Whether `node` names nn.DataParallel (`DataParallel`, `nn.DataParallel`), not DistributedDataParallel."""
    return any(isinstance(each, cst.Name) and each.value == "DataParallel" for each in descendants(node))


def _helper_body(ctx: Context, name: str, qualified: str | None) -> cst.FunctionDef | None:
    """The helper's definition: a function of this file, or of a module of the script's folder
    (`from modeling.replicate import patch` -> modeling/replicate.py or modeling/replicate/__init__.py)."""
    if name not in ctx.index.imports:
        scope = ctx.index.functions.get(name)
        node = scope.node if scope is not None else None
        return node if isinstance(node, cst.FunctionDef) else None
    module, _, function = (qualified or "").lstrip(".").rpartition(".")
    if not module:
        return None
    base = os.path.join(os.path.dirname(ctx.path), *module.split("."))
    for path in (base + ".py", os.path.join(base, "__init__.py")):
        text = ctx.read_module(path)
        if text is None:
            continue
        try:
            tree = cst.parse_module(text)
        except cst.ParserSyntaxError:
            return None
        return next((s for s in tree.body if isinstance(s, cst.FunctionDef) and s.name.value == function), None)
    return None


def _refuse_handed_wrapper(ctx: Context, site: ModelSite, handed: HandedWrapper) -> None:
    """MIG104 at the helper's call: it would receive the bare module where it wants the wrapper."""
    ctx.report("MIG104", f"`{ctx.code(handed.call)}` is handed the nn.DataParallel of `{site.spelling}` that the conversion "
               f"removes, and {handed.why}: it would receive the bare module (AttributeError); the file is left "
               f"unchanged: make the helper take the module itself (`getattr(x, \"module\", x)`), or drop the call "
               "with nn.DataParallel, then convert again", handed.call)
    ctx.refused = True


def _drop_handed_wrapper(ctx: Context, site: ModelSite, handed: list[HandedWrapper]) -> list[cst.BaseStatement]:
    """Each helper's call goes; an `if` left holding only them and the wrap goes whole (`if
    torch.cuda.device_count() > 1:`). Returns the nn.DataParallel statements so gone."""
    gone: list[cst.BaseStatement] = []
    for each in handed:
        ctx.plan.remove(each.stmt)
    removed = [*site.data_parallel, *(each.stmt for each in handed)]
    for stmt in site.data_parallel:
        parent = ctx.index.parent_of.get(stmt)
        if (isinstance(parent, cst.If) and parent.orelse is None and isinstance(parent.body, cst.IndentedBlock)
                and all(any(s is r for r in removed) for s in parent.body.body)
                and any(s is each.stmt for each in handed for s in parent.body.body)):
            ctx.plan.remove(parent)
            gone.append(stmt)
    return gone


def _module_reads_before_wrap(ctx: Context, site: ModelSite) -> list[int]:
    """`model.module.load_state_dict(sd)` after `model = nn.DataParallel(model)`, before the new
    wrap (in whichever branch): the model there is now the module itself, so `.module` goes.
    Returns the lines changed."""
    if not site.data_parallel:
        return []
    wrapped_at = min(ctx.position(stmt)[0] for stmt in site.data_parallel)
    names = aliases(ctx.index, site)
    lines: list[int] = []
    for use in ctx.index.attributes:
        if (use.node.attr.value != "module" or (use.owner, use.place.scope.name) not in names
                or ctx.position(use.node)[0] <= wrapped_at or is_after(ctx.index, use.place.stmt, site)):
            continue
        ctx.plan.replace_with(use.node, use.node.value)
        lines.append(ctx.position(use.node)[0])
    return sorted(set(lines))


def _dropped_helpers_said(ctx: Context, handed: list[HandedWrapper]) -> str:
    """MIG003's words for each helper call dropped with the wrap."""
    return "".join(f"; `{ctx.code(each.call)}` (line {ctx.position(each.call)[0]}) goes with it: {each.why}, and it "
                   "would now receive the bare module" for each in handed)


def _module_reads_said(ctx: Context, site: ModelSite, lines: list[int]) -> str:
    """MIG003's words for the `.module` reads dropped before the new wrap."""
    if not lines:
        return ""
    several = len(lines) > 1
    return (f"; `{site.spelling}.module` on line{'s' if several else ''} {', '.join(map(str, lines))} read{'' if several else 's'} "
            f"the model before the new wrap, where `{site.spelling}` is now the module itself: `.module` dropped there")


def _replaced_by(ctx: Context) -> str:
    """What takes DataParallel's place, in the target's words (Runtime.replaces_data_parallel)."""
    return ctx.runtime.replaces_data_parallel if ctx.runtime is not None else "the distributed wrapper"


def _remove_wrap(ctx: Context, stmt: cst.BaseStatement, wrap: cst.Call | None) -> None:
    """`model = nn.DataParallel(model)` goes, and nothing else on its line; `if n_gpu > 1: model =
    nn.DataParallel(model)` goes whole."""
    holder, _small = small_statement_holding(stmt, wrap) if wrap is not None else (None, None)
    alone = isinstance(holder, cst.SimpleStatementSuite) and len(holder.body) == 1
    if holder is None or alone and isinstance(stmt, cst.If) and stmt.orelse is None:
        ctx.plan.remove(stmt)
    else:
        assert wrap is not None  # the holder was found from it
        ctx.plan.remove_part(stmt, wrap)


def _drop_emptied_else(ctx: Context, stmt: cst.BaseStatement, removed: list[cst.BaseStatement]) -> None:
    """`else: model = nn.DataParallel(model)` left with nothing goes whole, not as `else: pass`."""
    parent = ctx.index.parent_of.get(stmt)
    orelse = parent.orelse if isinstance(parent, cst.If) else None
    if not isinstance(orelse, cst.Else) or not isinstance(orelse.body, cst.IndentedBlock):
        return
    if not any(s is stmt for s in orelse.body.body) or not all(any(s is r for r in removed) for s in orelse.body.body):
        return
    if orelse.body.body[0] is stmt:  # once per `else`
        assert parent is not None  # the `if` that holds the `else`
        ctx.plan.replace(parent, lambda updated: updated.with_changes(orelse=None))


def _data_parallel_call(ctx: Context, stmt: cst.BaseStatement) -> cst.Call | None:
    for call in calls_in(stmt):
        if (ctx.index.qualify(call.func) or "").endswith("DataParallel"):
            return call
    return None


def unwrap_later_uses(ctx: Context, site: ModelSite, safe: frozenset[str] = WRAPPER_SAFE, route_saves: bool = True) -> None:
    """Uses of the model after the wrap that the wrapper does not answer go through `.module`."""
    index = ctx.index
    names = aliases(index, site)
    mixed = maybe_bare(ctx, site)
    for use in index.attributes:
        if (use.owner, use.place.scope.name) not in names or not is_after(index, use.place.stmt, site):
            continue
        if use.node.attr.value in safe:
            continue
        _through_module(ctx, use, maybe_unwrapped=(use.owner, use.place.scope.name) in mixed)
    _subscripts_through_module(ctx, site, names)
    _copies_through_module(ctx, site, names)
    _helpers_through_module(ctx, site, names, safe)
    if not route_saves:
        _say_prefix_kept(ctx, site, names)
        return
    for call in index.calls_named("torch.save"):
        if not call.node.args or not is_after(index, call.place.stmt, site):
            continue
        for saved in saved_objects(call.node.args[0].value):  # `[model, criterion, optimizer]` pickles each
            spelled = index.qualify(saved)
            place = (spelled, call.place.scope.name)
            if spelled and place in names:
                code = ctx.code(saved)
                ctx.plan.replace_with(saved, expression(f'getattr({code}, "module", {code})' if place in mixed else f"{spelled}.module"))


PREFIX_KEPT_NOTE = "# keys keep the module. prefix of nn.DataParallel's checkpoints"


def _say_prefix_kept(ctx: Context, site: ModelSite, names: set[tuple[str, str]]) -> None:
    """A save after the wrap of the model the script had in nn.DataParallel keeps the wrapper's
    `module.` keys on purpose (its own checkpoints have them): the line says so, so a reader (and
    `migrate check`'s DC602) knows it is meant."""
    index = ctx.index
    for call in index.calls_named("torch.save"):
        stmt = call.place.stmt
        if not isinstance(stmt, cst.SimpleStatementLine) or stmt.trailing_whitespace.comment is not None:
            continue
        if not is_after(index, stmt, site) or not any((spell(node.value), call.place.scope.name) in names
                                                      for node in descendants(call.node) if isinstance(node, cst.Attribute)
                                                      and node.attr.value == "state_dict"):
            continue
        comment = cst.TrailingWhitespace(whitespace=cst.SimpleWhitespace("  "), comment=cst.Comment(PREFIX_KEPT_NOTE),
                                         newline=stmt.trailing_whitespace.newline)
        ctx.plan.replace(stmt, with_fields(trailing_whitespace=comment))


def _subscripts_through_module(ctx: Context, site: ModelSite, names: set[tuple[str, str]]) -> None:
    """`model[0]`, `model[-1].weight`, `model["head"]` after the wrap (an nn.Sequential, ModuleList or
    ModuleDict model): the wrapper is not indexable (TypeError), so they index `model.module`."""
    index = ctx.index
    mixed = maybe_bare(ctx, site)
    for stmt, scope in index.scope_of.items():
        for node in _own_nodes(stmt):
            if not isinstance(node, cst.Subscript):
                continue
            place = (spell(node.value), scope.name)
            if place not in names or not is_after(index, stmt, site):
                continue
            code = ctx.code(node.value)
            reached = f'getattr({code}, "module", {code})' if place in mixed else f"{code}.module"
            ctx.plan.replace_with(node.value, expression(reached))


def _own_nodes(stmt: cst.BaseStatement) -> list[cst.CSTNode]:
    """The nodes of `stmt` itself: a compound statement's header and one-line body, not the
    statements of its indented blocks (each is a statement of its own)."""
    found: list[cst.CSTNode] = []
    pending: list[cst.CSTNode] = [stmt]
    while pending:
        node = pending.pop()
        found.append(node)
        pending.extend(child for child in child_nodes(node)
                       if not isinstance(child, (cst.IndentedBlock, cst.BaseCompoundStatement)))
    return found


def _copies_through_module(ctx: Context, site: ModelSite, names: set[tuple[str, str]]) -> None:
    """`eval_model = copy.deepcopy(model)` after the wrap copies the user's module, not the wrapper:
    a copy of the wrapper would be a second wrapped model (a DDP copy shares the process group and
    its `state_dict()` keys carry `module.`, so loading the trained weights into it fails)."""
    index = ctx.index
    mixed = maybe_bare(ctx, site)
    for call in index.calls_named("copy.deepcopy"):
        first = call.node.args[0].value if call.node.args else None
        spelled = index.qualify(first) if first is not None else None
        place = (spelled, call.place.scope.name)
        if first is not None and spelled and place in names and is_after(index, call.place.stmt, site):
            code = ctx.code(first)
            reached = f'getattr({code}, "module", {code})' if place in mixed else f"{code}.module"
            ctx.plan.replace_with(first, expression(reached))


def _helpers_through_module(ctx: Context, site: ModelSite, names: set[tuple[str, str]], safe: frozenset[str]) -> None:
    """`evaluate(model, loader)`, a function of another module of the script's folder (or a method
    of an instance of one of its classes: `ema.step_ema(ema_model, model)`) that reads attributes
    the wrapper does not answer (`net.n_classes`: AttributeError through DDP; `model.state_dict()`:
    keys with `module.`): that module is not edited, so the call hands it `model.module`; inside the
    training loop, a function that also calls the model would then run the forward past the wrapper,
    so there MIG105 names the function and what it reads."""
    index = ctx.index
    folder = os.path.dirname(ctx.path)
    mixed = maybe_bare(ctx, site)
    step_loops = {loop.node for loop in ctx.sites.step_loops}
    for call in index.calls:
        callees = foreign_callees(index, call)
        if not callees:
            continue
        for position, arg in enumerate(call.node.args):
            spelled = index.qualify(arg.value)
            place = (spelled, call.place.scope.name)
            if arg.star or not spelled or place not in names or not is_after(index, call.place.stmt, site):
                continue
            keyword = arg.keyword.value if arg.keyword is not None else None
            found = (foreign_reads(folder, callee, None if keyword else position, keyword, safe, ctx.read_module)
                     for callee in callees)
            reads = next((each for each in found if each is not None), None)
            if reads is None:
                continue
            if reads.forward and step_loops.intersection(call.place.loops) and not _only_shown(ctx, call):
                _report_foreign_reads(ctx, call.node, spelled, reads)
                continue
            code = ctx.code(arg.value)
            reached = f'getattr({code}, "module", {code})' if place in mixed else f"{code}.module"
            ctx.plan.replace_with(arg.value, expression(reached))


def _only_shown(ctx: Context, call: CallSite) -> bool:
    """Whether what `call` returns is only printed (`print(generate(model, "Wh"))`): its forward
    feeds no backward, so it may run past the wrapper."""
    stmt = call.place.stmt
    if not isinstance(stmt, cst.SimpleStatementLine) or len(stmt.body) != 1 or not isinstance(stmt.body[0], cst.Expr):
        return False
    shown = stmt.body[0].value
    return (isinstance(shown, cst.Call) and shown is not call.node and spell(shown.func) == "print"
            and any(arg.value is call.node for arg in shown.args))


def _report_foreign_reads(ctx: Context, call: cst.Call, spelled: str, reads: ForeignReads) -> None:
    read = ", ".join(f"`{reads.param}.{attr}`" for attr in reads.attributes)
    ctx.report("MIG105", f"`{reads.function}()` of {os.path.basename(reads.path)} reads {read} on the model it is handed, "
               f"which the wrapper does not answer (AttributeError), and it runs in the training loop, where handing it "
               f"`{spelled}.module` would run the forward past the wrapper (gradients not averaged): in "
               f"{os.path.basename(reads.path)} read them as `getattr({reads.param}, \"module\", {reads.param}).<name>`", call)


# `torch.save(model.to("cpu"), path)` pickles what these return: the module they are called on


def saved_module(value: cst.BaseExpression) -> cst.BaseExpression:
    """The module a `torch.save` pickles: `model` in `model`, `model.cpu()`, `model.to("cpu").eval()`."""
    while (isinstance(value, cst.Call) and isinstance(value.func, cst.Attribute)
           and value.func.attr.value in SELF_RETURNING):
        value = value.func.value
    return value


def saved_objects(value: cst.BaseExpression) -> list[cst.BaseExpression]:
    """What `torch.save` pickles: `model`, `model.cpu()`, or each item of `[model, criterion]` / `{"model": model}`."""
    if isinstance(value, (cst.List, cst.Tuple)):
        return [saved_module(element.value) for element in value.elements]
    if isinstance(value, cst.Dict):
        return [saved_module(element.value) for element in value.elements if isinstance(element, cst.DictElement)]
    return [saved_module(value)]


def _through_module_attribute(updated: cst.CSTNode) -> cst.CSTNode:
    """`model.generate` as earlier edits left it -> `model.module.generate`."""
    assert isinstance(updated, cst.Attribute)
    return updated.with_changes(value=cst.Attribute(value=updated.value, attr=cst.Name("module")))


def _through_module(ctx: Context, use: AttributeUse, maybe_unwrapped: bool = False) -> None:
    """`model.generate` -> `model.module.generate`; in a function that some callers hand the bare
    module, `getattr(model, "module", model).generate`."""
    owner = use.node.value
    if maybe_unwrapped:
        code = ctx.code(owner)
        reached = expression(f'getattr({code}, "module", {code})')
        ctx.plan.replace(use.node, with_fields(value=reached))
    else:
        ctx.plan.replace(use.node, _through_module_attribute)
    method = use.node.attr.value
    step_loops = {loop.node for loop in ctx.sites.step_loops}
    if use.called and method not in ("state_dict", "load_state_dict") and step_loops.intersection(use.place.loops):
        ctx.report(
            "MIG105",
            f"`{ctx.code(owner)}.{method}(...)` runs the model outside its forward, bypassing the wrapper; "
            "if it computes the loss, route it through forward()",
            use.node,
        )


# -- `weights = lambda: model.state_dict()`: weights read each time the lambda is called ----------

@dataclass(frozen=True, eq=False)
class StateLambda:
    """A lambda whose body reads the weights (`lambda: model.state_dict()`): the read runs at each
    call of the lambda, not where it is written, so a sharding target gathers there, on every rank."""

    node: cst.Lambda
    stmt: cst.BaseStatement  # the statement the lambda is written in
    name: str | None  # `weights` in `weights = lambda: ...`; None where it is not bound to a name alone
    calls: list[CallSite]  # every `weights(...)` in the scope it is bound in (nested functions too)
    escape: cst.CSTNode | None  # a use of the name that is not a call (handed on, returned), or a rebinding

    @property
    def traced(self) -> bool:
        """Whether every call of the lambda is known: bound to a name, only ever called."""
        return self.name is not None and self.escape is None


def state_lambda(ctx: Context, stmt: cst.BaseStatement, read: cst.Call) -> StateLambda | None:
    """The innermost lambda of `stmt` holding the call `read`, with its calls; None when there is none."""
    lambdas = [node for node in descendants(stmt) if isinstance(node, cst.Lambda)
               and any(inner is read for inner in descendants(node.body))]
    if not lambdas:
        return None
    node = lambdas[-1]
    name = _bound_name(stmt, node)
    scope = ctx.index.scope_of.get(stmt)
    if name is None or scope is None:
        return StateLambda(node, stmt, None, [], None)
    calls: list[CallSite] = []
    escape: cst.CSTNode | None = None
    bindings = ctx.index.bindings_of_in(name, scope)
    if len(bindings) > 1:
        escape = bindings[1].node
    targets = {id(target.target) for target in stmt.body[0].targets} if isinstance(stmt, cst.SimpleStatementLine) \
        and isinstance(stmt.body[0], cst.Assign) else set()
    funcs = {id(call.node.func): call for call in ctx.index.calls if isinstance(call.node.func, cst.Name)
             and call.node.func.value == name}
    for found in descendants(scope.node):
        if not isinstance(found, cst.Name) or found.value != name or id(found) in targets:
            continue
        if id(found) in funcs:
            calls.append(funcs[id(found)])
        elif escape is None and _is_read(found, scope.node):
            escape = found
    return StateLambda(node, stmt, name, calls, escape)


def _bound_name(stmt: cst.BaseStatement, node: cst.Lambda) -> str | None:
    """`weights` for `weights = lambda: ...` alone on its line."""
    if not isinstance(stmt, cst.SimpleStatementLine) or len(stmt.body) != 1:
        return None
    assign = stmt.body[0]
    if not isinstance(assign, cst.Assign) or assign.value is not node or len(assign.targets) != 1:
        return None
    target = assign.targets[0].target
    return target.value if isinstance(target, cst.Name) else None


def _is_read(name: cst.Name, root: cst.CSTNode) -> bool:
    """Whether `name` is a use of the variable, not an attribute's name or a keyword's (`x.weights`, `f(weights=1)`)."""
    for node in descendants(root):
        if isinstance(node, cst.Attribute) and node.attr is name or isinstance(node, cst.Arg) and node.keyword is name:
            return False
        if isinstance(node, (cst.Param, cst.FunctionDef, cst.ClassDef)) and node.name is name:
            return False
    return True


def lambda_shown(ctx: Context, held: StateLambda) -> str:
    """How a finding names the lambda: `weights = lambda: model.state_dict()` (line 12)."""
    shown = ctx.code(held.stmt).strip() if held.name is not None else ctx.code(held.node)
    return f"`{shown}` (line {ctx.position(held.node)[0]})"
