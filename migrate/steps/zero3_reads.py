"""What the script does with the model's weights outside the engine, once `deepspeed.initialize`
has made it. Under ZeRO-3 every rank holds only its shard of each parameter outside the forward
(`p.numel()` is 0), and at every stage the engine's hooks make the module unpicklable and ZeRO-1/2
write their fp32 copy back at each step. The converted script is the same at every stage, so
what still runs is said (MIG127), what would crash leaves the file unchanged (MIG127 says why),
and `torch.inference_mode()` becomes `torch.no_grad()`:

- `model.parameters()` / `named_parameters()` read after the engine exists (a parameter count, an
  L2 penalty, an EMA update, a histogram): empty shards under ZeRO-3; said;
- their `.grad` read in a loop over them (`for p in model.parameters(): p.grad.norm()`): the
  engine's step clears the gradients and ZeRO keeps them in its partitions: refused;
- `model.load_state_dict(...)` after the engine exists: ZeRO-1/2 undo it at the next step (said),
  ZeRO-3 refuses it (refused at --zero 3);
- `torch.save(model...)` that pickles the module: the engine's hooks cannot be pickled: refused;
- `weights = lambda: model.state_dict()` called after the engine exists: the read runs at each call,
  on the engine and under ZeRO-3 on shards, and no gather fits in a lambda: refused at every stage
  (a function, `def weights(): return model.state_dict()`, is gathered in by steps.deepspeed_engine);
- `torch.inference_mode()` around evaluation: the weights ZeRO-3 gathers there become inference
  tensors, and the next training forward fails; `torch.no_grad()` does what evaluation needs.
"""
from __future__ import annotations

import libcst as cst

from migrate.analysis.divergence import per_rank_condition, target_names
from migrate.analysis.index import AttributeUse, descendants
from migrate.analysis.models import aliases, is_after
from migrate.analysis.sites import ModelSite
from migrate.analysis.syntax import contains
from migrate.steps.base import Context, expression, statement
from migrate.steps.deepspeed_engine import EngineConfig
from migrate.steps.shared_files import every_rank_reaches
from migrate.steps.wrap_model import lambda_shown, saved_module, state_lambda
from migrate.target_options import DeepSpeedOptions

PARAMETER_READS = frozenset({"parameters", "named_parameters"})
NO_GRAD = ("torch.no_grad", "torch.inference_mode")
NO_GRAD_NOTE = "  # not inference_mode: under ZeRO-3 the weights it gathers would become inference tensors"


def zero3_reads(ctx: Context) -> None:
    if EngineConfig not in ctx.records:
        return
    config = ctx.recorded(EngineConfig)
    handled = {clip.place.stmt for clip in config.engine.side.clip_calls}
    sites = config.trained_sites
    for site in sites:
        _report_reads(ctx, site, handled)
        _report_pickled_saves(ctx, site)
        _refuse_state_lambdas(ctx, site)
    _no_inference_mode(ctx, sites)


def _report_reads(ctx: Context, site: ModelSite, handled: set[cst.BaseStatement]) -> None:
    """MIG127 at the first parameter read and at each load after the engine exists."""
    index = ctx.index
    names = aliases(index, site)
    reported: set[cst.BaseStatement] = set()
    for use in index.attributes:
        stmt = use.place.stmt
        if not use.called or stmt in handled or stmt in reported or (use.owner, use.place.scope.name) not in names:
            continue
        if not is_after(index, stmt, site):
            continue
        attribute = use.node.attr.value
        if attribute in PARAMETER_READS and _refuse_grad_read(ctx, use):
            reported.add(stmt)
            continue
        if attribute in PARAMETER_READS and _gather_around(ctx, use, stmt):
            reported.add(stmt)
            continue
        if attribute in PARAMETER_READS:
            reported.add(stmt)
            ctx.report("MIG127", f"`{ctx.code(use.node)}()` is read outside the model's forward after "
                       "deepspeed.initialize: under ZeRO-3 each rank holds only its shard there (p.numel() is 0, so a "
                       "count, a penalty or an average computed from it is wrong); read the weights before "
                       "initialize, inside forward(), or under `deepspeed.zero.GatheredParameters(...)`", use.node)
        elif attribute == "load_state_dict":
            reported.add(stmt)
            crashes = DeepSpeedOptions.of(ctx.options).zero == 3
            ctx.report("MIG127", f"`{ctx.code(use.node)}(...)` loads weights after deepspeed.initialize: ZeRO-3 "
                       "refuses them (each parameter is a shard) and ZeRO-1/2 overwrite them with the optimizer's fp32 "
                       "copy at the next step; load before initialize, or use the engine's load_checkpoint"
                       + ("; the file is left unchanged" if crashes else ""), use.node)
            ctx.refused = ctx.refused or crashes


