"""The edit plan that steps fill in, and the single transformer pass that applies it.

Steps never rebuild the tree themselves. Each one records what should change, keyed by the
original node it found during analysis: replace this expression, insert these statements
before that one, run these statements on rank 0 only, wrap this run of statements in a
`with`. One pass then applies every edit bottom-up, so edits nest (an expression edited inside
a statement that is also guarded) without steps knowing about each other.
"""

from __future__ import annotations

import sys
from functools import lru_cache
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import libcst as cst

from migrate.analysis.index import child_nodes, descendants

NodeEdit = Callable[[cst.CSTNode], cst.CSTNode]
RunWrap = Callable[[list[cst.BaseStatement]], cst.BaseCompoundStatement]


def with_fields(**fields: object) -> NodeEdit:
    """The edit that sets `fields` on the node as earlier edits left it (bound now, not when applied)."""
    return lambda updated: updated.with_changes(**fields)


def leading_lines(stmt: cst.BaseStatement) -> Sequence[cst.EmptyLine]:
    """The comments and blank lines above a statement (every kind has them; `BaseStatement` does not say so)."""
    assert isinstance(stmt, (cst.SimpleStatementLine, cst.BaseCompoundStatement))
    return stmt.leading_lines


@dataclass(eq=False)
class EditPlan:
    """Edits keyed by original nodes; applied once by `apply`."""

    module: cst.Module
    replacements: dict[cst.CSTNode, list[NodeEdit]] = field(default_factory=lambda: defaultdict(list))
    before: dict[cst.BaseStatement, list[cst.BaseStatement]] = field(default_factory=lambda: defaultdict(list))
    after: dict[cst.BaseStatement, list[cst.BaseStatement]] = field(default_factory=lambda: defaultdict(list))
    removed: set[cst.BaseStatement] = field(default_factory=set)
    # a line or one-line suite -> the small statements removed from it (`a(); b()` keeps `b()`)
    removed_parts: dict[cst.CSTNode, set[cst.BaseSmallStatement]] = field(default_factory=dict)
    spliced: set[cst.BaseStatement] = field(default_factory=set)  # compound statements replaced by their body
    guarded: dict[cst.BaseStatement, str] = field(default_factory=dict)  # statement -> guard test
    wraps: dict[cst.BaseStatement, tuple[cst.BaseStatement, RunWrap]] = field(default_factory=dict)
    module_imports: list[cst.SimpleStatementLine] = field(default_factory=list)
    stdlib_imports: list[cst.SimpleStatementLine] = field(default_factory=list)
    import_lines: set[str] = field(default_factory=set)
    lines_moved: set[cst.BaseStatement] = field(default_factory=set)

    # -- recording ----------------------------------------------------------------------------
    def replace(self, node: cst.CSTNode, edit: NodeEdit) -> None:
        self.replacements[node].append(edit)

    def replace_with(self, node: cst.CSTNode, new: cst.CSTNode) -> None:
        self.replace(node, lambda _updated: new)

    def insert_before(self, stmt: cst.BaseStatement, new: Sequence[cst.BaseStatement],
                      ahead_of: Sequence[cst.BaseStatement] = ()) -> None:
        """Insert before `stmt`, after what other steps inserted there; but ahead of the first of
        `ahead_of` when one of those is already waiting there."""
        pending = self.before[stmt]
        position = next((i for i, s in enumerate(pending) if any(s is a for a in ahead_of)), len(pending))
        pending[position:position] = new

    def insert_above(self, stmt: cst.BaseStatement, new: cst.BaseStatement) -> None:
        """Insert `new` before `stmt`, moving the comments and blank lines above `stmt` onto it
        (above `new`'s own comments)."""
        if stmt in self.lines_moved:
            self.insert_before(stmt, [new])
            return
        self.lines_moved.add(stmt)
        moved = [*getattr(stmt, "leading_lines", ()), *getattr(new, "leading_lines", ())]
        self.insert_before(stmt, [new.with_changes(leading_lines=moved)])
        self.replace(stmt, lambda updated: updated.with_changes(leading_lines=()))

    def insert_after(self, stmt: cst.BaseStatement, new: Sequence[cst.BaseStatement]) -> None:
        self.after[stmt].extend(new)

    def remove(self, stmt: cst.BaseStatement) -> None:
        self.removed.add(stmt)

    def remove_part(self, stmt: cst.BaseStatement, node: cst.CSTNode) -> None:
        """Remove the small statement holding `node` (`opt.zero_grad()`), not the rest of its line
        (`opt.zero_grad(); loss.backward()`) or of the one-line suite it stands in; the whole
        line when nothing else is on it."""
        holder, small = small_statement_holding(stmt, node)
        if holder is None or small is None:
            return
        parts = self.removed_parts.setdefault(holder, set())
        parts.add(small)
        if isinstance(holder, cst.SimpleStatementLine) and len(parts) == len(holder.body):
            self.remove(holder)

    def splice(self, stmt: cst.BaseStatement) -> None:
        """Replace a `with`/`if` by the statements of its body (`with autocast(): ...` unwrapped)."""
        self.spliced.add(stmt)

    def guard(self, stmt: cst.BaseStatement, test: str) -> None:
        """Run `stmt` only when `test` holds; neighbouring statements with the same test share one `if`."""
        self.guarded.setdefault(stmt, test)

    def wrap_run(self, first: cst.BaseStatement, last: cst.BaseStatement, build: RunWrap) -> None:
        """Replace the statements first..last of one block by `build(those statements)`."""
        self.wraps[first] = (last, build)

    def add_import(self, line: str) -> None:
        """Schedule `import x` / `from x import y` once; the standard library goes with its kind."""
        statement = _parsed_line(line)
        root = line.split()[1].split(".")[0]
        group = self.stdlib_imports if root in sys.stdlib_module_names else self.module_imports
        if line in self.import_lines:
            return
        self.import_lines.add(line)
        for position, earlier in enumerate(group):  # `from m import a` and `from m import b`: one line
            merged = _merged_from_import(earlier, statement)
            if merged is not None:
                group[position] = merged
                return
        group.append(statement)

    # -- applying -----------------------------------------------------------------------------
    def apply(self, imports: Sequence[cst.BaseStatement], is_stdlib: Callable[[cst.BaseStatement], bool]) -> cst.Module:
        """The rewritten module. New standard-library imports go after the script's last one
        (or before its first import), the others after its last import, counting only the
        imports of the top block: a late import above `if __name__ == "__main__":` is no place
        for names that module-level code above it may already use."""
        imports = top_block_imports(self.module, imports)
        stdlib = [s for s in imports if is_stdlib(s)]
        self.stdlib_imports.sort(key=lambda s: self.module.code_for_node(s))
        if self.stdlib_imports:
            if stdlib:
                self.insert_after(stdlib[-1], self.stdlib_imports)
            elif imports:
                self.insert_before(imports[0], self.stdlib_imports)
            else:
                self.module_imports[:0] = self.stdlib_imports
        if self.module_imports:
            if imports:
                self.insert_after(imports[-1], self.module_imports)
            elif self.module.body and _is_docstring(self.module.body[0]):
                self.after[self.module.body[0]][:0] = self.module_imports
            elif self.module.body:  # ahead of setup or anything else inserted there
                self.before[self.module.body[0]][:0] = self.module_imports
        self._drop_nested_guards()
        applier = _Applier(self, self._edited_paths())
        return self.module.visit(applier)

    def _drop_nested_guards(self) -> None:
        """A statement inside one that is guarded by the same test needs no guard of its own
        (two steps may each guard one: the `with open(p, "wb")` and the `torch.save` in it)."""
        for outer in [stmt for stmt in self.guarded if isinstance(stmt, cst.BaseCompoundStatement)]:
            test = self.guarded.get(outer)
            for inner in descendants(outer):
                if inner is not outer and isinstance(inner, cst.BaseStatement) and self.guarded.get(inner) == test:
                    del self.guarded[inner]

    def _edited_paths(self) -> set[cst.CSTNode]:
        """Every node that is edited or holds an edited node: the applier skips all others, so
        only the paths to edits are rebuilt."""
        targets: set[cst.CSTNode] = set(self.replacements) | set(self.before) | set(self.after)
        targets |= self.removed | self.spliced | set(self.guarded) | set(self.wraps) | set(self.removed_parts)
        needed: set[cst.CSTNode] = set()
        stack: list[cst.CSTNode] = []

        def mark(node: cst.CSTNode) -> None:
            stack.append(node)
            if node in targets:
                needed.update(stack)
            for child in child_nodes(node):
                mark(child)
            stack.pop()

        mark(self.module)
        return needed


