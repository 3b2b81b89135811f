"""Where a trained model comes from before it reaches the place it is wrapped: the chain of
(name, scope, hand-off statement) from the wrap site back to the function that builds it.

`self.model = model.to(gpu_id)` in `Trainer.__init__` names the parameter `model`; the caller
passes its own `model` (`Trainer(model, ...)` in `main`), which `main` unpacked from
`train_set, model, optimizer = load_train_objs()`, whose `return` hands out the `model` it built.
Each link names the statement that hands the model on (the call, or the `return`): what the
upstream scope does before that statement happens before the model reaches the wrap site.
A model read from the `**kwargs` of `__init__` (`self.model = kwargs["model"].to(device)`) is
followed to the keyword the caller passes (`Trainer(model=model, ...)`).
"""

from __future__ import annotations

from dataclasses import dataclass

import libcst as cst

from migrate.analysis.index import Binding, Scope, ScriptIndex, spell
from migrate.analysis.homes import home_binding
from migrate.analysis.models import SELF_RETURNING
from migrate.analysis.sites import ModelSite
from migrate.analysis.syntax import argument
from migrate.analysis.trained import calls_of

WRAPPERS = ("torch.nn.parallel.DistributedDataParallel", "torch.nn.parallel.distributed.DistributedDataParallel",
            "torch.nn.DataParallel", "torch.nn.parallel.DataParallel")
DEPTH = 6


@dataclass(frozen=True, eq=False)
class Upstream:
    """The model named `spelling` in `scope`, which hands it on at `hand_off`."""

    spelling: str
    scope: Scope
    hand_off: cst.BaseStatement
    built: cst.Call | None = None  # the caller builds it right in the call: `Trainer(TinyLM(), ...)`


def upstream(index: ScriptIndex, site: ModelSite) -> list[Upstream]:
    """The links above the wrap site, nearest first (empty: the site's scope builds the model)."""
    chain: list[Upstream] = []
    spelling, scope, keyword = _plain(index, site.spelling, site.scope)
    for _ in range(DEPTH):
        link = _caller_link(index, spelling, scope, keyword) or (None if keyword else _returned_link(index, spelling, scope))
        if link is None:
            break
        chain.append(link)
        if link.built is not None:
            break
        spelling, scope, keyword = _plain(index, link.spelling, link.scope)
    return chain


def construction(index: ScriptIndex, spelling: str, scope: Scope) -> Binding | None:
    """The binding that builds or places the model, not one that wraps it (`model = DDP(model)`),
    unless the wrap is all there is (`model = DataParallel(build())`)."""
    binding = home_binding(index, spelling, scope)
    if binding is not None and _wraps(index, binding.value):
        candidates = (index.bindings_of_in_class(spelling, scope.class_name) if spelling.startswith("self.")
                      else index.bindings_of_in(spelling, scope))
        earlier = [b for b in candidates if b is not binding and not _wraps(index, b.value)]
        binding = earlier[-1] if earlier else binding  # `model = DataParallel(build())`: the wrap holds it
    return binding


def _wraps(index: ScriptIndex, value: cst.BaseExpression | None) -> bool:
    return isinstance(value, cst.Call) and (index.qualify(value.func) or "") in WRAPPERS


def model_class_call(index: ScriptIndex, site: ModelSite) -> cst.Call | None:
    """`Net(...)` that builds the model: in `model = Net(...).to(device)` at the site, or where
    the model comes from: another name for it (`net = detector`), the caller that hands it in
    (`Trainer(TinyLM(), ...)`, or the caller's `model = Net()`), or the function of this file that
    returns it (`model = build_model()`, `def build_model(): return Net()`)."""
    places: list[tuple[str, Scope]] = [(site.spelling, site.scope)]
    for link in upstream(index, site):
        if link.built is not None:
            return _through_builders(index, link.built, 0)
        places.append((link.spelling, link.scope))
    for spelling, scope in places:
        built = _built_in(index, spelling, scope)
        if built is not None:
            return _through_builders(index, built, 0)
    return None


def _built_in(index: ScriptIndex, spelling: str, scope: Scope) -> cst.Call | None:
    """The call that builds what `spelling` names in `scope`, following `model = model.to(...)`
    back to the binding before it and `net = detector` to the other name."""
    binding = construction(index, spelling, scope)
    for _ in range(DEPTH):
        if binding is None:
            return None
        value = unmoved(binding.value)
        if isinstance(value, cst.Call) and _wraps(index, value) and value.args:
            value = unmoved(value.args[0].value)  # the module inside `DataParallel(...)`
        if isinstance(value, cst.Call):
            return value
        name = spell(value) if value is not None else None
        if name is None or name in scope.params:
            return None  # handed in: upstream() follows it
        earlier = [b for b in index.bindings_of_in(name, scope) if not _wraps(index, b.value)]
        if name == spelling:  # `model = model.to(device)`: the binding before it
            earlier = earlier[: earlier.index(binding)] if binding in earlier else []
        binding = earlier[-1] if earlier else None
    return None


