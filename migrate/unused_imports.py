"""Drop the imports that a rewrite made unused: `from torch.cuda.amp import GradScaler, autocast`
once `to-deepspeed` has taken over precision and removed every `GradScaler(...)` and `autocast(...)`.

`drop_imports_made_unused(old, new)` removes from `new` only what the rewrite made unused, and is
conservative everywhere else:

* An import counts only when the same import (same module, name and alias) is in both versions:
  an import the rewrite added is its own business, and so is one the user never used.
* A bound name goes only when `old` reads it and `new` does not. A read is a name loaded in an
  expression, not an attribute, keyword, parameter or definition name. In `new`, these count as
  reads too: binding the name otherwise (assignment, def, `for`, ...), a name or any word of a
  string in an annotation, a word of a string in `__all__` or in `cast(...)`/`TypeVar(...)`, a
  `global`/`nonlocal` statement, a word of a `# type:` comment.
* Nothing changes in a module that reads `globals`, `locals`, `vars`, `eval` or `exec`, defines a
  module `__getattr__`, or star-imports. Only imports directly in the module body or in a function
  body are edited: never one inside `if`/`try`/`with`/a loop (availability probes), or a class body.
* The edit is local: the statement's lines are edited with libcst (layout and comments kept) and
  spliced back; the lines around it stay as they are. A comment that an edit would drop keeps the
  statement unchanged, as does one on the line of an import that would go entirely.

Speed: names are read from the compiler's symbol tables (`symtable`: C speed, no syntax tree in
Python objects), first of `new` alone. Only when an import of `new` is read in `old` and not in
`new` (the rewrite removed its last read: rare) are both texts parsed with `ast` for the
statements, and libcst parses only the lines it edits.
"""

from __future__ import annotations

import ast
import re
import symtable
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import libcst as cst

# Reading any of these makes a module's names unknowable from its text.
DYNAMIC_NAMES = frozenset({"globals", "locals", "vars", "eval", "exec"})
# Calls whose string arguments name types: `cast("GradScaler", x)`, `TypeVar("T", bound="Model")`.
TYPE_NAMING_CALLS = frozenset({"cast", "TypeVar"})

_WORD = re.compile(r"\w+")
_TYPE_NAMING_CALL = re.compile(r"\b(?:cast|TypeVar)\s*\(")
_TYPE_COMMENT = re.compile(r"#\s*type:([^\r\n]*)")
_COMMENT = re.compile(r"#[^\r\n]*")  # an import statement holds no strings: every `#` opens a comment
_LINE = re.compile(r"[^\r\n]*(?:\r\n|\r|\n|\Z)")  # the line breaks Python's tokenizer knows
_INDENT = " \t\f"

_AliasKey = tuple[object, ...]
_Import = ast.Import | ast.ImportFrom
_Function = (ast.FunctionDef, ast.AsyncFunctionDef)


def drop_imports_made_unused(old_code: str, new_code: str) -> str:
    """new_code without the import names that the rewrite made unused: names imported in both
    versions, read in old_code and read nowhere in new_code. Returns new_code itself when nothing
    goes (or either text does not parse); applying it again changes nothing."""
    if old_code == new_code:
        return new_code
    unused = _names_no_longer_read(old_code, new_code)
    if not unused:  # the usual case, decided from the symbol tables alone
        return new_code
    # The rewrite removed the last read of an imported name: now the statements are needed.
    new_tree = _parse(new_code)
    if new_tree is None:
        return new_code
    new_imports = _imports_of(new_tree)
    if new_imports.star:
        return new_code
    unused -= _mentions(new_tree, new_code)
    candidates = {id(stmt): stmt for body in _editable_bodies(new_tree) for stmt in body
                  if isinstance(stmt, (ast.Import, ast.ImportFrom)) and not _is_future(stmt)
                  and any(_bound_name(stmt, alias) in unused for alias in stmt.names)}
    if not candidates:
        return new_code
    old_tree = _parse(old_code)
    if old_tree is None:
        return new_code
    old_imports = _imports_of(old_tree)
    if old_imports.star:
        return new_code
    removals: dict[int, frozenset[int]] = {}  # id of an import statement in new_tree -> indices of its aliases that go
    for key, stmt in candidates.items():
        indices = frozenset(index for index, alias in enumerate(stmt.names)
                            if _bound_name(stmt, alias) in unused and _alias_key(stmt, alias) in old_imports.keys)
        if indices:
            removals[key] = indices
    if not removals:
        return new_code
    return _apply(new_code, _plan_edits(new_tree, removals))


