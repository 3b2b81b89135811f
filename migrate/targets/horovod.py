"""Horovod + horovodrun: `hvd.init()`, the local rank's GPU, a DistributedSampler over
`hvd.size()` ranks, every stepped optimizer wrapped in `hvd.DistributedOptimizer` once its model is
moved and cast (its gradients averaged across ranks on backward, `backward_passes_per_step` for
gradient accumulation, `synchronize()` where gradients are read early or a backward reaches another
optimizer's model), rank 0's weights broadcast where DDP would wrap the model, a resumed optimizer's state broadcast after its
load, the learning rate scaled by `hvd.size()` (Horovod's recipe; `--no-scale-lr` keeps it), output
and checkpoints on rank 0, `data_parallel(...)` calls run as plain calls. Artifact: a horovodrun
launch script.

Horovod's last release is 0.28.1 (2023); it builds against current torch only with the changes
scripts/horovod-wheel makes.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Optional

import typer

from migrate.records import Artifact, Severity
from migrate.options import OptionProblem, hosts_problems
from migrate.target_options import HorovodOptions, Options
from migrate import launchers
from migrate.runtime import Runtime
from migrate.targets.base import Conversion, Target
from migrate.targets.ddp import Nproc

if TYPE_CHECKING:
    from migrate.steps.base import Context

HOROVOD = Runtime(
    module="horovod.torch",
    alias="hvd",
    launcher="horovodrun",
    rank="{m}.rank()",
    world_size="{m}.size()",
    barrier="{m}.barrier()",
    setup=(
        "{m}.init()\n"
        "local_rank = {m}.local_rank()\n"
        "if {torch}.cuda.is_available():\n"
        "    {torch}.cuda.set_device(local_rank)\n"
    ),
    teardown=(
        "{m}.barrier()  # no rank exits while rank 0 still writes its files\n"
        "{m}.shutdown()\n"
    ),
    rank_variable="HOROVOD_RANK",
    local_rank_variable="HOROVOD_LOCAL_RANK",
    local_rank_call="{m}.local_rank()",  # horovodrun over MPI sets no HOROVOD_LOCAL_RANK
    sampler_arguments="num_replicas={m}.size(), rank={m}.rank()",
    advice=(
        ("torch.distributed.get_world_size()", "hvd.size()"), ("torch.distributed.get_rank()", "hvd.rank()"),
        ("torch.distributed.all_reduce, then divide by the world size", "hvd.allreduce, which averages"),
        ("dist.all_reduce(t, op=dist.ReduceOp.MAX)", "hvd.allreduce(t, op=hvd.Max)"),
        ("dist.all_reduce(t, op=dist.ReduceOp.MIN)", "hvd.allreduce(t, op=hvd.Min)"),
        ("dist.broadcast_object_list", "hvd.broadcast_object"),
        # MIG123: weights drawn again after rank 0's were broadcast, where DDP would wrap the model
        ("after it is wrapped (the wrapper goes ", "after rank 0's weights are broadcast (the broadcast goes "),
        ("the wrapper copied rank 0's weights to every rank when it was built", "the broadcast copied rank 0's weights to every rank"),
        ("initialise before the wrap, or broadcast the weights again afterwards",
         "initialise before the broadcast, or broadcast the weights again afterwards (hvd.broadcast_parameters)"),
    ),
    forward_joins=False,  # a forward runs no collective: the all-reduces run in backward and the step
    replaces_data_parallel="hvd.DistributedOptimizer and the broadcast of rank 0's weights",
)


def horovodrun_launcher(script_path: str, ctx: Context) -> list[Artifact]:
    """run_<script>_horovod.sh: horovodrun on this node, or on the hosts --hosts names (migrate.launch)."""
    from migrate.launch import render
    from migrate.launch_plan import LaunchPlan

    options = HorovodOptions.of(ctx.options)
    return render(LaunchPlan(target="horovod", script=script_path, nproc_per_node=options.nproc_per_node,
                             hosts=options.hosts, launcher=launchers.HOROVODRUN))


def conversion() -> Conversion:
    from migrate.steps.functional_data_parallel import functional_data_parallel
    from migrate.steps.horovod_metrics import horovod_metrics
    from migrate.steps.horovod_optimizers import BROADCAST_WRAPPER, broadcast_models, horovod_optimizers, maintenance_note
    from migrate.steps.rank_divergence import rank_divergence
    from migrate.steps.scale_lr import scale_lr_unless_declined
    from migrate.steps.sequence import process_group_steps
    from migrate.steps.trained_models import refuse_unless_method_bypass

    steps = process_group_steps(
        before_setup=(horovod_optimizers, refuse_unless_method_bypass),
        wrap=(broadcast_models, functional_data_parallel, rank_divergence),
        after_data=(horovod_metrics,),
        before_teardown=(scale_lr_unless_declined,),
        after_teardown=(maintenance_note,),
    )
    return Conversion(steps=steps, artifacts=horovodrun_launcher, runtime=HOROVOD, wrapper=BROADCAST_WRAPPER)


def check_options(given: Options) -> list[OptionProblem]:
    options = HorovodOptions.of(given)
    found = hosts_problems(options.hosts)
    if options.hosts and options.nproc_per_node != "auto":
        found.append(OptionProblem("--hosts/--nproc-per-node", "--hosts gives each host's process count (HOST:N): leave out --nproc-per-node"))
    return found


Hosts = Annotated[Optional[str], typer.Option("--hosts", metavar="HOST:N,...", help="Several nodes: the hosts and the processes on each, for horovodrun -H. Example: --hosts node1:4,node2:4")]
ScaleLr = Annotated[Optional[bool], typer.Option("--scale-lr/--no-scale-lr", help="Multiply the optimizer's lr by hvd.size() (Horovod's recipe: on by default, off with --keep-global-batch).")]
KeepGlobalBatch = Annotated[bool, typer.Option("--keep-global-batch", help="Divide each DataLoader's batch_size by hvd.size(), so the global batch stays what the script says (the lr then stays too).")]


def command_options(nproc_per_node: Nproc = "auto", keep_global_batch: KeepGlobalBatch = False,
                    scale_lr: ScaleLr = None, hosts: Hosts = None) -> HorovodOptions:
    host_list = tuple(h.strip() for h in hosts.split(",") if h.strip()) if hosts else ()
    return HorovodOptions(nproc_per_node=nproc_per_node, keep_global_batch=keep_global_batch, scale_lr=scale_lr,
                          hosts=host_list)


def _verify_options(zero: int, compare: bool) -> HorovodOptions:
    """verify --compare runs the converted script at nproc times the original's batch with the
    original's rate: converted without the lr scaling, so the weights can be compared."""
    return HorovodOptions(scale_lr=False) if compare else HorovodOptions()


