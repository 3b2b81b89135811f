"""Every device the script names becomes this process's device, so one converted script runs
on a GPU node and in CPU CI alike.

Setup calls `torch.cuda.set_device(local_rank)`, so a plain `"cuda"` already is the local rank's
GPU: it is kept (checks such as `device == "cuda"` stay true), and gains a CPU fallback only where
the script uses it unconditionally (not inside `if torch.cuda.is_available() and ...:`). A device
the script numbers itself (`"cuda:0"`, `torch.device("cuda", args.gpu)`, `f"cuda:{args.gpu}"`,
`device = 0`, `.cuda(args.gpu)`, `.to(0)`, `device="cuda:0"`, `map_location="cuda:0"`) would put
every rank on that one GPU: it becomes `cuda:<local rank>`, or the CPU without CUDA; a
map_location never becomes a name the conversion keeps an index (`self.gpu = 0`): torch.load
calls an int map_location (TypeError). The script's own `torch.cuda.set_device(...)` goes
for the same reason (setup has set the device).

Code that runs before setup (module-level constants when setup is in `main()`) reads the local
rank from the environment, since setup's `local_rank` does not exist yet there.
"""

from __future__ import annotations

from functools import partial

import libcst as cst

from migrate.analysis.devices import (
    cuda_method_calls,
    device_index_argument,
    device_type_argument,
    is_indexed_cuda,
    is_int_literal,
    is_plain_cuda,
    names_a_device,
    numbered_device_arguments,
    runs_only_with_cuda,
    set_device_calls,
    torch_device_calls,
)
from migrate.analysis.entry import runs_in_process_group
from migrate.analysis.index import Binding, Place, Scope
from migrate.rewrite import with_fields
from migrate.steps.base import Context, expression, statement
from migrate.steps.rank_zero import group_outlives_entry


def local_rank_device(ctx: Context) -> None:
    handled: set[int] = set()
    for binding in ctx.sites.device_bindings:
        assert binding.value is not None
        _rewrite_device_value(ctx, binding.value, binding.place, handled)
    for call in torch_device_calls(ctx.index):
        if id(call.node) not in handled:
            _rewrite_device_value(ctx, call.node, call.place, handled)
    for call in cuda_method_calls(ctx.index):
        positional = [a.value for a in call.node.args if a.keyword is None]
        if not call.node.args and ctx.in_other_module(call.node):
            continue  # a module's `x.cuda()`: set_device made it the rank's GPU; the module stays as it was
        if positional and _is_device_name(ctx, positional[0], call.place.scope):
            target = positional[0]
        else:
            target = expression(device_in(ctx, call.place.scope, call.place.stmt, index_ok=True))
        ctx.plan.replace(call.node, partial(_cuda_to_to, device=target))
    for call, arg in numbered_device_arguments(ctx.index):
        # `.to(0)` and `device=` take an index; torch.load calls an int map_location (TypeError)
        index_ok = arg.keyword is None or arg.keyword.value != "map_location"
        device = expression(device_in(ctx, call.place.scope, call.place.stmt, index_ok=index_ok))
        ctx.plan.replace(arg, with_fields(value=device))
    _rewrite_device_contexts(ctx)
    _remove_set_device(ctx)


def _rewrite_device_contexts(ctx: Context) -> None:
    """`with torch.cuda.device(args.gpu_index):` makes the GPU the script picked for one process
    current on every rank (all on GPU 0): the context names the rank's own GPU instead."""
    for call in ctx.index.calls_named("torch.cuda.device"):
        stmt = call.place.stmt
        if not isinstance(stmt, cst.With) or not any(item.item is call.node for item in stmt.items):
            continue
        args = [a for a in call.node.args if a.keyword is None]
        if len(args) != 1 or (isinstance(args[0].value, cst.Name) and args[0].value.value == ctx.distributed.local_rank_name):
            continue
        ctx.plan.replace(args[0], with_fields(value=expression(ctx.local_rank(call.place.scope))))


def _is_device_name(ctx: Context, node: cst.BaseExpression, scope: Scope) -> bool:
    """`x.cuda(device)` where `device` is one of the script's device variables (rewritten or
    already CPU-aware) or a parameter named for one (`def __init__(self, gpu_id)`): `.to(device)`
    keeps it. `x.cuda(args.gpu)` does not: that is the GPU the user picked for a single process."""
    name = ctx.index.qualify(node) if isinstance(node, (cst.Name, cst.Attribute)) else None
    if name is None:
        return False
    if name in scope.params and names_a_device(name):
        return True
    return any(b.target == name for b in ctx.sites.device_bindings + _plain_device_bindings(ctx))


