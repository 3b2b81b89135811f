"""A launch plan and the names it gives: what a launcher starts and where (`LaunchPlan`), the file it
is written to, the job's name, the GPUs a node requests, and the header that says how to re-make
it. Shared by migrate.launch (checks and shell launchers) and migrate.kubernetes (the manifest),
below both. A plan carries its `Launcher` (migrate.launchers): what the target is called only
names files and the re-make command; what the launcher can do comes from the launcher.
"""

from __future__ import annotations

import os
import re
import shlex
from dataclasses import dataclass, field

from migrate.launchers import Launcher

JOB_NAME_MAX = 47  # + "-worker-" + up to 8 digits: a DNS-1035 label (63)


@dataclass(frozen=True)
class LaunchPlan:
    """What a launcher starts and where. Defaults: one node, this machine, torchrun's `auto`."""

    target: str  # the target's name: ddp | fsdp | deepspeed | horovod (files and the re-make command)
    script: str  # the training script, as the user names it
    launcher: Launcher = field(kw_only=True)  # what starts it (the target's Target.launcher)
    scheduler: str = "none"  # none | slurm | kubernetes
    nnodes: int = 1
    nproc_per_node: str = "auto"  # a number, or torchrun's "auto" / "gpu"
    master_addr: str | None = None  # several nodes: the first node's address (default: from MASTER_ADDR)
    master_port: int | None = None  # None: MASTER_PORT when set, else 29500 (one torchrun node: a free
    # port; SLURM: one derived from the job id)
    hosts: tuple[str, ...] = ()  # "host:slots": DeepSpeed's hostfile, horovodrun's -H
    hostfile: str | None = None  # an existing hostfile (`host slots=N` lines), DeepSpeed and Horovod
    rdzv_backend: str = "c10d"  # torchrun on several nodes: c10d (ranks given at the rendezvous) or static (NODE_RANK)
    script_args: tuple[str, ...] = ()
    out: str | None = None  # the launcher's path (default: beside the script, named by `default_out`)
    partition: str | None = None  # SLURM
    time: str | None = None  # SLURM time limit
    gpus_per_node: int | None = None  # SLURM and Kubernetes requests; None: one per process
    cpus_per_node: int | None = None  # SLURM and Kubernetes; None: SLURM the whole node, Kubernetes POD_CPUS_PER_PROCESS each
    memory_per_node: str | None = None  # Kubernetes, as it writes memory ("64Gi"); None: POD_MEMORY_GI_PER_PROCESS each
    image: str | None = None  # Kubernetes: the container image holding the script
    no_local_rank: bool = False  # the launcher passes the script no --local_rank (LOCAL_RANK only; Launcher.no_local_rank)


def default_out(plan: LaunchPlan) -> str:
    """run_<stem>_<target>.sh beside the script, the name `to-<target>` writes for one node; several
    nodes (_<N>nodes, _hosts), SLURM and Kubernetes get names of their own, so no launcher replaces another."""
    if plan.scheduler == "kubernetes":
        folder, name = os.path.split(plan.script)
        return os.path.join(folder, f"{os.path.splitext(name)[0]}_{plan.target}_pytorchjob.yaml")
    suffix = "_slurm" if plan.scheduler == "slurm" else ""
    if plan.scheduler == "none" and plan.nnodes > 1 and not plan.launcher.by_hosts:
        suffix = f"_{plan.nnodes}nodes"
    if plan.hosts or plan.hostfile:
        suffix = "_hosts"
    return beside(plan.script, plan.target, suffix)


def beside(script: str, target: str, suffix: str = "") -> str:
    """run_<stem>_<target><suffix>.sh beside the script (no suffix: the one-node launcher's name)."""
    folder, name = os.path.split(script)
    return os.path.join(folder, f"run_{os.path.splitext(name)[0]}_{target}{suffix}.sh")


def out_path(plan: LaunchPlan) -> str:
    return plan.out if plan.out is not None else default_out(plan)

