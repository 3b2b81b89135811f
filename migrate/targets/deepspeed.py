"""DeepSpeed: the model and the user's optimizer become one engine (`deepspeed.initialize`),
the engine runs backward and the optimizer step, ZeRO stage, precision, accumulation and
clipping live in a generated ds_config.json. Output and checkpoints on rank 0, weights
gathered on every rank first; `nn.parallel.data_parallel(model, x, gpus)` becomes `model(x)` (one
GPU per process); a model the script never moves keeps DeepSpeed on the CPU (DS_ACCELERATOR=cpu,
gloo). Artifacts: ds_config.json, a launch script for the `deepspeed`
launcher and, for several nodes, its hostfile (the launcher passes `--no_local_rank` where a module
of the script's folder parses its arguments: MIG601).
"""

from __future__ import annotations

import dataclasses
import json
import os
from typing import TYPE_CHECKING, Annotated, Optional

import typer

from migrate import launchers
from migrate.records import Artifact, FileResult, InputError, Severity
from migrate.options import OptionProblem, offload_problems, config_out_problems, hosts_problems
from migrate.target_options import DeepSpeedOptions, Options
from migrate.runtime import torch_distributed
from migrate.steps.deepspeed_names import CONFIG_NAME
from migrate.targets.base import Conversion, Convert, Target
from migrate.templating import render

if TYPE_CHECKING:
    from migrate.steps.base import Context

PRECISIONS = ("auto", "fp32", "fp16", "bf16")
NO_LOCAL_RANK = "MIG601"  # the launcher passes --no_local_rank (steps.local_rank_argument); verify launches so too

# deepspeed.init_distributed starts torch.distributed: rank and world size are torch's. DeepSpeed
# puts the model on the GPU itself, so it keeps NCCL with CUDA.
DEEPSPEED_LAUNCHER = torch_distributed(
    "the deepspeed launcher", '{deepspeed}.init_distributed(dist_backend="nccl" if {torch}.cuda.is_available() else "gloo")',
    modules=("deepspeed",))


def config_path(script_path: str, ctx: Context) -> str:
    name = DeepSpeedOptions.of(ctx.options).config_out or CONFIG_NAME
    return name if os.path.isabs(name) else os.path.join(os.path.dirname(script_path), name)


