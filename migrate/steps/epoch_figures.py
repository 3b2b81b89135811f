"""Epoch figures the script prints, reduced over every rank with `torch.distributed.all_reduce`.

What migrate.steps.horovod_metrics does for Horovod, for the targets whose process group is
torch.distributed's (DDP, FSDP, DeepSpeed). Each rank trains on its own share of the batches, so a
running sum kept in the training loop (`total_loss += loss.item()`, `correct += ...`) holds that
share only. Right after the loop, on every rank, the sums that a print or log call after the loop
reads are all-reduced in one tensor, so rank 0 prints figures over every rank's batches, as the
one-process original prints them:

    # the epoch's figures over every rank's batches, not only this rank's share
    figures = torch.tensor([total_loss, correct], dtype=torch.float64)
    dist.all_reduce(figures)
    total_loss = figures[0].item() / dist.get_world_size()  # the ranks' mean, as it is divided by len(loader)
    correct = int(figures[1].item())

Which sums are taken, which are averaged and which stay ints, and the loops left alone, are
migrate.analysis.epoch_sums' (Horovod's step uses the same). Every reduction is a SUM: gloo has no
ReduceOp.AVG, so an averaged sum is divided by the world size afterwards. The tensor is float64,
exact for counts below 2**53.

Where the tensor lives is the target's choice (`epoch_figures_on(device)`), to suit the backend
its setup starts: DDP and FSDP start `"cpu:gloo,cuda:nccl"` on a GPU host and `"gloo"` without
one (migrate.targets.ddp), so a CPU tensor goes to gloo everywhere and needs no device;
DeepSpeed's `deepspeed.init_distributed` starts NCCL alone when CUDA is available, which takes
CUDA tensors only, so its tensor must go to the current GPU (setup's `torch.cuda.set_device`)
there and to the CPU under gloo: the device expression follows the same test as the backend.
Where DeepSpeed is kept on the CPU with a model the script never moves, its group is gloo on every
host, and so is its tensor: the CPU (migrate.steps.deepspeed_engine.epoch_figures chooses).

A number a training function returns from this rank's batches (`mean_loss = train_epoch(...)`,
analysis.epoch_sums.returned_metrics) is reduced where it is bound, on the same device, before
anything reads it, so `scheduler.step(mean_loss)` lowers the LR on the same epoch on every rank and
`if mean_loss < best:` saves (and gathers, under FSDP and ZeRO-3) on every rank or on none:

    mean_loss = train_epoch(model, loader, opt)
    # what train_epoch returned covers this rank's batches only: the mean over every rank
    shared = torch.tensor(mean_loss, dtype=torch.float64)
    dist.all_reduce(shared)
    mean_loss = shared.item() / dist.get_world_size()
"""

from __future__ import annotations

import dataclasses

import libcst as cst

from migrate.analysis.epoch_sums import EpochSums, ReturnedMetric, epoch_sums, how_reduced, returned_metrics
from migrate.analysis.index import free_name
from migrate.steps.base import Context, Step, statements
from migrate.steps.horovod_synchronize import block_position

# DeepSpeed: the device of the NCCL group on a GPU host, the CPU under gloo (see the docstring)
CURRENT_GPU_OR_CPU = '"cuda" if {torch}.cuda.is_available() else "cpu"'


def epoch_figures_on(device: str | None) -> Step:
    """The step, its tensor on `device` (a runtime template, e.g. CURRENT_GPU_OR_CPU); None: the CPU."""

    def epoch_figures(ctx: Context) -> None:
        reduce_epoch_figures(ctx, device)

    return epoch_figures


def reduce_epoch_figures(ctx: Context, device: str | None) -> None:
    for loop in ctx.sites.step_loops:
        block, position = block_position(ctx, loop.node)
        if block is None:
            continue
        sums = unsharded_sums(ctx, epoch_sums(loop.node, block, position, ctx.sites.training_loader_names))
        if sums is not None:
            ctx.plan.insert_after(loop.node, statements(_reduce_code(ctx, sums, device)))
            _report(ctx, sums, loop.node)
    for metric in unsharded_metrics(ctx, returned_metrics(ctx.sites)):
        ctx.plan.insert_after(metric.stmt, statements(_metric_code(ctx, metric, device)))
        ctx.report("MIG007", f"{metric_reduced(ctx, metric)} over every rank where it is bound (dist.all_reduce), "
                   "so every rank decides with the same value (the LR schedule, a test before saving), as the "
                   f"original did over every batch{not_sharded_words(ctx)}", metric.stmt)


