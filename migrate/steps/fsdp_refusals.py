"""FSDP2 refusals decided from the training code alone, before anything is edited.

A gradient of a gradient (`torch.autograd.grad(outputs, inputs, create_graph=True)`, the gradient
penalty of a WGAN-GP critic or of GAIL's discriminator) backpropagates a second time through the
graph of the first: FSDP2 has freed the weights it gathered for the first backward by then, and
the second one fails (measured, torch 2.13, one gloo rank: "setStorage: ... out of bounds for
storage of size 0"). DDP takes the shape (measured on 2 ranks). The file is left unchanged (MIG310).
"""

from __future__ import annotations

import os

import libcst as cst

from migrate.analysis.index import descendants, spell
from migrate.analysis.syntax import argument_value
from migrate.project import project_graph
from migrate.steps.base import Context


def refuse_double_backward(ctx: Context) -> None:
    """MIG310 at the first `torch.autograd.grad(..., create_graph=True)` of the script (or of the
    modules read with it): a penalty is computed in a helper the training code calls."""
    for call in ctx.index.calls_named("torch.autograd.grad"):
        created = argument_value(call.node, "create_graph", 4)
        if created is None or (isinstance(created, cst.Name) and created.value == "False"):
            continue
        ctx.report("MIG310", f"`{ctx.code(call.node).strip()}` takes a gradient of a gradient (create_graph=True) "
                   "through the model FSDP2 would shard, and its second backward needs the weights FSDP2 frees "
                   "after the first (measured, torch 2.13: \"setStorage ... out of bounds for storage of size 0\"); "
                   "the file is left unchanged: convert it with `migrate to-ddp`, which takes this shape", call.node)
        ctx.refused = True
        return
    _refuse_double_backward_in_modules(ctx)


def _refuse_double_backward_in_modules(ctx: Context) -> None:
    """The same in a module of the project the program does not hold (`import torchprob as gan`,
    whose package re-exports `gradient_penalty` from three imports down): MIG310 at the program's
    call of the function that takes the gradient of a gradient."""
    held = {part.path for part in ctx.program.parts} if ctx.program is not None else set()
    called = {(spell(call.node.func) or "").rsplit(".", 1)[-1]: call for call in reversed(ctx.index.calls)}
    graph = project_graph(ctx.path, ctx.read_module, ctx.source)
    for module in graph.modules():
        if module in held:
            continue
        text = ctx.read_module(module)
        tree = _parsed(text) if text is not None else None
        for function in (node for node in descendants(tree) if isinstance(node, cst.FunctionDef)) if tree else ():
            call = called.get(function.name.value)
            if call is None or not any(isinstance(n, cst.Call) and _double_backward(n) for n in descendants(function)):
                continue
            where = os.path.relpath(module, os.path.dirname(ctx.path))
            ctx.report("MIG310", f"`{ctx.code(call.node.func)}(...)` runs `{function.name.value}()` of {where}, which takes "
                       "a gradient of a gradient (`torch.autograd.grad(..., create_graph=True)`) through the model FSDP2 "
                       "would shard, and its second backward needs the weights FSDP2 frees after the first; the file is "
                       "left unchanged: convert it with `migrate to-ddp`, which takes this shape", call.node)
            ctx.refused = True
            return


def _double_backward(call: cst.Call) -> bool:
    """`torch.autograd.grad(..., create_graph=True)` (or `autograd.grad`, `grad` spelled through an import)."""
    if not (spell(call.func) or "").endswith("autograd.grad"):
        return False
    created = argument_value(call, "create_graph", 4)
    return created is not None and not (isinstance(created, cst.Name) and created.value == "False")


def _parsed(text: str) -> cst.Module | None:
    try:
        return cst.parse_module(text)
    except (cst.ParserSyntaxError, RecursionError, ValueError):
        return None
