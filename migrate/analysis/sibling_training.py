"""Where the backward of a script that has none lives (MIG002's words, api.py): the modules of the
script's folder that it imports, read through the `ReadModule` the conversion is handed
(project_files.py), and which of them run a backward. Only those are named; a module that could
not be read is named as a place it may be. When the script's own loop calls a method of a class
one of them defines (`policy.train(buffer)` on `policy = TD3.TD3(...)`), that is said: the
training step lives in another file, which this conversion does not follow (one file at a time).

Read-only; reads no file itself.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import libcst as cst

from migrate.analysis.index import ScriptIndex, build_index, spell
from migrate.analysis.positions import Positions
from migrate.analysis.training import backward_calls
from migrate.project_files import ReadModule


@dataclass(frozen=True)
class Trainer:
    """A module of the folder that runs a backward, and the functions (`TD3.train`) where it does."""

    module: str
    scopes: tuple[str, ...]
    index: ScriptIndex


@dataclass(frozen=True)
class LoopCall:
    """The script's loop calls `holder.method(...)` on an instance of a class a trainer defines."""

    text: str  # the call as the script spells it
    line: int
    cls: str
    method: str
    trainer: Trainer


def trainers(roots: list[str], folder: str, read: ReadModule) -> tuple[list[Trainer], list[str]]:
    """The imported modules of `folder` that run a backward, and those that could not be read."""
    found: list[Trainer] = []
    unread: list[str] = []
    for root in roots:
        text = read(os.path.join(folder, root + ".py"))
        if text is None:
            text = read(os.path.join(folder, root, "__init__.py"))
        if text is None:
            unread.append(root)
            continue
        if "backward" not in text:
            continue
        try:
            index = build_index(cst.parse_module(text))
        except (cst.ParserSyntaxError, RecursionError):
            continue
        scopes = tuple(sorted({call.place.scope.name for call in backward_calls(index)}))
        if scopes:
            found.append(Trainer(root, scopes, index))
    return found, unread


def loop_call(code: str, found: list[Trainer]) -> LoopCall | None:
    """The first call, inside a loop of the script, of a method that runs a trainer's backward, on
    a name bound to an instance of the trainer's class (`policy = TD3.TD3(...)`)."""
    try:
        module = cst.parse_module(code)
    except cst.ParserSyntaxError:
        return None
    index = build_index(module)
    positions = Positions(module, code)
    for call in index.calls:
        func = call.node.func
        if not call.place.loops or not isinstance(func, cst.Attribute):
            continue
        for trainer in found:
            cls = _instance_class(index, spell(func.value), trainer)
            if cls is not None and f"{cls}.{func.attr.value}" in trainer.scopes:
                line = positions.of(call.node, call.place.stmt)[0]
                return LoopCall(module.code_for_node(call.node), line, cls, func.attr.value, trainer)
    return None


def _instance_class(index: ScriptIndex, holder: str | None, trainer: Trainer) -> str | None:
    """The trainer's class `holder` is bound to an instance of, if any."""
    for binding in index.bindings_of(holder or ""):
        if isinstance(binding.value, cst.Call):
            module, _, cls = (index.qualify(binding.value.func) or "").rpartition(".")
            if module == trainer.module and cls in trainer.index.classes:
                return cls
    return None
