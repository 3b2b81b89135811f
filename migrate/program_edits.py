"""One edit plan over a program (analysis.program: a script and the modules of its project read as
one), applied to each of its files.

The steps record edits keyed by the program's nodes; each file's module holds the very nodes of its
statements, so applying the plan to that module applies the edits that belong to the file and no
other. Imports are the one edit keyed by no node: a file gets those its new code reads and does not
bind (the ones the steps scheduled, the script's or another part's own imports of a name the new
code reuses, and `from engine import Block` for a class or function another module defines), found by applying once without them (unbound.introduced_unbound_names), then
again with them; what the rewrite made unused goes as for one file (unused_imports). A module's functions that only
its own `__main__` demo runs are left as they are (module_demo).
"""

from __future__ import annotations

import ast
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass

import libcst as cst

from migrate.analysis.program import Part, Program
from migrate.module_demo import demo_only_definitions
from migrate.rewrite import EditPlan
from migrate.unbound import introduced_unbound_names, module_level_names
from migrate.unused_imports import drop_imports_made_unused


@dataclass(frozen=True)
class PartText:
    """A file of the program after the rewrite."""

    part: Part
    new: str


def apply_to_parts(plan: EditPlan, program: Program, import_stmts: list[cst.SimpleStatementLine],
                   is_stdlib: Callable[[cst.BaseStatement], bool],
                   module_guards: dict[str, str] | None = None) -> list[PartText]:
    """Each file's new text, in the program's order (the script first). `module_guards`: the
    rank-0 test as a module of the project spells it instead (one true without a process group:
    the launcher's RANK), so the module stays right for a caller that runs it as one process, and
    in a DataLoader worker started by spawn, where no process group exists)."""
    providers = _providers(plan, program)
    scheduled = {name for stmt in [*plan.stdlib_imports, *plan.module_imports] for name, _line in _bindings(stmt)}
    texts: list[PartText] = []
    for part in program.parts:
        guards = module_guards if part is not program.script and module_guards else {}
        module = _demo_kept(part, program)
        bare = _applied(plan, module, [], import_stmts, is_stdlib, guards)
        missing = [name for name, _line, _col in introduced_unbound_names(part.text, bare)]
        # a star import binds every name for the unbound check: a name the steps import is still
        # imported where the new code reads it and the file binds it by no name of its own
        missing += sorted(((scheduled | set(providers)) & _loaded(bare)) - _loaded(part.text) - module_level_names(part.text))
        lines = list(dict.fromkeys(providers[name] for name in missing if name in providers))
        new = _applied(plan, module, lines, import_stmts, is_stdlib, guards) if lines else bare
        texts.append(PartText(part, _imports_made_unused_dropped(part, new)))
    return texts


def _demo_kept(part: Part, program: Program) -> cst.Module:
    """The part's module as the plan is applied to it: for a module with its own `__main__` demo,
    the functions and classes only that demo runs (module_demo.demo_only_definitions) are given as
    copies, which the plan's edits, keyed by the program's nodes, leave as they are."""
    if not part.tail:
        return part.module
    others = [each.text for each in program.parts if each is not part]
    kept = demo_only_definitions(part.text, part.tail, others)
    body = [stmt.deep_clone() if isinstance(stmt, (cst.FunctionDef, cst.ClassDef)) and stmt.name.value in kept else stmt
            for stmt in part.module.body]
    return part.module.with_changes(body=body) if kept else part.module


def _imports_made_unused_dropped(part: Part, new: str) -> str:
    """`new` without the imports the rewrite made unused, the module's own `__main__` blocks (its
    `tail`, which the rewrite never edits) counted as readers."""
    if not part.tail:
        return drop_imports_made_unused(part.text, new)
    whole = drop_imports_made_unused(part.text + part.tail, new + part.tail)
    return whole[:-len(part.tail)] if whole.endswith(part.tail) else new


def _applied(plan: EditPlan, module: cst.Module, lines: list[str], import_stmts: list[cst.SimpleStatementLine],
             is_stdlib: Callable[[cst.BaseStatement], bool], guards: dict[str, str] | None = None) -> str:
    """The plan applied to one file's module, with `lines` as the imports it schedules and its
    guard tests spelled as `guards` maps them."""
    own = EditPlan(
        module=module,
        replacements=plan.replacements,
        before=defaultdict(list, {stmt: list(new) for stmt, new in plan.before.items()}),
        after=defaultdict(list, {stmt: list(new) for stmt, new in plan.after.items()}),
        removed=plan.removed,
        removed_parts=plan.removed_parts,
        spliced=plan.spliced,
        guarded={stmt: (guards or {}).get(test, test) for stmt, test in plan.guarded.items()},
        wraps=plan.wraps,
        lines_moved=plan.lines_moved,
    )
    for line in lines:
        own.add_import(line)
    mine = set(map(id, module.body))
    return own.apply([stmt for stmt in import_stmts if id(stmt) in mine], is_stdlib).code


def _providers(plan: EditPlan, program: Program) -> dict[str, str]:
    """For each name an import can bind: the import line that binds it, the steps' own first, then
    the files' top-level imports (not relative ones)."""
    found: dict[str, str] = {}
    scheduled = [*plan.stdlib_imports, *plan.module_imports]
    for stmt in scheduled:
        for name, line in _bindings(stmt):
            found.setdefault(name, line)
    for part in program.parts:
        for top in part.module.body:
            if isinstance(top, cst.SimpleStatementLine):
                for name, line in _bindings(top):
                    found.setdefault(name, line)
    for part in program.modules:  # a class or function of a module, named by new code in another file
        for top in part.module.body:
            if isinstance(top, (cst.ClassDef, cst.FunctionDef)):
                found.setdefault(top.name.value, f"from {part.dotted} import {top.name.value}")
    return found


def _bindings(stmt: cst.SimpleStatementLine) -> list[tuple[str, str]]:
    """(bound name, an import line that binds only it) for each name an import statement binds."""
    found: list[tuple[str, str]] = []
    for small in stmt.body:
        if isinstance(small, cst.Import):
            for alias in small.names:
                dotted = _dotted(alias.name)
                if alias.asname is not None and isinstance(alias.asname.name, cst.Name):
                    found.append((alias.asname.name.value, f"import {dotted} as {alias.asname.name.value}"))
                else:
                    found.append((dotted.split(".")[0], f"import {dotted}"))
        elif isinstance(small, cst.ImportFrom) and not small.relative and small.module is not None:
            module = _dotted(small.module)
            if isinstance(small.names, cst.ImportStar):
                continue
            for alias in small.names:
                name = _dotted(alias.name)
                if alias.asname is not None and isinstance(alias.asname.name, cst.Name):
                    found.append((alias.asname.name.value, f"from {module} import {name} as {alias.asname.name.value}"))
                else:
                    found.append((name, f"from {module} import {name}"))
    return found


def _loaded(text: str) -> set[str]:
    """The names a text reads (empty when it does not parse)."""
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError, RecursionError):
        return set()
    return {node.id for node in ast.walk(tree) if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load)}


def _dotted(node: cst.BaseExpression) -> str:
    if isinstance(node, cst.Name):
        return node.value
    if isinstance(node, cst.Attribute):
        return f"{_dotted(node.value)}.{node.attr.value}"
    return ""

