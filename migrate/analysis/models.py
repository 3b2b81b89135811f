"""Finds the models to wrap: values called in a training scope whose output feeds backward,
traced back to the statement that builds them, and the point after which the wrapper goes
(after placement and any weight loading, before torch.compile and before training starts).
"""

from __future__ import annotations

from dataclasses import dataclass

import libcst as cst

from migrate.analysis.index import Binding, Scope, ScriptIndex, spell
from migrate.analysis.sites import ModelSite
from migrate.analysis.trained import Root, Stepped, evaluation_copy, not_a_module, root, same_module, stepped_optimizers
from migrate.analysis.training import callee_scope, caller_arguments, calls_in, contains, is_local_callable

LOSS_WORDS = ("loss", "criterion")
SETUP_METHODS = frozenset({"to", "cuda", "load_state_dict", "half", "float", "bfloat16", "train", "requires_grad_"})
DATA_PARALLEL = ("torch.nn.DataParallel", "torch.nn.parallel.DataParallel", "torch.nn.parallel.data_parallel.DataParallel")
COMPILE = "torch.compile"


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


def _bound_to_non_module(index: ScriptIndex, name: str) -> bool:
    for binding in index.bindings:
        if binding.target != name or binding.value is None:
            continue
        value = binding.value
        if isinstance(value, cst.Lambda):
            return True
        if isinstance(value, cst.Call):
            qualified = index.qualify(value.func) or ""
            if qualified.endswith("Loss") or qualified.startswith(("torch.nn.functional", "functools.partial")):
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


def home_binding(index: ScriptIndex, spelling: str, scope: Scope) -> Binding | None:
    """The binding that builds the model: for `self.x`, the class's own; else the latest in `scope`,
    or failing that the latest anywhere that is not a builder returning it."""
    if spelling.startswith("self."):
        candidates = [
            b
            for b in index.bindings
            if b.target == spelling and b.place.scope.class_name == scope.class_name
        ]
        in_init = [b for b in candidates if b.place.scope.name.endswith(".__init__")]
        return (in_init or candidates or [None])[-1]
    same_scope = [b for b in index.bindings if b.target == spelling and b.place.scope is scope]
    if same_scope:
        return _last_construction(index, same_scope)
    elsewhere = [b for b in index.bindings if b.target == spelling and b.place.scope.is_module]
    return _last_construction(index, elsewhere) if elsewhere else None


def _last_construction(index: ScriptIndex, bindings: list[Binding]) -> Binding:
    """The last binding that is not a torch.compile or DataParallel of the model itself."""
    kept = [b for b in bindings if not _wraps_itself(index, b)]
    return (kept or bindings)[-1]


def _wraps_itself(index: ScriptIndex, binding: Binding) -> bool:
    value = binding.value
    return isinstance(value, cst.Call) and (index.qualify(value.func) in (COMPILE, *DATA_PARALLEL))


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


def find_models(index: ScriptIndex, training: set[str], training_calls: set[str],
                stepped: list[Stepped] | None = None) -> list[ModelSite]:
    """The modules to wrap: those called in training whose parameters a stepped optimizer holds;
    when an optimizer cannot be traced, every module called in training except losses,
    evaluation copies and values that are no modules."""
    return [_site(index, c.home, c.binding, training_calls) for c in trained_candidates(index, training, stepped)]


def trained_candidates(index: ScriptIndex, training: set[str], stepped: list[Stepped] | None = None) -> list[Candidate]:
    stepped = stepped_optimizers(index, training) if stepped is None else stepped
    candidates = [c for c in _candidates(index, training, training) if not_a_module(index, c.binding) is None]
    held = held_roots(index, stepped)
    if held is None:
        chosen = [c for c in candidates if not c.loss and not evaluation_copy(index, c.binding)]
    else:
        chosen = [c for c in candidates if any(same_module(index, c.key, h) for h in held)]
        missing = [h for h in held if not any(same_module(index, c.key, h) for c in chosen)]
        if missing:  # called only in a helper that training calls: `calc_loss(model, batch)`
            helpers = _called_from(index, training) - training
            chosen += [
                c
                for c in _candidates(index, helpers, training)
                if any(same_module(index, c.key, h) for h in missing) and not_a_module(index, c.binding) is None
            ]
    kept: list[Candidate] = []
    for candidate in chosen:
        if not any(k.key == candidate.key or (k.home, id(k.binding.node)) == (candidate.home, id(candidate.binding.node)) for k in kept):
            kept.append(candidate)
    return kept


def held_roots(index: ScriptIndex, stepped: list[Stepped]) -> list[Root] | None:
    """The modules the stepped optimizers hold; None when one of them cannot be traced."""
    if not stepped or any(s.owners is None for s in stepped):
        return None
    return [root(index, o.spelling, o.scope) for s in stepped for o in s.owners or ()]


def _candidates(index: ScriptIndex, scopes: set[str], training: set[str]) -> list[Candidate]:
    found: list[Candidate] = []
    for call in index.calls:
        if call.place.scope.name not in scopes or not is_local_callable(index, call):
            continue
        name = call.name or ""
        if _bound_to_non_module(index, name):
            continue
        home_spelling, home_scope = origin(index, name, call.place.scope)
        binding = home_binding(index, home_spelling, home_scope)
        if binding is None:
            continue
        loss = any(word in name.lower() for word in LOSS_WORDS)
        found.append(Candidate(name, call.place.scope, home_spelling, binding, root(index, name, call.place.scope), loss))
    return found


