"""`torch.load` without `map_location` restores tensors onto the device they were saved from
(cuda:0 for a rank-0 checkpoint), so every rank would pile onto GPU 0. Each rank loads a
checkpoint onto its own device instead: a load whose value reaches a `load_state_dict(...)`,
directly (`model.load_state_dict(torch.load(p))`) or through a name bound from it in the same
function (`ckpt = torch.load(p)`, then `model.load_state_dict(ckpt["model"])`). Any other load
(a data file of CPU tensors, `self.data, self.targets = torch.load(p)`) is left as it is: mapped
to the GPU, its tensors would no longer be the CPU tensors the script reads (`.numpy()` fails).
"""

from __future__ import annotations

from functools import partial

import libcst as cst

from migrate.analysis.index import CallSite, descendants
from migrate.steps.base import Context, expression, with_keyword
from migrate.steps.local_rank_device import device_in


def load_map_location(ctx: Context) -> None:
    for call in ctx.index.calls_named("torch.load"):
        if any(a.keyword is not None and a.keyword.value == "map_location" for a in call.node.args):
            continue
        if len([a for a in call.node.args if a.keyword is None]) > 1:
            continue
        if not _loads_weights(ctx, call):
            continue
        device = expression(device_in(ctx, call.place.scope, call.place.stmt))
        ctx.plan.replace(call.node, partial(with_keyword, keyword="map_location", value=device))


def _loads_weights(ctx: Context, call: CallSite) -> bool:
    """The loaded value reaches a `load_state_dict(...)`: the call is inside one's arguments, or
    a name bound from it (in the same function) is read inside one's arguments."""
    loaders = [c for c in ctx.index.calls if isinstance(c.node.func, cst.Attribute)
               and c.node.func.attr.value == "load_state_dict" and c.place.scope is call.place.scope]
    for loader in loaders:
        if any(node is call.node for arg in loader.node.args for node in descendants(arg.value)):
            return True
    names = {b.target for b in ctx.index.bindings_at(call.place.stmt) if b.value is call.node}
    names |= {b.target for b in ctx.index.bindings_at(call.place.stmt)
              if b.value is not None and any(node is call.node for node in descendants(b.value))}
    return any(isinstance(node, cst.Name) and node.value in names
               for loader in loaders for arg in loader.node.args for node in descendants(arg.value))
