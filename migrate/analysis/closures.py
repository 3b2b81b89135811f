"""Closures: the functions nested in a function that read one of its names as a free variable
(`def save_ckpt(path): torch.save(model.module.state_dict(), path)` inside `main()`), so that a
name of the outer function is followed into them. Below analysis.models.
"""

from __future__ import annotations

import libcst as cst

from migrate.analysis.index import Scope, ScriptIndex, descendants


def closures_reading(index: ScriptIndex, name: str, outer: Scope) -> list[Scope]:
    """The functions nested (at any depth) in `outer` where `name` is the outer function's own:
    neither they nor a function between them and `outer` bind it (parameter, assignment,
    `global`). A lambda is no scope of its own here: its reads already belong to `outer`."""
    if outer.is_module:
        return []
    return [scope for scope in _scopes(index) if scope is not outer and _free_in(index, scope, name, outer)]


def _scopes(index: ScriptIndex) -> list[Scope]:
    """Every function scope once, nested ones too (index.functions keeps one per name)."""
    return index.derived("all_scopes", lambda: list({id(s): s for s in index.scope_of.values() if not s.is_module}.values()))


def _free_in(index: ScriptIndex, scope: Scope, name: str, outer: Scope) -> bool:
    """Whether `name` read in `scope` is `outer`'s: `scope` stands inside `outer` and no function
    from it up to `outer` (excluded) binds the name."""
    chain: list[Scope] = []
    current: Scope | None = scope
    while current is not outer:
        if current is None or current.is_module:
            return False
        chain.append(current)
        current = index.scope_of.get(current.node)  # type: ignore[arg-type]  # where its `def` stands
    return not any(_binds(index, each, name) for each in chain)


def _binds(index: ScriptIndex, scope: Scope, name: str) -> bool:
    """`name` is a parameter of `scope`, assigned in it, or declared `global` there."""
    if name in scope.params or index.bindings_of_in(name, scope):
        return True
    body = scope.node.body if isinstance(scope.node, cst.FunctionDef) else scope.node
    return any(
        isinstance(node, cst.Global) and any(item.name.value == name for item in node.names)
        for node in descendants(body)
    )
