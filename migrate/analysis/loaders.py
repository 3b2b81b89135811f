"""Finds the training DataLoaders, the step loops that iterate them and the epoch loops around
those, so the sampler can be swapped and `set_epoch` called where each epoch starts.
"""

from __future__ import annotations

import libcst as cst

from migrate.analysis.index import CallSite, Loop, Scope, ScriptIndex, spell
from migrate.analysis.sites import EpochLoop, LoaderSite
from migrate.analysis.training import BUILTIN_NAMES, callee_scope, caller_arguments, contains

DATA_LOADERS = ("torch.utils.data.DataLoader", "torch.utils.data.dataloader.DataLoader")
EVALUATION_WORDS = ("val", "test", "eval", "dev")


def data_loader_calls(index: ScriptIndex) -> list[CallSite]:
    return index.calls_named(*DATA_LOADERS)


def step_loops(index: ScriptIndex, training: set[str], backward_scopes: set[str]) -> list[Loop]:
    """Innermost `for` loops whose body runs backward, directly or through a training call."""
    found: list[Loop] = []
    for loop in index.loops:
        if not isinstance(loop.node, cst.For) or loop.place.scope.name not in training:
            continue
        if _runs_training(index, loop, training) and not any(
            inner is not loop and inner.node in _loops_below(index, loop) and _runs_training(index, inner, training)
            for inner in index.loops
        ):
            found.append(loop)
    return found


def _loops_below(index: ScriptIndex, outer: Loop) -> set[cst.CSTNode]:
    return {loop.node for loop in index.loops if outer.node in loop.place.loops}


def _runs_training(index: ScriptIndex, loop: Loop, training: set[str]) -> bool:
    """One pass of the loop is one training step: backward runs in its body, or in a function it
    calls that runs backward once (not in a loop of its own, which would be the step loop)."""
    for call in index.calls:
        if loop.node not in call.place.loops:
            continue
        if _is_backward(call):
            return True
        callee = callee_scope(index, call)
        if callee is not None and any(
            _is_backward(inner) and inner.place.scope is callee and not inner.place.loops for inner in index.calls
        ):
            return True
    return False


def _is_backward(call: CallSite) -> bool:
    return isinstance(call.node.func, cst.Attribute) and call.node.func.attr.value == "backward"


def loader_spelling(index: ScriptIndex, loop: Loop) -> str | None:
    """What a step loop iterates, seen through enumerate/tqdm/zip and `pbar = tqdm(loader)`."""
    candidates = [n for n in loop.iter_names if _is_value_name(index, n)]
    if not candidates:
        return None
    name = candidates[0]
    for binding in index.bindings:
        if binding.target == name and binding.place.scope is loop.place.scope and isinstance(binding.value, cst.Call):
            qualified = index.qualify(binding.value.func) or ""
            if qualified.split(".")[-1] == "tqdm":
                inner = [spell(a.value) for a in binding.value.args if a.keyword is None]
                if inner and inner[0]:
                    return inner[0]
    return name


def _is_value_name(index: ScriptIndex, name: str) -> bool:
    head = name.split(".")[0]
    if head == "self":
        return True
    return head not in index.imports and head not in BUILTIN_NAMES and head not in index.functions


def training_loader_names(index: ScriptIndex, loops: list[Loop]) -> set[str]:
    """Every spelling a training loader goes by: in the step loop's scope and in its callers."""
    names: set[str] = set()
    for loop in loops:
        name = loader_spelling(index, loop)
        if name is None:
            continue
        names.add(name)
        scope = loop.place.scope
        for _ in range(4):
            callers = caller_arguments(index, scope, name)
            if not callers:
                break
            name, scope, _call = callers[0]
            names.add(name)
        if name.startswith("self."):
            names |= _constructor_sources(index, scope, name)
    return names


def _constructor_sources(index: ScriptIndex, scope: Scope, attribute: str) -> set[str]:
    """`self.train_data = train_data` in `__init__` -> what callers pass as train_data."""
    sources: set[str] = set()
    for binding in index.bindings:
        if binding.target != attribute or binding.value is None or binding.place.scope.class_name != scope.class_name:
            continue
        param = spell(binding.value)
        if param is not None and param in binding.place.scope.params:
            sources |= {spelled for spelled, _s, _c in caller_arguments(index, binding.place.scope, param)}
    return sources