class _Applier(cst.CSTTransformer):
    def __init__(self, plan: EditPlan, paths: set[cst.CSTNode]) -> None:
        self.plan = plan
        self.paths = paths
        self.statement_results: dict[cst.BaseStatement, cst.BaseStatement] = {}
        self.guard_tests: dict[int, str] = {}  # id of a rendered statement -> its guard test
        self.made_guards: set[int] = set()  # ids of the `if` statements the guards became

    def on_visit(self, node: cst.CSTNode) -> bool:
        return node in self.paths

    def on_leave(self, original_node: cst.CSTNode, updated_node: cst.CSTNode) -> cst.CSTNode:  # type: ignore[override]  # libcst's stub ties both nodes to one TypeVar
        if original_node not in self.paths:
            return updated_node
        if original_node in self.plan.removed_parts:
            updated_node = _without_parts(original_node, updated_node, self.plan.removed_parts[original_node])
        for edit in self.plan.replacements.get(original_node, ()):
            updated_node = edit(updated_node)
        if isinstance(original_node, (cst.Module, cst.IndentedBlock)):
            updated_node = updated_node.with_changes(body=self._rebuild(original_node.body))
        if isinstance(updated_node, cst.If):
            updated_node = self._fold_guard(updated_node)
        if isinstance(original_node, cst.BaseStatement):
            assert isinstance(updated_node, cst.BaseStatement)  # a statement's edits give a statement
            self.statement_results[original_node] = updated_node
        return updated_node

    def _rebuild(self, originals: Sequence[cst.BaseStatement]) -> list[cst.BaseStatement]:
        body: list[cst.BaseStatement] = []
        orphans: list[cst.EmptyLine] = []  # comments and blank lines of removed statements
        position = 0
        while position < len(originals):
            original = originals[position]
            if original in self.plan.wraps:
                last, build = self.plan.wraps[original]
                end = originals.index(last, position)
                run = _merge_guards(
                    [stmt for inner in originals[position : end + 1] for stmt in self._rendered(inner)],
                    self._guard_of,
                    self.made_guards,
                )
                run[0], leading = _without_leading_lines(run[0])
                body.append(build(run).with_changes(leading_lines=leading))
                position = end + 1
                continue
            rendered = self._rendered(original)
            if original in self.plan.removed and not rendered and leading_lines(original):
                orphans.extend(leading_lines(original))
            elif rendered and orphans:
                rendered[0] = rendered[0].with_changes(leading_lines=[*orphans, *leading_lines(rendered[0])])
                orphans = []
            body.extend(rendered)
            position += 1
        if not body:
            body = [cst.SimpleStatementLine(body=[cst.Pass()])]
        return _merge_guards(body, self._guard_of, self.made_guards)

    def _rendered(self, original: cst.BaseStatement) -> list[cst.BaseStatement]:
        plan = self.plan
        result: list[cst.BaseStatement] = list(plan.before.get(original, ()))
        updated = self.statement_results.get(original, original)
        if (original in plan.spliced and isinstance(updated, cst.BaseCompoundStatement)
                and isinstance(updated.body, cst.IndentedBlock)):
            inner = list(updated.body.body)
            if inner:
                inner[0] = inner[0].with_changes(leading_lines=[*leading_lines(updated), *leading_lines(inner[0])])
            result.extend(inner)
        elif original not in plan.removed:
            if original in plan.guarded:
                self.guard_tests[id(updated)] = plan.guarded[original]
            result.append(updated)
        result.extend(plan.after.get(original, ()))
        return result

    def _fold_guard(self, node: cst.If) -> cst.If:
        """`if step % 10 == 0:` holding only a rank guard becomes `if step % 10 == 0 and <guard>:`."""
        body = node.body
        if node.orelse is not None or not isinstance(body, cst.IndentedBlock) or len(body.body) != 1:
            return node
        inner = body.body[0]
        if id(inner) not in self.made_guards or not isinstance(inner, cst.If):
            return node
        test = node.test
        if isinstance(test, (cst.BooleanOperation, cst.IfExp, cst.Lambda, cst.NamedExpr)):
            test = test.with_changes(lpar=[cst.LeftParen()], rpar=[cst.RightParen()])
        folded = cst.BooleanOperation(left=test, operator=cst.And(), right=inner.test)
        return node.with_changes(test=folded, body=inner.body)

    def _guard_of(self, stmt: cst.BaseStatement) -> str | None:
        return self.guard_tests.get(id(stmt))


