"""Checkpoints of a sharded model, in the plain form the original script reads and writes.

After `fully_shard` each rank holds a shard of every weight (a DTensor), so:
- `model.state_dict()` becomes `get_model_state_dict(model, options=StateDictOptions(
  full_state_dict=True, cpu_offload=True))`, computed on every rank above the statement that read
  it (and above a `with open(...)` holding it): every rank takes part in the gather and rank 0
  receives the full weights on the CPU, with the original keys, so rank 0's `torch.save` writes a
  file the original script loads with `strict=True`. The other ranks receive `{}`.
  A read that is loaded into a module that is not sharded, on every rank
  (`target_net.load_state_dict(online_net.state_dict())`, or through a name bound to it), is
  gathered with `full_state_dict=True` alone: every rank receives the whole dict (on the model's
  device), where the other ranks' `{}` would fail the load ("Missing key(s)").
- `optimizer.state_dict()` likewise becomes `get_optimizer_state_dict(model, optimizer, ...)`.
- `model.load_state_dict(sd)` after the shard becomes `set_model_state_dict(model, sd, ...)` and
  `optimizer.load_state_dict(sd)` `set_optimizer_state_dict(model, optimizer, sd, ...)`, with
  `broadcast_from_rank0=True`: rank 0's copy is sent to every rank, which then keeps its shard.
  That loads a file every rank read as well as weights only rank 0 gathered (`best = model.state_dict()`).
- `weights = lambda: model.state_dict()` gathers in the lambda, each time it is called, and each
  call runs on every rank above the rank-0 save that holds it (`weights_state = weights()`); a lambda
  whose calls cannot all be found (handed on, not bound to a name) leaves the file unchanged (MIG303).
  A function (`def snapshot(): return model.state_dict()`) gathers inside, where the read is.
- The same in this file's functions the sharded model and its optimizer are handed to after the
  shard, under their names there (`def resume(net, opt, path): net.load_state_dict(...)`, called
  as `resume(model, optimizer, path)` below the shard, which the shard step may have moved above
  where DDP would wrap: such a call counts from there).
- `torch.save(model)` cannot pickle the sharded module (torch 2.13: "Can't pickle <class
  FSDPNet>"): the file is left unchanged (MIG303).

Measured on torch 2.13 (CPU, gloo, 2 ranks): the saved weights equal a 1-process run's, load
strictly into the original model, and a resume from model and optimizer state continues exactly.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import libcst as cst

from migrate.analysis.index import AttributeUse, Scope, descendants, free_name, spell
from migrate.analysis.models import aliases, is_after
from migrate.analysis.sites import ModelSite
from migrate.analysis.state_dicts import StateDictRead, earlier_names, model_state_dicts, moved_names
from migrate.analysis.syntax import argument
from migrate.analysis.trained import Stepped, calls_of, stepped_optimizers
from migrate.rewrite import NodeEdit
from migrate.steps.base import Context, expression, statement, statements
from migrate.steps.gathers import outside_open_files, outside_rank_guards, report_gather_on_some_ranks
from migrate.steps.wrap_model import StateLambda, lambda_shown, load_former_data_parallel_keys, saved_objects, state_lambda

CHECKPOINT = "torch.distributed.checkpoint.state_dict"
GATHER = "full_state_dict=True, cpu_offload=True"
GATHER_EVERYWHERE = "full_state_dict=True"  # every rank receives the whole dict, to load it
SCATTER = "full_state_dict=True, broadcast_from_rank0=True"
MAX_HAND_DEPTH = 4  # calls followed down from the optimizer's own scope


def fsdp_state_dicts(ctx: Context) -> None:
    for site in ctx.sites.models:
        if _refuse_pickled(ctx, site):
            ctx.refused = True
            return
    for site in ctx.sites.models:
        # `net = detector`, `m = model.to(device)`: the other names of the sharded module
        for each in (site, *earlier_names(ctx.index, site), *moved_names(ctx.index, site)):
            _gather_model(ctx, each)
            _load_model(ctx, each)
    _optimizers(ctx)


def _options(ctx: Context, settings: str) -> str:
    return f"{ctx.imported(CHECKPOINT, 'StateDictOptions')}({settings})"


def _gather_model(ctx: Context, site: ModelSite) -> None:
    for read in model_state_dicts(ctx.index, site):
        get = ctx.imported(CHECKPOINT, "get_model_state_dict")
        everywhere = _loaded_everywhere(ctx, read)
        gathered = f"{get}({read.owner}, options={_options(ctx, GATHER_EVERYWHERE if everywhere else GATHER)})"
        held = state_lambda(ctx, read.stmt, read.call)
        if held is not None:
            _gather_in_lambda(ctx, site, read, held, gathered)
            continue
        if _assigned_alone(read.stmt, read.call) and _gather_place(ctx, read.stmt) is read.stmt \
                and not _data_parallel_keys(ctx, site, read.call):
            ctx.plan.replace_with(read.call, expression(gathered))  # `ckp = model.state_dict()`: gathered right there
            continue
        variable = f"{read.owner.split('.')[-1]}_state"
        said = "every rank gathers the full weights, to load them" if everywhere else \
            "every rank gathers; rank 0 gets the full weights"
        gather = statement(f"{variable} = {gathered}  # {said}\n")
        anchor = _insert_gather(ctx, read.stmt, gather, site)
        if _data_parallel_keys(ctx, site, read.call):
            ctx.plan.insert_before(anchor, [statement(f'{variable} = {{f"module.{{key}}": value for key, value in {variable}.items()}}'
                                              "  # the keys nn.DataParallel saved\n")])
        ctx.plan.replace_with(read.call, cst.Name(variable))


def _gather_in_lambda(ctx: Context, site: ModelSite, read: StateDictRead, held: StateLambda, gathered: str) -> None:
    """`weights = lambda: model.state_dict()`: the lambda gathers each time it is called, and each call
    runs on every rank, above the rank-0 guard of the save that holds it (`weights_state = weights()`,
    then `torch.save(weights_state, path)` on rank 0). A lambda whose calls cannot all be found (handed
    on, returned, not bound to a name) leaves the file unchanged (MIG303): a gather written once where
    it stands would save the weights of that moment, and one left in it would run on rank 0 alone."""
    if not held.traced:
        where = "not bound to a name" if held.name is None else f"`{held.name}` is handed on or bound again " \
            f"(line {ctx.position(held.escape)[0] if held.escape is not None else '?'})"
        ctx.report("MIG303", f"{lambda_shown(ctx, held)} reads `{read.owner}`'s sharded weights each time it is called, "
                   f"and the conversion cannot find every call ({where}): every rank must gather at each call, above "
                   "rank 0's save; call get_model_state_dict on every rank there by hand, or write it as a function "
                   "of this file called by name; the file is left unchanged", held.node)
        ctx.refused = True
        return
    if _data_parallel_keys(ctx, site, read.call):
        gathered = f'{{f"module.{{key}}": value for key, value in {gathered}.items()}}'  # the keys nn.DataParallel saved
    ctx.plan.replace_with(read.call, expression(gathered))
    assert held.name is not None
    used = ctx.index.names_under(ctx.index.module)
    for call in held.calls:
        stmt = call.place.stmt
        if _assigned_alone(stmt, call.node) and _gather_place(ctx, stmt) is stmt:
            continue  # `best = weights()`: every rank runs it already
        variable = free_name(f"{held.name}_state", used)
        gather = statement(f"{variable} = {ctx.code(call.node)}  # every rank gathers; rank 0 gets the full weights\n")
        _insert_gather(ctx, stmt, gather, site)
        ctx.plan.replace_with(call.node, cst.Name(variable))


def _loaded_everywhere(ctx: Context, read: StateDictRead) -> bool:
    """Whether the weights read are loaded, on every rank, into a module that is not sharded: the
    read is (inside) the argument of a `load_state_dict` call on another module
    (`target.load_state_dict(net.state_dict())`, `...(copy.deepcopy(net.state_dict()))`), or bound
    alone to a name that such a call in the same function loads (`weights = net.state_dict()`,
    then `target.load_state_dict(weights)`)."""
    index = ctx.index
    scope = index.scope_of.get(read.stmt)
    loads = [use for use in index.attributes if use.called and use.node.attr.value == "load_state_dict"
             and use.place.scope is scope and not _sharded_name(ctx, use)]
    bound: str | None = None
    if _assigned_alone(read.stmt, read.call):
        assert isinstance(read.stmt, cst.SimpleStatementLine) and isinstance(read.stmt.body[0], cst.Assign)
        targets = read.stmt.body[0].targets
        bound = spell(targets[0].target) if len(targets) == 1 else None
    for use in loads:
        call = _call(ctx, use)
        if call is None or not call.args:
            continue
        state = _state_argument(call).value
        if any(node is read.call for node in descendants(state)):
            return True
        if bound is not None and spell(state) == bound and ctx.position(use.node) > ctx.position(read.call):
            return True
    return False


def _sharded_name(ctx: Context, use: AttributeUse) -> bool:
    """Whether the owner of `use` names a sharded model there (its load becomes set_model_state_dict)."""
    return any((use.owner, use.place.scope.name) in _model_names(ctx, site) for site in ctx.sites.models)


def _assigned_alone(stmt: cst.BaseStatement, call: cst.Call) -> bool:
    """`x = model.state_dict()`, alone on its line: an assignment the rank-0 guards leave to every rank."""
    return (isinstance(stmt, cst.SimpleStatementLine) and len(stmt.body) == 1 and isinstance(stmt.body[0], cst.Assign)
            and stmt.body[0].value is call)


def _gather_place(ctx: Context, stmt: cst.BaseStatement) -> cst.BaseStatement:
    """The statement a gather for `stmt` goes above: outside the rank guards and `with open(...)` around it."""
    anchor = outside_open_files(ctx, outside_rank_guards(ctx, stmt))
    return outside_rank_guards(ctx, anchor)


class Gathered:
    """The statements gathers went above, in order (recorded for the next gather of the same run)."""

    def __init__(self) -> None:
        self.anchors: list[cst.BaseStatement] = []


def _insert_gather(ctx: Context, stmt: cst.BaseStatement, gather: cst.BaseStatement, site: ModelSite) -> cst.BaseStatement:
    """`gather` above `stmt`, outside the rank guards and `with open(...)` around it; returns the
    statement it goes above. Saves one after the other (`torch.save(G.state_dict(), ...)` then
    `torch.save(D.state_dict(), ...)`) gather first, all of them, so one rank-0 block holds the saves."""
    anchor = _gather_place(ctx, stmt)
    if report_gather_on_some_ranks(ctx, anchor, site, "FSDP", refuse=True):
        ctx.refused = True  # the ranks that skip the gather leave the others waiting: no script that hangs
    gathered = ctx.recorded(Gathered, create=True)
    run_start = _start_of_run(ctx, anchor, gathered.anchors)
    gathered.anchors.append(anchor)
    if run_start is not anchor:
        ctx.plan.insert_before(run_start, [gather])
        return run_start
    ctx.plan.insert_above(anchor, gather)
    return anchor


def _start_of_run(ctx: Context, anchor: cst.BaseStatement, gathered: list[cst.BaseStatement]) -> cst.BaseStatement:
    """The first of the statements right before `anchor` in its block that each had a gather put above them."""
    block, position = ctx.index.block_of.get(anchor, (None, 0))
    if block is None:
        return anchor
    start = anchor
    body = list(block.body)
    while position > 0 and any(body[position - 1] is g for g in gathered):
        position -= 1
        start = body[position]
    return start


def _load_model(ctx: Context, site: ModelSite) -> None:
    for use in _calls_after(ctx, site, "load_state_dict"):
        call = _call(ctx, use)
        if call is None or not call.args:
            continue
        strict = _strict(ctx, call)
        prefixed = _data_parallel_keys(ctx, site, call)  # saved by nn.DataParallel: its keys start with `module.`
        load = ctx.imported(CHECKPOINT, "set_model_state_dict")
        options = _options(ctx, SCATTER + (f", strict={strict}" if strict is not None else ""))
        owner = use.owner

        def edit(updated: cst.CSTNode, owner: str = owner, load: str = load, options: str = options,
                 prefixed: bool = prefixed) -> cst.CSTNode:
            # from the call as other steps left it (`torch.load(path)` given its map_location)
            assert isinstance(updated, cst.Call)
            state = _state_code(updated)
            if prefixed:
                state = f'{{key.removeprefix("module."): value for key, value in {state}.items()}}'
            return expression(f"{load}({owner}, {state}, options={options})")

        ctx.plan.replace(call, edit)
    load_former_data_parallel_keys(ctx, site)


def _data_parallel_keys(ctx: Context, site: ModelSite, call: cst.Call) -> bool:
    """Whether the script read or loaded the state dict of the nn.DataParallel it had (`model.state_dict()`
    on the wrapper: keys `module.x`), not of the module inside it (`model.module.state_dict()`)."""
    return bool(site.data_parallel) and isinstance(call.func, cst.Attribute) and not (
        isinstance(call.func.value, cst.Attribute) and call.func.value.attr.value == "module")


def _state_argument(call: cst.Call) -> cst.Arg:
    return next((a for a in call.args if a.keyword is None or a.keyword.value == "state_dict"), call.args[0])


def _state_code(call: cst.Call) -> str:
    return cst.Module([]).code_for_node(_state_argument(call).value)


def _strict(ctx: Context, call: cst.Call) -> str | None:
    """The `strict` a `load_state_dict(sd, strict=False)` call passes (by name or second)."""
    strict = next((a for a in call.args if a.keyword is not None and a.keyword.value == "strict"), None)
    if strict is None and len(call.args) > 1 and call.args[1].keyword is None:
        strict = call.args[1]
    return ctx.code(strict.value) if strict is not None else None


def _calls_after(ctx: Context, site: ModelSite, method: str) -> list[AttributeUse]:
    """`<model>.<method>(...)` under any of the model's names, after the shard."""
    names = _model_names(ctx, site)
    return [use for use in ctx.index.attributes
            if use.called and use.node.attr.value == method and (use.owner, use.place.scope.name) in names
            and is_after(ctx.index, use.place.stmt, site)]