def ds_config_text(ctx: Context) -> str:
    from migrate.steps.cpu_optimizer import TorchOptimizerOnCpu
    from migrate.steps.deepspeed_engine import EngineConfig

    values = ctx.recorded(EngineConfig)
    options = DeepSpeedOptions.of(ctx.options)
    # mixed precision is DeepSpeed's torch_autocast section, never its fp16/bf16 modes, which cast
    # the weights and leave the inputs fp32 (migrate.steps.engine_calls says why)
    autocast = {"fp16": "float16", "bf16": "bfloat16"}.get(values.precision)
    text = render(
        "deepspeed/ds_config.json.j2",
        micro_batch=values.micro_batch,
        accumulation=values.accumulation,
        clipping=values.clipping,
        autocast=autocast,
        torch_optimizer_on_cpu=TorchOptimizerOnCpu in ctx.records,  # DeepSpeed's guard off only for it
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
    """The config, then the launcher (and the hostfile --hosts asks for), rendered by migrate.launch;
    the launcher passes `--no_local_rank` where a module of the script's folder parses its arguments
    (MIG601)."""
    from migrate.launch import render as render_launcher
    from migrate.launch_plan import LaunchPlan
    from migrate.steps.local_rank_argument import NoLocalRankArgument

    config = Artifact(path=config_path(script_path, ctx), text=ds_config_text(ctx))
    plan = LaunchPlan(target="deepspeed", script=script_path, hosts=DeepSpeedOptions.of(ctx.options).hosts,
                      no_local_rank=NoLocalRankArgument in ctx.records, launcher=launchers.DEEPSPEED)
    return [config, *render_launcher(plan)]


def conversion() -> Conversion:
    from migrate.steps.base import WRAPPER_SAFE, Wrapper
    from migrate.steps.cpu_optimizer import cpu_optimizer
    from migrate.steps.deepspeed_engine import deepspeed_device, deepspeed_engine, epoch_figures, report_placement
    from migrate.steps.engine_calls import engine_calls
    from migrate.steps.functional_data_parallel import functional_data_parallel_in_engine
    from migrate.steps.local_rank_argument import local_rank_argument
    from migrate.steps.rank_divergence import rank_divergent_control
    from migrate.steps.sequence import process_group_steps
    from migrate.steps.trained_models import refuse_unwrappable
    from migrate.steps.zero3_reads import zero3_reads

    # deepspeed.initialize (the deepspeed_engine step) wraps; the engine answers these itself
    engine = Wrapper(code=None, safe=WRAPPER_SAFE | {"backward", "step", "save_checkpoint", "load_checkpoint", "state_dict"},
                     zero3_partitions=True)
    steps = process_group_steps(
        # DeepSpeed on the CPU where the script keeps its model: decided before setup
        before_setup=(refuse_unwrappable, deepspeed_device),
        after_setup=(local_rank_argument,),
        # `data_parallel(model, x, gpus)` -> `model(x)`: the engine drives one GPU
        wrap=(deepspeed_engine, functional_data_parallel_in_engine, cpu_optimizer, rank_divergent_control, engine_calls,
              zero3_reads),
        # DeepSpeed's NCCL group takes CUDA tensors only; gloo (DeepSpeed on the CPU) CPU ones
        after_data=(epoch_figures,),
        after_teardown=(report_placement,),  # MIG130/MIG131, once the file is converted
    )
    return Conversion(steps=steps, artifacts=deepspeed_artifacts, runtime=DEEPSPEED_LAUNCHER, wrapper=engine)


def check_options(given: Options) -> list[OptionProblem]:
    """What no DeepSpeed config can hold, or the launcher cannot start."""
    options = DeepSpeedOptions.of(given)
    found: list[OptionProblem] = []
    if options.zero not in (0, 1, 2, 3):
        found.append(OptionProblem("--zero", f"{options.zero!r}: choose a ZeRO stage from 0 to 3"))
    found += offload_problems(options)
    if options.offload_param != "none" and options.zero != 3:
        found.append(OptionProblem("--offload-param", f"offloading weights needs ZeRO stage 3 (got --zero {options.zero})"))
    if options.offload_optimizer != "none" and options.zero == 0:
        found.append(OptionProblem("--offload-optimizer", "offloading optimizer state needs ZeRO stage 1, 2 or 3"))
    if options.precision not in PRECISIONS:
        found.append(OptionProblem("--bf16/--fp16/--fp32", f"{options.precision!r}: choose auto, fp32, fp16 or bf16"))
    return found + config_out_problems(options.config_out) + hosts_problems(options.hosts)


def own_configs(results: list[FileResult], given: Options,
                convert: Convert) -> tuple[list[FileResult], list[InputError], list[tuple[str, str]]]:
    """Two or more scripts of one folder that would each write its ds_config.json get their own,
    ds_config_<script>.json (converted again with that --config-out), and the run says so: even
    when their settings agree today, a file tuned for one script would change how the other trains.
    `convert` is the caller's migrate.api.migrate_file (this layer never imports the API)."""
    options = DeepSpeedOptions.of(given)
    if options.config_out is not None:
        return results, [], []
    writers: dict[str, list[tuple[FileResult, str]]] = {}
    for result in results:
        for artifact in result.artifacts:
            if os.path.basename(artifact.path) == CONFIG_NAME:
                writers.setdefault(os.path.realpath(artifact.path), []).append((result, artifact.text))
    shared = {real: group for real, group in writers.items() if len(group) > 1}
    again = {id(result) for group in shared.values() for result, _ in group}
    notes = [(os.path.join(os.path.dirname(group[0][0].path), CONFIG_NAME),
              f"{len(group)} scripts in this folder would share one DeepSpeed config: each gets its own "
              "ds_config_<script>.json, so that tuning one never changes how the other trains") for group in shared.values()]
    converted: list[FileResult] = []
    errors: list[InputError] = []
    for result in results:
        if id(result) in again:
            stem = os.path.splitext(os.path.basename(result.path))[0]
            outcome = convert(result.path, "deepspeed", dataclasses.replace(options, config_out=f"ds_config_{stem}.json"))
            if isinstance(outcome, InputError):
                errors.append(outcome)
                continue
            result = outcome
        converted.append(result)
    return converted, errors, notes


Zero = Annotated[int, typer.Option("--zero", metavar="0-3", help="ZeRO stage: 0 (plain data parallel), 1 (shard optimizer state), 2 (+ gradients), 3 (+ weights).")]
OffloadOptimizer = Annotated[str, typer.Option("--offload-optimizer", metavar="none|cpu|nvme", help="Keep optimizer state in CPU memory or on NVMe (ZeRO 1-3); torch's Adam/AdamW become DeepSpeedCPUAdam.")]
OffloadParam = Annotated[str, typer.Option("--offload-param", metavar="none|cpu|nvme", help="Keep weights in CPU memory or on NVMe (ZeRO 3 only).")]
NvmePath = Annotated[str, typer.Option("--nvme-path", metavar="PATH", help="Folder on a local NVMe drive, for the nvme offloads.")]
Bf16 = Annotated[bool, typer.Option("--bf16", help="Train in bfloat16 autocast (config torch_autocast, weights stay fp32).")]
Fp16 = Annotated[bool, typer.Option("--fp16", help="Train in float16 autocast with loss scaling (config torch_autocast; ZeRO 1-3: see MIG126).")]
Fp32 = Annotated[bool, typer.Option("--fp32", help="Train in float32 even if the script uses AMP.")]
ConfigOut = Annotated[Optional[str], typer.Option("--config-out", metavar="PATH", help="Where to write the DeepSpeed config, relative to the script's folder (default: ds_config.json beside it).")]
Hosts = Annotated[Optional[str], typer.Option("--hosts", metavar="HOST:GPUS,...", help="Several nodes: write a hostfile and a multi-node launcher. Example: --hosts node1:8,node2:8")]


def command_options(zero: Zero = 2, offload_optimizer: OffloadOptimizer = "none", offload_param: OffloadParam = "none",
                    nvme_path: NvmePath = "/local_nvme", bf16: Bf16 = False, fp16: Fp16 = False, fp32: Fp32 = False,
                    config_out: ConfigOut = None, hosts: Hosts = None) -> DeepSpeedOptions:
    if sum((bf16, fp16, fp32)) > 1:
        raise typer.BadParameter("choose one of --bf16, --fp16, --fp32", param_hint="--bf16/--fp16/--fp32")
    host_list = tuple(h.strip() for h in hosts.split(",") if h.strip()) if hosts else ()
    precision = "bf16" if bf16 else "fp16" if fp16 else "fp32" if fp32 else "auto"
    return DeepSpeedOptions(zero=zero, offload_optimizer=offload_optimizer, offload_param=offload_param,
                            nvme_path=nvme_path, precision=precision, config_out=config_out, hosts=host_list)


DEEPSPEED = Target(
    name="deepspeed",
    framework="DeepSpeed",
    summary="DeepSpeed engine (ZeRO 0-3), launched by the deepspeed launcher.",
    description=(
        "deepspeed.initialize(model=..., optimizer=<your optimizer>) after both exist; engine.backward(loss)\n"
        "and engine.step() replace loss.backward() and optimizer.step(); zero_grad, GradScaler and\n"
        "clip_grad_norm_ go (the engine and config do them); gradient accumulation and clipping move into\n"
        "ds_config.json, which the script reads and then overwrites with its own values (batch size,\n"
        "accumulation steps...) so the two never disagree; the engine steps where the script's own\n"
        "accumulation test says. Also accepts --local_rank from the launcher,\n"
        "gathers weights on every rank before a rank-0 torch.save, and writes run_<script>_deepspeed.sh.\n"
        "Precision follows the script (GradScaler: fp16; bfloat16 autocast: bf16) unless you choose one,\n"
        "as DeepSpeed's torch_autocast (weights stay fp32, the forward runs under autocast)."
    ),
    example="migrate to-deepspeed --zero 3 --offload-param cpu train.py > ds.patch",
    conversion=conversion,
    command_options=command_options,
    options_class=DeepSpeedOptions,
    check_options=check_options,
    markers={"deepspeed.initialize": "DeepSpeed"},
    replaces=frozenset({"nn.DataParallel"}),
    launcher=launchers.DEEPSPEED,
    signs=("deepspeed.initialize",),
    verify_options=lambda zero, compare: DeepSpeedOptions(zero=zero),
    pretend_gpu_refusal=("DeepSpeed's CPU accelerator keeps the model on the CPU, so batches sent to the pretend "
                         "GPU would be false alarms: use --target ddp, fsdp or horovod"),
    settle=own_configs,
    codes={
        NO_LOCAL_RANK: (Severity.WARNING, "DeepSpeed: a module of the script's folder that the conversion does not edit "
                        "parses the command line without a --local_rank option: the launcher passes --no_local_rank "
                        "and the script takes its local rank from LOCAL_RANK; a hand-made deepspeed command needs "
                        "--no_local_rank too"),
    },
)
