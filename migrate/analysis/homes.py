"""Where a model is built: the binding of a spelling that constructs it (`home_binding`), looking
through moves and casts (`net = Net().to(device)`) and past bindings that only compile or wrap the
model itself. Shared by analysis.models and analysis.trained, below both.
"""

from __future__ import annotations

import libcst as cst

from migrate.analysis.index import Binding, Scope, ScriptIndex

DATA_PARALLEL = ("torch.nn.DataParallel", "torch.nn.parallel.DataParallel", "torch.nn.parallel.data_parallel.DataParallel")
COMPILE = "torch.compile"
MOVES = frozenset({"to", "cuda", "cpu", "float", "half", "double", "bfloat16"})


def home_binding(index: ScriptIndex, spelling: str, scope: Scope) -> Binding | None:
    """The binding that builds the model: for `self.x`, the class's own; else the latest in `scope`,
    or failing that the latest anywhere that is not a builder returning it."""
    return index.answer("home_binding", (spelling, scope), lambda: _home_binding(index, spelling, scope))


def _home_binding(index: ScriptIndex, spelling: str, scope: Scope) -> Binding | None:
    if spelling.startswith("self."):
        candidates = index.bindings_of_in_class(spelling, scope.class_name)
        in_init = [b for b in candidates if b.place.scope.name.endswith(".__init__")]
        chosen = in_init or candidates
        return chosen[-1] if chosen else None
    same_scope = index.bindings_of_in(spelling, scope)
    if same_scope:
        return _last_construction(index, same_scope)
    elsewhere = index.module_bindings_of(spelling)
    return _last_construction(index, elsewhere) if elsewhere else None


def _last_construction(index: ScriptIndex, bindings: list[Binding]) -> Binding:
    """The last binding that is not a torch.compile or DataParallel of the model itself."""
    kept = [b for b in bindings if not wraps_itself(index, b)]
    return (kept or bindings)[-1]


def wraps_itself(index: ScriptIndex, binding: Binding) -> bool:
    value = without_moves(binding.value)
    return isinstance(value, cst.Call) and (index.qualify(value.func) in (COMPILE, *DATA_PARALLEL))


def without_moves(value: cst.BaseExpression | None) -> cst.BaseExpression | None:
    """`DataParallel(net).to(device)` -> `DataParallel(net)`: what a chain of moves is called on."""
    while isinstance(value, cst.Call) and isinstance(value.func, cst.Attribute) and value.func.attr.value in MOVES:
        value = value.func.value
    return value
