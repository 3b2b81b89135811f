"""Epoch figures the script prints, reduced over every rank with `hvd.allreduce`.

Each rank trains on its own share of the batches, so a running sum kept in the training loop
(`total_loss += loss.item()`, `num_batches += 1`) holds that share only, and rank 0 would print
its own part. Right after the loop, each such sum that a print or log call after the loop reads
is reduced over every rank, so `total_loss / num_batches` is the mean over all the batches, as the
one-process original prints it:

    total_loss = hvd.allreduce(torch.tensor(total_loss), op=hvd.Sum).item()

Summed when the print divides by another such sum or by the dataset's size (`len(loader.dataset)`),
averaged (`op=hvd.Average`) when it divides by this rank's number of batches (`len(loader)`); a
divisor it cannot place leaves the sums alone.

`torch.tensor` of a Python int is an int64 and of a float a float32, and `.item()` gives back the
same Python type, so counts stay ints. The all-reduce runs on every rank, outside any rank-0 guard.

Only plain running sums are taken: started from a number before the loop in the same block, added
to with values that are Python numbers (`.item()`, `len(...)`, `.size(...)`, a literal). When one
sum a print reads is of another kind (a tensor, a list), none of that loop's sums are changed, so
a ratio never mixes one rank's part with everyone's.
"""

from __future__ import annotations

import libcst as cst

from migrate.analysis.index import descendants, read_names, spell
from migrate.steps.base import Context, statements
from migrate.steps.horovod_synchronize import block_position

OUTPUT_METHODS = frozenset({"info", "debug", "warning", "log", "add_scalar", "add_scalars", "write", "set_postfix",
                            "set_description"})
NUMBER_CALLS = frozenset({"item", "len", "size", "numel", "float", "int"})


def horovod_metrics(ctx: Context) -> None:
    for loop in ctx.sites.step_loops:
        block, position = block_position(ctx, loop.node)
        if block is None:
            continue
        sums = _running_sums(loop.node)
        after = block[position + 1:]
        printed = _printed(after, set(sums))
        if not printed or not all(_plain(sums[name]) and _started_before(ctx, block[:position], name) for name in printed):
            continue
        op = _reduction(ctx, after, set(sums))
        if op is None:
            continue
        ctx.plan.insert_after(loop.node, statements(_allreduce_code(ctx, sorted(printed, key=list(sums).index), op)))
        how = "summed" if op == "Sum" else "averaged"
        ctx.report("MIG405", f"{', '.join(f'`{n}`' for n in sorted(printed))} {how} over every rank after the training "
                   f"loop (hvd.allreduce, op=hvd.{op}), so what rank 0 prints covers every rank's batches, as the "
                   "original's did", loop.node)


def _allreduce_code(ctx: Context, names: list[str], op: str) -> str:
    hvd = ctx.module_name("horovod.torch", "hvd")
    lines = ["# the epoch's figures over every rank's batches, not only this rank's share\n"]
    lines += [f"{name} = {hvd}.allreduce({ctx.torch}.tensor({name}), op={hvd}.{op}).item()\n" for name in names]
    return "".join(lines)


def _reduction(ctx: Context, after: list[cst.BaseStatement], sums: set[str]) -> str | None:
    """Sum when the printed sums are divided by other sums or by the whole dataset's size
    (`len(loader.dataset)`), Average when divided by this rank's number of batches
    (`len(loader)`); None (left alone) for a divisor it cannot place, or both kinds."""
    kinds: set[str] = set()
    for stmt in after:
        for node in descendants(stmt):
            if (isinstance(node, cst.AugAssign) and isinstance(node.operator, (cst.DivideAssign, cst.FloorDivideAssign))
                    and read_names(node.target) & sums):
                kinds.add(_divisor_kind(ctx, node.value, sums))  # `epoch_loss /= len(loader)` before the print
            if not (isinstance(node, cst.Call) and _is_output(node)):
                continue
            for division in (n for n in descendants(node) if isinstance(n, cst.BinaryOperation)
                             and isinstance(n.operator, (cst.Divide, cst.FloorDivide))):
                if read_names(division.left) & sums:
                    kinds.add(_divisor_kind(ctx, division.right, sums))
    if None in kinds or len(kinds) > 1:
        return None
    return "Average" if kinds == {"per_rank"} else "Sum"


