"""Where a trained model, the optimizer built for it and that optimizer's LR schedulers all exist:
the first statement after which a target can hand the three to its framework together
(`deepspeed.initialize(model=..., optimizer=...)`), or why there is no such statement.
The framework's call goes after that statement, or later: after the statements that still read,
load or move the bare model before the first statement of the same block that trains
(`_last_preparation`), so they see the plain module, not the framework's object.

The answer is computed once per script (`model_ordering(sites)`); steps turn a reason into their
own finding.
"""

from __future__ import annotations

import dataclasses
import enum

import libcst as cst

from migrate.analysis.index import Binding, CallSite, Scope, ScriptIndex, spell
from migrate.analysis.models import NOT_COMPUTATION, runs_no_forward, top_statement
from migrate.analysis.optimizers import OptimizerSide, optimizer_side
from migrate.analysis.sites import ModelSite, TrainingSites
from migrate.analysis.syntax import contains
from migrate.analysis.trained import calls_of, root, same_module
from migrate.analysis.training import BUILTIN_NAMES, callee_scope

Block = cst.Module | cst.IndentedBlock
MAX_CALL_DEPTH = 3  # callers followed up from a method that rebuilds the optimizer


@dataclasses.dataclass(frozen=True, eq=False)
class ModelOrdering:
    """The one trained model, its optimizer, and the statement after which both (and the
    optimizer's schedulers) exist."""

    model: ModelSite  # the model's site, with wrap_after moved to `anchor` (and no wrap_before)
    optimizer: str  # the optimizer's spelling, as stepped in training
    anchor: cst.BaseStatement  # the framework's call goes right after this statement
    side: OptimizerSide  # the optimizer side of the training step
    compiled_first: cst.BaseStatement | None = None  # a `torch.compile` of the model that runs before `anchor`
    # a container over several modules one optimizer trains (an encoder and a decoder): `model` is
    # the container the framework's call makes (its spelling a new name), these are the modules
    members: tuple[ModelSite, ...] = ()
    # the optimizer is built in the function the model is handed to (`def train(model, ...):
    # optimizer = ...`): `model` is that function's parameter, and this the model where the caller
    # holds it, after the call (the plain module, which the engine trains in place)
    caller: ModelSite | None = None
    # the torch optimizer lives inside an object of the script's own class that steps it (`opt =
    # WarmupOptimizer(Adam(...))`, `opt.step_and_update_lr()`): `optimizer` spells it there
    # (`opt.optimizer`), and this is the method that steps it; the script keeps calling it
    stepped_by: str | None = None


class Unordered(enum.Enum):
    """Why there is no statement after which the model and its optimizer exist together."""

    NO_MODEL = "no model"  # nothing trained that can be wrapped
    SEVERAL_MODELS = "several models"  # one framework object per model and optimizer: not placed
    OPTIMIZER_ELSEWHERE = "optimizer not built beside the model"
    NO_OPTIMIZER = "no optimizer stepped"  # updated by hand, or through a class of the script's own
    SEVERAL_OPTIMIZERS = "several optimizers step the model"  # one framework object takes one optimizer
    OPTIMIZER_REBUILT = "the optimizer is built again during training"  # the framework keeps the first


@dataclasses.dataclass(frozen=True, eq=False)
class NoModelOrdering:
    """The reason, and the models it is about (none, several, or the one whose optimizer is elsewhere)."""

    reason: Unordered
    models: tuple[ModelSite, ...]
    compiled_first: cst.BaseStatement | None = None  # as in ModelOrdering
    optimizers: tuple[str, ...] = ()  # SEVERAL_OPTIMIZERS: their spellings
    seen: cst.BaseStatement | None = None  # OPTIMIZER_REBUILT: the statement that builds it again


def model_ordering(sites: TrainingSites) -> ModelOrdering | NoModelOrdering:
    """The ordering of the script's model, optimizer and schedulers (computed once, then reused)."""
    return sites.index.derived("model_ordering", lambda: _ordering(sites))


def _ordering(sites: TrainingSites) -> ModelOrdering | NoModelOrdering:
    if not sites.models:
        return NoModelOrdering(Unordered.NO_MODEL, ())
    if len(sites.models) > 1:
        return NoModelOrdering(Unordered.SEVERAL_MODELS, tuple(sites.models))
    side = optimizer_side(sites)
    ordering = _order(sites, sites.models[0], side, sorted(side.optimizers))
    if isinstance(ordering, NoModelOrdering) and ordering.reason is Unordered.OPTIMIZER_ELSEWHERE:
        return _in_callee(sites, sites.models[0], side) or ordering
    if isinstance(ordering, NoModelOrdering) and ordering.reason is Unordered.NO_OPTIMIZER:
        return _in_holder(sites, sites.models[0], side) or ordering
    return ordering


