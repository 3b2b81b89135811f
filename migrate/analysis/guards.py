"""Which statements of a script run on rank 0 only.

A statement runs on rank 0 only when it sits in the body of an `if` whose test is true only there
(`if rank == 0:`, `if dist.get_rank() == 0:`, `if hvd.rank() == 0:`, `if local_rank in (-1, 0):`,
`if args.rank % ngpus == 0:`, `if is_master:`, `if accelerator.is_main_process:`,
`if not distributed or rank == 0:`), in the `else` of a test true everywhere but there, after an
early exit of the other ranks in the same block (`if rank != 0: return`), in the `else` of a test
of distributed-ness (`if ddp: ... else: print(...)`: one process), or in a function of the
script that is only ever called from such places. Rank is read from the spelling: any expression
whose text says `rank` or `process_index`.

`migrate check` asks this of every print, log and collective (migrate.check.rules_ranks). The
conversion's own test (steps.rank_zero.under_rank_check) is still a looser one of its own: any `if`
around whose test's text names the rank, either way, in any case (`os.environ["RANK"]`), but for a
test of distributed-ness (`if args.local_rank != -1:`, true on every rank of a distributed run).
"""

from __future__ import annotations

import re

import libcst as cst

from migrate.analysis.index import Scope, ScriptIndex, descendants, spell
from migrate.analysis.training import callers_of

RANK_TEXT = re.compile(r"rank|process_index", re.IGNORECASE)
MAIN_WORDS = re.compile(r"master|main_process|is_main|is_primary|^main$|rank_?0|rank_zero|global_zero|is_root|chief|is_first",
                        re.IGNORECASE)
DISTRIBUTED_WORDS = re.compile(r"^(ddp|distributed|is_distributed|use_ddp|is_initialized|multiprocessing_distributed)$",
                               re.IGNORECASE)
EXITS = (cst.Return, cst.Continue, cst.Break, cst.Raise)


def is_main_test(index: ScriptIndex, test: cst.BaseExpression) -> bool:
    """True only on rank 0 (or on one rank per node)."""
    if isinstance(test, cst.BooleanOperation):
        sides = (test.left, test.right)
        if isinstance(test.operator, cst.And):
            return any(is_main_test(index, side) for side in sides)
        return any(is_main_test(index, side) for side in sides) and all(
            is_main_test(index, side) or _is_negation(side) for side in sides)
    if isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not):
        return is_other_test(index, test.expression, nested=True) or _says_distributed(test.expression)
    if isinstance(test, cst.Comparison) and len(test.comparisons) == 1:
        return _compares_rank(index, test, (cst.Equal, cst.LessThanEqual, cst.In, cst.Is), 0) or \
            _compares_rank(index, test, (cst.LessThan,), 1)
    return _names_main(test)


def is_other_test(index: ScriptIndex, test: cst.BaseExpression, nested: bool = False) -> bool:
    """True on every rank but rank 0 (`rank != 0`, `rank > 0`, `not is_master`); as an early exit's
    test (not nested) an `and`/`or` with one such side counts too (`if distributed and rank != 0`)."""
    if isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not):
        return is_main_test(index, test.expression)
    if isinstance(test, cst.BooleanOperation) and not nested:
        return any(is_other_test(index, side) for side in (test.left, test.right))
    if isinstance(test, cst.Comparison) and len(test.comparisons) == 1:
        return _compares_rank(index, test, (cst.NotEqual, cst.GreaterThan, cst.NotIn, cst.IsNot), 0) or \
            _compares_rank(index, test, (cst.GreaterThanEqual,), 1)
    return False


def _compares_rank(index: ScriptIndex, test: cst.Comparison, operators: tuple[type, ...], bound: int) -> bool:
    target = test.comparisons[0]
    if not isinstance(target.operator, operators):
        return False
    left, right = test.left, target.comparator
    text = index.module.code_for_node
    if isinstance(target.operator, (cst.In, cst.NotIn)):
        return bool(RANK_TEXT.search(text(left))) and _holds_zero(right)
    return (bool(RANK_TEXT.search(text(left))) and _is_number(right, bound)) or \
        (bool(RANK_TEXT.search(text(right))) and _is_number(left, bound) and bound == 0)