def _called_from(index: ScriptIndex, scopes: set[str]) -> set[str]:
    """The functions of this file that code in `scopes` calls, transitively."""
    reached = set(scopes)
    changed = True
    while changed:
        changed = False
        for call in index.calls:
            if call.place.scope.name not in reached:
                continue
            callee = callee_scope(index, call)
            if callee is not None and callee.name not in reached:
                reached.add(callee.name)
                changed = True
    return reached


def _site(index: ScriptIndex, spelling: str, binding: Binding, training_calls: set[str]) -> ModelSite:
    anchor = climb_conditionals(index, binding.place.stmt)
    block, position = index.block_of[anchor]
    data_parallel = _data_parallel_statement(index, spelling, block)
    wrap_after: cst.BaseStatement | None = anchor
    wrap_before: cst.BaseStatement | None = None
    for stmt in block.body[position + 1 :]:
        if _compiles(index, stmt, spelling):
            wrap_before, wrap_after = stmt, None
            break
        if _starts_training(index, stmt, spelling, training_calls):
            break
        if _sets_up(stmt, spelling) and stmt is not data_parallel:
            wrap_after = stmt
    return ModelSite(
        spelling=spelling,
        scope=binding.place.scope,
        wrap_after=wrap_after,
        wrap_before=wrap_before,
        data_parallel=data_parallel,
    )


def _data_parallel_statement(index: ScriptIndex, spelling: str, block: cst.CSTNode) -> cst.BaseStatement | None:
    """`model = nn.DataParallel(model)`, or the `if` around it when that `if` holds nothing else
    than the wrap and prints about it (`if torch.cuda.device_count() > 1:`)."""
    for binding in index.bindings:
        if binding.target == spelling and _wraps_itself(index, binding):
            value = binding.value
            assert isinstance(value, cst.Call)
            if index.qualify(value.func) not in DATA_PARALLEL:
                continue
            stmt = binding.place.stmt
            parent = index.parent_of.get(stmt)
            if isinstance(parent, cst.If) and parent.orelse is None and all(
                s is stmt or _only_prints(s) for s in parent.body.body
            ):
                return parent
            return stmt
    return None


def _only_prints(stmt: cst.BaseStatement) -> bool:
    return isinstance(stmt, cst.SimpleStatementLine) and all(
        isinstance(s, cst.Expr) and isinstance(s.value, cst.Call) and spell(s.value.func) in ("print", "logging.info", "logger.info")
        for s in stmt.body
    )


def _compiles(index: ScriptIndex, stmt: cst.BaseStatement, spelling: str) -> bool:
    return any(
        index.qualify(call.func) == COMPILE and any(spell(a.value) == spelling for a in call.args)
        for call in calls_in(stmt)
    )


def _starts_training(index: ScriptIndex, stmt: cst.BaseStatement, spelling: str, training_calls: set[str]) -> bool:
    """A loop, a forward of the model, or a call that trains or receives the model."""
    if isinstance(stmt, (cst.For, cst.While, cst.FunctionDef, cst.ClassDef)):
        return True
    for call in calls_in(stmt):
        name = spell(call.func) or ""
        if name == spelling or name.rsplit(".", 1)[-1] in training_calls:
            return True
        qualified = index.qualify(call.func) or ""
        passes_model = any(spell(a.value) == spelling for a in call.args)
        if passes_model and not qualified.startswith("torch.") and qualified not in DATA_PARALLEL:
            return True
    return False


def _sets_up(stmt: cst.BaseStatement, spelling: str) -> bool:
    """Moves, loads or rebinds the model (`model.to(device)`, `model.load_state_dict(...)`)."""

    def is_setup(node: cst.CSTNode) -> bool:
        if isinstance(node, cst.Attribute) and node.attr.value in SETUP_METHODS:
            return spell(node.value) == spelling
        if isinstance(node, cst.AssignTarget):
            return spell(node.target) == spelling
        return False

    return contains(stmt, is_setup)



def aliases(index: ScriptIndex, site: ModelSite) -> set[tuple[str, str]]:
    """(spelling, scope name) pairs under which the wrapped model is reached after wrapping."""
    found = {(site.spelling, site.scope.name)}
    if site.spelling.startswith("self.") and site.scope.class_name:
        attribute = site.spelling.removeprefix("self.")
        for binding in index.bindings:  # `trainer = Trainer(...)` -> `trainer.model` outside the class
            if isinstance(binding.value, cst.Call) and spell(binding.value.func) == site.scope.class_name:
                found.add((f"{binding.target}.{attribute}", binding.place.scope.name))
    for scope in index.functions.values():
        if site.spelling.startswith("self."):
            if scope.class_name == site.scope.class_name:
                found.add((site.spelling, scope.name))
            continue
        for param in scope.params:
            if origin(index, param, scope) == (site.spelling, site.scope):
                found.add((param, scope.name))
        uses_global = site.scope.is_module and site.spelling not in scope.params and not any(
            b.target == site.spelling and b.place.scope is scope for b in index.bindings
        )
        if uses_global:
            found.add((site.spelling, scope.name))
    return found


def is_after(index: ScriptIndex, stmt: cst.BaseStatement, site: ModelSite) -> bool:
    """Whether `stmt` runs after the wrapper is applied (statement order within the wrap's block)."""
    anchor = site.wrap_before or site.wrap_after
    assert anchor is not None
    block, position = index.block_of[anchor]
    top = top_statement(index, stmt, block)
    if top is None:
        return index.scope_of.get(stmt) is not site.scope
    at = block.body.index(top)
    return at >= position if site.wrap_before is not None else at > position
