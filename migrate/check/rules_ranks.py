"""Check rules about what runs on which rank, in a script that sets up a process group: output on
every rank (prints and logs: DC401; checkpoints and files written: DC402; not what runs on no rank,
in the process that spawns the ranks or in a function nothing calls: migrate.check.processes; a
file opened for writing only to empty it, `with open(log, "w"): pass`, is told as such), and a
collective that only rank 0 reaches (DC501: the others never join it, and the job hangs; not the forward of a DDP model
under `torch.no_grad()`: it starts no gradient reduction, and the one broadcast of buffers it may
make takes the place of the one rank 0's next training forward then skips). Which statements run
on rank 0 only is migrate.analysis.guards'."""

from __future__ import annotations

import re
from collections.abc import Iterator

import libcst as cst

from migrate.analysis.gradients import NO_GRAD, SET_GRAD_ENABLED
from migrate.analysis.index import CallSite, Scope, reachable, spell
from migrate.analysis.training import callee_scope
from migrate.check.facts import DDP_WRAPPERS, FSDP1_WRAPPERS, Hit, Script, argument, is_literal
from migrate.analysis.guards import RANK_TEXT, called_on_rank_zero_only, on_rank_zero
from migrate.check.processes import in_launcher, never_called

LOG_LEVELS = ("debug", "info", "warning", "warn")
PRINT_SILENCERS = re.compile(r"setup_for_distributed|suppress_print|disable_print|builtins\.print|__builtin__\.print")
COLLECTIVES = tuple(f"torch.distributed.{name}" for name in (
    "barrier", "monitored_barrier", "all_reduce", "all_gather", "all_gather_object", "all_gather_into_tensor",
    "reduce_scatter", "reduce_scatter_tensor", "broadcast", "broadcast_object_list", "reduce", "gather",
    "gather_object", "scatter", "all_to_all")) + tuple(
    f"torch.distributed.checkpoint.state_dict.{name}" for name in (
        "get_model_state_dict", "get_optimizer_state_dict", "get_state_dict")) + (
    "deepspeed.zero.GatheredParameters",)
HOROVOD_COLLECTIVES = ("allreduce", "allreduce_", "allgather", "allgather_object", "broadcast", "broadcast_",
                       "broadcast_object", "broadcast_parameters", "broadcast_optimizer_state", "barrier", "join")


def output_on_every_rank(script: Script) -> Iterator[Hit]:
    """DC401: print() and logging below ERROR outside any rank-0 guard."""
    if not script.initialises:
        return
    silenced = PRINT_SILENCERS.search(script.code) or script.index.bindings_of("print")
    for call in _prints(script) if not silenced else []:
        if not _not_per_rank(script, call) and not RANK_TEXT.search(script.text(call.node)):
            yield Hit(call.node, "print on every rank: each line comes out once per process; print under "
                      "`if rank == 0:` (or reduce the figure first when it differs per rank)")
    for call in _logs(script):
        if not _not_per_rank(script, call) and not RANK_TEXT.search(script.text(call.node)):
            yield Hit(call.node, "log on every rank: each record comes out once per process; log under "
                      "`if rank == 0:`, or set the level per rank")


def _not_per_rank(script: Script, call: CallSite) -> bool:
    """The call runs on rank 0 only, in the process that spawns the ranks, or never."""
    return on_rank_zero(script.index, call.place.stmt, call.node) or in_launcher(script, call.place.stmt) or \
        never_called(script, call.place.scope)


def _prints(script: Script) -> list[CallSite]:
    return [call for call, name in script.named_calls if name == "print" and "print" not in script.index.imports]


