"""Control flow that can differ between ranks, which a wrapper turns into a hang or into replicas
that silently train apart:

- a loop left, or a step skipped, on a value of this rank's own batch (`if loss.item() < target:
  break`, `if not torch.isfinite(loss): continue`): the ranks run different numbers of backward
  passes, and the gradient all-reduce of the rank that goes on waits forever for the others;
- a random number of micro-steps, or a backward run or skipped at random: the same, unless every
  rank happens to draw the same numbers;
- weights re-initialised after the wrapper (`model.apply(init_weights)`): the wrapper copied rank
  0's weights when it was built; each rank now starts from its own, and averaging gradients never
  brings them back together.

Read-only: each finding is a `Divergence` the divergence step reports, worded for torch.distributed
and its wrapper (`dist.broadcast_object_list`, "the wrapper copied rank 0's weights"): the reporting
step's runtime rewrites those words into its own (Runtime.advice: Horovod's broadcast, hvd.broadcast_object).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass

import libcst as cst

from migrate.analysis.index import Scope, ScriptIndex, child_nodes, descendants, reachable, read_names, spell
from migrate.analysis.sites import ModelSite, TrainingSites
from migrate.analysis.syntax import calls_in

REINIT_METHODS = frozenset({"apply", "reset_parameters", "init_weights", "_init_weights", "initialize_weights", "weights_init"})
INIT_IN_PLACE = frozenset({"normal_", "uniform_", "zero_", "fill_", "xavier_uniform_", "xavier_normal_", "kaiming_uniform_",
                           "kaiming_normal_", "orthogonal_", "trunc_normal_", "constant_"})
NUMBER_CALLS = ("random.", "numpy.random.")
RANDOM_CALLS = ("random.", "numpy.random.", "torch.rand", "torch.randint", "torch.randn", "torch.randperm", "torch.bernoulli",
                "torch.multinomial", "torch.normal")


@dataclass(eq=False)
class Divergence:
    code: str  # MIG121 per-rank value, MIG122 random, MIG123 re-initialised weights
    node: cst.CSTNode  # where it is reported
    parts: list[str | cst.CSTNode]  # text, and nodes standing for "line N"
    hangs: bool = False  # the converted script would hang for certain: the conversion is refused


def reinitialization(index: ScriptIndex, node: cst.CSTNode, names: set[str]) -> cst.Call | None:
    """The call under `node` that draws new weights for one of `names` (or a part of it):
    `model.apply(init_fn)`, `model.fc.reset_parameters()`, `nn.init.xavier_uniform_(model.fc.weight)`,
    `model.fc.weight.data.normal_(0, 0.02)`, or `init_weights(model)` (a function of this file)."""
    return next((call for call in index.calls_under(node) if _reinitializes(index, call, names)), None)


def _reinitializes(index: ScriptIndex, call: cst.Call, names: set[str]) -> bool:
    """This one call (not the calls inside its arguments) draws new weights for one of `names`."""
    func = call.func
    if isinstance(func, cst.Attribute):
        owner = base_spelling(func.value)
        method = func.attr.value
        if owner is not None and _part_of(owner, names):
            if method in REINIT_METHODS:
                return True
            if method in INIT_IN_PLACE and owner.count(".") >= 1:
                return True
    qualified = index.qualify(func) or ""
    if qualified.startswith("torch.nn.init.") and any(_part_of(base_spelling(a.value), names) for a in call.args):
        return True
    name = spell(func)
    return name in index.functions and "init" in name.lower() and any(spell(a.value) in names for a in call.args)


def base_spelling(node: cst.BaseExpression) -> str | None:
    """`model.head` -> "model.head"; `model[2]` and `model.layers[0].fc` -> "model", "model.layers"."""
    spelled = spell(node)
    if spelled is not None:
        return spelled
    if isinstance(node, (cst.Attribute, cst.Subscript)):
        return base_spelling(node.value)
    if isinstance(node, cst.Call):
        return base_spelling(node.func)
    return None


def _part_of(spelled: str | None, names: set[str]) -> bool:
    return spelled is not None and any(spelled == n or spelled.startswith(n + ".") for n in names)


# -- values that differ per rank --------------------------------------------------------------


def per_rank_names(index: ScriptIndex, scope: Scope, seeds: set[str]) -> set[str]:
    """`seeds` and every name of `scope` computed from them (`avg = running / n`, `running += loss.item()`)."""
    return reachable(_readers(index, scope), seeds)


def _readers(index: ScriptIndex, scope: Scope) -> dict[str, list[str]]:
    """Name -> the names of `scope` assigned from a value that reads it (`avg = total / n`: total
    -> [avg], n -> [avg]); built once per scope, then followed from any seeds."""
    known: dict[Scope, dict[str, list[str]]] = index.memo("readers")
    if scope not in known:
        readers: dict[str, list[str]] = {}
        for target, value in _assignments(index, scope):
            for name in read_names(value):
                readers.setdefault(name, []).append(target)
        known[scope] = readers
    return known[scope]


def _assignments(index: ScriptIndex, scope: Scope) -> list[tuple[str, cst.BaseExpression]]:
    """(target, value) for every assignment of `scope` itself (not of functions inside it)."""
    known: dict[Scope, list[tuple[str, cst.BaseExpression]]] = index.memo("assignments")
    if scope not in known:
        known[scope] = _own_assignments(scope)
    return known[scope]


assignments = _assignments  # shared with episodes.py


def _own_assignments(scope: Scope) -> list[tuple[str, cst.BaseExpression]]:
    found: list[tuple[str, cst.BaseExpression]] = []
    for node in _assignment_nodes(scope.node):
        if isinstance(node, cst.Assign):
            for target in node.targets:
                for name in target_names(target.target):
                    found.append((name, node.value))
        elif isinstance(node, (cst.AugAssign, cst.AnnAssign)) and node.value is not None:
            for name in target_names(node.target):
                found.append((name, node.value))
    return found


def target_names(target: cst.BaseExpression) -> list[str]:
    """The spellings an assignment target binds: `a`, `self.n`, each of `a, (b, *c)`."""
    if isinstance(target, (cst.Tuple, cst.List)):
        return [n for e in target.elements for n in target_names(e.value)]
    if isinstance(target, cst.StarredElement):
        return target_names(target.value)
    spelled = spell(target)
    return [spelled] if spelled is not None else []


def _assignment_nodes(node: cst.CSTNode) -> Iterator[cst.Assign | cst.AugAssign | cst.AnnAssign]:
    """The assignment statements under `node`, those of functions and classes inside it included,
    in source order. Expressions are not entered: no statement is inside one."""
    stack: list[cst.CSTNode] = [node]
    while stack:
        current = stack.pop()
        if isinstance(current, (cst.Assign, cst.AugAssign, cst.AnnAssign)):
            yield current
        elif not isinstance(current, (cst.BaseExpression, cst.BaseSmallStatement)):
            stack.extend(reversed(list(child_nodes(current))))


def random_names(index: ScriptIndex, scope: Scope) -> set[str]:
    """Names of `scope` bound from a random number (`n_micro = random.randint(1, 4)`), and what is
    computed from them. Random tensors (`x = torch.randn(64, 10)`) are data, not decisions."""
    seeds = {target for target, value in _assignments(index, scope) if random_call(index, value, numbers_only=True) is not None}
    return per_rank_names(index, scope, seeds)


def random_call(index: ScriptIndex, node: cst.CSTNode, numbers_only: bool = False) -> cst.Call | None:
    """A draw from Python's or NumPy's generator, or (unless `numbers_only`) from torch's."""
    for call in calls_in(node):
        qualified = index.qualify(call.func) or ""
        if qualified.startswith(NUMBER_CALLS if numbers_only else RANDOM_CALLS):
            return call
    return None


