"""Check rule DC802: NCCL asked to move CPU tensors. A script that sets up its process group with
the NCCL backend alone (`init_process_group("nccl")`, `backend="nccl"`: not a per-device
"cpu:gloo,cuda:nccl") and then runs a collective (`dist.all_reduce(t)`, broadcast, all_gather, ...)
on a tensor built on the CPU (`torch.tensor(x)`, `torch.zeros(n)` with no `device=`, never moved
after), or wraps a model that is never moved to a GPU in DDP: NCCL only handles CUDA tensors, so
the call fails at run time ("No backend type associated with device type cpu"). A tensor whose
device the script computes (`device=device`) is not judged."""

from __future__ import annotations

from collections.abc import Iterator

import libcst as cst

from migrate.analysis.index import CallSite, spell
from migrate.check.facts import DDP_WRAPPERS, PROCESS_GROUP_INITS, Hit, Script, argument

NCCL_COLLECTIVES = tuple(f"torch.distributed.{name}" for name in (
    "all_reduce", "broadcast", "all_gather", "all_gather_into_tensor", "reduce", "reduce_scatter",
    "reduce_scatter_tensor", "gather", "scatter", "all_to_all_single"))
CONSTRUCTORS = tuple(f"torch.{name}" for name in (
    "tensor", "as_tensor", "zeros", "ones", "empty", "full", "rand", "randn", "randint", "arange", "linspace",
    "Tensor", "FloatTensor", "LongTensor"))
MOVES = ("to", "cuda")


def nccl_on_cpu(script: Script) -> Iterator[Hit]:
    """DC802 (see the module docstring)."""
    if not _nccl_only(script):
        return
    for call in script.calls_to(*NCCL_COLLECTIVES):
        tensor = argument(call.node, "tensor", 0) or argument(call.node, "tensor_list", 0)
        if tensor is not None and _built_on_cpu(script, call, tensor):
            yield Hit(call.node, f"`{script.text(tensor)}` is a CPU tensor and the process group is NCCL's only: NCCL "
                      "moves CUDA tensors alone, so this collective fails; create it with device=\"cuda\" (or "
                      ".cuda() it), or init_process_group(\"cpu:gloo,cuda:nccl\")")
    for call in script.calls_to(*DDP_WRAPPERS):
        model = argument(call.node, "module", 0)
        if model is not None and argument(call.node, "device_ids", 1) is None and _never_moved(script, model):
            yield Hit(call.node, f"`{script.text(model)}` is never moved to a GPU and the process group is NCCL's only: "
                      "DDP broadcasts its CPU weights through NCCL at the wrap and fails; move it with "
                      ".to(device) (device = torch.device(\"cuda\", local_rank)) before wrapping it")


def _nccl_only(script: Script) -> bool:
    for call in script.calls_to(*PROCESS_GROUP_INITS):
        backend = argument(call.node, "backend", 0)
        if isinstance(backend, cst.SimpleString) and str(backend.evaluated_value).lower() == "nccl":
            return True
    return False


def _built_on_cpu(script: Script, call: CallSite, tensor: cst.BaseExpression) -> bool:
    """The tensor is a torch constructor call with no device (in place, or every value its name is
    given in the collective's function), and the name is never moved."""
    if isinstance(tensor, cst.Call):
        return _cpu_constructor(script, tensor)
    name = spell(tensor)
    if name is None or _moved(script, name):
        return False
    values = [b.value for b in script.index.bindings_of_in(name, call.place.scope)]
    return bool(values) and all(isinstance(v, cst.Call) and _cpu_constructor(script, v) for v in values)


def _cpu_constructor(script: Script, call: cst.Call) -> bool:
    if (script.index.qualify(call.func) or "") not in CONSTRUCTORS:
        return False
    device = argument(call, "device")
    return device is None or (isinstance(device, cst.SimpleString) and device.evaluated_value == "cpu")


def _moved(script: Script, name: str) -> bool:
    """`name.to(...)`, `name.cuda()` anywhere (in place for a module, or read into another name)."""
    return any(isinstance(c.node.func, cst.Attribute) and spell(c.node.func.value) == name for m in MOVES for c in script.method_calls(m))


def _never_moved(script: Script, model: cst.BaseExpression) -> bool:
    """A model whose name is never moved and never bound to a moved value (`net = Net().to(device)`)."""
    if isinstance(model, cst.Call):
        return _constructed(model)
    name = spell(model)
    if name is None or _moved(script, name):
        return False
    bindings = script.index.bindings_of(name)
    return bool(bindings) and all(b.value is not None and _constructed(b.value) for b in bindings)


def _constructed(value: cst.BaseExpression) -> bool:
    """A plain class call (`Net()`, `nn.Linear(2, 2)`): only that counts as a model left on the CPU;
    `Net().to(device)`, a function of the script's result (`build()`) or a parameter may be moved."""
    if not isinstance(value, cst.Call):
        return False
    last = (spell(value.func) or "").rsplit(".", 1)[-1]
    return last[:1].isupper()
