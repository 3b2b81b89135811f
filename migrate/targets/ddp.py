"""DDP + torchrun, the minimal path: process group from torchrun's environment,
DistributedSampler with set_epoch, the model on the local rank's device wrapped in
DistributedDataParallel once it is cast and frozen as it trains (steps.ddp_models;
find_unused_parameters where some parameters may get no gradient), `data_parallel(...)` calls run
as plain calls, the epoch figures it prints reduced over every rank (steps.epoch_figures), output
and checkpoints on rank 0, no_sync for accumulation.
Artifact: a torchrun launch script beside the converted script.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

import typer

from migrate import launchers
from migrate.records import Artifact, Severity
from migrate.runtime import torch_distributed
from migrate.target_options import DdpOptions, ProcessOptions
from migrate.targets.base import Conversion, Target

if TYPE_CHECKING:
    from migrate.steps.base import Context

# gloo for CPU tensors and, when CUDA is available, NCCL for CUDA tensors: a script told to stay on
# the CPU (`--device cpu`) still all-reduces on a GPU host
TORCHRUN = torch_distributed(
    "torchrun", '{m}.init_process_group("cpu:gloo,cuda:nccl" if {torch}.cuda.is_available() else "gloo")')


def torchrun_launcher(script_path: str, ctx: Context, target: str = "ddp") -> list[Artifact]:
    """run_<script>_<target>.sh: torchrun on this node with the processes --nproc-per-node asks for
    (migrate.launch renders it, as `migrate launch` does)."""
    from migrate.launch import render
    from migrate.launch_plan import LaunchPlan

    options = ProcessOptions.of(ctx.options)
    return render(LaunchPlan(target=target, script=script_path, nproc_per_node=options.nproc_per_node,
                             launcher=launchers.TORCHRUN))


def conversion() -> Conversion:
    from migrate.steps.ddp_models import ddp_models
    from migrate.steps.epoch_figures import epoch_figures_on
    from migrate.steps.functional_data_parallel import functional_data_parallel
    from migrate.steps.no_sync import no_sync
    from migrate.steps.rank_divergence import rank_divergence
    from migrate.steps.scale_lr import scale_lr
    from migrate.steps.sequence import process_group_steps
    from migrate.steps.trained_models import refuse_unwrappable
    from migrate.steps.wrap_model import DDP_WRAPPER, wrap_models

    steps = process_group_steps(
        before_setup=(refuse_unwrappable, ddp_models),
        wrap=(wrap_models, functional_data_parallel, rank_divergence),
        # a CPU tensor for the epoch figures: gloo takes it, on a GPU host too ("cpu:gloo,cuda:nccl")
        after_data=(no_sync, epoch_figures_on(None)),
        before_teardown=(scale_lr,),
    )
    return Conversion(steps=steps, artifacts=torchrun_launcher, runtime=TORCHRUN, wrapper=DDP_WRAPPER)


Nproc = Annotated[str, typer.Option("--nproc-per-node", metavar="N", help="Processes per node in the launch script: a number, 'gpu' or 'auto'. Example: --nproc-per-node 8")]
KeepGlobalBatch = Annotated[bool, typer.Option("--keep-global-batch", help="Divide each DataLoader's batch_size by the world size, so the global batch stays what the script says (default: each process keeps the script's batch, the global batch grows).")]
ScaleLr = Annotated[bool, typer.Option("--scale-lr", help="Multiply the optimizer's lr by the world size (linear scaling for the larger global batch).")]
SyncBatchnorm = Annotated[bool, typer.Option("--sync-batchnorm", help="Convert BatchNorm layers to SyncBatchNorm before wrapping (applied only when CUDA is available: it cannot run on CPU).")]


def command_options(nproc_per_node: Nproc = "auto", keep_global_batch: KeepGlobalBatch = False,
                    scale_lr: ScaleLr = False, sync_batchnorm: SyncBatchnorm = False) -> DdpOptions:
    return DdpOptions(nproc_per_node=nproc_per_node, keep_global_batch=keep_global_batch, scale_lr=scale_lr or None,
                      sync_batchnorm=sync_batchnorm)


DDP = Target(
    name="ddp",
    framework="DistributedDataParallel",
    summary="DistributedDataParallel, launched by torchrun.",
    description=(
        "Adds process-group setup (NCCL on GPUs, gloo on CPU; plain `python train.py` still runs as one\n"
        "process), a DistributedSampler with set_epoch, the model on the local rank's device wrapped in\n"
        "DDP, output and checkpoints on rank 0, no_sync() for gradient accumulation, and a launch script\n"
        "run_<script>_ddp.sh."
    ),
    example="migrate to-ddp train.py > ddp.patch && git apply ddp.patch",
    conversion=conversion,
    command_options=command_options,
    options_class=DdpOptions,
    markers={
        "torch.distributed.init_process_group": "torch.distributed",
        "torch.nn.parallel.DistributedDataParallel": "DistributedDataParallel",
    },
    replaces=frozenset({"nn.DataParallel"}),
    launcher=launchers.TORCHRUN,
    signs=("init_process_group", "DistributedDataParallel"),
    codes={
        "MIG501": (Severity.WARNING, "DDP: some parameters of the model may get no gradient in a step: wrapped with "
                   "find_unused_parameters=True, which costs an extra traversal of the autograd graph each step"),
        "MIG502": (Severity.WARNING, "DDP: the model is cast, moved or made trainable after the point where DDP must "
                   "wrap it, in an order the conversion cannot change: the file is left unchanged"),
    },
)
