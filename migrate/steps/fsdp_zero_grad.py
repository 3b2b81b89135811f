"""FSDP2 keeps the root module's gathered weights after a forward (its backward would gather them
again at once), under `torch.no_grad()` too. A `model.zero_grad()` then clears the gradients of
those gathered copies, not the sharded gradients the optimizer steps, and the next backward adds
to the last step's: measured on 2 gloo ranks, the gradient norm doubled at the second step and
tripled at the third (a GAN's `netG.zero_grad()` between its forward and its backward, or a
`model.zero_grad()` after an evaluation). `optimizer.zero_grad()` holds the sharded parameters
and is unaffected. So each `model.zero_grad()` of a sharded model after the shard gets
`model.reshard()` above it: the sharded parameters are put back first (a backward still pending
gathers the weights again), and the gradients cleared are the ones the optimizer steps. Not where
no forward can have run since the last backward: the model is run only below the `zero_grad()`,
in its own block, and never handed to another call (`evaluate(model)`).
"""

from __future__ import annotations

import libcst as cst

from migrate.analysis.index import ScriptIndex, descendants, spell
from migrate.analysis.models import aliases, is_after
from migrate.steps.base import Context, statements

RESHARD_NOTE = "FSDP2 keeps the gathered weights after a forward: zero_grad() must clear the sharded gradients"


def fsdp_zero_grad(ctx: Context) -> None:
    index = ctx.index
    done: set[cst.BaseStatement] = set()
    for site in ctx.sites.models:
        names = aliases(index, site)
        for use in index.attributes:
            stmt = use.place.stmt
            if (not use.called or use.node.attr.value != "zero_grad" or (use.owner, use.place.scope.name) not in names
                    or stmt in done or not is_after(index, stmt, site) or _runs_only_below(index, stmt, names)):
                continue
            done.add(stmt)
            ctx.plan.insert_above(stmt, statements(f"{use.owner}.reshard()  # {RESHARD_NOTE}\n")[0])


def _runs_only_below(index: ScriptIndex, stmt: cst.BaseStatement, names: set[tuple[str, str]]) -> bool:
    """Every forward of the model (`model(x)`) comes after `stmt` in `stmt`'s own block, and no call
    is handed the model itself: each backward follows the forward this `zero_grad()` precedes."""
    block, position = index.block_of[stmt]
    below = {id(node) for later in block.body[position + 1:] for node in descendants(later)}
    for call in index.calls:
        scope = call.place.scope.name
        if (spell(call.node.func), scope) in names and id(call.node) not in below:
            return False
        if any((spell(arg.value), scope) in names for arg in call.node.args):
            return False
    return True
