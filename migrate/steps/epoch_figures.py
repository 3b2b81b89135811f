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
"""

from __future__ import annotations

import libcst as cst

from migrate.analysis.epoch_sums import EpochSums, epoch_sums, how_reduced
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
        sums = epoch_sums(loop.node, block, position, ctx.sites.training_loader_names)
        if sums is not None:
            ctx.plan.insert_after(loop.node, statements(_reduce_code(ctx, sums, device)))
            _report(ctx, sums, loop.node)


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
        if name in sums.averaged:
            value += f" / {dist}.get_world_size()  # the ranks' mean, as it is divided by len(loader)"
        elif name in sums.ints:
            value = f"int({value})"
        lines.append(f"{name} = {value}\n")
    return "".join(lines)


def _report(ctx: Context, sums: EpochSums, loop: cst.CSTNode) -> None:
    ctx.report("MIG007", f"{how_reduced(sums)} over every rank after the training loop (dist.all_reduce), so what "
               "rank 0 prints covers every rank's batches, as the original's did", loop)
