"""What starts a converted script: each launcher's facts, declared once, as data.

A target names the `Launcher` that runs its converted script (`Target.launcher`; to-dp has none).
migrate.launch renders and checks launch plans from these facts, `migrate verify` builds its
launch command with `verify_command`, and `migrate launch --list` and the pull-request text say
what each launcher is from `said`: none of them asks which target it is, so a new target on an
existing launcher declares nothing here, and a new launcher is one more value of this class.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass

SCHEDULER_NAMES = ("none", "slurm", "kubernetes")


@dataclass(frozen=True)
class VerifyLaunch:
    """What `migrate verify` hands a launcher to start `nproc` ranks of a Python module."""

    python: str  # the interpreter (its folder holds the launchers' own executables)
    nproc: int
    module: str  # run as `python -m module args...` on each rank
    args: tuple[str, ...]
    port: int  # a free port on this machine, for launchers that take one
    logs: str  # a folder for the launcher's own logs, inside verify's work folder
    no_local_rank: bool = False  # the script parses no --local_rank (see Launcher.no_local_rank)

    def executable(self, name: str) -> str:
        """A launcher's program installed beside the interpreter."""
        return os.path.join(os.path.dirname(self.python), name)


@dataclass(frozen=True)
class Launcher:
    name: str  # the program, as the user types it
    schedulers: tuple[str, ...]  # of SCHEDULER_NAMES: what a launcher file can be written for
    said: Mapping[str, str]  # scheduler -> what the launcher file is, for `migrate launch --list`
    verify_command: Callable[[VerifyLaunch], list[str]]  # one node, nproc ranks, on this machine
    # several nodes: "rendezvous" (the launcher runs on each node, --nnodes N meets at MASTER_ADDR)
    # or "hosts" (it runs on the first node and reaches the others through a host list)
    several_nodes: str = "rendezvous"
    picks_ports: bool = False  # it chooses its rendezvous ports itself: --master-port is refused
    hostfile_comments: bool = True  # its hostfile reader skips blank lines and `#` comments
    hostfile_for_hosts: bool = False  # --hosts is written as a hostfile beside the launcher
    joins_remote_command: bool = False  # the remote command is one shell line, words joined unquoted (pdsh)
    no_local_rank: bool = False  # it can be told to pass the script no --local_rank argument
    # on a CPU it runs through an op it compiles on first use and shared-memory buffers it leaves behind
    # (verify builds the op before its clock starts and removes the buffers after the run)
    builds_cpu_op: bool = False
    several_nodes_example: str = "--nnodes 2 --nproc-per-node 8"  # `migrate launch` options for two nodes

    @property
    def by_hosts(self) -> bool:
        return self.several_nodes == "hosts"


def _torchrun_verify(run: VerifyLaunch) -> list[str]:
    return [run.python, "-m", "torch.distributed.run", "--standalone", f"--nproc-per-node={run.nproc}",
            f"--log-dir={run.logs}", "--module", run.module, *run.args]


def _deepspeed_verify(run: VerifyLaunch) -> list[str]:
    return [run.executable("deepspeed"), "--num_gpus", str(run.nproc),
            *(["--no_local_rank"] if run.no_local_rank else []),
            "--master_port", str(run.port), "--module", run.module, *run.args]


def _horovodrun_verify(run: VerifyLaunch) -> list[str]:
    return [run.executable("horovodrun"), "-np", str(run.nproc), "-H", f"localhost:{run.nproc}",
            run.python, "-m", run.module, *run.args]


TORCHRUN = Launcher(
    name="torchrun",
    schedulers=("none", "slurm", "kubernetes"),
    said={
        "none": "torchrun: one node (--standalone), or several (c10d rendezvous; --nnodes)",
        "slurm": "sbatch script: srun starts one torchrun per node (c10d on the first node)",
        "kubernetes": "Kubeflow PyTorchJob manifest (YAML): torchrun in each pod",
    },
    verify_command=_torchrun_verify,
)

DEEPSPEED = Launcher(
    name="deepspeed",
    schedulers=("none", "slurm"),
    said={
        "none": "the deepspeed launcher: one node, or a hostfile (--hosts / --hostfile)",
        "slurm": "sbatch script: srun starts one torchrun per node; deepspeed.init_distributed reads it",
    },
    verify_command=_deepspeed_verify,
    several_nodes="hosts",
    hostfile_for_hosts=True,
    joins_remote_command=True,
    no_local_rank=True,
    builds_cpu_op=True,
    several_nodes_example="--hosts node1:8,node2:8",
)

HOROVODRUN = Launcher(
    name="horovodrun",
    schedulers=("none", "slurm"),
    said={
        "none": "horovodrun: one node, or -H hosts (--hosts) / a hostfile (--hostfile)",
        "slurm": "sbatch script: horovodrun on the job's nodes (over ssh: passwordless ssh between them)",
    },
    verify_command=_horovodrun_verify,
    several_nodes="hosts",
    picks_ports=True,
    hostfile_comments=False,
    several_nodes_example="--hosts node1:8,node2:8",
)

LAUNCHERS = (TORCHRUN, DEEPSPEED, HOROVODRUN)
