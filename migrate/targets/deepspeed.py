"""DeepSpeed: the model and the user's optimizer become one engine (`deepspeed.initialize`),
the engine runs backward and the optimizer step, ZeRO stage, precision, accumulation and
clipping live in a generated ds_config.json. Output and checkpoints on rank 0, weights
gathered on every rank first. Artifacts: ds_config.json, a launch script for the `deepspeed`
launcher and, for several nodes, its hostfile.
"""

from __future__ import annotations

import json
import os

from migrate.model import Artifact
from migrate.steps.base import Context
from migrate.steps.deepspeed_engine import CONFIG_NAME, deepspeed_engine
from migrate.steps.distributed_sampler import distributed_sampler
from migrate.steps.same_split import same_split
from migrate.steps.engine_calls import engine_calls
from migrate.steps.init_process_group import init_deepspeed, teardown
from migrate.steps.load_map_location import load_map_location
from migrate.steps.local_rank_argument import local_rank_argument
from migrate.steps.local_rank_device import local_rank_device
from migrate.steps.rank_divergence import rank_divergent_control
from migrate.steps.rank_zero import rank_zero
from migrate.steps.scheduler_checks import plateau_metric
from migrate.steps.shared_files import shared_files
from migrate.steps.trained_models import refuse_unwrappable
from migrate.targets.base import Target
from migrate.targets.ddp import launch_script_path
from migrate.templating import render


def config_path(script_path: str, ctx: Context) -> str:
    name = ctx.options.config_out or CONFIG_NAME
    return name if os.path.isabs(name) else os.path.join(os.path.dirname(script_path), name)


def ds_config_text(ctx: Context) -> str:
    values = ctx.facts["ds_values"]
    assert isinstance(values, dict)
    options = ctx.options
    text = render(
        "deepspeed/ds_config.json.j2",
        micro_batch=values["micro_batch"],
        accumulation=values["accumulation"],
        clipping=values["clipping"],
        fp16=values["fp16"],
        bf16=values["bf16"],
        stage=options.zero,
        offload_optimizer=_offload(options.offload_optimizer, options.nvme_path),
        offload_param=_offload(options.offload_param, options.nvme_path),
        steps_per_print=1000,
    )
    json.loads(text)  # a template bug must never ship a broken config
    return text


def _offload(device: str, nvme_path: str) -> dict[str, object] | None:
    if device == "none":
        return None
    settings: dict[str, object] = {"device": device, "pin_memory": True}
    if device == "nvme":
        settings["nvme_path"] = nvme_path
    return settings


def deepspeed_artifacts(script_path: str, ctx: Context) -> list[Artifact]:
    options = ctx.options
    config = config_path(script_path, ctx)
    artifacts = [Artifact(path=config, text=ds_config_text(ctx))]
    hosts = [(h.split(":")[0], int(h.split(":")[1]) if ":" in h else 1) for h in options.hosts]
    hostfile = "hostfile" if hosts else None
    if hosts:
        artifacts.append(Artifact(path=os.path.join(os.path.dirname(script_path), "hostfile"),
                                  text=render("deepspeed/hostfile.j2", hosts=hosts)))
    launcher = launch_script_path(script_path, "deepspeed")
    text = render(
        "launch/deepspeed.sh.j2",
        script=os.path.basename(script_path),
        stage=options.zero,
        config=os.path.relpath(config, os.path.dirname(script_path) or "."),
        hostfile=hostfile,
        num_nodes=len(hosts),
        master_addr=hosts[0][0] if hosts else "",
    )
    artifacts.append(Artifact(path=launcher, text=text, executable=True))
    return artifacts


DEEPSPEED = Target(
    name="deepspeed",
    framework="DeepSpeed",
    steps=(
        refuse_unwrappable,
        init_deepspeed,
        local_rank_argument,
        local_rank_device,
        deepspeed_engine,
        rank_divergent_control,
        engine_calls,
        distributed_sampler,
        same_split,
        rank_zero,
        shared_files,
        plateau_metric,
        load_map_location,
        teardown,
    ),
    artifacts=deepspeed_artifacts,
    already=frozenset({"DeepSpeed"}),
)
