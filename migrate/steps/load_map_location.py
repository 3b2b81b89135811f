"""`torch.load` without `map_location` restores tensors onto the device they were saved from
(cuda:0 for a rank-0 checkpoint), so every rank would pile onto GPU 0. Each rank loads onto
its own device instead.
"""

from __future__ import annotations

from functools import partial

from migrate.steps.base import Context, expression, with_keyword
from migrate.steps.local_rank_device import device_in


def load_map_location(ctx: Context) -> None:
    for call in ctx.index.calls_named("torch.load"):
        if any(a.keyword is not None and a.keyword.value == "map_location" for a in call.node.args):
            continue
        if len([a for a in call.node.args if a.keyword is None]) > 1:
            continue
        device = expression(device_in(ctx, call.place.scope))
        ctx.plan.replace(call.node, partial(with_keyword, keyword="map_location", value=device))
