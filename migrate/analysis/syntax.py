"""Generic syntax helpers over libcst nodes, used by analysis, steps and check alike: the
argument a call passes for a parameter, whether a node holds one that satisfies a test, the calls
under a node. Nothing here knows about training."""

from __future__ import annotations

from collections.abc import Callable

import libcst as cst

from migrate.analysis.index import descendants, spell


def argument_value(call: cst.Call, keyword: str, position: int) -> cst.BaseExpression | None:
    """The value passed for a parameter, by keyword or position (not through *args or **kwargs)."""
    found = argument(call, keyword, position)
    return found.value if found is not None else None


def argument(call: cst.Call, keyword: str, position: int) -> cst.Arg | None:
    """The Arg passed for a parameter, by keyword or position."""
    positional = [a for a in call.args if a.keyword is None and not a.star]
    for arg in call.args:
        if arg.keyword is not None and arg.keyword.value == keyword:
            return arg
    if 0 <= position < len(positional):
        return positional[position]
    return None


def contains(node: cst.CSTNode, predicate: Callable[[cst.CSTNode], bool]) -> bool:
    """Whether any node below `node` (itself included) satisfies `predicate`."""
    return any(predicate(child) for child in descendants(node))


def calls_in(node: cst.CSTNode) -> list[cst.Call]:
    """Every call under `node` (itself included)."""
    return [child for child in descendants(node) if isinstance(child, cst.Call)]


def star_imports(tree: cst.Module) -> tuple[str, ...]:
    """The modules a file star-imports at its top level, relative ones with their dots."""
    found: list[str] = []
    for stmt in tree.body:
        for small in stmt.body if isinstance(stmt, cst.SimpleStatementLine) else ():
            if isinstance(small, cst.ImportFrom) and isinstance(small.names, cst.ImportStar):
                found.append("." * len(small.relative) + (spell(small.module) or "" if small.module is not None else ""))
    return tuple(found)
