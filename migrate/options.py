"""The one place options are checked, for the command line and the library alike: a combination
the CLI refuses, `migrate_source(..., Options(...))` refuses with the same words, and an option a
target does not use is refused rather than silently ignored.

Each problem names the command-line option it is about, so the CLI can show it as typer does.
"""

from __future__ import annotations

import dataclasses
import os
import re
from dataclasses import dataclass

from migrate.model import Options
from migrate.sources import unsafe_name_reason

MAX_PROCESSES = 4096  # per node (and a hostfile's slots): beyond any machine there is
HOST = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,252}(:[1-9][0-9]{0,3})?$")
OFFLOAD_DEVICES = ("none", "cpu", "nvme")
PRECISIONS = ("auto", "fp32", "fp16", "bf16")

# Which options each target reads; any other option changed from its default is refused.
USED_BY = {
    "ddp": frozenset({"nproc_per_node", "keep_global_batch", "scale_lr", "sync_batchnorm"}),
    "deepspeed": frozenset({"zero", "offload_optimizer", "offload_param", "nvme_path", "precision", "config_out", "hosts"}),
}
FLAGS = {
    "nproc_per_node": "--nproc-per-node", "keep_global_batch": "--keep-global-batch", "scale_lr": "--scale-lr",
    "sync_batchnorm": "--sync-batchnorm", "zero": "--zero", "offload_optimizer": "--offload-optimizer",
    "offload_param": "--offload-param", "nvme_path": "--nvme-path", "precision": "--bf16/--fp16/--fp32",
    "config_out": "--config-out", "hosts": "--hosts",
}


@dataclass(frozen=True)
class OptionProblem:
    """Why one option (or a pair) cannot be used: `flag` as the command line spells it."""

    flag: str
    message: str

    def __str__(self) -> str:
        return f"{self.flag}: {self.message}"


class OptionsError(ValueError):
    """Raised by the library for options the command line would refuse."""


def problems(target: str, options: Options) -> list[OptionProblem]:
    """Everything wrong with `options` for `target`, in the order a user would fix them."""
    found = _unused(target, options)
    found += _nproc(options.nproc_per_node)
    if options.keep_global_batch and options.scale_lr:
        found.append(OptionProblem("--keep-global-batch/--scale-lr", "--scale-lr raises the learning rate for a "
                                   "global batch that grows with the world size, and --keep-global-batch keeps the "
                                   "global batch as it is: choose one"))
    found += _deepspeed(options)
    return found


def check(target: str, options: Options) -> None:
    """Raise OptionsError with the first problem, as the command line words it."""
    found = problems(target, options)
    if found:
        raise OptionsError(str(found[0]))


def _unused(target: str, options: Options) -> list[OptionProblem]:
    used = USED_BY.get(target, frozenset())
    defaults = Options()
    return [
        OptionProblem(FLAGS[field.name], f"to-{target} does not use this option; it would be ignored")
        for field in dataclasses.fields(Options)
        if field.name not in used and getattr(options, field.name) != getattr(defaults, field.name)
    ]


def _nproc(value: str) -> list[OptionProblem]:
    if value in ("auto", "gpu") or (value.isascii() and value.isdigit() and len(value) <= 4 and 0 < int(value) <= MAX_PROCESSES):
        return []
    return [OptionProblem("--nproc-per-node", f"{value[:40]!r}: give a number from 1 to {MAX_PROCESSES}, 'gpu' or 'auto'")]


def _deepspeed(options: Options) -> list[OptionProblem]:
    found: list[OptionProblem] = []
    if options.zero not in (0, 1, 2, 3):
        found.append(OptionProblem("--zero", f"{options.zero!r}: choose a ZeRO stage from 0 to 3"))
    for flag, value in (("--offload-optimizer", options.offload_optimizer), ("--offload-param", options.offload_param)):
        if value not in OFFLOAD_DEVICES:
            found.append(OptionProblem(flag, f"{value!r}: choose none, cpu or nvme"))
    if options.offload_param != "none" and options.zero != 3:
        found.append(OptionProblem("--offload-param", f"offloading weights needs ZeRO stage 3 (got --zero {options.zero})"))
    if options.offload_optimizer != "none" and options.zero == 0:
        found.append(OptionProblem("--offload-optimizer", "offloading optimizer state needs ZeRO stage 1, 2 or 3"))
    if options.precision not in PRECISIONS:
        found.append(OptionProblem("--bf16/--fp16/--fp32", f"{options.precision!r}: choose auto, fp32, fp16 or bf16"))
    found += _config_out(options.config_out)
    for host in options.hosts:
        if not HOST.match(host):
            found.append(OptionProblem("--hosts", f"{host[:60]!r}: write HOST or HOST:GPUS (letters, digits, . _ -; "
                                       f"GPUS from 1 to {MAX_PROCESSES})"))
        elif ":" in host and int(host.split(":")[1]) > MAX_PROCESSES:
            found.append(OptionProblem("--hosts", f"{host!r}: at most {MAX_PROCESSES} GPUs per host"))
    return found


def _config_out(value: str | None) -> list[OptionProblem]:
    """--config-out is written into the script, the launcher and a comment: a plain file name."""
    if value is None:
        return []
    reason = unsafe_name_reason(value) if value.strip() else "is empty"
    if reason is None and (value.endswith(("/", os.sep)) or os.path.isdir(value)):
        reason = "is a folder; give a file name such as ds_config.json"
    return [] if reason is None else [OptionProblem("--config-out", f"{ascii(value)[1:-1]!r} {reason}")]
