"""The Kubeflow PyTorchJob manifest `migrate launch ddp|fsdp --scheduler kubernetes` writes.

One Master pod and --nnodes - 1 Worker pods (training operator v1.7.0 or later), each running
torchrun with the command the one-node launcher runs, less its rendezvous flags: the training operator gives every pod its node count, node
rank and the Master's address as torchrun's PET_* variables (PET_NNODES, PET_NODE_RANK,
PET_MASTER_ADDR, PET_MASTER_PORT), and `nprocPerNode` sets PET_NPROC_PER_NODE. The manifest is a
dict written by PyYAML, so it always parses; the header is YAML comments.
"""

from __future__ import annotations

import os
from typing import Any

import yaml

# migrate.launch imports this module only when it renders a manifest, so no import cycle
from migrate.launch import LaunchPlan, gpus_per_node, header_lines, job_name, out_path, script_as_given
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
        f"{plan.nproc_per_node} processes each.",
        f"The image must hold {printable(script_as_given(plan))} (the path the command names) in its working folder.",
        "Needs Kubeflow's training operator v1.7.0 or later: it gives each pod torchrun's PET_NNODES, PET_NODE_RANK,",
        "PET_MASTER_ADDR and PET_MASTER_PORT (older ones do not, and each pod would train alone).",
        "Apply it with: kubectl apply -f " + printable(os.path.basename(out_path(plan))),
        *header_lines(plan),
    ]
    text = "".join(f"# {line}\n" for line in comments) + yaml.safe_dump(manifest, sort_keys=False, width=1000)
    yaml.safe_load(text)  # a bug here must never ship a manifest that does not parse
    return text


def _replica(plan: LaunchPlan, count: int) -> dict[str, Any]:
    container: dict[str, Any] = {"name": CONTAINER, "image": plan.image, "command": torchrun_command(plan)}
    if gpus_per_node(plan):
        container["resources"] = {"limits": {"nvidia.com/gpu": gpus_per_node(plan)}}
    # the container runtime's default /dev/shm (64 MiB) is too small for NCCL and DataLoader workers
    container["volumeMounts"] = [{"name": SHARED_MEMORY, "mountPath": "/dev/shm"}]
    pod = {"containers": [container], "volumes": [{"name": SHARED_MEMORY, "emptyDir": {"medium": "Memory"}}]}
    return {"replicas": count, "restartPolicy": "OnFailure", "template": {"spec": pod}}
