"""Gradient accumulation: micro-steps whose optimizer step is skipped by an `if ... % n ...:` test.

One detector for every target: DDP wraps the skipped micro-steps in `model.no_sync()`, DeepSpeed
writes the factor `n` into its config as gradient_accumulation_steps, Horovod passes it to
hvd.DistributedOptimizer as backward_passes_per_step.

A factor that is a parameter of the training function (`def train(..., accumulation_steps=1)`) is
followed to its callers when every call passes one same value (or leaves the default): the factor
is then that value, as the scope that builds the optimizer reads it (`args.accumulation_steps` at
`train(..., accumulation_steps=args.accumulation_steps)`), since that is where the targets write it.
"""

from __future__ import annotations

from collections.abc import Sequence

import libcst as cst

from migrate.analysis.index import Scope, ScriptIndex, child_nodes, descendants, spell
from migrate.analysis.models import forward_spellings, origin, runs_no_forward
from migrate.analysis.sites import Accumulation, TrainingSites
from migrate.analysis.syntax import argument, calls_in
from migrate.analysis.trained import MAX_DEPTH, Stepped, calls_of, root, same_module
from migrate.analysis.training import callee_scope


def accumulations(sites: TrainingSites) -> list[Accumulation]:
    """Micro-steps that skip an optimizer step: after a model's backward, the SAME optimizer (the
    one holding that model's parameters) is stepped only under `if ... % n ...:`. An `if` that runs
    a backward of its own before its step is another update on a schedule (a GAN's generator every
    n_critic steps), not accumulation: the model before it syncs every step.

    When the forward pass is not in the loop body that runs backward, the accumulation is still
    found (its factor holds), without a first statement; a MIG109 note says why it cannot be wrapped."""
    index = sites.index
    models = {m.spelling for m in sites.models}
    roots = {m.spelling: root(index, m.spelling, m.scope) for m in sites.models}
    stepped = {id(s.step.node): s for s in sites.stepped}
    found: list[Accumulation] = []
    for backward in sites.backward_calls:
        for ancestor in index.enclosing_statements(backward.place.stmt):
            if ancestor not in index.block_of:
                continue
            block, position = index.block_of[ancestor]
            later = list(block.body[position + 1 :])
            step_ifs = [s for s in later if isinstance(s, cst.If) and _is_accumulation_if(s, _test_of(index, s, block))]
            if not step_ifs:
                continue
            for step_if in step_ifs:
                assert isinstance(step_if, cst.If)
                skipped = _skipped_steps(index, step_if, stepped)
                if skipped is None:
                    break  # the `if` holds an update of its own
                elsewhere = [s for s in later if s is not step_if]
                held = [
                    m for m in sorted(models)
                    if _holds(index, skipped, roots[m]) and not _stepped_in(index, elsewhere, skipped, roots[m], stepped)
                ]
                if not held:
                    continue  # `if step % 100 == 0: scheduler.step()`, or another model's optimizer
                micro_step = block.body[: position + 1]
                first, model = _first_forward(micro_step, held, index)
                if first is None and not any(_forwards(s, models, index) for s in micro_step):
                    sites.notes.append(("MIG109", "the forward pass is not in the same loop body as backward", ancestor))
                leftover = _stepped_after_the_loop(index, ancestor, skipped)
                found.append(_accumulation(index, step_if, _test_of(index, step_if, block), first, ancestor,
                                           model or held[0], leftover, _built_in(index, skipped)))
                break
            break
    return found


def _accumulation(index: ScriptIndex, step_if: cst.If, test: cst.BaseExpression, first: cst.BaseStatement | None,
                  last: cst.BaseStatement, model: str, leftover: cst.BaseStatement | None,
                  built: Scope | None) -> Accumulation:
    """The accumulation, its factor as `built` (the scope that builds the optimizer) reads it."""
    factor = accumulation_factor(test)
    assert factor is not None  # _is_accumulation_if saw the `%`
    factor, read_in = factor_where_built(index, factor, index.scope_of[last], built)
    return Accumulation(condition=test, factor=factor, first=first, last=last, model=model, step_if=step_if,
                        stepped_after_loop=leftover, factor_scope=read_in)


