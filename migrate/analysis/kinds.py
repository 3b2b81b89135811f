"""What a value of the script is known to be, read from where it is made (analysis.values.origins):
a DataLoader, a tensor, a dataset, a module, a number or None.

Generated code that reads an attribute of the script's names (`loader.batch_size` in a DeepSpeed
override) asks first: the batch size of a tensor, a dataset or an int does not exist, and a name
made elsewhere (another module's helper, a torchtext iterator) is not known to have one.
"""

from __future__ import annotations

import enum

import libcst as cst

from migrate.analysis.index import Scope, ScriptIndex, spell
from migrate.analysis.loaders import DATA_LOADERS
from migrate.analysis.syntax import argument
from migrate.analysis.values import Origin, literal_value, origins


class Kind(enum.Enum):
    """What a value is, in the words a finding uses."""

    DATA_LOADER = "a DataLoader"
    TENSOR = "a tensor"
    DATASET = "a dataset"
    MODULE = "a module"
    NUMBER = "a number"
    NONE = "None"


TENSOR_FACTORIES = frozenset(
    f"torch.{name}"
    for name in ("tensor", "as_tensor", "from_numpy", "randn", "rand", "randint", "randperm", "zeros", "ones", "empty",
                 "full", "arange", "linspace", "cat", "stack", "zeros_like", "ones_like", "randn_like", "rand_like",
                 "Tensor", "FloatTensor", "LongTensor", "IntTensor", "DoubleTensor", "HalfTensor", "BoolTensor", "ByteTensor")
)
SAME_KIND_METHODS = frozenset(("to", "cuda", "cpu", "float", "half", "double", "bfloat16", "long", "int", "detach", "clone",
                               "contiguous", "train", "eval", "requires_grad_"))
MAX_CLASS_DEPTH = 8


def value_kind(index: ScriptIndex, expr: cst.BaseExpression, scope: Scope | None = None) -> Kind | None:
    """What `expr` (read in `scope`) is, when every place it comes from makes the same kind of
    value; None when that is not known."""
    kinds = {origin_kind(index, origin) for origin in origins(index, expr, scope)}
    return kinds.pop() if len(kinds) == 1 else None


def origin_kind(index: ScriptIndex, origin: Origin) -> Kind | None:
    """What one place makes: a literal number, `None`, or the value of a call it can tell."""
    node = origin.node
    if isinstance(node, cst.Name) and node.value == "None":
        return Kind.NONE
    number = literal_value(index, node, origin.scope) if isinstance(node, (cst.Integer, cst.Float, cst.UnaryOperation)) else None
    if number is not None:
        return Kind.NUMBER
    if isinstance(node, cst.Call):
        return _call_kind(index, node, origin.scope)
    return None


def _call_kind(index: ScriptIndex, call: cst.Call, scope: Scope) -> Kind | None:
    """DataLoader(...), torch.randn(...), TensorDataset(...), nn.Linear(...), a class of this file
    deriving from a Dataset or an nn.Module, or `x.to(device)` of any of those."""
    qualified = index.qualify(call.func) or ""
    if qualified in DATA_LOADERS:
        return Kind.DATA_LOADER
    if qualified in TENSOR_FACTORIES:
        return Kind.TENSOR
    if qualified in index.classes:
        return _class_kind(index, qualified, 0)
    last = qualified.rsplit(".", 1)[-1]
    if qualified.startswith("torchvision.datasets.") and last[:1].isupper() or qualified.startswith("torch.utils.data.") and last.endswith(("Dataset", "Subset")):
        return Kind.DATASET
    if qualified.startswith("torch.nn.") and last[:1].isupper() or qualified.startswith("torchvision.models."):
        return Kind.MODULE
    if isinstance(call.func, cst.Attribute) and call.func.attr.value in SAME_KIND_METHODS and spell(call.func.value) != "torch":
        return value_kind(index, call.func.value, scope)
    return None


def _class_kind(index: ScriptIndex, name: str, depth: int) -> Kind | None:
    """A class of this file that derives from a dataset or a module class (through its own classes)."""
    node = index.classes.get(name)
    if node is None or depth > MAX_CLASS_DEPTH:
        return None
    for base in node.bases:
        qualified = index.qualify(base.value) or ""
        if qualified in index.classes:
            found = _class_kind(index, qualified, depth + 1)
        elif qualified.rsplit(".", 1)[-1].endswith("Dataset"):
            found = Kind.DATASET
        elif qualified.startswith("torch.nn."):
            found = Kind.MODULE
        else:
            found = None
        if found is not None:
            return found
    return None


def data_loaders(index: ScriptIndex, expr: cst.BaseExpression, scope: Scope | None = None) -> list[cst.Call] | None:
    """The DataLoader calls `expr` is made by, or None when it is not known to be a DataLoader."""
    found = origins(index, expr, scope)
    calls = [o.node for o in found if isinstance(o.node, cst.Call) and origin_kind(index, o) is Kind.DATA_LOADER]
    return calls if len(calls) == len(found) else None


def unbatched(call: cst.Call) -> str | None:
    """Why a DataLoader's `.batch_size` is None, not its batch size: `batch_size=None` (the
    dataset yields whole batches) or a `batch_sampler` (it chooses the batches); None when it batches."""
    batch = argument(call, "batch_size", 1)
    if batch is not None and isinstance(batch.value, cst.Name) and batch.value.value == "None":
        return "batch_size=None (its dataset yields whole batches)"
    sampler = argument(call, "batch_sampler", 4)
    if sampler is not None and not (isinstance(sampler.value, cst.Name) and sampler.value.value == "None"):
        return "a batch_sampler (which chooses the batches)"
    return None