def _in_holder(sites: TrainingSites, site: ModelSite, side: OptimizerSide) -> ModelOrdering | None:
    """The ordering for a torch optimizer kept in an object of a class of this file that steps
    it: `opt = WarmupOptimizer(torch.optim.Adam(model.parameters()), ...)` whose `__init__` keeps
    it as `self.optimizer`, and whose method called in training (`opt.step_and_update_lr()`)
    calls `self.optimizer.step()`. DeepSpeed's optimizer goes back into that attribute."""
    index = sites.index
    for binding in index.bindings:
        held = _held_optimizer(index, binding) if binding.place.scope is site.scope else None
        if held is None:
            continue
        attribute, method = held
        if not any(use.owner == binding.target and use.called and use.node.attr.value == method
                   and use.place.scope.name in sites.training_scopes for use in index.attributes):
            continue
        ordering = _order(sites, site, side, [binding.target])
        if isinstance(ordering, ModelOrdering):
            return dataclasses.replace(ordering, optimizer=f"{binding.target}.{attribute}", stepped_by=method)
    return None


def _held_optimizer(index: ScriptIndex, binding: Binding) -> tuple[str, str] | None:
    """(the attribute, the stepping method) when `binding` makes an instance of a class of this
    file from a torch optimizer that its `__init__` keeps as `self.<attribute>` and one of its
    methods steps (`self.<attribute>.step()`)."""
    value = binding.value
    if not isinstance(value, cst.Call) or (spell(value.func) or "") not in index.classes:
        return None
    cls = spell(value.func)
    init = index.functions.get(f"{cls}.__init__")
    if init is None or not isinstance(init.node, cst.FunctionDef):
        return None
    params = [p.name.value for p in init.node.params.params][1:]  # without self
    for position, arg in enumerate(value.args):
        if not _builds_torch_optimizer(index, arg.value, binding.place.scope):
            continue
        param = arg.keyword.value if arg.keyword is not None else (params[position] if position < len(params) else None)
        kept = next((b.target.removeprefix("self.") for b in index.bindings if b.place.scope is init
                     and b.target.startswith("self.") and isinstance(b.value, cst.Name) and b.value.value == param), None)
        if kept is None:
            continue
        for call in index.calls:
            func = call.node.func
            scope = call.place.scope
            if (scope.class_name == cls and isinstance(func, cst.Attribute) and func.attr.value == "step"
                    and not call.node.args and spell(func.value) == f"self.{kept}"):
                return kept, scope.name.rsplit(".", 1)[-1]
    return None


def _builds_torch_optimizer(index: ScriptIndex, value: cst.BaseExpression, scope: Scope) -> bool:
    """`torch.optim.Adam(...)`, or a name bound to one in `scope`."""
    def torch_optimizer(node: cst.BaseExpression | None) -> bool:
        qualified = index.qualify(node.func) or "" if isinstance(node, cst.Call) else ""
        return qualified.startswith("torch.optim.") and "lr_scheduler" not in qualified

    if torch_optimizer(value):
        return True
    return isinstance(value, cst.Name) and any(b.target == value.value and b.place.scope is scope and torch_optimizer(b.value)
                                               for b in index.bindings)


def _in_callee(sites: TrainingSites, site: ModelSite, side: OptimizerSide) -> ModelOrdering | None:
    """The ordering inside the one function the model is handed to, when that function builds
    the stepped optimizer from its parameter's weights (`def train(model, loader): optimizer =
    AdamW(model.parameters())`) and is called once, from the model's own block."""
    index = sites.index
    for optimizer in sorted(side.optimizers):
        for binding in index.bindings_of(optimizer):
            scope = binding.place.scope
            call = _only_call_with(sites, scope, site)
            if call is None or not isinstance(scope.node, cst.FunctionDef) or not isinstance(scope.node.body, cst.IndentedBlock):
                continue
            call_stmt, param = call
            inner = ModelSite(spelling=param, scope=scope, wrap_after=scope.node.body.body[0], wrap_before=None,
                              data_parallel=[])
            if not _built_over(index, optimizer, inner, scope.node.body):
                continue
            ordering = _order(sites, inner, side, [optimizer])
            if isinstance(ordering, ModelOrdering):
                return dataclasses.replace(ordering, caller=dataclasses.replace(site, wrap_after=call_stmt))
    return None


