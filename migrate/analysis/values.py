"""Reads the numbers a script trains with, for generated configs: literals, module constants
(`BATCH_SIZE = 64`) and argparse defaults (`args.batch_size` -> `default=16`).
"""

from __future__ import annotations

import libcst as cst

from migrate.analysis.index import ScriptIndex, spell

Number = int | float | bool


MAX_LITERAL_DIGITS = 40


def literal_value(index: ScriptIndex, expr: cst.BaseExpression | None) -> Number | None:
    if expr is None:
        return None
    if isinstance(expr, (cst.Integer, cst.Float)) and len(expr.value) > MAX_LITERAL_DIGITS:
        return None  # no batch size or learning rate has thousands of digits (and Python refuses to read them)
    if isinstance(expr, cst.Integer):
        return int(expr.evaluated_value)
    if isinstance(expr, cst.Float):
        return float(expr.evaluated_value)
    if isinstance(expr, cst.Name) and expr.value in ("True", "False"):
        return expr.value == "True"
    if isinstance(expr, cst.UnaryOperation) and isinstance(expr.operator, cst.Minus):
        inner = literal_value(index, expr.expression)
        return -inner if isinstance(inner, (int, float)) and not isinstance(inner, bool) else None
    dotted = spell(expr)
    if dotted is None:
        return None
    if "." not in dotted:
        return _constant(index, dotted)
    owner, _, attribute = dotted.partition(".")
    if "." not in attribute and _is_parsed_args(index, owner):
        return _argparse_default(index, attribute)
    return None


def _constant(index: ScriptIndex, name: str) -> Number | None:
    """A name bound exactly once in the file (`BATCH_SIZE = 64`, `accum = args.accum_steps`)."""
    values = [b.value for b in index.bindings if b.target == name]
    if len(values) != 1 or values[0] is None or spell(values[0]) == name:
        return None
    return literal_value(index, values[0])


def _is_parsed_args(index: ScriptIndex, name: str) -> bool:
    return any(
        b.target == name
        and isinstance(b.value, cst.Call)
        and isinstance(b.value.func, cst.Attribute)
        and b.value.func.attr.value in ("parse_args", "parse_known_args")
        for b in index.bindings
    )


def _argparse_default(index: ScriptIndex, dest: str) -> Number | None:
    for call in index.calls:
        if not isinstance(call.node.func, cst.Attribute) or call.node.func.attr.value != "add_argument":
            continue
        names = [a.value.evaluated_value for a in call.node.args if a.keyword is None and isinstance(a.value, cst.SimpleString)]
        keywords = {a.keyword.value: a.value for a in call.node.args if a.keyword is not None}
        declared = None
        if "dest" in keywords and isinstance(keywords["dest"], cst.SimpleString):
            declared = keywords["dest"].evaluated_value
        long_names = [n for n in names if isinstance(n, str) and n.startswith("--")]
        positional = [n for n in names if isinstance(n, str) and not n.startswith("-")]
        candidate = declared or (long_names[0][2:].replace("-", "_") if long_names else (positional[0] if positional else None))
        if candidate == dest:
            return literal_value(index, keywords.get("default"))
    return None
