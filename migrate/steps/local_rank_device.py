"""Every device the script names becomes this process's device: `cuda:<local rank>` when CUDA
is available, else the CPU, so one converted script runs on a GPU node and in CPU CI alike.

`torch.device("cuda")`, `"cuda:0"`, `device = 0`, `.cuda()`, `.cuda(i)` and `.to(0)` are covered.
"""

from __future__ import annotations

import libcst as cst

from migrate.analysis.devices import (
    cuda_method_calls,
    device_bindings,
    is_cuda_literal,
    is_int_literal,
    to_int_calls,
    torch_device_calls,
)
from migrate.analysis.index import Scope
from migrate.steps.base import Context, expression, statement


def local_rank_device(ctx: Context) -> None:
    handled: set[int] = set()
    for binding in device_bindings(ctx.index):
        assert binding.value is not None
        _rewrite_device_value(ctx, binding.value, binding.place.scope, handled)
    for call in torch_device_calls(ctx.index):
        if id(call.node) not in handled:
            _rewrite_device_value(ctx, call.node, call.place.scope, handled)
    for call in cuda_method_calls(ctx.index):
        positional = [a.value for a in call.node.args if a.keyword is None]
        target = positional[0] if positional else expression(device_in(ctx, call.place.scope))
        ctx.plan.replace(call.node, lambda updated, t=target: _cuda_to_to(updated, t))
    for call in to_int_calls(ctx.index):
        device = expression(device_in(ctx, call.place.scope))
        ctx.plan.replace(call.node.args[0], lambda updated, d=device: updated.with_changes(value=d))


def _cuda_to_to(call: cst.Call, device: cst.BaseExpression) -> cst.Call:
    """`x.cuda(...)` -> `x.to(device, <keywords kept>)`."""
    assert isinstance(call.func, cst.Attribute)
    keywords = [a for a in call.args if a.keyword is not None]
    args = [cst.Arg(device, comma=cst.MaybeSentinel.DEFAULT)] + keywords
    return call.with_changes(func=call.func.with_changes(attr=cst.Name("to")), args=args)


def _rewrite_device_value(ctx: Context, value: cst.BaseExpression, scope: Scope, handled: set[int]) -> None:
    """Rewrite one device expression: unconditional CUDA gains a CPU fallback."""
    torch = ctx.torch
    rank = _rank_in_fstring(ctx, scope)
    cuda = f'f"cuda:{{{rank}}}"'
    fallback = f'{cuda} if {torch}.cuda.is_available() else "cpu"'
    handled.add(id(value))
    if is_int_literal(value):
        ctx.plan.replace_with(value, expression(f'{ctx.local_rank(scope)} if {torch}.cuda.is_available() else "cpu"'))
        return
    if isinstance(value, cst.IfExp):
        for branch in (value.body, value.orelse):
            if is_int_literal(branch):
                ctx.plan.replace_with(branch, expression(ctx.local_rank(scope)))
            elif is_cuda_literal(branch):
                ctx.plan.replace_with(branch, expression(cuda))
        return
    if is_cuda_literal(value):
        ctx.plan.replace_with(value, expression(fallback))
        return
    if isinstance(value, cst.Call) and value.args:
        handled.add(id(value))
        first = value.args[0].value
        if is_cuda_literal(first):
            ctx.plan.replace_with(first, expression(fallback))
        elif isinstance(first, cst.IfExp):
            _rewrite_device_value(ctx, first, scope, handled)


def _rank_in_fstring(ctx: Context, scope: Scope) -> str:
    rank = ctx.local_rank(scope)
    return rank if rank == "local_rank" else f"{ctx.module_name('os')}.environ.get('LOCAL_RANK', '0')"


def device_in(ctx: Context, scope: Scope) -> str:
    """A name (or expression) for this process's device as seen from `scope`."""
    index = ctx.index
    for binding in device_bindings(index) + _plain_device_bindings(ctx):
        if "." in binding.target:
            continue
        if binding.place.scope is scope or (binding.place.scope.is_module and binding.target not in scope.params):
            return binding.target
    if "device" in scope.params:
        return "device"
    entry = ctx.sites.entry
    assert entry is not None
    if entry.scope is scope or entry.scope.is_module:
        return _setup_device(ctx)
    rank = _rank_in_fstring(ctx, scope)
    return f'{ctx.torch}.device(f"cuda:{{{rank}}}" if {ctx.torch}.cuda.is_available() else "cpu")'


def _plain_device_bindings(ctx: Context) -> list:  # type: ignore[type-arg]
    """`device = torch.device(...)` bindings that needed no rewrite (already CPU-aware)."""
    return [
        b
        for b in ctx.index.bindings
        if b.target in ("device", "dev") and isinstance(b.value, cst.Call) and ctx.index.qualify(b.value.func) == "torch.device"
    ]


def _setup_device(ctx: Context) -> str:
    """Adds `device = ...` right after the process-group setup (once) and returns its name."""
    if ctx.device_name is None:
        taken = any(b.target == "device" for b in ctx.index.bindings)
        ctx.device_name = "local_device" if taken else "device"
        entry = ctx.sites.entry
        assert entry is not None
        line = statement(
            f'{ctx.device_name} = {ctx.torch}.device(f"cuda:{{local_rank}}" if {ctx.torch}.cuda.is_available() else "cpu")\n'
        )
        if entry.setup_before is not None:
            ctx.plan.insert_before(entry.setup_before, [line])
        elif entry.teardown_after is not None:
            ctx.plan.insert_after(entry.teardown_after, [line])
    return ctx.device_name