def _call(ctx: Context, use: AttributeUse) -> cst.Call | None:
    return next((c for c in ctx.index.calls_under(use.place.stmt) if c.func is use.node), None)


def _refuse_pickled(ctx: Context, site: ModelSite) -> bool:
    """MIG303, file left unchanged: `torch.save(model)` after the shard fails (torch 2.13 cannot
    pickle the class fully_shard makes), so the converted script would crash there."""
    names = aliases(ctx.index, site).union(*(aliases(ctx.index, other) for other in moved_names(ctx.index, site)))
    for call in ctx.index.calls_named("torch.save"):
        saved = saved_objects(call.node.args[0].value) if call.node.args else []
        spelled = next((ctx.code(v) for v in saved if (ctx.code(v), call.place.scope.name) in names), None)
        if spelled is not None and is_after(ctx.index, call.place.stmt, site):
            ctx.report("MIG303", f"`{ctx.code(call.node)}` pickles the whole module, and a sharded one cannot be "
                       "pickled (fully_shard gives it a class of its own); save "
                       f"`{spelled}.state_dict()` instead (gathered for rank 0), then convert again; the file is left "
                       "unchanged", call.node)
            return True
    return False


def _optimizers(ctx: Context) -> None:
    """The stepped optimizers' state: gathered for saving, scattered on loading; also that of one
    the training code holds only as handed in (`self.optimizer = kwargs["optimizer"]`), stepping
    the only sharded model (`_site_of`): its raw `state_dict()` is this rank's shards."""
    for stepped in stepped_optimizers(ctx.index, ctx.sites.training_scopes, handed_in=True):
        site = _site_of(ctx, stepped)
        if site is None:
            continue
        handed = _handed_optimizer(ctx, stepped.spelling)
        for use in ctx.index.attributes:
            named = use.owner == stepped.spelling or (use.owner, use.place.scope.name) in handed
            if not named or not use.called or use.node.attr.value not in ("state_dict", "load_state_dict"):
                continue
            model = _model_in(ctx, site, use)
            call = _call(ctx, use)
            if call is None:
                continue
            if model is None:
                continue  # left for the check below (MIG303: the file is left unchanged)
            optimizer = use.owner  # its name there: `opt` in `def resume(net, opt, path)`
            if use.node.attr.value == "state_dict":
                get = ctx.imported(CHECKPOINT, "get_optimizer_state_dict")
                variable = f"{optimizer.split('.')[-1]}_state"
                gather = statement(f"{variable} = {get}({model}, {optimizer}, options={_options(ctx, GATHER)})"
                                   "  # every rank gathers; rank 0 gets the full state\n")
                _insert_gather(ctx, use.place.stmt, gather, site)
                ctx.plan.replace_with(call, cst.Name(variable))
            elif call.args:
                load = ctx.imported(CHECKPOINT, "set_optimizer_state_dict")
                helper = _named_state_helper(ctx, use.place.stmt)
                head = f"{load}({model}, {optimizer}, {helper}({model}, {optimizer}, "
                ctx.plan.replace(call, _loaded_through(head, _options(ctx, SCATTER)))


