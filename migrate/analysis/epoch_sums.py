"""The epoch figures a training loop keeps and prints after it: which running sums to reduce over
every rank, and how (steps.epoch_figures for torch.distributed, steps.horovod_metrics for Horovod).

Each rank trains on its own share of the batches, so a running sum kept in the training loop
(`total_loss += loss.item()`, `correct += ...`) holds that share only. The sums taken are the plain
ones a print or log call after the loop reads: started from a number before the loop in the same
block, added to with values that are Python numbers (`.item()`, `len(...)`, `.size(...)`, a
literal). When one sum a print reads is of another kind (a tensor, a list), none of that loop's
sums are taken, so a ratio never mixes one rank's part with everyone's.

The choice is made per sum: one the print divides by this rank's number of batches (`len(loader)`
of the training loader) is averaged over the ranks; one divided by another such sum or by the
dataset's size (`len(loader.dataset)`), or not divided, is summed. A sum divided both ways, or by a
divisor that cannot be placed, leaves the loop's sums alone.

A sum stays an int where it starts from an int literal and every value added is surely an int (an
int literal, `len(...)`, `int(...)`, `.size(i)`, `.numel()`, or `.sum().item()` of a comparison: a
count of matches); otherwise it is a float, as `0 + loss.item()` is. An averaged sum is a float.

A number a training function of the script returns (`mean_loss = train_epoch(model, loader, opt)`)
is this rank's too, and the caller decides with it: `scheduler.step(mean_loss)` (ReduceLROnPlateau),
`if mean_loss < best: save`. `returned_metrics` finds where such a value is bound so that it is
reduced there, on every rank, before anything reads it. The value returned is taken when every
`return` of the function gives one of: the mean of a list of Python numbers the function collects
(`np.mean(losses)`, `statistics.mean(losses)`, `sum(losses) / len(losses)`), a running sum divided by
this rank's `len(loader)` or by a count the function keeps (`total / n`): averaged over the ranks
(DistributedSampler gives every rank as many batches and samples, so the ranks' mean is the mean over
all batches); a running sum alone or divided by `len(loader.dataset)`: summed. A sum the epoch
figures already reduce inside the function is left alone. `trained_value` names the binding of a
value any training function returned (a tuple too), reduced or not: a test of it differs per rank
unless it was reduced.
"""

from __future__ import annotations

from dataclasses import dataclass

import libcst as cst

from migrate.analysis.index import Binding, Scope, ScriptIndex, descendants, read_names, spell
from migrate.analysis.sites import TrainingSites

OUTPUT_METHODS = frozenset({"info", "debug", "warning", "log", "add_scalar", "add_scalars", "write", "set_postfix",
                            "set_description"})
NUMBER_CALLS = frozenset({"item", "len", "size", "numel", "float", "int"})
MEAN_CALLS = frozenset({"numpy.mean", "numpy.average", "statistics.mean", "statistics.fmean"})


@dataclass(frozen=True)
class EpochSums:
    """The running sums of one training loop to reduce after it."""

    names: tuple[str, ...]  # in the order the loop first adds to them
    averaged: frozenset[str]  # divided by this rank's len(loader): the ranks' mean
    ints: frozenset[str]  # summed counts that stay ints


def epoch_sums(loop: cst.CSTNode, block: list[cst.BaseStatement], position: int,
               loaders: frozenset[str]) -> EpochSums | None:
    """The sums of `loop` (the statement at `block[position]`) that output after it reads, or None
    (nothing to reduce, or a loop left alone: see the module's docstring). `loaders`: the names of
    the training loaders (their `len` is this rank's number of batches)."""
    sums = _running_sums(loop)
    before, after = block[:position], block[position + 1:]
    printed = _printed(after, set(sums))
    if not printed or not all(_plain(sums[name]) and _started_before(before, name) for name in printed):
        return None
    averaged = _averaged(loaders, after, printed, set(sums))
    if averaged is None:
        return None
    names = tuple(sorted(printed, key=list(sums).index))
    ints = {name for name in names if name not in averaged and _stays_int(before, name, sums[name])}
    return EpochSums(names, frozenset(averaged), frozenset(ints))


