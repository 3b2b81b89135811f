"""Finds where training happens: the scopes that run backward, the calls that lead there,
and how a name seen inside a function maps back to the name its caller passed in. Generic syntax
helpers (an argument of a call, `contains`, `calls_in`) live in analysis/syntax.py.
"""

from __future__ import annotations

import builtins

import libcst as cst

from migrate.analysis.index import CallSite, Scope, ScriptIndex, descendants, reachable, spell
from migrate.analysis.syntax import argument_value

BUILTIN_NAMES = frozenset(dir(builtins))


def backward_calls(index: ScriptIndex) -> list[CallSite]:
    """`loss.backward()`, `scaler.scale(loss).backward()`, `engine.backward(loss)`."""
    return [
        call
        for call in index.calls
        if isinstance(call.node.func, cst.Attribute)
        and call.node.func.attr.value == "backward"
        and call.name != "torch.autograd.backward"
    ]


def callee_scope(index: ScriptIndex, call: CallSite) -> Scope | None:
    """The function of this file that a call runs, when it can be told from the spelling."""
    return index.answer("callee_scope", call, lambda: _callee_scope(index, call))


def _callee_scope(index: ScriptIndex, call: CallSite) -> Scope | None:
    name = call.name
    if name is None:
        return _method_of_new_instance(index, call.node)
    if name in index.functions:
        return index.functions[name]
    owner, _, method = name.rpartition(".")
    if owner == "self" and call.place.scope.class_name:
        return index.functions.get(f"{call.place.scope.class_name}.{method}")
    if owner and "." not in owner:
        cls = class_of_binding(index, owner, call.place.scope)
        if cls is not None:
            return index.functions.get(f"{cls}.{method}")
    return None


def class_of_binding(index: ScriptIndex, name: str, scope: Scope) -> str | None:
    """`trainer = Trainer(...)` -> "Trainer" (a class of this file)."""
    return index.answer("class_of_binding", (name, scope), lambda: _class_of_binding(index, name, scope))


def _class_of_binding(index: ScriptIndex, name: str, scope: Scope) -> str | None:
    for binding in index.bindings_of_in(name, scope):
        if isinstance(binding.value, cst.Call):
            cls = spell(binding.value.func)
            if cls in index.classes:
                return cls
    return None


def _method_of_new_instance(index: ScriptIndex, node: cst.Call) -> Scope | None:
    """`Trainer(args).fit(2)`: the method of a class of this file, called on an instance made there."""
    func = node.func
    if isinstance(func, cst.Attribute) and isinstance(func.value, cst.Call):
        cls = spell(func.value.func)
        if cls in index.classes:
            return index.functions.get(f"{cls}.{func.attr.value}")
    return None


def callers_of(index: ScriptIndex, scope: Scope) -> list[CallSite]:
    """The calls whose callee (`callee_scope`) is `scope`, in source order: one table for the
    whole script, rather than a scan of every call each time a function's callers are asked for."""
    return index.derived("callers_of", lambda: _calls_by_callee(index)).get(scope, [])


def _calls_by_callee(index: ScriptIndex) -> dict[Scope, list[CallSite]]:
    by_callee: dict[Scope, list[CallSite]] = {}
    for call in index.calls:
        callee = callee_scope(index, call)
        if callee is not None:
            by_callee.setdefault(callee, []).append(call)
    return by_callee


def training_scopes(index: ScriptIndex, backward: list[CallSite]) -> set[str]:
    """Scopes that call backward, and every scope that calls one of those (transitively).

    Scopes are named, and two functions may share a name (a redefinition): a name reached by one
    of them reaches the callers of every function of that name, so the walk goes by names."""
    callers: dict[str, list[str]] = {}  # callee name -> the names of the scopes that call it
    for call in index.calls:
        callee = callee_scope(index, call)
        if callee is not None:
            callers.setdefault(callee.name, []).append(call.place.scope.name)
    return reachable(callers, {call.place.scope.name for call in backward})


def is_local_callable(index: ScriptIndex, call: CallSite) -> bool:
    """A call of a value the script made itself (`model(x)`, `self.net(x)`), not of a function."""
    name = call.name
    if name is None:
        return False
    head, _, rest = name.partition(".")
    if rest and head != "self":
        return False
    if head == "self":
        if "." in rest or not call.place.scope.class_name:
            return False
        return f"{call.place.scope.class_name}.{rest}" not in index.functions
    shadowed = head in index.imports and bool(index.bindings_of(head))  # `model = model.RNNModel(...)`
    return (
        (head not in index.imports or shadowed)
        and head not in index.functions
        and head not in index.classes
        and head not in BUILTIN_NAMES
    )


def caller_arguments(index: ScriptIndex, scope: Scope, param: str) -> list[tuple[str, Scope, CallSite]]:
    """For a parameter of `scope`, the spelling each caller passes for it."""
    if param not in scope.params or not isinstance(scope.node, cst.FunctionDef):
        return []
    position = scope.params.index(param) - (1 if scope.class_name else 0)
    found: list[tuple[str, Scope, CallSite]] = []
    for call in callers_of(index, scope):
        passed = argument_value(call.node, param, position)
        spelled = spell(passed) if passed is not None else None
        if spelled is not None:
            found.append((spelled, call.place.scope, call))
    return found
