"""ReduceLROnPlateau decides from a metric; if that metric is computed from this rank's shard
only, ranks disagree on when to lower the LR and their optimizers drift apart. Flagged, not
rewritten: the fix (all-reduce the metric, or compute it on the whole validation set on every
rank) depends on where the metric comes from.
"""

from __future__ import annotations

import libcst as cst

from migrate.steps.base import Context


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
            if owner in plateaus:
                ctx.report("MIG110", f"`{ctx.code(call.node)}`: if this metric comes from this rank's data only, ranks "
                           f"lower the LR at different times; all-reduce it first (torch.distributed.all_reduce, then divide "
                           "by the world size) or compute it on the whole validation set", call.node)