def _through_builders(index: ScriptIndex, call: cst.Call, depth: int) -> cst.Call:
    """`build_model(...)`, a function of this file: the construction it returns (else the call itself)."""
    function = index.functions.get(index.qualify(call.func) or "")
    if function is None or not isinstance(function.node, cst.FunctionDef) or depth > DEPTH:
        return call
    for _stmt, value in _returns(index, function):
        returned = unmoved(value)
        if isinstance(returned, cst.Call):
            return _through_builders(index, returned, depth + 1)
        name = spell(returned) if returned is not None else None
        built = _built_in(index, name, function) if name is not None else None
        if built is not None:
            return _through_builders(index, built, depth + 1)
    return call


def unmoved(value: cst.BaseExpression | None) -> cst.BaseExpression | None:
    """`Net()` for `Net().to(device).train()`, `model` for `model.to(device)`."""
    while isinstance(value, cst.Call) and isinstance(value.func, cst.Attribute) and value.func.attr.value in SELF_RETURNING:
        value = value.func.value
    return value


def _plain(index: ScriptIndex, spelling: str, scope: Scope) -> tuple[str, Scope, bool]:
    """`self.model`, bound in `__init__` to `model.to(gpu_id)`: the parameter `model` of `__init__`;
    bound to `kwargs["model"].to(gpu_id)`: the keyword `model` of its `**kwargs` (True: only a
    keyword argument passes it)."""
    if not spelling.startswith("self."):
        return spelling, scope, False
    binding = construction(index, spelling, scope)
    value = unmoved(binding.value) if binding is not None else None
    if binding is not None and value is not None:
        key = kwargs_key(binding.place.scope, value)
        if key is not None:
            return key, binding.place.scope, True
    name = spell(value) if value is not None else None
    if binding is None or name is None or "." in name:
        return spelling, scope, False
    return name, binding.place.scope, False


def kwargs_key(scope: Scope, value: cst.BaseExpression) -> str | None:
    """`kwargs["model"]` or `kwargs.get("model")`, read from the `**kwargs` of the function `scope`: "model"."""
    if not isinstance(scope.node, cst.FunctionDef):
        return None
    star = scope.node.params.star_kwarg
    key: cst.BaseExpression | None = None
    if isinstance(value, cst.Subscript) and len(value.slice) == 1 and isinstance(value.slice[0].slice, cst.Index):
        owner, key = value.value, value.slice[0].slice.value
    elif (isinstance(value, cst.Call) and isinstance(value.func, cst.Attribute) and value.func.attr.value == "get"
          and value.args and value.args[0].keyword is None):
        owner, key = value.func.value, value.args[0].value
    else:
        return None
    if star is None or not isinstance(owner, cst.Name) or owner.value != star.name.value:
        return None
    text = key.evaluated_value if isinstance(key, cst.SimpleString) else None
    return text if isinstance(text, str) and text.isidentifier() else None


def _caller_link(index: ScriptIndex, spelling: str, scope: Scope, keyword: bool = False) -> Upstream | None:
    """A parameter: the name the (one) caller passes, and the call that passes it (a class's
    construction for its `__init__`); a key of `**kwargs` (`keyword`): the caller's keyword argument."""
    if (spelling not in scope.params and not keyword) or not isinstance(scope.node, cst.FunctionDef):
        return None
    callers = calls_of(index, scope)
    if len(callers) != 1:
        return None
    call = callers[0]
    position = -1 if keyword else scope.params.index(spelling) - (1 if scope.class_name else 0)
    passed = argument(call.node, spelling, position)
    value = unmoved(passed.value) if passed is not None else None
    if isinstance(value, cst.Call):
        return Upstream("", call.place.scope, call.place.stmt, built=value)
    name = spell(value) if value is not None else None
    return Upstream(name, call.place.scope, call.place.stmt) if name is not None else None


def _returned_link(index: ScriptIndex, spelling: str, scope: Scope) -> Upstream | None:
    """A name unpacked from a call of a function of this file (`a, model, b = build()`): the
    name that function returns in that position, and its `return`."""
    binding = next((b for b in reversed(index.bindings) if b.target == spelling and b.place.scope is scope), None)
    if binding is None or not isinstance(binding.node, cst.Assign) or not isinstance(binding.node.value, cst.Call):
        return None
    target = binding.node.targets[0].target
    position = _position(target, spelling)
    function = index.functions.get(index.qualify(binding.node.value.func) or "")
    if function is None or not isinstance(function.node, cst.FunctionDef):
        return None
    for stmt, value in _returns(index, function):
        returned = value.elements[position].value if position is not None and isinstance(value, cst.Tuple) \
            and position < len(value.elements) else value if position is None else None
        name = spell(returned) if returned is not None else None
        if name is not None:
            return Upstream(name, function, stmt)
    return None


def _position(target: cst.BaseExpression, spelling: str) -> int | None:
    """Where `spelling` sits in a tuple target; None for a plain name target."""
    if not isinstance(target, (cst.Tuple, cst.List)):
        return None
    for position, element in enumerate(target.elements):
        if spell(element.value) == spelling:
            return position
    return None


def _returns(index: ScriptIndex, function: Scope) -> list[tuple[cst.BaseStatement, cst.BaseExpression]]:
    found: list[tuple[cst.BaseStatement, cst.BaseExpression]] = []
    for stmt, scope in index.scope_of.items():
        if scope is not function or not isinstance(stmt, cst.SimpleStatementLine):
            continue
        for small in stmt.body:
            if isinstance(small, cst.Return) and small.value is not None:
                found.append((stmt, small.value))
    return found