def _divisor_kind(ctx: Context, divisor: cst.BaseExpression, sums: set[str]) -> str | None:
    if read_names(divisor) and read_names(divisor) <= sums:
        return "counted"
    if isinstance(divisor, cst.Call) and spell(divisor.func) == "len" and len(divisor.args) == 1:
        counted = divisor.args[0].value
        spelled = spell(counted)
        if spelled in ctx.sites.training_loader_names:
            return "per_rank"  # DistributedSampler: this rank's batches
        if isinstance(counted, cst.Attribute) and counted.attr.value == "dataset":
            return "counted"  # the whole dataset, every rank's samples
    return None


def _running_sums(loop: cst.CSTNode) -> dict[str, list[cst.BaseExpression]]:
    """name -> the values added to it with `name += value` anywhere in the loop (not in nested functions)."""
    sums: dict[str, list[cst.BaseExpression]] = {}
    for node in descendants(loop):
        if isinstance(node, cst.AugAssign) and isinstance(node.target, cst.Name):
            values = sums.setdefault(node.target.value, [])
            values.append(node.value if isinstance(node.operator, cst.AddAssign) else cst.Name("not_a_sum"))
    return sums


def _plain(values: list[cst.BaseExpression]) -> bool:
    """Every value added is a Python number."""
    return all(_number(value) for value in values)


def _number(value: cst.BaseExpression) -> bool:
    if isinstance(value, (cst.Integer, cst.Float)):
        return True
    if isinstance(value, cst.BinaryOperation):
        return _number(value.left) and _number(value.right) or _has_number_call(value)
    return _has_number_call(value) and isinstance(value, cst.Call)


def _has_number_call(value: cst.CSTNode) -> bool:
    if not isinstance(value, cst.Call):
        return isinstance(value, cst.BinaryOperation) and (_has_number_call(value.left) or _has_number_call(value.right))
    func = value.func
    name = func.attr.value if isinstance(func, cst.Attribute) else func.value if isinstance(func, cst.Name) else ""
    return name in NUMBER_CALLS


def _started_before(ctx: Context, before: list[cst.BaseStatement], name: str) -> bool:
    """`name = 0.0` (or `a, name = 0.0, 0`) is the last binding of `name` in the statements before the loop."""
    for stmt in reversed(before):
        if not isinstance(stmt, cst.SimpleStatementLine):
            if name in {n for n in _bound_in(stmt)}:
                return False
            continue
        for small in stmt.body:
            if isinstance(small, cst.Assign) and len(small.targets) == 1:
                value = _assigned_value(small.targets[0].target, small.value, name)
                if value is not None:
                    return isinstance(value, (cst.Integer, cst.Float))
    return False


def _bound_in(stmt: cst.CSTNode) -> set[str]:
    return {spell(t.target) or "" for t in descendants(stmt) if isinstance(t, cst.AssignTarget)}


def _assigned_value(target: cst.BaseExpression, value: cst.BaseExpression, name: str) -> cst.BaseExpression | None | bool:
    if isinstance(target, cst.Name):
        return value if target.value == name else None
    if isinstance(target, cst.Tuple) and isinstance(value, cst.Tuple) and len(target.elements) == len(value.elements):
        for element, assigned in zip(target.elements, value.elements):
            if isinstance(element.value, cst.Name) and element.value.value == name:
                return assigned.value
    return None


def _printed(after: list[cst.BaseStatement], sums: set[str]) -> set[str]:
    """The running sums read by print or log calls in the statements after the loop."""
    found: set[str] = set()
    for stmt in after:
        for node in descendants(stmt):
            if isinstance(node, cst.Call) and _is_output(node):
                found |= read_names(node) & sums
    return found


def _is_output(call: cst.Call) -> bool:
    func = call.func
    if isinstance(func, cst.Name):
        return func.value == "print"
    if isinstance(func, cst.Attribute):
        owner = spell(func.value) or ""
        return func.attr.value in OUTPUT_METHODS or owner in ("logging", "wandb")
    return False
