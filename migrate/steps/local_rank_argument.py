"""The deepspeed launcher appends `--local_rank=N` to the script's arguments; argparse would
reject it as unknown. The script's parser learns the option (both spellings) right before it
parses. A script without argparse never reads its arguments, so it needs nothing.

A parser in a module of the script's own folder that the script imports (`from options import
get_args`, where options.py calls `parser.parse_args()`) is not the conversion's to edit: there the
launcher is told to pass no `--local_rank` at all (`--no_local_rank`, `NoLocalRankArgument` for
the launcher maker), the converted script takes its local rank from LOCAL_RANK as it always does,
and MIG601 names the module's line. Only that module itself is read (through the conversion's
`read_module`), not the modules it imports in turn.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import libcst as cst
from libcst.metadata import MetadataWrapper, PositionProvider

from migrate.analysis.index import spell
from migrate.steps.base import Context, statement

ARGUMENT = '{parser}.add_argument("--local_rank", "--local-rank", type=int, default=-1, help="set by the deepspeed launcher")\n'
SPELLINGS = frozenset({"--local_rank", "--local-rank"})


@dataclass(frozen=True)
class NoLocalRankArgument:
    """The script's arguments are also parsed in a module of its folder that rejects `--local_rank`:
    its launcher passes `--no_local_rank`. `where`: that parse, `module.py:line:col` from the script's folder."""

    where: str


def _with_underscore_spelling(updated: cst.CSTNode) -> cst.CSTNode:
    """`add_argument("--local-rank", ...)` -> `add_argument("--local_rank", "--local-rank", ...)`."""
    if not isinstance(updated, cst.Call):
        return updated
    spelling = cst.Arg(cst.SimpleString('"--local_rank"'), comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" ")))
    return updated.with_changes(args=[spelling, *updated.args])


def local_rank_argument(ctx: Context) -> None:
    _sibling_parser(ctx)
    index = ctx.index
    parsers = {b.target for b in index.bindings if isinstance(b.value, cst.Call) and index.qualify(b.value.func) == "argparse.ArgumentParser"}
    declared = [call.node for call in index.calls if _declares_local_rank(call.node)]
    if any(_spellings(call) & {"--local_rank"} for call in declared):
        return
    if declared:  # only `--local-rank`: the launcher's `--local_rank=N` becomes its other spelling
        first = declared[0]
        ctx.plan.replace(first, _with_underscore_spelling)
        return
    for call in index.calls:
        func = call.node.func
        if isinstance(func, cst.Attribute) and func.attr.value in ("parse_args", "parse_known_args"):
            parser = spell(func.value)
            if parser in parsers and not call.node.args:
                ctx.plan.insert_before(call.place.stmt, [statement(ARGUMENT.format(parser=parser))])


def _declares_local_rank(call: cst.Call) -> bool:
    return (isinstance(call.func, cst.Attribute) and call.func.attr.value == "add_argument"
            and bool(_spellings(call) & SPELLINGS))


def _spellings(call: cst.Call) -> set[str]:
    """The option strings an `add_argument(...)` call declares."""
    return {a.value.evaluated_value for a in call.args
            if a.keyword is None and isinstance(a.value, cst.SimpleString) and isinstance(a.value.evaluated_value, str)}


# -- a parser in a module of the script's folder ------------------------------------------------

def _sibling_parser(ctx: Context) -> None:
    """The first module of the script's folder it imports that parses sys.argv without knowing
    `--local_rank`: recorded for the launcher, and reported (MIG601) at the script's import."""
    folder = os.path.dirname(ctx.path)
    for stmt in ctx.index.import_stmts:
        for relative in _imported_files(stmt):
            text = ctx.read_module(os.path.join(folder, relative))
            where = _strict_parse(text, _imported_names(stmt)) if text is not None else None
            if where is None:
                continue
            said = f"{relative}:{where[0]}:{where[1]}"
            ctx.record(NoLocalRankArgument(said))
            script = os.path.basename(ctx.path)
            ctx.report("MIG601", f"{said} parses the command line (`parse_args()`) with a parser that has no "
                       f"`--local_rank`, in a module this conversion does not edit: the deepspeed launcher's "
                       f"`--local_rank=N` would stop the script there, so the launcher passes `--no_local_rank` and "
                       f"the script takes its local rank from LOCAL_RANK, which the launcher sets; launched by hand, "
                       f"run `deepspeed --no_local_rank {script}` (or give that parser a `--local_rank` option)", stmt)
            return