def _names_no_longer_read(old_code: str, new_code: str) -> set[str]:
    """Names imported in new_code that old_code reads and new_code neither reads nor binds
    otherwise, by the symbol tables (empty for a dynamic module or a text that does not parse)."""
    new = _symbols_of(new_code)
    if new is None:
        return set()
    unused = new.imported - new.read - new.assigned
    if not unused:
        return set()
    old = _symbols_of(old_code)
    if old is None or new.dynamic or old.dynamic:
        return set()
    return set(unused & old.read)


# -- reading names ----------------------------------------------------------------------------


@dataclass(frozen=True)
class _Symbols:
    """What the compiler's symbol tables say about names, over every scope of a module."""

    read: frozenset[str]  # loaded in an expression, or declared `global`/`nonlocal`
    assigned: frozenset[str]  # bound otherwise than by an import (assignment, def, class, for, with, del)
    imported: frozenset[str]
    dynamic: bool  # reads globals/locals/vars/eval/exec, or defines a module `__getattr__`


@dataclass(frozen=True)
class _Imports:
    keys: frozenset[_AliasKey]  # every import, wherever it stands
    star: bool


def _symbols_of(code: str) -> _Symbols | None:
    """Names as the symbol tables see them: C speed, no syntax tree in Python objects. They do not
    see annotations under `from __future__ import annotations`, nor strings: `_mentions` does."""
    try:
        top = symtable.symtable(code, "<migrated>", "exec")
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None
    read: set[str] = set()
    assigned: set[str] = set()
    imported: set[str] = set()
    pending = [top]
    while pending:
        table = pending.pop()
        pending.extend(table.get_children())
        for symbol in table.get_symbols():
            name = symbol.get_name()
            if symbol.is_referenced() or symbol.is_declared_global() or symbol.is_nonlocal():
                read.add(name)
            if symbol.is_assigned():
                assigned.add(name)
            if symbol.is_imported():
                imported.add(name)
    dynamic = bool((read | assigned) & DYNAMIC_NAMES) or "__getattr__" in top.get_identifiers()
    return _Symbols(frozenset(read), frozenset(assigned), frozenset(imported), dynamic)


def _parse(code: str) -> ast.Module | None:
    try:
        return ast.parse(code)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None


def _imports_of(tree: ast.Module) -> _Imports:
    keys: set[_AliasKey] = set()
    star = False
    for stmt in _statements(tree.body):
        if isinstance(stmt, (ast.Import, ast.ImportFrom)):
            keys.update(_alias_key(stmt, alias) for alias in stmt.names)
            star = star or any(alias.name == "*" for alias in stmt.names)
    return _Imports(frozenset(keys), star)


def _mentions(tree: ast.Module, code: str) -> set[str]:
    """Names the symbol tables do not count as reads, but a reader (or a type checker) would:
    names and string words in annotations, strings in `__all__` and in `cast(...)`/`TypeVar(...)`,
    `global`/`nonlocal` statements, words of `# type:` comments."""
    mentioned: set[str] = set()
    naming: list[ast.expr] = []  # expressions whose names and string words count
    for stmt in _statements(tree.body):
        if isinstance(stmt, _Function):
            arguments = stmt.args
            for argument in [*arguments.posonlyargs, *arguments.args, arguments.vararg, *arguments.kwonlyargs, arguments.kwarg]:
                if argument is not None and argument.annotation is not None:
                    naming.append(argument.annotation)
            if stmt.returns is not None:
                naming.append(stmt.returns)
        elif isinstance(stmt, ast.AnnAssign):
            naming.append(stmt.annotation)
            if stmt.value is not None and _is_all(stmt.target):
                naming.append(stmt.value)
        elif isinstance(stmt, ast.Assign):
            if any(_is_all(target) for target in stmt.targets):
                naming.append(stmt.value)
        elif isinstance(stmt, ast.AugAssign):
            if _is_all(stmt.target):
                naming.append(stmt.value)
        elif isinstance(stmt, ast.Expr):
            if isinstance(stmt.value, ast.Call) and isinstance(stmt.value.func, ast.Attribute) and _is_all(stmt.value.func.value):
                naming.append(stmt.value)  # __all__.extend([...]), __all__.append("...")
        elif isinstance(stmt, (ast.Global, ast.Nonlocal)):
            mentioned.update(stmt.names)
    for expression in naming:
        mentioned.update(_names_and_words(expression))
    for comment in _TYPE_COMMENT.finditer(code):
        mentioned.update(_WORD.findall(comment.group(1)))
    if _TYPE_NAMING_CALL.search(code):
        mentioned.update(_words_naming_types(tree))
    return mentioned


