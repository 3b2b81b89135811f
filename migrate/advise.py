"""`migrate advise`: which framework to convert to, by the decision tree of ../shared/GUIDE.md, and
the memory the model states take per GPU under each way of sharding them. Pure functions: the
command line is migrate/advise_command.py.

Decision (`decide`), rule by rule, the first that applies:
- rule 3: 10 or more nodes, or 10B+ parameters -> deepspeed (runner-up fsdp);
- rule 4: DDP's model states do not fit one GPU (memory is tight) -> fsdp (runner-up deepspeed); when
  not even FSDP's full shard fits, rule 3's "memory optimisation" -> deepspeed (ZeRO-3 with CPU offload);
- rule 1: one node -> ddp (runner-up dp);
- rule 2: 2-9 nodes, under 1B parameters -> ddp (runner-up horovod); horovod with --mpi or
  --other-frameworks (runner-up ddp);
- 2-9 nodes and 1B-10B parameters that fit, or a size not known: no rule decides; the positioning
  table's "the default starting point for most projects" -> ddp.
Rule 5 (mixed parallelism) needs what the script does not say; the report names it as not checked.

Memory (`memory_table`), bytes per GPU for the model states only (activations come on top), with
P parameters over N GPUs and L the largest layer's parameters (DeepSpeed's word: the most one module
holds itself). Per parameter: weights w and gradients g (2 bytes in bf16/fp16 mixed precision, 4 in
fp32); optimizer states k, the ZeRO paper's K (Adam: 12 mixed = fp32 master weights, momentum,
variance; 8 in fp32; SGD with momentum: 8 mixed, 4 fp32); and, in mixed precision, the fp32 gradient
partition f = 4 DeepSpeed keeps for its optimizer (its estimators count it; the paper does not).
  DDP                P*(w + g + k)                       (torch AMP: fp32 weights, grads, Adam: the same 16)
  ZeRO-1             P*(w + g) + P*(k + f)/N
  ZeRO-2             P*w + P*(g + k + f)/N               = DeepSpeed's estimate: 2P + 18P/N for Adam in bf16
  ZeRO-3             P*(w + 4 + k)/N + (w + g)*L          = DeepSpeed's: 18P/N + 4L
  ZeRO-3 + offload   (w + g)*L on the GPU; P*(w + 4 + k)/nodes * 1.5 per node's CPU = DeepSpeed's
  FSDP (FULL_SHARD)  P*(4 + 4 + k32)/N + (w + g)*L        (fp32 sharded weights, grads, fp32 optimizer states)
ZeRO-3 keeps only the fp32 gradient partition (4 bytes), so its per-parameter count is w + 4 + k (DeepSpeed's 18,
against ZeRO-2's 2 + 18): this follows DeepSpeed's estimators
(`estimate_zero2_model_states_mem_needs`, `estimate_zero3_model_states_mem_needs`, with their
additional_buffer_factor 1.5 on CPU memory only); tests/test_advise.py checks it against them.

`--report json` prints one object:
  {"recommendation": "ddp"|"fsdp"|"deepspeed"|"horovod"|"dp",
   "rule": {"number": int|null, "text": str},  # the guide's words that decided
   "runner_up": {"framework": str, "why_not": str},
   "commands": [str, ...],
   "inputs": {"nodes": int, "gpus_per_node": int, "gpu_memory_bytes": int, "params": int|null,
              "params_from": "--params"|"script"|null, "largest_layer": int|null,
              "precision": str, "optimizer": str, "mpi": bool, "other_frameworks": bool},
   "memory": [{"strategy": str, "weights": int, "gradients": int, "optimizer_states": int,
               "gpu_bytes": int, "cpu_bytes_per_node": int|null, "fits": bool}, ...],
   "unsized": [{"name": str, "path": str, "line": int, "col": int, "why": str}, ...],
   "notes": [str, ...]}
"""

from __future__ import annotations

import os
import re
from dataclasses import asdict, dataclass, field