HOROVOD_TARGET = Target(
    name="horovod",
    framework="Horovod",
    summary="Horovod (DistributedOptimizer), launched by horovodrun; Horovod's last release is 0.28.1 (2023).",
    description=(
        "Adds hvd.init() and the local rank's GPU, a DistributedSampler over hvd.size() ranks, wraps each\n"
        "stepped optimizer in hvd.DistributedOptimizer (backward_passes_per_step for gradient accumulation),\n"
        "broadcasts rank 0's weights (and a resumed optimizer's state), scales the lr by hvd.size() unless\n"
        "--no-scale-lr, puts output and checkpoints on rank 0, and writes run_<script>_horovod.sh.\n"
        "Horovod's last release is 0.28.1 (2023); the README says how to build it for current torch."
    ),
    example="migrate to-horovod --hosts node1:4,node2:4 train.py > horovod.patch",
    conversion=conversion,
    command_options=command_options,
    options_class=HorovodOptions,
    check_options=check_options,
    markers={"horovod.torch.init": "Horovod", "horovod.torch.DistributedOptimizer": "Horovod"},
    replaces=frozenset({"nn.DataParallel"}),
    launcher=launchers.HOROVODRUN,
    signs=("DistributedOptimizer",),
    verify_options=_verify_options,
    codes={
        "MIG401": (Severity.NOTE, "Horovod: how each optimizer is wrapped in hvd.DistributedOptimizer, and what is broadcast from rank 0"),
        "MIG402": (Severity.WARNING, "Horovod: an optimizer the conversion cannot wrap once, with names unique across optimizers (not built in this file, built again during training, two over one model): left unchanged"),
        "MIG403": (Severity.WARNING, "Horovod: more backward passes reach an optimizer before its step than the conversion can count for backward_passes_per_step: left unchanged"),
        "MIG405": (Severity.NOTE, "Horovod: running sums of the training loop that the script prints are reduced over every rank (hvd.allreduce, summed or averaged) after the loop"),
        "MIG406": (Severity.WARNING, "Horovod: rank 0's weights cannot be broadcast as the conversion would place it (parameters made channels_last, which Horovod cannot broadcast or all-reduce; a model built or loaded where only some ranks reach): left unchanged"),
        "MIG404": (Severity.NOTE, "Horovod: gradients are averaged before the script reads them (clipping, loss scaling), or after a backward that reaches another optimizer's model"),
    },
)