def _divisor_kind(loaders: frozenset[str], divisor: cst.BaseExpression, sums: set[str]) -> str | None:
    if read_names(divisor) and read_names(divisor) <= sums:
        return "counted"
    if isinstance(divisor, cst.Call) and spell(divisor.func) == "len" and len(divisor.args) == 1:
        counted = divisor.args[0].value
        spelled = spell(counted)
        if spelled in loaders:
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


def _started_before(before: list[cst.BaseStatement], name: str) -> bool:
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


def _averaged(loaders: frozenset[str], after: list[cst.BaseStatement], printed: set[str], sums: set[str]) -> set[str] | None:
    """The printed sums to average (divided by this rank's `len(loader)`); the others are summed.
    None (leave the loop alone) when a sum is divided by a divisor that cannot be placed, or both ways."""
    kinds = _division_kinds(loaders, after, sums)
    averaged: set[str] = set()
    for name in printed:
        found = kinds.get(name, set())
        if None in found or len(found) > 1:
            return None
        if found == {"per_rank"}:
            averaged.add(name)
    return averaged


def _division_kinds(loaders: frozenset[str], after: list[cst.BaseStatement], sums: set[str]) -> dict[str, set[str | None]]:
    """Per sum, what it is divided by after the loop: in place (`loss /= len(loader)`) or in an output call."""
    kinds: dict[str, set[str | None]] = {}
    for stmt in after:
        for node in descendants(stmt):
            if (isinstance(node, cst.AugAssign) and isinstance(node.operator, (cst.DivideAssign, cst.FloorDivideAssign))
                    and isinstance(node.target, cst.Name) and node.target.value in sums):
                kinds.setdefault(node.target.value, set()).add(_divisor_kind(loaders, node.value, sums))
            if isinstance(node, cst.Call) and _is_output(node):
                _output_divisions(loaders, node, sums, kinds)
    return kinds


def _output_divisions(loaders: frozenset[str], call: cst.Call, sums: set[str], kinds: dict[str, set[str | None]]) -> None:
    for division in descendants(call):
        if isinstance(division, cst.BinaryOperation) and isinstance(division.operator, (cst.Divide, cst.FloorDivide)):
            for name in read_names(division.left) & sums:
                kinds.setdefault(name, set()).add(_divisor_kind(loaders, division.right, sums))


def _stays_int(before: list[cst.BaseStatement], name: str, values: list[cst.BaseExpression]) -> bool:
    """Started from an int literal, and every value added is surely an int."""
    return isinstance(_start(before, name), cst.Integer) and all(_is_count(value) for value in values)


def _start(before: list[cst.BaseStatement], name: str) -> cst.BaseExpression | None:
    """The value of the last plain `name = ...` (or `a, name = ..., ...`) before the loop."""
    for stmt in reversed(before):
        if not isinstance(stmt, cst.SimpleStatementLine):
            continue
        for small in stmt.body:
            if isinstance(small, cst.Assign) and len(small.targets) == 1:
                value = _assigned_value(small.targets[0].target, small.value, name)
                if isinstance(value, cst.BaseExpression):
                    return value
    return None


def _is_count(value: cst.BaseExpression) -> bool:
    if isinstance(value, cst.Integer):
        return True
    if isinstance(value, cst.BinaryOperation):
        return isinstance(value.operator, (cst.Add, cst.Subtract, cst.Multiply)) and _is_count(value.left) and _is_count(value.right)
    if not isinstance(value, cst.Call):
        return False
    func = value.func
    if isinstance(func, cst.Name):
        return func.value in ("len", "int")
    if not isinstance(func, cst.Attribute):
        return False
    method = func.attr.value
    if method == "numel" or (method == "size" and value.args):
        return True
    return method == "item" and _counts_matches(func.value)