def _only_call_with(sites: TrainingSites, scope: Scope, site: ModelSite) -> tuple[cst.BaseStatement, str] | None:
    """(the statement of the model's block that calls `scope`, the parameter given the model)
    when that call is the only call of `scope` in the file and it passes the model by name."""
    index = sites.index
    calls = [c for c in index.calls if callee_scope(index, c) is scope]
    if len(calls) != 1 or calls[0].place.scope is not site.scope or not isinstance(scope.node, cst.FunctionDef):
        return None
    call = calls[0]
    anchor = site.wrap_after or site.wrap_before
    if anchor is None:
        return None
    block = index.block_of[anchor][0]
    top = top_statement(index, call.place.stmt, block)
    if top is None:
        return None
    params = [p.name.value for p in scope.node.params.params]
    for position, arg in enumerate(call.node.args):
        if arg.star or spell(arg.value) != site.spelling:
            continue
        name = arg.keyword.value if arg.keyword is not None else (params[position] if position < len(params) else None)
        if name in params:
            return top, name
    return None


def engine_orderings(sites: TrainingSites) -> tuple[ModelOrdering, ...] | NoModelOrdering:
    """One ordering per trained model: the one model's, or, for several models that each have an
    optimizer of their own (a GAN's generator and discriminator), one per model, all placed after
    the same statement (the latest of their own places, in one block). Computed once."""
    return sites.index.derived("engine_orderings", lambda: _engine_orderings(sites))


def _engine_orderings(sites: TrainingSites) -> tuple[ModelOrdering, ...] | NoModelOrdering:
    if len(sites.models) < 2:
        single = model_ordering(sites)
        return (single,) if isinstance(single, ModelOrdering) else single
    several = NoModelOrdering(Unordered.SEVERAL_MODELS, tuple(sites.models))
    shared = _shared_optimizer(sites)
    if shared is not None:
        return _container(sites, shared) or several
    paired = _own_optimizers(sites)
    if paired is None:
        return several
    side = optimizer_side(sites)
    orderings = []
    for site, optimizer in paired:
        ordering = _order(sites, site, side, [optimizer])
        if isinstance(ordering, NoModelOrdering):
            return ordering
        orderings.append(ordering)
    blocks = {id(sites.index.block_of[o.anchor][0]) for o in orderings}
    if len(blocks) > 1:
        return several
    anchor = max((o.anchor for o in orderings), key=lambda stmt: sites.index.block_of[stmt][1])
    compiled_first = next((o.compiled_first for o in orderings if o.compiled_first is not None), None)
    return tuple(
        dataclasses.replace(o, anchor=anchor, model=dataclasses.replace(o.model, wrap_after=anchor), compiled_first=compiled_first)
        for o in orderings
    )


def _shared_optimizer(sites: TrainingSites) -> str | None:
    """The one stepped optimizer when it holds the parameters of every trained model, and of
    nothing else (`Adam(list(encoder.parameters()) + list(decoder.parameters()))`)."""
    if len({s.spelling for s in sites.stepped}) != 1 or not all(s.owners for s in sites.stepped):
        return None
    index = sites.index
    roots = [root(index, site.spelling, site.scope) for site in sites.models]
    held = [root(index, owner.spelling, owner.scope) for s in sites.stepped for owner in s.owners or ()]
    every_model = all(any(same_module(index, h, r) for h in held) for r in roots)
    nothing_else = all(any(same_module(index, h, r) for r in roots) for h in held)
    return sites.stepped[0].spelling if every_model and nothing_else else None


