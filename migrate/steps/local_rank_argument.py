"""The deepspeed launcher appends `--local_rank=N` to the script's arguments; argparse would
reject it as unknown. The script's parser learns the option (both spellings) right before it
parses. A script without argparse never reads its arguments, so it needs nothing.
"""

from __future__ import annotations

import libcst as cst

from migrate.analysis.index import spell
from migrate.steps.base import Context, statement

ARGUMENT = '{parser}.add_argument("--local_rank", "--local-rank", type=int, default=-1, help="set by the deepspeed launcher")\n'


def local_rank_argument(ctx: Context) -> None:
    index = ctx.index
    parsers = {b.target for b in index.bindings if isinstance(b.value, cst.Call) and index.qualify(b.value.func) == "argparse.ArgumentParser"}
    declared = [call.node for call in index.calls if _declares_local_rank(call.node)]
    if any(_spellings(call) & {"--local_rank"} for call in declared):
        return
    if declared:  # only `--local-rank`: the launcher's `--local_rank=N` becomes its other spelling
        first = declared[0]
        ctx.plan.replace(first, lambda updated: updated.with_changes(
            args=[cst.Arg(cst.SimpleString('"--local_rank"'), comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" "))),
                  *updated.args]))
        return
    for call in index.calls:
        func = call.node.func
        if isinstance(func, cst.Attribute) and func.attr.value in ("parse_args", "parse_known_args"):
            parser = spell(func.value)
            if parser in parsers and not call.node.args:
                ctx.plan.insert_before(call.place.stmt, [statement(ARGUMENT.format(parser=parser))])


def _declares_local_rank(call: cst.Call) -> bool:
    return (isinstance(call.func, cst.Attribute) and call.func.attr.value == "add_argument"
            and bool(_spellings(call) & {"--local_rank", "--local-rank"}))


def _spellings(call: cst.Call) -> set[str]:
    """The option strings an `add_argument(...)` call declares."""
    return {a.value.evaluated_value for a in call.args
            if a.keyword is None and isinstance(a.value, cst.SimpleString) and isinstance(a.value.evaluated_value, str)}
