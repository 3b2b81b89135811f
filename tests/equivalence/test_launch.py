"""Launchers from `migrate launch`, run for real: torchrun on two nodes (this machine started twice),
and a SLURM job submitted with `sbatch --wait` to a one-node cluster started for the test. Each
trains a converted sample to the weights of the one-process original. scripts/test runs one launcher
of each kind; the static rendezvous and the --hostfile launcher run with scripts/test --full."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from tests.equivalence.harness import (BIN, EXIT_ABORT, LAUNCH_TRIES, assert_same_weights, convert, environment,
                                       flatten, full_unless, run_python)
from migrate import DdpOptions, DeepSpeedOptions, HorovodOptions, Options
from tests import progress
from tests.slurm_cluster import one_node_cluster

pytestmark = pytest.mark.slow

PER_PROCESS_BATCH = 8
ARGS = ["--epochs", "2", "--no-shuffle"]
SHARED_MEMORY = Path("/dev/shm")


def migrate_launch(*args: str, cwd: Path) -> None:
    done = subprocess.run([str(BIN / "migrate"), "launch", *args], cwd=cwd, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr


def reference(folder: Path, original: Path, processes: int) -> dict[str, torch.Tensor]:
    args = [*ARGS, "--batch-size", str(processes * PER_PROCESS_BATCH)]
    return run_python(original, args, folder / "original.pt").weights


def saved(path: Path) -> dict[str, torch.Tensor]:
    return flatten(torch.load(path, map_location="cpu", weights_only=True))


@pytest.mark.parametrize("rendezvous", ["c10d", pytest.param("static", marks=pytest.mark.full)])
def test_two_nodes_train_like_one_process(rendezvous: str, tmp_path: Path) -> None:
    """The multi-node launcher started twice on 127.0.0.1 (node ranks 0 and 1, one process each)."""
    original, converted = convert("mlp_regression", "ddp", tmp_path)
    migrate_launch("ddp", converted.name, "--nnodes", "2", "--nproc-per-node", "1", "--rdzv-backend", rendezvous,
                   "--master-addr", "127.0.0.1", cwd=tmp_path)
    launcher = tmp_path / "run_converted_ddp_2nodes.sh"
    save = tmp_path / "two_nodes.pt"
    env = environment()
    env["PATH"] = f"{BIN}{os.pathsep}{env['PATH']}"
    command = ["bash", str(launcher), *ARGS, "--batch-size", str(PER_PROCESS_BATCH), "--save", str(save)]
    for _ in range(LAUNCH_TRIES):
        nodes = progress.run_together([progress.Launch(command, {**env, "NODE_RANK": str(rank)}, tmp_path)
                                       for rank in (0, 1)])
        outputs = [(node.stdout, node.stderr) for node in nodes]
        if all(node.returncode == 0 for node in nodes) or EXIT_ABORT not in repr(outputs):
            break
    assert [node.returncode for node in nodes] == [0, 0], outputs
    assert_same_weights(saved(save), reference(tmp_path, original, 2))


# the conversion each SLURM launcher runs; Horovod without its lr scaling, to compare with one process
SLURM_TARGETS: dict[str, Options] = {"ddp": DdpOptions(), "deepspeed": DeepSpeedOptions(),
                                     "horovod": HorovodOptions(scale_lr=False)}


# DeepSpeed's job runs torchrun under srun as ddp's does: scripts/test --full
@pytest.mark.parametrize("target", full_unless(list(SLURM_TARGETS), {"ddp", "horovod"}))
def test_a_slurm_job_trains_like_one_process(target: str, tmp_path: Path) -> None:
    """`migrate launch TARGET --scheduler slurm` (a CPU job: 2 processes, no GPU requested) submitted
    with `sbatch --wait` from the script's folder: srun starts torchrun (ddp, deepspeed) or the job
    runs horovodrun, the job ends, and the weights are the one-process original's."""
    project = tmp_path / "project"
    project.mkdir()
    original, converted = convert("mlp_regression", target, project, SLURM_TARGETS[target])
    migrate_launch(target, converted.name, "--scheduler", "slurm", "--nproc-per-node", "2", "--gpus-per-node", "0",
                   cwd=project)
    launcher = project / f"run_converted_{target}_slurm.sh"
    save = project / "slurm.pt"
    log = project / "job.out"
    buffers = set(SHARED_MEMORY.glob("deepspeed_allreduce_buffer_*"))
    try:
        with one_node_cluster(tmp_path / "cluster") as env:
            job_env = {**environment(), "SLURM_CONF": env["SLURM_CONF"], "PYTHON": sys.executable,
                       "DS_ACCELERATOR": "cpu", "PATH": f"{BIN}{os.pathsep}{os.environ['PATH']}"}
            for _ in range(LAUNCH_TRIES):
                # the job runs under slurmd, not under sbatch: its log is its output
                job = progress.run(["sbatch", "--wait", "--output", str(log), str(launcher), *ARGS,
                                    "--batch-size", str(PER_PROCESS_BATCH), "--save", str(save)],
                                   cwd=project, env=job_env, watch=[log])
                if job.returncode == 0 or EXIT_ABORT not in log.read_text():
                    break
    finally:  # DeepSpeed's CPU all-reduce leaves shared-memory buffers behind
        for buffer in set(SHARED_MEMORY.glob("deepspeed_allreduce_buffer_*")) - buffers:
            buffer.unlink(missing_ok=True)
    assert job.returncode == 0, job.stdout + job.stderr + log.read_text()[-4000:]
    assert_same_weights(saved(save), reference(project, original, 2))


