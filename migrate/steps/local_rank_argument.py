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
    declared = any(
        isinstance(call.node.func, cst.Attribute)
        and call.node.func.attr.value == "add_argument"
        and any(isinstance(a.value, cst.SimpleString) and a.value.evaluated_value in ("--local_rank", "--local-rank") for a in call.node.args)
        for call in index.calls
    )
    if declared:
        return
    for call in index.calls:
        func = call.node.func
        if isinstance(func, cst.Attribute) and func.attr.value in ("parse_args", "parse_known_args"):
            parser = spell(func.value)
            if parser in parsers and not call.node.args:
                ctx.plan.insert_before(call.place.stmt, [statement(ARGUMENT.format(parser=parser))])
