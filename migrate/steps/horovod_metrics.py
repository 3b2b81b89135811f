"""Epoch figures the script prints, reduced over every rank with `hvd.allreduce`.

Each rank trains on its own share of the batches, so a running sum kept in the training loop
(`total_loss += loss.item()`, `num_batches += 1`) holds that share only, and rank 0 would print
its own part. Right after the loop, on every rank, each such sum that a print or log call after
the loop reads is reduced over every rank, so `total_loss / num_batches` is the mean over all the
batches, as the one-process original prints it:

    total_loss = hvd.allreduce(torch.tensor(total_loss), op=hvd.Average).item()
    correct = hvd.allreduce(torch.tensor(correct), op=hvd.Sum).item()

Which sums are taken, which are averaged (divided by this rank's `len(loader)`) and which summed,
and the loops left alone, are migrate.analysis.epoch_sums' (the torch.distributed targets' step,
steps.epoch_figures, uses the same). `torch.tensor` of a Python int is an int64 and of a float a
float32, and `.item()` gives back the same Python type, so counts stay ints.

A number a training function returns from this rank's batches (`mean_loss = train_epoch(...)`,
analysis.epoch_sums.returned_metrics) is reduced where it is bound, before anything reads it, so
the LR schedule and a test before saving agree on every rank:

    mean_loss = hvd.allreduce(torch.tensor(mean_loss, dtype=torch.float64), op=hvd.Average).item()
"""

from __future__ import annotations

import libcst as cst

from migrate.analysis.epoch_sums import EpochSums, ReturnedMetric, epoch_sums, how_reduced, returned_metrics
from migrate.steps.base import Context, statements
from migrate.steps.epoch_figures import metric_reduced, not_sharded_words, unsharded_metrics, unsharded_sums
from migrate.steps.horovod_synchronize import block_position


def horovod_metrics(ctx: Context) -> None:
    for loop in ctx.sites.step_loops:
        block, position = block_position(ctx, loop.node)
        if block is None:
            continue
        sums = unsharded_sums(ctx, epoch_sums(loop.node, block, position, ctx.sites.training_loader_names))
        if sums is None:
            continue
        ctx.plan.insert_after(loop.node, statements(_allreduce_code(ctx, sums)))
        ctx.report("MIG405", f"{how_reduced(sums)} over every rank after the training loop (hvd.allreduce), so what "
                   f"rank 0 prints covers every rank's batches, as the original's did{not_sharded_words(ctx)}",
                   loop.node)
    for metric in unsharded_metrics(ctx, returned_metrics(ctx.sites)):
        ctx.plan.insert_after(metric.stmt, statements(_metric_code(ctx, metric)))
        ctx.report("MIG405", f"{metric_reduced(ctx, metric)} over every rank where it is bound (hvd.allreduce), "
                   "so every rank decides with the same value (the LR schedule, a test before saving), as the "
                   f"original did over every batch{not_sharded_words(ctx)}", metric.stmt)


def _metric_code(ctx: Context, metric: ReturnedMetric) -> str:
    hvd = ctx.module_name("horovod.torch", "hvd")
    op = "Average" if metric.averaged else "Sum"
    what = "the mean" if metric.averaged else "the sum"
    return (f"# what {ctx.code(metric.call.func)} returned covers this rank's batches only: {what} over every rank\n"
            f"{metric.name} = {hvd}.allreduce({ctx.torch}.tensor({metric.name}, dtype={ctx.torch}.float64), "
            f"op={hvd}.{op}).item()\n")


def _allreduce_code(ctx: Context, sums: EpochSums) -> str:
    hvd = ctx.module_name("horovod.torch", "hvd")
    lines = ["# the epoch's figures over every rank's batches, not only this rank's share\n"]
    for name in sums.names:
        op = "Average" if name in sums.averaged else "Sum"
        value = f"{hvd}.allreduce({ctx.torch}.tensor({name}), op={hvd}.{op}).item()"
        if name in sums.averaged and name in sums.ints:  # a count every rank made over every batch
            value = f"round({hvd}.allreduce({ctx.torch}.tensor({name}, dtype={ctx.torch}.float64), op={hvd}.{op}).item())"
        lines.append(f"{name} = {value}\n")
    return "".join(lines)
