"""FSDP2 + torchrun: process group and data sharding as for DDP; each repeated block of the model
and then the model itself sharded with `fully_shard` before the optimizer is built; checkpoints
gathered on every rank into plain full state dicts that rank 0 writes, and plain checkpoints
loaded into the sharded model; `set_requires_gradient_sync` for gradient accumulation; optional
mixed precision and CPU offload policies; `data_parallel(...)` calls run as plain calls of the
sharded model; the epoch figures it prints reduced over every rank (steps.epoch_figures). Artifact: a torchrun launch script.
"""

from __future__ import annotations

import functools
from typing import Annotated, Optional

import typer

from migrate import launchers
from migrate.records import Severity
from migrate.options import OptionProblem
from migrate.target_options import FsdpOptions, Options
from migrate.targets.base import Conversion, Target
from migrate.targets.ddp import TORCHRUN, KeepGlobalBatch, Nproc, ScaleLr, torchrun_launcher

PRECISIONS = ("none", "bf16", "fp16")


def conversion() -> Conversion:
    from migrate.steps.base import Wrapper
    from migrate.steps.epoch_figures import epoch_figures_on
    from migrate.steps.fsdp_accumulation import fsdp_accumulation
    from migrate.steps.fsdp_reads import fsdp_reads
    from migrate.steps.fsdp_refusals import refuse_double_backward
    from migrate.steps.fsdp_scaler import fsdp_scaler
    from migrate.steps.fsdp_shard import fsdp_shard
    from migrate.steps.fsdp_state_dicts import fsdp_state_dicts, refuse_unconverted_state
    from migrate.steps.fsdp_zero_grad import fsdp_zero_grad
    from migrate.steps.functional_data_parallel import functional_data_parallel
    from migrate.steps.rank_divergence import rank_divergence
    from migrate.steps.scale_lr import scale_lr
    from migrate.steps.sequence import process_group_steps
    from migrate.steps.trained_models import refuse_unwrappable

    steps = process_group_steps(
        before_setup=(refuse_unwrappable, refuse_double_backward),
        wrap=(fsdp_shard, functional_data_parallel, fsdp_reads, fsdp_zero_grad, rank_divergence),
        # a CPU tensor for the epoch figures: gloo takes it, on a GPU host too ("cpu:gloo,cuda:nccl")
        after_data=(fsdp_accumulation, fsdp_scaler, fsdp_state_dicts, refuse_unconverted_state, epoch_figures_on(None)),
        before_teardown=(scale_lr,),
    )
    # fully_shard keeps the user's class: nothing goes through `.module`
    return Conversion(steps=steps, artifacts=functools.partial(torchrun_launcher, target="fsdp"), runtime=TORCHRUN,
                      wrapper=Wrapper(code=None, through_module=False))


def from_ddp() -> Conversion:
    """A script already on DDP: its process group, samplers, rank guards and teardown stay."""
    from migrate.steps.ddp_to_fsdp import ddp_to_fsdp
    from migrate.steps.fsdp_refusals import refuse_double_backward
    from migrate.steps.fsdp_scaler import fsdp_scaler
    from migrate.steps.fsdp_state_dicts import fsdp_state_dicts, refuse_unconverted_state
    from migrate.steps.fsdp_zero_grad import fsdp_zero_grad
    from migrate.steps.base import Wrapper

    return Conversion(steps=(refuse_double_backward, ddp_to_fsdp, fsdp_zero_grad, fsdp_scaler, fsdp_state_dicts,
                             refuse_unconverted_state),
                      artifacts=functools.partial(torchrun_launcher, target="fsdp"), runtime=TORCHRUN,
                      wrapper=Wrapper(code=None, through_module=False))


def check_options(given: Options) -> list[OptionProblem]:
    options = FsdpOptions.of(given)
    found: list[OptionProblem] = []
    if options.mixed_precision not in PRECISIONS:
        found.append(OptionProblem("--mixed-precision", f"{options.mixed_precision!r}: choose none, bf16 or fp16"))
    for name in options.shard:
        if not name.isidentifier():
            found.append(OptionProblem("--shard", f"{name[:60]!r} is not a class name"))
    return found


