"""The runtime's setup once, first thing in the entry point, and its teardown once at its end.
What they are is the target's (migrate.runtime); where they go is decided here for all targets.

When the entry is a function whose caller goes on using the model it returns (`losses, model =
main()`, then `torch.save(model.state_dict(), path)` in the `__main__` block), the teardown goes
at the end of the caller's block instead: an FSDP or ZeRO-3 gather of the weights there needs the
process group (torch 2.13, 2 ranks: a RuntimeError once `dist.destroy_process_group()` ran).
Where it cannot go there, steps.trained_models has left the file unchanged.

Without a launcher (`python train.py`) the environment torchrun would set is filled in for a
single process, so the converted script still runs the way it did. Only what is missing is set: a
user's MASTER_ADDR/MASTER_PORT is kept, and a single process asks for port 0 (any free port), so
two plain runs on one machine do not collide on a fixed port.
"""

from __future__ import annotations

import re

import libcst as cst

from migrate.analysis.entry import returns_plain_value
from migrate.analysis.sites import Entry
from migrate.analysis.trained import caller_teardown
from migrate.runtime import Runtime
from migrate.steps.base import Context, expression, statement, statements

ENVIRONMENT = '''\

# {launcher} sets these; plain `python {script}` runs as a single process{port}
for {key}, {value} in dict({defaults}).items():
    {os}.environ.setdefault({key}, {value})
'''


def setup(ctx: Context) -> None:
    """The target's runtime starts first thing in the entry point (see migrate.runtime)."""
    runtime = ctx.distributed
    code = ctx.spell(runtime.setup)
    if runtime.environment:
        code = _environment(ctx, runtime) + code
    else:
        code = "\n" + code
    insert_setup(ctx, statements(code))


def _environment(ctx: Context, runtime: Runtime) -> str:
    key, value = _loop_names(ctx.source)
    defaults = ", ".join(f'{name}="{default}"' for name, default in runtime.environment)
    port = " (port 0: any free one)" if ("MASTER_PORT", "0") in runtime.environment else ""
    return ENVIRONMENT.format(launcher=runtime.launcher, script=ctx.script, port=port, key=key, value=value,
                              defaults=defaults, os=ctx.module_name("os"))


def insert_setup(ctx: Context, new: list[cst.BaseStatement]) -> None:
    entry = ctx.sites.entry
    assert entry is not None
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
    """The runtime's teardown at the end of the entry: for torch.distributed, `dist.barrier()`
    then `dist.destroy_process_group()`.

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
    stop = statements(ctx.spell(ctx.distributed.teardown))
    last = entry.teardown_after
    if last is None:
        return
    in_caller = _in_the_caller(ctx, entry)
    if in_caller is not None:
        anchor, after = in_caller
        if after:
            ctx.plan.insert_after(anchor, stop)
        else:
            ctx.plan.insert_before(anchor, stop)
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


def _in_the_caller(ctx: Context, entry: Entry) -> tuple[cst.BaseStatement, bool] | None:
    """(statement, after it?) in the caller of the entry function when that caller uses the model
    the function returns after the call; None: the teardown stays at the end of the entry."""
    if entry.scope.is_module:
        return None
    models = {site.spelling for site in ctx.sites.models if site.scope is entry.scope}
    place = caller_teardown(ctx.index, entry.scope, models)
    return place if isinstance(place, tuple) else None