def _statements(body: list[ast.stmt]) -> Iterator[ast.stmt]:
    """Every statement, at any depth (in functions, classes, branches, handlers, match cases)."""
    pending = list(body)
    while pending:
        stmt = pending.pop()
        yield stmt
        for field in ("body", "orelse", "finalbody"):
            children = getattr(stmt, field, None)
            if isinstance(children, list):
                pending.extend(children)
        for block in [*getattr(stmt, "handlers", ()), *getattr(stmt, "cases", ())]:
            pending.extend(block.body)


def _words_naming_types(tree: ast.Module) -> set[str]:
    """Words of the strings given to `cast(...)` and `TypeVar(...)`: `cast("GradScaler", x)`."""
    words: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            func = node.func
            name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
            if name in TYPE_NAMING_CALLS:
                for argument in [*node.args, *(keyword.value for keyword in node.keywords)]:
                    words.update(_names_and_words(argument))
    return words


def _is_all(target: ast.expr) -> bool:
    return isinstance(target, ast.Name) and target.id == "__all__"


def _names_and_words(expression: ast.expr) -> Iterator[str]:
    """Names in an annotation (`from __future__ import annotations` hides them from the symbol
    tables) and every word of its strings (`"GradScaler"`, `"list[GradScaler]"`)."""
    for node in ast.walk(expression):
        if isinstance(node, ast.Name):
            yield node.id
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            yield from _WORD.findall(node.value)


# -- which imports -----------------------------------------------------------------------------


def _bound_name(stmt: _Import, alias: ast.alias) -> str:
    """The name an alias binds: `c` for `import a.b as c` and `from m import b as c`, `a` for `import a.b`."""
    if alias.asname:
        return alias.asname
    return alias.name.partition(".")[0] if isinstance(stmt, ast.Import) else alias.name


def _is_future(stmt: _Import) -> bool:
    """`from __future__ import annotations` changes how the module compiles: never a plain name."""
    return isinstance(stmt, ast.ImportFrom) and stmt.module == "__future__" and not stmt.level


def _alias_key(stmt: _Import, alias: ast.alias) -> _AliasKey:
    """What makes two imports the same import, wherever they stand."""
    if isinstance(stmt, ast.Import):
        return ("import", alias.name, alias.asname)
    return ("from", stmt.level, stmt.module, alias.name, alias.asname)


def _editable_bodies(tree: ast.Module) -> Iterator[list[ast.stmt]]:
    """The module body and every function body reached through functions and classes only: an
    import inside `if`/`try`/`with`/a loop is an availability probe, and one in a class body an attribute."""
    yield tree.body
    pending: list[ast.stmt] = list(tree.body)
    while pending:
        stmt = pending.pop()
        if isinstance(stmt, _Function):
            yield stmt.body
            pending.extend(stmt.body)
        elif isinstance(stmt, ast.ClassDef):
            pending.extend(stmt.body)


# -- planning the edits ------------------------------------------------------------------------


@dataclass(frozen=True)
class _Edit:
    """One logical line to edit: the statements on lines first..last (0-based) of the text."""

    first: int
    last: int
    column: int  # where the first statement starts on the first line
    removals: tuple[frozenset[int], ...]  # per statement on the line: indices of the aliases that go
    whole: bool  # every statement on the line goes