MixedPrecision = Annotated[str, typer.Option("--mixed-precision", metavar="none|bf16|fp16", help="Compute in bf16 or fp16 (FSDP2's MixedPrecisionPolicy; weights stay fp32 and gradients are reduced in fp32).")]
CpuOffload = Annotated[bool, typer.Option("--cpu-offload", help="Keep the sharded weights, gradients and optimizer state in CPU memory (FSDP2's CPUOffloadPolicy); the optimizer step runs on the CPU.")]
Shard = Annotated[Optional[str], typer.Option("--shard", metavar="CLASS,...", help="Shard the instances of these classes one by one, then the model (default: the repeated blocks found in the model's class). Example: --shard DecoderLayer")]


def command_options(nproc_per_node: Nproc = "auto", keep_global_batch: KeepGlobalBatch = False, scale_lr: ScaleLr = False,
                    mixed_precision: MixedPrecision = "none", cpu_offload: CpuOffload = False, shard: Shard = None) -> FsdpOptions:
    classes = tuple(name.strip() for name in shard.split(",") if name.strip()) if shard else ()
    return FsdpOptions(nproc_per_node=nproc_per_node, keep_global_batch=keep_global_batch, scale_lr=scale_lr or None,
                       mixed_precision=mixed_precision, cpu_offload=cpu_offload, shard=classes)


FSDP = Target(
    name="fsdp",
    framework="FSDP",
    summary="FSDP2 (fully_shard), launched by torchrun.",
    description=(
        "Adds process-group setup and a DistributedSampler as to-ddp does; shards each repeated block of\n"
        "the model (a ModuleList or Sequential of one class, torch's Transformer layers; --shard names\n"
        "them), then the model, with fully_shard before the optimizer is built; gathers checkpoints on\n"
        "every rank into plain full state dicts that rank 0 writes (they load into the original script)\n"
        "and loads plain checkpoints into the sharded model; set_requires_gradient_sync for gradient\n"
        "accumulation; writes run_<script>_fsdp.sh."
    ),
    example="migrate to-fsdp --mixed-precision bf16 train.py > fsdp.patch",
    conversion=conversion,
    command_options=command_options,
    options_class=FsdpOptions,
    check_options=check_options,
    markers={
        "torch.distributed.fsdp.fully_shard": "FSDP",
        "torch.distributed.fsdp.FullyShardedDataParallel": "FSDP",
        "torch.distributed._composable.fsdp.fully_shard": "FSDP",
    },
    replaces=frozenset({"nn.DataParallel"}),
    swaps=frozenset({"torch.distributed", "DistributedDataParallel"}),
    swap=from_ddp,
    launcher=launchers.TORCHRUN,
    signs=("fully_shard", "FullyShardedDataParallel"),
    codes={
        "MIG301": (Severity.NOTE, "FSDP: how the model is sharded (per repeated block, or as one unit and why)"),
        "MIG302": (Severity.WARNING, "FSDP: the script runs the model's layers outside forward(), where FSDP2 does not gather the weights"),
        "MIG303": (Severity.WARNING, "FSDP: the script pickles the model (a sharded one cannot be), or reads or loads model or optimizer state where the conversion cannot follow the model: left unchanged"),
        "MIG304": (Severity.WARNING, "FSDP: loss scaling: a GradScaler becomes ShardedGradScaler, or fp16 runs without one"),
        "MIG305": (Severity.NOTE, "FSDP: a script on DistributedDataParallel moved to fully_shard; its process group, samplers and rank guards kept"),
        "MIG307": (Severity.WARNING, "FSDP: the script copies the sharded model, pairs its weights with another module's, or takes a weight out as a plain tensor: left unchanged"),
        "MIG308": (Severity.WARNING, "FSDP: the model and an optimizer over it are built on one line, where the shard cannot go between them: left unchanged"),
        "MIG306": (Severity.WARNING, "FSDP: a DistributedDataParallel wrap the move to fully_shard cannot follow: left unchanged"),
        "MIG309": (Severity.WARNING, "FSDP: a method that rewrites the model's weights (init_weights, reset_parameters) is called after the shard: left unchanged"),
        "MIG310": (Severity.WARNING, "FSDP: a gradient of a gradient (torch.autograd.grad with create_graph=True, a gradient penalty) through the sharded model, whose second backward FSDP2 cannot run: left unchanged"),
    },
)