def jumps(body: cst.CSTNode) -> cst.CSTNode | None:
    """A `break`, `continue` or `return` that leaves (or restarts) the loop around `body`, not one of
    a loop nested inside it."""
    stack: list[cst.CSTNode] = [body]
    while stack:
        node = stack.pop()
        if isinstance(node, (cst.Break, cst.Continue, cst.Return)):
            return node
        if isinstance(node, (cst.For, cst.While)):
            stack.extend(_returns_in(node))
            continue
        if isinstance(node, (cst.FunctionDef, cst.ClassDef, cst.Lambda)):
            continue
        stack.extend(reversed(list(child_nodes(node))))
    return None


def _returns_in(loop: cst.For | cst.While) -> list[cst.CSTNode]:
    return [n for n in descendants(loop) if isinstance(n, cst.Return)]


# -- the findings ------------------------------------------------------------------------------


def per_rank_control(sites: TrainingSites) -> list[Divergence]:
    """MIG121 and MIG122 in the scopes that run backward."""
    index: ScriptIndex = sites.index
    found: list[Divergence] = []
    backward_nodes = {id(b.node) for b in sites.backward_calls}
    step_nodes = {id(s.step.node) for s in sites.stepped}
    models = {m.spelling for m in sites.models}
    scopes = {b.place.scope.name: b.place.scope for b in sites.backward_calls}
    for scope in scopes.values():
        seeds = _loss_names(sites, scope) | _forward_outputs(index, scope, models)
        per_rank = per_rank_names(index, scope, seeds)
        drawn = random_names(index, scope)
        holds_backward, holds_step = _holders(scope.node, [backward_nodes, step_nodes])
        for loop in index.loops_in(scope):
            if not _has_backward(loop.node, holds_backward):
                continue
            found.extend(_in_loop(index, loop.node, per_rank, drawn, holds_backward, holds_step))
    unique: dict[int, Divergence] = {}
    for divergence in found:
        unique.setdefault(id(divergence.node), divergence)
    return list(unique.values())


