"""The module training updates must be the one wrapped: when it cannot be (it runs only inside
another object's method, or steps its own optimizer inside itself), the file is left unchanged
with MIG104, which names what was seen. Wrapping something else would let the replicas of the
trained module silently train apart.

The wrapped model must also be followed where the training function hands it back
(`losses, model = main()`, then `torch.save(model.state_dict(), path)` in the `__main__` block),
or that save writes what the wrapper holds: DDP's and DeepSpeed's `module.` keys, FSDP's or ZeRO-3's
shards. Where the caller binds the name again in straight-line code (`model = GPTModel(cfg)` to
reload), the uses before that binding are the returned model and those after it the new one
(analysis.trained.rebound_in_order); where a loop or a branch makes that order unclear, the
conversion cannot tell the two apart, and where the runtime's teardown cannot follow the caller's
use of a sharded model (FSDP, ZeRO-3; see steps.init_process_group), a gather there would run
without a process group: both leave the file unchanged with MIG104, at the save or the use.
"""

from __future__ import annotations

import libcst as cst

from migrate.analysis.index import ScriptIndex, descendants, read_names, spell
from migrate.analysis.models import ONLY_FORWARD, aliases, declared_global, is_after
from migrate.analysis.trained import CannotFollow, HandedBack, caller_teardown, handed_back
from migrate.steps.base import Context
from migrate.target_options import zero_stage

# FSDP2 (fully_shard keeps the class) gathers the weights around forward() and registered methods;
# the conversion registers only methods called outside training
SHARDED_ONLY_FORWARD = ("FSDP2 gathers the weights only around forward() and around methods registered with "
                        "register_fsdp_forward_method, which this conversion does only for methods called outside "
                        "training, so that work would read shards")


def refuse_unless_method_bypass(ctx: Context) -> None:
    """Horovod: a model trained through a method other than forward() converts (its gradient
    hooks are on the parameters, not around forward()); every other reason still refuses."""
    if ctx.sites.unwrappable is not None and any(
            isinstance(part, str) and ONLY_FORWARD in part for part in ctx.sites.unwrappable[0]):
        return
    _refuse_unwrappable(ctx)  # Horovod leaves the user's module itself in place: a handed-back one is that module


def refuse_unwrappable(ctx: Context) -> None:
    """MIG104 for a trained module that cannot be wrapped, or a wrapped one handed back where the
    conversion cannot follow it (see the module docstring)."""
    _refuse_unwrappable(ctx)
    if not ctx.refused:
        _refuse_unfollowed_hand_back(ctx)


def _refuse_unwrappable(ctx: Context) -> None:
    if ctx.sites.unwrappable is None:
        return
    parts, node = ctx.sites.unwrappable
    text = "".join(part if isinstance(part, str) else str(ctx.position(part)[0]) for part in parts)
    if ctx.wrapper is not None and not ctx.wrapper.through_module:
        text = text.replace(ONLY_FORWARD, SHARDED_ONLY_FORWARD)
    ctx.report("MIG104", text, node)
    ctx.refused = True



def _refuse_global_rebinding(ctx: Context) -> bool:
    """MIG104 when a function binds the wrapped model's module-level name again (`global model`,
    then `model, criterion, optimizer = torch.load(f)`) and runs after the wrap: from that call on
    the name holds the loaded model without the wrapper, which the converted uses of the wrapper
    (`model.module`, the gradient averaging) do not fit."""
    index = ctx.index
    for site in ctx.sites.models:
        if not site.scope.is_module or "." in site.spelling:
            continue
        for scope in index.functions.values():
            if site.spelling not in declared_global(scope.node):
                continue
            binding = next((b for b in index.bindings_of_in(site.spelling, scope) if is_after(index, b.place.stmt, site)), None)
            if binding is None:
                continue
            anchor = site.wrap_before or site.wrap_after
            assert anchor is not None
            ctx.report("MIG104", f"`{scope.name}()` declares `global {site.spelling}` and binds it again "
                       f"(`{ctx.code(binding.node).strip()}`), and it runs after `{site.spelling}` is wrapped "
                       f"({'before' if site.wrap_before is not None else 'after'} line {ctx.position(anchor)[0]}): from that call on `{site.spelling}` is the loaded model, not the "
                       "wrapped one, and what the conversion writes for the wrapper would not fit it. The file is left "
                       f"unchanged: load the weights into the model instead (`{site.spelling}.load_state_dict(...)`) "
                       "and convert again", binding.node)
            ctx.refused = True
            return True
    return False


