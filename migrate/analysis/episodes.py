"""Training gated on each rank's own environment (reinforcement learning): every rank plays its own
episodes, so what it gathered (a replay buffer's size, a transition counter, an episode's `done`)
differs between ranks. A backward pass or an optimizer step run under such a condition
(`if memory.size() > 2000: train(...)`, `if dqn.memory_counter > CAPACITY: dqn.learn()`), a
loop of backward passes left on it (`if done: break`) or repeated while it holds
(`while not done:`) makes the ranks run different numbers of gradient all-reduces: the one that
goes on waits forever. Counters every rank shares (`if (step + 1) % accum == 0:`, epochs) are not
environment state and are not reported.

Read-only: each finding is a `Divergence` (MIG121, `hangs`: the conversion is refused), its advice
in torch.distributed's words, which the reporting step's runtime rewrites into its own (Runtime.advice).
"""

from __future__ import annotations

import libcst as cst

from migrate.analysis.divergence import Divergence, assignments, jumps
from migrate.analysis.index import ScriptIndex, descendants, read_names, spell
from migrate.analysis.sites import TrainingSites
from migrate.analysis.syntax import calls_in

ENV_MAKERS = ("gym.make", "gymnasium.make", "gym.vector.make", "gymnasium.vector.make")
ENV_METHODS = frozenset({"step", "reset"})


def environment_control(sites: TrainingSites) -> list[Divergence]:
    """MIG121 (hangs) for each condition on per-rank environment state that gates training."""
    index: ScriptIndex = sites.index
    envs = environments(index)
    if not envs:
        return []
    state = _environment_state(index, envs)
    if not state:
        return []
    training = {id(b.node) for b in sites.backward_calls} | {id(s.step.node) for s in sites.stepped}
    reaching = _functions_reaching(index, training)
    found: list[Divergence] = []
    for stmt in index.scope_of:
        if isinstance(stmt, (cst.If, cst.While)):
            divergence = _gates_training(index, stmt, state, training, reaching)
            if divergence is not None:
                found.append(divergence)
    return found


def environments(index: ScriptIndex) -> set[str]:
    """Names bound to an environment: `env = gym.make(...)` (any name), or a name spelled like one."""
    names: set[str] = set()
    for binding in index.bindings:
        made = isinstance(binding.value, cst.Call) and (index.qualify(binding.value.func) or "") in ENV_MAKERS
        last = binding.target.rsplit(".", 1)[-1].lower()
        if made or last == "env" or last.endswith("_env") or last.startswith("env_"):
            names.add(binding.target)
    return names


def _environment_state(index: ScriptIndex, envs: set[str]) -> set[str]:
    """Heads of the names that hold what this rank's environment returned, and of the objects fed
    with it (`memory.put((s, a, r, s2, done))` -> `memory`), followed through assignments."""
    assigned = [pair for scope in {*index.scope_of.values()} for pair in assignments(index, scope)]
    state: set[str] = set()
    for target, value in assigned:
        if any(_steps_environment(call, envs) for call in calls_in(value)):
            state.add(_head(target))
    changed = True
    while changed:
        before = len(state)
        for target, value in assigned:
            if {_head(n) for n in read_names(value)} & state:
                state.add(_head(target))
        for call in index.calls:
            func = call.node.func
            fed = any({_head(n) for n in read_names(a.value)} & state for a in call.node.args)
            if fed and isinstance(func, cst.Attribute) and (owner := spell(func.value)) is not None:
                if _head(owner) not in ("self", "torch", "np", "numpy") and _head(owner) not in envs:
                    state.add(_head(owner))
        changed = len(state) != before
    return state - {"self"}


def _steps_environment(call: cst.Call, envs: set[str]) -> bool:
    func = call.func
    return isinstance(func, cst.Attribute) and func.attr.value in ENV_METHODS and spell(func.value) in envs


def _head(name: str) -> str:
    return name.split(".")[0]


def _functions_reaching(index: ScriptIndex, training: set[int]) -> set[str]:
    """Last parts of the names of this script's functions that run a backward or a step, directly
    or through another of its functions (`train`, `learn` for `dqn.learn()`)."""
    bodies = {scope.name: scope for scope in index.functions.values()}
    reaching = {name.rsplit(".", 1)[-1] for name, scope in bodies.items()
                if any(id(node) in training for node in descendants(scope.node))}
    changed = True
    while changed:
        before = len(reaching)
        for name, scope in bodies.items():
            if any(_called(c) in reaching for c in calls_in(scope.node)):
                reaching.add(name.rsplit(".", 1)[-1])
        changed = len(reaching) != before
    return reaching


def _called(call: cst.Call) -> str:
    return (spell(call.func) or "").rsplit(".", 1)[-1]


def _trains(node: cst.CSTNode, training: set[int], reaching: set[str]) -> bool:
    return any(id(n) in training for n in descendants(node)) or any(_called(c) in reaching for c in calls_in(node))


def _gates_training(index: ScriptIndex, stmt: cst.If | cst.While, state: set[str], training: set[int],
                    reaching: set[str]) -> Divergence | None:
    read = sorted(n for n in read_names(stmt.test) if _head(n) in state)
    if not read:
        return None
    code = index.module.code_for_node
    keyword = "while" if isinstance(stmt, cst.While) else "if"
    what = f"`{keyword} {code(stmt.test)}:`"
    if _trains(stmt.body, training, reaching) or (stmt.orelse is not None and _trains(stmt.orelse, training, reaching)):
        effect = "runs the backward pass (and the optimizer step)"
    elif isinstance(stmt, cst.If) and (jump := jumps(stmt.body)) is not None and _leaves_training_loop(index, stmt, training, reaching):
        effect = f"`{code(jump).strip()}` leaves a loop of backward passes"
    else:
        return None
    return Divergence("MIG121", stmt, [
        what, " (line ", stmt, f") {effect} on state this rank gathered from its own environment (",
        ", ".join(f"`{n}`" for n in read), "): every rank plays its own episodes, so the ranks run different numbers "
        "of gradient all-reduces and the one that goes on waits forever; make the condition common to every rank "
        "(decide it on rank 0 and broadcast it with dist.broadcast_object_list, or all-reduce the count first with "
        "dist.all_reduce(t, op=dist.ReduceOp.MIN)): the file is left unchanged"], hangs=True)


def _leaves_training_loop(index: ScriptIndex, stmt: cst.If, training: set[int], reaching: set[str]) -> bool:
    """The loop the jump leaves (the innermost around `stmt`) runs a backward pass."""
    for around in index.enclosing_statements(stmt)[1:]:
        if isinstance(around, (cst.FunctionDef, cst.ClassDef)):
            return False
        if isinstance(around, (cst.For, cst.While)):
            return _trains(around.body, training, reaching)
    return False

