"""Finds the entry point: where process-group setup runs once, first, and teardown runs last.

Order of preference: right after `args = parser.parse_args()` in the `__main__` block; else the
function that block calls (after its own parse_args, or at its top); else top-level code after
parse_args or before the first statement that does work. Setup never comes after the statement
that first builds the device, the model or a loader in that block.
"""

from __future__ import annotations

import libcst as cst

from migrate.analysis.index import Scope, ScriptIndex, spell
from migrate.analysis.sites import Entry
from migrate.analysis.training import calls_in

WORK_CALLS = ("torch.device", "torch.manual_seed", "torch.utils.data.DataLoader")


def find_entry(index: ScriptIndex, must_follow: list[cst.BaseStatement]) -> Entry:
    """`must_follow`: statements (anywhere) that need setup to have run: device, model, loaders."""
    guard = index.main_guard
    module_scope = Scope(node=index.module, name="<module>")
    if guard is not None and isinstance(guard.body, cst.IndentedBlock):
        if _parse_args_statement(index, guard.body) is not None:
            return _entry_in(index, module_scope, guard.body, must_follow)
        called = _called_function(index, guard.body)
        if called is not None and isinstance(called.node, cst.FunctionDef) and isinstance(called.node.body, cst.IndentedBlock):
            return _entry_in(index, called, called.node.body, must_follow)
        if _module_does_work(index):
            return _entry_in(index, module_scope, index.module, must_follow)
        return _entry_in(index, module_scope, guard.body, must_follow)
    return _entry_in(index, module_scope, index.module, must_follow, found=_module_does_work(index))


def _entry_in(
    index: ScriptIndex,
    scope: Scope,
    block: cst.Module | cst.IndentedBlock,
    must_follow: list[cst.BaseStatement],
    found: bool = True,
) -> Entry:
    body = list(block.body)
    parsed = _parse_args_statement(index, block)
    if parsed is not None:
        start = body.index(parsed) + 1
    elif isinstance(block, cst.Module):
        start = _first_work(index, body)
    else:
        start = 1 if body and _is_docstring(body[0]) else 0
    for stmt in must_follow:
        for ancestor in index.enclosing_statements(stmt):
            if index.block_of.get(ancestor, (None, 0))[0] is block:
                start = min(start, body.index(ancestor))
    setup_before = body[start] if start < len(body) else None
    last = _last_runnable(index, body)
    returns = None
    if isinstance(last, cst.SimpleStatementLine) and isinstance(last.body[0], cst.Return):
        returns = last.body[0]
    return Entry(scope=scope, block=block, setup_before=setup_before, teardown_after=last,
                 teardown_before_return=returns, found=found)


def _last_runnable(index: ScriptIndex, body: list[cst.BaseStatement]) -> cst.BaseStatement | None:
    """The last statement of the block, not counting a trailing `if __name__ == "__main__":`."""
    for stmt in reversed(body):
        if stmt is index.main_guard:
            continue
        return stmt
    return None


def _parse_args_statement(index: ScriptIndex, block: cst.Module | cst.IndentedBlock) -> cst.BaseStatement | None:
    for stmt in block.body:
        for call in calls_in(stmt) if isinstance(stmt, cst.SimpleStatementLine) else ():
            if isinstance(call.func, cst.Attribute) and call.func.attr.value in ("parse_args", "parse_known_args"):
                return stmt
    return None


def _called_function(index: ScriptIndex, block: cst.IndentedBlock) -> Scope | None:
    for stmt in block.body:
        for call in calls_in(stmt):
            name = spell(call.func)
            if name in index.functions:
                return index.functions[name]
    return None


def _module_does_work(index: ScriptIndex) -> bool:
    return any(isinstance(s, (cst.For, cst.While)) for s in index.module.body)


def _first_work(index: ScriptIndex, body: list[cst.BaseStatement]) -> int:
    """Index of the first module-level statement that is more than imports, defs and constants."""
    for position, stmt in enumerate(body):
        if isinstance(stmt, (cst.FunctionDef, cst.ClassDef)) or _is_docstring(stmt):
            continue
        if isinstance(stmt, cst.If) and stmt is index.main_guard:
            return position
        if isinstance(stmt, cst.SimpleStatementLine) and all(_is_quiet(index, small) for small in stmt.body):
            continue
        return position
    return len(body)


def _is_quiet(index: ScriptIndex, small: cst.BaseSmallStatement) -> bool:
    """Imports, constants, argparse declarations and `logging` set-up: no work yet."""
    if isinstance(small, (cst.Import, cst.ImportFrom)):
        return True
    calls = calls_in(small)
    if isinstance(small, (cst.Assign, cst.AnnAssign)) and not calls:
        return True
    qualified = [index.qualify(c.func) or "" for c in calls]
    return bool(calls) and all(
        q.startswith(("argparse.", "logging.")) or q.endswith(("add_argument", "getLogger", "add_argument_group"))
        for q in qualified
    )


def _is_docstring(stmt: cst.BaseStatement) -> bool:
    return (
        isinstance(stmt, cst.SimpleStatementLine)
        and isinstance(stmt.body[0], cst.Expr)
        and isinstance(stmt.body[0].value, (cst.SimpleString, cst.ConcatenatedString))
    )
