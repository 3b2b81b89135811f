"""DDP + torchrun, the minimal path: process group from torchrun's environment,
DistributedSampler with set_epoch, the model on the local rank's device wrapped in
DistributedDataParallel, output and checkpoints on rank 0, no_sync for accumulation.
Artifact: a torchrun launch script beside the converted script.
"""

from __future__ import annotations

import os

from migrate.model import Artifact
from migrate.steps.base import Context
from migrate.steps.distributed_sampler import distributed_sampler
from migrate.steps.same_split import same_split
from migrate.steps.init_process_group import init_process_group, teardown
from migrate.steps.load_map_location import load_map_location
from migrate.steps.local_rank_device import local_rank_device
from migrate.steps.no_sync import no_sync
from migrate.steps.rank_divergence import rank_divergence
from migrate.steps.rank_zero import rank_zero
from migrate.steps.scale_lr import scale_lr
from migrate.steps.scheduler_checks import plateau_metric
from migrate.steps.shared_files import shared_files
from migrate.steps.trained_models import refuse_unwrappable
from migrate.steps.wrap_model import wrap_models
from migrate.targets.base import Target
from migrate.templating import render


def launch_script_path(script_path: str, target: str) -> str:
    folder, name = os.path.split(script_path)
    stem = os.path.splitext(name)[0]
    return os.path.join(folder, f"run_{stem}_{target}.sh")


def torchrun_launcher(script_path: str, ctx: Context) -> list[Artifact]:
    path = launch_script_path(script_path, "ddp")
    text = render(
        "launch/torchrun.sh.j2",
        script=os.path.basename(script_path),
        nproc=ctx.options.nproc_per_node,
        processes=_processes_comment(ctx.options.nproc_per_node),
        launcher_name=os.path.basename(path),
    )
    return [Artifact(path=path, text=text, executable=True)]


def _processes_comment(nproc: str) -> str:
    """What torchrun starts for --nproc-per-node, said as it is (for `auto`: GPUs, else CPU cores)."""
    if nproc == "auto":
        return "one process per GPU (torchrun's `auto`: one per CPU core on a host without GPUs)"
    if nproc == "gpu":
        return "one process per GPU"
    return "1 process per node" if nproc == "1" else f"{nproc} processes per node"


DDP = Target(
    name="ddp",
    framework="DistributedDataParallel",
    steps=(
        refuse_unwrappable,
        init_process_group,
        local_rank_device,
        wrap_models,
        rank_divergence,
        distributed_sampler,
        same_split,
        no_sync,
        rank_zero,
        shared_files,
        plateau_metric,
        load_map_location,
        scale_lr,
        teardown,
    ),
    artifacts=torchrun_launcher,
    already=frozenset({"torch.distributed", "DistributedDataParallel"}),
)
