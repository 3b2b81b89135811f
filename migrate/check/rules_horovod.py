"""Check rules for Horovod scripts (those that call `hvd.init()`): the learning rate not scaled by
`hvd.size()` (DC301; not where the script cuts its batch size by the count of processes or GPUs,
`batch_size = int(args.batch_size / nprocs)`: the global batch stays the one given, and so does
its learning rate), parameters never broadcast (DC302), optimizer state loaded from a checkpoint
and not broadcast after (DC303), an optimizer not wrapped in `hvd.DistributedOptimizer` (DC304)."""

from __future__ import annotations

import re
from collections.abc import Iterator

import libcst as cst

from migrate.analysis.index import CallSite, descendants, read_names
from migrate.analysis.training import callers_of
from migrate.check.facts import Hit, Script, argument, is_optimizer
from migrate.check.rules_data import data_sharded

LR_TEXT = re.compile(r"lr|learning_rate", re.IGNORECASE)
BATCH_TEXT = re.compile(r"batch", re.IGNORECASE)
PROCESS_COUNT = re.compile(r"size\(\)|world|n_?procs|n_?gpus?|device_count|num_processes|num_replicas", re.IGNORECASE)
DIVISIONS = (cst.Divide, cst.FloorDivide, cst.DivideAssign, cst.FloorDivideAssign)


def _optimizers(script: Script) -> list[CallSite]:
    return [call for call, name in script.named_calls if is_optimizer(name)]


def _distributed_optimizers(script: Script) -> list[CallSite]:
    return script.calls_ending(".DistributedOptimizer", "horovod.")


def _size_calls(script: Script) -> list[CallSite]:
    return script.calls_ending(".size", "horovod.") + script.calls_ending(".local_size", "horovod.")


def lr_not_scaled(script: Script) -> Iterator[Hit]:
    """DC301: no learning rate the script sets reads hvd.size(), in a script whose training data is
    split across the ranks (where it is not, every rank trains on the same batches, the global batch
    does not grow and the LR stays: the data is the finding, DC201's)."""
    if not script.horovod or _scaled_somewhere(script) or not data_sharded(script) or _batch_split(script):
        return
    for call in _optimizers(script):
        lr = argument(call.node, "lr", 1)
        yield Hit(lr if lr is not None else call.node,
                  "learning rate not scaled by hvd.size(): each step averages the gradients of hvd.size() times "
                  "the batch, so the guide scales the LR with it (lr=args.lr * hvd.size(), with a warm-up for large sizes)")


def _scaled_somewhere(script: Script) -> bool:
    """A statement that reads hvd.size() (or a name bound to it) and speaks of a learning rate."""
    sizes = _size_calls(script)
    size_stmts = {call.place.stmt for call in sizes}
    size_names = {target for stmt in size_stmts for target in _targets(script, stmt)}
    readers = [stmt for stmt in script.index.scope_of if read_names(stmt) & size_names] if size_names else []
    return any(LR_TEXT.search(script.text(stmt)) for stmt in [*size_stmts, *readers] if _simple(stmt))


def _batch_split(script: Script) -> bool:
    """A batch size divided by the count of processes (`args.batch_size / nprocs`,
    `batch_size = 256 // hvd.size()`, `batch_size //= hvd.size()`): each rank takes its share of
    the batch given."""
    return any(BATCH_TEXT.search(script.text(batch)) and PROCESS_COUNT.search(script.text(count))
               for node in descendants(script.module) for batch, count in _divisions(node))


def _divisions(node: cst.CSTNode) -> list[tuple[cst.CSTNode, cst.CSTNode]]:
    """(what is divided or bound to the quotient, the divisor) for a division or a statement holding one."""
    if isinstance(node, cst.BinaryOperation) and isinstance(node.operator, DIVISIONS):
        return [(node.left, node.right)]
    if isinstance(node, cst.AugAssign) and isinstance(node.operator, DIVISIONS):
        return [(node.target, node.value)]
    if isinstance(node, cst.Assign):
        divisors = [n.right for n in descendants(node.value)
                    if isinstance(n, cst.BinaryOperation) and isinstance(n.operator, DIVISIONS)]
        return [(t.target, d) for t in node.targets for d in divisors]
    return []


def _targets(script: Script, stmt: cst.BaseStatement) -> set[str]:
    return {b.target for b in script.index.bindings_at(stmt)}


def _simple(stmt: cst.BaseStatement) -> bool:
    return isinstance(stmt, cst.SimpleStatementLine)


