"""Where the script puts a trained model: the statements that move it to a device
(`model.to(device)`, `model.cuda()`, `model = Net().to(device)`, `self.model = model.to(gpu_id)`),
under its own names and under the names of what it is built from in the functions that hand it
on (migrate.analysis.upstream), and whether each runs unconditionally or only under an `if`.

FSDP (migrate.steps.fsdp_shard) asks whether its default mesh is where the script wants the
model; DeepSpeed (migrate.steps.deepspeed_engine) whether the script keeps the model, and so its
batches, on the CPU (DeepSpeed is then kept there too: its engine would move the model to the
GPU), or moves it only under an `if`.
"""

from __future__ import annotations

from dataclasses import dataclass

import libcst as cst

from migrate.analysis.index import ScriptIndex
from migrate.analysis.models import aliases, is_after
from migrate.analysis.sites import ModelSite
from migrate.analysis.upstream import upstream

MOVES = ("to", "cuda")


@dataclass(frozen=True)
class Move:
    """One statement that moves the model."""

    stmt: cst.BaseStatement
    after_wrap: bool  # runs after the wrap site (or in another function than the wrap's)
    conditions: tuple[cst.If, ...]  # the `if`s around it, innermost first (not the `__main__` guard)


def model_moves(index: ScriptIndex, site: ModelSite) -> list[Move]:
    """Every statement that moves the model (or what it is built from) to a device, in file order."""
    names = aliases(index, site) | {(link.spelling, link.scope.name) for link in upstream(index, site)
                                    if link.built is None}
    stmts = [use.place.stmt for use in index.attributes
             if use.called and use.node.attr.value in MOVES and (use.owner, use.place.scope.name) in names]
    for binding in index.bindings:  # `model = Net().to(device)`, `self.model = model.to(gpu_id)`
        if (binding.target, binding.place.scope.name) in names and moves(binding.value):
            stmts.append(binding.place.stmt)
    return [_move(index, site, stmt) for stmt in stmts]


def _move(index: ScriptIndex, site: ModelSite, stmt: cst.BaseStatement) -> Move:
    after = index.scope_of.get(stmt) is not site.scope or is_after(index, stmt, site)
    conditions = tuple(around for around in index.enclosing_statements(stmt)[1:]
                       if isinstance(around, cst.If) and around is not index.main_guard)
    return Move(stmt, after, conditions)


def placed_by_script(index: ScriptIndex, site: ModelSite) -> bool:
    """Whether the script puts the model on its device itself where a wrapper placed at the site
    would not decide it for it: it moves the model after the wrap (`self.model = model.to(gpu_id)`
    in a Trainer), or before it, unconditionally (`model = Net().to(device)`). False when it is
    never moved, or only under an `if` before the wrap, or before it to a device that may be the
    CPU (`device = "cpu"` under `if args.test_mode:`: FSDP's default mesh is the GPU whenever there
    is one)."""
    return any(move.after_wrap or not move.conditions and not _may_be_the_cpu(index, move.stmt)
               for move in model_moves(index, site))


def _may_be_the_cpu(index: ScriptIndex, stmt: cst.BaseStatement) -> bool:
    """Whether a move in `stmt` names the CPU (`.to("cpu")`), or a name one of whose bindings in
    the move's function does (`device = "cpu"`, `device = torch.device("cpu")`)."""
    scope = index.scope_of.get(stmt)
    for call in index.calls_under(stmt):
        if not isinstance(call.func, cst.Attribute) or call.func.attr.value != "to" or not call.args:
            continue
        target = call.args[0].value
        if _names_the_cpu(index, target):
            return True
        if isinstance(target, cst.Name) and scope is not None and any(
                binding.value is not None and _names_the_cpu(index, binding.value)
                for binding in index.bindings_of_in(target.value, scope)):
            return True
    return False


def _names_the_cpu(index: ScriptIndex, value: cst.BaseExpression) -> bool:
    """`"cpu"` or `torch.device("cpu")`."""
    if isinstance(value, cst.Call) and index.qualify(value.func) == "torch.device" and value.args:
        value = value.args[0].value
    return isinstance(value, cst.SimpleString) and value.evaluated_value == "cpu"


def device_conditions(index: ScriptIndex, site: ModelSite) -> tuple[cst.If, ...] | None:
    """The `if`s the model's place on a GPU host depends on, wherever its moves are (before or after
    the wrap, in any function): None when it is never moved; () when some move runs
    unconditionally (or only under `if torch.cuda.is_available():`, true on every GPU host); else
    the innermost `if` around each move (`if args.cuda: model.cuda()`)."""
    found = model_moves(index, site)
    if not found:
        return None
    if any(not [c for c in move.conditions if not _on_any_gpu(index, c)] for move in found):
        return ()
    return tuple(dict.fromkeys(move.conditions[0] for move in found))


def _on_any_gpu(index: ScriptIndex, condition: cst.If) -> bool:
    """`if torch.cuda.is_available():`: true on every GPU host."""
    test = condition.test
    return isinstance(test, cst.Call) and index.qualify(test.func) == "torch.cuda.is_available"


def moves(value: cst.BaseExpression | None) -> bool:
    """Whether an expression is a chain of calls with a `.to(...)` or `.cuda(...)` in it."""
    while isinstance(value, cst.Call) and isinstance(value.func, cst.Attribute):
        if value.func.attr.value in MOVES:
            return True
        value = value.func.value
    return False