def _counts_matches(node: cst.BaseExpression) -> bool:
    """`(a == b).sum()`, `a.eq(b).sum()`, `torch.sum(a == b)`: a number of matches, an int tensor."""
    if not isinstance(node, cst.Call):
        return False
    func = node.func
    if isinstance(func, cst.Attribute) and func.attr.value == "sum" and not node.args:
        return _is_comparison(func.value)
    if spell(func) == "torch.sum" and len(node.args) == 1:
        return _is_comparison(node.args[0].value)
    return False


def _is_comparison(node: cst.BaseExpression) -> bool:
    if isinstance(node, cst.Comparison):
        return True
    return (isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute)
            and node.func.attr.value in ("eq", "ne", "lt", "le", "gt", "ge"))


def how_reduced(sums: EpochSums) -> str:
    """"`a`, `b` summed and `c` averaged": what the reduction does to each sum."""
    summed = [name for name in sums.names if name not in sums.averaged]
    averaged = [name for name in sums.names if name in sums.averaged]
    parts = [f"{', '.join(f'`{n}`' for n in summed)} summed" if summed else "",
             f"{', '.join(f'`{n}`' for n in averaged)} averaged" if averaged else ""]
    return " and ".join(p for p in parts if p)


# -- a number a training function returns ------------------------------------------------------


@dataclass(frozen=True)
class ReturnedMetric:
    """`mean_loss = train_epoch(...)`: a number of this rank's batches, returned by a training
    function and bound to one name, to reduce over every rank right after `stmt`."""

    name: str
    stmt: cst.BaseStatement  # the line that binds it
    call: cst.Call  # the training function's call
    averaged: bool  # the ranks' mean (a mean over this rank's batches); otherwise their sum


def returned_metrics(sites: TrainingSites) -> list[ReturnedMetric]:
    """Every binding of a number a training function returns, in source order (see the module's docstring)."""
    index = sites.index
    return index.answer("returned_metrics", id(sites), lambda: _returned_metrics(sites))


def _returned_metrics(sites: TrainingSites) -> list[ReturnedMetric]:
    found: list[ReturnedMetric] = []
    for binding in sites.index.bindings:
        callee = _trained_callee(sites, binding)
        node = binding.node
        if callee is None or not isinstance(node, cst.Assign) or len(node.targets) != 1:
            continue
        if not isinstance(node.targets[0].target, cst.Name) or not isinstance(node.value, cst.Call):
            continue
        kind = _returned_kind(sites, callee)
        if kind is not None:
            found.append(ReturnedMetric(binding.target, binding.place.stmt, node.value, kind == "averaged"))
    return found


def trained_value(sites: TrainingSites, name: str, scope: Scope) -> Binding | None:
    """The binding in `scope` that gives `name` what a training function returned
    (`mean_loss = train_epoch(...)`, `loss, acc = train(...)`), when it is not reduced over the
    ranks where it is bound (returned_metrics); None otherwise."""
    reduced = {metric.stmt for metric in returned_metrics(sites)}
    for binding in sites.index.bindings_of_in(name, scope):
        if _trained_callee(sites, binding) is not None and binding.place.stmt not in reduced:
            return binding
    return None


def _trained_callee(sites: TrainingSites, binding: Binding) -> Scope | None:
    """The function of this script that runs backward, when `binding` is `name = that_function(...)`."""
    value = binding.node.value
    if not isinstance(value, cst.Call):
        return None
    callee = sites.index.functions.get(sites.index.qualify(value.func) or "")
    if callee is None or callee.name not in sites.training_scopes or callee.node is binding.place.scope.node:
        return None
    return callee


def _returned_kind(sites: TrainingSites, callee: Scope) -> str | None:
    """"averaged" or "summed" when every `return` of `callee` gives one kind of number of this rank's batches."""
    returns = [r for r in _own_returns(callee.node)]
    kinds = {_value_kind(sites, callee, r.value) if r.value is not None else None for r in returns}
    if len(kinds) != 1 or None in kinds:
        return None
    return kinds.pop()


