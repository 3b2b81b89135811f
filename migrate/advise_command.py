"""`migrate advise [SCRIPT]`: which framework to convert to, by the guide's decision tree
(migrate.advise), with the per-GPU memory of the model states under each way of sharding them.
The model's size is --params, or counted from SCRIPT without running it (migrate.param_count).
Bad input (an option's value, a script that cannot be read, parsed or counted) is
`migrate advise: error: ...` on stderr (with --report json: one JSON list of MIG900 entries, as the
other commands write errors) and exit 2; the advice goes to stdout, exit 0.
"""

from __future__ import annotations

import json
import sys
from typing import TYPE_CHECKING, Annotated, Optional

import typer

if TYPE_CHECKING:  # param_count reads scripts with libcst: imported when a script is counted
    from migrate.param_count import Count

EXIT_OK, EXIT_BAD_INPUT = 0, 2

Script = Annotated[Optional[str], typer.Argument(metavar="[SCRIPT]", show_default=False, help="The training script: its parameters are counted (without --params) and it is named in the next commands.")]
Nodes = Annotated[int, typer.Option("--nodes", metavar="N", help="Machines the job runs on.")]
GpusPerNode = Annotated[int, typer.Option("--gpus-per-node", metavar="G", help="GPUs on each machine (one process each).")]
GpuMemory = Annotated[str, typer.Option("--gpu-memory", metavar="SIZE", help="Memory of one GPU: 80GB, 80GiB, 24G, 40960MB (GB and GiB both mean 2^30 bytes, as nvidia-smi and GPU makers count).")]
Params = Annotated[Optional[str], typer.Option("--params", metavar="COUNT", help="The model's parameters: 7B, 1.3B, 350M, 125000000 (default: counted from SCRIPT; SCRIPT is then not read).")]
Precision = Annotated[str, typer.Option("--precision", metavar="bf16|fp16|fp32", help="bf16/fp16: mixed precision (16-bit weights and gradients, fp32 optimizer states); fp32: all in fp32.")]
Optimizer = Annotated[str, typer.Option("--optimizer", metavar="adam|sgd", help="adam (also AdamW): two fp32 states per parameter; sgd: with momentum, one.")]
Mpi = Annotated[bool, typer.Option("--mpi", help="MPI/Horovod is already in place on the cluster (rule 2: Horovod).")]
OtherFrameworks = Annotated[bool, typer.Option("--other-frameworks", help="TensorFlow/MXNet and PyTorch must share one training stack (rule 2: Horovod).")]
Report = Annotated[str, typer.Option("--report", metavar="text|json", help="text for people; json: one object on stdout (its shape: migrate/advise.py's docstring).")]


def advise(script: Script = None, nodes: Nodes = 1, gpus_per_node: GpusPerNode = 1, gpu_memory: GpuMemory = "",
           params: Params = None, precision: Precision = "bf16", optimizer: Optimizer = "adam", mpi: Mpi = False,
           other_frameworks: OtherFrameworks = False, report: Report = "text") -> None:
    """Say which framework to convert to: dp, ddp, horovod, deepspeed or fsdp.

    The decision tree of the project's guide, rule by rule: 10+ nodes or 10B+ parameters:
    DeepSpeed (FSDP to stay native); model states that do not fit one GPU under DDP: FSDP; one node:
    DDP (DP only for a throwaway check); 2-9 nodes and under 1B parameters: DDP, or Horovod with
    --mpi / --other-frameworks. It prints the rule that decided (in the guide's words), the runner-up
    and why not, the `migrate` commands to run next, and the memory of the model states per GPU
    (weights, gradients, optimizer states) under DDP, ZeRO-1/2/3, ZeRO-3 with CPU offload and FSDP,
    counted as the ZeRO paper and DeepSpeed's estimators count them. Activations come on top.

    Without --params the parameters are counted from SCRIPT's model classes, without running it;
    layers it cannot size are named with their line, and the count is then a lower bound.

    \b
    Example:
      migrate advise train.py --nodes 2 --gpus-per-node 8 --gpu-memory 80GB
      migrate advise --params 7B --nodes 1 --gpus-per-node 8 --gpu-memory 80GB --report json
    """
    try:
        text = _advice(script, nodes, gpus_per_node, gpu_memory, params, precision, optimizer, mpi,
                       other_frameworks, report)
    except _Bad as bad:
        _error(bad, report == "json")
        raise typer.Exit(EXIT_BAD_INPUT) from None
    sys.stdout.write(text)
    raise typer.Exit(EXIT_OK)


