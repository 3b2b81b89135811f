"""Which of the script's imports new code may reuse, and which names new imports may take.

New code (process-group setup, rank guards, the wrapper) goes anywhere from module level to deep
inside functions, and its imports go to the top import block. An import the script already has is
reused only when it is bound before converted code can first run: at module level (also inside a
module-level `if`/`try`), above the first top-level statement that calls anything, and above
process-group setup when that is at module level. A late import (`import os` after module-level
training code) or one inside a function is not reused: the new code would read the name before it
is bound (NameError, or UnboundLocalError in that function); the import is added to the top block.

A name is free for a new import only when nothing in the file binds it to anything else: a
variable `dist` (anywhere), a parameter `os` or a function-level `import os` would shadow the new
module-level name where new code reads it. Then the import takes another name (`dist_`).
"""

from __future__ import annotations

import ast
from collections import defaultdict
from dataclasses import dataclass

_SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)
OTHER = ""  # a binding that is not a module-level import


@dataclass(frozen=True)
class ImportNames:
    """What the script's own imports offer new code."""

    available: dict[str, str]  # local name -> qualified name, for early module-level imports
    binders: dict[str, frozenset[str]]  # name -> what binds it: qualified names of module-level imports, OTHER

    def reusable(self, qualified: str, private: bool = False) -> str | None:
        """The local name of an early module-level import of `qualified` that nothing else rebinds
        (`_os` only when `private`)."""
        for local, imported in self.available.items():
            if imported == qualified and (private or not local.startswith("_")) and self.free(local, qualified):
                return local
        return None

    def free(self, name: str, qualified: str) -> bool:
        """Whether `name` may stand for `qualified` everywhere: nothing binds it to anything else."""
        return self.binders.get(name, frozenset()) <= {qualified}

    def fresh(self, name: str, qualified: str) -> str:
        """`name`, or `name_`, `name_2`... : the first that is free for `qualified`."""
        candidates = [name, f"{name}_"] + [f"{name}_{n}" for n in range(2, 100)]
        return next(c for c in candidates if self.free(c, qualified))


def import_names(source: str, setup_line: int | None) -> ImportNames:
    """`setup_line`: where process-group setup goes when it is at module level (new code runs
    from there on), else None."""
    tree = ast.parse(source)
    top_level = _module_level_imports(tree)
    boundary = _first_work_line(tree)
    if setup_line is not None:
        boundary = min(boundary, setup_line)
    available: dict[str, str] = {}
    for node in top_level:
        if node.lineno < boundary:
            for local, qualified in _bound_by_import(node):
                available.setdefault(local, qualified)
    return ImportNames(available=available, binders=_binders(tree, {id(n) for n in top_level}))


def _module_level_imports(tree: ast.Module) -> list[ast.Import | ast.ImportFrom]:
    """Imports that run at module level (not inside a def or class), in order."""
    found: list[ast.Import | ast.ImportFrom] = []
    stack: list[ast.AST] = list(reversed(tree.body))
    while stack:
        node = stack.pop()
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            found.append(node)
        elif isinstance(node, ast.stmt) and not isinstance(node, _SCOPES):
            blocks = [c for c in ast.iter_child_nodes(node) if isinstance(c, (ast.stmt, ast.excepthandler, ast.match_case))]
            stack.extend(reversed(blocks))
        elif isinstance(node, (ast.ExceptHandler, ast.match_case)):  # ExceptHandler: the one kind of excepthandler
            stack.extend(reversed(node.body))
    return found


def _first_work_line(tree: ast.Module) -> int:
    """The line of the first top-level statement that may run converted code: one that calls
    anything outside a def or class body (a def or class statement itself only binds a name)."""
    for stmt in tree.body:
        if isinstance(stmt, (ast.Import, ast.ImportFrom)):
            continue
        if _calls_now(stmt):
            return stmt.lineno
    return 10**9


def _calls_now(stmt: ast.stmt) -> bool:
    """Whether running `stmt` calls something: decorators, defaults and bases count, bodies of
    defs do not, class bodies do."""
    if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)):
        parts: list[ast.AST] = [*stmt.decorator_list, *stmt.args.defaults, *(d for d in stmt.args.kw_defaults if d)]
    elif isinstance(stmt, ast.ClassDef):
        parts = [*stmt.decorator_list, *stmt.bases, *(k.value for k in stmt.keywords)]
        parts += [s for s in stmt.body if not isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef))]
    else:
        parts = [stmt]
    return any(isinstance(node, ast.Call) for part in parts for node in ast.walk(part))


def _bound_by_import(node: ast.Import | ast.ImportFrom) -> list[tuple[str, str]]:
    """(local name, qualified name) for each name the import binds (`import a.b` binds `a`)."""
    found: list[tuple[str, str]] = []
    for alias in node.names:
        if alias.name == "*":
            continue
        if isinstance(node, ast.ImportFrom):
            module = "." * node.level + (node.module or "")
            found.append((alias.asname or alias.name, f"{module}.{alias.name}" if module else alias.name))
        elif alias.asname:
            found.append((alias.asname, alias.name))
        else:
            head = alias.name.split(".")[0]
            found.append((head, head))
    return found


def _binders(tree: ast.Module, module_level: set[int]) -> dict[str, frozenset[str]]:
    """For every name bound anywhere in the file: the qualified names module-level imports bind
    it to, and OTHER for any other binding (assignment, parameter, def, function-level import...)."""
    found: dict[str, set[str]] = defaultdict(set)
    for node in ast.walk(tree):
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            for local, qualified in _bound_by_import(node):
                found[local].add(qualified if id(node) in module_level else OTHER)
        elif isinstance(node, ast.Name) and not isinstance(node.ctx, ast.Load):
            found[node.id].add(OTHER)
        elif isinstance(node, ast.arg):
            found[node.arg].add(OTHER)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            found[node.name].add(OTHER)
        elif isinstance(node, (ast.Global, ast.Nonlocal)):
            for name in node.names:
                found[name].add(OTHER)
        elif isinstance(node, ast.ExceptHandler) and node.name:
            found[node.name].add(OTHER)
        elif isinstance(node, (ast.MatchAs, ast.MatchStar)) and node.name:
            found[node.name].add(OTHER)
        elif isinstance(node, ast.MatchMapping) and node.rest:
            found[node.rest].add(OTHER)
    return {name: frozenset(kinds) for name, kinds in found.items()}