def not_an_option(path: str) -> str:
    """A relative path that starts with `-`, as ./-name: a command line never reads it as an option."""
    return f"./{path}" if path.startswith("-") else path

def gpus_per_node(plan: LaunchPlan) -> int:
    """What a SLURM or Kubernetes job requests per node: one GPU per process unless told."""
    if plan.gpus_per_node is not None:
        return plan.gpus_per_node
    return int(plan.nproc_per_node) if plan.nproc_per_node.isdigit() else 0


def job_name(plan: LaunchPlan) -> str:
    """<stem>-<target> as a Kubernetes object name must be (a DNS-1035 label: lower-case letters,
    digits and -, starting with a letter): also the SLURM job name and torchrun's rendezvous id."""
    stem = os.path.splitext(os.path.basename(plan.script))[0]
    name = re.sub(r"[^a-z0-9-]+", "-", f"{stem}-{plan.target}".lower()).strip("-")
    if not name[:1].isalpha():
        name = f"job-{name}"
    if len(name) <= JOB_NAME_MAX:
        return name
    # the operator names each pod's Service <job>-worker-<i>, itself at most 63 characters
    return f"{name[:JOB_NAME_MAX - len(plan.target) - 1].rstrip('-')}-{plan.target}"


# ---------------------------------------------------------------------------------------------
# the header: how the file was made and how to re-make it


def header_lines(plan: LaunchPlan) -> list[str]:
    """Comment lines (without `# `) every launcher starts with. A shell launcher finds the script from
    its own folder, and is re-made there; a manifest names the script as `migrate launch` was given
    it (its path in the image), and is re-made where it was made."""
    where = "in the folder it was made in" if plan.scheduler == "kubernetes" else "in this file's folder"
    return [f"Written by torch-migrate; re-make it ({where}) with:", f"  {remake_command(plan)}"]


def script_as_given(plan: LaunchPlan) -> str:
    return not_an_option(os.path.normpath(plan.script))


def remake_command(plan: LaunchPlan) -> str:
    """The `migrate launch` command line that renders this file again (where header_lines says)."""
    folder = os.path.dirname(out_path(plan)) or "."
    as_given = plan.scheduler == "kubernetes"
    script = script_as_given(plan) if as_given else not_an_option(os.path.relpath(plan.script, folder))
    words = ["migrate", "launch", plan.target, script]
    defaults = LaunchPlan(target=plan.target, script=plan.script, launcher=plan.launcher)
    for flag, name in (("--scheduler", "scheduler"), ("--nnodes", "nnodes"), ("--nproc-per-node", "nproc_per_node"),
                       ("--master-addr", "master_addr"), ("--master-port", "master_port"),
                       ("--rdzv-backend", "rdzv_backend"), ("--partition", "partition"), ("--time", "time"),
                       ("--gpus-per-node", "gpus_per_node"), ("--cpus-per-node", "cpus_per_node"),
                       ("--memory-per-node", "memory_per_node"), ("--image", "image")):
        value = getattr(plan, name)
        if value != getattr(defaults, name):
            words += [flag, str(value)]
    if plan.no_local_rank:
        words.append("--no-local-rank")
    if plan.hosts:
        words += ["--hosts", ",".join(plan.hosts)]
    if plan.hostfile:
        words += ["--hostfile", not_an_option(os.path.relpath(plan.hostfile, folder))]
    if plan.out is not None:
        words += ["--out", not_an_option(os.path.normpath(plan.out) if as_given else os.path.basename(plan.out))]
    if plan.script_args:
        words += ["--", *plan.script_args]
    return " ".join(_shell_word(word) for word in words)


def _shell_word(word: str) -> str:
    """A shell word that stays on one comment line: bash's $'...' for a word with control characters."""
    if word.isprintable():
        return shlex.quote(word)
    escaped = word.encode("unicode_escape").decode("ascii").replace("'", "\\'")
    return f"$'{escaped}'"