def _built_in(index: ScriptIndex, skipped: list[Stepped | None]) -> Scope | None:
    """The scope that builds the stepped optimizer (None when it cannot be told)."""
    for optimizer in skipped:
        stmt = index.statement_holding(optimizer.built) if optimizer is not None and optimizer.built is not None else None
        if stmt is not None and stmt in index.scope_of:
            return index.scope_of[stmt]
    return None


def factor_where_built(index: ScriptIndex, factor: cst.BaseExpression, scope: Scope,
                       built: Scope | None) -> tuple[cst.BaseExpression, Scope]:
    """`factor` (read in `scope`) as the scope that builds the optimizer reads it, with the scope
    that reads it so: while it is a parameter of a function other than that scope, the one value
    every call of the function passes for it (or its default, where a call passes none). `factor`
    in `scope` when a caller passes another value, the function is rebound there or handed on
    uncalled (then no call site tells the count)."""
    value, read_in = factor, scope
    for _ in range(MAX_DEPTH):
        if read_in is built or not isinstance(value, cst.Name) or value.value not in read_in.params:
            return value, read_in
        passed = _passed_by_every_call(index, read_in, value.value)
        if passed is None:
            return factor, scope
        value, read_in = passed
    return factor, scope


def _passed_by_every_call(index: ScriptIndex, scope: Scope, param: str) -> tuple[cst.BaseExpression, Scope] | None:
    """The one value (and the scope reading it) that every call of `scope` gives `param`; None when
    calls differ, one cannot be read (`*args`, `**kwargs`), or the parameter is rebound inside."""
    function = scope.node
    if not isinstance(function, cst.FunctionDef) or _rebinds(function, param):
        return None
    calls = calls_of(index, scope)
    if not calls or _references(index, function.name.value) != len(calls):
        return None  # handed on as a value (`Thread(target=train)`), or several functions of that name
    default, position = _parameter(function, param, scope)
    values: list[tuple[cst.BaseExpression, Scope]] = []
    for call in calls:
        if any(arg.star for arg in call.node.args):
            return None
        arg = argument(call.node, param, position)
        if arg is not None:
            values.append((arg.value, call.place.scope))
        elif default is not None:
            values.append((default, index.scope_of[function]))
        else:
            return None
    first, reader = values[0]
    code = index.module.code_for_node
    for value, where in values[1:]:
        if code(value) != code(first) or (where is not reader and not isinstance(first, (cst.Integer, cst.Float))):
            return None
    return first, reader


def _parameter(function: cst.FunctionDef, param: str, scope: Scope) -> tuple[cst.BaseExpression | None, int]:
    """A parameter's default, and its position in a call (-1 for keyword-only; `self` not counted)."""
    params = function.params
    positional = [*params.posonly_params, *params.params]
    for position, each in enumerate(positional):
        if each.name.value == param:
            return each.default, position - (1 if scope.class_name else 0)
    default = next((each.default for each in params.kwonly_params if each.name.value == param), None)
    return default, -1


def _rebinds(function: cst.FunctionDef, name: str) -> bool:
    """Whether the function's body (or one nested in it) assigns `name` again."""
    for node in descendants(function.body):
        if isinstance(node, (cst.AssignTarget, cst.AugAssign, cst.AnnAssign, cst.NamedExpr, cst.For, cst.CompFor, cst.Del)):
            target: cst.CSTNode = node.target
        elif isinstance(node, cst.AsName):
            target = node.name
        elif isinstance(node, (cst.Global, cst.Nonlocal)):
            target = cst.Tuple([cst.Element(item.name) for item in node.names])
        else:
            continue
        if name in _bound_names(target):
            return True
    return False


