"""Which modules training updates: the optimizers stepped in training, traced back to the
expression that builds them, and the modules whose parameters they hold.

A wrapper belongs around exactly those modules. A value called in the training loop is not
necessarily one: a `transforms.Compose`, a tensor type (`Tensor = torch.cuda.FloatTensor`), a
dataset class, a frozen feature extractor or an evaluation copy (`ema_model`) are called there too.
When every stepped optimizer can be traced (`model.parameters()`, `itertools.chain(a.parameters(),
b.parameters())`, param groups, a list built beside it), only the modules they hold are wrapped.

A name unpacked from a call of this file's function (`g_opt, d_opt = make_optimizers(g, d)`) holds
the matching element of the tuple every `return` of it gives (`returned_element`); `handed_out`
goes the other way, from a value built in such a function to its caller's name for it.

Two values are the same module when they lead back to the same construction: through function
parameters to every caller (constructors included), plain aliases (`net = model.to(device)`),
and attributes of instances of this file's classes (`agent.net` is `self.net` of `Agent`).

A function may hand its trained model back (`losses, model = main()`): `handed_back` follows the
caller's name statement by statement, up to where the caller binds it again (`rebound_in_order`: in
straight-line code the uses before that binding are the returned model, those after it the new
one), and `caller_teardown` says where code that must follow every such use (the process group's
teardown) goes in the caller.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

import libcst as cst

from migrate.analysis.homes import home_binding
from migrate.analysis.index import Binding, CallSite, Scope, ScriptIndex, child_nodes, descendants, read_names, spell
from migrate.analysis.syntax import argument, calls_in
from migrate.analysis.training import BUILTIN_NAMES, callee_scope

PARAMETER_METHODS = frozenset({"parameters", "named_parameters"})
# methods that return the module itself (or move it): `model.to(device)` is still `model`
SAME_MODULE = frozenset({"to", "cuda", "cpu", "float", "half", "double", "bfloat16", "train", "eval", "requires_grad_", "type"})
WRAPS = ("torch.nn.DataParallel", "torch.nn.parallel.DataParallel", "torch.compile")
TENSOR_TYPE = re.compile(r"^torch(\.cuda)?\.\w*Tensor$")
SCALERS = ("torch.cuda.amp.GradScaler", "torch.amp.GradScaler", "torch.cuda.amp.grad_scaler.GradScaler")
MAX_DEPTH = 6
MODULE_TYPES = ("torch.nn.Module", "torch.nn.modules.module.Module", "torch.Tensor")

# A root: ("binding", id of the statement that builds it, its target) or ("class", name) for `self` inside
# a class, or ("name", spelling, scope) when nothing in this file builds it.
Root = tuple[Literal["binding"], int, str] | tuple[Literal["class"], str] | tuple[Literal["name"], str, str]


@dataclass(eq=False)
class Owner:
    """`model` in `torch.optim.Adam(model.parameters())`, where it is spelled."""

    spelling: str
    scope: Scope
    node: cst.CSTNode  # the `.parameters()` call, or the call that builds the optimizer


@dataclass(eq=False)
class Stepped:
    """An optimizer stepped in training, and what it holds (None: cannot be told)."""

    spelling: str  # as stepped: "optimizer_G", "self.optimizer"
    step: CallSite  # `optimizer.step()` / `scaler.step(optimizer)`
    built: cst.BaseExpression | None  # the expression that builds it
    owners: list[Owner] | None


def stepped_optimizers(index: ScriptIndex, training: set[str], handed_in: bool = False) -> list[Stepped]:
    """Every `X.step()` (and `scaler.step(X)`) in a training scope whose X is an optimizer.
    `handed_in`: also an X named like one (`self.optimizer`) that holds only what was handed in
    (`self.optimizer = kwargs["optimizer"]`), as unknown (built and owners None)."""
    schedulers = {b.target for b in index.bindings if _call_qualified(index, b.value).startswith("torch.optim.lr_scheduler")}
    scalers = {b.target for b in index.bindings if _call_qualified(index, b.value) in SCALERS}
    found: list[Stepped] = []
    for call in index.calls:
        func = call.node.func
        if call.place.scope.name not in training or not isinstance(func, cst.Attribute) or func.attr.value != "step":
            continue
        owner = spell(func.value)
        if owner is None:
            continue
        if call.node.args:
            if owner not in scalers and "scaler" not in owner.lower():
                continue
            owner = spell(call.node.args[0].value)
            if owner is None:
                continue
        if owner in schedulers or "sched" in owner.lower():
            continue
        values = resolve_values(index, owner, call.place.scope, every=True)
        built = [(v, s) for v, s in values if _looks_like_optimizer(index, v)]
        if not built:
            opaque = handed_in and all(_handed_in(v) for v, _s in values)
            if (values and not opaque) or "opt" not in owner.lower():
                continue  # `ema.step()`, `env.step()`: not an optimizer
            found.append(Stepped(owner, call, None, None))
            continue
        held = [optimizer_owners(index, v, s) for v, s in built]  # `if args.optimizer == "sgd": ... else: ...`
        owners = None if any(h is None for h in held) else [o for h in held for o in h or ()]
        found.append(Stepped(owner, call, built[-1][0], owners))
    return found


def _handed_in(value: cst.BaseExpression) -> bool:
    """`kwargs["optimizer"]`, `config.optimizer`: a value handed in from elsewhere, which says nothing of what it is."""
    return isinstance(value, (cst.Subscript, cst.Attribute, cst.Name))


def _looks_like_optimizer(index: ScriptIndex, value: cst.BaseExpression) -> bool:
    if not isinstance(value, cst.Call):
        return False
    qualified = index.qualify(value.func) or ""
    if qualified.startswith("torch.optim.lr_scheduler"):
        return False
    if qualified.startswith("torch.optim.") or "optim" in qualified.lower():
        return True
    return any(_is_parameters_call(c) for c in calls_in(value))


def optimizer_owners(index: ScriptIndex, built: cst.BaseExpression, scope: Scope) -> list[Owner] | None:
    """The modules whose parameters an optimizer holds; [] for one built over plain tensors
    (`Adam([log_alpha])`); None when the parameters come from somewhere this file does not show."""
    assert isinstance(built, cst.Call)
    func = built.func
    if isinstance(func, cst.Attribute) and not _is_torch(index, func) and "optim" in func.attr.value:
        owner = spell(func.value)  # `model.configure_optimizers(...)`
        return [Owner(owner, scope, built)] if owner else None
    params = argument(built, "params", 0)
    if params is None:
        return None
    direct = any(_is_parameters_call(c) for c in calls_in(params.value))
    if (index.qualify(func) or "") in index.functions and not direct:
        return None  # a builder of this file (`build_optimizer(cfg, model)`): not followed
    owners = _held(index, params.value, scope, 0)
    if owners:
        return owners
    return [] if isinstance(params.value, (cst.List, cst.Tuple)) else None


def _held(index: ScriptIndex, expr: cst.BaseExpression, scope: Scope, depth: int) -> list[Owner]:
    owners = [
        Owner(owner, scope, call)
        for call in calls_in(expr)
        if isinstance(call.func, cst.Attribute) and _is_parameters_call(call) and (owner := spell(call.func.value)) is not None
    ]
    if depth >= MAX_DEPTH:
        return owners
    for name in _names_outside_parameter_calls(expr):
        for value, where in resolve_values(index, name, scope):
            owners.extend(_held(index, value, where, depth + 1))
        owners.extend(_grown(index, name, scope))
    return owners


def _grown(index: ScriptIndex, name: str, scope: Scope) -> list[Owner]:
    """`params += list(m.parameters())`, `params.extend(m.parameters())` in the same scope."""
    owners: list[Owner] = []
    for value in _grown_values(index, scope).get(name, ()):
        owners.extend(Owner(o, scope, c) for c in calls_in(value)
                      if isinstance(c.func, cst.Attribute) and _is_parameters_call(c) and (o := spell(c.func.value)))
    return owners


def _grown_values(index: ScriptIndex, scope: Scope) -> dict[str, list[cst.CSTNode]]:
    """Name -> what `name += ...` / `name.extend(...)` / `name.append(...)` add to it in `scope`
    (one walk of the scope, kept for every name asked about)."""
    known: dict[Scope, dict[str, list[cst.CSTNode]]] = index.memo("grown_values")
    if scope not in known:
        found: dict[str, list[cst.CSTNode]] = {}
        for node in descendants(scope.node):
            target: cst.BaseExpression | None = None
            if isinstance(node, cst.AugAssign):
                target, value = node.target, node.value
            elif isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute) and node.func.attr.value in ("extend", "append"):
                target, value = node.func.value, node
            spelled = spell(target) if target is not None else None
            if spelled is not None:
                found.setdefault(spelled, []).append(value)
        known[scope] = found
    return known[scope]


def _names_outside_parameter_calls(expr: cst.BaseExpression) -> list[str]:
    """The variables an optimizer's params expression reads, besides `x.parameters()` owners,
    called functions, keywords and lambda bodies: `chain(a.parameters(), extra)` -> ["extra"]."""
    found: list[str] = []
    stack: list[cst.CSTNode] = [expr]
    while stack:
        node = stack.pop()
        if isinstance(node, cst.Call):
            if _is_parameters_call(node):
                continue
            stack.extend(a.value for a in node.args)
            continue
        if isinstance(node, (cst.Lambda, cst.ListComp, cst.GeneratorExp, cst.SetComp, cst.DictComp)):
            continue
        if isinstance(node, (cst.Name, cst.Attribute)):
            spelled = spell(node)
            if spelled is not None and spelled not in BUILTIN_NAMES and spelled not in ("True", "False", "None"):
                found.append(spelled)
            continue
        if isinstance(node, cst.DictElement):
            stack.append(node.value)
            continue
        stack.extend(child_nodes(node))
    return found


def _is_parameters_call(call: cst.Call) -> bool:
    """`model.parameters()`, `model.named_parameters()`, `model.get_1x_lr_params()`."""
    if not isinstance(call.func, cst.Attribute):
        return False
    method = call.func.attr.value
    return method in PARAMETER_METHODS or ("params" in method.lower() and method.lower().startswith(("get", "param")))


def _is_torch(index: ScriptIndex, func: cst.BaseExpression) -> bool:
    return (index.qualify(func) or "").startswith("torch.")


def _call_qualified(index: ScriptIndex, value: cst.BaseExpression | None) -> str:
    return (index.qualify(value.func) or "") if isinstance(value, cst.Call) else ""


# -- following values back to where they are built ------------------------------------------------


def resolve_values(index: ScriptIndex, spelling: str, scope: Scope, depth: int = 0,
                   every: bool = False) -> list[tuple[cst.BaseExpression, Scope]]:
    """The expressions a name can hold here, following parameters to every caller and plain
    aliases (`optimizer = opt`); [] when nothing in this file binds it. `every`: all the
    bindings of its home scope, not only the last."""
    if depth > MAX_DEPTH:
        return []
    if spelling in scope.params and "." not in spelling:
        found: list[tuple[cst.BaseExpression, Scope]] = []
        for passed, caller in passed_arguments(index, scope, spelling):
            spelled = spell(passed)
            if spelled is not None:
                found.extend(resolve_values(index, spelled, caller, depth + 1, every))
            else:
                found.append((passed, caller))
        return found
    binding = _binding(index, spelling, scope)
    if binding is None:
        return []
    bindings = [binding]
    if every:
        bindings = index.bindings_of_in(spelling, binding.place.scope)
    found = []
    for each in bindings:
        if each.value is None:  # `g_opt, d_opt = make_optimizers(...)`: what the function returns there
            returned = returned_element(index, each, depth, every)
            if not returned:
                return []  # a binding this file does not show (`g, g_opt = restore(...)` of another module)
            found.extend(returned)
            continue
        spelled = spell(each.value)
        if spelled is not None and not (spelled == spelling and each.place.scope is scope):
            found.extend(resolve_values(index, spelled, each.place.scope, depth + 1, every) or [(each.value, each.place.scope)])
        else:
            found.append((each.value, each.place.scope))
    return found


def unpacked_call(index: ScriptIndex, binding: Binding) -> tuple[CallSite, Scope, int] | None:
    """`a, b = f(...)` binding `b`, where `f` is a function of this file: the call, `f`'s scope and
    the position of `b` in the target."""
    assign = binding.node
    if not isinstance(assign, cst.Assign) or len(assign.targets) != 1 or not isinstance(assign.value, cst.Call):
        return None
    target = assign.targets[0].target
    if not isinstance(target, (cst.Tuple, cst.List)):
        return None
    position = next((k for k, e in enumerate(target.elements) if spell(e.value) == binding.target), None)
    call = index.call_site(assign.value)
    callee = callee_scope(index, call) if call is not None else None
    if position is None or call is None or callee is None or not isinstance(callee.node, cst.FunctionDef):
        return None
    return call, callee, position


def returned_element(index: ScriptIndex, binding: Binding, depth: int = 0,
                     every: bool = False) -> list[tuple[cst.BaseExpression, Scope]]:
    """What `b` of `a, b = f(...)` holds, where every `return` of the function `f` of this file is
    a tuple as long as the target (`return Adam(g.parameters()), Adam(d.parameters())`, or `return
    g_opt, d_opt` followed to their bindings in `f`); [] when that cannot be told."""
    unpacked = unpacked_call(index, binding)
    if unpacked is None or depth > MAX_DEPTH:
        return []
    _call, callee, position = unpacked
    assert isinstance(binding.node, cst.Assign)
    target = binding.node.targets[0].target
    assert isinstance(target, (cst.Tuple, cst.List))  # unpacked_call above held it to one
    size = len(target.elements)
    returns = _own_returns(callee.node)
    found: list[tuple[cst.BaseExpression, Scope]] = []
    for each in returns:
        value = each.value
        if not isinstance(value, cst.Tuple) or len(value.elements) != size or any(
                isinstance(e, cst.StarredElement) for e in value.elements):
            return []
        element = value.elements[position].value
        spelled = spell(element)
        found.extend((resolve_values(index, spelled, callee, depth + 1, every) if spelled else []) or [(element, callee)])
    return found


def handed_out(index: ScriptIndex, built: cst.BaseExpression) -> tuple[CallSite, str] | None:
    """Where a value built in a function of this file reaches its only caller as one name of a
    tuple: `return Adam(g.parameters()), Adam(d.parameters())` (or `return g_opt, d_opt`) and the
    caller's `g_opt, d_opt = make_optimizers(g, d)`: that call and the caller's name."""
    site = index.call_site(built) if isinstance(built, cst.Call) else None
    function = site.place.scope if site is not None else None
    if function is None or not isinstance(function.node, cst.FunctionDef) or function.class_name:
        return None
    callers = calls_of(index, function)
    positions = {_element_holding(index, r, built, function) for r in _own_returns(function.node)}
    if len(callers) != 1 or len(positions) != 1 or None in positions:
        return None
    call = callers[0]
    stmt = call.place.stmt
    assign = stmt.body[0] if isinstance(stmt, cst.SimpleStatementLine) and len(stmt.body) == 1 else None
    if not isinstance(assign, cst.Assign) or assign.value is not call.node or len(assign.targets) != 1:
        return None
    target, position = assign.targets[0].target, positions.pop()
    if not isinstance(target, (cst.Tuple, cst.List)) or position is None or position >= len(target.elements):
        return None
    element = target.elements[position].value
    return (call, element.value) if isinstance(element, cst.Name) else None


def _element_holding(index: ScriptIndex, returned: cst.Return, built: cst.BaseExpression, function: Scope) -> int | None:
    """The position of `built` in a returned tuple, itself or a name bound to it in `function`."""
    if not isinstance(returned.value, cst.Tuple):
        return None
    for k, element in enumerate(returned.value.elements):
        spelled = spell(element.value)
        if element.value is built or spelled is not None and any(
                b.value is built for b in index.bindings_of_in(spelled, function)):
            return k
    return None


def _returned_name(index: ScriptIndex, binding: Binding) -> tuple[str, Scope] | None:
    """`b` of `a, b = f(...)` where every `return` of `f` (this file's) hands back the same name there."""
    unpacked = unpacked_call(index, binding)
    if unpacked is None:
        return None
    _call, callee, position = unpacked
    names = {spell(r.value.elements[position].value) if isinstance(r.value, cst.Tuple) and position < len(r.value.elements)
             else None for r in _own_returns(callee.node)}
    name = names.pop() if len(names) == 1 else None
    return (name, callee) if name is not None else None


def _own_returns(function: cst.CSTNode) -> list[cst.Return]:
    """The `return` statements of a function, not of the functions or classes it defines."""
    found: list[cst.Return] = []
    stack = list(child_nodes(function))
    while stack:
        node = stack.pop()
        if isinstance(node, cst.Return):
            found.append(node)
        elif not isinstance(node, (cst.FunctionDef, cst.ClassDef, cst.Lambda)):
            stack.extend(child_nodes(node))
    return found


def passed_arguments(index: ScriptIndex, scope: Scope, param: str) -> list[tuple[cst.BaseExpression, Scope]]:
    """What each caller of `scope` passes for `param` (calls of a class count for its __init__)."""
    if param not in scope.params or not isinstance(scope.node, cst.FunctionDef):
        return []
    position = scope.params.index(param) - (1 if scope.class_name else 0)
    found: list[tuple[cst.BaseExpression, Scope]] = []
    for call in calls_of(index, scope):
        arg = argument(call.node, param, position)
        if arg is not None:
            found.append((arg.value, call.place.scope))
    return found


def calls_of(index: ScriptIndex, scope: Scope) -> list[CallSite]:
    """The calls of a function of this file, a class's construction for its __init__."""
    return index.derived("calls_of", lambda: _calls_by_function(index)).get(id(scope.node), [])


def _calls_by_function(index: ScriptIndex) -> dict[int, list[CallSite]]:
    callers: dict[int, list[CallSite]] = {}
    for call in index.calls:
        callee = callee_scope(index, call)
        if callee is None:
            constructor = spell(call.node.func)
            callee = index.functions.get(f"{constructor}.__init__") if constructor in index.classes else None
        if callee is not None:
            callers.setdefault(id(callee.node), []).append(call)
    return callers


def _binding(index: ScriptIndex, spelling: str, scope: Scope) -> Binding | None:
    return home_binding(index, spelling, scope)


def root(index: ScriptIndex, spelling: str, scope: Scope) -> Root:
    """What a module value leads back to (see the module docstring)."""
    return index.answer("root", (spelling, scope), lambda: _root(index, spelling, scope))


def _root(index: ScriptIndex, spelling: str, scope: Scope) -> Root:
    seen: set[tuple[str, int]] = set()
    for _ in range(MAX_DEPTH * 2):
        if (spelling, id(scope)) in seen:
            break
        seen.add((spelling, id(scope)))
        if spelling == "self" and scope.class_name:
            return ("class", scope.class_name)
        if spelling in scope.params and "." not in spelling:
            passed = [(spelled, s) for v, s in passed_arguments(index, scope, spelling) if (spelled := spell(v)) is not None]
            if not passed:
                return ("name", spelling, scope.name)
            spelling, scope = passed[0]
            continue
        binding = _binding(index, spelling, scope)
        if binding is None:
            moved = _instance_attribute(index, spelling, scope)
            if moved is not None:
                spelling, scope = moved
                continue
            if "." in spelling and not spelling.startswith("self.") or spelling.count(".") > 1:
                spelling = spelling.rsplit(".", 1)[0]  # `model.encoder` is part of `model`
                continue
            return ("name", spelling, scope.name)
        returned = _returned_name(index, binding) if binding.value is None else None
        if returned is not None:  # `data, model, opt = load_objects()`: the `model` that function returns
            spelling, scope = returned
            continue
        inner = _same_module(index, binding.value)
        while inner == spelling and binding.place.scope is scope:  # `model = model.to(device)`: the one before
            earlier = _earlier_binding(index, binding)
            if earlier is None:
                break
            binding, inner = earlier, _same_module(index, earlier.value)
        if inner is None or (inner == spelling and binding.place.scope is scope):
            return ("binding", id(binding.node), binding.target)
        spelling, scope = inner, binding.place.scope
    return ("name", spelling, scope.name)


def _earlier_binding(index: ScriptIndex, binding: Binding) -> Binding | None:
    """The binding of the same name in the same scope (or class) just before this one."""
    earlier: dict[Binding, Binding | None] = index.memo("earlier_binding")
    if binding not in earlier:
        _note_earlier_bindings(index, binding.target, earlier)
    return earlier[binding]


def _note_earlier_bindings(index: ScriptIndex, target: str, earlier: dict[Binding, Binding | None]) -> None:
    """For every binding of `target`, the one before it in its scope (for `self.x`, its class)."""
    last: dict[object, Binding] = {}
    for binding in index.bindings_of(target):
        scope = binding.place.scope
        group = ("class", scope.class_name) if target.startswith("self.") else ("scope", id(scope))
        earlier[binding] = last.get(group)
        last[group] = binding


def _instance_attribute(index: ScriptIndex, spelling: str, scope: Scope) -> tuple[str, Scope] | None:
    """`agent.net`, `agent = Agent(...)` a class of this file -> `self.net` inside Agent."""
    head, _, attribute = spelling.partition(".")
    if not attribute or head == "self" or "." in attribute:
        return None
    for binding in index.bindings_of(head):
        if not isinstance(binding.value, cst.Call):
            continue
        cls = spell(_innermost_call(binding.value).func)
        if cls in index.classes:
            method = index.derived("first_method", lambda: _first_methods(index)).get(cls)
            if method is not None:
                return f"self.{attribute}", method
    return None


def _first_methods(index: ScriptIndex) -> dict[str, Scope]:
    """Class name -> its first method (in the order the functions were recorded)."""
    first: dict[str, Scope] = {}
    for scope in index.functions.values():
        if scope.class_name is not None:
            first.setdefault(scope.class_name, scope)
    return first


def _same_module(index: ScriptIndex, value: cst.BaseExpression | None) -> str | None:
    """`model`, `model.to(device)`, `nn.DataParallel(model)`, `torch.compile(model)` -> "model"."""
    if value is None:
        return None
    spelled = spell(value)
    if spelled is not None:
        return spelled
    while isinstance(value, cst.Call):
        func = value.func
        if isinstance(func, cst.Attribute) and func.attr.value in SAME_MODULE:
            value = func.value
            continue
        if index.qualify(func) in WRAPS and value.args:
            value = value.args[0].value
            continue
        return None
    return spell(value)


def _innermost_call(value: cst.Call) -> cst.Call:
    """`Net(...).to(device).eval()` -> `Net(...)`."""
    while isinstance(value.func, cst.Attribute) and isinstance(value.func.value, cst.Call) and value.func.attr.value in SAME_MODULE:
        value = value.func.value
    return value


def constructed_class(index: ScriptIndex, binding: Binding | None) -> str | None:
    """The class of this file a binding builds (`net = Net().to(device)` -> "Net")."""
    if binding is None or not isinstance(binding.value, cst.Call):
        return None
    name = spell(_innermost_call(binding.value).func)
    return name if name in index.classes else None


def binding_of_root(index: ScriptIndex, key: Root | tuple[object, ...]) -> Binding | None:
    if key[0] != "binding":
        return None
    by_node: dict[tuple[object, object], Binding] = index.derived(
        "binding_of_root", lambda: {(id(b.node), b.target): b for b in reversed(index.bindings)})
    return by_node.get((key[1], key[2]))


def same_module(index: ScriptIndex, a: Root | tuple[object, ...], b: Root | tuple[object, ...]) -> bool:
    """Equal roots, or `self` of a class and a construction of that class (a caller may hold a
    root as a plain `tuple[object, ...]`)."""
    if a == b:
        return True
    for one, other in ((a, b), (b, a)):
        if one[0] == "class" and other[0] == "binding":
            return constructed_class(index, binding_of_root(index, other)) == one[1]
    return False


# -- values that are not modules ---------------------------------------------------------------


def not_a_module(index: ScriptIndex, binding: Binding) -> str | None:
    """Why a value called in training is not a module to wrap: a tensor type, a transform, a
    dataset (or another class of this file that is no nn.Module); None when it may be one."""
    value = binding.value
    if value is None:
        return None
    if isinstance(value, cst.IfExp):
        kinds = {_not_a_module_value(index, value.body), _not_a_module_value(index, value.orelse)}
        return next(iter(kinds)) if len(kinds) == 1 else None
    return _not_a_module_value(index, value)


def _not_a_module_value(index: ScriptIndex, value: cst.BaseExpression) -> str | None:
    qualified = index.qualify(value) if spell(value) is not None else None
    if qualified is not None:
        if TENSOR_TYPE.match(qualified):
            return "a tensor type"
        if qualified in MODULE_TYPES:
            return "a type alias"  # `Model = nn.Module`: a name for annotations, no module
        if qualified in index.classes and not is_module_class(index, qualified):
            return f"the class `{qualified}`"
        return None
    if isinstance(value, cst.Call):
        called = _innermost_call(value)
        qualified = index.qualify(called.func) or ""
        if qualified.startswith(("torchvision.transforms", "transforms.")):
            return "a transform"
        if qualified in index.classes and not is_module_class(index, qualified):
            return f"an instance of `{qualified}`, not an nn.Module"
        if isinstance(called.func, cst.Attribute) and called.func.attr.value == "get" and isinstance(called.func.value, cst.Dict):
            return _classes_of_dict(index, called.func.value)
    if isinstance(value, cst.Subscript) and isinstance(value.value, cst.Dict):
        return _classes_of_dict(index, value.value)
    return None


def _classes_of_dict(index: ScriptIndex, table: cst.Dict) -> str | None:
    names = [spell(e.value) for e in table.elements if isinstance(e, cst.DictElement)]
    if names and all(n in index.classes and not is_module_class(index, n) for n in names):
        return "a class picked from a table (" + ", ".join(f"`{n}`" for n in names) + ")"
    return None


def is_module_class(index: ScriptIndex, name: str, depth: int = 0) -> bool:
    """Whether a class of this file is (or may be) an nn.Module: a base that is one, or a base
    this file cannot see (imported from elsewhere, and not a dataset)."""
    node = index.classes.get(name)
    if node is None or depth > MAX_DEPTH:
        return True
    for base in node.bases:
        qualified = index.qualify(base.value) or ""
        last = qualified.rsplit(".", 1)[-1]
        if qualified in index.classes:
            if is_module_class(index, qualified, depth + 1):
                return True
            continue
        if "Dataset" in last or "Sampler" in last or qualified in ("object", "") or qualified.startswith(("torchvision.transforms", "enum.", "typing.")):
            continue
        return True
    return False


def evaluation_copy(index: ScriptIndex, binding: Binding) -> bool:
    """`ema_model = copy.deepcopy(model)` (maybe `.eval().requires_grad_(False)`), or a module built
    with `requires_grad_(False)`: nothing trains it."""
    value = binding.value
    if not isinstance(value, cst.Call):
        return False
    if index.qualify(_innermost_call(value).func) == "copy.deepcopy":
        return True
    return any(
        isinstance(c.func, cst.Attribute) and c.func.attr.value == "requires_grad_" and c.args and spell(c.args[0].value) == "False"
        for c in calls_in(value)
    )


# -- modules that training runs but does not update ----------------------------------------------


def untrained(index: ScriptIndex, spelling: str, scope: Scope, binding: Binding, training: set[str]) -> str | None:
    """Why a module called in training is not trained there, when the optimizers cannot be traced:
    every call of it in training is under `torch.no_grad()` (a target network, a teacher); it is
    an instance of a class of this file that holds no parameters (a transform); or no
    optimizer of this file holds its parameters and it is frozen (`requires_grad_(False)`, a loop
    setting `p.requires_grad = False`, with no part of it replaced afterwards) or filled from
    another module (`target.load_state_dict(model.state_dict())`, a Polyak
    `tp.data.copy_(tau * p + ...)` over `zip(model.parameters(), target.parameters())`)."""
    home = binding.target
    calls = [c for c in index.calls if c.name == spelling and c.place.scope.name in training]
    if calls and all(_under_no_grad(index, c) for c in calls):
        return "run only under torch.no_grad()"
    if parameter_free(index, binding):
        return "holds no parameters"
    key = root(index, spelling, scope)
    for owner in _owners_in_file(index):
        if same_module(index, root(index, owner.spelling, owner.scope), key):
            return None
    if any(b.target.startswith(home + ".") for b in index.bindings):
        return None  # `model.fc = nn.Linear(...)` after freezing: fine-tuning
    for call in index.calls:
        func = call.node.func
        if not isinstance(func, cst.Attribute):
            continue
        method, receiver = func.attr.value, spell(func.value)
        if method == "requires_grad_" and receiver == home and call.node.args and spell(call.node.args[0].value) == "False":
            return "frozen"
        if method == "load_state_dict" and receiver == home and call.node.args:
            source = next((c for c in calls_in(call.node.args[0].value) if isinstance(c.func, cst.Attribute)
                           and c.func.attr.value == "state_dict"), None)
            if source is not None and isinstance(source.func, cst.Attribute) and spell(source.func.value) not in (None, home):
                return "copied from another module"
    loops = index.memo("for_loops")
    if "all" not in loops:
        loops["all"] = [n for n in descendants(index.module) if isinstance(n, cst.For)]
    for node in loops["all"]:
        if _parameters_of(node.iter, home):
            body = index.module.code_for_node(node.body)
            if re.search(r"requires_grad\s*=\s*False|requires_grad_\(\s*False", body):
                return "frozen"
            if "copy_(" in body or "mul_(" in body or "lerp_(" in body:
                return "copied from another module"
    return None


def _under_no_grad(index: ScriptIndex, call: CallSite) -> bool:
    return any(
        isinstance(stmt, cst.With) and any(
            isinstance(item.item, cst.Call) and (index.qualify(item.item.func) or "").endswith(("no_grad", "inference_mode"))
            for item in stmt.items)
        for stmt in index.enclosing_statements(call.place.stmt)
    )


def _parameters_of(expr: cst.BaseExpression, home: str) -> bool:
    """`home.parameters()`, or `zip(a.parameters(), home.parameters())`."""
    return any(isinstance(c.func, cst.Attribute) and _is_parameters_call(c) and spell(c.func.value) == home
               for c in calls_in(expr))


def _owners_in_file(index: ScriptIndex) -> list[Owner]:
    """The modules any optimizer of this file holds, as far as they can be traced."""
    known: dict[str, list[Owner]] = index.memo("owners_in_file")
    if "all" not in known:
        owners: list[Owner] = []
        for call in index.calls:
            if (call.name or "").startswith("torch.optim.") and "lr_scheduler" not in (call.name or ""):
                owners.extend(optimizer_owners(index, call.node, call.place.scope) or [])
        known["all"] = owners
    return known["all"]


def parameter_free(index: ScriptIndex, binding: Binding) -> bool:
    """A module of this file's class that holds no parameters: a plain nn.Module subclass whose
    code builds no layer, no `nn.Parameter` and no other module (a `Normalize` that only registers
    buffers): a data transform, nothing an optimizer can train."""
    cls = constructed_class(index, binding)
    node = index.classes.get(cls) if cls else None
    if node is None or not node.bases or any(index.qualify(b.value) != "torch.nn.Module" for b in node.bases):
        return False
    for call in calls_in(node):
        func = call.func
        if isinstance(func, cst.Attribute) and spell(func) is None:
            continue  # `torch.tensor(mean).view(...)`: a method of a value
        spelled = spell(func) or ""
        if spelled.startswith("self.") or spelled in BUILTIN_NAMES or spelled == "super().__init__":
            continue
        qualified = index.qualify(func) or ""
        if qualified.startswith(("torch.nn.functional", "torch.nn.init")):
            continue
        if qualified.startswith("torch.") and not qualified.startswith("torch.nn."):
            continue
        return False
    return True


# -- the trained model a function hands back to its caller ---------------------------------------

ENDS_BLOCK = ("sys.exit", "exit", "quit", "os._exit")


@dataclass(eq=False)
class HandedBack:
    """`losses, model = main()` where main() returns its model: the caller's name for it, the
    call, and the statements after the call in the call's block that read the name before the
    caller binds it again (`model = nn.Linear(4, 1)` to reload starts another model)."""

    name: str
    call: CallSite
    reads: list[cst.BaseStatement]  # in the call's block, in order
    read_outside: cst.BaseStatement | None  # a read in a block around the call's (the teardown cannot follow it)
    rebound: cst.BaseStatement | None = None  # the statement of the call's block that binds the name again


def handed_back(index: ScriptIndex, scope: Scope, models: set[str]) -> list[HandedBack]:
    """For each call of the function `scope` that binds a name to one of its `models` as returned
    (`return model`, `return losses, model`): that name and where it is read, statement by statement
    (each read is reached by this binding, not by a later one of the same name)."""
    positions = {p for r in index.returns_under(scope.node)
                 if r.value is not None and (p := _position_returned(r.value, models)) is not None}
    found: list[HandedBack] = []
    for call in calls_of(index, scope):
        for position in sorted(positions):
            name = _bound_at(call, position)
            if name is not None:
                reads, outside, rebound = _reads_after(index, call.place.stmt, name)
                found.append(HandedBack(name, call, reads, outside, rebound))
    return found


def rebound_in_order(index: ScriptIndex, handed: HandedBack) -> bool:
    """Whether the caller binds the handed-back name again only in straight-line code, so that each
    use plainly means one model or the other: the call runs in no loop of its function, the name is
    bound again by a plain statement of the call's block (`model = GPTModel(cfg)`, not under an `if`),
    and every other binding of the name in the caller comes at or after that one."""
    if handed.rebound is None or not isinstance(handed.rebound, cst.SimpleStatementLine):
        return False
    stmt = handed.call.place.stmt
    if any(isinstance(around, (cst.For, cst.While)) for around in _around_in_function(index, stmt)):
        return False
    block, position = index.block_of[stmt]
    again = index.block_of[handed.rebound][1]
    for binding in index.bindings_of_in(handed.name, handed.call.place.scope):
        if binding.place.stmt is stmt:
            continue
        top = next((s for s in index.enclosing_statements(binding.place.stmt) if index.block_of.get(s, (None, 0))[0] is block), None)
        if top is None or index.block_of[top][1] < again:
            return False
    return position < again


def _around_in_function(index: ScriptIndex, stmt: cst.BaseStatement) -> list[cst.BaseStatement]:
    """The compound statements around `stmt`, up to its function."""
    found: list[cst.BaseStatement] = []
    for around in index.enclosing_statements(stmt)[1:]:
        if isinstance(around, (cst.FunctionDef, cst.ClassDef)):
            break
        found.append(around)
    return found


def _position_returned(value: cst.BaseExpression, models: set[str]) -> int | None:
    """-1 for `return model`, k when a model is the k-th of a returned tuple, else None."""
    if spell(value) in models:
        return -1
    if isinstance(value, cst.Tuple):
        return next((k for k, e in enumerate(value.elements) if spell(e.value) in models), None)
    return None


def _bound_at(call: CallSite, position: int) -> str | None:
    """The plain name `name = f()` (-1) or `a, name = f()` (1) binds to the call's result."""
    stmt = call.place.stmt
    assign = stmt.body[0] if isinstance(stmt, cst.SimpleStatementLine) and len(stmt.body) == 1 else None
    if not isinstance(assign, cst.Assign) or assign.value is not call.node or len(assign.targets) != 1:
        return None
    target = assign.targets[0].target
    if position == -1:
        element: cst.BaseExpression | None = target
    elif isinstance(target, (cst.Tuple, cst.List)) and position < len(target.elements):
        element = target.elements[position].value
    else:
        element = None
    return element.value if isinstance(element, cst.Name) else None


def _reads_after(index: ScriptIndex, stmt: cst.BaseStatement,
                 name: str) -> tuple[list[cst.BaseStatement], cst.BaseStatement | None, cst.BaseStatement | None]:
    """The statements after `stmt` in its block that read `name`, up to the one that binds it
    again (that one counts when it reads the name first: `model = model.module`); the first
    statement in a block around `stmt` (same function) that still reads it, if any; and the
    statement of `stmt`'s block that binds it again, if any."""
    scope = index.scope_of.get(stmt)
    rebinds = {id(b.place.stmt) for b in index.bindings_of_in(name, scope)} if scope is not None else set()
    reads: list[cst.BaseStatement] = []
    for each, level in _statements_after(index, stmt):
        if name in read_names(_without_targets(each)):
            if level > 0:
                return reads, each, None
            reads.append(each)
        if any(id(inner) in rebinds for inner in _statements_in(index, each)):
            return reads, None, each if level == 0 else None
    return reads, None, None


def statements_within(index: ScriptIndex, stmts: list[cst.BaseStatement]) -> set[int]:
    """The ids of `stmts` and of every statement inside them (same function)."""
    return {id(inner) for each in stmts for inner in _statements_in(index, each)}


def _statements_after(index: ScriptIndex, stmt: cst.BaseStatement) -> list[tuple[cst.BaseStatement, int]]:
    """The statements that follow `stmt` in its block (level 0), then those that follow each
    compound statement around it in the same function (levels 1, 2, ...)."""
    found: list[tuple[cst.BaseStatement, int]] = []
    level = 0
    for around in index.enclosing_statements(stmt):
        if isinstance(around, (cst.FunctionDef, cst.ClassDef)) and around is not stmt:
            break
        located = index.block_of.get(around)
        if located is None:
            break
        block, position = located
        found.extend((each, level) for each in block.body[position + 1:])
        level += 1
    return found


def _statements_in(index: ScriptIndex, stmt: cst.BaseStatement) -> list[cst.BaseStatement]:
    """`stmt` and every statement inside it (not inside a def or class it holds)."""
    return [n for n in descendants(stmt) if isinstance(n, cst.BaseStatement) and index.scope_of.get(n) is index.scope_of.get(stmt)]


def _without_targets(stmt: cst.BaseStatement) -> cst.CSTNode:
    """What a statement reads: an assignment's value, not its targets (`model = nn.Linear(4, 1)`)."""
    if isinstance(stmt, cst.SimpleStatementLine) and len(stmt.body) == 1 and isinstance(stmt.body[0], cst.Assign):
        return stmt.body[0].value
    return stmt


def block_end(index: ScriptIndex, stmt: cst.BaseStatement) -> tuple[cst.BaseStatement, bool] | None:
    """Where code that must run after everything following `stmt` in its block goes: (the
    block's last statement, True: after it) or (a closing `return x` / `sys.exit(0)` that computes
    nothing, False: before it); None when the block ends in one that computes (`return train()`),
    a `raise`, or a nested `__main__` block."""
    block, _ = index.block_of[stmt]
    last = block.body[-1]
    if last is index.main_guard:
        return None
    closing = last.body[0] if isinstance(last, cst.SimpleStatementLine) and len(last.body) == 1 else None
    if isinstance(closing, cst.Expr) and isinstance(closing.value, cst.Call) and \
            (index.qualify(closing.value.func) or spell(closing.value.func)) in ENDS_BLOCK:
        computes = any(calls_in(a.value) for a in closing.value.args)
    elif isinstance(closing, cst.Return):
        computes = closing.value is not None and bool(calls_in(closing.value))
    elif isinstance(closing, cst.Raise):
        computes = True  # the exception is built, maybe from the model: nothing can follow it
    else:
        return last, True
    return None if computes else (last, False)


@dataclass(eq=False)
class CannotFollow:
    """Why code cannot be placed after the caller's use of a handed-back model."""

    name: str
    call: CallSite
    use: cst.BaseStatement  # the statement the finding points at
    why: str


def caller_teardown(index: ScriptIndex, scope: Scope,
                    models: set[str]) -> tuple[cst.BaseStatement, bool] | CannotFollow | None:
    """Where the teardown of the function `scope` goes when its caller goes on using the model it
    returns (`losses, model = main()`, then `torch.save(model.state_dict(), ...)`): at the end of
    the call's block (as `block_end` says); None when no caller reads it after the call."""
    used = [h for h in handed_back(index, scope, models) if h.reads or h.read_outside is not None]
    if not used:
        return None
    first = used[0]
    use = first.read_outside or first.reads[0]
    if len(calls_of(index, scope)) > 1:
        return CannotFollow(first.name, first.call, use, f"`{scope.name}()` is called more than once, and each call sets the group up")
    if first.read_outside is not None:
        return CannotFollow(first.name, first.call, use, "it is used outside the block that holds the call")
    end = block_end(index, first.call.place.stmt)
    if end is None:
        block, _ = index.block_of[first.call.place.stmt]
        return CannotFollow(first.name, first.call, block.body[-1], "the block ends in a statement that computes or leaves before the end")
    return end
