"""DDP's own order and options for each model it wraps. DDP takes the parameters as they are when
it is built (their device, their dtype, which of them require a gradient) and, unless told to look
for unused ones, waits in every step for a gradient of each parameter that then required one
(analysis.gradients says what this file shows of both, and of the model's class when a module of
its folder defines it, read through `ctx.read_module`):

- the wrap goes after the last statement before training that still casts, moves, freezes or
  rebuilds the model: `model = torch.compile(model)`, `model.to(device).to(torch.bfloat16)`, then
  `model = DDP(model)`, as DDP scripts written by hand do (without such a statement after a
  torch.compile, the wrap stays before the compile);
- a cast or move of the model inside the training code, or gradients switched on after the wrap
  while some parameter was frozen when DDP was built, cannot be reordered: MIG502, the file is
  left unchanged (a module cast or moved after DDP is built no longer matches what DDP averages,
  and a parameter made trainable after the wrap is never averaged);
- a model whose every parameter is frozen before the wrap is not wrapped (DDP refuses a module
  with nothing to train); when no other model is left, MIG104 and the file is left unchanged;
- parameters that may get no gradient in a step make the wrap `DDP(model,
  find_unused_parameters=True)` (MIG501), which costs a traversal of the autograd graph each step.
"""

from __future__ import annotations

import dataclasses

import libcst as cst

from migrate.analysis.gradients import Gap, gradient_gaps, last_change, late_change, wholly_frozen
from migrate.analysis.sites import ModelSite
from migrate.steps.base import Context
from migrate.steps.wrap_model import UnusedParameters


def ddp_models(ctx: Context) -> None:
    """Each model's wrap point, refusals, and whether its wrap looks for unused parameters."""
    backward = [call.node for call in ctx.sites.backward_calls]
    sites = [_after_last_change(ctx, site, backward) for site in ctx.sites.models]
    for site in sites:
        if _refuse_late_change(ctx, site, backward):
            return
    frozen = [wholly_frozen(ctx.index, site) for site in sites]
    first = frozen[0] if frozen else None
    if first is not None and all(node is not None for node in frozen):
        _refuse_frozen(ctx, sites[0], first)
        return
    kept = [site for site, node in zip(sites, frozen) if node is None]  # nothing to train: not wrapped
    ctx.sites.models = kept
    unused = ctx.recorded(UnusedParameters, create=True)
    for site in kept:
        gaps = gradient_gaps(ctx.index, site, ctx.sites.training_scopes, ctx.path, ctx.read_module)
        if gaps:
            unused.sites.add(id(site))
            _report_gaps(ctx, site, gaps)


def _after_last_change(ctx: Context, site: ModelSite, backward: list[cst.Call]) -> ModelSite:
    """The wrap after what still changes the model before training (analysis.gradients.last_change)."""
    changed = last_change(ctx.index, site, backward, ctx.sites.training_scopes)
    return site if changed is None else dataclasses.replace(site, wrap_before=None, wrap_after=changed)


def _refuse_late_change(ctx: Context, site: ModelSite, backward: list[cst.Call]) -> bool:
    late = late_change(ctx.index, site, backward, ctx.sites.training_scopes)
    if late is None:
        return False
    line = ctx.position(late.node)[0]
    if late.cast:
        assert late.training is not None
        message = (f"line {line} ({_short(ctx, late.node)}) casts or moves `{late.owner}` inside the training code "
                   f"that starts at line {ctx.position(late.training)[0]}, after DDP is built: DDP keeps the device and dtype the "
                   "parameters have when it is built, and a module cast or moved after that no longer averages its "
                   "gradients correctly; the file is left unchanged: cast and move the model before training starts, "
                   "then convert again")
    else:
        message = (f"line {line} ({_short(ctx, late.node)}) makes parameters of `{late.owner}` trainable again during "
                   "training, after DDP is built: DDP averages only the parameters that require a gradient when it is "
                   "built, so these would train apart on each process; the file is left unchanged: make them trainable "
                   "before the wrap (a learning rate of 0 keeps them unchanged until then), or build DDP again after "
                   "switching them on")
    ctx.report("MIG502", message, late.node)
    ctx.refused = True
    return True


def _refuse_frozen(ctx: Context, site: ModelSite, frozen: cst.CSTNode) -> None:
    """MIG104: no model has anything to train, and DDP cannot wrap one that has not."""
    ctx.report("MIG104", f"every parameter of `{site.spelling}` is frozen (line {ctx.position(frozen)[0]}), and DDP cannot "
               "wrap a module with nothing to train; what the optimizer updates is not a module of this file that DDP "
               "could wrap, so nothing would average its gradients across processes: the file is left unchanged; "
               "average those gradients by hand after backward() (dist.all_reduce, then divide by the world size)",
               frozen)
    ctx.refused = True


def _report_gaps(ctx: Context, site: ModelSite, gaps: list[Gap]) -> None:
    shown = "; ".join(f"{gap.what} {gap.why} ({gap.place or f'line {ctx.position(gap.node)[0]}'})" for gap in gaps[:3])
    more = f"; and {len(gaps) - 3} more" if len(gaps) > 3 else ""
    anchor = site.wrap_after or site.wrap_before
    ctx.report("MIG501", f"`{site.spelling}` is wrapped with find_unused_parameters=True: some of its parameters may get no "
               f"gradient in a step ({shown}{more}), and DDP would otherwise wait for them and fail the next step "
               "(\"Expected to have finished reduction in the prior iteration\"); it costs an extra traversal of the "
               "autograd graph each step: drop the option if every parameter does get a gradient in every step",
               anchor)


def _short(ctx: Context, node: cst.CSTNode) -> str:
    """`model.to(device)`, or the first line of a longer statement, in backquotes."""
    code = ctx.code(node).strip().splitlines()[0]
    return f"`{code[:60]}{'...' if len(code) > 60 else ''}`"
