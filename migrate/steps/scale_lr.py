"""`--scale-lr` (Horovod: by default): the optimizer's learning rate is multiplied by the world size (the linear
scaling rule), for scripts whose global batch grows with the number of processes.
"""

from __future__ import annotations

import libcst as cst

from migrate.analysis.index import CallSite
from migrate.analysis.training import argument
from migrate.steps.base import Context, expression

# findings that say the training data is not split across the ranks
UNSHARDED = ("MIG101", "MIG102", "MIG111")
# expressions that `* world` would bind into instead of scaling whole
LOOSER_THAN_TIMES = (cst.BooleanOperation, cst.Comparison, cst.IfExp, cst.Lambda, cst.NamedExpr)
AS_TIGHT_AS_TIMES = (cst.Multiply, cst.Divide, cst.FloorDivide, cst.Modulo, cst.MatrixMultiply, cst.Power)
# torch 2.13's default learning rates (inspect.signature of each optimizer), written out when scaled
DEFAULT_LR = {f"torch.optim.{name}": value for name, value in {
    "Adam": "1e-3", "AdamW": "1e-3", "SGD": "1e-3", "RMSprop": "1e-2", "Adagrad": "1e-2", "Adadelta": "1.0",
    "Adamax": "2e-3", "NAdam": "2e-3", "RAdam": "1e-3", "ASGD": "1e-2", "Rprop": "1e-2", "SparseAdam": "1e-3",
    "LBFGS": "1"}.items()}


def scale_lr(ctx: Context) -> None:
    """`--scale-lr` (off unless asked)."""
    if ctx.options.scale_lr:
        scale_learning_rates(ctx)


def scale_lr_unless_declined(ctx: Context) -> None:
    """Horovod's recipe: on unless `--no-scale-lr`, or `--keep-global-batch` keeps the global batch."""
    unsharded = next((f for f in ctx.findings if f.code in UNSHARDED), None)
    if ctx.options.scale_lr is None and not ctx.options.keep_global_batch and unsharded is not None and ctx.sites.optimizers:
        ctx.report("MIG004", f"the learning rate is kept: the conversion did not shard the training data (line "
                   f"{unsharded.line}, {unsharded.code}), so it cannot tell whether the ranks' batches add up to a "
                   "larger global batch; once each rank reads its own share, multiply it by hvd.size() (Horovod's "
                   "recipe) or convert again with --scale-lr", ctx.sites.optimizers[0].node)
        return
    if ctx.options.scale_lr or (ctx.options.scale_lr is None and not ctx.options.keep_global_batch):
        first = scale_learning_rates(ctx)
        if first is not None:
            ctx.report("MIG004", f"the learning rate is multiplied by {ctx.world_size()} (Horovod's recipe: each rank "
                       "keeps its batch, so the global batch grows with the ranks); --no-scale-lr keeps the script's",
                       first)


# schedulers that set the lr from their own arguments: (keyword, position) of each rate they set
SCHEDULER_RATES = {
    "torch.optim.lr_scheduler.OneCycleLR": (("max_lr", 1),),
    "torch.optim.lr_scheduler.CyclicLR": (("base_lr", 1), ("max_lr", 2)),
}


def scale_learning_rates(ctx: Context) -> cst.CSTNode | None:
    """Every optimizer's lr (and a OneCycleLR/CyclicLR's rates, which replace it) times the world
    size; the first call scaled, or None."""
    world = ctx.world_size()
    first = None
    for call in ctx.sites.optimizers:
        if (ctx.index.qualify(call.node.func) or "").startswith("torch.optim.swa_utils"):
            continue  # AveragedModel / SWALR: not an optimizer
        lr = argument(call.node, "lr", 1)
        default = DEFAULT_LR.get(ctx.index.qualify(call.node.func) or "")
        if lr is None and (default is None or not _assigned_whole(call)):
            ctx.report("MIG004", f"--scale-lr: this optimizer uses its default learning rate; pass lr=<default> * {world} by hand", call.node)
            continue
        if lr is None:
            _scale_default(ctx, call.node, default or "", world)
        else:
            _scale(ctx, lr, world)
        first = first or call.node
    for name, rates in SCHEDULER_RATES.items():
        for call in ctx.index.calls_named(name):
            for keyword, position in rates:
                rate = argument(call.node, keyword, position)
                if rate is not None:
                    _scale(ctx, rate, world)
    return first


def _scale(ctx: Context, arg: cst.Arg, world: str) -> None:
    value = ctx.code(arg.value)
    if _binds_looser_than_times(arg.value):
        value = f"({value})"  # `a + b` scales as a whole, `x if c else y` in both branches
    scaled = expression(f"{value} * {world}")
    ctx.plan.replace(arg, lambda updated, s=scaled: updated.with_changes(value=s))


def _assigned_whole(call: CallSite) -> bool:
    """`optimizer = Adam(params)`: the call is the whole value of its statement, so no other step
    rewrites it in place (a call inside `Wrapper(Adam(...))` may be, and a wrapper may set the rate)."""
    stmt = call.place.stmt
    return (isinstance(stmt, cst.SimpleStatementLine) and len(stmt.body) == 1
            and isinstance(stmt.body[0], (cst.Assign, cst.AnnAssign)) and stmt.body[0].value is call.node)


def _scale_default(ctx: Context, call: cst.Call, default: str, world: str) -> None:
    """`Adam(params)` -> `Adam(params, lr=1e-3 * world)`: torch's default rate, written out and scaled."""
    added = cst.Arg(keyword=cst.Name("lr"), value=expression(f"{default} * {world}"),
                    equal=cst.AssignEqual(whitespace_before=cst.SimpleWhitespace(""), whitespace_after=cst.SimpleWhitespace("")))

    def with_lr(updated: cst.CSTNode) -> cst.CSTNode:
        assert isinstance(updated, cst.Call)
        args = list(updated.args)
        if args and args[-1].comma is cst.MaybeSentinel.DEFAULT:
            args[-1] = args[-1].with_changes(comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" ")))
        return updated.with_changes(args=[*args, added])

    ctx.plan.replace(call, with_lr)


def _binds_looser_than_times(value: cst.BaseExpression) -> bool:
    if value.lpar:
        return False
    if isinstance(value, cst.BinaryOperation):
        return not isinstance(value.operator, AS_TIGHT_AS_TIMES)
    return isinstance(value, LOOSER_THAN_TIMES)