def _own_returns(node: cst.CSTNode) -> list[cst.Return]:
    """The `return` statements of a function, not of the functions or classes inside it."""
    found: list[cst.Return] = []
    stack = list(node.body.children) if isinstance(node, cst.FunctionDef) else []
    while stack:
        current = stack.pop()
        if isinstance(current, cst.Return):
            found.append(current)
        elif not isinstance(current, (cst.FunctionDef, cst.ClassDef, cst.Lambda, cst.BaseExpression)):
            stack.extend(current.children)
    return found


def _value_kind(sites: TrainingSites, callee: Scope, value: cst.BaseExpression) -> str | None:
    """"averaged", "summed" or None (not a number of this rank's batches that is known) for one returned value."""
    index = sites.index
    if isinstance(value, cst.Call) and spell(value.func) == "float" and len(value.args) == 1:
        return _value_kind(sites, callee, value.args[0].value)
    if isinstance(value, cst.Call) and (index.qualify(value.func) or "") in MEAN_CALLS and len(value.args) == 1:
        return "averaged" if _collected(index, callee, value.args[0].value) else None
    sums = _own_sums(sites, callee)
    if isinstance(value, cst.Name):
        return "summed" if value.value in sums else None
    if not (isinstance(value, cst.BinaryOperation) and isinstance(value.operator, cst.Divide)):
        return None
    left, right = value.left, value.right
    if isinstance(left, cst.Call) and spell(left.func) == "sum" and len(left.args) == 1:
        listed = left.args[0].value
        same = isinstance(right, cst.Call) and spell(right.func) == "len" and len(right.args) == 1 and (
            spell(right.args[0].value) == spell(listed))
        return "averaged" if same and _collected(index, callee, listed) else None
    if not (isinstance(left, cst.Name) and left.value in sums):
        return None
    return _divided_kind(sites, right, sums)


def _divided_kind(sites: TrainingSites, divisor: cst.BaseExpression, sums: set[str]) -> str | None:
    """A running sum divided by `divisor`: this rank's number of batches or a count it keeps
    (averaged), or the whole dataset's size (summed)."""
    if isinstance(divisor, cst.Call) and spell(divisor.func) == "len" and len(divisor.args) == 1:
        counted = divisor.args[0].value
        if isinstance(counted, cst.Attribute) and counted.attr.value == "dataset":
            return "summed"
        return "averaged" if spell(counted) in sites.training_loader_names else None
    names = read_names(divisor)
    return "averaged" if names and names <= sums and isinstance(divisor, cst.Name) else None


def _collected(index: ScriptIndex, callee: Scope, listed: cst.BaseExpression) -> bool:
    """`listed` is a list `callee` starts empty and appends Python numbers to (`losses.append(loss.item())`)."""
    if not isinstance(listed, cst.Name):
        return False
    starts = index.bindings_of_in(listed.value, callee)
    if len(starts) != 1 or not (isinstance(starts[0].value, cst.List) and not starts[0].value.elements):
        return False
    appended = [call for call in index.calls_from(callee) if isinstance(call.node.func, cst.Attribute)
                and spell(call.node.func.value) == listed.value]
    return bool(appended) and all(spell(call.node.func) == f"{listed.value}.append" and len(call.node.args) == 1
                                  and _number(call.node.args[0].value) for call in appended)


def _own_sums(sites: TrainingSites, callee: Scope) -> set[str]:
    """The running sums of `callee` that start from a number, add Python numbers only, and that the
    epoch figures do not already reduce there."""
    index = sites.index
    sums = {name for name, values in _running_sums(callee.node).items() if _plain(values) and any(
        isinstance(b.value, (cst.Integer, cst.Float)) for b in index.bindings_of_in(name, callee))}
    for loop in sites.step_loops:
        if loop.place.scope is not callee:
            continue
        block, position = _block_of(index, loop.node)
        taken = epoch_sums(loop.node, block, position, sites.training_loader_names) if block else None
        sums -= set(taken.names) if taken is not None else set()
    return sums


def _block_of(index: ScriptIndex, stmt: cst.BaseStatement) -> tuple[list[cst.BaseStatement], int]:
    found = index.block_of.get(stmt)
    if found is None:
        return [], 0
    block, position = found
    return list(block.body), position
