"""Finds the entry point: where process-group setup runs once, first, and teardown runs last.

Order of preference: right after `args = parser.parse_args()` in the `__main__` block; else the
training function that block calls (after its own parse_args, or at its top); else the block
itself; else top-level code after parse_args or before the first statement that does work.
Setup never comes after the statement that first builds the device, the model or a loader in that
block. "parse_args" includes a helper of this file that returns it (`args = get_args()`), so
`python train.py --help` never starts a process group.

A file with no `__main__` block and no top-level code that trains is a library module: setting a
process group up (and tearing it down) when it is imported would be wrong, so it is refused. Naming
the device at the top (`device = torch.device(...)`) is no training: such a file is a library too.

`runs_in_process_group` answers, for any statement, whether it runs between setup and teardown:
rank checks and barriers are only valid there.
"""

from __future__ import annotations

from collections.abc import Iterator

import libcst as cst

from migrate.analysis.index import CallSite, Scope, ScriptIndex, descendants, spell
from migrate.analysis.sites import Entry
from migrate.analysis.syntax import calls_in, contains
from migrate.analysis.training import callers_of

WORK_CALLS = ("torch.device", "torch.manual_seed", "torch.utils.data.DataLoader")
# what naming the device calls: no model, no loader, no training
DEVICE_QUERIES = ("torch.device", "torch.cuda.is_available", "torch.cuda.device_count", "torch.backends.mps.is_available")


def find_entry(index: ScriptIndex, must_follow: list[cst.BaseStatement], training: set[str] | None = None) -> Entry:
    """`must_follow`: statements (anywhere) that need setup to have run: device, model, loaders.
    `training`: the names of the scopes that run backward or call those."""
    training = training or set()
    guard = index.main_guard
    module_scope = Scope(node=index.module, name="<module>")
    if guard is not None and isinstance(guard.body, cst.IndentedBlock):
        parsed = _parse_args_statement(index, guard.body)
        if parsed is not None and not _also_trains(index, parsed, training, must_follow):
            return _entry_in(index, module_scope, guard.body, must_follow)
        called = _training_function(index, guard.body, training, must_follow)
        if called is not None and isinstance(called.node, cst.FunctionDef) and isinstance(called.node.body, cst.IndentedBlock):
            return _entry_in(index, called, called.node.body, must_follow)
        if _module_does_work(index) and not _block_trains(index, guard.body, training, must_follow):
            return _entry_in(index, module_scope, index.module, must_follow)
        return _entry_in(index, module_scope, guard.body, must_follow)
    builds = [stmt for stmt in must_follow if not _picks_device(index, stmt)]
    if not _module_does_work(index) and not _block_trains(index, index.module, training, builds):
        return Entry(scope=module_scope, block=index.module, setup_before=None, teardown_after=None,
                     found=False, library=True)
    return _entry_in(index, module_scope, index.module, must_follow, found=_module_does_work(index))


def _entry_in(
    index: ScriptIndex,
    scope: Scope,
    block: cst.Module | cst.IndentedBlock,
    must_follow: list[cst.BaseStatement],
    found: bool = True,
) -> Entry:
    body = list(index.script_body if block is index.module else block.body)  # a program's modules: not the entry's
    parsed = _parse_args_statement(index, block)
    if parsed is not None:
        start = body.index(parsed) + 1
    elif isinstance(block, cst.Module):
        start = _first_work(index, body)
    else:
        start = 1 if body and _is_docstring(body[0]) else 0
    for stmt in must_follow:
        for ancestor in index.enclosing_statements(stmt):
            located = index.block_of.get(ancestor, (None, 0))
            if located[0] is block:
                start = min(start, located[1])
    setup_before = body[start] if start < len(body) else None
    last = _last_runnable(index, body)
    returns = None
    if isinstance(last, cst.SimpleStatementLine) and isinstance(last.body[0], cst.Return):
        returns = last.body[0]
    return Entry(scope=scope, block=block, setup_before=setup_before, teardown_after=last,
                 teardown_before_return=returns, found=found)


def returns_plain_value(entry: Entry) -> bool:
    """The entry ends in a `return` whose value calls nothing (`return 0`, `return best`): teardown
    can go right before it. `return train(args)` still trains: teardown must wait for the value."""
    value = entry.teardown_before_return.value if entry.teardown_before_return is not None else None
    return entry.teardown_before_return is not None and (
        value is None or not any(isinstance(n, cst.Call) for n in descendants(value)))


def _last_runnable(index: ScriptIndex, body: list[cst.BaseStatement]) -> cst.BaseStatement | None:
    """The last statement of the block, not counting a trailing `if __name__ == "__main__":`."""
    for stmt in reversed(body):
        if stmt is index.main_guard:
            continue
        return stmt
    return None