def _plan_edits(tree: ast.Module, removals: dict[int, frozenset[int]]) -> list[_Edit]:
    edits: list[_Edit] = []
    for body in _editable_bodies(tree):
        if not any(id(stmt) in removals for stmt in body):
            continue
        planned = [_edit_of(line, removals) for line in _logical_lines(body)]
        wanted = [edit for edit in planned if edit is not None]
        if body is not tree.body and len(wanted) == len(planned) and all(edit.whole for edit in wanted):
            continue  # the function body would be left empty
        edits.extend(wanted)
    return edits


def _logical_lines(body: Sequence[ast.stmt]) -> Iterator[list[ast.stmt]]:
    """The statements of a body, grouped by the line they share (`import os; x = 1`)."""
    line: list[ast.stmt] = []
    for stmt in body:
        if line and stmt.lineno != line[-1].end_lineno:
            yield line
            line = []
        line.append(stmt)
    if line:
        yield line


def _edit_of(line: list[ast.stmt], removals: dict[int, frozenset[int]]) -> _Edit | None:
    per_statement = tuple(removals.get(id(stmt), frozenset()) for stmt in line)
    if not any(per_statement):
        return None
    whole = all(isinstance(stmt, (ast.Import, ast.ImportFrom)) and len(indices) == len(stmt.names)
                for stmt, indices in zip(line, per_statement))
    last = line[-1].end_lineno or line[-1].lineno
    return _Edit(line[0].lineno - 1, last - 1, line[0].col_offset, per_statement, whole)


# -- applying them -----------------------------------------------------------------------------


def _apply(code: str, edits: list[_Edit]) -> str:
    lines = _LINE.findall(code)[:-1]  # the last match is the empty one at the end
    changed = False
    for edit in sorted(edits, key=lambda edit: edit.first, reverse=True):  # bottom up: earlier line numbers stay valid
        changed = _apply_one(lines, edit) or changed
    return "".join(lines) if changed else code


def _apply_one(lines: list[str], edit: _Edit) -> bool:
    first_line = lines[edit.first]
    indent = first_line[:edit.column]
    if indent.strip(_INDENT) or first_line.startswith("\ufeff"):
        return False  # something else starts the line (`def f(): import x`)
    if (edit.first > 0 and _continues(lines[edit.first - 1])) or _continues(lines[edit.last]):
        return False  # a backslash joins the line to another
    source = first_line[edit.column:] + "".join(lines[edit.first + 1:edit.last + 1])
    edited = _edited_statements(source, edit.removals)
    if edited is None:
        return False
    if edited:
        lines[edit.first:edit.last + 1] = [indent + edited]
        return True
    start, end = edit.first, edit.last + 1
    blank_before = start == 0 or _blank(lines[start - 1])
    if end < len(lines) and blank_before and _blank(lines[end]):
        end += 1  # do not leave two blank lines where there was one on each side
    elif end == len(lines) and start > 0 and _blank(lines[start - 1]):
        start -= 1  # nor a blank line at the end of the file
    del lines[start:end]
    return True


def _continues(line: str) -> bool:
    return line.rstrip("\r\n").endswith("\\")


def _blank(line: str) -> bool:
    return not line.strip(_INDENT + "\r\n")


def _edited_statements(source: str, removals: tuple[frozenset[int], ...]) -> str | None:
    """The logical line `source` (dedented) with the aliases removed: "" when it all goes, None
    when it stays as it is (nothing could go without losing a comment, or the result is not valid)."""
    import libcst as cst

    try:
        module = cst.parse_module(source)
    except (cst.ParserSyntaxError, RecursionError):
        return None
    if len(module.body) != 1 or not isinstance(module.body[0], cst.SimpleStatementLine) or module.header or module.footer:
        return None
    line = module.body[0]
    if len(line.body) != len(removals):
        return None
    kept: list[tuple[int, cst.BaseSmallStatement]] = []
    for position, (statement, indices) in enumerate(zip(line.body, removals)):
        edited = _edited_import(statement, indices) if indices else statement
        if edited is not None:
            kept.append((position, edited))
    if all(edited is line.body[position] for position, edited in kept) and len(kept) == len(line.body):
        return None
    if not kept:
        return None if line.trailing_whitespace.comment else ""  # a comment on the line is about the import
    if kept[-1][0] != len(line.body) - 1:  # the last statement went: its successor ends the line
        kept[-1] = (kept[-1][0], kept[-1][1].with_changes(semicolon=line.body[-1].semicolon))
    try:
        code = module.with_changes(body=[line.with_changes(body=[statement for _position, statement in kept])]).code
        ast.parse(code)
    except (SyntaxError, ValueError, RecursionError):  # libcst's CSTValidationError is a SyntaxError
        return None
    return code


