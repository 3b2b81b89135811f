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
"""

from __future__ import annotations

import libcst as cst

from migrate.analysis.epoch_sums import EpochSums, epoch_sums, how_reduced
from migrate.steps.base import Context, statements
from migrate.steps.horovod_synchronize import block_position


def horovod_metrics(ctx: Context) -> None:
    for loop in ctx.sites.step_loops:
        block, position = block_position(ctx, loop.node)
        if block is None:
            continue
        sums = epoch_sums(loop.node, block, position, ctx.sites.training_loader_names)
        if sums is None:
            continue
        ctx.plan.insert_after(loop.node, statements(_allreduce_code(ctx, sums)))
        ctx.report("MIG405", f"{how_reduced(sums)} over every rank after the training loop (hvd.allreduce), so what "
                   "rank 0 prints covers every rank's batches, as the original's did", loop.node)


def _allreduce_code(ctx: Context, sums: EpochSums) -> str:
    hvd = ctx.module_name("horovod.torch", "hvd")
    lines = ["# the epoch's figures over every rank's batches, not only this rank's share\n"]
    for name in sums.names:
        op = "Average" if name in sums.averaged else "Sum"
        lines.append(f"{name} = {hvd}.allreduce({ctx.torch}.tensor({name}), op={hvd}.{op}).item()\n")
    return "".join(lines)