def _parse_args_statement(index: ScriptIndex, block: cst.Module | cst.IndentedBlock) -> cst.BaseStatement | None:
    """The statement that parses the command line: `args = parser.parse_args()`, or a call of a
    helper of this file that does (`args = get_args()`)."""
    for stmt in block.body:
        if not isinstance(stmt, cst.SimpleStatementLine):
            continue
        for call in index.calls_under(stmt):
            if _is_parse_args(call):
                return stmt
            helper = index.functions.get(spell(call.func) or "")
            if helper is not None and _returns_parsed_args(index, helper):
                return stmt
    return None


def _also_trains(index: ScriptIndex, stmt: cst.BaseStatement, training: set[str], must_follow: list[cst.BaseStatement]) -> bool:
    """`main(parser.parse_args())`: one statement parses the command line and trains. Setup after
    it would come too late; it goes into the function it calls instead (after the parsing)."""
    for call in index.calls_under(stmt):
        callee = index.functions.get(spell(call.func) or "")
        if callee is not None and (callee.name in training or _holds(index, callee.node, must_follow)):
            return True
    return False


def _returns_parsed_args(index: ScriptIndex, helper: Scope) -> bool:
    """`def get_args(): ...; return parser.parse_args()` (or returns the name bound to it)."""
    return index.answer("returns_parsed_args", id(helper.node), lambda: _returns_parsed(index, helper))


def _returns_parsed(index: ScriptIndex, helper: Scope) -> bool:
    parsed = {b.target for b in index.bindings_in(helper) if isinstance(b.value, cst.Call) and _is_parse_args(b.value)}
    for node in index.returns_under(helper.node):
        if node.value is not None:
            if any(_is_parse_args(c) for c in calls_in(node.value)):
                return True
            returned = [e.value for e in node.value.elements] if isinstance(node.value, cst.Tuple) else [node.value]
            # `return args` or `return args, cfg`; not `return train(args)`, which uses them
            if any(isinstance(value, cst.Name) and value.value in parsed for value in returned):
                return True
    return False


def _is_parse_args(call: cst.Call) -> bool:
    return isinstance(call.func, cst.Attribute) and call.func.attr.value.startswith(("parse_args", "parse_known_args"))


def _training_function(
    index: ScriptIndex, block: cst.IndentedBlock, training: set[str], must_follow: list[cst.BaseStatement]
) -> Scope | None:
    """The one function of this file the `__main__` block calls to train (not the first helper it
    calls: `get_args()` or `set_seed()` would put setup in the wrong place). None when the block
    does the work itself, or calls several functions that do."""
    found: list[Scope] = []
    for stmt in block.body:
        callees = [index.functions[spell(c.func) or ""] for c in index.calls_under(stmt) if (spell(c.func) or "") in index.functions]
        relevant = [f for f in callees if f.name in training or _holds(index, f.node, must_follow)]
        if relevant:
            found.extend(f for f in relevant if f not in found)
        elif any(_holds(index, stmt, [m]) for m in must_follow):
            return None
    return found[0] if len(found) == 1 else None


def _block_trains(
    index: ScriptIndex, block: cst.Module | cst.IndentedBlock, training: set[str], must_follow: list[cst.BaseStatement]
) -> bool:
    """Whether code at this level (not inside a def or class) builds what training needs or calls
    a function that trains."""
    for stmt in block.body:
        if isinstance(stmt, (cst.FunctionDef, cst.ClassDef)) or stmt is index.main_guard:
            continue
        if _holds(index, stmt, must_follow):
            return True
        if any((spell(c.func) or "") in training for c in index.calls_under(stmt)):
            return True
    return False


def _holds(index: ScriptIndex, node: cst.CSTNode, statements: list[cst.BaseStatement]) -> bool:
    """Whether one of the statements is `node` or inside it: read off the statements' parents
    (a few each) rather than by walking `node`, which may be the whole training loop."""
    wanted = set(statements)
    if node in index.scope_of and all(stmt in index.scope_of for stmt in wanted):
        return any(node is around for stmt in wanted for around in index.enclosing_statements(stmt))
    return bool(wanted) and contains(node, lambda n: n in wanted)


def _picks_device(index: ScriptIndex, stmt: cst.BaseStatement) -> bool:
    """`device = torch.device("cuda" if torch.cuda.is_available() else "cpu")`: a module that only
    names its device builds nothing that trains (a library module may do so at its top)."""
    calls = index.calls_under(stmt)
    return isinstance(stmt, cst.SimpleStatementLine) and bool(calls) and all(
        (index.qualify(call.func) or "").startswith(DEVICE_QUERIES) for call in calls)