GIB = 1024 ** 3
UNITS = {"": 1, "B": 1, "K": 1024, "KB": 1024, "KIB": 1024, "M": 1024 ** 2, "MB": 1024 ** 2, "MIB": 1024 ** 2,
         "G": GIB, "GB": GIB, "GIB": GIB, "T": 1024 ** 4, "TB": 1024 ** 4, "TIB": 1024 ** 4}
COUNTS = {"": 1, "K": 10 ** 3, "M": 10 ** 6, "B": 10 ** 9, "G": 10 ** 9, "T": 10 ** 12}
OFFLOAD_BUFFER = 1.5  # DeepSpeed's additional_buffer_factor for CPU memory
FRAMEWORKS = ("dp", "ddp", "horovod", "deepspeed", "fsdp")

RULES = {  # the guide's decision tree, in its words
    1: "One node, several GPUs, data parallel: DDP + torchrun (fast and stable); DP only for a throwaway check.",
    2: "Several nodes, fewer than 10, model under 1B parameters: DDP + torchrun; Horovod if MPI/Horovod is already "
       "in place or several frameworks must share one training stack.",
    3: "10 or more nodes, or a model of 10B+ parameters: DeepSpeed when ZeRO, 3D parallelism, memory optimisation or "
       "its profiler are needed; FSDP to stay on the native PyTorch stack.",
    4: "Memory is tight (e.g. 7B-13B) and DeepSpeed's complexity is unwanted: FSDP.",
    5: "Mixed parallelism (data + model/pipeline/tensor) or heavy engineering needs: DeepSpeed, or FSDP plus custom "
       "parallelism.",
}
DEFAULT_STARTING_POINT = "DDP + torchrun: the default starting point for most projects."


class AdviseError(ValueError):
    """Bad input to advise: the message names the option (`--gpu-memory: ...`)."""


@dataclass(frozen=True)
class Cluster:
    nodes: int
    gpus_per_node: int
    gpu_memory: int  # bytes

    @property
    def gpus(self) -> int:
        return self.nodes * self.gpus_per_node


@dataclass(frozen=True)
class Model:
    params: int | None  # None: not known
    largest_layer: int | None = None
    precision: str = "bf16"  # bf16 | fp16 | fp32
    optimizer: str = "adam"  # adam | sgd (with momentum)


@dataclass(frozen=True)
class Row:
    """Model states per GPU under one strategy."""

    strategy: str
    weights: int
    gradients: int
    optimizer_states: int
    gpu_bytes: int
    cpu_bytes_per_node: int | None
    fits: bool


@dataclass(frozen=True)
class Advice:
    recommendation: str
    rule: int | None
    rule_text: str
    runner_up: str
    why_not: str
    notes: list[str] = field(default_factory=list)


# -- input ------------------------------------------------------------------------------------------

def parse_memory(text: str) -> int:
    """`80GB`, `80GiB`, `80G`, `40960MB` -> bytes (GB and GiB both 2**30, as GPU makers and
    nvidia-smi mean them). Raises AdviseError."""
    match = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([A-Za-z]*)\s*", text)
    unit = match.group(2).upper() if match else ""
    if match is None or unit not in UNITS or unit == "":
        raise AdviseError(f"--gpu-memory: {text!r} is not a memory size: write a number and a unit, e.g. 80GB, 80GiB, "
                          "24G or 40960MB")
    size = int(float(match.group(1)) * UNITS[unit])
    if size <= 0:
        raise AdviseError(f"--gpu-memory: {text!r}: give a size above 0")
    return size


def parse_params(text: str) -> int:
    """`7B`, `1.3B`, `350M`, `125000000` -> a count. Raises AdviseError."""
    match = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([A-Za-z]?)\s*", text.replace("_", "").replace(",", ""))
    unit = match.group(2).upper() if match else ""
    if match is None or unit not in COUNTS:
        raise AdviseError(f"--params: {text!r} is not a parameter count: write e.g. 7B, 1.3B, 350M or 125000000")
    count = int(float(match.group(1)) * COUNTS[unit])
    if count <= 0:
        raise AdviseError(f"--params: {text!r}: give a count above 0")
    return count