def _imported_files(stmt: cst.CSTNode) -> list[str]:
    """The files of the script's folder an import statement may load, relative to that folder:
    `from options import get_args` -> options.py (or options/__init__.py), `from utils import
    options` -> utils/options.py too, `from . import options` -> options.py; none two levels up."""
    files: list[str] = []
    for small in getattr(stmt, "body", ()):
        if isinstance(small, cst.Import):
            files += [f for alias in small.names for f in _module_files(spell(alias.name))]
        elif isinstance(small, cst.ImportFrom) and len(small.relative) <= 1:
            base = spell(small.module) if small.module is not None else ""
            if base is None:
                continue
            files += _module_files(base) if base else []
            if not isinstance(small.names, cst.ImportStar):
                files += [f for alias in small.names for f in _module_files(".".join(filter(None, (base, spell(alias.name)))))]
    return files


def _module_files(dotted: str | None) -> list[str]:
    if not dotted:
        return []
    path = os.path.join(*dotted.split("."))
    return [f"{path}.py", os.path.join(path, "__init__.py")]


def _imported_names(stmt: cst.CSTNode) -> frozenset[str] | None:
    """The names `from m import a, b` takes; None for `import m` or a star (any of its functions)."""
    names: set[str] = set()
    for small in getattr(stmt, "body", ()):
        if not isinstance(small, cst.ImportFrom) or isinstance(small.names, cst.ImportStar):
            return None
        names.update(spell(alias.name) or "" for alias in small.names)
    return frozenset(names)


def _strict_parse(text: str, imported: frozenset[str] | None) -> tuple[int, int] | None:
    """Where a module parses sys.argv with `.parse_args()` (no argument list, or None) while
    declaring no `--local_rank` option; None when it does not, or cannot be parsed. A parse under
    the module's own `if __name__ == "__main__":`, or in a function only that block calls and the
    script does not import (`imported`), never runs when the script imports the module."""
    try:
        wrapper = MetadataWrapper(cst.parse_module(text))
    except (cst.ParserSyntaxError, RecursionError, ValueError):
        return None
    finder = _ParseFinder()
    wrapper.visit(finder)
    if finder.declares_local_rank:
        return None
    own_run_only = {name for name in finder.called_by_main_block - finder.called_elsewhere
                    if imported is not None and name not in imported}
    first = next((call for call, function in finder.parses if function not in own_run_only), None)
    if first is None:
        return None
    position = wrapper.resolve(PositionProvider)[first].start
    return position.line, position.column + 1


class _ParseFinder(cst.CSTVisitor):
    """Each `x.parse_args()` that reads sys.argv outside the module's `__main__` block, with the
    top-level function it is in; the functions that block calls and those called elsewhere; and
    whether any `add_argument` declares `--local_rank`."""

    def __init__(self) -> None:
        super().__init__()
        self.parses: list[tuple[cst.Call, str | None]] = []
        self.called_by_main_block: set[str] = set()
        self.called_elsewhere: set[str] = set()
        self.declares_local_rank = False
        self._functions: list[str] = []
        self._in_main_block = 0

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        self._functions.append(node.name.value)

    def leave_FunctionDef(self, original_node: cst.FunctionDef) -> None:
        self._functions.pop()

    def visit_If(self, node: cst.If) -> None:
        if not self._functions and _is_main_test(node.test):
            self._in_main_block += 1

    def leave_If(self, original_node: cst.If) -> None:
        if not self._functions and _is_main_test(original_node.test):
            self._in_main_block -= 1

    def visit_Call(self, node: cst.Call) -> None:
        if _declares_local_rank(node):
            self.declares_local_rank = True
        called = spell(node.func)
        if called is not None:
            (self.called_by_main_block if self._in_main_block else self.called_elsewhere).add(called)
        if self._in_main_block or not isinstance(node.func, cst.Attribute) or node.func.attr.value != "parse_args":
            return
        given = [a for a in node.args if a.keyword is None or a.keyword.value == "args"]
        if not given or (isinstance(given[0].value, cst.Name) and given[0].value.value == "None"):
            self.parses.append((node, self._functions[0] if self._functions else None))


def _is_main_test(test: cst.BaseExpression) -> bool:
    """`__name__ == "__main__"`, either way round."""
    if not isinstance(test, cst.Comparison) or len(test.comparisons) != 1:
        return False
    sides = {spell(test.left), spell(test.comparisons[0].comparator)}
    strings = [side for side in (test.left, test.comparisons[0].comparator) if isinstance(side, cst.SimpleString)]
    return "__name__" in sides and any(s.evaluated_value == "__main__" for s in strings)
