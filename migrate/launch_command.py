"""`migrate launch TARGET SCRIPT`: write the launcher for an (already converted) script, without
touching the script. The options become a migrate.launch.LaunchPlan; what the plan cannot do is a
usage error (exit 2) naming the option; the files are written as `--write` writes (atomically, an
existing different file kept unless --force); `--out -` prints the launcher instead.
"""

from __future__ import annotations

import os
import sys
from typing import TYPE_CHECKING, Annotated, Optional

import typer

from migrate.launchers import Launcher
from migrate.records import Artifact, FileResult, InputError
from migrate.options import POD_CPUS_PER_PROCESS, POD_MEMORY_GI_PER_PROCESS

if TYPE_CHECKING:
    from migrate.launch_plan import LaunchPlan

EXIT_OK, EXIT_BAD_INPUT = 0, 2

Target = Annotated[Optional[str], typer.Argument(metavar="TARGET", hidden=True, show_default=False)]
Script = Annotated[Optional[str], typer.Argument(metavar="SCRIPT", hidden=True, show_default=False)]
ScriptArgs = Annotated[Optional[list[str]], typer.Argument(metavar="[-- SCRIPT_ARGS...]", hidden=True, show_default=False)]
Nnodes = Annotated[int, typer.Option("--nnodes", metavar="N", help="Nodes (machines) the job runs on.")]
Nproc = Annotated[str, typer.Option("--nproc-per-node", metavar="N", help="Processes per node: a number, 'gpu' (one per GPU) or 'auto' (torchrun and horovodrun: one per GPU, on a host without GPUs one per CPU core; the deepspeed launcher: every GPU, on a host without GPUs one per NUMA node). SLURM and Kubernetes need a number.")]
Scheduler = Annotated[str, typer.Option("--scheduler", metavar="none|slurm|kubernetes", help="none: a shell script you run on each node; slurm: an sbatch script; kubernetes: a Kubeflow PyTorchJob manifest (ddp, fsdp).")]
MasterAddr = Annotated[Optional[str], typer.Option("--master-addr", metavar="HOST", help="Several nodes started by hand: the first node's address, the launcher's default for MASTER_ADDR.")]
MasterPort = Annotated[Optional[int], typer.Option("--master-port", metavar="PORT", help="The rendezvous port, the launcher's default for MASTER_PORT (default 29500; one torchrun node: a free port unless MASTER_PORT is set; SLURM: 20000 + the job id mod 20000).")]
Hosts = Annotated[Optional[str], typer.Option("--hosts", metavar="HOST:N,...", help="deepspeed, horovod: the hosts and their process counts (HOST alone: 1; deepspeed: a hostfile is written beside the launcher). Example: --hosts node1:8,node2:8")]
Hostfile = Annotated[Optional[str], typer.Option("--hostfile", metavar="PATH", help="deepspeed, horovod: an existing hostfile of `HOST slots=N` lines.")]
RdzvBackend = Annotated[str, typer.Option("--rdzv-backend", metavar="c10d|static", help="torchrun on several nodes: c10d (the node at MASTER_ADDR hosts the rendezvous, node ranks are given there) or static (each node sets NODE_RANK).")]
Partition = Annotated[Optional[str], typer.Option("--partition", metavar="NAME", help="SLURM: the partition to submit to (default: the cluster's).")]
TimeLimit = Annotated[Optional[str], typer.Option("--time", metavar="LIMIT", help="SLURM: the job's time limit, as sbatch --time takes it. Example: --time 12:00:00")]
CpusPerNode = Annotated[Optional[int], typer.Option("--cpus-per-node", metavar="N", help=f"SLURM, Kubernetes: CPUs the job requests per node, for the processes and their DataLoader workers (default: SLURM: each node whole, #SBATCH --exclusive; Kubernetes: {POD_CPUS_PER_PROCESS} per process). Under SLURM each process gets an equal share as OMP_NUM_THREADS.")]
MemoryPerNode = Annotated[Optional[str], typer.Option("--memory-per-node", metavar="SIZE", help=f"Kubernetes: the memory each pod requests (and is limited to), as Kubernetes writes it (default: {POD_MEMORY_GI_PER_PROCESS}Gi per process). Example: --memory-per-node 64Gi")]
GpusPerNode = Annotated[Optional[int], typer.Option("--gpus-per-node", metavar="N", help="SLURM, Kubernetes: GPUs the job requests per node (default: one per process; 0: a CPU job).")]
Image = Annotated[Optional[str], typer.Option("--image", metavar="IMAGE", help="Kubernetes: the container image that holds the script.")]
Out = Annotated[Optional[str], typer.Option("--out", metavar="PATH", help="Where to write the launcher (default: beside the script, run_<script>_<target>[_<N>nodes|_hosts|_slurm].sh or <script>_<target>_pytorchjob.yaml); '-' prints it, with the script's path as from that default place.")]
NoLocalRank = Annotated[bool, typer.Option("--no-local-rank", help="deepspeed: the launcher passes the script no --local_rank (it reads LOCAL_RANK), for a script whose arguments a module it imports parses (MIG601).")]
Force = Annotated[bool, typer.Option("--force", help="Replace an existing launcher that differs (default: keep it and stop).")]
ListAll = Annotated[bool, typer.Option("--list", help="List every target and scheduler combination, and exit.")]


