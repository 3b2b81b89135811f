"""The runtime's setup once, first thing in the entry point, and its teardown on every way out of
it after setup: before each `return` from there on, and at its end when the end can be reached
(never after a `while True:` that nothing breaks out of). What they are is the target's
(migrate.runtime); where they go is decided here for all targets.

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

import os
import re
from dataclasses import dataclass

import libcst as cst

from migrate.analysis.index import child_nodes, descendants, spell
from migrate.analysis.models import foreign_method
from migrate.analysis.sites import Entry
from migrate.analysis.trained import caller_teardown
from migrate.rewrite import leading_lines
from migrate.runtime import Runtime
from migrate.steps.base import Context, expression, statement, statements

ENVIRONMENT = '''\

# {launcher} sets these; plain `python {script}` runs as a single process{port}
for {key}, {value} in dict({defaults}).items():
    {os}.environ.setdefault({key}, {value})
'''


# the backend DDP and FSDP start: gloo for CPU tensors, NCCL for CUDA ones (migrate.targets.ddp)
GPU_BACKEND = re.compile(r'"cpu:gloo,cuda:nccl" if [\w.]+\.cuda\.is_available\(\) else "gloo"\)')


def setup(ctx: Context) -> None:
    """The target's runtime starts first thing in the entry point (see migrate.runtime). A model
    that makes sparse gradients gets gloo on a GPU host too: NCCL cannot all-reduce them (MIG136)."""
    runtime = ctx.distributed
    code = ctx.spell(runtime.setup)
    through_module = ctx.wrapper is not None and ctx.wrapper.through_module  # DDP (FSDP2 takes no sparse gradients)
    sparse = sparse_embedding(ctx) if through_module and GPU_BACKEND.search(code) else None
    if sparse is not None:
        code = GPU_BACKEND.sub('"gloo")  # the model\'s sparse gradients: NCCL cannot all-reduce them', code)
        ctx.report("MIG136", f"`{sparse.code}`{sparse.where} makes sparse gradients, which NCCL cannot all-reduce "
                   "(\"NCCL does not support all_reduce with sparse tensors\" at the first backward): the process group "
                   "is gloo on a GPU host too", ctx.sites.entry.setup_before if ctx.sites.entry is not None else None)
    if runtime.environment:
        code = _environment(ctx, runtime) + code
    else:
        code = "\n" + code
    insert_setup(ctx, statements(code))


@dataclass(frozen=True)
class SparseLayer:
    """An embedding that makes sparse gradients, as written, and where (the module's file, or "")."""

    code: str
    where: str


def sparse_embedding(ctx: Context) -> SparseLayer | None:
    """`nn.EmbeddingBag(n, d, sparse=True)` in the program, or in the `__init__` of a trained model's
    class from a module of the project the program does not hold."""
    found = next((call.node for call in ctx.index.calls if _sparse(call.node)), None)
    if found is not None:
        return SparseLayer(ctx.code(found), "")
    folder = os.path.dirname(ctx.path)
    for site in ctx.sites.models:
        for binding in ctx.index.bindings_of(site.spelling):
            built = _built_by(binding.value)
            qualified = ctx.index.qualify(built.func) if built is not None else None
            init = foreign_method(folder, qualified, "__init__", ctx.read_module) if qualified else None
            layer = next((n for n in descendants(init) if isinstance(n, cst.Call) and _sparse(n)), None) if init else None
            if layer is not None and built is not None and qualified:
                module = qualified.rpartition(".")[0].replace(".", "/") + ".py"
                return SparseLayer(cst.Module([]).code_for_node(layer), f" (in `{ctx.code(built.func)}` of {module})")
    return None


def _built_by(value: cst.BaseExpression | None) -> cst.Call | None:
    """The constructor call under a chain of method calls: `Net(a).to(device)` -> `Net(a)`."""
    while isinstance(value, cst.Call) and isinstance(value.func, cst.Attribute) and isinstance(value.func.value, cst.Call):
        value = value.func.value
    return value if isinstance(value, cst.Call) else None


def _sparse(call: cst.Call) -> bool:
    """`nn.Embedding(..., sparse=True)` or `nn.EmbeddingBag(..., sparse=True)`, by the names' last part."""
    name = (spell(call.func) or "").rsplit(".", 1)[-1]
    return name in ("Embedding", "EmbeddingBag") and any(
        a.keyword is not None and a.keyword.value == "sparse" and spell(a.value) == "True" for a in call.args)


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
        new[0] = new[0].with_changes(leading_lines=leading_lines(new[0])[1:])
        if not leading_lines(entry.setup_before):
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
    """The runtime's teardown on every way out of the entry after setup: for torch.distributed,
    `dist.barrier()` then `dist.destroy_process_group()`.

    It goes before each `return` of the entry function that comes after setup (an early
    `if args.test_only: ...; return`, the `return` that ends a `while True:` loop once the step
    count is reached), and after the entry's last statement only when the end can be reached: never
    after a `while True:` with no `break` of its own, nor after a `raise`. Not a `try: finally:`: a
    barrier in a `finally` would also run on an exception, where the other ranks may never reach it.

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
    last = entry.teardown_after
    if last is None:
        return
    in_caller = _in_the_caller(ctx, entry)
    if in_caller is not None:
        anchor, after = in_caller
        if after:
            ctx.plan.insert_after(anchor, _stop(ctx))
        else:
            ctx.plan.insert_before(anchor, _stop(ctx))
        return
    for holder, returned in _returns_after_setup(entry):
        if returned is not entry.teardown_before_return:
            _before_return(ctx, entry, holder, returned)
    if entry.teardown_before_return is not None:
        _before_return(ctx, entry, last, entry.teardown_before_return)
    elif _can_end(last):
        ctx.plan.insert_after(last, _stop(ctx))


def _stop(ctx: Context) -> list[cst.BaseStatement]:
    return statements(ctx.spell(ctx.distributed.teardown))


def _before_return(ctx: Context, entry: Entry, holder: cst.CSTNode, returned: cst.Return) -> None:
    """Teardown right before `returned`. `return train(args)` still trains: its value is bound
    first (`result = train(args)`), then the teardown, then `return result`. A `return` sharing a
    line with what comes before it (`save(); return`) gets a line of its own."""
    value = returned.value
    lines = _stop(ctx)
    if value is not None and any(isinstance(n, cst.Call) for n in descendants(value)):
        name = _result_name(ctx, entry)
        lines = [statement(f"{name} = {ctx.code(value)}\n"), *lines]
        ctx.plan.replace_with(value, expression(name))
    if isinstance(holder, cst.SimpleStatementSuite):
        ctx.plan.replace(holder, lambda updated: _unfolded(updated, lines))
    elif isinstance(holder, cst.SimpleStatementLine) and len(holder.body) > 1:
        ctx.plan.remove_part(holder, returned)
        ctx.plan.insert_after(holder, [*lines, cst.SimpleStatementLine(body=[_last(returned)])])
    else:
        assert isinstance(holder, cst.BaseStatement)
        ctx.plan.insert_before(holder, lines)


def _result_name(ctx: Context, entry: Entry) -> str:
    bound = {b.target for b in ctx.index.bindings if b.place.scope is entry.scope}
    return "result" if "result" not in bound | set(entry.scope.params) else "returned"


def _unfolded(suite: cst.CSTNode, lines: list[cst.BaseStatement]) -> cst.IndentedBlock:
    """`if done: save(); return` as an indented block, with `lines` before its `return` (another
    step may have made the block already: `print()` under a rank guard)."""
    if isinstance(suite, cst.SimpleStatementSuite):
        suite = cst.IndentedBlock(body=[cst.SimpleStatementLine(body=[_last(small)]) for small in suite.body])
    assert isinstance(suite, cst.IndentedBlock)
    body: list[cst.BaseStatement] = []
    for stmt in suite.body:
        if isinstance(stmt, cst.SimpleStatementLine) and isinstance(stmt.body[-1], cst.Return):
            if len(stmt.body) > 1:
                body.append(stmt.with_changes(body=[*stmt.body[:-2], _last(stmt.body[-2])]))
            body.extend([*lines, cst.SimpleStatementLine(body=[stmt.body[-1]])])
        else:
            body.append(stmt)
    return suite.with_changes(body=body)


def _last(small: cst.BaseSmallStatement) -> cst.BaseSmallStatement:
    return small.with_changes(semicolon=cst.MaybeSentinel.DEFAULT)


def _returns_after_setup(entry: Entry) -> list[tuple[cst.CSTNode, cst.Return]]:
    """Each `return` of the entry function in the statements from setup on (not those of the
    functions and classes defined in it), with the line or one-line suite that holds it."""
    if entry.scope.is_module or entry.setup_before is None:
        return []
    body = list(entry.block.body)
    found: list[tuple[cst.CSTNode, cst.Return]] = []
    for stmt in body[body.index(entry.setup_before):]:
        found.extend(_returns_in(stmt))
    return found


def _returns_in(node: cst.CSTNode) -> list[tuple[cst.CSTNode, cst.Return]]:
    if isinstance(node, (cst.SimpleStatementLine, cst.SimpleStatementSuite)):
        return [(node, small) for small in node.body if isinstance(small, cst.Return)]
    if isinstance(node, (cst.FunctionDef, cst.ClassDef, cst.BaseExpression)):
        return []
    return [found for child in child_nodes(node) for found in _returns_in(child)]


def _can_end(stmt: cst.BaseStatement) -> bool:
    """Whether running `stmt` can go on to what follows it: not after `raise`, nor after a
    `while True:` that nothing breaks out of."""
    if isinstance(stmt, cst.SimpleStatementLine):
        return not any(isinstance(small, cst.Raise) for small in stmt.body)
    if isinstance(stmt, cst.While) and _always_true(stmt.test):
        return _breaks_out(stmt.body)
    return True


def _always_true(test: cst.BaseExpression) -> bool:
    if isinstance(test, cst.Name):
        return test.value == "True"
    return isinstance(test, cst.Integer) and test.evaluated_value != 0


def _breaks_out(node: cst.CSTNode) -> bool:
    """A `break` under `node` that leaves the loop `node` is the body of (one in a nested loop's
    body leaves that loop; one in its `else:` leaves ours)."""
    if isinstance(node, cst.Break):
        return True
    if isinstance(node, (cst.FunctionDef, cst.ClassDef, cst.BaseExpression)):
        return False
    if isinstance(node, (cst.For, cst.While)):
        return node.orelse is not None and _breaks_out(node.orelse)
    return any(_breaks_out(child) for child in child_nodes(node))


def _in_the_caller(ctx: Context, entry: Entry) -> tuple[cst.BaseStatement, bool] | None:
    """(statement, after it?) in the caller of the entry function when that caller uses the model
    the function returns after the call; None: the teardown stays at the end of the entry."""
    if entry.scope.is_module:
        return None
    models = {site.spelling for site in ctx.sites.models if site.scope is entry.scope}
    place = caller_teardown(ctx.index, entry.scope, models)
    return place if isinstance(place, tuple) else None
