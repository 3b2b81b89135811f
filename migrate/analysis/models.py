"""Finds the models to wrap: values called in a training scope whose output feeds backward,
traced back to the statement that builds them, and the point after which the wrapper goes
(after placement, casts, freezing and any weight loading, before torch.compile and before training
starts; a `def` above the script's own nn.DataParallel does not end that setup). Also the facts a
wrapper that takes the parameters as they are when it is built (DDP) needs: what casts or moves a
model, switches its gradients, or changes its parameters otherwise.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import TypeGuard

import libcst as cst

from migrate.analysis.closures import closures_reading
from migrate.analysis.divergence import base_spelling, reinitialization
from migrate.analysis.index import AttributeUse, Binding, CallSite, Scope, ScriptIndex, child_nodes, descendants, reachable, read_names, spell
from migrate.analysis.homes import COMPILE, DATA_PARALLEL, MOVES, home_binding, without_moves, wraps_itself
from migrate.analysis.sites import ModelSite
from migrate.analysis.syntax import argument, calls_in, contains, star_imports
from migrate.analysis.trained import (
    Owner,
    Root,
    Stepped,
    calls_of,
    constructed_class,
    HandedBack,
    evaluation_copy,
    handed_back,
    is_module_class,
    not_a_module,
    optimizer_owners,
    rebound_in_order,
    root,
    same_module,
    statements_within,
    untrained,
)
from migrate.analysis.training import callee_scope, caller_arguments, class_of_binding, is_local_callable
from migrate.project_files import ReadModule

LOSS_WORDS = ("loss", "criterion")
SETUP_METHODS = frozenset({"to", "cuda", "load_state_dict", "half", "float", "bfloat16", "train", "requires_grad_"})
# nn.DataParallel as one call: `data_parallel(module, inputs, device_ids, ...)` runs `module`
FUNCTIONAL_DATA_PARALLEL = ("torch.nn.parallel.data_parallel", "torch.nn.parallel.data_parallel.data_parallel")


def data_parallel_module(index: ScriptIndex, call: cst.Call) -> cst.BaseExpression | None:
    """The module `nn.parallel.data_parallel(module, inputs, ...)` runs, when `call` is one."""
    if index.qualify(call.func) not in FUNCTIONAL_DATA_PARALLEL:
        return None
    given = argument(call, "module", 0)
    return given.value if given is not None else None


def forward_spellings(index: ScriptIndex, training: set[str]) -> dict[str, Scope]:
    """Spellings of the modules called inside training scopes, with the scope of the first call."""
    found: dict[str, Scope] = {}
    for call in index.calls:
        if call.place.scope.name not in training or not is_local_callable(index, call):
            continue
        name = call.name or ""
        if any(word in name.lower() for word in LOSS_WORDS) or _bound_to_non_module(index, name):
            continue
        found.setdefault(name, call.place.scope)
    return found


def _bound_to_non_module(index: ScriptIndex, name: str, losses: bool = True) -> bool:
    """A lambda, a partial, a functional, or (with `losses`) a `...Loss()`."""
    known: dict[tuple[str, bool], bool] = index.memo("bound_to_non_module")
    if (name, losses) not in known:
        known[(name, losses)] = _binds_non_module(index, name, losses)
    return known[(name, losses)]


def _binds_non_module(index: ScriptIndex, name: str, losses: bool) -> bool:
    for binding in index.bindings_of(name):
        if binding.value is None:
            continue
        value = binding.value
        if isinstance(value, cst.Lambda):
            return True
        if isinstance(value, cst.Call):
            qualified = index.qualify(value.func) or ""
            if (losses and qualified.endswith("Loss")) or qualified.startswith(("torch.nn.functional", "functools.partial")):
                return True
    return False


def origin(index: ScriptIndex, spelling: str, scope: Scope) -> tuple[str, Scope]:
    """Follow a function parameter back to the spelling its caller binds (one caller, a few levels)."""
    for _ in range(4):
        if "." in spelling or spelling not in scope.params:
            break
        callers = caller_arguments(index, scope, spelling)
        if not callers:
            break
        spelling, scope, _ = callers[0]
    return spelling, scope


CASTS = MOVES | {"type"}  # what places or casts a module's parameters in place
# methods that return the module they are called on: `model.to(device).eval()` is `model`
SELF_RETURNING = MOVES | {"train", "eval"}


def top_statement(index: ScriptIndex, stmt: cst.BaseStatement, block: cst.CSTNode) -> cst.BaseStatement | None:
    """The ancestor of `stmt` (itself included) that sits directly in `block`."""
    for candidate in index.enclosing_statements(stmt):
        if index.block_of.get(candidate, (None, 0))[0] is block:
            return candidate
    return None


def climb_conditionals(index: ScriptIndex, stmt: cst.BaseStatement) -> cst.BaseStatement:
    """A model built in `if/else` branches is placed after the whole `if`."""
    while stmt in index.parent_of and isinstance(index.parent_of[stmt], cst.If):
        if index.parent_of[stmt] is index.main_guard:
            break
        stmt = index.parent_of[stmt]
    return stmt


@dataclass(eq=False)
class Candidate:
    """A value called like a module in training, and where it is built."""

    spelling: str  # as called
    scope: Scope
    home: str  # as bound where it is built
    binding: Binding
    key: Root
    loss: bool  # named like a loss (`criterion`): wrapped only when an optimizer holds it


def model_site(index: ScriptIndex, candidate: Candidate, training_calls: set[str]) -> ModelSite:
    return _site(index, candidate.home, candidate.binding, training_calls)


def trained_candidates(index: ScriptIndex, training: set[str], stepped: list[Stepped]) -> list[Candidate]:
    """The modules to wrap: those called in training whose parameters a stepped optimizer holds;
    when an optimizer cannot be traced, every module called in training except losses,
    evaluation copies and values that are no modules."""
    candidates = [c for c in _candidates(index, training, training) if not_a_module(index, c.binding) is None]
    held = held_roots(index, stepped)
    if held is None:
        chosen = [c for c in candidates if not c.loss and not evaluation_copy(index, c.binding)]
        trained = [c for c in chosen if untrained(index, c.spelling, c.scope, c.binding, training) is None]
        chosen = trained or chosen  # frozen nets, target networks: kept only when nothing else is left
    else:
        chosen = _holding(index, candidates, held)
        missing = [h for h in held if not any(same_module(index, c.key, h) for c in chosen)]
        if missing:  # called only in a helper that training calls: `calc_loss(model, batch)`
            helpers = _called_from(index, training) - training
            chosen += _holding(index, [c for c in _candidates(index, helpers, training) if not_a_module(index, c.binding) is None], missing)
        chosen += _holding(index, candidates, _wholes(index, stepped, chosen))
    kept: list[Candidate] = []
    for candidate in chosen:
        if not any(k.key == candidate.key or (k.home, id(k.binding.node)) == (candidate.home, id(candidate.binding.node)) for k in kept):
            kept.append(candidate)
    return kept


def held_roots(index: ScriptIndex, stepped: list[Stepped]) -> list[Root] | None:
    """The modules the stepped optimizers hold; None when one of them cannot be traced."""
    if not stepped or any(s.owners is None for s in stepped):
        return None
    return [root(index, o.spelling, o.scope) for s in stepped for o in s.owners or ()] or None  # [`log_alpha`]: no module


def _holding(index: ScriptIndex, candidates: list[Candidate], held: list[Root]) -> list[Candidate]:
    """The candidates that are one of the `held` modules."""
    return [c for c in candidates if any(same_module(index, c.key, h) for h in held)]


def whole_module(index: ScriptIndex, owner: Owner) -> Root | None:
    """`model` for an optimizer over `model.backbone.parameters()`, when `model` is an instance of
    an nn.Module class of this file: the part's parameters are the model's own, and the model's
    forward runs the part (`self.classifier(self.backbone(x))`). None for a spelling without such
    a head (`agent.net` of a plain `Agent` class is no part of a module)."""
    head, _, attribute = owner.spelling.partition(".")
    if not attribute or head == "self":
        return None
    spelled, scope = origin(index, head, owner.scope)
    cls = constructed_class(index, home_binding(index, spelled, scope))
    if cls is None or not is_module_class(index, cls):
        return None
    return root(index, head, owner.scope)


def _wholes(index: ScriptIndex, stepped: list[Stepped], chosen: list[Candidate]) -> list[Root]:
    """The models that hold the stepped parts no chosen candidate is (param groups over
    `model.backbone` and `model.classifier`, with `model(x)` called in training)."""
    wholes: list[Root] = []
    for optimizer in stepped:
        for owner in optimizer.owners or ():
            if any(same_module(index, c.key, root(index, owner.spelling, owner.scope)) for c in chosen):
                continue
            whole = whole_module(index, owner)
            if whole is not None and whole not in wholes:
                wholes.append(whole)
    return wholes


def _candidates(index: ScriptIndex, scopes: set[str], training: set[str]) -> list[Candidate]:
    found: list[Candidate] = []
    for call in index.calls:
        if call.place.scope.name not in scopes or not is_local_callable(index, call):
            continue
        name = call.name or ""
        if _bound_to_non_module(index, name, losses=False):
            continue
        home_spelling, home_scope = origin(index, name, call.place.scope)
        binding = home_binding(index, home_spelling, home_scope)
        if binding is None:
            continue
        loss = any(word in name.lower() for word in LOSS_WORDS) or _bound_to_non_module(index, name)
        found.append(Candidate(name, call.place.scope, home_spelling, binding, root(index, name, call.place.scope), loss))
    return found


def _called_from(index: ScriptIndex, scopes: set[str]) -> set[str]:
    """The functions of this file that code in `scopes` calls, transitively."""
    return reachable(index.derived("callees_by_name", lambda: _callees_by_name(index)), scopes)


def _callees_by_name(index: ScriptIndex) -> dict[str, list[str]]:
    """Scope name -> the names of the functions of this file its calls run (scopes go by name)."""
    callees: dict[str, list[str]] = {}
    for call in index.calls:
        callee = callee_scope(index, call)
        if callee is not None:
            callees.setdefault(call.place.scope.name, []).append(callee.name)
    return callees


def _site(index: ScriptIndex, spelling: str, binding: Binding, training_calls: set[str]) -> ModelSite:
    anchor = climb_conditionals(index, binding.place.stmt)
    block, position = index.block_of[anchor]
    data_parallel = _data_parallel_statements(index, spelling)
    wrap_after: cst.BaseStatement | None = anchor
    wrap_before: cst.BaseStatement | None = None
    names = _same_module_names(index, spelling, binding)
    for stmt in block.body[position + 1 :]:
        if _compiles(index, stmt, spelling):
            wrap_before, wrap_after = stmt, None
            break
        if reinitialization(index, stmt, names) is not None and not isinstance(stmt, (cst.For, cst.While)):
            wrap_after = stmt  # `model.apply(init_weights)`: the wrapper copies rank 0's weights, so after it
            continue
        if _freezes(stmt, names):
            wrap_after = stmt  # DDP registers the parameters that require grad when it is built
            continue
        if isinstance(stmt, (cst.FunctionDef, cst.ClassDef)) and _wrapped_further_down(index, block, stmt, data_parallel):
            continue  # a `def` runs nothing: the script's own DataParallel, below it, says where the wrap goes
        if starts_training(index, stmt, spelling, training_calls):
            break
        if (_sets_up(stmt, spelling) or _adjusts(index, stmt, names) or _rebinds_global(index, stmt, spelling) or sets_requires_grad(index, stmt, names) is not None
                or model_cast(index, stmt, names) is not None or any(stmt is d for d in data_parallel)):
            wrap_after = stmt  # a DataParallel line may stay as a move (`net = DataParallel(m).cuda()` -> `m.cuda()`)
    return ModelSite(
        spelling=spelling,
        scope=binding.place.scope,
        wrap_after=wrap_after,
        wrap_before=wrap_before,
        data_parallel=data_parallel,
    )


def _rebinds_global(index: ScriptIndex, stmt: cst.BaseStatement, spelling: str) -> bool:
    """`stmt` calls a function of this file that binds the module's `spelling` again (`global
    model`, then `model = torch.load(f)`): a resume before training, which the wrap must follow."""
    for call in index.calls_under(stmt):
        function = index.functions.get(spell(call.func) or "")
        if (function is not None and isinstance(function.node, cst.FunctionDef) and function.class_name is None
                and spelling in declared_global(function.node) and index.bindings_of_in(spelling, function)):
            return True
    return False


def declared_global(function: cst.Module | cst.FunctionDef) -> set[str]:
    """The names a function's own `global` statements declare."""
    return {item.name.value for node in descendants(function) if isinstance(node, cst.Global) for item in node.names}


def _wrapped_further_down(index: ScriptIndex, block: cst.CSTNode, stmt: cst.BaseStatement,
                          data_parallel: list[cst.BaseStatement]) -> bool:
    """A DataParallel of the model stands in `block` after `stmt`."""
    position = index.block_of[stmt][1]
    tops = (top_statement(index, each, block) for each in data_parallel)
    return any(top is not None and index.block_of[top][1] > position for top in tops)


def changes_parameters(index: ScriptIndex, stmt: cst.CSTNode, names: set[str], depth: int = 0) -> bool:
    """Casts or moves the model, switches its gradients, replaces a part of it or draws its weights
    again, itself or in a function of this file it hands the model to (`add_lora(model)`), a few
    calls deep: what a wrapper that takes the parameters as they are when it is built (DDP) must
    follow. A function that only reads the model (`make_optimizer(model)`) changes nothing."""
    if (model_cast(index, stmt, names) is not None or sets_requires_grad(index, stmt, names) is not None
            or reinitialization(index, stmt, names) is not None or any(replaces_part(stmt, name) for name in names)):
        return True
    if depth >= 3:
        return False
    for call in index.calls_under(stmt):
        function = index.functions.get(spell(call.func) or "")
        if function is None or not isinstance(function.node, cst.FunctionDef) or function.class_name:
            continue
        given = {function.params[i] for i, arg in enumerate(a for a in call.args if a.keyword is None and not a.star)
                 if i < len(function.params) and spell(arg.value) in names}
        given |= {arg.keyword.value for arg in call.args if arg.keyword is not None and spell(arg.value) in names}
        if given and changes_parameters(index, function.node, given, depth + 1):
            return True
    return False


def model_cast(index: ScriptIndex, node: cst.CSTNode, names: set[str]) -> cst.Call | None:
    """The first call under `node` that casts or moves one of `names` (`model.to(device)`,
    `model.to(device).to(torch.bfloat16)`, `model.half()`, `torch.compile(model).cuda()`)."""
    for call in index.calls_under(node):
        func = call.func
        if isinstance(func, cst.Attribute) and func.attr.value in CASTS and _cast_receiver(index, func.value) in names:
            return call
    return None


def _cast_receiver(index: ScriptIndex, value: cst.BaseExpression) -> str | None:
    """`model` in `model`, `model.to(device)`, `torch.compile(model)`."""
    while isinstance(value, cst.Call):
        if isinstance(value.func, cst.Attribute) and value.func.attr.value in CASTS:
            value = value.func.value
        elif index.qualify(value.func) == COMPILE and value.args:
            value = value.args[0].value
        else:
            return None
    return spell(value)


@dataclass(frozen=True)
class Switch:
    """A statement or call that switches the gradients of a model or of a part of it."""

    node: cst.CSTNode  # the `requires_grad_(...)` call, the `x.requires_grad = ...` assignment, or the loop
    owner: str  # what it switches: `model`, `model.backbone`
    on: bool | None  # True: made trainable, False: frozen, None: either (`p.requires_grad = epoch > 3`)
    stmt: cst.BaseStatement  # the statement that holds it


def requires_grad_switches(index: ScriptIndex, node: cst.CSTNode, names: set[str]) -> list[Switch]:
    """Where `node` (a statement, a function or class, the module) switches the gradients of one of
    `names` or a part of it: `model.x.requires_grad_(False)`, `model.x.weight.requires_grad = False`,
    `p.requires_grad = ...` in a loop over `model.x.parameters()`."""
    found: list[Switch] = []
    for switch_node, stmt in index.derived("switches_under", lambda: _switches_under(index)).get(id(node), []):
        if isinstance(switch_node, cst.For):
            owner = _parameters_owner(switch_node, names)
            # _switched_to gives "none", a str, for a node that switches nothing
            states = [state for n in descendants(switch_node.body) if not isinstance(state := _switched_to(n), str)]
            if owner is not None and states:
                found.append(Switch(switch_node, owner, states[0] if len(set(states)) == 1 else None, stmt))
            continue
        owner = base_spelling(_switched_value(switch_node))
        if _part_of_any(owner, names) and not any(isinstance(s.node, cst.For) and contains(s.node, lambda n: n is switch_node)
                                                  for s in found):
            on = _switched_to(switch_node)
            assert not isinstance(on, str)  # never "none": _switches_under keeps only switches
            found.append(Switch(switch_node, owner, on, stmt))
    return found


def sets_requires_grad(index: ScriptIndex, node: cst.CSTNode, names: set[str]) -> cst.CSTNode | None:
    """The first place under `node` that switches the gradients of one of `names` (see requires_grad_switches)."""
    switches = requires_grad_switches(index, node, names)
    return switches[0].node if switches else None


def _switches_under(index: ScriptIndex) -> dict[int, list[tuple[cst.CSTNode, cst.BaseStatement]]]:
    """id of every statement, function, class and the module -> the places under it that may switch
    gradients, in source order: `x.requires_grad_(...)` calls, `x.requires_grad = ...` assignments,
    loops over `x.parameters()` or `x.named_parameters()`. Read off the index's calls, statements and
    loops once, rather than walking every expression each time a statement is asked about."""
    places: list[tuple[cst.CSTNode, cst.BaseStatement]] = []
    for call in index.calls:
        if isinstance(call.node.func, cst.Attribute) and call.node.func.attr.value == "requires_grad_":
            places.append((call.node, call.place.stmt))
    for small, stmt in small_statements(index):
        if _switched_to(small) != "none" and isinstance(small, cst.Assign):
            places.append((small, stmt))
    for loop in index.loops:
        if isinstance(loop.node, cst.For) and any(isinstance(c.func, cst.Attribute) and c.func.attr.value in ("parameters", "named_parameters")
                                                  for c in calls_in(loop.node.iter)):
            places.append((loop.node, loop.node))
    order = index.statement_order()
    places.sort(key=lambda place: order.get(place[1], 0))
    under: dict[int, list[tuple[cst.CSTNode, cst.BaseStatement]]] = {id(index.module): places}
    for place in places:
        for around in index.enclosing_statements(place[1]):
            under.setdefault(id(around), []).append(place)
    return under


def small_statements(index: ScriptIndex) -> list[tuple[cst.BaseSmallStatement, cst.BaseStatement]]:
    """Every small statement with the statement that holds it: its line, or the compound statement
    of a one-line suite (`if epoch == k: p.requires_grad = False`)."""
    return index.derived("small_statements", lambda: _small_statements(index))


def _small_statements(index: ScriptIndex) -> list[tuple[cst.BaseSmallStatement, cst.BaseStatement]]:
    found: list[tuple[cst.BaseSmallStatement, cst.BaseStatement]] = []
    for stmt in index.scope_of:
        parts = [stmt] if isinstance(stmt, cst.SimpleStatementLine) else [
            suite for child in child_nodes(stmt) for suite in (child, *child_nodes(child)) if isinstance(suite, cst.SimpleStatementSuite)]
        found += [(small, stmt) for part in parts for small in part.body]
    return found


def _switched_to(node: cst.CSTNode) -> bool | None | str:
    """True/False/None (an expression) for `x.requires_grad_(...)` or `x.requires_grad = ...`; "none" otherwise."""
    if isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute) and node.func.attr.value == "requires_grad_":
        value = node.args[0].value if node.args else cst.Name("True")  # requires_grad_() turns gradients on
    elif isinstance(node, cst.Assign) and any(isinstance(t.target, cst.Attribute) and t.target.attr.value == "requires_grad"
                                              for t in node.targets):
        value = node.value
    else:
        return "none"
    return {"True": True, "False": False}.get(spell(value) or "")


def _switched_value(node: cst.CSTNode) -> cst.BaseExpression:
    """`model.x` in `model.x.requires_grad_(False)` and in `model.x.requires_grad = False`."""
    if isinstance(node, cst.Call):
        assert isinstance(node.func, cst.Attribute)  # `x.requires_grad_(...)`: how the caller found it
        return node.func.value
    assert isinstance(node, cst.Assign)
    return next(t.target.value for t in node.targets if isinstance(t.target, cst.Attribute) and t.target.attr.value == "requires_grad")


def _parameters_owner(loop: cst.For, names: set[str]) -> str | None:
    """`model.backbone` for `for p in model.backbone.parameters()` (or `named_parameters()`)."""
    for c in calls_in(loop.iter):
        if isinstance(c.func, cst.Attribute) and c.func.attr.value in ("parameters", "named_parameters"):
            owner = base_spelling(c.func.value)
            if _part_of_any(owner, names):
                return owner
    return None


def _part_of_any(spelled: str | None, names: set[str]) -> TypeGuard[str]:
    return spelled is not None and any(spelled == n or spelled.startswith(n + ".") for n in names)


def replaces_part(stmt: cst.CSTNode, spelling: str) -> bool:
    """`model.head = nn.Linear(...)`: a part of the model built anew."""
    return contains(stmt, lambda node: isinstance(node, cst.AssignTarget) and (spell(node.target) or "").startswith(spelling + ".")
                    and (spell(node.target) or "").count(".") == spelling.count(".") + 1)


def _same_module_names(index: ScriptIndex, spelling: str, binding: Binding) -> set[str]:
    """The model's name and the other names of its scope bound to the same module (`net = ssd_net`)."""
    scope = binding.place.scope
    key = root(index, spelling, scope)
    others = {b.target for b in index.bindings_in(scope) if b.target != spelling and "." not in b.target}
    return {spelling} | {name for name in others if same_module(index, root(index, name, scope), key)}


def _data_parallel_statements(index: ScriptIndex, spelling: str) -> list[cst.BaseStatement]:
    """Every `model = nn.DataParallel(model)` (each, or the `if` around it when that `if` holds
    nothing else than the wrap and prints about it: `if torch.cuda.device_count() > 1:`) in the
    scope of the first one found: a script that wraps on two paths (`if args.resume: ... else: ...`)
    has both replaced, so no path keeps a DataParallel around the distributed wrapper."""
    found: list[cst.BaseStatement] = []
    scope = None
    for binding in index.bindings_of(spelling):
        if wraps_itself(index, binding):
            value = without_moves(binding.value)
            assert isinstance(value, cst.Call)
            if index.qualify(value.func) not in DATA_PARALLEL:
                continue
            if scope is None:
                scope = binding.place.scope
            elif binding.place.scope is not scope:
                continue
            stmt = binding.place.stmt
            parent = index.parent_of.get(stmt)
            if isinstance(parent, cst.If) and parent.orelse is None and any(s is stmt for s in parent.body.body) and all(
                s is stmt or _only_prints(s) for s in parent.body.body
            ):
                stmt = parent
            if all(stmt is not seen for seen in found):
                found.append(stmt)
    return found


def _only_prints(stmt: cst.BaseStatement | cst.BaseSmallStatement) -> bool:
    return isinstance(stmt, cst.SimpleStatementLine) and all(
        isinstance(s, cst.Expr) and isinstance(s.value, cst.Call) and spell(s.value.func) in ("print", "logging.info", "logger.info")
        for s in stmt.body
    )


def _compiles(index: ScriptIndex, stmt: cst.BaseStatement, spelling: str) -> bool:
    return any(
        index.qualify(call.func) == COMPILE and any(spell(a.value) == spelling for a in call.args)
        for call in index.calls_under(stmt)
    )


def starts_training(index: ScriptIndex, stmt: cst.BaseStatement, spelling: str, training_calls: set[str]) -> bool:
    """A loop, a forward of the model, or a call that trains or receives the model."""
    if isinstance(stmt, (cst.For, cst.While, cst.FunctionDef, cst.ClassDef)):
        return True
    for call in index.calls_under(stmt):
        name = spell(call.func) or ""
        if name == spelling or name.rsplit(".", 1)[-1] in training_calls:
            return True
        qualified = index.qualify(call.func) or ""
        passes_model = any(spell(a.value) == spelling for a in call.args)
        if passes_model and runs_no_forward(index, index.functions.get(qualified)):
            continue  # `count_parameters(model)`: looks at the weights, runs nothing
        if passes_model and not qualified.startswith("torch.") and qualified not in DATA_PARALLEL:
            return True
    return False


def runs_no_forward(index: ScriptIndex, scope: Scope | None) -> bool:
    """A function of this file that never runs a forward of what it is given: it calls neither its
    arguments nor a method of theirs other than `parameters()` and the like, and the functions it
    calls do the same (`count_parameters(model)`, `replace_linear_with_lora(model, ...)`)."""
    if scope is None or not isinstance(scope.node, cst.FunctionDef) or scope.class_name:
        return False
    return index.derived("runs_no_forward", lambda: _running_no_forward(index))[scope.name]


def _running_no_forward(index: ScriptIndex) -> dict[str, bool]:
    """`runs_no_forward` for every function of this file at once: a function fails when its own
    calls do, or when any function it reaches through calls by name fails (computed backwards from
    the failing ones, so a long chain of helpers is walked once, not once per helper)."""
    failing: list[str] = []
    callers: dict[str, set[str]] = {}  # function name -> the functions that call it by name
    for name, scope in index.functions.items():
        if not _calls_no_forward(index, name, scope, callers):
            failing.append(name)
    result = {name: True for name in index.functions}
    while failing:
        name = failing.pop()
        if result[name]:
            result[name] = False
            failing.extend(callers.get(name, ()))
    return result


def _calls_no_forward(index: ScriptIndex, name: str, scope: Scope, callers: dict[str, set[str]]) -> bool:
    """The function's own calls run no forward of its arguments; notes which functions it calls."""
    if not isinstance(scope.node, cst.FunctionDef) or scope.class_name:
        return False
    for call in calls_in(scope.node.body):
        spelled = spell(call.func) or ""
        head, _, method = spelled.partition(".")
        if head in scope.params and (not method or method not in NOT_COMPUTATION):
            return False
        if spelled.startswith("self."):
            return False
        if spelled in index.functions and spelled != name:
            callers.setdefault(spelled, set()).add(name)
    return True


def _adjusts(index: ScriptIndex, stmt: cst.BaseStatement, names: set[str]) -> bool:
    """Freezes, unfreezes or rebuilds parts of the model without running it, possibly under an
    `if` (`if args.lora: replace_linear_with_lora(model, ...)`)."""
    if any(isinstance(n, cst.For) and _freezes(n, names) for n in descendants(stmt)):
        return True
    return any(
        spell(call.func) in index.functions and any(spell(a.value) in names for a in call.args)
        and runs_no_forward(index, index.functions[spell(call.func) or ""])
        for call in index.calls_under(stmt)
    )


def _freezes(stmt: cst.BaseStatement, names: set[str]) -> bool:
    """`for p in model.parameters(): p.requires_grad = False` (or of a part of the model): it only
    sets which weights train, nothing runs."""
    if not isinstance(stmt, cst.For) or not isinstance(stmt.iter, cst.Call) or not isinstance(stmt.iter.func, cst.Attribute):
        return False
    owner = base_spelling(stmt.iter.func.value) or ""
    if stmt.iter.func.attr.value not in ("parameters", "named_parameters", "modules", "named_modules", "children"):
        return False
    if not any(owner == n or owner.startswith(n + ".") for n in names):
        return False
    return all(
        isinstance(s, cst.SimpleStatementLine) and all(_sets_requires_grad(small) for small in s.body)
        for s in stmt.body.body
    ) if isinstance(stmt.body, cst.IndentedBlock) else False


def _sets_requires_grad(small: cst.BaseSmallStatement) -> bool:
    if isinstance(small, cst.Assign):
        return all(isinstance(t.target, cst.Attribute) and t.target.attr.value == "requires_grad" for t in small.targets)
    if isinstance(small, cst.Expr) and isinstance(small.value, cst.Call) and isinstance(small.value.func, cst.Attribute):
        return small.value.func.attr.value in ("requires_grad_", "eval", "train")
    return False


def _sets_up(stmt: cst.BaseStatement, spelling: str) -> bool:
    """Moves, loads or rebinds the model (`model.to(device)`, `model.load_state_dict(...)`), or
    replaces a part of it (`model.out_head = nn.Linear(...)`)."""

    def is_setup(node: cst.CSTNode) -> bool:
        if isinstance(node, cst.Attribute) and node.attr.value in SETUP_METHODS:
            return spell(node.value) == spelling
        if isinstance(node, cst.AssignTarget):
            target = spell(node.target) or ""
            return target == spelling or (target.startswith(spelling + ".") and target.count(".") == spelling.count(".") + 1)
        return False

    return contains(stmt, is_setup)



def aliases(index: ScriptIndex, site: ModelSite) -> set[tuple[str, str]]:
    """(spelling, scope name) pairs under which the wrapped model is reached after wrapping: the
    site itself, `trainer.model` for a `self.model` site, the class's methods, functions that use a
    module-level model, the functions nested in the site's function that read its name (closures),
    and the parameters of functions of this file that receive it (every caller
    followed, a few levels up: `sample(model, ...)`, `sample(self.model, ...)`, `log(net=model)`).
    A parameter that some callers give the wrapped model and others something else (the unwrapped
    module, an EMA copy) is among them too: `unwrapped_too` names those."""
    known = index.memo("aliases")
    if site not in known:
        found = _direct_aliases(index, site)
        direct = set(found)
        for scope in index.functions.values():
            for param in scope.params:
                if _receives(index, site, param, scope, direct) in (WRAPPED, MIXED):
                    found.add((param, scope.name))
        known[site] = frozenset(found)
    return set(known[site])


def unwrapped_too(index: ScriptIndex, site: ModelSite) -> set[tuple[str, str]]:
    """(parameter, function) pairs among `aliases` that other callers pass something else than the
    wrapped model: there the model is reached as `getattr(x, "module", x)`."""
    direct = _direct_aliases(index, site)
    return {
        (param, scope.name)
        for scope in index.functions.values()
        for param in scope.params
        if _receives(index, site, param, scope, direct) == MIXED
    }


@dataclass(frozen=True)
class SometimesParameterless:
    """A model whose class makes all of its parameters under one condition of its `__init__`
    (`if self.nsplits > 1: self.tail = nn.Parameter(...)`): without them DDP refuses to wrap it."""

    cls: str
    condition: str  # the test, as the class's file spells it


def parameters_only_when(index: ScriptIndex, site: ModelSite, folder: str, read: ReadModule) -> SometimesParameterless | None:
    """The condition under which the model's class makes every parameter and submodule it has
    (`self.x = nn.Parameter(...)`, `self.x = nn.Linear(...)`), when it makes none outside it; None
    otherwise. The class is one of this program, or one imported from a module of `folder`."""
    return index.answer("parameters_only_when", id(site), lambda: _parameters_only_when(index, site, folder, read))


def _parameters_only_when(index: ScriptIndex, site: ModelSite, folder: str, read: ReadModule) -> SometimesParameterless | None:
    bindings = index.bindings_of_in(site.spelling, site.scope)
    own = {c for b in bindings if (c := constructed_class(index, b)) is not None}
    imported = {c for b in bindings if (c := _imported_class(index, b)) is not None}
    if len(own | imported) != 1:
        return None
    if own:
        cls = own.pop()
        scope = index.functions.get(f"{cls}.__init__")
        return _made_under_one_condition(cls, scope.node) if scope is not None and isinstance(scope.node, cst.FunctionDef) else None
    qualified = imported.pop()
    init = foreign_method(folder, qualified, "__init__", read)
    return _made_under_one_condition(qualified.rsplit(".", 1)[-1], init) if init is not None else None


def _made_under_one_condition(cls: str, init: cst.FunctionDef) -> SometimesParameterless | None:
    conditions: list[cst.If | None] = []

    def visit(node: cst.CSTNode, condition: cst.If | None) -> None:
        if isinstance(node, cst.Assign) and isinstance(node.value, cst.Call) and any(
                (spell(t.target) or "").startswith("self.") for t in node.targets) and (
                (spell(node.value.func) or "").rsplit(".", 1)[-1][:1].isupper()):  # nn.Linear(...), NoisyLinear(...)
            conditions.append(condition)
        for child in child_nodes(node):
            if not isinstance(child, (cst.FunctionDef, cst.ClassDef, cst.Lambda)):
                visit(child, node if isinstance(node, cst.If) and condition is None else condition)

    visit(init.body, None)
    first = conditions[0] if conditions else None
    if first is None or first.orelse is not None or any(c is not first for c in conditions):
        return None  # made outside it, or in every branch of an if/else
    return SometimesParameterless(cls, cst.Module([]).code_for_node(first.test))


WRAPPED, OTHER, MIXED = "wrapped", "other", "mixed"


def _direct_aliases(index: ScriptIndex, site: ModelSite) -> set[tuple[str, str]]:
    found = {(site.spelling, site.scope.name)}
    if site.spelling.startswith("self.") and site.scope.class_name:
        attribute = site.spelling.removeprefix("self.")
        for binding in index.bindings:  # `trainer = Trainer(...)` -> `trainer.model` outside the class
            if isinstance(binding.value, cst.Call) and spell(binding.value.func) == site.scope.class_name:
                found.add((f"{binding.target}.{attribute}", binding.place.scope.name))
    binding_scopes = {id(b.place.scope) for b in index.bindings_of(site.spelling)}
    for scope in index.functions.values():
        if site.spelling.startswith("self."):
            if scope.class_name == site.scope.class_name:
                found.add((site.spelling, scope.name))
            continue
        uses_global = site.scope.is_module and site.spelling not in scope.params and id(scope) not in binding_scopes
        if uses_global:
            found.add((site.spelling, scope.name))
    if not site.spelling.startswith("self."):  # a method's nested functions share its class_name above
        head = site.spelling.split(".")[0]
        found.update((site.spelling, closure.name) for closure in closures_reading(index, head, site.scope))
    return found | _returned_to(index, site)


def _returned_to(index: ScriptIndex, site: ModelSite) -> set[tuple[str, str]]:
    """`model = main()` where main() ends with `return model` (or `losses, model = main()` with
    `return losses, model`): the caller's name is the wrapped model too, unless the caller binds
    that name again elsewhere, other than in straight-line code after the call (`model =
    GPTModel(cfg)` to reload: then only the uses before it are the wrapped model, see `is_after`)."""
    if site.scope.is_module:
        return set()
    in_order = {(h.name, id(h.call.node)) for h, _held in _handed_back_in_order(index, site)}
    returned = (_returned_position(r.value, site.spelling) for r in index.returns_under(site.scope.node) if r.value)
    positions = {position for position in returned if position is not None}
    found: set[tuple[str, str]] = set()
    for call in calls_of(index, site.scope):
        stmt = call.place.stmt
        assign = stmt.body[0] if isinstance(stmt, cst.SimpleStatementLine) else None
        if not isinstance(assign, cst.Assign) or assign.value is not call.node or len(assign.targets) != 1:
            continue
        target = assign.targets[0].target
        for position in positions:
            element = target if position == -1 else (
                target.elements[position].value if isinstance(target, cst.Tuple) and position < len(target.elements) else None)
            name = spell(element) if element is not None else None
            # a name the caller binds again (`model = GPTModel(...)` to reload) is not followed
            if name is not None and (len(index.bindings_of_in(name, call.place.scope)) == 1
                                     or (name, id(call.node)) in in_order):
                found.add((name, call.place.scope.name))
    return found


def _handed_back_in_order(index: ScriptIndex, site: ModelSite) -> list[tuple[HandedBack, set[int]]]:
    """The callers' names for the model `site` returns that the caller binds again in straight-line
    code (trained.rebound_in_order), each with the ids of the statements where it still holds the
    returned model (the call's, the reads before the new binding, and the statements inside them)."""
    known: dict[ModelSite, list[tuple[HandedBack, set[int]]]] = index.memo("handed_back_in_order")
    if site not in known:
        known[site] = [] if site.scope.is_module else [
            (h, statements_within(index, [h.call.place.stmt, *h.reads]))
            for h in handed_back(index, site.scope, {site.spelling}) if rebound_in_order(index, h)]
    return known[site]


def _holds_another_model(index: ScriptIndex, stmt: cst.BaseStatement, site: ModelSite) -> bool:
    """`stmt` names, in a caller, a handed-back name that holds something else there: the caller
    has bound it again (`model = GPTModel(cfg)`), or has not yet been handed the model."""
    return any(index.scope_of.get(stmt) is handed.call.place.scope and id(stmt) not in held
               and handed.name in read_names(stmt) for handed, held in _handed_back_in_order(index, site))


def _returned_position(value: cst.BaseExpression, spelling: str) -> int | None:
    """-1 when `return model`, k when the model is the k-th of a returned tuple, else None."""
    if spell(value) == spelling:
        return -1
    if isinstance(value, cst.Tuple):
        return next((k for k, e in enumerate(value.elements) if spell(e.value) == spelling), None)
    return None


def _receives(index: ScriptIndex, site: ModelSite, param: str, scope: Scope, direct: set[tuple[str, str]],
              depth: int = 0) -> str | None:
    """What the callers of `scope` pass for `param`: the wrapped model (WRAPPED), something else
    (OTHER), both (MIXED); None when no caller of this file is seen."""
    if depth > 4 or param == "self" or not isinstance(scope.node, cst.FunctionDef):
        return None
    position = scope.params.index(param) - (1 if scope.class_name else 0)
    kinds: set[str] = set()
    for call in calls_of(index, scope):
        arg = argument(call.node, param, position)
        if arg is None:
            continue
        spelled = spell(arg.value)
        caller = call.place.scope
        if spelled is not None and spelled in caller.params and (spelled, caller.name) not in direct:
            kind = _receives(index, site, spelled, caller, direct, depth + 1)
            kinds.update((WRAPPED, OTHER) if kind == MIXED else {kind or OTHER})
        elif spelled is not None and (spelled, caller.name) in direct:
            kinds.add(WRAPPED if is_after(index, call.place.stmt, site) else OTHER)
        else:
            kinds.add(OTHER)
    if not kinds:
        return None
    if kinds == {WRAPPED}:
        return WRAPPED
    return MIXED if WRAPPED in kinds else OTHER


def is_after(index: ScriptIndex, stmt: cst.BaseStatement, site: ModelSite, seen: frozenset[int] = frozenset()) -> bool:
    """Whether `stmt` runs after the wrapper is applied (statement order within the wrap's block).
    A statement in a function defined in that block runs when the function is called: after the
    wrap when one of its calls is (`def train(): model.init_hidden()` above `model = DDP(model)`,
    called below it). A statement of a caller the model is handed back to, where the caller's name
    for it holds another model (bound again in straight-line code), is not: there the name is no
    longer the wrapped model."""
    if _holds_another_model(index, stmt, site):
        return False
    anchor = site.wrap_before or site.wrap_after
    assert anchor is not None
    block, position = index.block_of[anchor]
    top = top_statement(index, stmt, block)
    if top is None:
        if index.scope_of.get(stmt) is not site.scope:
            return True
        return _after_the_block_of(index, stmt, anchor)
    at = index.block_of[top][1]
    after = at >= position if site.wrap_before is not None else at > position
    if after or not isinstance(top, cst.FunctionDef) or id(top) in seen:
        return after
    first = top.body.body[0] if top.body.body else None
    # the first of a one-line body (`def f(): return x`) is a small statement, which has no scope
    function = index.scope_of.get(first) if isinstance(first, cst.BaseStatement) else None
    callers = calls_of(index, function) if function is not None and function.node is top else []
    return any(is_after(index, call.place.stmt, site, seen | {id(top)}) for call in callers)


def _after_the_block_of(index: ScriptIndex, stmt: cst.BaseStatement, anchor: cst.BaseStatement) -> bool:
    """`stmt` is outside the block of `anchor` (the wrap inside a `try:` or an `if`): it runs
    after the wrap when it follows the compound statement that holds the wrap, in a block around it."""
    for around in index.enclosing_statements(anchor)[1:]:
        outer_block, position = index.block_of[around]
        top = top_statement(index, stmt, outer_block)
        if top is not None:
            return top is not around and index.block_of[top][1] > position
    return False


# Methods that do not run a module's computation: seeing them is no sign of how it is trained.
NOT_COMPUTATION = frozenset(
    {
        "parameters", "named_parameters", "buffers", "named_buffers", "children", "modules", "named_modules",
        "train", "eval", "zero_grad", "to", "cuda", "cpu", "float", "half", "double", "bfloat16", "type",
        "state_dict", "load_state_dict", "requires_grad_", "apply", "register_buffer", "add_module", "size",
        "named_children", "register_parameter", "get_submodule", "numel",
    }
)


# An explanation: text, with nodes standing for "line N" of the script where they are.
Explanation = list[str | cst.CSTNode]


# Why a module trained through another method cannot be converted, as a wrapper's target says it;
# a target whose wrapper keeps the class says it its own way (steps.trained_models)
ONLY_FORWARD = "a wrapper only sees forward(), so that work bypasses it"


def unwrappable(index: ScriptIndex, training: set[str], stepped: list[Stepped], chosen: list[Candidate],
                fallback: cst.CSTNode | None) -> tuple[Explanation, cst.CSTNode | None] | None:
    """Why the module training updates cannot be wrapped (MIG104), in the script's own words;
    None when every module a stepped optimizer holds is wrapped."""
    for optimizer in stepped:
        for owner in optimizer.owners or ():
            if owner.spelling == "self" and optimizer.step.place.scope.class_name == owner.scope.class_name:
                return _trains_itself(index, optimizer, owner), optimizer.step.node
    closure = _closure_step(index, training)
    if closure is not None:
        return closure
    held = held_roots(index, stepped)
    reached = _called_from(index, training)
    if held is not None:
        for optimizer in stepped:
            for owner in optimizer.owners or ():
                keys = [root(index, owner.spelling, owner.scope), whole_module(index, owner)]
                if not any(same_module(index, c.key, key) for c in chosen for key in keys if key is not None):
                    return _not_called(index, reached, owner, optimizer.spelling)
        return None
    if chosen:
        return None
    owners = [o for s in stepped for o in s.owners or ()] or _owners_of_any_optimizer(index)
    if owners:
        return _not_called(index, reached, owners[0], None)
    module_call = _module_method_call(index, reached)
    if module_call is not None:
        called, use = module_call
        return [f"`{called}` is called only through `{called}.{use.node.attr.value}(...)` (line ", use.node, "), not through "
                f"its forward(): {ONLY_FORWARD}; route the training "
                "computation through forward(); the file is left unchanged"], use.node
    if index.local_modules:  # a program: the script and the modules of its project (analysis.program)
        return ["no module that the script or the modules of its project read with it build is called in the training "
                "code (it may be built or run in a module that was not read with them); the files are left unchanged: "
                "wrap the trained module by hand"], fallback
    return ["no module this file builds is called in the training code (it may be built or run in another module); "
            "the file is left unchanged: wrap the trained module by hand"], fallback


def _closure_step(index: ScriptIndex, training: set[str]) -> tuple[Explanation, cst.CSTNode] | None:
    """`optimizer.step(closure)` whose closure runs the backward (LBFGS and the like): the forward
    runs inside a function the optimizer calls, which this tool does not follow."""
    names = {name.rsplit(".", 1)[-1] for name in training}
    for call in index.calls:
        func = call.node.func
        if not (isinstance(func, cst.Attribute) and func.attr.value == "step" and call.node.args):
            continue
        given = call.node.args[0].value
        backward_lambda = isinstance(given, cst.Lambda) and contains(
            given, lambda n: isinstance(n, cst.Attribute) and n.attr.value == "backward")
        if backward_lambda or spell(given) in names:
            closure = "a lambda" if isinstance(given, cst.Lambda) else f"`{index.module.code_for_node(given)}`"
            stepped = index.module.code_for_node(func.value)
            return [f"`{stepped}.step(...)` (line ", call.node, f") is given {closure}, "
                    "a closure that runs the forward and backward each time the optimizer calls it (as LBFGS needs); "
                    "closure steps are not converted (a wrapper's model is not followed into the closure, and a "
                    "DeepSpeed engine's step() takes no closure): the file is left unchanged"], call.node
    return None


def _trains_itself(index: ScriptIndex, optimizer: Stepped, owner: Owner) -> Explanation:
    method = optimizer.step.place.scope
    callers = calls_of(index, method)
    through: Explanation = [f", called as `{callers[0].name}(...)` (line ", callers[0].node, ")"] if callers else []
    short = method.name.rsplit(".", 1)[-1]
    return [f"`{optimizer.spelling}` holds the parameters of `{owner.scope.class_name}` itself (line ", owner.node,
            f") and is stepped inside its own method `{method.name}()`", *through, ": the module runs its forward and its "
            "update where a wrapper around the instance never sees them, so that work bypasses it; "
            "the file is left unchanged: call the instance (its forward) from the training code and step the "
            f"optimizer there instead of in `{short}()`"]


def _not_called(index: ScriptIndex, reached: set[str], owner: Owner, optimizer: str | None) -> tuple[Explanation, cst.CSTNode]:
    """At the call that runs the module some other way, or else where the optimizer takes it."""
    spelled = owner.spelling if owner.spelling != "self" else f"self ({owner.scope.class_name})"
    subject = f"`{optimizer}` steps the parameters of `{spelled}`" if optimizer else f"the optimizer's parameters come from `{spelled}`"
    use = _method_use(index, reached, owner)
    if use is not None:
        called = f"{index.module.code_for_node(use.node.value)}.{use.node.attr.value}"
        inside = _runs_inside(index, use, owner)
        runs: Explanation = [f", which runs `{index.module.code_for_node(inside.node)}(...)` (line ", inside.node, ")"] if inside else []
        return [f"{subject} (line ", owner.node, f"), which is called only through `{called}(...)` (line ", use.node, ")",
                *runs, f", not through its forward(): {ONLY_FORWARD}; "
                "route the training computation through forward(); the file is left unchanged"], use.node
    return [f"{subject} (line ", owner.node, "), which the training code of this file never calls by name (it may run through a "
            "container, a callback or another module); the file is left unchanged: wrap it by hand where its forward runs"], owner.node


def _method_use(index: ScriptIndex, reached: set[str], owner: Owner) -> AttributeUse | None:
    """`agent.act(...)` for `agent.net` or `agent`, in training code or what it calls."""
    target = owner.spelling
    for use in index.attributes:
        if not use.called or use.place.scope.name not in reached or use.node.attr.value in NOT_COMPUTATION:
            continue
        spelled, _scope = origin(index, use.owner, use.place.scope)
        if spelled == target or target.startswith(spelled + "."):
            return use
    return None


def _runs_inside(index: ScriptIndex, use: AttributeUse, owner: Owner) -> AttributeUse | None:
    """In `agent.act` (a method of this file), the call of a method of `self.net` for `agent.net`."""
    head, _, attribute = owner.spelling.partition(".")
    if use.owner != head or not attribute or "." in attribute:
        return None
    cls = class_of_binding(index, head, use.place.scope) or next(
        (c for b in index.bindings if b.target == head and (c := constructed_class(index, b))), None
    )
    method = index.functions.get(f"{cls}.{use.node.attr.value}") if cls else None
    if method is None:
        return None
    return next(
        (u for u in index.attributes if u.place.scope is method and u.owner == f"self.{attribute}" and u.called
         and u.node.attr.value not in NOT_COMPUTATION),
        None,
    )


def _owners_of_any_optimizer(index: ScriptIndex) -> list[Owner]:
    owners: list[Owner] = []
    for call in index.calls:
        if (call.name or "").startswith("torch.optim.") and "lr_scheduler" not in (call.name or ""):
            owners.extend(optimizer_owners(index, call.node, call.place.scope) or [])
    return owners


def _module_method_call(index: ScriptIndex, reached: set[str]) -> tuple[str, AttributeUse] | None:
    """A method of an instance of one of this file's nn.Module classes called in training."""
    for use in index.attributes:
        if not use.called or use.place.scope.name not in reached or use.node.attr.value in NOT_COMPUTATION:
            continue
        if use.owner == "self":
            continue
        spelled, scope = origin(index, use.owner, use.place.scope)
        cls = constructed_class(index, home_binding(index, spelled, scope))
        if cls is not None and is_module_class(index, cls) and f"{cls}.{use.node.attr.value}" in index.functions:
            return use.owner, use
    return None


@dataclass(frozen=True)
class ForeignCallee:
    """A function of another module of the script's folder that a call runs: `evaluate.evaluate`
    (imported), or `modules.EMA.step_ema` (a method of an instance of a class imported from it)."""

    qualified: str
    method: bool  # called on an instance: the arguments start after `self`


def foreign_callees(index: ScriptIndex, call: CallSite) -> list[ForeignCallee]:
    """What `call` may run when it is a function imported from another module (`evaluate(net)`;
    through a star import, `from generate import *`, a function of each module star-imported), or
    a method of an instance built from an imported class (`ema = EMA(0.995)`; `ema.step_ema(m, net)`)."""
    head = spell(call.node.func)
    if call.name is None or head is None:
        return []
    if head.split(".")[0] in index.imports:
        return [ForeignCallee(call.name, method=False)]
    owner, _, method = head.rpartition(".")
    if not owner:
        defined = head in index.functions or head in index.classes
        return [] if defined else [ForeignCallee(f"{star}.{head}", method=False) for star in star_imports(index.module)
                                   if star and not star.startswith(".")]
    if "." in owner:
        return []
    cls = _imported_class(index, home_binding(index, owner, call.place.scope))
    return [ForeignCallee(f"{cls}.{method}", method=True)] if cls is not None else []


def _imported_class(index: ScriptIndex, binding: Binding | None) -> str | None:
    """The qualified name of an imported class a binding builds (`ema = EMA(0.995)` -> "modules.EMA")."""
    if binding is None or not isinstance(binding.value, cst.Call):
        return None
    func = binding.value.func
    name = spell(func)
    if name is None or name in index.classes or name.split(".")[0] not in index.imports:
        return None
    return index.qualify(func)


@dataclass(frozen=True)
class ForeignReads:
    """What a function of another module of the script's folder reads of a model handed to it:
    `evaluate(net, loader)` in evaluate.py reading `net.n_classes`."""

    path: str  # the module's file
    function: str  # as the module spells it: `evaluate`, `EMA.step_ema`
    param: str
    attributes: tuple[str, ...]  # read on the parameter (or in a method of its class it is handed to), other than what the wrapper answers
    forward: bool  # whether it calls the model (`param(x)`, `param.forward(x)`): a run past the wrapper


def foreign_reads(folder: str, callee: ForeignCallee, position: int | None, keyword: str | None,
                  safe: frozenset[str], read: ReadModule) -> ForeignReads | None:
    """The attributes that the function `callee` (of a module of `folder`, whose text `read` gives)
    reads on the parameter it receives at `position` (or as `keyword`), other than `safe` ones, also
    in the methods of its class it hands the parameter to (`self.reset_parameters(ema, model)`);
    None when the module is not read, does not parse, or reads nothing else."""
    found = _foreign_function(folder, callee, read)
    if found is None:
        return None
    path, spelled, function, methods = found
    param = _parameter(function, position + 1 if callee.method and position is not None else position, keyword)
    if param is None:
        return None
    reads: set[str] = set()
    forward = _reads_of(function, param, safe, methods, reads, seen={function.name.value})
    return ForeignReads(path, spelled, param, tuple(sorted(reads)), forward) if reads else None


def foreign_method(folder: str, cls: str, method: str, read: ReadModule) -> cst.FunctionDef | None:
    """The method `method` of the class `cls` (`utils.visualizer.Visualizer`) of a module of `folder`."""
    found = _foreign_function(folder, ForeignCallee(f"{cls}.{method}", method=True), read)
    return found[2] if found is not None else None


def foreign_function(folder: str, callee: ForeignCallee, read: ReadModule) -> tuple[str, cst.FunctionDef] | None:
    """The file and the definition of the function (or method) `callee` of a module of `folder`."""
    found = _foreign_function(folder, callee, read)
    return (found[0], found[2]) if found is not None else None


def _foreign_function(folder: str, callee: ForeignCallee, read: ReadModule
                      ) -> tuple[str, str, cst.FunctionDef, dict[str, cst.FunctionDef]] | None:
    """The file, the spelling, the function and the methods of its class (none for a function)."""
    qualified = callee.qualified
    if qualified.startswith(".."):
        return None
    module, _, name = qualified.lstrip(".").rpartition(".")
    cls = ""
    if callee.method:
        module, _, cls = module.rpartition(".")
    if not module:
        return None
    path = os.path.join(folder, module.replace(".", os.sep) + ".py")
    tree = _parsed(read(path))
    if tree is None:
        return None
    if not cls:
        function = next((s for s in tree.body if isinstance(s, cst.FunctionDef) and s.name.value == name), None)
        return (path, name, function, {}) if function is not None else None
    owner = next((s for s in tree.body if isinstance(s, cst.ClassDef) and s.name.value == cls), None)
    methods = {s.name.value: s for s in owner.body.body if isinstance(s, cst.FunctionDef)} if owner is not None else {}
    return (path, f"{cls}.{name}", methods[name], methods) if name in methods else None


def _parsed(text: str | None) -> cst.Module | None:
    if text is None:
        return None
    try:
        return cst.parse_module(text)
    except cst.ParserSyntaxError:
        return None


def _reads_of(function: cst.FunctionDef, param: str, safe: frozenset[str], methods: dict[str, cst.FunctionDef],
              reads: set[str], seen: set[str]) -> bool:
    """Adds to `reads` what `function` reads on `param`, and in the methods (`self.name(...)`) it
    hands `param` to; returns whether any of them calls the model."""
    forward = False
    for node in descendants(function.body):
        if isinstance(node, cst.Attribute) and isinstance(node.value, cst.Name) and node.value.value == param:
            if node.attr.value not in safe:
                reads.add(node.attr.value)
        if not isinstance(node, cst.Call):
            continue
        if _is_name(node.func, param) or (isinstance(node.func, cst.Attribute) and _is_name(node.func.value, param)
                                          and node.func.attr.value == "forward"):
            forward = True
        callee = node.func.attr.value if isinstance(node.func, cst.Attribute) and _is_name(node.func.value, "self") else None
        if callee is None or callee not in methods or callee in seen:
            continue
        seen.add(callee)
        for handed in _parameters_handed(methods[callee], node, param):
            forward = _reads_of(methods[callee], handed, safe, methods, reads, seen) or forward
    return forward


def _is_name(node: cst.BaseExpression, name: str) -> bool:
    return isinstance(node, cst.Name) and node.value == name


def _parameters_handed(method: cst.FunctionDef, call: cst.Call, param: str) -> list[str]:
    """The parameters of `method` that `call` (`self.method(...)`) binds to the bare name `param`."""
    handed: list[str] = []
    for position, arg in enumerate(call.args):
        if arg.star or not _is_name(arg.value, param):
            continue
        keyword = arg.keyword.value if arg.keyword is not None else None
        name = _parameter(method, None if keyword else position + 1, keyword)
        if name is not None:
            handed.append(name)
    return handed


def _parameter(function: cst.FunctionDef, position: int | None, keyword: str | None) -> str | None:
    """The name of the parameter an argument binds: by position (not past *args) or by keyword."""
    params = [*function.params.posonly_params, *function.params.params]
    if keyword is not None:
        names = [p.name.value for p in [*params, *function.params.kwonly_params]]
        return keyword if keyword in names else None
    if position is not None and position < len(params):
        return params[position].name.value
    return None