HOST_LISTS = {
    "deepspeed-hosts": ("deepspeed", ["--hosts", "localhost:2"]),
    "horovod-hosts": ("horovod", ["--hosts", "localhost:2"]),
    "horovod-hostfile": ("horovod", ["--hostfile", "hosts"]),
}


# the --hostfile launchers, and horovodrun's -H (its one-node launcher trains in test_horovod.py):
# scripts/test --full
@pytest.mark.parametrize("case", full_unless(list(HOST_LISTS), {"deepspeed-hosts"}))
def test_a_host_list_launcher_trains_on_one_node(case: str, tmp_path: Path) -> None:
    """The DeepSpeed hostfile launcher (NODE_RANK=0: this node starts its own processes, no ssh) and
    horovodrun's -H and --hostfile launchers, for one host with 2 slots: the original's weights."""
    target, options = HOST_LISTS[case]
    original, converted = convert("mlp_regression", target, tmp_path, SLURM_TARGETS[target])
    (tmp_path / "hosts").write_text("localhost slots=2\n")
    migrate_launch(target, converted.name, *options, cwd=tmp_path)
    save = tmp_path / "hosts.pt"
    env = {**environment(), "NODE_RANK": "0", "DS_ACCELERATOR": "cpu", "PYTHON": sys.executable,
           "PATH": f"{BIN}{os.pathsep}{os.environ['PATH']}"}
    buffers = set(SHARED_MEMORY.glob("deepspeed_allreduce_buffer_*"))
    try:
        for _ in range(LAUNCH_TRIES):
            done = progress.run(["bash", str(tmp_path / f"run_converted_{target}_hosts.sh"), *ARGS, "--batch-size",
                                 str(PER_PROCESS_BATCH), "--save", str(save)], cwd=tmp_path, env=env)
            if done.returncode == 0 or EXIT_ABORT not in done.stdout + done.stderr:
                break
    finally:
        for buffer in set(SHARED_MEMORY.glob("deepspeed_allreduce_buffer_*")) - buffers:
            buffer.unlink(missing_ok=True)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
    assert_same_weights(saved(save), reference(tmp_path, original, 2))


def test_a_slurm_job_submitted_from_elsewhere_says_where_to_submit(tmp_path: Path) -> None:
    """Submitted from another folder the job cannot find the script: it fails at once and says why."""
    project = tmp_path / "project"
    project.mkdir()
    convert("mlp_regression", "ddp", project)
    migrate_launch("ddp", "converted.py", "--scheduler", "slurm", "--nproc-per-node", "1", "--gpus-per-node", "0",
                   cwd=project)
    with one_node_cluster(tmp_path / "cluster") as env:
        job = progress.run(["sbatch", "--wait", "--output", str(tmp_path / "job.out"),
                            str(project / "run_converted_ddp_slurm.sh")],
                           cwd=tmp_path, env={**env, "PATH": f"{BIN}{os.pathsep}{os.environ['PATH']}"},
                           watch=[tmp_path / "job.out"])
    assert job.returncode != 0
    said = (tmp_path / "job.out").read_text()
    assert f"converted.py is not in {tmp_path}: submit the job from the folder that holds it" in said, said