def data_not_sharded(ctx: Context) -> bool:
    """No training loader got a sampler and no rank draws its own samples (steps.distributed_sampler)."""
    from migrate.steps.distributed_sampler import DataNotSharded

    return DataNotSharded in ctx.records


def unsharded_sums(ctx: Context, sums: EpochSums | None) -> EpochSums | None:
    """Where every rank reads every batch, each rank's sums are already the original's: averaged
    over the ranks (counts kept whole), never summed (which would make them N times as large)."""
    if sums is None or not data_not_sharded(ctx):
        return sums
    return dataclasses.replace(sums, averaged=frozenset(sums.names))


def unsharded_metrics(ctx: Context, metrics: list[ReturnedMetric]) -> list[ReturnedMetric]:
    """As unsharded_sums, for the numbers a training function returns."""
    if not data_not_sharded(ctx):
        return metrics
    return [dataclasses.replace(metric, averaged=True) for metric in metrics]


def not_sharded_words(ctx: Context) -> str:
    """The clause a message adds where the data is not sharded."""
    return (" (the data is not sharded, MIG101: every rank read every batch, so the mean over the ranks is the "
            "original's figure)") if data_not_sharded(ctx) else ""


def metric_reduced(ctx: Context, metric: ReturnedMetric) -> str:
    """"`mean_loss`, what `train_epoch(...)` returns from this rank's batches only, averaged"."""
    how = "averaged" if metric.averaged else "summed"
    return (f"`{metric.name}`, what `{ctx.code(metric.call.func)}(...)` returns from this rank's batches only, "
            f"{how}")


def _metric_code(ctx: Context, metric: ReturnedMetric, device: str | None) -> str:
    torch = ctx.torch
    dist = ctx.module_name("torch.distributed", "dist")
    shared = free_name("shared", ctx.index.names_under(ctx.index.module))
    on = f", device={ctx.spell(device)}" if device is not None else ""
    mean = f" / {dist}.get_world_size()" if metric.averaged else ""
    what = "the mean" if metric.averaged else "the sum"
    return (f"# what {ctx.code(metric.call.func)} returned covers this rank's batches only: {what} over every rank\n"
            f"{shared} = {torch}.tensor({metric.name}, dtype={torch}.float64{on})\n"
            f"{dist}.all_reduce({shared})\n"
            f"{metric.name} = {shared}.item(){mean}\n")


def _reduce_code(ctx: Context, sums: EpochSums, device: str | None) -> str:
    torch = ctx.torch
    dist = ctx.module_name("torch.distributed", "dist")
    figures = free_name("figures", ctx.index.names_under(ctx.index.module))
    on = f", device={ctx.spell(device)}" if device is not None else ""
    lines = [
        "# the epoch's figures over every rank's batches, not only this rank's share\n",
        f"{figures} = {torch}.tensor([{', '.join(sums.names)}], dtype={torch}.float64{on})\n",
        f"{dist}.all_reduce({figures})\n",
    ]
    for number, name in enumerate(sums.names):
        value = f"{figures}[{number}].item()"
        if name in sums.averaged and name in sums.ints:  # a count every rank made over every batch
            value = f"round({value} / {dist}.get_world_size())"
        elif name in sums.averaged:
            why = "every rank read every batch" if data_not_sharded(ctx) else "as it is divided by len(loader)"
            value += f" / {dist}.get_world_size()  # the ranks' mean, {why}"
        elif name in sums.ints:
            value = f"int({value})"
        lines.append(f"{name} = {value}\n")
    return "".join(lines)


def _report(ctx: Context, sums: EpochSums, loop: cst.CSTNode) -> None:
    ctx.report("MIG007", f"{how_reduced(sums)} over every rank after the training loop (dist.all_reduce), so what "
               f"rank 0 prints covers every rank's batches, as the original's did{not_sharded_words(ctx)}", loop)