def _loaded_through(head: str, options: str) -> NodeEdit:
    """`opt.load_state_dict(state)` -> `{head}state), options={options})`: the state loaded through `head`."""
    def edit(updated: cst.CSTNode) -> cst.CSTNode:
        if not isinstance(updated, cst.Call) or not updated.args:
            return updated
        return expression(f"{head}{cst.Module([]).code_for_node(updated.args[0].value)}), options={options})")
    return edit


def _model_names(ctx: Context, site: ModelSite) -> set[tuple[str, str]]:
    """The model's (name, scope) pairs: its aliases, and the parameters of this file's functions that
    every caller hands one of them after the shard. The shard step may have moved the site above
    where DDP would wrap, past such a call (`start = resume(model, optimizer, path)`), which the
    aliases, taken before the move, do not count."""
    def compute() -> frozenset[tuple[str, str]]:
        names = aliases(ctx.index, site)
        return frozenset(names | _handed(ctx, names, site))

    return set(ctx.index.answer("fsdp_model_names", id(site), compute))


def _handed_optimizer(ctx: Context, spelling: str) -> set[tuple[str, str]]:
    """(parameter, function) pairs of this file's functions that every caller hands the optimizer
    (`("opt", "resume")` for `def resume(net, opt, path)` called as `resume(model, optimizer, path)`)."""
    scopes = [*ctx.index.functions, "<module>"]
    return _handed(ctx, {(spelling, scope) for scope in scopes}, None)


