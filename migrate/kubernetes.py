"""The Kubeflow PyTorchJob manifest `migrate launch ddp|fsdp --scheduler kubernetes` writes.

One Master pod and --nnodes - 1 Worker pods (training operator v1.7.0 or later), each running
torchrun with the command the one-node launcher runs, less its rendezvous flags: the training operator gives every pod its node count, node
rank and the Master's address as torchrun's PET_* variables (PET_NNODES, PET_NODE_RANK,
PET_MASTER_ADDR, PET_MASTER_PORT), and `nprocPerNode` sets PET_NPROC_PER_NODE. The manifest is a
dict written by PyYAML, so it always parses; the header is YAML comments.

Each pod requests CPUs and memory (--cpus-per-node, --memory-per-node; by default
migrate.options.POD_CPUS_PER_PROCESS and POD_MEMORY_GI_PER_PROCESS per process) with limits equal
to the requests, and GPUs (`nvidia.com/gpu`, a limit) only when it asks for some; the header says
what it asks and why.
"""

from __future__ import annotations

import os
from typing import Any

import yaml

from migrate.launch_plan import LaunchPlan, gpus_per_node, header_lines, job_name, out_path, script_as_given
from migrate.options import POD_CPUS_PER_PROCESS, POD_MEMORY_GI_PER_PROCESS
from migrate.sources import printable

API_VERSION = "kubeflow.org/v1"
CONTAINER = "pytorch"  # the operator finds the training container by this name
SHARED_MEMORY = "dshm"


def torchrun_command(plan: LaunchPlan) -> list[str]:
    """torchrun, the processes per node, the script as `migrate launch` was given it (its path in the
    image, from the container's working folder), its arguments."""
    return ["torchrun", f"--nproc-per-node={plan.nproc_per_node}", script_as_given(plan), *plan.script_args]


def pytorchjob_manifest(plan: LaunchPlan) -> str:
    replicas = {"Master": _replica(plan, 1)}
    if plan.nnodes > 1:
        replicas["Worker"] = _replica(plan, plan.nnodes - 1)
    manifest: dict[str, Any] = {
        "apiVersion": API_VERSION,
        "kind": "PyTorchJob",
        "metadata": {"name": job_name(plan)},
        "spec": {"nprocPerNode": plan.nproc_per_node, "pytorchReplicaSpecs": replicas},
    }
    workers = {1: "", 2: ", 1 Worker"}.get(plan.nnodes, f", {plan.nnodes - 1} Workers")
    comments = [
        f"A Kubeflow PyTorchJob: {plan.nnodes} pod{'s' if plan.nnodes > 1 else ''} (one Master{workers}), "
        f"{plan.nproc_per_node} process{'' if plan.nproc_per_node == '1' else 'es'} each.",
        f"The image must hold {printable(script_as_given(plan))} (the path the command names) in its working folder.",
        "Needs Kubeflow's training operator v1.7.0 or later: it gives each pod torchrun's PET_NNODES, PET_NODE_RANK,",
        "PET_MASTER_ADDR and PET_MASTER_PORT (older ones do not, and each pod would train alone).",
        *_resources_said(plan),
        "Apply it with: kubectl apply -f " + printable(os.path.basename(out_path(plan))),
        *header_lines(plan),
    ]
    dumped: str = yaml.safe_dump(manifest, sort_keys=False, width=1000)
    text = "".join(f"# {line}\n" for line in comments) + dumped
    yaml.safe_load(text)  # a bug here must never ship a manifest that does not parse
    return text


def pod_cpus(plan: LaunchPlan) -> int:
    """The CPUs each pod requests: --cpus-per-node, else POD_CPUS_PER_PROCESS per process."""
    return plan.cpus_per_node or POD_CPUS_PER_PROCESS * int(plan.nproc_per_node)


def pod_memory(plan: LaunchPlan) -> str:
    """The memory each pod requests, as Kubernetes writes it: --memory-per-node, else
    POD_MEMORY_GI_PER_PROCESS Gi per process."""
    return plan.memory_per_node or f"{POD_MEMORY_GI_PER_PROCESS * int(plan.nproc_per_node)}Gi"


def resources(plan: LaunchPlan) -> dict[str, Any]:
    """Requests equal to limits (a Guaranteed pod: the last evicted when its node runs short); a GPU
    is an extended resource, given as a limit only, and only when the pod asks for some."""
    asked: dict[str, Any] = {"cpu": pod_cpus(plan), "memory": pod_memory(plan)}
    limits = dict(asked)
    if gpus_per_node(plan):
        limits["nvidia.com/gpu"] = gpus_per_node(plan)
    return {"requests": asked, "limits": limits}


def _resources_said(plan: LaunchPlan) -> list[str]:
    """The header lines that say what each pod asks, and where the numbers come from."""
    cpus = "--cpus-per-node" if plan.cpus_per_node else f"{POD_CPUS_PER_PROCESS} per process"
    memory = "--memory-per-node" if plan.memory_per_node else f"{POD_MEMORY_GI_PER_PROCESS}Gi per process"
    gpus = gpus_per_node(plan)
    gpu_said = f"{gpus} GPU{'s' if gpus > 1 else ''} (nvidia.com/gpu)" if gpus else "no GPU (a CPU job)"
    return [
        f"Each pod requests {pod_cpus(plan)} CPU{'s' if pod_cpus(plan) > 1 else ''} ({cpus}) and {pod_memory(plan)} of memory ({memory}) for its "
        "processes and their DataLoader workers,",
        f"limited to the same (a Guaranteed pod, the last evicted when its node runs short), and {gpu_said}.",
        "A pod larger than any node stays Pending: give --cpus-per-node and --memory-per-node to fit your nodes.",
    ]


def _replica(plan: LaunchPlan, count: int) -> dict[str, Any]:
    container: dict[str, Any] = {"name": CONTAINER, "image": plan.image, "command": torchrun_command(plan)}
    container["resources"] = resources(plan)
    # the container runtime's default /dev/shm (64 MiB) is too small for NCCL and DataLoader workers
    container["volumeMounts"] = [{"name": SHARED_MEMORY, "mountPath": "/dev/shm"}]
    pod = {"containers": [container], "volumes": [{"name": SHARED_MEMORY, "emptyDir": {"medium": "Memory"}}]}
    return {"replicas": count, "restartPolicy": "OnFailure", "template": {"spec": pod}}