class _Bad(Exception):
    def __init__(self, message: str, where: tuple[str, int, int] = ("", 0, 0), bare: str | None = None) -> None:
        super().__init__(message)
        self.message = message  # as stderr says it: `path:line:col: what`
        self.where = where
        self.bare = bare or message  # without the place (JSON gives it in its own fields)


def _advice(script: str | None, nodes: int, gpus_per_node: int, gpu_memory: str, params: str | None,
            precision: str, optimizer: str, mpi: bool, other_frameworks: bool, report: str) -> str:
    from migrate import advise as advising

    _check_choices(precision, optimizer, report, gpu_memory)
    try:
        advising.check_cluster(nodes, gpus_per_node)
        cluster = advising.Cluster(nodes, gpus_per_node, advising.parse_memory(gpu_memory))
        count = advising.parse_params(params) if params is not None else None
    except advising.AdviseError as error:
        raise _Bad(str(error)) from None
    largest, unsized, source = None, [], "--params" if count is not None else None
    if count is None and script is not None:
        counted = _count(script)
        count, largest, unsized, source = counted.total, counted.largest_layer, list(counted.unsized), "script"
    model = advising.Model(count, largest, precision, optimizer)
    table = advising.memory_table(model, cluster)
    decision = advising.decide(model, cluster, mpi, other_frameworks)
    if unsized:
        decision.notes.append(f"{len(unsized)} layer(s) could not be sized: the count is a lower bound")
    steps = advising.commands(decision, script or "SCRIPT", cluster, model, table)
    if report == "json":
        inputs: dict[str, object] = {"nodes": nodes, "gpus_per_node": gpus_per_node, "gpu_memory_bytes": cluster.gpu_memory,
                  "params": count, "params_from": source, "largest_layer": largest, "precision": precision,
                  "optimizer": optimizer, "mpi": mpi, "other_frameworks": other_frameworks}
        entries: list[dict[str, object]] = [{"name": u.name, "path": u.path, "line": u.line, "col": u.col, "why": u.why} for u in unsized]
        return json.dumps(advising.as_json(decision, steps, inputs, table, entries), indent=2) + "\n"
    return advising.as_text(decision, steps, model, cluster, table, [str(u) for u in unsized])


def _check_choices(precision: str, optimizer: str, report: str, gpu_memory: str) -> None:
    for option, value, allowed in (("--precision", precision, ("bf16", "fp16", "fp32")),
                                   ("--optimizer", optimizer, ("adam", "sgd")), ("--report", report, ("text", "json"))):
        if value not in allowed:
            raise _Bad(f"{option}: {value!r}: give one of {', '.join(allowed)}")
    if not gpu_memory:
        raise _Bad("--gpu-memory: give the memory of one GPU, e.g. --gpu-memory 80GB")


def _count(script: str) -> Count:
    """The script's parameter count (migrate.param_count.Count); bad input raises _Bad naming the user's path."""
    from migrate.records import InputError
    from migrate.param_count import count_file

    try:
        return count_file(script)
    except InputError as error:
        raise _Bad(str(error), (error.path, error.line, error.col), error.message) from None


def _error(bad: _Bad, as_json: bool) -> None:
    if as_json:
        path, line, col = bad.where
        entry = {"path": path, "line": line, "col": col, "code": "MIG900", "severity": "error", "message": bad.bare}
        sys.stderr.write(json.dumps([entry], indent=2) + "\n")
    else:
        sys.stderr.write(f"migrate advise: error: {bad.message}\n")
