"""Process-group setup once, first thing in the entry point, and teardown once at its end.

Without a launcher (`python train.py`) the environment torchrun would set is filled in for a
single process, so the converted script still runs the way it did. NCCL with CUDA, gloo without.
"""

from __future__ import annotations

import libcst as cst

from migrate.steps.base import Context, statement, statements

SETUP = '''\

# {launcher} sets these; plain `python {script}` runs as a single process
if "LOCAL_RANK" not in {os}.environ:
    {os}.environ.update(RANK="0", LOCAL_RANK="0", WORLD_SIZE="1", MASTER_ADDR="127.0.0.1", MASTER_PORT="29500")
local_rank = int({os}.environ["LOCAL_RANK"])
if {torch}.cuda.is_available():
    {torch}.cuda.set_device(local_rank)
{init}
'''
BACKEND = '"nccl" if {torch}.cuda.is_available() else "gloo"'


def init_process_group(ctx: Context) -> None:
    """torchrun + torch.distributed (DDP, FSDP)."""
    backend = BACKEND.format(torch=ctx.torch)
    insert_setup(ctx, "torchrun", f"{ctx.dist}.init_process_group({backend})")


def init_deepspeed(ctx: Context) -> None:
    """The deepspeed launcher + deepspeed.init_distributed (which starts torch.distributed)."""
    backend = BACKEND.format(torch=ctx.torch)
    deepspeed = ctx.module_name("deepspeed")
    insert_setup(ctx, "the deepspeed launcher", f"{deepspeed}.init_distributed(dist_backend={backend})")


def insert_setup(ctx: Context, launcher: str, init: str) -> None:
    entry = ctx.sites.entry
    assert entry is not None
    code = SETUP.format(os=ctx.module_name("os"), torch=ctx.torch, init=init, launcher=launcher, script=ctx.script)
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


def teardown(ctx: Context) -> None:
    entry = ctx.sites.entry
    assert entry is not None
    stop = statement(f"{ctx.dist}.destroy_process_group()\n")
    last = entry.teardown_after
    if last is None:
        return
    if entry.teardown_before_return is not None:
        ctx.plan.insert_before(last, [stop])
    else:
        ctx.plan.insert_after(last, [stop])
