"""Where a DataLoader's dataset comes from, and whether it streams.

A DistributedSampler needs a dataset with a length and indices. Iterable datasets (a subclass of
`IterableDataset`, torchtext datapipes, `load_dataset(..., streaming=True)`, WebDataset) take no
sampler at all: DataLoader raises as soon as it is given one. The dataset is followed through
the names it is bound to (`pipe = pipe.map(f)` chains included) and through function parameters
back to the call that builds it.
"""

from __future__ import annotations

from dataclasses import dataclass

import libcst as cst

from migrate.analysis.index import Binding, CallSite, Scope, ScriptIndex, spell
from migrate.analysis.syntax import argument
from migrate.analysis.training import callers_of

ITERABLE_BASES = ("IterableDataset", "IterDataPipe", "IterableWrapper", "WebDataset")
STREAMING_MODULES = ("torchtext.datasets.", "torchdata.", "webdataset.")
TO_ITERABLE = ("to_iterable_dataset",)
GENERIC_HINT = (
    "make its __iter__ yield only every torch.distributed.get_world_size()-th item, starting at "
    "torch.distributed.get_rank()"
)
DATAPIPE_HINT = "add `.sharding_filter()` to the datapipe: DataLoader then gives each rank its own share"
HUGGING_FACE_HINT = (
    "split it with datasets.distributed.split_dataset_by_node(dataset, rank=torch.distributed.get_rank(), "
    "world_size=torch.distributed.get_world_size())"
)


@dataclass(frozen=True)
class Streaming:
    """Why a dataset is iterable: the call that builds it and what it is."""

    origin: cst.Call
    what: str  # "`Stream` derives from IterableDataset", ...
    hint: str = GENERIC_HINT  # how to shard it by rank instead


def streaming_origin(index: ScriptIndex, value: cst.BaseExpression, scope: Scope, before: cst.BaseStatement | None) -> Streaming | None:
    """The reason `value` (a DataLoader's dataset, read in `scope` at `before`) is an iterable
    dataset, or None when it is (or may be) a map-style one."""
    return _classify(index, value, scope, before, depth=0, seen=set())


def _classify(
    index: ScriptIndex, value: cst.BaseExpression, scope: Scope, before: cst.BaseStatement | None, depth: int, seen: set[int]
) -> Streaming | None:
    if depth > 8 or id(value) in seen:
        return None
    seen.add(id(value))
    name = spell(value)
    if name is not None:
        binding = _latest_binding(index, name, scope, before)
        if binding is not None and binding.value is not None:
            return _classify(index, binding.value, binding.place.scope, binding.place.stmt, depth + 1, seen)
        if binding is None and name in scope.params:
            for passed, call in _passed_values(index, scope, name):
                found = _classify(index, passed, call.place.scope, call.place.stmt, depth + 1, seen)
                if found is not None:
                    return found
        return None
    if not isinstance(value, cst.Call):
        return None
    return _classify_call(index, value, scope, before, depth, seen)


def _classify_call(
    index: ScriptIndex, call: cst.Call, scope: Scope, before: cst.BaseStatement | None, depth: int, seen: set[int]
) -> Streaming | None:
    qualified = index.qualify(call.func) or ""
    last = qualified.rsplit(".", 1)[-1]
    cls = index.classes.get(spell(call.func) or "")
    if cls is not None:
        base = _iterable_base(index, cls, set())
        return Streaming(call, f"`{cls.name.value}` derives from {base}") if base else None
    if qualified.startswith(STREAMING_MODULES[0]):
        return Streaming(call, "torchtext datasets are iterable datapipes (since torchtext 0.12)", DATAPIPE_HINT)
    if qualified.startswith(STREAMING_MODULES[1:]) or last in ITERABLE_BASES:
        hint = DATAPIPE_HINT if qualified.startswith("torchdata.") or last == "IterableWrapper" else GENERIC_HINT
        return Streaming(call, f"`{last}` is an iterable dataset", hint)
    if qualified in ("datasets.load_dataset", "datasets.load.load_dataset") and _is_true(_keyword(call, "streaming")):
        return Streaming(call, "`streaming=True` makes it an IterableDataset", HUGGING_FACE_HINT)
    if isinstance(call.func, cst.Attribute):
        if call.func.attr.value in TO_ITERABLE:
            return Streaming(call, f"`.{call.func.attr.value}()` makes it an IterableDataset", HUGGING_FACE_HINT)
        owner = spell(call.func.value)
        if owner is None or owner.split(".")[0] not in index.imports:
            # `pipe.map(f)` / `pipe.batch(n)` / `load(...).shuffle()`: the same kind as what it is called on
            return _classify(index, call.func.value, scope, before, depth + 1, seen)
    return None


def _passed_values(index: ScriptIndex, scope: Scope, param: str) -> list[tuple[cst.BaseExpression, CallSite]]:
    """What each call of `scope` found in this file passes for `param` (any expression)."""
    position = scope.params.index(param) - (1 if scope.class_name else 0)
    found: list[tuple[cst.BaseExpression, CallSite]] = []
    for call in callers_of(index, scope):
        arg = argument(call.node, param, position)
        if arg is not None:
            found.append((arg.value, call))
    return found


def _iterable_base(index: ScriptIndex, cls: cst.ClassDef, seen: set[str]) -> str | None:
    """The iterable base a class of this file derives from, directly or through its own classes."""
    if cls.name.value in seen:
        return None
    seen.add(cls.name.value)
    for base in cls.bases:
        qualified = index.qualify(base.value) or ""
        if qualified.rsplit(".", 1)[-1] in ITERABLE_BASES:
            return qualified.rsplit(".", 1)[-1]
        local = index.classes.get(spell(base.value) or "")
        if local is not None:
            found = _iterable_base(index, local, seen)
            if found:
                return found
    return None


def _latest_binding(index: ScriptIndex, name: str, scope: Scope, before: cst.BaseStatement | None) -> Binding | None:
    """The binding of `name` that reaches `before`: the last one in `scope` above it (by source
    order), else the module's (a global read inside a function)."""
    order = index.statement_order()
    limit = order.get(before, len(order)) if before is not None else len(order)
    candidates = [b for b in index.bindings_of_in(name, scope) if order.get(b.place.stmt, 0) < limit and b.value is not None]
    if not candidates and not scope.is_module:
        candidates = [b for b in index.module_bindings_of(name) if b.value is not None]
    if not candidates and name.startswith("self."):
        candidates = [b for b in index.bindings_of_in_class(name, scope.class_name) if b.value is not None]
    return candidates[-1] if candidates else None


def _keyword(call: cst.Call, name: str) -> cst.BaseExpression | None:
    for arg in call.args:
        if arg.keyword is not None and arg.keyword.value == name:
            return arg.value
    return None


def _is_true(value: cst.BaseExpression | None) -> bool:
    return isinstance(value, cst.Name) and value.value == "True"