def _in_loop(index: ScriptIndex, loop: cst.For | cst.While, per_rank: set[str], drawn: set[str],
             holds_backward: set[int], holds_step: set[int]) -> list[Divergence]:
    """`holds_backward` / `holds_step`: the nodes (ids) with a backward / an optimizer step under them."""
    found: list[Divergence] = []
    code = index.module.code_for_node
    if isinstance(loop, cst.For) and _random(index, loop.iter, drawn):
        found.append(Divergence("MIG122", loop, [
            f"`for {code(loop.target)} in {code(loop.iter)}:` (line ", loop, ") runs a random number of backward passes on each rank: "
            "unless every rank draws the same number, the ranks run different numbers of gradient all-reduces and the one "
            "that goes on waits forever in its next one; draw it on rank 0 and broadcast it (dist.broadcast_object_list), "
            "or give every rank the same seed and the same draws"]))
    if isinstance(loop, cst.While):
        if _values_read(loop.test) & per_rank:
            found.append(Divergence("MIG121", loop, [
                f"`while {code(loop.test)}:` (line ", loop, ") repeats training steps on a value computed from this rank's own "
                "batch: ranks stop at different steps and the others wait forever in the next gradient all-reduce; loop on a "
                "value every rank shares (all-reduce it first) or on a step count"]))
        elif _random(index, loop.test, drawn):
            found.append(Divergence("MIG122", loop, [
                f"`while {code(loop.test)}:` (line ", loop, ") repeats training steps at random: unless every rank draws the "
                "same numbers, ranks stop at different steps and the others wait forever in the next gradient all-reduce"]))
    for node in _own_statements(loop, holds_backward):
        if not isinstance(node, cst.If):
            continue
        jump = jumps(node.body) or (jumps(node.orelse) if node.orelse is not None else None)
        skips_backward = _has_backward(node.body, holds_backward) or (node.orelse is not None and _has_backward(node.orelse, holds_backward))
        steps = _has_backward(node, holds_step)
        if not jump and not skips_backward and not steps:
            continue
        what = f"`if {code(node.test)}:`" + (f" ... `{code(jump).strip()}`" if jump is not None else "")
        if _values_read(node.test) & per_rank:
            found.append(Divergence("MIG121", node, [what, " (line ", node, ") ", _effect(jump), " on a value computed from "
                "this rank's own batch (", ", ".join(f"`{n}`" for n in sorted(_values_read(node.test) & per_rank)), "): each rank "
                "decides alone, so ranks leave the loop at different steps and the others wait forever in the next gradient "
                "all-reduce; decide on a value every rank shares (all-reduce it first, e.g. dist.all_reduce(t, "
                "op=dist.ReduceOp.MAX)) or on a step count"]))
        elif _random(index, node.test, drawn) and (jump is not None or skips_backward):
            found.append(Divergence("MIG122", node, [what, " (line ", node, ") ", _effect(jump), " at random: unless every "
                "rank draws the same numbers, the ranks run different numbers of backward passes and the one that goes on "
                "waits forever in its next gradient all-reduce; draw the decision on rank 0 and broadcast it, or give every "
                "rank the same seed and the same draws"]))
        elif _random(index, node.test, drawn):
            found.append(Divergence("MIG122", node, [what, " (line ", node, ") steps the optimizer at random: unless every "
                "rank draws the same numbers, the ranks update their weights at different steps and the replicas train "
                "apart; draw the decision on rank 0 and broadcast it, or give every rank the same seed and the same draws"]))
    return found


def _effect(jump: cst.CSTNode | None) -> str:
    if isinstance(jump, cst.Break):
        return "leaves the training loop"
    if isinstance(jump, cst.Return):
        return "returns from training"
    if isinstance(jump, cst.Continue):
        return "skips the rest of a step"
    return "runs or skips a backward pass"