def _bound_names(target: cst.CSTNode) -> set[str]:
    """The plain names a target binds (`a`, `a, (b, *c)`); `self.x` and `d[k]` bind none."""
    if isinstance(target, cst.Name):
        return {target.value}
    if isinstance(target, (cst.Tuple, cst.List)):
        return {n for element in target.elements for n in _bound_names(element.value)}
    if isinstance(target, cst.StarredElement):
        return _bound_names(target.value)
    return set()


def _references(index: ScriptIndex, name: str) -> int:
    """How often `name` is read in the script, as a name or an attribute (`self.train`): not the
    `def` itself, a parameter or a keyword argument of that name."""
    counts = index.memo("accumulation_references")
    if not counts:
        skipped: set[int] = set()
        found: dict[str, int] = {}
        for node in descendants(index.module):
            if isinstance(node, cst.Arg) and node.keyword is not None:
                skipped.add(id(node.keyword))
            elif isinstance(node, (cst.Param, cst.FunctionDef, cst.ClassDef)):
                skipped.add(id(node.name))
            elif isinstance(node, cst.Name) and id(node) not in skipped:
                found[node.value] = found.get(node.value, 0) + 1
        counts[None] = found
    count: int = counts[None].get(name, 0)
    return count


def _stepped_after_the_loop(index: ScriptIndex, micro_step: cst.BaseStatement,
                            skipped: list[Stepped | None]) -> cst.BaseStatement | None:
    """The statement after the loop of micro-steps that steps the same optimizer again (`for batch
    in loader: ...` then `optimizer.step()` for the micro-steps left over at the epoch's end)."""
    loop = index.parent_of.get(micro_step)
    while loop is not None and not isinstance(loop, (cst.For, cst.While)):
        loop = index.parent_of.get(loop)
    if loop is None or loop not in index.block_of:
        return None
    names = {optimizer.spelling for optimizer in skipped if optimizer is not None}
    block, position = index.block_of[loop]
    for stmt in block.body[position + 1:]:
        for call in calls_in(stmt):
            if isinstance(call.func, cst.Attribute) and call.func.attr.value == "step" and spell(call.func.value) in names:
                return stmt
    return None


def _test_of(index: ScriptIndex, stmt: cst.If, block: cst.CSTNode) -> cst.BaseExpression:
    """An `if`'s test, or for `if is_update_step:` the value that name gets once, earlier in the
    same block (`is_update_step = (i + 1) % n == 0 or i + 1 == len(loader)`)."""
    test = stmt.test
    if not isinstance(test, cst.Name):
        return test
    body = list(getattr(block, "body", ()))
    before = body[: body.index(stmt)] if stmt in body else []
    values = [small.value for line in before if isinstance(line, cst.SimpleStatementLine) for small in line.body
              if isinstance(small, cst.Assign) and len(small.targets) == 1
              and isinstance(small.targets[0].target, cst.Name) and small.targets[0].target.value == test.value]
    bound_elsewhere = [b for b in index.bindings if b.target == test.value and b.place.scope is index.scope_of.get(stmt)]
    if len(values) == 1 and len(bound_elsewhere) == 1:
        return values[0]
    return test


def accumulation_factor(condition: cst.BaseExpression) -> cst.BaseExpression | None:
    """`(step + 1) % args.accum_steps == 0` -> `args.accum_steps`; None without a `%`."""
    found: list[cst.BaseExpression] = []

    def visit(node: cst.CSTNode) -> None:
        if isinstance(node, cst.BinaryOperation) and isinstance(node.operator, cst.Modulo):
            found.append(node.right)
        for child in child_nodes(node):
            visit(child)

    visit(condition)
    return found[0] if found else None