def check_cluster(nodes: int, gpus_per_node: int) -> None:
    if nodes < 1:
        raise AdviseError(f"--nodes: {nodes}: give 1 or more")
    if gpus_per_node < 1:
        raise AdviseError(f"--gpus-per-node: {gpus_per_node}: give 1 or more")


# -- memory -----------------------------------------------------------------------------------------

def bytes_per_parameter(model: Model) -> tuple[int, int, int, int]:
    """(w, g, k, f): weights, gradients, optimizer states (the paper's K), DeepSpeed's fp32 gradient copy."""
    mixed = model.precision in ("bf16", "fp16")
    states = {("adam", True): 12, ("adam", False): 8, ("sgd", True): 8, ("sgd", False): 4}[(model.optimizer, mixed)]
    return (2, 2, states, 4) if mixed else (4, 4, states, 0)


def memory_table(model: Model, cluster: Cluster) -> list[Row]:
    """Bytes of model states per GPU under DDP, ZeRO-1/2/3, ZeRO-3 with CPU offload and FSDP."""
    if model.params is None:
        return []
    p, n, layer = model.params, cluster.gpus, model.largest_layer or 0
    w, g, k, f = bytes_per_parameter(model)
    fp32_states = bytes_per_parameter(Model(1, None, "fp32", model.optimizer))[2]
    rows = [
        ("DDP", p * w, p * g, p * k, None),
        ("ZeRO-1", p * w, p * g, p * (k + f) // n, None),
        ("ZeRO-2", p * w, p * g // n, p * (k + f) // n, None),
        ("ZeRO-3", p * w // n + w * layer, p * 4 // n + g * layer, p * k // n, None),
        ("ZeRO-3 + CPU offload", w * layer, g * layer, 0, int(p * (w + 4 + k) / cluster.nodes * OFFLOAD_BUFFER)),
        ("FSDP (FULL_SHARD)", p * 4 // n + w * layer, p * 4 // n + g * layer, p * fp32_states // n, None),
    ]
    return [Row(name, a, b, c, a + b + c, cpu, a + b + c <= cluster.gpu_memory) for name, a, b, c, cpu in rows]


def fits(table: list[Row], strategy: str) -> bool | None:
    row = next((r for r in table if r.strategy == strategy), None)
    return None if row is None else row.fits


# -- the decision tree ------------------------------------------------------------------------------

def decide(model: Model, cluster: Cluster, mpi: bool = False, other_frameworks: bool = False) -> Advice:
    """The guide's decision tree, rule by rule (see the module docstring for the order)."""
    table = memory_table(model, cluster)
    params = model.params
    advice = (_rule_3(model, cluster) or _rule_4(table) or _rule_1(cluster, mpi, other_frameworks)
              or _rule_2(params, mpi, other_frameworks) or _default(params))
    if params is None:
        advice.notes.append("the model's size is not known (give --params or SCRIPT): rules 3 (10B+) and 4 (memory) "
                            "were decided by the cluster alone")
    advice.notes.append(f"rule 5 is not checked (the script cannot say it): \"{RULES[5]}\"")
    return advice


def _rule_3(model: Model, cluster: Cluster) -> Advice | None:
    big = model.params is not None and model.params >= 10 ** 10
    if cluster.nodes < 10 and not big:
        return None
    why = "10 or more nodes" if cluster.nodes >= 10 else "10B+ parameters"
    return Advice("deepspeed", 3, RULES[3], "fsdp",
                  f"{why}: FSDP is the choice to stay on the native PyTorch stack, without ZeRO's offload to CPU/NVMe, "
                  "3D parallelism and DeepSpeed's profiler")


def _rule_4(table: list[Row]) -> Advice | None:
    if not table or fits(table, "DDP"):
        return None
    if fits(table, "FSDP (FULL_SHARD)"):
        return Advice("fsdp", 4, RULES[4], "deepspeed",
                      "DDP's model states do not fit one GPU, FSDP's full shard does: DeepSpeed (ZeRO-3) would fit too, "
                      "with more to configure")
    return Advice("deepspeed", 3, RULES[3], "fsdp",
                  "not even FSDP's full shard fits the GPUs (rule 4's FSDP is out): DeepSpeed's memory optimisation, "
                  "ZeRO-3 with CPU offload, is what fits; FSDP's own CPU offload (--cpu-offload) is the native "
                  "alternative")


def _rule_1(cluster: Cluster, mpi: bool, other_frameworks: bool) -> Advice | None:
    if cluster.nodes != 1:
        return None
    why = "nn.DataParallel runs one process that drives every GPU: only for a throwaway check, not for training"
    if mpi or other_frameworks:
        why += "; Horovod (--mpi/--other-frameworks) is rule 2's choice for several nodes, not one"
    return Advice("ddp", 1, RULES[1], "dp", why)


def _rule_2(params: int | None, mpi: bool, other_frameworks: bool) -> Advice | None:
    if params is None or params >= 10 ** 9:
        return None
    if mpi or other_frameworks:
        given = "MPI/Horovod is in place" if mpi else "several frameworks share one training stack"
        return Advice("horovod", 2, RULES[2], "ddp",
                      f"{given}: Horovod fits it; DDP + torchrun is the choice without that (Horovod's last release, "
                      "0.28.1, is from 2023)")
    return Advice("ddp", 2, RULES[2], "horovod", "Horovod only pays when MPI/Horovod is already in place or several "
                  "frameworks share one training stack (--mpi, --other-frameworks)")


def _default(params: int | None) -> Advice:
    size = "the model's size is not known" if params is None else "1B-10B parameters that fit one GPU"
    return Advice("ddp", None, DEFAULT_STARTING_POINT, "fsdp",
                  f"no rule of the decision tree covers 2-9 nodes with {size}: DDP fits; FSDP when the memory left "
                  "for activations runs short")


# -- next steps -------------------------------------------------------------------------------------

def deepspeed_stage(table: list[Row]) -> tuple[int, bool]:
    """The lowest ZeRO stage whose model states fit, and whether it needs CPU offload."""
    for stage in (1, 2, 3):
        if fits(table, f"ZeRO-{stage}"):
            return stage, False
    return 3, bool(table)


def commands(advice: Advice, script: str, cluster: Cluster, model: Model, table: list[Row]) -> list[str]:
    """The `migrate` commands that convert the script and write its launcher."""
    nodes, gpus = cluster.nodes, cluster.gpus_per_node
    hosts = ",".join(f"node{i + 1}:{gpus}" for i in range(min(nodes, 3))) + (",..." if nodes > 3 else "")
    mixed = model.precision != "fp32"
    if advice.recommendation == "dp":
        return [f"migrate to-dp --write {script}"]
    if advice.recommendation == "deepspeed":
        stage, offload = deepspeed_stage(table)
        flags = f"--zero {stage}" + (" --offload-optimizer cpu --offload-param cpu" if offload else "")
        return [f"migrate to-deepspeed {flags} --{model.precision} --write {script}",
                f"migrate launch deepspeed {script} --hosts {hosts}" if nodes > 1 else _one_node(script, "deepspeed")]
    if advice.recommendation == "horovod":
        return [f"migrate to-horovod --write {script}", f"migrate launch horovod {script} --hosts {hosts}"]
    flags = f" --mixed-precision {model.precision}" if advice.recommendation == "fsdp" and mixed else ""
    launch = (f"migrate launch {advice.recommendation} {script} --nnodes {nodes} --nproc-per-node {gpus} "
              "--master-addr NODE1_ADDRESS" if nodes > 1 else _one_node(script, advice.recommendation))
    return [f"migrate to-{advice.recommendation}{flags} --write {script}", launch]


def _one_node(script: str, target: str) -> str:
    """One node: `--write` already wrote the launcher (a `migrate launch` there would find it and stop)."""
    stem = os.path.splitext(os.path.basename(script))[0] if script != "SCRIPT" else "<script>"
    return f"# --write also writes run_{stem}_{target}.sh beside it: one process per GPU of this node"


# -- reports ----------------------------------------------------------------------------------------

def size_text(count: int) -> str:
    for unit, scale in (("T", 10 ** 12), ("B", 10 ** 9), ("M", 10 ** 6), ("K", 10 ** 3)):
        if count >= scale:
            return f"{count / scale:.3g}{unit}"
    return str(count)


def gib(size: int) -> str:
    """Bytes in the largest binary unit that keeps the number at 1 or above: `20.37 GiB`, `434.5 KiB`."""
    for unit, scale in (("TiB", 1024 ** 4), ("GiB", GIB), ("MiB", 1024 ** 2), ("KiB", 1024)):
        if size >= scale:
            return f"{size / scale:.2f} {unit}"
    return f"{size} B"


def as_json(advice: Advice, steps: list[str], inputs: dict[str, object], table: list[Row],
            unsized: list[dict[str, object]]) -> dict[str, object]:
    return {"recommendation": advice.recommendation,
            "rule": {"number": advice.rule, "text": advice.rule_text},
            "runner_up": {"framework": advice.runner_up, "why_not": advice.why_not},
            "commands": steps, "inputs": inputs, "memory": [asdict(row) for row in table],
            "unsized": unsized, "notes": advice.notes}


def as_text(advice: Advice, steps: list[str], model: Model, cluster: Cluster, table: list[Row],
            unsized: list[str]) -> str:
    rule = f"rule {advice.rule}" if advice.rule is not None else "no rule applies; the positioning table"
    lines = [f"recommendation: {advice.recommendation}",
             f"  why ({rule} of the guide): \"{advice.rule_text}\"",
             f"runner-up: {advice.runner_up}: {advice.why_not}",
             "next:"] + [f"  {step}" for step in steps]
    lines += _table_text(model, cluster, table)
    lines += [f"not sized (counted as 0): {entry}" for entry in unsized]
    lines += [f"note: {note}" for note in advice.notes]
    return "\n".join(lines) + "\n"


def _table_text(model: Model, cluster: Cluster, table: list[Row]) -> list[str]:
    if not table:
        return ["memory: give --params (or SCRIPT) for the per-GPU memory of the model states"]
    layer = "" if model.largest_layer else ", largest layer not known (ZeRO-3/FSDP also gather it: give SCRIPT)"
    lines = [f"model states per GPU ({size_text(model.params or 0)} parameters, {model.precision}, {model.optimizer}, "
             f"{cluster.gpus} GPUs = {cluster.nodes} x {cluster.gpus_per_node}{layer}; "
             f"activations come on top):",
             f"  {'strategy':<22}{'weights':>12}{'gradients':>12}{'optimizer':>12}{'total':>12}  fits {gib(cluster.gpu_memory)}"]
    for row in table:
        if row.cpu_bytes_per_node is not None and not model.largest_layer:
            gathered = f"the largest layer, {sum(bytes_per_parameter(model)[:2])} bytes a parameter"
            lines.append(f"  {row.strategy:<22}{gathered:>48}  yes  "
                         f"(+ {gib(row.cpu_bytes_per_node)} CPU memory per node)")
            continue
        cpu = f"  (+ {gib(row.cpu_bytes_per_node)} CPU memory per node)" if row.cpu_bytes_per_node is not None else ""
        lines.append(f"  {row.strategy:<22}{gib(row.weights):>12}{gib(row.gradients):>12}"
                     f"{gib(row.optimizer_states):>12}{gib(row.gpu_bytes):>12}  {'yes' if row.fits else 'no'}{cpu}")
    return lines