def _edited_import(statement: cst.BaseSmallStatement, indices: frozenset[int]) -> cst.BaseSmallStatement | None:
    """The import without the aliases at `indices`: None when it goes entirely, itself when it stays."""
    import libcst as cst

    if not isinstance(statement, (cst.Import, cst.ImportFrom)) or isinstance(statement.names, cst.ImportStar):
        return statement
    if len(indices) >= len(statement.names):
        return statement if _comments(statement) else None
    try:
        edited = _without_aliases(statement, indices)
    except (TypeError, AttributeError, SyntaxError):  # a shape not planned for: keep the import
        return statement
    return edited if _comments(edited) == _comments(statement) else statement


def _without_aliases(statement: cst.Import | cst.ImportFrom, indices: frozenset[int]) -> cst.Import | cst.ImportFrom:
    """Each removed alias takes one separator with it; the whitespace that stays keeps its line
    breaks and comments, so a parenthesized multi-line import keeps its layout."""
    import libcst as cst

    assert not isinstance(statement.names, cst.ImportStar)  # `*` names no alias to remove
    names = list(statement.names)
    lpar = statement.lpar if isinstance(statement, cst.ImportFrom) else None
    rpar = statement.rpar if isinstance(statement, cst.ImportFrom) else None
    for index in sorted(indices, reverse=True):
        removed = names.pop(index)
        if index == 0:  # the first: what followed its comma now follows `import` or `(`
            if lpar is not None:
                lpar = lpar.with_changes(whitespace_after=_joined(lpar.whitespace_after, _comma(removed).whitespace_after, False))
        elif index == len(names) and not isinstance(removed.comma, cst.Comma):  # the last, without a trailing comma
            previous = names[index - 1]
            if rpar is not None:
                rpar = rpar.with_changes(whitespace_before=_joined(_comma(previous).whitespace_after, rpar.whitespace_before, True))
            names[index - 1] = previous.with_changes(comma=cst.MaybeSentinel.DEFAULT)
        else:  # the one before keeps its comma, followed by what followed the removed alias
            previous = names[index - 1]
            comma = _comma(previous)
            whitespace = _joined(comma.whitespace_after, _comma(removed).whitespace_after, True)
            names[index - 1] = previous.with_changes(comma=comma.with_changes(whitespace_after=whitespace))
    if isinstance(statement, cst.ImportFrom):
        return statement.with_changes(names=names, lpar=lpar, rpar=rpar)
    return statement.with_changes(names=names)


def _comma(alias: cst.ImportAlias) -> cst.Comma:
    import libcst as cst

    if not isinstance(alias.comma, cst.Comma):
        raise TypeError("an alias followed by another has a comma")
    return alias.comma


def _joined(before: cst.BaseParenthesizableWhitespace, after: cst.BaseParenthesizableWhitespace,
            keep_after: bool) -> cst.BaseParenthesizableWhitespace:
    """The whitespace that replaces `before <removed alias> after`.

    When the alias has a line of its own, that line goes with the comment lines just above it:
    the rest of the line before and the comment lines after stay. A comment that goes makes the
    caller keep the import as it was. Otherwise whitespace holding a comment stays; of two plain
    ones, `after` when `keep_after` (what precedes the next alias or `)`), else `before`.
    """
    import libcst as cst

    if isinstance(before, cst.ParenthesizedWhitespace) and isinstance(after, cst.ParenthesizedWhitespace):
        return after.with_changes(first_line=before.first_line)
    if isinstance(before, cst.ParenthesizedWhitespace) and _has_comment(before):
        return before
    if isinstance(after, cst.ParenthesizedWhitespace) and _has_comment(after):
        return after
    return after if keep_after else before


def _has_comment(whitespace: cst.ParenthesizedWhitespace) -> bool:
    return whitespace.first_line.comment is not None or any(line.comment is not None for line in whitespace.empty_lines)


def _comments(node: cst.CSTNode) -> list[str]:
    import libcst as cst

    return _COMMENT.findall(cst.Module(body=[]).code_for_node(node))