def _logs(script: Script) -> list[CallSite]:
    """`logging.info(...)`, and `logger.info(...)` of a logger from logging.getLogger, when no
    logging set-up of the script reads the rank (`setLevel(INFO if rank == 0 else WARN)`)."""
    loggers = {b.target for b in script.index.bindings if isinstance(b.value, cst.Call)
               and (script.index.qualify(b.value.func) or "") == "logging.getLogger"}
    setups = [c for c, n in script.named_calls if n.startswith("logging.") or n.rsplit(".", 1)[-1] in ("setLevel", "addHandler")]
    if any(RANK_TEXT.search(script.text(c.place.stmt)) or on_rank_zero(script.index, c.place.stmt) for c in setups):
        return []
    found = []
    for call, name in script.named_calls:
        owner, _, method = name.rpartition(".")
        if method in LOG_LEVELS and (owner == "logging" or owner in loggers):
            found.append(call)
    return found


FIGURE_SAVES = ("matplotlib.pyplot.savefig",)


def writes_on_every_rank(script: Script) -> Iterator[Hit]:
    """DC402: torch.save, open(..., "w") and matplotlib's savefig outside any rank-0 guard, to a path
    that is not per rank."""
    if not script.initialises:
        return
    for call, name in script.named_calls:
        path = argument(call.node, "f", 1) if name == "torch.save" else _written_path(call.node, name)
        if name in FIGURE_SAVES:
            path = argument(call.node, "fname", 0)
        if path is None or RANK_TEXT.search(script.text(path)) or _not_per_rank(script, call):
            continue
        if _only_emptied(script, call):
            yield Hit(call.node, "a file emptied on every rank: each process truncates the same file, and one that "
                      "gets there after rank 0 began writing it wipes those lines; empty it under `if rank == 0:`")
            continue
        what = "torch.save" if name == "torch.save" else "a figure saved" if name in FIGURE_SAVES else "a file opened for writing"
        yield Hit(call.node, f"{what} on every rank: every process writes the same file at once (a torn or "
                  "half-written checkpoint); write under `if rank == 0:`, after any gather every rank joins")


def _written_path(call: cst.Call, name: str) -> cst.BaseExpression | None:
    if name != "open" or not call.args:
        return None
    mode = argument(call, "mode", 1)
    if isinstance(mode, cst.SimpleString) and isinstance(mode.evaluated_value, str) and set(mode.evaluated_value) & set("wax"):
        return call.args[0].value
    return None


def _only_emptied(script: Script, call: CallSite) -> bool:
    """`with open(path, "w"): pass`: the file is created or emptied and nothing is written to it."""
    stmt = call.place.stmt
    if not isinstance(stmt, cst.With) or not any(item.item is call.node for item in stmt.items):
        return False
    body = stmt.body.body if isinstance(stmt.body, cst.IndentedBlock) else [stmt.body]
    smalls = [small for line in body if isinstance(line, (cst.SimpleStatementLine, cst.SimpleStatementSuite))
              for small in line.body]
    return len(smalls) == len(body) and all(_does_nothing(small) for small in smalls)


def _does_nothing(small: cst.BaseSmallStatement) -> bool:
    return isinstance(small, cst.Pass) or (isinstance(small, cst.Expr) and isinstance(small.value, (cst.Ellipsis,
                                                                                                    cst.SimpleString)))


def collective_on_rank_zero(script: Script) -> Iterator[Hit]:
    """DC501: a collective (or a wrapped model's forward, or a function of the script that runs
    one) that only rank 0 reaches."""
    direct = _collectives(script)
    running = _functions_running(script, direct)
    for call in script.index.calls:
        what = direct.get(id(call.node))
        if what is None:
            callee = callee_scope(script.index, call)
            if callee is None or callee.name not in running or called_on_rank_zero_only(script.index, callee):
                continue  # a function only rank 0 calls: the collective inside it is the finding
            what = f"`{callee.name.rsplit('.', 1)[-1]}()`, which runs a collective"
        if on_rank_zero(script.index, call.place.stmt, call.node):
            yield Hit(call.node, f"{what} under a rank-0 guard: every rank must join it, the others never do, "
                      "and the job hangs; run it on every rank and guard only the printing or saving after it")