def parameters_not_broadcast(script: Script) -> Iterator[Hit]:
    """DC302: no hvd.broadcast_parameters (or broadcast_variables) at all."""
    if not script.horovod or script.calls_ending(".broadcast_parameters", "horovod.") or \
            script.calls_ending(".broadcast_variables", "horovod."):
        return
    anchors = _distributed_optimizers(script) or _optimizers(script)
    if anchors:
        yield Hit(anchors[0].node, "parameters never broadcast: each rank starts from its own random weights and they "
                  "never meet; call hvd.broadcast_parameters(model.state_dict(), root_rank=0) before training")


def optimizer_state_not_broadcast(script: Script) -> Iterator[Hit]:
    """DC303: an optimizer's load_state_dict with no hvd.broadcast_optimizer_state after it."""
    if not script.horovod:
        return
    names = _optimizer_names(script)
    broadcasts = script.calls_ending(".broadcast_optimizer_state", "horovod.")
    for call in script.method_calls("load_state_dict"):
        if not isinstance(call.node.func, cst.Attribute) or script.text(call.node.func.value) not in names:
            continue
        if any(_runs_after(script, b, call) for b in broadcasts):
            continue
        yield Hit(call.node, "optimizer state loaded but never broadcast: ranks that did not load it (or loaded "
                  "another) step with different state; call hvd.broadcast_optimizer_state(optimizer, root_rank=0) after the load")


def _optimizer_names(script: Script) -> set[str]:
    calls = {id(c.node) for c in [*_optimizers(script), *_distributed_optimizers(script)]}
    return {b.target for b in script.index.bindings if isinstance(b.value, cst.Call) and id(b.value) in calls}


def _runs_after(script: Script, later: CallSite, earlier: CallSite) -> bool:
    if later.place.scope is not earlier.place.scope:
        return True
    return script.order(later.place.stmt) >= script.order(earlier.place.stmt)


def optimizer_not_wrapped(script: Script) -> Iterator[Hit]:
    """DC304: a torch optimizer that no hvd.DistributedOptimizer wraps: gradients are never averaged."""
    if not script.horovod:
        return
    wrappers = _distributed_optimizers(script)
    inside = {id(n) for w in wrappers for n in descendants(w.node) if n is not w.node}
    read = set().union(*(read_names(w.node) for w in wrappers)) if wrappers else set()
    for call in _optimizers(script):
        if id(call.node) in inside or _bound_to(script, call) & read:
            continue
        yield Hit(call.node, "optimizer not wrapped in hvd.DistributedOptimizer: each rank steps on its own gradients "
                  "and the models drift apart; optimizer = hvd.DistributedOptimizer(optimizer, "
                  "named_parameters=model.named_parameters())")


def _bound_to(script: Script, call: CallSite) -> set[str]:
    """The names an optimizer call ends up in: its own targets, or, when a function of the script
    returns it (`def make_optimizer(m): return SGD(...)`, or `opt = SGD(...); ...; return opt`),
    the targets of that function's calls."""
    names = set(script.index.targets_of(call.node))
    returned = isinstance(call.place.stmt, cst.SimpleStatementLine) and any(
        isinstance(small, cst.Return) and small.value is call.node for small in call.place.stmt.body)
    returned = returned or _returns_a_name(call.place.scope.node, names) or _in_a_returned_tuple(call)
    if returned and not call.place.scope.is_module:
        for caller in callers_of(script.index, call.place.scope):
            names |= set(script.index.targets_of(caller.node)) | _unpacked(caller)
    return names


def _returns_a_name(function: cst.CSTNode, names: set[str]) -> bool:
    """Whether `function` (a def) has a `return NAME` of one of `names`."""
    if not isinstance(function, cst.FunctionDef):
        return False
    return any(isinstance(node, cst.Return) and isinstance(node.value, cst.Name) and node.value.value in names
               for node in descendants(function.body))


def _in_a_returned_tuple(call: CallSite) -> bool:
    """`return Adam(g.parameters()), Adam(d.parameters())`: the optimizer is one element of what its
    function returns (its caller unpacks it: `g_opt, d_opt = make_optimizers(g, d)`)."""
    stmt = call.place.stmt
    if not isinstance(stmt, cst.SimpleStatementLine):
        return False
    return any(isinstance(small, cst.Return) and isinstance(small.value, cst.Tuple)
               and any(element.value is call.node for element in small.value.elements) for small in stmt.body)


def _unpacked(caller: CallSite) -> set[str]:
    """The names `a, b = f(...)` unpacks the call's result into."""
    stmt = caller.place.stmt
    smalls = stmt.body if isinstance(stmt, cst.SimpleStatementLine) else []
    names: set[str] = set()
    for small in smalls:
        if isinstance(small, cst.Assign) and small.value is caller.node:
            for target in small.targets:
                if isinstance(target.target, (cst.Tuple, cst.List)):
                    names |= {e.value.value for e in target.target.elements if isinstance(e.value, cst.Name)}
    return names
