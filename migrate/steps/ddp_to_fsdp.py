"""A script already on DistributedDataParallel, moved to FSDP2: the process group, samplers, rank
guards and launcher it has stay; each `model = DDP(net, ...)` becomes the fully_shard calls for
`net` (and `model = net` when the names differ), `model.module` becomes `model` (fully_shard keeps
the user's class), `with model.no_sync():` becomes `model.set_requires_gradient_sync(False)` ...
`(True)`, and checkpoints are gathered on every rank (migrate.steps.fsdp_state_dicts), above the
script's own `if rank == 0:`. A wrap that is not one `name = DDP(module, ...)` statement is left
for the user (MIG306), the file unchanged.
"""

from __future__ import annotations

import libcst as cst

from migrate.analysis.index import spell
from migrate.analysis.models import aliases
from migrate.analysis.sites import ModelSite
from migrate.steps.base import Context, statements
from migrate.steps.fsdp_shard import shard
from migrate.steps.wrap_model import without_module
from migrate.steps.gathers import tests_rank
from migrate.steps.no_sync import negated
from migrate.steps.rank_zero import collective_call

DDP_CALLS = ("torch.nn.parallel.DistributedDataParallel", "torch.nn.parallel.distributed.DistributedDataParallel")


def ddp_to_fsdp(ctx: Context) -> None:
    index = ctx.index
    sites: list[ModelSite] = []
    for call in index.calls:
        if (index.qualify(call.node.func) or "") not in DDP_CALLS:
            continue
        stmt = call.place.stmt
        target, inner = _wrap_names(stmt, call.node)
        if target is None or inner is None:
            ctx.report("MIG306", f"`{ctx.code(stmt).strip().splitlines()[0]}` wraps a model in DistributedDataParallel, "
                       "but not as one `name = DistributedDataParallel(module, ...)` statement: swap it for fully_shard "
                       "by hand; the file is left unchanged", call.node)
            ctx.refused = True
            return
        site = ModelSite(spelling=inner, scope=call.place.scope, wrap_after=None, wrap_before=stmt, data_parallel=[])
        shard(ctx, site)
        if target == inner:
            ctx.plan.remove(stmt)
        else:  # `ddp_model = DDP(model)`: the later code keeps its name
            ctx.plan.replace_with(stmt, statements(f"{target} = {inner}\n")[0])
        ctx.report("MIG305", f"DistributedDataParallel on `{inner}` replaced by FSDP2's fully_shard; the process group, "
                   "samplers and rank-0 guards the script has are kept", call.node)
        # later steps see the model as sharded from the shard on (above an optimizer built before the wrap)
        wrapped = (ModelSite(spelling=target, scope=call.place.scope, wrap_after=stmt, wrap_before=None, data_parallel=[])
                   if site.wrap_before is stmt else site)
        without_module(ctx, wrapped)
        _no_sync(ctx, wrapped)
        _gradient_sync_flag(ctx, wrapped)
        sites.append(wrapped)
        sites += _unwrapped_names(ctx, wrapped)
    ctx.sites.models = sites  # what the later steps (checkpoints, accumulation) work on
    if _forward_on_one_rank(ctx):
        ctx.refused = True


def _wrap_names(stmt: cst.BaseStatement, call: cst.Call) -> tuple[str | None, str | None]:
    """(`model`, `net`) for `model = DDP(net, ...)`, the only thing on its line."""
    if not isinstance(stmt, cst.SimpleStatementLine) or len(stmt.body) != 1 or not isinstance(stmt.body[0], cst.Assign):
        return None, None
    assign = stmt.body[0]
    if assign.value is not call or len(assign.targets) != 1 or not call.args or call.args[0].keyword is not None:
        return None, None
    return spell(assign.targets[0].target), spell(call.args[0].value)


def _gradient_sync_flag(ctx: Context, site: ModelSite) -> None:
    """`model.require_backward_grad_sync = last_micro_step` (DDP's own flag, which FSDP2 ignores)
    -> `model.set_requires_gradient_sync(last_micro_step)`."""
    names = aliases(ctx.index, site)
    for stmt, scope in ctx.index.scope_of.items():
        if not isinstance(stmt, cst.SimpleStatementLine) or len(stmt.body) != 1 or not isinstance(stmt.body[0], cst.Assign):
            continue
        assign = stmt.body[0]
        target = assign.targets[0].target if len(assign.targets) == 1 else None
        if isinstance(target, cst.Attribute) and target.attr.value == "require_backward_grad_sync" \
                and (spell(target.value), scope.name) in names:
            ctx.plan.replace_with(stmt, statements(
                f"{spell(target.value)}.set_requires_gradient_sync({ctx.code(assign.value)})\n")[0])


def _unwrapped_names(ctx: Context, site: ModelSite) -> list[ModelSite]:
    """`raw_model = model.module if ddp else model` -> `raw_model = model`: with `.module` gone both
    branches are the model; `raw_model` names the sharded model too (its saves are gathered)."""
    found: list[ModelSite] = []
    for binding in ctx.index.bindings:
        value = binding.value
        if binding.place.scope is not site.scope or not isinstance(value, cst.IfExp):
            continue
        branches = {_without_module(value.body), _without_module(value.orelse)}
        if branches == {site.spelling}:
            ctx.plan.replace_with(value, cst.Name(site.spelling) if "." not in site.spelling else value.orelse)
            found.append(ModelSite(spelling=binding.target, scope=site.scope, wrap_after=binding.place.stmt,
                                   wrap_before=None, data_parallel=[]))
    return found


def _without_module(value: cst.BaseExpression) -> str | None:
    spelled = spell(value)
    return spelled.removesuffix(".module") if spelled is not None else None


def _forward_on_one_rank(ctx: Context) -> bool:
    """MIG306 when the script runs the model under its own rank guard (`if master_process:
    losses = estimate_loss()`): DDP's forward there is local, FSDP's gathers from every rank."""
    for stmt in ctx.index.block_of:
        if not isinstance(stmt, cst.If) or not tests_rank(ctx.code(stmt.test)):
            continue
        call = collective_call(ctx, stmt.body)
        if call is not None:
            ctx.report("MIG306", f"`{ctx.code(call).splitlines()[0]}` runs under `if {ctx.code(stmt.test)}:`, on this "
                       "rank alone: a forward of a sharded model gathers its weights from every rank, so the others "
                       "would be waited for forever; run it on every rank and keep only its output under the guard; "
                       "the file is left unchanged", call)
            return True
    return False


def _no_sync(ctx: Context, site: ModelSite) -> None:
    """`with model.no_sync():` (or `... if skip else nullcontext():`) -> set_requires_gradient_sync around its body."""
    names = aliases(ctx.index, site)
    for stmt in ctx.index.block_of:
        if not isinstance(stmt, cst.With) or len(stmt.items) != 1:
            continue
        item = stmt.items[0].item
        test = None
        if isinstance(item, cst.IfExp):
            test, item = item.test, item.body
        if not (isinstance(item, cst.Call) and isinstance(item.func, cst.Attribute) and item.func.attr.value == "no_sync"):
            continue
        owner = spell(item.func.value)
        if (owner, ctx.index.scope_of[stmt].name) not in names:
            continue
        sync = "False" if test is None else negated(ctx, test)
        before = statements(f"{owner}.set_requires_gradient_sync({sync})  # reduce gradients only on the micro-step that steps\n")
        after = statements(f"{owner}.set_requires_gradient_sync(True)\n") if test is None else []
        ctx.plan.insert_before(stmt, before)
        if after:
            ctx.plan.insert_after(stmt, after)
        ctx.plan.splice(stmt)