def _module_does_work(index: ScriptIndex) -> bool:
    return any(isinstance(s, (cst.For, cst.While)) for s in index.script_body)


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


def runs_in_process_group(index: ScriptIndex, entry: Entry | None, stmt: cst.BaseStatement) -> bool:
    """Whether `stmt` runs after setup and before teardown, as far as this file tells.

    In the entry block, by position; in a function, when every call of it found in this file does
    (a function called from nowhere visible, a method or callback, is assumed to run in training);
    module-level code outside the entry block runs at import, before setup, or after teardown.
    """
    if entry is None or entry.library:
        return False
    verdict, scope = _verdict(index, entry, stmt, {})
    if scope is None:
        return verdict
    return _every_call_runs_in_group(index, entry, scope)


def _verdict(index: ScriptIndex, entry: Entry, stmt: cst.BaseStatement, deciding: dict[str, int]) -> tuple[bool, Scope | None]:
    """(answer, None) when it can be told without deciding a function's callers first; else
    (True, the function whose callers decide). A function already being decided counts as in."""
    block = entry.block
    for ancestor in index.enclosing_statements(stmt):
        if isinstance(ancestor, (cst.FunctionDef, cst.ClassDef)) and ancestor is not stmt:
            break
        located = index.block_of.get(ancestor)
        if located is not None and located[0] is block:
            return _within_span(index, entry, located[1]), None
    scope = index.scope_of.get(stmt)
    if scope is None or scope.is_module:
        return False, None
    if scope.name in deciding:
        return True, None
    if id(scope.node) in entry.spans:
        return entry.spans[id(scope.node)], None
    return True, scope


def _every_call_runs_in_group(index: ScriptIndex, entry: Entry, scope: Scope) -> bool:
    """Whether every call of `scope` runs in the process group, and so on up through the callers'
    own callers (answers kept in `entry.spans`). An explicit stack, not recursion: a chain of
    calls can be thousands of functions deep. Calls are taken in source order and the first one
    outside the group decides, as `all()` over them would."""
    frames: list[tuple[Scope, Iterator[CallSite]]] = [(scope, iter(_calls_of_scope(index, scope)))]
    deciding = {scope.name: 1}  # names of the functions on the stack (a name may repeat: redefinitions)
    answer = True  # what the frame that finished last returned (True: go on with the next call)
    while frames:
        current, calls = frames[-1]
        child = None
        if answer:
            for call in calls:
                answer, child = _verdict(index, entry, call.place.stmt, deciding)
                if child is not None or not answer:
                    break
        if child is not None:
            frames.append((child, iter(_calls_of_scope(index, child))))
            deciding[child.name] = deciding.get(child.name, 0) + 1
            continue
        entry.spans[id(current.node)] = answer
        frames.pop()
        deciding[current.name] -= 1
        if not deciding[current.name]:
            del deciding[current.name]
    return answer


def _within_span(index: ScriptIndex, entry: Entry, position: int) -> bool:
    body = entry.block.body
    start = _position_in_block(index, entry, entry.setup_before) if entry.setup_before is not None else len(body)
    end = _position_in_block(index, entry, entry.teardown_after) if entry.teardown_after is not None else None
    assert start is not None  # setup_before is a statement of the entry block
    if end is None:
        return position >= start
    end -= 1 if returns_plain_value(entry) else 0
    return start <= position <= end


def _position_in_block(index: ScriptIndex, entry: Entry, stmt: cst.BaseStatement) -> int | None:
    """Where `stmt` sits in the entry block (None: not in it), from the index when it knows."""
    located = index.block_of.get(stmt)
    if located is not None and located[0] is entry.block:
        return located[1]
    body = list(entry.block.body)
    return body.index(stmt) if stmt in body else None


def _calls_of_scope(index: ScriptIndex, scope: Scope) -> list[CallSite]:
    """The calls of `scope` (of its class, for an `__init__`), in source order."""
    calls = callers_of(index, scope)
    if not (scope.class_name and scope.name.endswith(".__init__")):
        return calls
    constructions = index.derived("calls_by_spelling", lambda: _calls_by_spelling(index)).get(scope.class_name, [])
    merged = {id(c): c for c in [*calls, *constructions]}
    return sorted(merged.values(), key=index.call_position)


def _calls_by_spelling(index: ScriptIndex) -> dict[str, list[CallSite]]:
    by_spelling: dict[str, list[CallSite]] = {}
    for call in index.calls:
        spelled = spell(call.node.func)
        if spelled is not None:
            by_spelling.setdefault(spelled, []).append(call)
    return by_spelling