def _refuse_grad_read(ctx: Context, use: AttributeUse) -> bool:
    """MIG127, and the file left unchanged, where the loop over the weights read after
    deepspeed.initialize reads their `.grad` (`for p in model.parameters(): p.grad.norm()`): the
    engine's step clears them (None after it, at every stage), and from ZeRO-1 on a backward leaves
    them in the optimizer's partitions, so the read fails or sees nothing."""
    stmt = use.place.stmt
    for node in descendants(stmt):
        if not isinstance(node, (cst.For, cst.CompFor)) or not contains(node.iter, lambda n: n is use.node):
            continue
        targets = target_names(node.target)
        read = next((n for n in descendants(stmt) if isinstance(n, cst.Attribute) and n.attr.value == "grad"
                     and isinstance(n.value, cst.Name) and n.value.value in targets), None)
        if read is not None:
            ctx.report("MIG127", f"`{ctx.code(read)}` reads a gradient of `{ctx.code(use.node)}()` after "
                       "deepspeed.initialize: the engine's step() clears the gradients (None after it) and ZeRO 1-3 keep "
                       "them in the optimizer's partitions, so the read fails or sees nothing; read them between "
                       "engine.backward(loss) and engine.step() with `deepspeed.utils.safe_get_full_grad(p)`; "
                       "the file is left unchanged", read)
            ctx.refused = True
            return True
    return False


def _gather_around(ctx: Context, use: AttributeUse, stmt: cst.BaseStatement) -> bool:
    """An update under `torch.no_grad()` that reads the weights (`for ema_p, p in
    zip(ema.parameters(), model.parameters()): ema_p.mul_(d).add_(p, ...)`) runs inside
    `deepspeed.zero.GatheredParameters(...)` of the weights it reads: every rank gathers them
    there (they are only read, so nothing is written back). Only where every rank runs it, and
    only under no_grad (a penalty added to the loss needs gradients through the shards: MIG127)."""
    holder = _outermost_under_no_grad(ctx, stmt)
    if holder is None or any(s in ctx.plan.guarded for s in ctx.index.enclosing_statements(holder)):
        return False
    if not every_rank_reaches(ctx, holder) or per_rank_condition(ctx.sites, holder) is not None:
        return False
    deepspeed = ctx.module_name("deepspeed")
    weights = f"{ctx.code(use.node)}()"
    gather = statement(
        f"with {deepspeed}.zero.GatheredParameters(list({weights})):  # ZeRO-3 shards the weights: every rank gathers\n"
        "    pass\n"
    )
    assert isinstance(gather, cst.With)

    def wrap(updated: cst.CSTNode) -> cst.CSTNode:
        moved, leading = updated.with_changes(leading_lines=()), getattr(updated, "leading_lines", ())
        return gather.with_changes(leading_lines=leading, body=gather.body.with_changes(body=[moved]))

    ctx.plan.replace(holder, wrap)
    return True


def _outermost_under_no_grad(ctx: Context, stmt: cst.BaseStatement) -> cst.BaseStatement | None:
    """The statement directly inside the nearest `with torch.no_grad():` around `stmt` that holds it."""
    chain = ctx.index.enclosing_statements(stmt)
    for inner, outer in zip(chain, chain[1:]):
        if isinstance(outer, cst.With) and any(
            isinstance(item.item, cst.Call) and (ctx.index.qualify(item.item.func) or "") in NO_GRAD for item in outer.items
        ):
            return inner
        if isinstance(outer, cst.FunctionDef):
            return None
    return None