def _refuse_unfollowed_hand_back(ctx: Context) -> None:
    if _refuse_global_rebinding(ctx):
        return
    for site in ctx.sites.models:
        if site.scope.is_module:
            continue
        names = aliases(ctx.index, site)
        for handed in handed_back(ctx.index, site.scope, {site.spelling}):
            save = next((node for stmt in handed.reads if (node := _save_of(ctx.index, stmt, handed.name)) is not None), None)
            if save is not None and (handed.name, handed.call.place.scope.name) not in names:
                _report_rebound(ctx, handed, save)
                return
    _refuse_early_teardown(ctx)


def _save_of(index: ScriptIndex, stmt: cst.BaseStatement, name: str) -> cst.Call | None:
    """The call in `stmt` that reads `name`'s weights for saving: `name.state_dict()` (or
    `name.module.state_dict()`), or `torch.save(...)` of anything reading `name`."""
    for node in descendants(stmt):
        if not isinstance(node, cst.Call):
            continue
        func = node.func
        if isinstance(func, cst.Attribute) and func.attr.value == "state_dict" and spell(func.value) in (name, f"{name}.module"):
            return node
        if index.qualify(func) == "torch.save" and any(name in read_names(a.value) for a in node.args):
            return node
    return None


def _report_rebound(ctx: Context, handed: HandedBack, save: cst.Call) -> None:
    call_line = ctx.position(handed.call.node)[0]
    scope = handed.call.place.scope
    others = [ctx.position(b.node)[0] for b in ctx.index.bindings_of_in(handed.name, scope)]
    again = next((line for line in others if line > call_line), None) or next(line for line in others if line != call_line)
    held = "the wrapper's `module.`-prefixed keys" if ctx.wrapper is None or ctx.wrapper.through_module else "each rank's shards"
    ctx.report("MIG104", f"`{handed.name}` (line {call_line}) is the wrapped model `{spell(handed.call.node.func)}()` returns, "
               f"but the script also binds `{handed.name}` at line {again}, in an order a loop, a branch or a "
               f"binding before the call leaves unclear, so the conversion cannot tell which model each "
               f"use of `{handed.name}` means: this save would write {held}, not the model's own weights; the file is left "
               f"unchanged. Give the returned model a name of its own (`trained = ...`) and convert again", save)
    ctx.refused = True


def _refuse_early_teardown(ctx: Context) -> None:
    """The runtime's teardown runs at the end of the training function, unless its caller goes on
    using the model it returns: then at the end of the caller's block (steps.init_process_group).
    Where it cannot go there, a gather of sharded weights (FSDP, ZeRO-3) would run without a
    process group; DDP's replicas are whole, and its `model.module` reads need none."""
    entry, wrapper = ctx.sites.entry, ctx.wrapper
    shards = wrapper is not None and (not wrapper.through_module or wrapper.zero3_partitions and zero_stage(ctx.options) == 3)
    if ctx.runtime is None or not shards or entry is None or entry.scope.is_module:
        return
    models = {site.spelling for site in ctx.sites.models if site.scope is entry.scope}
    place = caller_teardown(ctx.index, entry.scope, models)
    if isinstance(place, CannotFollow):
        ctx.report("MIG104", f"`{place.name}` (line {ctx.position(place.call.node)[0]}) is the wrapped model "
                   f"`{entry.scope.name}()` returns, and the caller uses it where the process group's teardown cannot "
                   f"follow: {place.why}; without a process group the wrapper cannot gather its weights there. The file is left "
                   "unchanged: use the model inside the training function, or end the caller's block with that use", place.use)
        ctx.refused = True
