"""The trained model's weights as the script reads them for saving: `<model>.state_dict()` calls
that run once the model is wrapped (`torch.save(model.state_dict(), path)`, a checkpoint dict
holding `model.state_dict()`).

A framework that shards the weights (DeepSpeed ZeRO-3, FSDP) gathers them on every rank at these
calls, and rank 0 saves the full copy; the rewrite belongs to the target's step.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import libcst as cst

from migrate.analysis.index import AttributeUse, ScriptIndex
from migrate.analysis.models import aliases, is_after
from migrate.analysis.sites import ModelSite
from migrate.analysis.upstream import unmoved


@dataclass(frozen=True, eq=False)
class StateDictRead:
    """One `<model>.state_dict()` call on the wrapped model."""

    owner: str  # the model as spelled there, without the `.module` of a former DataParallel
    call: cst.Call  # the `state_dict()` call
    stmt: cst.BaseStatement  # the statement holding it


def model_state_dicts(index: ScriptIndex, site: ModelSite) -> list[StateDictRead]:
    """Every `state_dict()` call on the model of `site` (under any of its aliases) that runs after
    the model is wrapped at `site`, in the order of the script."""
    names = aliases(index, site)
    found: list[StateDictRead] = []
    for use in index.attributes:
        if use.node.attr.value != "state_dict" or not use.called:
            continue
        owner = use.owner.removesuffix(".module")  # `model.module.state_dict()` of a former DataParallel
        if (owner, use.place.scope.name) not in names or not is_after(index, use.place.stmt, site):
            continue
        call = _call_of(index, use)
        if call is not None:
            found.append(StateDictRead(owner=owner, call=call, stmt=use.place.stmt))
    return found


def earlier_names(index: ScriptIndex, site: ModelSite) -> list[ModelSite]:
    """Other names of the model in its scope, bound before the model's name was given it
    (`ssd_net = build(...)`, `net = ssd_net`): after the wrap they still name the user's module,
    whose weights a sharding framework holds in shards. Each as a site of its own."""
    found: list[ModelSite] = []
    for binding in index.bindings:
        value = binding.value
        if (binding.target == site.spelling and binding.place.scope is site.scope and isinstance(value, cst.Name)
                and value.value != site.spelling and all(f.spelling != value.value for f in found)):
            found.append(dataclasses.replace(site, spelling=value.value, data_parallel=[]))
    return found


def moved_names(index: ScriptIndex, site: ModelSite) -> list[ModelSite]:
    """Names bound to the model moved (`m = model.to(device)`): `.to()` returns the module itself,
    so for a wrapper that changes the module in place (FSDP2) they name the sharded model too."""
    found: list[ModelSite] = []
    for binding in index.bindings:
        value = binding.value
        if binding.place.scope is not site.scope or binding.target == site.spelling:
            continue
        value = unmoved(value)
        if value is not binding.value and isinstance(value, cst.Name) and value.value == site.spelling \
                and all(f.spelling != binding.target for f in found):
            found.append(dataclasses.replace(site, spelling=binding.target, data_parallel=[]))
    return found


def _call_of(index: ScriptIndex, use: AttributeUse) -> cst.Call | None:
    """The call whose function is the attribute `use` (`model.state_dict` -> `model.state_dict()`)."""
    calls = index.derived("call_of_func", lambda: {c.node.func: c.node for c in reversed(index.calls)})
    return calls.get(use.node)