def _is_number(node: cst.BaseExpression, value: int) -> bool:
    if isinstance(node, cst.Integer):
        return int(node.value, 0) == value
    if isinstance(node, cst.SimpleString):
        return node.evaluated_value == str(value)
    return False


def _holds_zero(node: cst.BaseExpression) -> bool:
    if isinstance(node, (cst.Tuple, cst.List, cst.Set)):
        return any(_is_number(e.value, 0) for e in node.elements)
    return False


def _names_main(test: cst.BaseExpression) -> bool:
    """`is_master`, `args.is_main_process`, `accelerator.is_main_process`, `is_main_process()`."""
    if isinstance(test, cst.Call):
        test = test.func
    dotted = spell(test)
    return dotted is not None and bool(MAIN_WORDS.search(dotted.rsplit(".", 1)[-1]))


def _is_negation(test: cst.BaseExpression) -> bool:
    return isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not)


def on_rank_zero(index: ScriptIndex, stmt: cst.BaseStatement, node: cst.CSTNode | None = None) -> bool:
    """Whether `stmt` (or `node`, a call of it) runs on rank 0 only (see the module docstring).
    A call on the line of its `if` (`if rank == 0: print(x)`) has the `if` for its statement."""
    return _on_one_line(index, stmt, node) or \
        index.answer("rank_zero_only", stmt, lambda: _on_rank_zero(index, stmt, set()))


def _on_one_line(index: ScriptIndex, stmt: cst.BaseStatement, node: cst.CSTNode | None) -> bool:
    return node is not None and isinstance(stmt, cst.If) and isinstance(stmt.body, cst.SimpleStatementSuite) and \
        any(n is node for n in descendants(stmt.body)) and is_main_test(index, stmt.test)


def _on_rank_zero(index: ScriptIndex, stmt: cst.BaseStatement, visiting: set[Scope]) -> bool:
    chain = index.enclosing_statements(stmt)
    for child, parent in zip(chain, chain[1:]):
        if isinstance(parent, cst.If) and _guards(index, parent, child):
            return True
    if any(_after_early_exit(index, s) for s in chain):
        return True
    scope = index.scope_of.get(stmt)
    return scope is not None and not scope.is_module and _called_on_rank_zero_only(index, scope, visiting)


def _guards(index: ScriptIndex, branch: cst.If, child: cst.BaseStatement) -> bool:
    in_body = any(s is child for s in branch.body.body)
    if in_body:
        return is_main_test(index, branch.test)
    return is_other_test(index, branch.test, nested=True) or _says_distributed(branch.test)


def _says_distributed(test: cst.BaseExpression) -> bool:
    """`ddp`, `args.distributed`, `dist.is_initialized()`, `is_distributed()`: its `else` (or `if not`)
    is a run of one process."""
    if isinstance(test, cst.Call):
        test = test.func
    dotted = spell(test)
    return dotted is not None and bool(DISTRIBUTED_WORDS.search(dotted.rsplit(".", 1)[-1]))


def _after_early_exit(index: ScriptIndex, stmt: cst.BaseStatement) -> bool:
    """A statement before `stmt` in its block sends every other rank away (`if rank != 0: return`)."""
    placed = index.block_of.get(stmt)
    if placed is None:
        return False
    block, position = placed
    body = block.body
    return any(isinstance(s, cst.If) and s.orelse is None and _exits(s) and is_other_test(index, s.test)
               for s in list(body)[:position])


def _exits(branch: cst.If) -> bool:
    last = branch.body.body[-1] if branch.body.body else None
    return isinstance(last, cst.SimpleStatementLine) and any(isinstance(small, EXITS) for small in last.body)


def called_on_rank_zero_only(index: ScriptIndex, scope: Scope) -> bool:
    """Every call of this function of the script is made on rank 0 only (and there is one)."""
    return _called_on_rank_zero_only(index, scope, set())


def _called_on_rank_zero_only(index: ScriptIndex, scope: Scope, visiting: set[Scope]) -> bool:
    """Every call of this function of the script is made on rank 0 only (and there is one)."""
    if scope in visiting:
        return False
    visiting.add(scope)
    callers = callers_of(index, scope)
    return bool(callers) and all(_on_one_line(index, call.place.stmt, call.node) or
                                 _on_rank_zero(index, call.place.stmt, visiting) for call in callers)