def _handed(ctx: Context, known: set[tuple[str, str]], site: ModelSite | None) -> set[tuple[str, str]]:
    """(parameter, function) pairs, not in `known`, of this file's functions that every caller hands
    a name in `known` (or one found so far), after the shard of `site` when one is given; followed a
    few calls down."""
    index = ctx.index
    found: set[tuple[str, str]] = set()
    for _ in range(MAX_HAND_DEPTH):
        new = {(param, scope.name) for scope in index.functions.values() if isinstance(scope.node, cst.FunctionDef)
               for param in scope.params if (param, scope.name) not in known | found
               and _always_handed(ctx, scope, param, known | found, site)}
        if not new:
            break
        found |= new
    return found


def _always_handed(ctx: Context, scope: Scope, param: str, names: set[tuple[str, str]], site: ModelSite | None) -> bool:
    """Every call of `scope` seen passes one of `names` (as its caller spells it) for `param`."""
    if param == "self":
        return False
    position = scope.params.index(param) - (1 if scope.class_name else 0)
    calls = calls_of(ctx.index, scope)
    for call in calls:
        arg = argument(call.node, param, position)
        spelled = spell(arg.value) if arg is not None else None
        if spelled is None or (spelled, call.place.scope.name) not in names:
            return False
        if site is not None and not is_after(ctx.index, call.place.stmt, site):
            return False
    return bool(calls)


