"""Line and column of a node, for findings, without libcst's position metadata.

libcst computes positions by generating the whole module's code with position tracking,
which costs more than the conversion itself. CPython's `ast` already knows where every
statement starts and parses in C, and both trees list statements in the same nested order, so
walking them side by side maps each libcst statement to its line. A node inside a statement is
then found by its own text within that statement's lines.
"""

from __future__ import annotations

import ast
from collections.abc import Sequence
from dataclasses import dataclass

import libcst as cst

from migrate.analysis.index import child_nodes


class Positions:
    def __init__(self, module: cst.Module, code: str) -> None:
        self.module = module
        self.lines = code.splitlines()
        self.starts: Starts = {}
        _pair_bodies(list(module.body), ast.parse(code).body, self.starts)
        self._parents: dict[cst.CSTNode, cst.CSTNode] | None = None
        self._mapped: set[cst.CSTNode] = set()  # subtrees whose parents are known

    def of(self, node: cst.CSTNode, within: cst.CSTNode | None = None) -> tuple[int, int]:
        """(line, column), both from 1; (0, 0) when the node is not in the module.
        `within`: a statement known to hold the node, so only that subtree is searched."""
        if node in self.starts:
            return self.starts[node]
        parents = self._parent_map(within)
        parent = parents.get(node)
        if parent is None:
            return (0, 0)
        line, col = self.starts.get(_TextStart(parent)) or self.of(parent, within)
        siblings = list(child_nodes(parent))
        before = siblings[: siblings.index(node)]
        if before and not isinstance(parent, (cst.IfExp, cst.Module, cst.FunctionDef, cst.ClassDef)):  # fields not in text order
            line, col = self._end_of(before[-1], within)
        self.starts[node] = self._find_text(node, line, col) or self._find_text(node, *self.of(parent, within)) or (line, col)
        return self.starts[node]

    def _parent_map(self, within: cst.CSTNode | None) -> dict[cst.CSTNode, cst.CSTNode]:
        if self._parents is None:
            self._parents = {}
        root = within if within is not None else self.module
        if root not in self._mapped:
            self._mapped.add(root)
            stack: list[cst.CSTNode] = [root]
            while stack:
                node = stack.pop()
                for child in child_nodes(node):
                    self._parents[child] = node
                    stack.append(child)
        return self._parents

    def _end_of(self, node: cst.CSTNode, within: cst.CSTNode | None) -> tuple[int, int]:
        line, col = self.of(node, within)
        text = self.module.code_for_node(node).strip()  # positions are of the stripped text
        rows = text.split("\n")
        if len(rows) == 1:
            return (line, col + len(text))
        return (line + len(rows) - 1, len(rows[-1]) + 1)

    def _find_text(self, node: cst.CSTNode, line: int, col: int) -> tuple[int, int] | None:
        """Where the node's first line of text occurs, at or after (line, col)."""
        first = self.module.code_for_node(node).strip().splitlines()
        if not first:
            return None
        needle = first[0]
        for row in range(line - 1, len(self.lines)):
            start = col - 1 if row == line - 1 else 0
            found = self.lines[row].find(needle, start)
            if found >= 0:
                return (row + 1, found + 1)
        return None


@dataclass(frozen=True)
class _TextStart:
    """Key for where a decorated definition's text starts (its own position is its `def`)."""

    node: cst.CSTNode


# (line, column) where a statement starts, and where a decorated one's text starts (_TextStart)
Starts = dict[cst.CSTNode | _TextStart, tuple[int, int]]


def _pair_bodies(cst_body: list[cst.BaseStatement], ast_body: list[ast.stmt], starts: Starts) -> None:
    position = 0
    for statement in cst_body:
        if position >= len(ast_body):
            return
        node = ast_body[position]
        starts[statement] = (node.lineno, node.col_offset + 1)
        decorators = getattr(node, "decorator_list", None)
        if decorators:  # its text (where children are searched) starts at the first `@`
            starts[_TextStart(statement)] = (decorators[0].lineno, decorators[0].col_offset)
        if isinstance(statement, cst.SimpleStatementLine):
            position += len(statement.body)
            continue
        _pair_compound(statement, node, starts)
        position += 1


def _pair_compound(statement: cst.CSTNode, node: ast.AST, starts: Starts) -> None:
    body = getattr(statement, "body", None)
    ast_body: list[ast.stmt] | None = getattr(node, "body", None)
    if isinstance(body, cst.IndentedBlock) and ast_body is not None:
        _pair_bodies(list(body.body), ast_body, starts)
    orelse = getattr(statement, "orelse", None)
    ast_orelse: list[ast.stmt] = getattr(node, "orelse", None) or []
    if isinstance(orelse, cst.If) and ast_orelse:
        starts[orelse] = (ast_orelse[0].lineno, ast_orelse[0].col_offset + 1)
        _pair_compound(orelse, ast_orelse[0], starts)
    elif isinstance(orelse, cst.Else) and isinstance(orelse.body, cst.IndentedBlock):
        _pair_bodies(list(orelse.body.body), ast_orelse, starts)
    if isinstance(statement, (cst.Try, cst.TryStar)) and isinstance(node, (ast.Try, ast.TryStar)):
        handlers: Sequence[cst.ExceptHandler | cst.ExceptStarHandler] = statement.handlers
        for handler, ast_handler in zip(handlers, node.handlers):
            if isinstance(handler.body, cst.IndentedBlock):
                _pair_bodies(list(handler.body.body), ast_handler.body, starts)
        if statement.finalbody is not None and isinstance(statement.finalbody.body, cst.IndentedBlock):
            _pair_bodies(list(statement.finalbody.body.body), node.finalbody, starts)
    if isinstance(statement, cst.Match) and isinstance(node, ast.Match):
        for case, ast_case in zip(statement.cases, node.cases):
            if isinstance(case.body, cst.IndentedBlock):
                _pair_bodies(list(case.body.body), ast_case.body, starts)
