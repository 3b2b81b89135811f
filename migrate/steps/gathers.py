"""Where a framework that shards the weights (DeepSpeed ZeRO-3, FSDP) gathers them for saving:
on every rank, above the statement that reads them and above any `with open(...)` holding it
(rank 0 alone writes that file), and never under a condition on this rank's own batches: one
that reads a loss or a value computed from it, or a value a training function returned
(`mean_loss = train_epoch(...)`) that was not reduced over the ranks where it is bound
(analysis.epoch_sums: a returned mean or sum of the losses is reduced, and a test of it is then the
same on every rank).
"""

from __future__ import annotations

import libcst as cst

from migrate.analysis.divergence import per_rank_condition
from migrate.analysis.epoch_sums import trained_value
from migrate.analysis.index import read_names
from migrate.analysis.sites import ModelSite
from migrate.steps.base import Context


def outside_open_files(ctx: Context, stmt: cst.BaseStatement) -> cst.BaseStatement:
    """The statement a gather goes above: `stmt`, or the outermost `with open(...)` holding it
    (a file written there is written on rank 0 only, and every rank must gather)."""
    anchor = stmt
    for around in ctx.index.enclosing_statements(stmt):
        if isinstance(around, cst.With) and any(
            isinstance(item.item, cst.Call) and ctx.code(item.item.func) == "open" for item in around.items
        ):
            anchor = around
    return anchor


def outside_rank_guards(ctx: Context, stmt: cst.BaseStatement) -> cst.BaseStatement:
    """`stmt`, or the outermost `if` around it that tests this process's rank (`if rank == 0:`,
    `if dist.get_rank() == 0:`, `if args.local_rank in (-1, 0):`): a script already distributed
    saves under its own guard, and a gather there would wait for ranks that never come."""
    anchor = stmt
    for around in ctx.index.enclosing_statements(stmt):
        if isinstance(around, cst.If) and tests_rank(ctx.code(around.test)):
            anchor = around
    return anchor


def tests_rank(test: str) -> bool:
    """Whether a condition reads this process's rank (by the words scripts use for it)."""
    lowered = test.lower()
    return any(word in lowered for word in ("rank", "is_main", "main_process", "master"))


def report_gather_on_some_ranks(ctx: Context, anchor: cst.BaseStatement, site: ModelSite, sharding: str,
                                refuse: bool = False) -> bool:
    """MIG121 when the gather runs under a condition on this rank's own batches (`if total <
    best:` with `total` summed from its losses, or `if mean_loss < best:` with `mean_loss` what a
    training function returned and not reduced over the ranks): where `sharding` ("ZeRO-3", "FSDP") shards the
    weights every rank must gather. `refuse`: the caller leaves the file unchanged. Returns whether it reported."""
    condition = per_rank_condition(ctx.sites, anchor)
    why = "that reads a value of this rank's own batches"
    if condition is None:
        condition, why = _under_a_trained_value(ctx, anchor)
    if condition is None:
        return False
    test = ctx.code(condition.test)
    ctx.report("MIG121", f"the gather of `{site.spelling}`'s weights for saving runs only when `{test}` (line "
               f"{ctx.position(condition)[0]}) holds, and {why}: under {sharding} "
               "every rank must take part in the gather, so ranks that skip it leave the others waiting; test a value "
               "every rank shares (all-reduce it first), or decide on rank 0 and broadcast the decision"
               + ("; the file is left unchanged" if refuse else ""), anchor)
    return True


def _under_a_trained_value(ctx: Context, anchor: cst.BaseStatement) -> tuple[cst.If | cst.While | None, str]:
    """The `if`/`while` around `anchor`, in its function, that tests a value a training function
    returned and that was not reduced over the ranks (`if mean_loss < best:` after `loss, acc =
    train(...)`), and the words that say so."""
    scope = ctx.index.scope_of.get(anchor)
    for around in ctx.index.enclosing_statements(anchor)[1:]:
        if not isinstance(around, (cst.If, cst.While)) or scope is None:
            continue
        for name in sorted(read_names(around.test)):
            binding = trained_value(ctx.sites, name, scope)
            if binding is not None and isinstance(binding.node.value, cst.Call):
                return around, (f"`{name}` is what `{ctx.code(binding.node.value.func)}(...)` (line "
                                f"{ctx.position(binding.node)[0]}) returned after training on this rank's own batches")
    return None, ""
