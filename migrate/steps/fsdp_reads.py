"""What the script does with the model's weights outside its forward once `fully_shard` made them
shards, that the conversion cannot follow. Each rank then holds a DTensor of its own rows of
every weight, and torch 2.13 refuses:
- `copy.deepcopy(model)` or `AveragedModel(model)` (an EMA or target copy made after the shard):
  "FSDP does not support deepcopy";
- weights paired with another module's in `zip(...)` (`for ema_p, p in zip(ema.parameters(),
  model.parameters())`, a target network's soft update) or averaged into one
  (`ema.update_parameters(model)`): "mixed torch.Tensor and DTensor";
- a weight taken out to a plain tensor (`model.weight.detach().cpu()`): only this rank's rows,
  and the same mixed-tensor error once it meets a plain tensor;
- the same in a loop over `model.parameters()` or `model.named_parameters()`: the loop's weight
  viewed or turned into an array (`p.view(-1)`, `p.data.cpu().numpy()`, `np.histogram(p.data...)`),
  which DTensor refuses. In-place updates there (`p.data.clamp_(...)`, a WGAN clip) work on the
  shards and are kept.
The converted script would crash there, so the file is left unchanged (MIG307), the line named.
"""

from __future__ import annotations

import re

import libcst as cst

from migrate.analysis.index import spell
from migrate.analysis.models import aliases, is_after
from migrate.analysis.sites import ModelSite
from migrate.steps.base import Context

WEIGHT_READS = ("parameters", "named_parameters", "state_dict")
COPIES = ("copy.deepcopy", "torch.optim.swa_utils.AveragedModel")  # AveragedModel deep-copies the module it averages
LOOP_READS = frozenset({"view", "numpy", "tolist"})  # a DTensor has no plain view or array
TAKEN_OUT = re.compile(r"\.(?:weight|bias)(?:\.\w+|\[[^]]*\])*\.(?:cpu|numpy|tolist|detach|data)\b")


def fsdp_reads(ctx: Context) -> None:
    for site in ctx.sites.models:
        found = _unfollowable(ctx, site)
        if found is not None:
            node, what = found
            ctx.report("MIG307", f"{what}, after `{site.spelling}` is sharded: each rank "
                       "holds only its shards of the weights there (DTensors), which torch cannot copy or mix with "
                       "plain tensors, so the converted script would fail; do it before the shard or inside the "
                       "model's forward(), or gather with `.full_tensor()` on every rank; the file is left unchanged",
                       node)
            ctx.refused = True
            return


def _unfollowable(ctx: Context, site: ModelSite) -> tuple[cst.CSTNode, str] | None:
    index = ctx.index
    names = aliases(index, site)
    for call in index.calls:
        if not is_after(index, call.place.stmt, site):
            continue
        qualified = index.qualify(call.node.func) or ""
        arguments = [arg.value for arg in call.node.args]
        if qualified in COPIES and arguments and (spell(arguments[0]), call.place.scope.name) in names:
            return call.node, f"`{ctx.code(call.node)}` copies the sharded module"
        func = call.node.func
        if (isinstance(func, cst.Attribute) and func.attr.value == "update_parameters" and arguments
                and (spell(arguments[0]), call.place.scope.name) in names):
            return call.node, f"`{ctx.code(call.node)}` averages its weights into another module"
        if qualified == "zip" and len(arguments) > 1:
            sharded = [a for a in arguments if _reads_weights(a, names, call.place.scope.name)]
            if sharded and len(sharded) < len(arguments):
                return call.node, f"`{ctx.code(call.node)}` pairs its weights with another module's"
    found = _read_in_a_loop(ctx, site, names)
    if found is not None:
        return found
    for use in index.attributes:
        owner_root = use.owner.split(".")[0] if not use.owner.startswith("self.") else ".".join(use.owner.split(".")[:2])
        if use.called or use.node.attr.value not in ("weight", "bias"):
            continue
        if (owner_root, use.place.scope.name) not in names or not is_after(index, use.place.stmt, site):
            continue
        text = ctx.code(use.place.stmt)
        spelled = re.escape(f"{use.owner}.{use.node.attr.value}")
        if re.search(spelled.rsplit(r"\.", 1)[0] + TAKEN_OUT.pattern, text):
            return use.node, f"`{use.owner}.{use.node.attr.value}` is taken out of the model as a plain tensor"
    return None


def _reads_weights(value: cst.BaseExpression, names: set[tuple[str, str]], scope: str) -> bool:
    """`model.parameters()`, `model.state_dict().values()`: the model's weights, under one of its names."""
    while isinstance(value, cst.Call) and isinstance(value.func, cst.Attribute):
        owner = spell(value.func.value)
        if value.func.attr.value in WEIGHT_READS and (owner, scope) in names:
            return True
        value = value.func.value
    return False


def _read_in_a_loop(ctx: Context, site: ModelSite, names: set[tuple[str, str]]) -> tuple[cst.CSTNode, str] | None:
    """`for name, p in model.named_parameters(): ... p.view(-1) ... np.histogram(p.data...)` after the shard."""
    index = ctx.index
    for loop in index.loops:
        node = loop.node
        if not isinstance(node, cst.For) or not isinstance(node.iter, cst.Call):
            continue
        if not _reads_weights(node.iter, names, loop.place.scope.name) or not is_after(index, loop.place.stmt, site):
            continue
        weight = node.target.elements[-1].value if isinstance(node.target, cst.Tuple) else node.target
        if not isinstance(weight, cst.Name):
            continue
        read = _tensor_read(ctx, node.body, weight.value)
        if read is not None:
            return read, (f"`{ctx.code(read)}` reads a weight of the sharded model (`{ctx.code(node.iter)}`) as a plain "
                          "tensor")
    return None


def _tensor_read(ctx: Context, body: cst.CSTNode, weight: str) -> cst.CSTNode | None:
    """The first `weight...view(...)`/`.numpy()`/`.tolist()`, or `np.f(weight...)`, in `body`."""
    found: list[cst.CSTNode] = []

    class Reads(cst.CSTVisitor):
        def visit_Call(self, call: cst.Call) -> None:
            func = call.func
            if isinstance(func, cst.Attribute) and func.attr.value in LOOP_READS and _rooted(func.value, weight):
                found.append(call)
            elif (ctx.index.qualify(func) or "").startswith("numpy.") and any(_rooted(a.value, weight) for a in call.args):
                found.append(call)

    body.visit(Reads())
    return found[0] if found else None


def _rooted(value: cst.BaseExpression, weight: str) -> bool:
    """`p`, `p.data`, `p.data.cpu()`, `p.detach().cpu()`: an expression made from the loop's weight."""
    while isinstance(value, (cst.Attribute, cst.Call, cst.Subscript)):
        value = value.func if isinstance(value, cst.Call) else value.value
    return isinstance(value, cst.Name) and value.value == weight
