"""Where the backward of a script that has none lives (MIG002's words, api.py): the modules of the
script's project that it imports (the caller hands them over, found by migrate.project), read through
the `ReadModule` the conversion is handed (project_files.py), and which of them run a backward.

For each such module it says whether it has an entry point of its own, in the words MIG119 uses
(analysis.entry: no `__main__` block and no top-level code that trains makes it a library module,
which a conversion of its own refuses), so that MIG002 never sends the user to a file that would
send them back. When the script calls a function of such a module (`train_one_epoch(model, ...)`,
one in a loop first) or, in a loop, a method of a class one of them defines
(`policy.train(buffer)` on `policy = TD3.TD3(...)`), that call is named: the training step lives in
another module, which this conversion does not yet follow (issue 27).

Read-only; reads no file itself.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import libcst as cst

from migrate.analysis import analyze
from migrate.analysis.index import CallSite, ScriptIndex, build_index, spell
from migrate.analysis.positions import Positions
from migrate.project_files import ReadModule

NOT_FOLLOWED = ("that module was not read with this script as one program (a module is followed only when it has no "
                "entry point of its own and binds no top-level name that the script or another followed module binds)")


@dataclass(frozen=True)
class Trainer:
    """A module of the project that runs a backward, and the functions (`TD3.train`) where it does."""

    module: str  # its dotted name from the project root: `engine`, `training.engine`
    path: str
    scopes: tuple[str, ...]
    index: ScriptIndex
    library: bool  # no entry point of its own: a conversion of it alone is refused (MIG119)

    def file(self, folder: str) -> str:
        """Its path as seen from the script's folder: `engine.py`, `training/engine.py`."""
        return os.path.relpath(self.path, folder) if folder else self.path

    def named(self) -> str:
        """`engine` (a backward in `train_one_epoch()`)."""
        return f"`{self.module}` (a backward in {', '.join(f'`{s}()`' for s in self.scopes[:2])})"


@dataclass(frozen=True)
class StepCall:
    """The script calls `engine.train_one_epoch(...)` (cls None), or, in a loop, `holder.method(...)`
    on an instance of the class `cls` a trainer defines."""

    text: str  # the call as the script spells it
    line: int
    cls: str | None
    method: str
    trainer: Trainer
    in_loop: bool

    def describe(self, folder: str) -> str:
        """What the script calls, and where the backward runs."""
        file = self.trainer.file(folder)
        if self.cls is not None:
            return (f"its loop calls `{self.text}` (line {self.line}), a method of the class `{self.cls}` from "
                    f"`{file}`, and the backward runs there (`{self.cls}.{self.method}()`)")
        where = " in a loop" if self.in_loop else ""
        return (f"it calls `{self.text}` (line {self.line}){where}, and the backward runs in `{self.method}()` "
                f"of `{file}`")


def trainers(modules: list[tuple[str, str]], read: ReadModule) -> list[Trainer]:
    """The modules (dotted name, path) that run a backward; one that cannot be read or parsed is
    left out."""
    found: list[Trainer] = []
    for dotted, path in modules:
        text = read(path)
        if text is None or "backward" not in text:
            continue
        try:
            sites = analyze(cst.parse_module(text))
        except (cst.ParserSyntaxError, RecursionError):
            continue
        scopes = tuple(sorted({call.place.scope.name for call in sites.backward_calls}))
        if scopes:
            library = sites.entry is None or sites.entry.library  # no entry point found: none to convert
            found.append(Trainer(dotted, path, scopes, sites.index, library))
    return found


def step_call(code: str, found: list[Trainer]) -> StepCall | None:
    """The first call of the script that runs a trainer's backward: a function of the trainer's
    module (one inside a loop before one outside), else, inside a loop, a method of the trainer's
    class on a name bound to an instance of it."""
    try:
        module = cst.parse_module(code)
    except cst.ParserSyntaxError:
        return None
    index = build_index(module)
    positions = Positions(module, code)
    calls = sorted(index.calls, key=lambda call: not call.place.loops)  # stable: in a loop first
    for call in calls:
        for trainer in found:
            named = _function_of(index, call, trainer) or _method_of(index, call, trainer)
            if named is not None:
                line = positions.of(call.node, call.place.stmt)[0]
                cls, method = named
                return StepCall(module.code_for_node(call.node), line, cls, method, trainer, bool(call.place.loops))
    return None


def _function_of(index: ScriptIndex, call: CallSite, trainer: Trainer) -> tuple[None, str] | None:
    """(None, `train_one_epoch`) when the call is of a function of the trainer that runs its backward."""
    module, _, name = (index.qualify(call.node.func) or "").rpartition(".")
    return (None, name) if module == trainer.module and name in trainer.scopes else None


def _method_of(index: ScriptIndex, call: CallSite, trainer: Trainer) -> tuple[str, str] | None:
    """(`TD3`, `train`) when a call in a loop is of a method of the trainer's class that runs its backward."""
    func = call.node.func
    if not call.place.loops or not isinstance(func, cst.Attribute):
        return None
    cls = _instance_class(index, spell(func.value), trainer)
    return (cls, func.attr.value) if cls is not None and f"{cls}.{func.attr.value}" in trainer.scopes else None


def _instance_class(index: ScriptIndex, holder: str | None, trainer: Trainer) -> str | None:
    """The trainer's class `holder` is bound to an instance of, if any."""
    for binding in index.bindings_of(holder or ""):
        if isinstance(binding.value, cst.Call):
            module, _, cls = (index.qualify(binding.value.func) or "").rpartition(".")
            if module == trainer.module and cls in trainer.index.classes:
                return cls
    return None
