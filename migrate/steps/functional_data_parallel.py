"""`nn.parallel.data_parallel(module, inputs, device_ids)`, nn.DataParallel as one call, runs the
module on every GPU it lists, and a distributed launcher runs it that way in each process: with
`--ngpu 4` and four processes, every process drives every GPU. Each process has its own GPU now,
so the call becomes a plain call of the module on this process's device (`module(inputs)`, a tuple
of inputs spread, `module_kwargs` passed by name), as DDP scripts written by hand do (MIG003).
"""

from __future__ import annotations

import libcst as cst

from migrate.analysis.models import data_parallel_module
from migrate.analysis.syntax import argument
from migrate.steps.base import Context, expression
from migrate.target_options import keeps_global_batch


def functional_data_parallel(ctx: Context) -> None:
    """For the targets with --keep-global-batch (DDP, FSDP, Horovod): the finding names it."""
    _plain_calls(ctx, keep_global_batch_option=True)


def functional_data_parallel_in_engine(ctx: Context) -> None:
    """For DeepSpeed, whose batch is the config's micro-batch per process (no --keep-global-batch)."""
    _plain_calls(ctx, keep_global_batch_option=False)


def _plain_calls(ctx: Context, keep_global_batch_option: bool) -> None:
    for call in ctx.index.calls:
        module = data_parallel_module(ctx.index, call.node)
        inputs = argument(call.node, "inputs", 1) if module is not None else None
        if module is None or inputs is None:
            continue
        direct = expression(_direct_call(ctx, module, inputs.value, argument(call.node, "module_kwargs", 5)))
        ctx.plan.replace_with(call.node, direct)
        batch = "; each process now takes a whole batch where data_parallel split one across the GPUs"
        if keep_global_batch_option:
            batch = "" if keeps_global_batch(ctx.options) else batch + " (--keep-global-batch keeps the global batch)"
        ctx.report("MIG003", f"`{ctx.code(call.node)}` now runs `{ctx.code(direct)}`: each process drives its own GPU "
                   "under the launcher, and data_parallel would spread every process's batch over all the GPUs it "
                   f"lists{batch}", call.node)


def _direct_call(ctx: Context, module: cst.BaseExpression, inputs: cst.BaseExpression, kwargs: cst.Arg | None) -> str:
    """`module(x)`, `module(a, b)` for a tuple of inputs, `module(x, **kw)`."""
    if isinstance(inputs, cst.Tuple):
        given = [ctx.code(element.value) if not isinstance(element, cst.StarredElement) else f"*{ctx.code(element.value)}"
                 for element in inputs.elements]
    else:
        given = [ctx.code(inputs)]
    if kwargs is not None and not (isinstance(kwargs.value, cst.Name) and kwargs.value.value == "None"):
        given.append(f"**{ctx.code(kwargs.value)}")
    return f"{ctx.code(module)}({', '.join(given)})"
