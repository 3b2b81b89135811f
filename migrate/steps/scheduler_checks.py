"""ReduceLROnPlateau decides from a metric; if that metric is computed from this rank's shard
only, ranks disagree on when to lower the LR and their optimizers drift apart.

A number a training function returns (`mean_loss = train_epoch(...)`) is reduced over every rank
where it is bound (steps.epoch_figures, steps.horovod_metrics: analysis.epoch_sums.returned_metrics),
so a step on it is not reported. Any other metric is flagged, not rewritten: as a fact where it is
what a training function returned and could not be reduced (a tuple, a value of unknown kind),
and as a condition otherwise (the fix, all-reducing it or computing it on the whole validation set
on every rank, depends on where it comes from).
"""

from __future__ import annotations

import libcst as cst

from migrate.analysis.epoch_sums import returned_metrics, trained_value
from migrate.analysis.index import CallSite
from migrate.steps.base import Context

ADVICE = "all-reduce it first (torch.distributed.all_reduce, then divide by the world size)"


def plateau_metric(ctx: Context) -> None:
    index = ctx.index
    plateaus = {
        b.target
        for b in index.bindings
        if isinstance(b.value, cst.Call) and (index.qualify(b.value.func) or "").endswith("ReduceLROnPlateau")
    }
    for call in index.calls:
        func = call.node.func
        if isinstance(func, cst.Attribute) and func.attr.value == "step" and call.node.args:
            owner = index.qualify(func.value)
            if owner in plateaus and not _reduced(ctx, call):
                ctx.report("MIG110", _message(ctx, call), call.node)


def _reduced(ctx: Context, call: CallSite) -> bool:
    """The metric is a name whose every binding in the call's scope is a reduced returned metric."""
    metric = call.node.args[0].value
    if not isinstance(metric, cst.Name):
        return False
    bindings = ctx.index.bindings_of_in(metric.value, call.place.scope)
    reduced = {m.stmt for m in returned_metrics(ctx.sites)}
    return bool(bindings) and all(b.place.stmt in reduced for b in bindings)


def _message(ctx: Context, call: CallSite) -> str:
    metric = call.node.args[0].value
    binding = trained_value(ctx.sites, metric.value, call.place.scope) if isinstance(metric, cst.Name) else None
    if binding is None or not isinstance(binding.node.value, cst.Call):
        return (f"`{ctx.code(call.node)}`: if this metric comes from this rank's data only, ranks lower the LR at "
                f"different times; {ADVICE} or compute it on the whole validation set")
    return (f"`{ctx.code(call.node)}`: `{ctx.code(metric)}` is what `{ctx.code(binding.node.value.func)}(...)` (line "
            f"{ctx.position(binding.node)[0]}) returned after training on this rank's own batches, so the ranks lower "
            f"the LR at different epochs and their optimizers drift apart; {ADVICE} or compute it on the whole "
            "validation set")
