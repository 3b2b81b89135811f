"""What a SLURM job or a Kubernetes pod asks of its node: SLURM takes each node whole unless
--cpus-per-node gives a count (never one CPU per process), each process gets its share of the CPUs
as OMP_NUM_THREADS; a pod requests CPUs and memory (defaults stated in the manifest and in --help),
GPUs only when asked; Horovod's SLURM job says it needs ssh between the nodes."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from migrate.launch import LaunchPlan, problems, remake_command, render
from migrate.launch_command import launchable
from migrate.options import POD_CPUS_PER_PROCESS, POD_MEMORY_GI_PER_PROCESS

ROOT = Path(__file__).resolve().parents[1]

# stand-ins for srun, torchrun and horovodrun: each appends its name, its OMP_NUM_THREADS and its argv
STAND_IN = """#!/usr/bin/env bash
printf '%s\\0' "$(basename "$0")" "OMP_NUM_THREADS=${OMP_NUM_THREADS-unset}" "$@" >> "$ARGV_LOG"
"""


def slurm_text(target: str = "ddp", **fields: object) -> str:
    plan = LaunchPlan(target=target, launcher=launchable()[target], script="train.py", scheduler="slurm", **fields)  # type: ignore[arg-type]
    assert not problems(plan), problems(plan)
    [launcher] = render(plan)
    return launcher.text


def run_slurm(text: str, tmp_path: Path, cpus_per_node: str, **env: str) -> list[str]:
    """Run the sbatch script with stand-ins, as the job's first node would; the first stand-in's words
    (srun's, or horovodrun's), beginning with its name and the OMP_NUM_THREADS it was given."""
    (tmp_path / "train.py").write_text("")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    for name in ("srun", "torchrun", "horovodrun"):
        (bin_dir / name).write_text(STAND_IN)
    (bin_dir / "scontrol").write_text("#!/usr/bin/env bash\nprintf 'node1\\nnode2\\n'\n")
    for tool in bin_dir.iterdir():
        tool.chmod(0o755)
    (tmp_path / "job.sh").write_text(text)
    log = tmp_path / "argv.log"
    log.write_bytes(b"")
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("SLURM_", "OMP_", "MASTER_"))}
    job = {"SLURM_JOB_NODELIST": "node[1-2]", "SLURM_JOB_NUM_NODES": "2", "SLURM_JOB_ID": "7",
           "SLURM_JOB_CPUS_PER_NODE": cpus_per_node}
    done = subprocess.run(["bash", "job.sh"], cwd=tmp_path, capture_output=True, text=True, timeout=30,
                          env={**clean, **job, **env, "ARGV_LOG": str(log), "PATH": f"{bin_dir}:{clean['PATH']}"})
    assert done.returncode == 0, done.stderr
    return log.read_text().split("\0")[:-1]


# ---------------------------------------------------------------------------------------------
# SLURM


def test_by_default_a_slurm_job_takes_each_node_whole_and_shares_its_cpus(tmp_path: Path) -> None:
    text = slurm_text(nnodes=2, nproc_per_node="4")
    directives = [line for line in text.splitlines() if line.startswith("#SBATCH")]
    assert "#SBATCH --exclusive" in directives
    assert not any("--cpus-per-task" in line for line in directives)  # never one CPU per process
    assert "# CPUs: each node whole (--exclusive" in text  # the script says what it asks, and why
    words = run_slurm(text, tmp_path, "64(x2)")
    assert words[:4] == ["srun", "OMP_NUM_THREADS=16", "--ntasks-per-node=1", "--cpus-per-task=64"]


@pytest.mark.parametrize(("held", "cpus", "threads"), [
    ("72(x2),36", "36", "9"),  # nodes that differ: srun asks what the smallest holds
    ("2", "2", "1"),  # fewer CPUs than processes: one thread each, never zero
])
def test_the_step_asks_what_every_node_holds(held: str, cpus: str, threads: str, tmp_path: Path) -> None:
    words = run_slurm(slurm_text(nnodes=2, nproc_per_node="4"), tmp_path, held)
    assert words[1] == f"OMP_NUM_THREADS={threads}" and words[3] == f"--cpus-per-task={cpus}"


def test_cpus_per_node_asks_exactly_that_many(tmp_path: Path) -> None:
    text = slurm_text(nnodes=2, nproc_per_node="4", cpus_per_node=24)
    assert "#SBATCH --cpus-per-task=24\n" in text and "--exclusive" not in text
    assert "# CPUs: 24 per node, as --cpus-per-node asked" in text
    words = run_slurm(text, tmp_path, "32(x2)")  # SLURM may round up to whole cores: the step asks 24
    assert words[1:4] == ["OMP_NUM_THREADS=6", "--ntasks-per-node=1", "--cpus-per-task=24"]


def test_omp_num_threads_set_when_submitting_is_kept(tmp_path: Path) -> None:
    words = run_slurm(slurm_text(nproc_per_node="2"), tmp_path, "8", OMP_NUM_THREADS="3")
    assert words[1] == "OMP_NUM_THREADS=3"


def test_the_horovod_job_shares_the_cpus_and_says_it_needs_ssh(tmp_path: Path) -> None:
    text = slurm_text("horovod", nnodes=2, nproc_per_node="2")
    header = text.split("\nset -euo pipefail\n")[0]
    assert "over ssh, so the job's nodes need passwordless ssh between them" in " ".join(
        line.lstrip("# ") for line in header.splitlines())
    words = run_slurm(text, tmp_path, "16(x2)")
    assert words[:4] == ["horovodrun", "OMP_NUM_THREADS=8", "-np", "4"]
    assert "ssh" not in slurm_text("ddp", nnodes=2, nproc_per_node="2")  # srun starts torchrun on each node


# ---------------------------------------------------------------------------------------------
# Kubernetes


def pod(**fields: object) -> tuple[str, dict[str, object]]:
    plan = LaunchPlan(target="ddp", launcher=launchable()["ddp"], script="train.py", scheduler="kubernetes", image="r/t:1", **fields)  # type: ignore[arg-type]
    assert not problems(plan), problems(plan)
    [manifest] = render(plan)
    [container] = yaml.safe_load(manifest.text)["spec"]["pytorchReplicaSpecs"]["Master"]["template"]["spec"]["containers"]
    return manifest.text, container["resources"]


def test_a_pod_requests_cpus_and_memory_by_default_as_its_header_says() -> None:
    text, resources = pod(nproc_per_node="2")
    cpus, memory = 2 * POD_CPUS_PER_PROCESS, f"{2 * POD_MEMORY_GI_PER_PROCESS}Gi"
    assert resources == {"requests": {"cpu": cpus, "memory": memory},
                         "limits": {"cpu": cpus, "memory": memory, "nvidia.com/gpu": 2}}
    assert (f"# Each pod requests {cpus} CPUs ({POD_CPUS_PER_PROCESS} per process) and {memory} of memory "
            f"({POD_MEMORY_GI_PER_PROCESS}Gi per process)") in text


def test_the_flags_set_what_a_pod_requests_and_a_cpu_job_asks_no_gpu() -> None:
    text, resources = pod(nproc_per_node="2", cpus_per_node=6, memory_per_node="24Gi", gpus_per_node=0)
    assert resources == {"requests": {"cpu": 6, "memory": "24Gi"}, "limits": {"cpu": 6, "memory": "24Gi"}}
    assert "no GPU (a CPU job)" in text and "(--memory-per-node)" in text
    plan = LaunchPlan(target="ddp", launcher=launchable()["ddp"], script="train.py", scheduler="kubernetes", image="r/t:1", nproc_per_node="2",
                      cpus_per_node=6, memory_per_node="24Gi", gpus_per_node=0)
    assert "--cpus-per-node 6 --memory-per-node 24Gi" in remake_command(plan)


@pytest.mark.parametrize("memory", ["32GB", "0Gi", "1.5Gi", "64gi", "64Gi\n", "Gi", "64"])
def test_memory_that_kubernetes_would_not_read_as_meant_is_refused(memory: str) -> None:
    plan = LaunchPlan(target="ddp", launcher=launchable()["ddp"], script="train.py", scheduler="kubernetes", image="r/t:1", nproc_per_node="2",
                      memory_per_node=memory)
    [problem] = problems(plan)
    assert problem.flag == "--memory-per-node"
    assert problem.message == (f"{memory!r}: write a whole number from 1 and a unit, Ki, Mi, Gi or Ti (or k, M, G, T: "
                               "powers of 1000). Example: --memory-per-node 64Gi")


@pytest.mark.parametrize(("scheduler", "fields", "said"), [
    ("slurm", {"memory_per_node": "8Gi"}, "is what a Kubernetes pod requests: add --scheduler kubernetes"),
    ("none", {"cpus_per_node": 8}, "is what a SLURM or Kubernetes job requests: add --scheduler slurm or"),
    ("kubernetes", {"cpus_per_node": 0}, "0: from 1 to 4096"),
])
def test_a_request_its_scheduler_cannot_make_is_refused(scheduler: str, fields: dict[str, object], said: str) -> None:
    plan = LaunchPlan(target="ddp", launcher=launchable()["ddp"], script="train.py", scheduler=scheduler, nproc_per_node="2",
                      image="r/t:1" if scheduler == "kubernetes" else None, **fields)  # type: ignore[arg-type]
    assert [said in p.message for p in problems(plan)] == [True]


def test_launch_help_states_the_defaults_and_the_ssh_need() -> None:
    result = subprocess.run([sys.executable, "-m", "migrate", "launch", "--help"], cwd=ROOT, capture_output=True,
                            text=True, timeout=60)
    said = " ".join(result.stdout.split())
    assert f"Kubernetes: {POD_CPUS_PER_PROCESS} per process" in said
    assert f"(default: {POD_MEMORY_GI_PER_PROCESS}Gi per process)" in said
    assert "SLURM: each node whole, #SBATCH --exclusive" in said
    assert "passwordless ssh between them" in said
