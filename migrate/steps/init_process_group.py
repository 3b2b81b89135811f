"""Process-group setup once, first thing in the entry point, and teardown once at its end.

Without a launcher (`python train.py`) the environment torchrun would set is filled in for a
single process, so the converted script still runs the way it did. Only what is missing is set: a
user's MASTER_ADDR/MASTER_PORT is kept, and a single process asks for port 0 (any free port), so
two plain runs on one machine do not collide on a fixed port.

DDP's backend: gloo for CPU tensors and, when CUDA is available, NCCL for CUDA tensors
(`"cpu:gloo,cuda:nccl"`): a script told to stay on the CPU (`--device cpu`) still all-reduces on a
GPU host. DeepSpeed puts the model on the GPU itself, so it keeps NCCL with CUDA.
"""

from __future__ import annotations

import re

import libcst as cst

from migrate.analysis.entry import returns_plain_value
from migrate.steps.base import Context, expression, statement, statements

SETUP = '''\

# {launcher} sets these; plain `python {script}` runs as a single process (port 0: any free one)
for {key}, {value} in dict(RANK="0", LOCAL_RANK="0", WORLD_SIZE="1", MASTER_ADDR="127.0.0.1", MASTER_PORT="0").items():
    {os}.environ.setdefault({key}, {value})
local_rank = int({os}.environ["LOCAL_RANK"])
if {torch}.cuda.is_available():
    {torch}.cuda.set_device(local_rank)
{init}
'''
BACKEND = '"nccl" if {torch}.cuda.is_available() else "gloo"'
# both backends where CUDA exists: the model may still be on the CPU (`--device cpu`)
DDP_BACKEND = '"cpu:gloo,cuda:nccl" if {torch}.cuda.is_available() else "gloo"'


def init_process_group(ctx: Context) -> None:
    """torchrun + torch.distributed (DDP, FSDP)."""
    backend = DDP_BACKEND.format(torch=ctx.torch)
    insert_setup(ctx, "torchrun", f"{ctx.dist}.init_process_group({backend})")


def init_deepspeed(ctx: Context) -> None:
    """The deepspeed launcher + deepspeed.init_distributed (which starts torch.distributed)."""
    backend = BACKEND.format(torch=ctx.torch)
    deepspeed = ctx.module_name("deepspeed")
    insert_setup(ctx, "the deepspeed launcher", f"{deepspeed}.init_distributed(dist_backend={backend})")


def insert_setup(ctx: Context, launcher: str, init: str) -> None:
    entry = ctx.sites.entry
    assert entry is not None
    key, value = _loop_names(ctx.source)
    code = SETUP.format(os=ctx.module_name("os"), torch=ctx.torch, init=init, launcher=launcher, script=ctx.script,
                        key=key, value=value)
    new = statements(code)
    if entry.setup_before is not None and entry.block.body.index(entry.setup_before) == 0:
        # at the top of a block: no blank line opening it, one between setup and the user's code
        new[0] = new[0].with_changes(leading_lines=new[0].leading_lines[1:])
        if not entry.setup_before.leading_lines:
            ctx.plan.replace(entry.setup_before, lambda updated: updated.with_changes(leading_lines=[cst.EmptyLine(indent=False)]))
    if entry.setup_before is not None:
        ctx.plan.insert_before(entry.setup_before, new)
    elif entry.teardown_after is not None:
        ctx.plan.insert_after(entry.teardown_after, new)
    if not entry.found:
        ctx.report("MIG108", "no main() or __main__ block runs the training: setup placed at module level", entry.setup_before)


def _loop_names(source: str) -> tuple[str, str]:
    """`key, value` for the setup loop, unless the script uses either name (setup may run at
    module level, where the loop would rebind the script's own global)."""
    if re.search(r"\b(key|value)\b", source):
        return "env_key", "env_value"
    return "key", "value"


def teardown(ctx: Context) -> None:
    """`dist.barrier()` then `dist.destroy_process_group()` at the end of the entry.

    The barrier keeps every rank alive until rank 0 has written its last files: a launcher that sees
    one rank fail kills the others, mid-write. And torch 2.13 can abort a rank at exit ("terminate
    called without an active exception"): a gloo worker thread still holds the last all-reduce of
    backward, whose thread-local state holds a Python object, and needs the GIL to free it while the
    interpreter is finalizing. Waiting in the barrier (GIL released) lets it finish first; measured
    on 2 CPU ranks, aborts went from 19% of runs to 6% (the barrier's own work can still carry the
    last reference).
    """
    entry = ctx.sites.entry
    assert entry is not None
    stop = statements(
        f"{ctx.dist}.barrier()  # no rank exits while rank 0 still writes its files\n"
        f"{ctx.dist}.destroy_process_group()\n"
    )
    last = entry.teardown_after
    if last is None:
        return
    if entry.teardown_before_return is not None and not returns_plain_value(entry):
        # `return train(args)`: the value is computed (training runs) before the group goes
        value = entry.teardown_before_return.value
        assert value is not None
        bound = {b.target for b in ctx.index.bindings if b.place.scope is entry.scope}
        name = "result" if "result" not in bound | set(entry.scope.params) else "returned"
        ctx.plan.insert_before(last, [statement(f"{name} = {ctx.code(value)}\n"), *stop])
        ctx.plan.replace_with(value, expression(name))
    elif entry.teardown_before_return is not None:
        ctx.plan.insert_before(last, stop)
    else:
        ctx.plan.insert_after(last, stop)
