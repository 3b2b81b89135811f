"""The registry of targets: one line each. The CLI's commands, `--help`, the frameworks recognised
as "already distributed", the options each command takes and the README's table of targets all
derive from this list, and each target's own finding codes are declared from here to
migrate.findings (which never looks the registry up). A planned target is listed (and refused)
until it is built.
"""

from __future__ import annotations

from migrate.findings import declare
from migrate.targets.base import Target
from migrate.targets.ddp import DDP
from migrate.targets.deepspeed import DEEPSPEED
from migrate.targets.dp import DP
from migrate.targets.fsdp import FSDP
from migrate.targets.horovod import HOROVOD_TARGET

REGISTRY: list[Target] = []


def register(target: Target) -> None:
    """Add a target: its command, its launcher and `verify` follow from the registry, and its own
    finding codes are declared to migrate.findings. Each line below is a target."""
    REGISTRY.append(target)
    declare(target.codes)


register(DDP)
register(DEEPSPEED)
register(FSDP)
register(HOROVOD_TARGET)
register(DP)

# Frameworks no target converts to, recognised so that a script on one is left alone.
OTHER_FRAMEWORKS = {"accelerate.Accelerator": "Accelerate"}


def targets() -> dict[str, Target]:
    """Every listed target by CLI name, planned ones included (`.available` tells them apart)."""
    return {target.name: target for target in REGISTRY}


def available() -> dict[str, Target]:
    return {name: target for name, target in targets().items() if target.available}


def framework_markers() -> dict[str, str]:
    """Qualified call name -> the framework a script that calls it is on."""
    markers: dict[str, str] = {}
    for target in REGISTRY:
        markers.update(target.markers)
    markers.update(OTHER_FRAMEWORKS)
    return markers


def markdown_table() -> str:
    """The README's table of targets, as the registry has them (a test keeps the README in step)."""
    rows = ["| command | what it converts to | launcher | its own options |", "|---|---|---|---|"]
    for target in REGISTRY:
        options = ", ".join(f"`{flag}`" for flag in command_flags(target)) or "none"
        launcher = target.launcher.name if target.launcher else ("`python` (one process)" if target.available else "")
        summary = target.summary if target.available else f"{target.framework} (planned)"
        rows.append(f"| `migrate to-{target.name}` | {summary} | {launcher} | {options if target.available else ''} |")
    return "\n".join(rows) + "\n"


def command_flags(target: Target) -> list[str]:
    """The target's own command-line flags, in the order --help lists them."""
    import inspect

    if target.command_options is None:
        return []
    flags: list[str] = []
    for parameter in inspect.signature(target.command_options, eval_str=True).parameters.values():
        for info in getattr(parameter.annotation, "__metadata__", ()):
            # in `Annotated[..., typer.Option("--zero")]` typer keeps the first name as `default`
            names = [d for d in (getattr(info, "default", None), *(getattr(info, "param_decls", None) or ())) if isinstance(d, str)]
            flags.append(names[0] if names else "--" + parameter.name.replace("_", "-"))
    return flags
