"""Finds the places that name a device: `torch.device("cuda")`, `torch.device("cuda", 0)`,
`device = 0`, `"cuda:0"`, `f"cuda:{args.gpu}"`, `.cuda()`, `.cuda(args.gpu)`, `.to(0)`,
`device="cuda:0"` / `map_location="cuda:0"` arguments, and the script's own
`torch.cuda.set_device(...)` calls.

Not every "cuda" is a device: `device_type = "cuda"` is what `torch.autocast` takes, and
`num_gpus = 1` is a count. A binding names a device by its name (`device`, `dev`, `gpu`,
`gpu_id`, ...) and its value (a CUDA string, a device index, `torch.device(...)`).
"""

from __future__ import annotations

import libcst as cst

from migrate.analysis.index import Binding, CallSite, ScriptIndex, spell

DEVICE_WORDS = ("device", "gpu", "cuda")
# words that make a name something other than a device: a kind of device, a count, a switch
NOT_A_DEVICE = frozenset({"type", "kind", "n", "num", "number", "count", "cnt", "total", "max", "min", "per", "use", "world", "size"})
INDEX_HOLDERS = frozenset({"device", "dev", "gpu"})  # `gpu = 0`, `device = 0`
INDEX_SUFFIXES = frozenset({"id", "idx", "index", "ordinal"})  # `gpu_id = 0`, `device_index = 0`


def is_cuda_literal(node: cst.CSTNode) -> bool:
    """"cuda", "cuda:0" (any index)."""
    if not isinstance(node, cst.SimpleString):
        return False
    value = node.evaluated_value
    return isinstance(value, str) and (value == "cuda" or value.startswith("cuda:"))


def is_plain_cuda(node: cst.CSTNode) -> bool:
    """"cuda" without an index: the current device, which setup makes the local rank's GPU."""
    return isinstance(node, cst.SimpleString) and node.evaluated_value == "cuda"


def is_indexed_cuda(node: cst.CSTNode) -> bool:
    """A CUDA device with an index chosen by the script: "cuda:0", f"cuda:{args.gpu}",
    "cuda:{}".format(gpu), "cuda:" + str(gpu)."""
    if isinstance(node, cst.SimpleString):
        value = node.evaluated_value
        return isinstance(value, str) and value.startswith("cuda:")
    if isinstance(node, cst.FormattedString):
        first = node.parts[0] if node.parts else None
        return isinstance(first, cst.FormattedStringText) and first.value.startswith("cuda:")
    if isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute) and node.func.attr.value == "format":
        return is_indexed_cuda(node.func.value)
    if isinstance(node, cst.BinaryOperation) and isinstance(node.operator, cst.Add):
        return is_indexed_cuda(node.left) or (
            isinstance(node.left, cst.SimpleString) and node.left.evaluated_value == "cuda:"
        )
    return False


def is_int_literal(node: cst.CSTNode) -> bool:
    return isinstance(node, cst.Integer)


def names_a_device(name: str) -> bool:
    """`device`, `DEVICE`, `gpu_id`, `cuda_device`; not `device_type`, `n_gpu`, `num_gpus`."""
    words = name.split(".")[-1].lower().split("_")
    return any(w == "dev" or w.startswith(DEVICE_WORDS) for w in words) and not NOT_A_DEVICE.intersection(words)


def names_a_device_index(name: str) -> bool:
    """Names an integer may be a device index under: `device`, `gpu`, `gpu_id`, `device_idx`."""
    words = name.split(".")[-1].lower().split("_")
    if NOT_A_DEVICE.intersection(words):
        return False
    if words[-1] in INDEX_HOLDERS:
        return True
    return len(words) >= 2 and words[-1] in INDEX_SUFFIXES and words[-2] in INDEX_HOLDERS | {"cuda"}


def is_device_value(index: ScriptIndex, value: cst.BaseExpression, name: str) -> bool:
    """The value a device binding may hold: a CUDA string, an index (for an index's name),
    `torch.device(...)`, or a conditional with one of those in a branch."""
    if isinstance(value, cst.IfExp):
        return any(is_device_value(index, branch, name) for branch in (value.body, value.orelse))
    if is_int_literal(value):
        return names_a_device_index(name)
    if is_cuda_literal(value) or is_indexed_cuda(value):
        return True
    return isinstance(value, cst.Call) and index.qualify(value.func) == "torch.device"