def _random(index: ScriptIndex, node: cst.CSTNode, drawn: set[str]) -> bool:
    return bool(read_names(node) & drawn) or random_call(index, node) is not None


def _own_statements(loop: cst.For | cst.While, holds_backward: set[int]) -> Iterator[cst.BaseStatement]:
    """The statements inside the loop, not those of a nested loop that runs no backward (a `break`
    there leaves only that loop) nor of nested functions."""
    stack: list[cst.CSTNode] = [loop.body]
    while stack:
        node = stack.pop()
        if isinstance(node, (cst.For, cst.While)) and not _has_backward(node, holds_backward):
            continue
        if isinstance(node, (cst.FunctionDef, cst.ClassDef)):
            continue
        if isinstance(node, cst.BaseStatement):
            yield node
        if not isinstance(node, (cst.SimpleStatementLine, cst.BaseExpression)):  # no statement is inside those
            stack.extend(reversed(list(child_nodes(node))))


STRUCTURAL = frozenset({"requires_grad", "shape", "dtype", "device", "ndim", "is_cuda", "grad_fn", "is_leaf"})


def _values_read(test: cst.BaseExpression) -> set[str]:
    """The names a condition reads for their value: `loss.requires_grad` or `x.shape` are the same
    on every rank and do not count."""
    found: set[str] = set()
    stack: list[cst.CSTNode] = [test]
    while stack:
        node = stack.pop()
        if isinstance(node, cst.Attribute) and node.attr.value in STRUCTURAL:
            continue
        if isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute) and node.func.attr.value in ("size", "dim"):
            continue
        if isinstance(node, (cst.Name, cst.Attribute)) and (spelled := spell(node)) is not None:
            found |= read_names(node) if not spelled.startswith("self.") else {spelled}
            continue
        stack.extend(child_nodes(node))
    return found


def _has_backward(node: cst.CSTNode, holders: set[int]) -> bool:
    """Whether one of the calls `holders` was made for is under `node` (see `_holders`)."""
    return id(node) in holders


def _holders(root: cst.CSTNode, targets: list[set[int]]) -> list[set[int]]:
    """For each set of target node ids, the ids of the nodes under `root` (itself included) that
    hold one of them, all found in one walk: asking each statement of a long loop body to walk its
    own subtree would walk the body once per level of nesting, and again for each question."""
    holders: list[set[int]] = [set() for _ in targets]
    path: list[cst.CSTNode] = []
    stack: list[tuple[cst.CSTNode, int]] = [(root, 0)]
    while stack:
        node, depth = stack.pop()
        del path[depth:]
        path.append(node)
        for wanted, found in zip(targets, holders):
            if id(node) in wanted:
                for above in reversed(path):
                    if id(above) in found:
                        break  # and so is everything above it
                    found.add(id(above))
        stack.extend((child, depth + 1) for child in child_nodes(node))
    return holders


def _loss_names(sites: TrainingSites, scope: Scope) -> set[str]:
    """What backward is called on: `loss` in `loss.backward()`, `scaler.scale(loss).backward()`;
    not the model or the imports of `F.cross_entropy(net(x), y).backward()` (every rank's alike)."""
    names: set[str] = set()
    for call in sites.backward_calls:
        if call.place.scope is scope and isinstance(call.node.func, cst.Attribute):
            names |= read_names(call.node.func.value)
    return names - {m.spelling for m in sites.models} - set(sites.index.imports)


def _forward_outputs(index: ScriptIndex, scope: Scope, models: set[str]) -> set[str]:
    """Names bound from a forward of a model: `out = model(x)`."""
    return {
        target
        for target, value in _assignments(index, scope)
        if any(spell(c.func) in models for c in calls_in(value))
    }