NAMED_STATE = "named_optimizer_state"


@dataclass
class NamedStateHelper:
    """The files (by their first statement) the helper below was added to: once per file."""

    files: set[int] = field(default_factory=set)


def _named_state_helper(ctx: Context, used_at: cst.CSTNode) -> str:
    """`named_optimizer_state(model, optimizer, state)`, defined once in the converted script: an
    optimizer state dict the single-process script saved numbers the parameters (0, 1, ...) in the
    order of the optimizer's groups, and set_optimizer_state_dict wants them by name (torch 2.13
    takes numbered state without a word and fails at the next get_optimizer_state_dict)."""
    added = ctx.recorded(NamedStateHelper, create=True)
    body = ctx.file_body(used_at)  # the file that loads the state (a module of the project, issue 27)
    if id(body[0]) not in added.files:
        added.files.add(id(body[0]))
        first = next(stmt for stmt in body if not _is_import_or_docstring(stmt))
        helper = statements(
            f"def {NAMED_STATE}(model, optimizer, state):\n"
            '    """`state` keyed by parameter names, as set_optimizer_state_dict wants it: a state dict saved\n'
            '    by the single-process script numbers the parameters in the order of the optimizer\'s groups."""\n'
            '    if not state or not any(isinstance(key, int) for key in state["state"]):\n'
            "        return state\n"
            "    names = {id(parameter): name for name, parameter in model.named_parameters()}\n"
            '    ordered = [names[id(parameter)] for group in optimizer.param_groups for parameter in group["params"]]\n'
            "    return {\n"
            '        "state": {ordered[key]: value for key, value in state["state"].items()},\n'
            '        "param_groups": [{**group, "params": [ordered[key] for key in group["params"]]} for group in state["param_groups"]],\n'
            "    }\n")
        ctx.plan.insert_before(first, [helper[0].with_changes(leading_lines=[cst.EmptyLine(), cst.EmptyLine()])])
    return NAMED_STATE