def _container(sites: TrainingSites, optimizer: str) -> tuple[ModelOrdering] | NoModelOrdering | None:
    """One ordering for a container over the models `optimizer` trains together, placed after
    the latest of their own places; None unless they are plain names bound in one block (or the
    reason when the optimizer is built again during training)."""
    index = sites.index
    side = optimizer_side(sites)
    owners = [root(index, owner.spelling, owner.scope) for owner in sites.stepped[0].owners or ()]
    written = sorted(sites.models, key=lambda m: next(
        (i for i, held in enumerate(owners) if same_module(index, held, root(index, m.spelling, m.scope))), len(owners)))
    orderings = []
    for site in written:  # in the order the optimizer is given them
        ordering = _order(sites, site, side, [optimizer])
        if isinstance(ordering, NoModelOrdering) and ordering.reason is Unordered.OPTIMIZER_REBUILT:
            return ordering
        if isinstance(ordering, NoModelOrdering) or "." in site.spelling:
            return None
        orderings.append(ordering)
    if len({id(index.block_of[o.anchor][0]) for o in orderings}) > 1:
        return None
    anchor = max((o.anchor for o in orderings), key=lambda stmt: index.block_of[stmt][1])
    members = tuple(dataclasses.replace(o.model, wrap_after=anchor) for o in orderings)
    name = _free_name(index, "_".join(m.spelling for m in members) if len(members) <= 3 else "trained_modules")
    container = ModelSite(spelling=name, scope=members[0].scope, wrap_after=anchor, wrap_before=None, data_parallel=[])
    compiled_first = next((o.compiled_first for o in orderings if o.compiled_first is not None), None)
    return (ModelOrdering(model=container, optimizer=optimizer, anchor=anchor, side=side, compiled_first=compiled_first,
                          members=members),)


def _free_name(index: ScriptIndex, name: str) -> str:
    """`name`, or `name_engine` (then `name_engine2`...) when the script already uses it."""
    used = {b.target for b in index.bindings} | set(index.imports) | set(index.functions) | set(index.classes)
    candidate, number = name, 1
    while candidate in used:
        candidate = f"{name}_engine" if number == 1 else f"{name}_engine{number}"
        number += 1
    return candidate


def _own_optimizers(sites: TrainingSites) -> list[tuple[ModelSite, str]] | None:
    """Each model with the one stepped optimizer that holds its parameters and no other model's;
    None unless every model has exactly one and every stepped optimizer belongs to one model."""
    index = sites.index
    roots = [root(index, site.spelling, site.scope) for site in sites.models]
    belongs: dict[int, list[str]] = {}
    for stepped in sites.stepped:
        if not stepped.owners:
            return None
        held = {i for owner in stepped.owners for i, r in enumerate(roots)
                if same_module(index, root(index, owner.spelling, owner.scope), r)}
        if len(held) != 1 or len(held) != len({(o.spelling, id(o.scope)) for o in stepped.owners}):
            return None
        belongs.setdefault(held.pop(), []).append(stepped.spelling)
    if sorted(belongs) != list(range(len(roots))) or any(len(set(names)) != 1 for names in belongs.values()):
        return None
    return [(site, belongs[i][0]) for i, site in enumerate(sites.models)]


def _order(sites: TrainingSites, site: ModelSite, side: OptimizerSide, optimizers: list[str]) -> ModelOrdering | NoModelOrdering:
    """The ordering of one model with the first of `optimizers` built beside it."""
    index = sites.index
    compiled_first = site.wrap_before if site.wrap_after is None else None
    anchor = site.wrap_after or site.wrap_before
    assert anchor is not None
    block, position = index.block_of[anchor]
    if not optimizers:
        return NoModelOrdering(Unordered.NO_OPTIMIZER, (site,), compiled_first)
    over_model = [o for o in optimizers if _built_over(index, o, site, block)]
    if len(over_model) > 1:
        return NoModelOrdering(Unordered.SEVERAL_OPTIMIZERS, (site,), compiled_first, tuple(over_model))
    for optimizer in optimizers:
        stmt = _binding_statement(index, optimizer, site, block)
        if stmt is None:
            continue
        rebuilt = _rebuilt_in_training(sites, site, optimizer, block)
        if rebuilt is not None:
            return NoModelOrdering(Unordered.OPTIMIZER_REBUILT, (site,), compiled_first, (optimizer,), rebuilt)
        block, stmt = _untrained_block(sites, site, optimizer, block, stmt)
        position = index.block_of[anchor][1] if index.block_of[anchor][0] is block else -1
        later = max(position, block.body.index(stmt), _last_scheduler(index, optimizer, block))
        anchor = block.body[_last_preparation(sites, site, optimizer, block, later)]
        moved = dataclasses.replace(site, wrap_after=anchor, wrap_before=None)
        return ModelOrdering(model=moved, optimizer=optimizer, anchor=anchor, side=side, compiled_first=compiled_first)
    return NoModelOrdering(Unordered.OPTIMIZER_ELSEWHERE, (site,), compiled_first)