def small_statement_holding(
    stmt: cst.BaseStatement, node: cst.CSTNode
) -> tuple[cst.SimpleStatementLine | cst.SimpleStatementSuite | None, cst.BaseSmallStatement | None]:
    """The line (or one-line suite inside `stmt`) and the small statement in it that hold `node`."""
    holders = [stmt] if isinstance(stmt, cst.SimpleStatementLine) else [
        n for n in descendants(stmt) if isinstance(n, cst.SimpleStatementSuite)]
    for holder in holders:
        for small in holder.body:
            if any(inner is node for inner in descendants(small)):
                return holder, small
    return None, None


def _without_parts(original: cst.CSTNode, updated: cst.CSTNode, parts: set[cst.BaseSmallStatement]) -> cst.CSTNode:
    """The line or suite without the removed small statements (`pass` when a suite keeps none)."""
    assert isinstance(original, (cst.SimpleStatementLine, cst.SimpleStatementSuite))
    assert isinstance(updated, (cst.SimpleStatementLine, cst.SimpleStatementSuite))
    kept = [u for o, u in zip(original.body, updated.body) if o not in parts]
    if not kept:
        kept = [cst.Pass()]
    if kept[-1].semicolon is not cst.MaybeSentinel.DEFAULT:  # keeps the others' identity when it can
        kept[-1] = kept[-1].with_changes(semicolon=cst.MaybeSentinel.DEFAULT)
    return updated.with_changes(body=kept)


