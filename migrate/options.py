"""The one place options are checked, for the command line and the library alike: a combination
the CLI refuses, `migrate_source(..., DeepSpeedOptions(...))` refuses with the same words, and
another target's options class (migrate.target_options) is refused rather than its fields silently
ignored.

Each problem names the command-line option it is about, so the CLI can show it as typer does.
The checks are handed the target (its options class, its own checks: `OptionsUser`, which
migrate.targets.base.Target is); this module never looks a target up by name.
`migrate launch` shares the value checks here (process and host counts, a pod's memory) and the
resources a Kubernetes pod requests by default, which its --help states.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from migrate.target_options import DeepSpeedOptions, Options, ProcessOptions
from migrate.sources import unsafe_name_reason

MAX_PROCESSES = 4096  # per node (and a hostfile's slots): beyond any machine there is
HOST = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,252}(:[1-9][0-9]{0,3})?")  # whole strings: fullmatch
OFFLOAD_DEVICES = ("none", "cpu", "nvme")
# a Kubernetes quantity of memory: a whole number and a binary (Ki..Ti) or decimal (k..T) unit
MEMORY = re.compile(r"[1-9][0-9]{0,6}(Ki|Mi|Gi|Ti|k|M|G|T)")
# what a Kubernetes pod requests per process when --cpus-per-node / --memory-per-node are not given:
# the process itself and a few DataLoader workers
POD_CPUS_PER_PROCESS = 4
POD_MEMORY_GI_PER_PROCESS = 16


@dataclass(frozen=True)
class OptionProblem:
    """Why one option (or a pair) cannot be used: `flag` as the command line spells it."""

    flag: str
    message: str

    def __str__(self) -> str:
        return f"{self.flag}: {self.message}"


class OptionsError(ValueError):
    """Raised by the library for options the command line would refuse."""


class OptionsUser(Protocol):
    """What the checks read of a target (migrate.targets.base.Target has all of it)."""

    @property
    def name(self) -> str: ...

    @property
    def options_class(self) -> type[Options]: ...  # the class of the options it takes (migrate.target_options)

    @property
    def check_options(self) -> Callable[[Options], list[OptionProblem]] | None: ...  # its own checks


def problems(spec: OptionsUser, options: Options) -> list[OptionProblem]:
    """Everything wrong with `options` for the target `spec`, in the order a user would fix them:
    another target's options class (alone: its fields mean nothing here), then the checks the
    class's fields share with other targets', then the target's own checks."""
    if type(options) is not spec.options_class:  # exactly: to-dp's Options is every class's base
        return [OptionProblem("options", f"to-{spec.name} takes {_spelled(spec.options_class)}, "
                              f"not {type(options).__name__}")]
    found: list[OptionProblem] = []
    if isinstance(options, ProcessOptions):
        found += process_problems(options)
    if isinstance(options, DeepSpeedOptions):
        found += nvme_path_problems(options.nvme_path)
    if spec.check_options is not None:
        found += spec.check_options(options)
    return found


def process_problems(options: ProcessOptions) -> list[OptionProblem]:
    """The checks of the options the one-process-per-GPU targets share."""
    found = nproc_problems(options.nproc_per_node)
    if options.keep_global_batch and options.scale_lr:
        found.append(OptionProblem("--keep-global-batch/--scale-lr", "--scale-lr raises the learning rate for a "
                                   "global batch that grows with the world size, and --keep-global-batch keeps the "
                                   "global batch as it is: choose one"))
    return found


def check(spec: OptionsUser, options: Options) -> None:
    """Raise OptionsError with the first problem, as the command line words it."""
    found = problems(spec, options)
    if found:
        raise OptionsError(str(found[0]))


def _spelled(options_class: type[Options]) -> str:
    """How a user imports the class: `migrate.DdpOptions` for the package's own."""
    module = "migrate" if options_class.__module__ == "migrate.target_options" else options_class.__module__
    return f"{module}.{options_class.__qualname__}"


def nproc_problems(value: str) -> list[OptionProblem]:
    if value in ("auto", "gpu") or (value.isascii() and value.isdigit() and len(value) <= 4 and 0 < int(value) <= MAX_PROCESSES):
        return []
    return [OptionProblem("--nproc-per-node", f"{value[:40]!r}: give a number from 1 to {MAX_PROCESSES}, 'gpu' or 'auto'")]


def offload_problems(options: DeepSpeedOptions) -> list[OptionProblem]:
    return [OptionProblem(flag, f"{value!r}: choose none, cpu or nvme")
            for flag, value in (("--offload-optimizer", options.offload_optimizer), ("--offload-param", options.offload_param))
            if value not in OFFLOAD_DEVICES]


def host_slots(hosts: tuple[str, ...]) -> list[tuple[str, int]]:
    """`("node1:8", "node2")` -> `[("node1", 8), ("node2", 1)]`: each host and its process count."""
    return [(h.split(":")[0], int(h.split(":")[1]) if ":" in h else 1) for h in hosts]


def hosts_problems(hosts: tuple[str, ...]) -> list[OptionProblem]:
    found: list[OptionProblem] = []
    for host in hosts:
        if not HOST.fullmatch(host):
            found.append(OptionProblem("--hosts", f"{host[:60]!r}: write HOST or HOST:GPUS (letters, digits, . _ -; "
                                       f"GPUS from 1 to {MAX_PROCESSES})"))
        elif ":" in host and int(host.split(":")[1]) > MAX_PROCESSES:
            found.append(OptionProblem("--hosts", f"{host!r}: at most {MAX_PROCESSES} GPUs per host"))
    if not found:  # DeepSpeed refuses a hostfile that names a host twice
        names = [host for host, _slots in host_slots(hosts)]
        found += [OptionProblem("--hosts", f"{name} is named twice; give each host once")
                  for name in sorted({n for n in names if names.count(n) > 1})]
    return found


def memory_problems(value: str) -> list[OptionProblem]:
    """--memory-per-node as a Kubernetes manifest writes it (`64Gi`): checked whole (fullmatch)."""
    if MEMORY.fullmatch(value):
        return []
    return [OptionProblem("--memory-per-node", f"{value[:40]!r}: write a whole number from 1 and a unit, Ki, Mi, "
                          "Gi or Ti (or k, M, G, T: powers of 1000). Example: --memory-per-node 64Gi")]


def config_out_problems(value: str | None) -> list[OptionProblem]:
    """--config-out is written into the script, the launcher and a comment: a plain file name."""
    if value is None:
        return []
    reason = unsafe_name_reason(value) if value.strip() else "is empty"
    if reason is None and (value.endswith(("/", os.sep)) or os.path.isdir(value)):
        reason = "is a folder; give a file name such as ds_config.json"
    return [] if reason is None else [OptionProblem("--config-out", f"{ascii(value)[1:-1]!r} {reason}")]


def nvme_path_problems(value: str) -> list[OptionProblem]:
    """--nvme-path is a folder DeepSpeed opens: no NUL, control character or undecodable byte in it."""
    reason = unsafe_name_reason(value) if value.strip() else "is empty"
    return [] if reason is None else [OptionProblem("--nvme-path", f"{ascii(value[:60])}: the folder name {reason}")]
