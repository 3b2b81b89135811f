"""What the user asked for on the command line (or handed to the library): one frozen options class
per target, so a target's options cannot hold a field it does not read.

- `Options`: no fields; to-dp's, and the base of the others.
- `ProcessOptions`: what the one-process-per-GPU targets share (processes per node, the global
  batch, the learning rate); `DdpOptions`, `FsdpOptions` and `HorovodOptions` add their own.
- `DeepSpeedOptions`: ZeRO stage, offloads, precision, config file, hosts.

Each field names its command-line flag in its metadata (`flag`), the words the checks
(migrate.options) use. A step shared by several targets reads a field only some classes have through
the helpers below (`zero_stage`, `keeps_global_batch`); a step or launcher of one target reads its
class with `<Class>.of(ctx.options)`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Self


@dataclass(frozen=True)
class Options:
    """The options of a target that takes none (to-dp); the base of every target's class."""

    @classmethod
    def of(cls, options: Options) -> Self:
        """`options` as this class, for a step or launcher of the target that takes it. The checks
        (migrate.options) refuse any other class first, so a mismatch is the tool's own mistake."""
        if not isinstance(options, cls):
            raise TypeError(f"{type(options).__name__} read as {cls.__name__}")
        return options


@dataclass(frozen=True)
class ProcessOptions(Options):
    """What the one-process-per-GPU targets (DDP, FSDP, Horovod) share."""

    # a number, or torchrun's "auto" / "gpu"
    nproc_per_node: str = field(default="auto", metadata={"flag": "--nproc-per-node"})
    keep_global_batch: bool = field(default=False, metadata={"flag": "--keep-global-batch"})
    # None: the target's own default (Horovod scales the lr, the others do not)
    scale_lr: bool | None = field(default=None, metadata={"flag": "--scale-lr"})


@dataclass(frozen=True)
class DdpOptions(ProcessOptions):
    """to-ddp's options."""

    sync_batchnorm: bool = field(default=False, metadata={"flag": "--sync-batchnorm"})


@dataclass(frozen=True)
class FsdpOptions(ProcessOptions):
    """to-fsdp's options."""

    # none | bf16 | fp16: FSDP2's MixedPrecisionPolicy
    mixed_precision: str = field(default="none", metadata={"flag": "--mixed-precision"})
    cpu_offload: bool = field(default=False, metadata={"flag": "--cpu-offload"})  # FSDP2's CPUOffloadPolicy
    # class names sharded one by one (default: the repeated blocks found)
    shard: tuple[str, ...] = field(default=(), metadata={"flag": "--shard"})


@dataclass(frozen=True)
class HorovodOptions(ProcessOptions):
    """to-horovod's options."""

    hosts: tuple[str, ...] = field(default=(), metadata={"flag": "--hosts"})  # "host:slots" entries for horovodrun -H


@dataclass(frozen=True)
class DeepSpeedOptions(Options):
    """to-deepspeed's options."""

    zero: int = field(default=2, metadata={"flag": "--zero"})
    offload_optimizer: str = field(default="none", metadata={"flag": "--offload-optimizer"})  # none | cpu | nvme
    # none | cpu | nvme (ZeRO-3 only)
    offload_param: str = field(default="none", metadata={"flag": "--offload-param"})
    nvme_path: str = field(default="/local_nvme", metadata={"flag": "--nvme-path"})
    # auto (what the script does) | fp32 | fp16 | bf16
    precision: str = field(default="auto", metadata={"flag": "--bf16/--fp16/--fp32"})
    # where ds_config.json goes; default beside the script
    config_out: str | None = field(default=None, metadata={"flag": "--config-out"})
    # "host:slots" entries for a multi-node hostfile
    hosts: tuple[str, ...] = field(default=(), metadata={"flag": "--hosts"})


def zero_stage(options: Options) -> int | None:
    """DeepSpeed's ZeRO stage; None under the other targets, which shard nothing as ZeRO does."""
    return options.zero if isinstance(options, DeepSpeedOptions) else None


def keeps_global_batch(options: Options) -> bool:
    """Whether each DataLoader's batch is divided by the world size (--keep-global-batch): never
    under the targets that do not take the option (DeepSpeed, DataParallel)."""
    return isinstance(options, ProcessOptions) and options.keep_global_batch