def _cuda_to_to(call: cst.CSTNode, device: cst.BaseExpression) -> cst.Call:
    """`x.cuda(...)` -> `x.to(device, <keywords kept>)`."""
    assert isinstance(call, cst.Call) and isinstance(call.func, cst.Attribute)
    keywords = [a for a in call.args if a.keyword is not None]
    args = [cst.Arg(device, comma=cst.MaybeSentinel.DEFAULT)] + keywords
    return call.with_changes(func=call.func.with_changes(attr=cst.Name("to")), args=args)


def _rewrite_device_value(ctx: Context, value: cst.BaseExpression, place: Place, handled: set[int]) -> None:
    """Rewrite one device expression: a numbered GPU becomes the local rank's, unconditional CUDA
    gains a CPU fallback, a conditional keeps its own test."""
    torch = ctx.torch
    handled.add(id(value))
    available = f"{torch}.cuda.is_available()"
    if is_int_literal(value):
        ctx.plan.replace_with(value, expression(f'{_rank(ctx, place.scope, place.stmt)} if {available} else "cpu"'))
    elif isinstance(value, cst.IfExp):
        for branch in (value.body, value.orelse):
            if is_int_literal(branch):
                ctx.plan.replace_with(branch, expression(_rank(ctx, place.scope, place.stmt)))
            elif is_indexed_cuda(branch):
                ctx.plan.replace_with(branch, expression(_cuda_of_rank(ctx, place.scope, place.stmt)))
            elif isinstance(branch, cst.Call) and ctx.index.qualify(branch.func) == "torch.device":
                _rewrite_device_value(ctx, branch, place, handled)
    elif is_plain_cuda(value):
        if not runs_only_with_cuda(ctx.index, place.stmt):
            ctx.plan.replace_with(value, expression(f'"cuda" if {available} else "cpu"'))
    elif is_indexed_cuda(value):
        ctx.plan.replace_with(value, expression(f'{_cuda_of_rank(ctx, place.scope, place.stmt)} if {available} else "cpu"'))
    elif isinstance(value, cst.Call) and ctx.index.qualify(value.func) == "torch.device":
        _rewrite_torch_device(ctx, value, place, handled)


def _rewrite_torch_device(ctx: Context, call: cst.Call, place: Place, handled: set[int]) -> None:
    """`torch.device("cuda", i)` -> `torch.device(f"cuda:{local_rank}" if ... else "cpu")`; the
    other spellings rewrite their one argument."""
    kind = device_type_argument(call)
    if kind is None:
        return
    index = device_index_argument(call)
    if index is not None:
        if is_plain_cuda(kind.value):
            one = f'{_cuda_of_rank(ctx, place.scope, place.stmt)} if {ctx.torch}.cuda.is_available() else "cpu"'
            ctx.plan.replace(call, with_fields(args=[cst.Arg(expression(one))]))
        return
    _rewrite_device_value(ctx, kind.value, place, handled)


def _rank(ctx: Context, scope: Scope, stmt: cst.BaseStatement | None = None) -> str:
    """The local rank as seen at `stmt` in `scope`: setup's `local_rank` where it exists, else
    read from the environment (also in code that runs before setup)."""
    entry = ctx.sites.entry
    if stmt is not None and not runs_in_process_group(ctx.index, entry, stmt):
        if ctx.distributed.local_rank_call and not ctx.modules_test_launcher_rank() and group_outlives_entry(ctx, stmt):
            return ctx.spell(ctx.distributed.local_rank_call)  # Horovod, still set up: over MPI no HOROVOD_LOCAL_RANK
        return f"int({ctx.launcher_variable(ctx.distributed.local_rank_variable)})"
    return ctx.local_rank(scope, after_setup=stmt is not None)


def _cuda_of_rank(ctx: Context, scope: Scope, stmt: cst.BaseStatement | None = None) -> str:
    """`f"cuda:{local_rank}"`, or the same with the rank read from the environment."""
    rank = _rank(ctx, scope, stmt)
    name, variable = ctx.distributed.local_rank_name, ctx.distributed.local_rank_variable
    asked = ctx.distributed.local_rank_call and rank == ctx.spell(ctx.distributed.local_rank_call)
    inner = rank if rank == name or asked else f"{ctx.module_name('os')}.environ.get('{variable}', '0')"
    return f'f"cuda:{{{inner}}}"'