def reinitialized_after_wrap(
    sites: TrainingSites,
    aliases: Callable[[ScriptIndex, ModelSite], set[tuple[str, str]]],
    is_after: Callable[[ScriptIndex, cst.BaseStatement, ModelSite], bool],
    sharded: bool = False,
) -> list[Divergence]:
    """MIG123: new weights drawn for a wrapped model after the wrapper copied rank 0's (`sharded`:
    after FSDP2 split them into shards, which copies nothing)."""
    index: ScriptIndex = sites.index
    found: list[Divergence] = []
    for site in sites.models:
        by_scope: dict[str, set[str]] = {}  # scope name -> the spellings the model goes by there
        for spelling, scope_name in aliases(index, site):
            by_scope.setdefault(scope_name, set()).add(spelling)
        where: list[str | cst.CSTNode] = ["the wrapper goes ", *_sharded_where(site)]
        for call in index.calls:
            in_scope = by_scope.get(call.place.scope.name)
            if not in_scope or not _reinitializes(index, call.node, in_scope):
                continue
            if not _initializes(index, call.node) or not is_after(index, call.place.stmt, site):
                continue
            drawn: list[str | cst.CSTNode] = [f"`{index.module.code_for_node(call.node)}` (line ", call.node, f") draws new weights for `{site.spelling}` "]
            if sharded:
                found.append(Divergence("MIG123", call.node, [
                    *drawn, "after it is sharded (the shard goes ", *_sharded_where(site),
                    "): the draw runs on each rank's shards of the weights, so they are not the weights the original "
                    "script draws; initialise before the shard"]))
                continue
            found.append(Divergence("MIG123", call.node, [
                *drawn, "after it is wrapped (", *where, "): the wrapper copied rank 0's weights to every rank when it was built, "
                "so each rank now starts from its own random weights and averaging gradients never brings them back "
                "together; initialise before the wrap, or broadcast the weights again afterwards"]))
    return found


def _sharded_where(site: ModelSite) -> list[str | cst.CSTNode]:
    if site.wrap_before is not None:
        return ["before line ", site.wrap_before]
    assert site.wrap_after is not None  # a wrapped model has a place for its wrapper
    return ["after line ", site.wrap_after]


def _initializes(index: ScriptIndex, call: cst.Call) -> bool:
    """`model.apply(fn)` only counts when fn initialises weights (its name says so, or its body does)."""
    if not (isinstance(call.func, cst.Attribute) and call.func.attr.value == "apply"):
        return True
    if not call.args:
        return False
    name = spell(call.args[0].value) or ""
    if any(word in name.lower() for word in ("init", "weight", "reset")):
        return True
    scope = index.functions.get(name.removeprefix("self."))
    return scope is not None and any(
        (index.qualify(c.func) or "").startswith("torch.nn.init.")
        or (isinstance(c.func, cst.Attribute) and c.func.attr.value in INIT_IN_PLACE | {"reset_parameters"})
        for c in calls_in(scope.node)
    )


def per_rank_condition(sites: TrainingSites, stmt: cst.BaseStatement) -> cst.If | cst.While | None:
    """The `if` or `while` around `stmt` whose test reads a value of this rank's own batches (a
    loss, a model output, or a name computed from them, in a scope that runs backward): around it
    in its own function, or around a call of that function from a scope that runs backward. Code
    under it runs on some ranks only."""
    index: ScriptIndex = sites.index
    models = {m.spelling for m in sites.models}
    scope = index.scope_of.get(stmt)
    places = [stmt] + [c.place.stmt for c in index.calls if scope is not None and c.name == scope.name.rsplit(".", 1)[-1]
                       and not scope.is_module]
    for place in places:
        where = index.scope_of.get(place)
        if where is None:
            continue
        per_rank = per_rank_names(index, where, _loss_names(sites, where) | _forward_outputs(index, where, models))
        for around in index.enclosing_statements(place):
            if isinstance(around, cst.If | cst.While) and around is not place and _values_read(around.test) & per_rank:
                return around
    return None


# -- a decision on what the model computed on this rank ----------------------------------------


@dataclass(frozen=True)
class EvaluatedCondition:
    """An `if`/`while` around a statement whose test reads a value computed by running the model
    on this rank (`if val_score["Mean IoU"] > best:` after `val_score = validate(model=model, ...)`)."""

    condition: cst.If | cst.While
    name: str  # the name the test reads
    run: cst.Call  # the call that ran the model, in the function that binds a value `name` is computed from
    evaluating: tuple[Scope, ...]  # that function and the functions of this program the call runs