def _refuse_state_lambdas(ctx: Context, site: ModelSite) -> None:
    """MIG127, file left unchanged, at `weights = lambda: model.state_dict()` called after the engine
    exists (or whose calls cannot all be found): the read runs at each call, on the engine (its keys carry
    `module.`) and under ZeRO-3 on shards, so the gather must run at each call on every rank, which a
    lambda cannot hold; a gather written where the lambda stands would save the weights of that moment."""
    index = ctx.index
    names = aliases(index, site)
    for use in index.attributes:
        if use.node.attr.value != "state_dict" or not use.called:
            continue
        if (use.owner.removesuffix(".module"), use.place.scope.name) not in names:
            continue
        call = next((c for c in index.calls_under(use.place.stmt) if c.func is use.node), None)
        held = state_lambda(ctx, use.place.stmt, call) if call is not None else None
        if held is None or held.traced and not any(is_after(index, c.place.stmt, site) for c in held.calls):
            continue
        ctx.report("MIG127", f"{lambda_shown(ctx, held)} reads `{ctx.code(use.node.value)}`'s weights each time it is "
                   "called, and it is called after deepspeed.initialize (or where the conversion cannot follow it): "
                   "there the engine holds the module (its state_dict() keys carry `module.`) and under ZeRO-3 each "
                   "rank holds only shards, so every call must gather on every rank, which a lambda cannot hold; write "
                   f"it as a function of this file (`def {held.name or 'weights'}(): return "
                   f"{ctx.code(use.node)}()`), which the conversion gathers in, and convert again; the file is left "
                   "unchanged", held.node)
        ctx.refused = True
        return


def _report_pickled_saves(ctx: Context, site: ModelSite) -> None:
    """MIG127 at `torch.save(model)`: it pickles the module, which the engine's hooks make impossible."""
    index = ctx.index
    names = {spelling for spelling, _scope in aliases(index, site)}
    for call in index.calls_named("torch.save"):
        saved = saved_module(call.node.args[0].value) if call.node.args else None  # model.cpu(), model.to("cpu")
        if saved is None or ctx.code(saved) not in names or not is_after(index, call.place.stmt, site):
            continue
        ctx.report("MIG127", f"`{ctx.code(call.node)}` pickles the module, which DeepSpeed's engine hooks make "
                   "impossible at every ZeRO stage (and ZeRO-3 leaves it holding shards): save its state_dict() "
                   "instead, which the conversion gathers on every rank; the file is left unchanged", call.node)
        ctx.refused = True


def _no_inference_mode(ctx: Context, sites: list[ModelSite]) -> None:
    """`@torch.inference_mode()` / `with torch.inference_mode():` around code that runs a trained
    model becomes `torch.no_grad()`, with a comment saying why."""
    index = ctx.index
    names = {spelling for site in sites for spelling, _scope in aliases(index, site)}
    for call in index.calls_named("torch.inference_mode"):
        holder = _decorated_or_with(ctx, call.node)
        if holder is None or not names & index.names_under(holder):
            continue
        no_grad = expression(f"{ctx.torch}.no_grad()")
        ctx.plan.replace_with(call.node, no_grad)
        ctx.plan.replace(holder, _with_note)


def _decorated_or_with(ctx: Context, call: cst.Call) -> cst.FunctionDef | cst.With | None:
    """The function `call` decorates, or the `with` statement it opens."""
    for stmt in ctx.index.block_of:
        if isinstance(stmt, cst.FunctionDef) and any(d.decorator is call for d in stmt.decorators):
            return stmt
        if isinstance(stmt, cst.With) and any(item.item is call for item in stmt.items):
            return stmt
    return None


def _with_note(updated: cst.CSTNode) -> cst.CSTNode:
    """The comment goes on the decorator's line, or on the `with` line."""
    comment = cst.TrailingWhitespace(whitespace=cst.SimpleWhitespace(""), comment=cst.Comment(NO_GRAD_NOTE.strip()),
                                     newline=cst.Newline())
    if isinstance(updated, cst.FunctionDef) and updated.decorators:
        first = updated.decorators[0].with_changes(trailing_whitespace=comment.with_changes(
            whitespace=cst.SimpleWhitespace("  ")))
        return updated.with_changes(decorators=[first, *updated.decorators[1:]])
    if isinstance(updated, cst.With) and isinstance(updated.body, cst.IndentedBlock):
        header = updated.body.header.with_changes(whitespace=cst.SimpleWhitespace("  "), comment=cst.Comment(NO_GRAD_NOTE.strip()))
        return updated.with_changes(body=updated.body.with_changes(header=header))
    return updated