def device_bindings(index: ScriptIndex) -> list[Binding]:
    """`device = ...` (or `gpu_id`, ...) whose value is a device: CUDA by a literal, an index,
    or `torch.device(...)`."""
    return list(index.derived("device_bindings", lambda: _device_bindings(index)))


def _device_bindings(index: ScriptIndex) -> list[Binding]:
    return [
        binding
        for binding in index.bindings
        if binding.value is not None and names_a_device(binding.target) and is_device_value(index, binding.value, binding.target)
    ]


def torch_device_calls(index: ScriptIndex) -> list[CallSite]:
    """`torch.device(...)` calls naming CUDA (by a literal, an index or a formatted index)."""
    return [c for c in index.calls_named("torch.device") if _names_cuda(c.node)]


def device_type_argument(call: cst.Call) -> cst.Arg | None:
    """The argument of `torch.device(...)` that says the device: the first, or `type=`."""
    for position, arg in enumerate(call.args):
        if (arg.keyword is None and position == 0) or (arg.keyword is not None and arg.keyword.value == "type"):
            return arg
    return None


def device_index_argument(call: cst.Call) -> cst.Arg | None:
    """`torch.device("cuda", 0)` / `torch.device("cuda", index=0)`: the index argument."""
    for position, arg in enumerate(call.args):
        if (arg.keyword is None and position == 1) or (arg.keyword is not None and arg.keyword.value == "index"):
            return arg
    return None


def _names_cuda(call: cst.Call) -> bool:
    arg = device_type_argument(call)
    if arg is None:
        return False
    branches = (arg.value.body, arg.value.orelse) if isinstance(arg.value, cst.IfExp) else (arg.value,)
    return any(is_cuda_literal(b) or is_indexed_cuda(b) or is_int_literal(b) for b in branches)


def cuda_method_calls(index: ScriptIndex) -> list[CallSite]:
    """`x.cuda()`, `x.cuda(0)`, `x.cuda(gpu)` on any value (not `torch.cuda.*` functions)."""
    return [
        c
        for c in index.calls
        if isinstance(c.node.func, cst.Attribute)
        and c.node.func.attr.value == "cuda"
        and spell(c.node.func.value) != "torch"
    ]


def numbered_device_arguments(index: ScriptIndex) -> list[tuple[CallSite, cst.Arg]]:
    """A device index the script chose, passed to a call: `x.to(0)`, `x.to("cuda:1")`,
    `torch.zeros(3, device="cuda:0")`, `torch.load(path, map_location="cuda:0")`."""
    found: list[tuple[CallSite, cst.Arg]] = []
    for call in index.calls:
        for position, arg in enumerate(call.node.args):
            keyword = arg.keyword.value if arg.keyword is not None else None
            moves = keyword is None and position == 0 and isinstance(call.node.func, cst.Attribute) and call.node.func.attr.value == "to"
            if (moves or keyword in ("device", "map_location")) and (is_int_literal(arg.value) or is_indexed_cuda(arg.value)):
                found.append((call, arg))
    return found


def set_device_calls(index: ScriptIndex) -> list[CallSite]:
    """The script's own `torch.cuda.set_device(...)`: it would put every rank on one GPU."""
    return index.calls_named("torch.cuda.set_device")


def runs_only_with_cuda(index: ScriptIndex, stmt: cst.BaseStatement) -> bool:
    """Whether `stmt` runs only where CUDA is there: in the body of an `if` (in its function) whose
    test holds only when `torch.cuda.is_available()` does (`if torch.cuda.is_available() and not
    args.disable_cuda:`). There a plain `"cuda"` needs no CPU fallback."""
    chain = index.enclosing_statements(stmt)
    for inner, outer in zip(chain, chain[1:]):
        if isinstance(outer, (cst.FunctionDef, cst.ClassDef)):
            return False
        if (isinstance(outer, cst.If) and isinstance(outer.body, cst.IndentedBlock) and inner in outer.body.body
                and _needs_cuda(index, outer.test)):
            return True
    return False


def _needs_cuda(index: ScriptIndex, test: cst.BaseExpression) -> bool:
    """`torch.cuda.is_available()`, alone or as a term of an `and`."""
    if isinstance(test, cst.BooleanOperation) and isinstance(test.operator, cst.And):
        return _needs_cuda(index, test.left) or _needs_cuda(index, test.right)
    return isinstance(test, cst.Call) and index.qualify(test.func) == "torch.cuda.is_available"
