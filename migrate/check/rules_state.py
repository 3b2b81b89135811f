"""Check rules about sharded and wrapped state: an optimizer built before `fully_shard` (or FSDP)
over the same model (DC601), a wrapped model's `state_dict()` saved with its `module.` prefix
(DC602), a process group set up and never destroyed (DC801)."""

from __future__ import annotations

import re
from collections.abc import Iterator

import libcst as cst

from migrate.analysis.index import Binding, CallSite, descendants, read_names, spell
from migrate.check.facts import DATA_PARALLEL, DDP_WRAPPERS, FSDP1_WRAPPERS, FULLY_SHARD, PROCESS_GROUP_INITS, Hit, Script, argument, is_optimizer


# a comment on the save's line that says the prefix is kept: `# keys keep their module. prefix`
PREFIX_KEPT = re.compile(r"#.*\bmodule\.", re.IGNORECASE)


def optimizer_before_shard(script: Script) -> Iterator[Hit]:
    """DC601: `optimizer = SGD(model.parameters())` above `fully_shard(model)` in the same function."""
    shards = [(call, spell(call.node.args[0].value)) for call in script.calls_to(*FULLY_SHARD) if call.node.args]
    shards += [(b_call, spell(b_call.node.args[0].value)) for b_call in script.calls_to(*FSDP1_WRAPPERS) if b_call.node.args]
    optimizers = [call for call, name in script.named_calls if is_optimizer(name)]
    for shard, model in shards:
        if model is None:
            continue
        for optimizer in optimizers:
            if optimizer.place.scope is shard.place.scope and model in read_names(optimizer.node) and \
                    script.order(optimizer.place.stmt) < script.order(shard.place.stmt):
                yield Hit(optimizer.node, f"optimizer built before `{model}` is sharded: it holds the whole "
                          "parameters that the shard replaces, so the model never learns; build it after the shard")


def module_prefix_saved(script: Script) -> Iterator[Hit]:
    """DC602: `torch.save(ddp_model.state_dict(), ...)`: the keys start with `module.`, so the plain
    model cannot load them."""
    wrapped = script.wrapped_names(DDP_WRAPPERS + DATA_PARALLEL)
    if _strips_prefix(script):
        return
    for save in script.calls_to("torch.save"):
        if PREFIX_KEPT.search(_line(script, save.node)):
            continue
        state = argument(save.node, "obj", 0)
        if state is None:
            continue
        for node in descendants(state):
            owner = _state_dict_owner(node)
            if owner is not None and any(_bound_before(script, b, owner, save) for b in wrapped):
                yield Hit(node, f"`{owner}.state_dict()` of the wrapped model: every key starts with `module.`, so "
                          f"the plain model cannot load it; save `{owner}.module.state_dict()`")


def _strips_prefix(script: Script) -> bool:
    """The script reads `module.`-prefixed keys itself (`key.removeprefix("module.")`): the prefix is
    its checkpoints' format, kept on purpose (a former DataParallel script's checkpoints load)."""
    return any(isinstance(n, cst.SimpleString) and n.evaluated_value == "module." for n in descendants(script.module))


def _line(script: Script, node: cst.CSTNode) -> str:
    """The source line a node starts on (its comment included)."""
    line = script.position(node)[0]
    lines = script.code.splitlines()
    return lines[line - 1] if 0 < line <= len(lines) else ""


def _state_dict_owner(node: cst.CSTNode) -> str | None:
    if isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute) and node.func.attr.value == "state_dict":
        return spell(node.func.value)
    return None


def _bound_before(script: Script, binding: Binding, owner: str, save: CallSite) -> bool:
    if binding.target != owner:
        return False
    if binding.place.scope is save.place.scope:
        return script.order(binding.place.stmt) < script.order(save.place.stmt)
    return binding.place.scope.is_module or owner.startswith("self.")


def process_group_kept(script: Script) -> Iterator[Hit]:
    """DC801: init_process_group and no destroy_process_group anywhere in the script."""
    if script.calls_ending("destroy_process_group") or script.method_calls("destroy_process_group"):
        return
    for call in script.calls_to(*PROCESS_GROUP_INITS)[:1]:
        yield Hit(call.node, "process group never destroyed: torch warns at exit and the NCCL communicators can "
                  "leak or hang on shutdown; call dist.destroy_process_group() at the end of training")