def _is_accumulation_if(stmt: cst.BaseStatement, test: cst.BaseExpression | None) -> bool:
    """`if <test with a %>:` (`test`: its test, or the value of the name it tests) whose body steps
    something, and whose `else`/`elif` does not step too (`if i % 2: opt.step() else: opt.step()`
    steps every micro-step: no window)."""
    if not isinstance(stmt, cst.If) or test is None or accumulation_factor(test) is None:
        return False
    return _steps(stmt.body) and (stmt.orelse is None or not _steps(stmt.orelse))


def _steps(node: cst.CSTNode) -> bool:
    return any(isinstance(c.func, cst.Attribute) and c.func.attr.value == "step" for c in calls_in(node))


def _skipped_steps(index: ScriptIndex, step_if: cst.If, stepped: dict[int, Stepped]) -> list[Stepped | None] | None:
    """The optimizers the `if` steps (None for a `.step()` this analysis did not take for an
    optimizer's); None when a backward runs in the `if` before its step."""
    found: list[Stepped | None] = []
    for call in calls_in(step_if.body):
        if isinstance(call.func, cst.Attribute) and call.func.attr.value == "backward" and not found:
            return None
        if isinstance(call.func, cst.Attribute) and call.func.attr.value == "step":
            found.append(stepped.get(id(call)))
    return found


def _holds(index: ScriptIndex, skipped: list[Stepped | None], key: tuple[object, ...]) -> bool:
    """Whether one of the optimizers holds the model (an optimizer that cannot be traced may)."""
    for optimizer in skipped:
        if optimizer is None:
            continue
        if optimizer.owners is None or any(same_module(index, root(index, o.spelling, o.scope), key) for o in optimizer.owners):
            return True
    return False


def _stepped_in(index: ScriptIndex, statements: list[cst.BaseStatement], skipped: list[Stepped | None], key: tuple[object, ...],
                stepped: dict[int, Stepped]) -> bool:
    """Whether the model's optimizer is also stepped outside the `if` (then nothing is skipped)."""
    names = {s.spelling for s in skipped if s is not None}
    for stmt in statements:
        for call in index.calls_under(stmt):
            optimizer = stepped.get(id(call))
            if optimizer is not None and optimizer.spelling in names and _holds(index, [optimizer], key):
                return True
    return False


def _first_forward(statements: Sequence[cst.BaseStatement], held: list[str], index: ScriptIndex) -> tuple[cst.BaseStatement | None, str | None]:
    """The first statement that calls one of the models, and that model."""
    for stmt in statements:
        model = _forwarded_model(stmt, set(held), index)
        if model is not None:
            return stmt, model
    return None, None


def _forwarded_model(stmt: cst.BaseStatement, models: set[str], index: ScriptIndex) -> str | None:
    """The model `stmt` runs: called itself (`model(x)`), or handed to a function of this file
    that runs a forward (`loss = calc_loss_batch(x, y, model, device)`)."""
    aliases = _forward_aliases(models, index)
    for call in index.calls_under(stmt):
        name = spell(call.func)
        if name in aliases:
            return aliases[name]
        site = index.call_site(call)
        callee = callee_scope(index, site) if site is not None else None
        if callee is None or runs_no_forward(index, callee):
            continue
        for arg in call.args:
            if spell(arg.value) in aliases:
                return aliases[spell(arg.value) or ""]
    return None


def _forwards(stmt: cst.BaseStatement, models: set[str], index: ScriptIndex) -> bool:
    return _forwarded_model(stmt, models, index) is not None


def _forward_aliases(models: set[str], index: ScriptIndex) -> dict[str, str]:
    """Spellings a model is called by inside functions (parameters named otherwise) -> its site name."""
    known = index.memo("forward_aliases")
    key = frozenset(models)
    if key not in known:
        aliases = {name: name for name in models}
        for spelling, scope in forward_spellings(index, {s.name for s in index.functions.values()} | {"<module>"}).items():
            home, _scope = origin(index, spelling, scope)
            if home in models:
                aliases[spelling] = home
        known[key] = aliases
    return dict(known[key])
