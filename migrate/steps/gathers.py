"""Where a framework that shards the weights (DeepSpeed ZeRO-3, FSDP) gathers them for saving:
on every rank, above the statement that reads them and above any `with open(...)` holding it
(rank 0 alone writes that file), and never under a condition on this rank's own batches: one
that reads a loss or a value computed from it, or a value a training function returned
(`mean_loss = train_epoch(...)`) that was not reduced over the ranks where it is bound
(analysis.epoch_sums: a returned mean or sum of the losses is reduced, and a test of it is then the
same on every rank).
"""

from __future__ import annotations

import os
import re

import libcst as cst

from migrate.analysis.divergence import EvaluatedCondition, evaluated_condition, per_rank_condition
from migrate.analysis.episodes import environments
from migrate.analysis.epoch_sums import trained_value
from migrate.analysis.index import read_names
from migrate.analysis.sites import ModelSite
from migrate.project import project_graph
from migrate.steps.base import Context

BATCH_NORM = re.compile(r"\bBatchNorm[123]d\b|\bSyncBatchNorm\b")


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


class ReportedGathers:
    """The statements whose gathers MIG121 was reported above (once each)."""

    def __init__(self) -> None:
        self.anchors: list[cst.BaseStatement] = []


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
        condition, why = _under_an_evaluation(ctx, anchor)
    if condition is None:
        return False
    reported = ctx.recorded(ReportedGathers, create=True)
    if any(anchor is seen for seen in reported.anchors):  # the model's and the optimizer's gather: said once
        return True
    reported.anchors.append(anchor)
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


def _under_an_evaluation(ctx: Context, anchor: cst.BaseStatement) -> tuple[cst.If | cst.While | None, str]:
    """The `if`/`while` around `anchor` (or around a call of its function) that tests what the
    model computed on this rank (`if val_score > best:` after `val_score = validate(model=model)`),
    when something in the program makes that differ between ranks, and the words that say so."""
    found = evaluated_condition(ctx.sites, anchor)
    if found is None:
        return None, ""
    reason = _played_environment(ctx, found) or _batch_norm_layers(ctx)
    if reason is None:  # the same weights on the same data: every rank decides alike
        return None, ""
    return found.condition, (f"`{found.name}` comes from `{_shortened(ctx.code(found.run))}` (line "
                             f"{ctx.position(found.run)[0]}), which runs the model on this rank, and {reason}, so "
                             "the ranks can decide differently")


def _played_environment(ctx: Context, found: EvaluatedCondition) -> str | None:
    """`env` of the function that runs the model (or of the one it calls to), when it plays an
    environment: each rank its own episodes."""
    for binding in ctx.index.bindings:
        if any(binding.place.scope is scope for scope in found.evaluating) and binding.target in environments(ctx.index):
            return (f"`{binding.target}` (line {ctx.position(binding.node)[0]}) plays this rank's own episodes")
    return None


def _batch_norm_layers(ctx: Context) -> str | None:
    """The first file of the program or of the project modules it imports that builds BatchNorm
    layers: their running statistics are each rank's own (the sharded model's buffers are not averaged)."""
    parts = ctx.program.parts if ctx.program is not None else ()
    files = [(part.path, part.text) for part in parts] or [(ctx.path, ctx.index.module.code)]
    script = files[0][1]
    files += [(path, ctx.read_module(path) or "") for path in project_graph(ctx.path, ctx.read_module, script).modules()
              if path not in {part.path for part in parts}]
    for path, text in files:
        if BATCH_NORM.search(text):
            return (f"the BatchNorm layers that {os.path.relpath(path, os.path.dirname(ctx.path) or '.')} builds keep running statistics "
                    "that each rank updates from its own batches and that the sharded model does not average")
    return None


def _shortened(code: str) -> str:
    """A call as the script spells it, on one line, its arguments cut when long."""
    flat = " ".join(code.split())
    return flat if len(flat) <= 60 else flat[:flat.index("(") + 1] + "...)" if "(" in flat else flat[:57] + "..."
