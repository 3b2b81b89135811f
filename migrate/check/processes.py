"""Which code of a script runs on no rank, so that what it prints or writes comes out once (or never)
rather than once per process: the process that spawns the ranks, and functions nothing calls.

A script that starts its ranks itself (`mp.spawn(worker, nprocs=n)`, `start_processes`, or
`multiprocessing.Process(target=worker)`) from its `if __name__ == "__main__":` block runs that
block once, in the parent; each spawned rank imports the file under another name and runs the
spawned function only. So the block, and every function only it (or such a function) calls, runs in
the launcher alone; the spawned function and all it calls are rank code. When a spawned function
cannot be named (a method, a lambda), nothing is said to run in the launcher.

A function (or a static or class method) that nothing in the script names, in a call, an
attribute, a reference or a string, never runs; dunder methods, `forward`, decorated functions and
other methods may be called from outside (by torch, a framework, a decorator) and are not counted.
"""

from __future__ import annotations

import libcst as cst

from migrate.analysis.index import Scope, descendants, spell
from migrate.analysis.training import callee_scope, callers_of
from migrate.check.facts import Script, argument

SPAWNERS = ("torch.multiprocessing.spawn", "torch.multiprocessing.start_processes",
            "torch.multiprocessing.spawn.spawn", "torch.multiprocessing.spawn.start_processes")
PROCESSES = ("multiprocessing.Process", "torch.multiprocessing.Process", "multiprocessing.context.Process")
METHOD_KINDS = ("staticmethod", "classmethod")


def in_launcher(script: Script, stmt: cst.BaseStatement) -> bool:
    """`stmt` runs only in the process that spawns the ranks (see the module docstring)."""
    ranks = rank_scopes(script)
    if ranks is None or script.index.main_guard is None:
        return False
    return script.index.answer("check_in_launcher", stmt, lambda: _launcher_only(script, stmt, ranks, set()))


def rank_scopes(script: Script) -> frozenset[Scope] | None:
    """The spawned functions and every function of the script they call; None when the script
    spawns no ranks, or spawns one whose function cannot be named."""
    def build() -> frozenset[Scope] | None:
        targets = [_target(script, call.node, name) for call, name in script.named_calls
                   if name in SPAWNERS or name in PROCESSES]
        if not targets or any(t is None for t in targets):
            return None
        return frozenset(_called_from(script, [t for t in targets if t is not None]))
    return script.index.derived("check_rank_scopes", build)


def _target(script: Script, call: cst.Call, name: str) -> Scope | None:
    """The function of the script a spawn call starts (`spawn(fn, ...)`, `Process(target=fn)`,
    through `functools.partial(fn, ...)` too)."""
    given = argument(call, "target") if name in PROCESSES else argument(call, "fn", 0)
    if isinstance(given, cst.Call) and (script.index.qualify(given.func) or "") == "functools.partial" and given.args:
        given = given.args[0].value
    spelled = spell(given) if given is not None else None
    return script.index.functions.get(spelled) if spelled is not None else None


def _called_from(script: Script, start: list[Scope]) -> set[Scope]:
    reached = set(start)
    pending = list(start)
    while pending:
        for call in script.index.calls_from(pending.pop()):
            callee = callee_scope(script.index, call)
            if callee is not None and callee not in reached:
                reached.add(callee)
                pending.append(callee)
    return reached


def _launcher_only(script: Script, stmt: cst.BaseStatement, ranks: frozenset[Scope], visiting: set[Scope]) -> bool:
    if any(s is script.index.main_guard for s in script.index.enclosing_statements(stmt)):
        return True
    scope = script.index.scope_of.get(stmt)
    if scope is None or scope.is_module or scope in ranks or scope in visiting:
        return False
    visiting.add(scope)
    callers = callers_of(script.index, scope)
    return bool(callers) and all(_launcher_only(script, c.place.stmt, ranks, visiting) for c in callers)


def never_called(script: Script, scope: Scope) -> bool:
    """A function of the script that nothing in it names (see the module docstring)."""
    node = scope.node
    if not isinstance(node, cst.FunctionDef):
        return False
    short = node.name.value
    if short.startswith("__") or short == "forward":
        return False
    kinds = [spell(d.decorator) for d in node.decorators]
    if any(kind not in METHOD_KINDS for kind in kinds) or (scope.class_name is not None and not kinds):
        return False
    return short not in _named(script)


def _named(script: Script) -> frozenset[str]:
    """Every identifier the script reads or spells (names, attributes, strings), less the names that
    `def` and `class` statements give and the attributes of what it imports (`AutoModel.from_pretrained`
    is not the script's own `from_pretrained`)."""
    def build() -> frozenset[str]:
        nodes = list(descendants(script.module))
        skipped = {id(n.name) for n in nodes if isinstance(n, (cst.FunctionDef, cst.ClassDef))}
        skipped |= {id(n.attr) for n in nodes if isinstance(n, cst.Attribute) and _imported(script, n.value)}
        found: set[str] = set()
        for n in nodes:
            if isinstance(n, cst.Name) and id(n) not in skipped:
                found.add(n.value)
            elif isinstance(n, cst.SimpleString) and isinstance(n.evaluated_value, str):
                found.add(n.evaluated_value)
        return frozenset(found)
    return script.index.derived("check_named", build)


def _imported(script: Script, owner: cst.BaseExpression) -> bool:
    """`owner` is a name the script imports (or an attribute of one), not one of its own classes."""
    head = (spell(owner) or "").split(".", 1)[0]
    return head in script.index.imports and head not in script.index.classes
