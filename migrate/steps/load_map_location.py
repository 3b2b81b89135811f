"""`torch.load` without `map_location` restores tensors onto the device they were saved from
(cuda:0 for a rank-0 checkpoint), so every rank would pile onto GPU 0. Each rank loads onto
its own device instead.
"""

from __future__ import annotations

import libcst as cst

from migrate.steps.base import Context, expression
from migrate.steps.local_rank_device import device_in


def load_map_location(ctx: Context) -> None:
    for call in ctx.index.calls_named("torch.load"):
        if any(a.keyword is not None and a.keyword.value == "map_location" for a in call.node.args):
            continue
        if len([a for a in call.node.args if a.keyword is None]) > 1:
            continue
        device = expression(device_in(ctx, call.place.scope))
        ctx.plan.replace(call.node, lambda updated, d=device: _with_keyword(updated, "map_location", d))


def _with_keyword(call: cst.CSTNode, keyword: str, value: cst.BaseExpression) -> cst.CSTNode:
    assert isinstance(call, cst.Call)
    args = list(call.args)
    if args and isinstance(args[-1].comma, cst.MaybeSentinel):
        args[-1] = args[-1].with_changes(comma=cst.MaybeSentinel.DEFAULT)
    args.append(cst.Arg(value, keyword=cst.Name(keyword), equal=_tight_equal(args)))
    return call.with_changes(args=args)


def _tight_equal(args: list[cst.Arg]) -> cst.AssignEqual | cst.MaybeSentinel:
    for arg in args:
        if arg.keyword is not None:
            return arg.equal
    return cst.AssignEqual(whitespace_before=cst.SimpleWhitespace(""), whitespace_after=cst.SimpleWhitespace(""))