def find_loaders(index: ScriptIndex, training_names: set[str]) -> list[LoaderSite]:
    """The DataLoader calls that feed training (to shard); evaluation loaders are left alone."""
    calls = data_loader_calls(index)
    training: list[LoaderSite] = []
    for call in calls:
        names = _bound_names(index, call)
        spelling = names[0] if names else None
        is_training = bool(set(names) & training_names) or (
            len(calls) == 1
            or (_shuffles(call) and not any(w in (spelling or "").lower() for w in EVALUATION_WORDS))
        )
        if is_training:
            training.append(LoaderSite(call=call, spelling=spelling))
    return training


def _bound_names(index: ScriptIndex, call: CallSite) -> list[str]:
    """Names the loader is bound to: directly, or through a helper that returns it."""
    direct = [b.target for b in index.bindings if b.value is call.node]
    if direct:
        return direct
    stmt = call.place.stmt
    returns = isinstance(stmt, cst.SimpleStatementLine) and any(
        isinstance(s, cst.Return) and s.value is call.node for s in stmt.body
    )
    if returns and not call.place.scope.is_module:
        helper = call.place.scope.name
        return [
            b.target
            for b in index.bindings
            if isinstance(b.value, cst.Call) and spell(b.value.func) == helper
        ]
    return []


def _shuffles(call: CallSite) -> bool:
    for arg in call.node.args:
        if arg.keyword is not None and arg.keyword.value == "shuffle":
            return not (isinstance(arg.value, cst.Name) and arg.value.value == "False")
    return False


def find_epoch_loops(index: ScriptIndex, loops: list[Loop]) -> list[EpochLoop]:
    """The `for epoch in ...` around each step loop, in its own scope or in a caller's."""
    found: list[EpochLoop] = []
    for step in loops:
        loader = loader_spelling(index, step)
        if loader is None:
            continue
        epoch = _outer_epoch_loop(index, step)
        if epoch is not None:
            found.append(EpochLoop(loop=epoch, loader=loader))
            continue
        found.extend(_epoch_loops_in_callers(index, step.place.scope, loader))
    unique: dict[int, EpochLoop] = {}
    for item in found:
        unique.setdefault(id(item.loop.node), item)
    return list(unique.values())


def _outer_epoch_loop(index: ScriptIndex, step: Loop) -> Loop | None:
    for outer in reversed(step.place.loops):
        loop = next((l for l in index.loops if l.node is outer), None)
        if loop is not None and loop.target is not None:
            return loop
    return None


def _epoch_loops_in_callers(index: ScriptIndex, scope: Scope, loader: str) -> list[EpochLoop]:
    found: list[EpochLoop] = []
    for call in index.calls:
        if callee_scope(index, call) is not scope or not call.place.loops:
            continue
        loop = next((l for l in index.loops if l.node is call.place.loops[-1]), None)
        seen_as = _as_seen_by_caller(index, scope, loader, call)
        if seen_as is None:
            continue
        if loop is not None and loop.target is not None:
            found.append(EpochLoop(loop=loop, loader=seen_as))
        else:
            found.extend(_epoch_loops_in_callers(index, call.place.scope, seen_as))
    if not found and not scope.is_module:
        for call in index.calls:
            if callee_scope(index, call) is scope and not call.place.loops:
                seen_as = _as_seen_by_caller(index, scope, loader, call)
                if seen_as is not None:
                    found.extend(_epoch_loops_in_callers(index, call.place.scope, seen_as))
    return found


def _as_seen_by_caller(index: ScriptIndex, scope: Scope, loader: str, call: CallSite) -> str | None:
    if loader.startswith("self."):
        return loader if call.place.scope.class_name == scope.class_name else None
    if loader in scope.params:
        for spelled, _scope, site in caller_arguments(index, scope, loader):
            if site is call:
                return spelled
        return None
    return loader if contains(call.place.scope.node, lambda n: isinstance(n, cst.Name) and n.value == loader) else None
