"""FSDP2 refusals decided from the training code alone, before anything is edited.

A gradient of a gradient (`torch.autograd.grad(outputs, inputs, create_graph=True)`, the gradient
penalty of a WGAN-GP critic or of GAIL's discriminator) backpropagates a second time through the
graph of the first: FSDP2 has freed the weights it gathered for the first backward by then, and
the second one fails (measured, torch 2.13, one gloo rank: "setStorage: ... out of bounds for
storage of size 0"). DDP takes the shape (measured on 2 ranks). The file is left unchanged (MIG310).
"""

from __future__ import annotations

import libcst as cst

from migrate.analysis.syntax import argument_value
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