def launch(target: Target = None, script: Script = None, script_args: ScriptArgs = None, nnodes: Nnodes = 1,
           nproc_per_node: Nproc = "auto", scheduler: Scheduler = "none", master_addr: MasterAddr = None,
           master_port: MasterPort = None, hosts: Hosts = None, hostfile: Hostfile = None,
           rdzv_backend: RdzvBackend = "c10d", partition: Partition = None, time: TimeLimit = None,
           gpus_per_node: GpusPerNode = None, cpus_per_node: CpusPerNode = None,
           memory_per_node: MemoryPerNode = None, image: Image = None, out: Out = None,
           no_local_rank: NoLocalRank = False, force: Force = False, list_all: ListAll = False) -> None:
    """Write the launcher for a converted script: one node, several, SLURM or Kubernetes.
    TARGET: ddp, fsdp, deepspeed or horovod; SCRIPT: the converted script (it is only read);
    SCRIPT_ARGS (after `--`): arguments the launcher always passes it.

    The launcher starts with a comment saying how it was made and the `migrate launch` command that
    re-makes it. `migrate to-<target> --write` writes the one-node launcher the same way.

    Horovod under SLURM: the job's first node runs horovodrun, which reaches the other nodes over
    ssh, so the job's nodes need passwordless ssh between them (ddp, fsdp and deepspeed need none:
    srun starts them).

    \b
    Example:
      migrate launch ddp train.py --nnodes 2 --nproc-per-node 8 --master-addr 10.0.0.1
      migrate launch ddp train.py --scheduler slurm --nnodes 4 --nproc-per-node 8 --time 12:00:00
      migrate launch fsdp train.py --scheduler kubernetes --nnodes 2 --nproc-per-node 8 --image repo/train:1
      migrate launch --list
    """
    from migrate.launch import problems
    from migrate.launch_plan import LaunchPlan

    if list_all:
        _print_list()
        raise typer.Exit(EXIT_OK)
    if hosts is not None and not any(h.strip() for h in hosts.split(",")):
        raise typer.BadParameter(f"{hosts!r} names no host: write HOST:N,HOST:N", param_hint="--hosts")
    if target is None or script is None:
        raise typer.BadParameter("give TARGET and SCRIPT, e.g. `migrate launch ddp train.py` (or --list)",
                                 param_hint="TARGET SCRIPT")
    plan = LaunchPlan(
        target=target, script=script, launcher=_launcher(target), scheduler=scheduler, nnodes=nnodes, nproc_per_node=nproc_per_node,
        master_addr=master_addr, master_port=master_port,
        hosts=tuple(h.strip() for h in hosts.split(",") if h.strip()) if hosts else (), hostfile=hostfile,
        rdzv_backend=rdzv_backend, script_args=tuple(script_args or ()), out=None if out == "-" else out,
        partition=partition, time=time, gpus_per_node=gpus_per_node, cpus_per_node=cpus_per_node,
        memory_per_node=memory_per_node, image=image, no_local_rank=no_local_rank)
    found = problems(plan)
    if found:
        raise typer.BadParameter(found[0].message, param_hint=found[0].flag)
    raise typer.Exit(_write_or_print(plan, to_stdout=out == "-", force=force))