def _collectives(script: Script) -> dict[int, str]:
    """Call node id -> what it is, for every call of the script that every rank must join."""
    found: dict[int, str] = {}
    for call, name in script.named_calls:
        short = name.rsplit(".", 1)[-1]
        if name in COLLECTIVES or (name.startswith("horovod.") and short in HOROVOD_COLLECTIVES):
            found[id(call.node)] = f"`{spell(call.node.func) or short}()`"
        elif short == "save_checkpoint" and script.deepspeed and _engine_method(script, call.node):
            found[id(call.node)] = "the DeepSpeed engine's save_checkpoint() (it gathers from every rank)"
    for call in _wrapped_forwards(script, DDP_WRAPPERS):
        if _gradients_off(script, call):
            continue
        found[id(call.node)] = (f"the forward of the DDP-wrapped `{spell(call.node.func)}` with gradients on (DDP then "
                                "broadcasts the model's buffers, BatchNorm's for one, from rank 0 at each forward; "
                                "call its .module, or run it under torch.no_grad())")
    for call in _wrapped_forwards(script, FSDP1_WRAPPERS):
        found[id(call.node)] = f"the forward of the FSDP-wrapped `{spell(call.node.func)}` (it gathers the weights from every rank)"
    return found


def _gradients_off(script: Script, call: CallSite) -> bool:
    """The call runs under `with torch.no_grad():` (inference_mode, set_grad_enabled(False)), or in
    a function decorated with one of them (the innermost function's decorators: an outer one's do
    not hold when the inner function is called later)."""
    for stmt in script.index.enclosing_statements(call.place.stmt):
        if isinstance(stmt, cst.With) and any(_turns_gradients_off(script, item.item) for item in stmt.items):
            return True
        if isinstance(stmt, cst.FunctionDef):
            return any(_turns_gradients_off(script, d.decorator) for d in stmt.decorators)
    return False


def _turns_gradients_off(script: Script, expr: cst.BaseExpression) -> bool:
    name = script.index.qualify(expr.func if isinstance(expr, cst.Call) else expr) or ""
    if name in SET_GRAD_ENABLED:
        return isinstance(expr, cst.Call) and is_literal(argument(expr, "mode", 0), False)
    return name in NO_GRAD


def _engine_method(script: Script, call: cst.Call) -> bool:
    """`engine.save_checkpoint(...)`: a method of an object, not a function of the script or of an
    imported module (`save_checkpoint(state)`, `utils.save_checkpoint(state)`: the project's own)."""
    if not isinstance(call.func, cst.Attribute):
        return False
    head = (spell(call.func.value) or "").split(".", 1)[0]
    return head not in script.index.imports


def _wrapped_forwards(script: Script, wrappers: tuple[str, ...]) -> list[CallSite]:
    """Calls of a name bound to DDP(...)/FSDP(...) made after that binding in its scope, or in any
    function when bound at module level or on `self`."""
    found = []
    bindings = script.wrapped_names(wrappers)
    for call in script.index.calls:
        name = spell(call.node.func)
        for binding in bindings:
            if name == binding.target and _sees(script, binding.place.scope, binding.place.stmt, call):
                found.append(call)
                break
    return found


def _sees(script: Script, scope: Scope, stmt: cst.BaseStatement, call: CallSite) -> bool:
    if call.place.scope is scope:
        return script.order(call.place.stmt) > script.order(stmt)
    return scope.is_module or (call.place.scope.class_name is not None and (spell(call.node.func) or "").startswith("self."))


def _functions_running(script: Script, direct: dict[int, str]) -> set[str]:
    """Names of the script's functions that run a collective, directly or through one another."""
    callers: dict[str, list[str]] = {}
    for call in script.index.calls:
        callee = callee_scope(script.index, call)
        if callee is not None:
            callers.setdefault(callee.name, []).append(call.place.scope.name)
    start = {call.place.scope.name for call in script.index.calls if id(call.node) in direct}
    return reachable(callers, start) - {"<module>"}