def _is_import_or_docstring(stmt: cst.BaseStatement) -> bool:
    if not isinstance(stmt, cst.SimpleStatementLine):
        return False
    return all(isinstance(small, (cst.Import, cst.ImportFrom)) or isinstance(small, cst.Expr)
               and isinstance(small.value, (cst.SimpleString, cst.ConcatenatedString)) for small in stmt.body)


def _site_of(ctx: Context, stepped: Stepped) -> ModelSite | None:
    """The sharded model an optimizer holds (the only one, when what it holds cannot be told)."""
    if stepped.owners is None:
        return ctx.sites.models[0] if len(ctx.sites.models) == 1 else None
    for site in ctx.sites.models:
        names = aliases(ctx.index, site)
        if any((owner.spelling, owner.scope.name) in names or (owner.spelling.split(".")[0], owner.scope.name) in names
               for owner in stepped.owners):
            return site
    return None


def _model_in(ctx: Context, site: ModelSite, use: AttributeUse) -> str | None:
    """The model's name in the scope of `use`."""
    for name, scope in sorted(_model_names(ctx, site)):
        if scope == use.place.scope.name:
            return name
    return None


STATE_METHODS = frozenset({"state_dict", "load_state_dict"})


def refuse_unconverted_state(ctx: Context) -> None:
    """MIG303, file left unchanged, for what the conversion could not follow: a `model.state_dict()`,
    `optimizer.load_state_dict(...)` or `model.module` left as the script had it, under the model's
    or optimizer's own name in its function or a function inside it (`def save_ckpt(path):
    torch.save({"model_state": model.module.state_dict(), ...})` in `main`). Left alone, it would save
    shards, load whole tensors into shards, or fail on the `.module` the wrapper no longer has."""
    index = ctx.index
    optimizers = {stepped.spelling for stepped in ctx.sites.stepped}
    for site in ctx.sites.models:
        names = {site.spelling, *(other.spelling for other in moved_names(index, site))}
        for use in index.attributes:
            scope = use.place.scope.name
            inside = scope == site.scope.name or scope.startswith(site.scope.name + ".") or site.scope.is_module
            if not inside or not is_after(index, use.place.stmt, site):
                continue
            root = use.owner.removesuffix(".module")
            attribute = use.node.attr.value
            model_state = root in names and attribute in STATE_METHODS | {"module"}
            optimizer_state = use.owner in optimizers and attribute in STATE_METHODS
            if not (model_state or optimizer_state) or _converted(ctx, use):
                continue
            shown = ctx.code(use.node) + ("(...)" if use.called else "")
            ctx.report("MIG303", f"`{shown}` (in `{scope}`) would stay as the script has it: this conversion could "
                       f"not tie it to the sharded `{site.spelling}` there, and after the shard it would save or load "
                       "shards, or reach a `.module` that is gone; gather with get_model_state_dict / "
                       "get_optimizer_state_dict on every rank (set_* to load) there by hand; the file is left unchanged",
                       use.node)
            ctx.refused = True
            return


def _converted(ctx: Context, use: AttributeUse) -> bool:
    """Whether an edit of the plan covers this attribute (its call replaced, or `.module` dropped)."""
    replaced = ctx.plan.replacements
    if use.node in replaced or use.node.value in replaced:
        return True
    call = _call(ctx, use)
    return call is not None and call in replaced