def evaluated_condition(sites: TrainingSites, stmt: cst.BaseStatement) -> EvaluatedCondition | None:
    """The condition around `stmt` (in its function, or around a call of that function) that reads a
    value the model computed on this rank: a forward's output, or what a function handed the model
    (or one that runs it) returned; not what a training function returned (epoch_sums: reduced over
    the ranks, or reported as such). Under a sharded model no rank's such value is known to match the
    others': each rank evaluates with its own buffers (BatchNorm statistics are not averaged) and
    often its own batches or episodes."""
    index: ScriptIndex = sites.index
    scope = index.scope_of.get(stmt)
    if scope is None:
        return None
    models = {m.spelling for m in sites.models}
    for place in [stmt, *_calls_running(index, scope)]:
        where = index.scope_of.get(place)
        if where is None:
            continue
        runs = {target: call for target, value in _assignments(index, where)
                if target not in models and (call := _model_run(index, value, models, where.class_name)) is not None
                and not any(c.name in sites.training_scopes for c in _callees(index, call, where.class_name))}
        edges = _readers(index, where)
        for collection, value in _collected(where):
            for name in read_names(value):
                edges = {**edges, name: [*edges.get(name, []), collection]}
        for around in index.enclosing_statements(place):
            if not isinstance(around, cst.If | cst.While) or around is place:
                continue
            read = sorted(_values_read(around.test))
            for name in [n for n in read if n in runs] + [n for n in read if n not in runs]:  # a run's own result first
                origin = next((runs[seed] for seed in sorted(runs) if name in reachable(edges, {seed})), None)
                if origin is not None:
                    return EvaluatedCondition(around, name, origin, (where, *_callees(index, origin, where.class_name)))
    return None


def _calls_running(index: ScriptIndex, scope: Scope) -> list[cst.BaseStatement]:
    """The statements that call the function `scope`: `save_ckpt(path)`, or `agent.save(dir)` for
    the method `Agent.save` (called on something of this program, not on an import)."""
    if scope.is_module:
        return []
    name = scope.name.rsplit(".", 1)[-1]
    found: list[cst.BaseStatement] = []
    for call in index.calls:
        func = call.node.func
        if scope.class_name and isinstance(func, cst.Attribute) and func.attr.value == name:
            receiver = spell(func.value)
            if receiver is not None and receiver.split(".")[0] not in index.imports:
                found.append(call.place.stmt)
        elif not scope.class_name and call.name == name:
            found.append(call.place.stmt)
    return found


def _model_run(index: ScriptIndex, value: cst.BaseExpression, models: set[str], class_name: str | None) -> cst.Call | None:
    """The call in `value` that runs a model: its forward (`net(x)`), a function handed it
    (`validate(model=model)`), or a function or method of this program that runs one
    (`agent.act(state)` where `Agent.act` calls `self.net(...)`)."""
    running = _running_scopes(index, models)
    for call in calls_in(value):
        if spell(call.func) in models or any(spell(arg.value) in models for arg in call.args):
            return call
        if any(callee.name in running for callee in _callees(index, call, class_name)):
            return call
    return None


def _callees(index: ScriptIndex, call: cst.Call, class_name: str | None) -> list[Scope]:
    """The functions of this program a call (made in a method of `class_name`, or not) may run: by
    its name, `self.method(...)` of that class, or for `thing.method(...)` every method of that name
    (the receiver's class is not always known: a parameter)."""
    spelled = spell(call.func)
    if spelled is None:
        return []
    if spelled in index.functions:
        return [index.functions[spelled]]
    receiver, _, method = spelled.rpartition(".")
    if receiver == "self":
        own = index.functions.get(f"{class_name}.{method}") if class_name else None
        return [own] if own is not None else []
    if not receiver or "." in receiver or receiver in index.imports:
        return []
    return [scope for name, scope in index.functions.items() if name.endswith(f".{method}") and scope.class_name]


def _running_scopes(index: ScriptIndex, models: set[str]) -> set[str]:
    """The functions of this program that call a model (`self.online_net(state)`), themselves or
    through the functions they call."""
    def build() -> set[str]:
        direct: set[str] = set()
        callers: dict[str, list[str]] = {}
        for name, scope in index.functions.items():
            for call in calls_in(scope.node):
                if spell(call.func) in models:
                    direct.add(name)
                for callee in _callees(index, call, scope.class_name):
                    callers.setdefault(callee.name, []).append(name)
        return reachable(callers, direct)
    return index.answer("running_scopes", frozenset(models), build)


COLLECTING = frozenset({"append", "extend", "add", "insert"})


def _collected(scope: Scope) -> list[tuple[str, cst.BaseExpression]]:
    """(collection, value) for `rewards.append(total)` and the like in `scope`: the collection holds
    what the value is computed from."""
    found: list[tuple[str, cst.BaseExpression]] = []
    for call in calls_in(scope.node):
        func = call.func
        if isinstance(func, cst.Attribute) and func.attr.value in COLLECTING and call.args:
            collection = spell(func.value)
            if collection is not None:
                found.extend((collection, arg.value) for arg in call.args)
    return found