def _untrained_block(sites: TrainingSites, site: ModelSite, optimizer: str, block: Block,
                     stmt: cst.BaseStatement) -> tuple[Block, cst.BaseStatement]:
    """The block the engine goes in, and the statement there that binds the optimizer: `block`
    and `stmt`, unless `stmt` also trains (`try:` holding the optimizer and then the epoch loop):
    then the block inside it that holds the binding, and so on down."""
    index = sites.index
    binding = next(b.place.stmt for b in index.bindings if b.target == optimizer
                   and top_statement(index, b.place.stmt, block) is stmt)
    chain = list(reversed(index.enclosing_statements(binding)))  # outermost first
    calls = _calls_by_statement(index, block)
    while _trains(sites, site, optimizer, stmt, calls.get(stmt, [])) and stmt is not binding:
        inner = chain[chain.index(stmt) + 1]
        block = index.block_of[inner][0]
        stmt = inner
        calls = _calls_by_statement(index, block)
    return block, stmt


def _rebuilt_in_training(sites: TrainingSites, site: ModelSite, optimizer: str, block: Block) -> cst.BaseStatement | None:
    """A binding of the optimizer inside a loop that trains (`optimizer = ASGD(...)` when the
    validation loss stalls), or in a method of the model's class that such a loop calls
    (`def lower_lr(self): self.optimizer = SGD(...)`, called as `self.lower_lr()` between epochs):
    the engine keeps the optimizer it was given."""
    index = sites.index
    for binding in index.bindings:
        if binding.target != optimizer:
            continue
        stmt = binding.place.stmt
        if binding.place.scope is site.scope:
            if any(top_statement(index, around, block) is not None and _loop_trains(sites, site, optimizer, around)
                   for around in index.enclosing_statements(stmt)[1:]):
                return stmt
        elif _same_class_method(site, optimizer, binding.place.scope) and _called_in_training(
                sites, site, optimizer, binding.place.scope, 0):
            return stmt
    return None


def _same_class_method(site: ModelSite, optimizer: str, scope: Scope) -> bool:
    """`scope` is another method of the class whose method builds the optimizer, and the optimizer
    is one of its attributes (`self.optimizer`)."""
    return optimizer.startswith("self.") and scope.class_name is not None and scope.class_name == site.scope.class_name


def _called_in_training(sites: TrainingSites, site: ModelSite, optimizer: str, scope: Scope, depth: int) -> bool:
    """A call of `scope` runs inside a loop that trains, directly or through the functions that call
    it (a few levels up)."""
    if depth > MAX_CALL_DEPTH:
        return False
    for call in calls_of(sites.index, scope):
        if any(_loop_trains(sites, site, optimizer, around) for around in sites.index.enclosing_statements(call.place.stmt)[1:]):
            return True
        caller = call.place.scope
        if caller is not scope and not caller.is_module and _called_in_training(sites, site, optimizer, caller, depth + 1):
            return True
    return False


def _loop_trains(sites: TrainingSites, site: ModelSite, optimizer: str, around: cst.BaseStatement) -> bool:
    """`around` is a `for` or `while` loop that trains (see _trains)."""
    index = sites.index
    return isinstance(around, cst.For | cst.While) and _trains(sites, site, optimizer, around, [
        c for c in index.calls if any(s is around for s in index.enclosing_statements(c.place.stmt))])


def _last_scheduler(index: ScriptIndex, optimizer: str, block: Block) -> int:
    """Index of the last statement in `block` that builds an LR scheduler on the optimizer: the
    scheduler must hold the torch optimizer (a framework's wrapper is not one), so the framework's
    call comes after it. DeepSpeed's optimizer shares its param_groups, so the LR still follows."""
    last = -1
    for call in index.calls:
        if not (call.name or "").startswith("torch.optim.lr_scheduler."):
            continue
        if any(spell(a.value) == optimizer for a in call.node.args):
            top = top_statement(index, call.place.stmt, block)
            if top is not None:
                last = max(last, block.body.index(top))
    return last


def _binding_statement(index: ScriptIndex, spelling: str, site: ModelSite, block: Block) -> cst.BaseStatement | None:
    """The statement of `block` that binds the optimizer where the model is bound (the same
    function, or for `self.optimizer` the same class)."""
    for binding in index.bindings:
        if binding.target != spelling:
            continue
        same_place = binding.place.scope is site.scope or (
            spelling.startswith("self.") and binding.place.scope.class_name == site.scope.class_name
        )
        top = top_statement(index, binding.place.stmt, block) if same_place else None
        if top is not None:
            return top
    return None