def _remove_set_device(ctx: Context) -> None:
    """The script's `torch.cuda.set_device(args.gpu)` would move every rank to one GPU after setup
    chose each its own: the statement goes (and an `if` left with nothing else in it)."""
    index = ctx.index
    for call in set_device_calls(index):
        stmt = call.place.stmt
        if not (isinstance(stmt, cst.SimpleStatementLine) and len(stmt.body) == 1
                and isinstance(stmt.body[0], cst.Expr) and stmt.body[0].value is call.node):
            continue
        ctx.plan.remove(stmt)
        parent = index.parent_of.get(stmt)
        while (
            isinstance(parent, cst.If)
            and parent.orelse is None
            and isinstance(parent.body, cst.IndentedBlock)
            and all(s in ctx.plan.removed for s in parent.body.body)
        ):
            ctx.plan.remove(parent)
            stmt, parent = parent, index.parent_of.get(parent)
        _keep_blank_lines(ctx, stmt)


def _keep_blank_lines(ctx: Context, removed: cst.BaseStatement) -> None:
    """Setup inserted before a removed statement takes its place, but not the blank lines above
    it: the next statement gets them, so the user's code stays apart from setup."""
    located = ctx.index.block_of.get(removed)
    leading = getattr(removed, "leading_lines", ())
    if located is None or not leading or removed not in ctx.plan.before:
        return
    block, position = located
    following = block.body[position + 1] if position + 1 < len(block.body) else None
    if following is not None and not getattr(following, "leading_lines", ()):
        ctx.plan.replace(following, lambda updated: updated.with_changes(leading_lines=leading))


def device_in(ctx: Context, scope: Scope, stmt: cst.BaseStatement | None = None, index_ok: bool = False) -> str:
    """A name (or expression) for this process's device as seen from `scope` (at `stmt`). A name the
    script binds to a bare index (`self.cuda_index = 0`, `gpu = 0 if ... else "cpu"` once
    converted) is taken only with `index_ok` (`.to(...)` takes an index; torch.load's
    map_location calls one: TypeError)."""
    index = ctx.index
    held = _held_device(ctx, scope)
    if held is not None and (index_ok or not _holds_an_index(ctx, held)):
        return held
    for binding in ctx.sites.device_bindings + _plain_device_bindings(ctx):
        if "." in binding.target or (not index_ok and _holds_an_index(ctx, binding.target)):
            continue
        if binding.place.scope is scope or (binding.place.scope.is_module and binding.target not in scope.params):
            return binding.target
    if "device" in scope.params:
        return "device"
    entry = ctx.sites.entry
    assert entry is not None
    before_setup = stmt is not None and not runs_in_process_group(index, entry, stmt)
    if not before_setup and ctx.sees_setup_names(scope):
        return _setup_device(ctx)
    return f'{ctx.torch}.device({_cuda_of_rank(ctx, scope, stmt)} if {ctx.torch}.cuda.is_available() else "cpu")'


def _holds_an_index(ctx: Context, target: str) -> bool:
    """Whether some device binding of `target` gives it a bare index (`0`, or a branch of a
    conditional), which the conversion keeps an index (the local rank)."""
    for binding in ctx.sites.device_bindings:
        value = binding.value
        if binding.target != target or value is None:
            continue
        branches = (value.body, value.orelse) if isinstance(value, cst.IfExp) else (value,)
        if any(is_int_literal(branch) for branch in branches):
            return True
    return False


def _held_device(ctx: Context, scope: Scope) -> str | None:
    """`self.device` in a method whose class sets it in another method (its `__init__`): the
    class's own device, not a global that only the converted script's entry point defines (the
    class may be imported by other code)."""
    if not scope.class_name:
        return None
    for binding in ctx.sites.device_bindings:
        owner = binding.place.scope
        if binding.target.startswith("self.") and owner.class_name == scope.class_name and owner is not scope:
            return binding.target
    return None


def _plain_device_bindings(ctx: Context) -> list[Binding]:
    """`device = torch.device(...)` bindings that needed no rewrite (already CPU-aware)."""
    index = ctx.index
    return list(index.derived("plain_device_bindings", lambda: [
        b
        for b in index.bindings
        if b.target in ("device", "dev") and isinstance(b.value, cst.Call) and index.qualify(b.value.func) == "torch.device"
    ]))


def _setup_device(ctx: Context) -> str:
    """Adds `device = ...` right after the process-group setup (once) and returns its name."""
    if ctx.device_name is None:
        taken = bool(ctx.index.bindings_of("device"))
        ctx.device_name = "local_device" if taken else "device"
        entry = ctx.sites.entry
        assert entry is not None
        line = statement(
            f'{ctx.device_name} = {ctx.torch}.device(f"cuda:{{{ctx.distributed.local_rank_name}}}" '
            f'if {ctx.torch}.cuda.is_available() else "cpu")\n'
        )
        if entry.setup_before is not None:
            ctx.plan.insert_before(entry.setup_before, [line])
        elif entry.teardown_after is not None:
            ctx.plan.insert_after(entry.teardown_after, [line])
    return ctx.device_name