def _write_or_print(plan: LaunchPlan, to_stdout: bool, force: bool) -> int:
    from migrate import writing
    from migrate.launch import render
    from migrate.sources import printable

    if not os.path.isfile(plan.script):
        what = "is a folder" if os.path.isdir(plan.script) else "no such file"
        _error(f"{printable(plan.script)}: {what} (the launcher starts it: give the converted script)")
        return EXIT_BAD_INPUT
    _warn_if_not_converted(plan.script, plan.target)
    artifacts = render(plan)
    if to_stdout:
        if len(artifacts) > 1:
            _error("--out - prints one file, and --hosts also writes a hostfile: give --out PATH")
            return EXIT_BAD_INPUT
        sys.stdout.write(artifacts[0].text)
        return EXIT_OK
    kept = _companion_kept(artifacts[:-1])
    if kept:
        _error(kept)
        return EXIT_BAD_INPUT
    result = FileResult(path=plan.script, old="", new="", artifacts=tuple(artifacts))
    launcher = os.path.realpath(artifacts[-1].path)
    outputs = writing.plan([result], replace=frozenset({launcher} if force else ()), launch=True)
    if outputs.problems:
        for problem in outputs.problems:
            _error(str(problem))
        _error("nothing was written")
        return EXIT_BAD_INPUT
    try:
        writing.write(outputs.batches[0])  # raises InputError only, naming the user's file
    except InputError as error:
        _error(str(error))
        return EXIT_BAD_INPUT
    for artifact in artifacts:
        sys.stdout.write(f"wrote {printable(artifact.path)}\n")
    return EXIT_OK


def _companion_kept(companions: list[Artifact]) -> str | None:
    """A hostfile (--hosts) that exists with other hosts is the user's: --force replaces launchers only."""
    from migrate.sources import printable

    for artifact in companions:
        try:
            with open(artifact.path, encoding="utf-8", errors="replace") as stream:
                if stream.read() == artifact.text:
                    continue
        except FileNotFoundError:
            continue
        except OSError as error:
            return f"{printable(artifact.path)}: cannot read it: {error.strerror}"
        return (f"{printable(artifact.path)}: exists with other hosts than --hosts gives; it is kept (--force replaces "
                f"launchers only): move it away, or launch with --hostfile {printable(artifact.path)} instead; "
                "nothing was written")
    return None


def launchable() -> dict[str, Launcher]:
    """Each available target that has a launcher, with it (the registry says: Target.launcher)."""
    from migrate.targets import available

    return {name: target.launcher for name, target in available().items() if target.launcher is not None}


def _launcher(target: str) -> Launcher:
    """TARGET's launcher, or a usage error naming the targets that have one."""
    from migrate.targets import available

    found = launchable()
    if target not in found:
        without = [name for name, spec in available().items() if spec.launcher is None]
        said = f" ({', '.join(f'to-{name}' for name in without)} runs as plain `python`: it needs no launcher)" if without else ""
        raise typer.BadParameter(f"{target!r}: choose {', '.join(found)}{said}", param_hint="TARGET")
    return found[target]


def combinations() -> list[tuple[str, str, str]]:
    """(target, scheduler, what the launcher is) for every combination `migrate launch` renders."""
    return [(name, scheduler, launcher.said[scheduler])
            for name, launcher in launchable().items() for scheduler in launcher.schedulers]


def _warn_if_not_converted(script: str, target: str) -> None:
    """A note (the launcher is still written) when the script calls none of what the target adds."""
    from migrate.sources import printable

    try:
        with open(script, encoding="utf-8", errors="replace") as stream:
            text = stream.read()
    except OSError:
        return
    from migrate.targets import targets

    signs = targets()[target].signs
    if not any(sign in text for sign in signs):
        named = " or ".join(f"`{sign}`" for sign in signs)
        _error(f"{printable(script)}: note: no {named} in it: it does not look converted to {target}; "
               f"`migrate to-{target} --write {printable(script)}` converts it")


def _print_list() -> None:
    rows = combinations()
    width = max(len(f"{t} --scheduler {s}") for t, s, _ in rows)
    for target, scheduler, said in rows:
        sys.stdout.write(f"{f'{target} --scheduler {scheduler}':<{width}}  {said}\n")


def _error(message: str) -> None:
    sys.stderr.write(f"migrate: {message}\n")