def _built_over(index: ScriptIndex, optimizer: str, site: ModelSite, block: Block) -> bool:
    """The optimizer is built beside the model from the model's own parameters (its value reads
    the model: `Adam(model[0].parameters())`), not over other tensors (`Adam([log_alpha])`)."""
    stmt = _binding_statement(index, optimizer, site, block)
    values = [b.value for b in index.bindings if b.target == optimizer and b.value is not None and
              stmt is not None and top_statement(index, b.place.stmt, block) is stmt]
    spelling = site.spelling
    return any(contains(value, lambda n: isinstance(n, cst.Name | cst.Attribute) and spell(n) == spelling) for value in values)


def _last_preparation(sites: TrainingSites, site: ModelSite, optimizer: str, block: Block, after: int) -> int:
    """Index in `block` of the statement the engine goes after: `after` (where the model, its
    optimizer and schedulers exist), or the last later statement that still reads, loads or moves
    the bare model (`print(sum(p.numel() ...))`, `model.load_state_dict(...)`) when every statement
    up to it runs before the first one that trains, found further down the same block. Those read
    the plain module, not the engine (ZeRO-3 shards, `module.` names). No training statement
    there (the block returns, or training is elsewhere): `after` itself."""
    calls = _calls_by_statement(sites.index, block)
    last = after
    for position in range(after + 1, len(block.body)):
        stmt = block.body[position]
        if _trains(sites, site, optimizer, stmt, calls.get(stmt, [])):
            return last
        if isinstance(stmt, cst.FunctionDef | cst.ClassDef) or contains(stmt, lambda n: isinstance(n, cst.Return | cst.Raise)):
            return after
        if _reads_model(stmt, site) and all(stmt is not d for d in site.data_parallel):
            last = position
    return after


def _calls_by_statement(index: ScriptIndex, block: Block) -> dict[cst.BaseStatement, list[CallSite]]:
    """The calls under each statement of `block`."""
    found: dict[cst.BaseStatement, list[CallSite]] = {}
    for call in index.calls:
        top = top_statement(index, call.place.stmt, block)
        if top is not None:
            found.setdefault(top, []).append(call)
    return found


def _trains(sites: TrainingSites, site: ModelSite, optimizer: str, stmt: cst.BaseStatement, calls: list[CallSite]) -> bool:
    """The statement trains or may: it holds a step loop or a backward, calls a training function,
    runs the model (`model(x)`, `model.generate(...)`), or hands the model or its optimizer to a
    call that may keep or run it (not print and other builtins, not torch's own functions, not a
    function of this file that runs no forward: `count_parameters(model)`)."""
    index = sites.index
    if any(top_statement(index, loop.node, _block(index, stmt)) is stmt for loop in sites.step_loops):
        return True
    backward = {id(call.node) for call in sites.backward_calls}
    spelling = site.spelling
    for call in calls:
        if id(call.node) in backward:
            return True
        callee = callee_scope(index, call)
        if callee is not None and callee.name in sites.training_scopes:
            return True
        called = spell(call.node.func) or ""
        if called == spelling or (called.startswith(spelling + ".") and called[len(spelling) + 1 :] not in NOT_COMPUTATION):
            return True
        if any(spell(a.value) in (spelling, optimizer) for a in call.node.args) and not _keeps_nothing(index, call):
            return True
    return False


def _block(index: ScriptIndex, stmt: cst.BaseStatement) -> cst.CSTNode:
    return index.block_of[stmt][0]


def _keeps_nothing(index: ScriptIndex, call: CallSite) -> bool:
    """A call given the model that only looks at it: a builtin (`print(model)`), a logger, one of
    torch's own functions, or a function of this file that runs no forward."""
    called = spell(call.node.func) or ""
    if called in BUILTIN_NAMES and called not in index.functions:
        return True
    if called.rsplit(".", 1)[-1] in ("info", "debug", "warning", "log") and called.split(".")[0] in ("logging", "logger", "log"):
        return True
    qualified = index.qualify(call.node.func) or ""
    if qualified.startswith("torch.") or qualified == "copy.deepcopy":
        return True
    return qualified in index.functions and runs_no_forward(index, index.functions[qualified])


def _reads_model(stmt: cst.BaseStatement, site: ModelSite) -> bool:
    """The statement names the model (reads, loads, moves or rebinds it)."""
    spelling = site.spelling
    return contains(stmt, lambda n: isinstance(n, cst.Name | cst.Attribute) and spell(n) == spelling)