@lru_cache(maxsize=64)
def _parsed_line(line: str) -> cst.SimpleStatementLine:
    statement = cst.parse_statement(line + "\n")
    assert isinstance(statement, cst.SimpleStatementLine)
    return statement


@lru_cache(maxsize=64)
def _merged_from_import(earlier: cst.SimpleStatementLine, new: cst.SimpleStatementLine) -> cst.SimpleStatementLine | None:
    """`from m import a, b` for two `from m import ...` lines of one module, else None."""
    first, second = earlier.body[0], new.body[0]
    if not (isinstance(first, cst.ImportFrom) and isinstance(second, cst.ImportFrom)) or first.relative or second.relative:
        return None
    if first.module is None or second.module is None or not first.module.deep_equals(second.module):
        return None
    if isinstance(first.names, cst.ImportStar) or isinstance(second.names, cst.ImportStar):
        return None
    names = [*first.names, *second.names]
    spelled = [cst.Module([]).code_for_node(alias.with_changes(comma=cst.MaybeSentinel.DEFAULT)) for alias in names]
    line = f"from {cst.Module([]).code_for_node(first.module)} import {', '.join(spelled)}"
    if len(line) > 100:
        line = line.split(" import ")[0] + " import (\n" + "".join(f"    {name},\n" for name in spelled) + ")"
    merged = cst.parse_statement(line + "\n")
    assert isinstance(merged, cst.SimpleStatementLine)
    return merged


def _parsed_test(test: str) -> cst.BaseExpression:
    return cst.parse_expression(test)


def _without_leading_lines(stmt: cst.BaseStatement) -> tuple[cst.BaseStatement, Sequence[cst.EmptyLine]]:
    leading = getattr(stmt, "leading_lines", ())
    return stmt.with_changes(leading_lines=()), leading


def _merge_guards(
    body: list[cst.BaseStatement], guard_of: Callable[[cst.BaseStatement], str | None], made: set[int]
) -> list[cst.BaseStatement]:
    """Put each run of neighbouring statements guarded by the same test under one `if`."""
    merged: list[cst.BaseStatement] = []
    position = 0
    while position < len(body):
        test = guard_of(body[position])
        if test is None:
            merged.append(body[position])
            position += 1
            continue
        end = position
        while end + 1 < len(body) and guard_of(body[end + 1]) == test and not getattr(body[end + 1], "leading_lines", ()):
            end += 1
        run = body[position : end + 1]
        run[0], leading = _without_leading_lines(run[0])
        guard = cst.If(test=_parsed_test(test), body=cst.IndentedBlock(body=run), leading_lines=leading)
        made.add(id(guard))
        merged.append(guard)
        position = end + 1
    return merged


def top_block_imports(module: cst.Module, imports: Sequence[cst.BaseStatement]) -> list[cst.BaseStatement]:
    """The imports of the top block: those before the module's first statement that runs code (a
    def, class, `if`, `for`...; or a line that calls something, such as `parser = ArgumentParser()`).
    New code may run from there on, so a later import is no place for the names it reads."""
    first_work = next((i for i, stmt in enumerate(module.body) if _runs_code(stmt)), len(module.body))
    leading = set(map(id, module.body[:first_work]))
    return [stmt for stmt in imports if id(stmt) in leading]


def _is_docstring(stmt: cst.BaseStatement) -> bool:
    return (isinstance(stmt, cst.SimpleStatementLine) and isinstance(stmt.body[0], cst.Expr)
            and isinstance(stmt.body[0].value, (cst.SimpleString, cst.ConcatenatedString)))


def _runs_code(stmt: cst.BaseStatement) -> bool:
    if isinstance(stmt, cst.BaseCompoundStatement):
        return True
    return any(isinstance(node, cst.Call) for node in descendants(stmt))
