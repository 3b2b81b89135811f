"""Training data no DistributedSampler can shard, which each rank can still be given its own of:
an environment the training loop plays (reinforcement learning) seeded with a fixed seed
(`env.seed(s)`, `env.reset(seed=s)`, `env.action_space.seed(s)`), and one token stream cut into
columns by a function of this file (`batchify(data, bsz)`: `data.view(bsz, -1).t()`) whose rows the
training loop reads (`get_batch(train_data, i)`). A DataLoader's sampler drawing with replacement
from a seeded generator is found by analysis.loaders.seeded_sampler. Read-only: steps.per_rank_sources
rewrites what is found here.
"""

from __future__ import annotations

from dataclasses import dataclass

import libcst as cst

from migrate.analysis.episodes import ENV_MAKERS
from migrate.analysis.index import Binding, CallSite, Loop, Scope, ScriptIndex, descendants, spell
from migrate.analysis.syntax import argument
from migrate.analysis.training import callee_scope, caller_arguments

ENV_LOOP_METHODS = ("step", "reset")
SPACES = ("action_space", "observation_space")
VECTOR_MAKERS = ("gym.vector.make", "gymnasium.vector.make", "gymnasium.make_vec", "gym.vector.SyncVectorEnv",
                 "gym.vector.AsyncVectorEnv", "gymnasium.vector.SyncVectorEnv", "gymnasium.vector.AsyncVectorEnv")


@dataclass(frozen=True)
class EnvSeed:
    """One seeding of an environment the training loop plays: `env.seed(s)`, `env.reset(seed=s)`,
    `env.action_space.seed(s)`."""

    call: CallSite
    seed: cst.Arg  # the argument that holds the seed
    env: str  # the environment's spelling: "env", "self.env"
    per_episode: bool  # runs inside the loop around training (or a function it calls): once per episode
    vector: bool  # a vector environment: its sub-environments take the seeds s, s + 1, ..., s + num_envs - 1


@dataclass(frozen=True)
class Environments:
    """The environments the training loop plays, and their seedings (none: seeded from the OS)."""

    played: dict[str, CallSite]  # spelling -> its first `step`/`reset` call in the loop
    seeds: list[EnvSeed]


@dataclass(frozen=True)
class ColumnStream:
    """`train_data = batchify(corpus, bsz)`: the stream cut into `bsz` columns the loop reads rows of."""

    binding: Binding
    call: cst.Call  # the cutting call
    columns: cst.Arg  # its argument for the number of columns


def outer_loop(index: ScriptIndex, loop: Loop) -> Loop:
    """The outermost loop around `loop` in its own function (itself when there is none)."""
    outer = index.loop_of(loop.place.loops[0]) if loop.place.loops else None
    return outer if outer is not None else loop


def _loop_calls(index: ScriptIndex, loop: Loop) -> tuple[list[CallSite], set[Scope]]:
    """The calls under the loop and in the functions of this file it calls, and those functions."""
    inside = [c for c in index.calls if loop.node in c.place.loops]
    callees = {s for s in (callee_scope(index, c) for c in inside) if s is not None}
    return inside + [c for s in callees for c in index.calls_from(s)], callees


def environments(index: ScriptIndex, loop: Loop) -> Environments:
    """The environments stepped or reset in (or around) the training loop, and every seeding of them."""
    around = outer_loop(index, loop)
    calls, callees = _loop_calls(index, around)
    played: dict[str, CallSite] = {}
    for call in sorted(calls, key=index.call_position):
        func = call.node.func
        if isinstance(func, cst.Attribute) and func.attr.value in ENV_LOOP_METHODS:
            owner = spell(func.value)
            if owner is not None and _is_environment(index, owner):
                played.setdefault(owner, call)
    seeds = [seed for call in index.calls for seed in _seeding(index, call, played, around, callees)]
    return Environments(played=played, seeds=sorted(seeds, key=lambda s: index.call_position(s.call)))


def _is_environment(index: ScriptIndex, name: str) -> bool:
    """Made by `gym.make(...)` (or a vector maker), or named like an environment (`env`, `train_env`)."""
    last = name.rsplit(".", 1)[-1].lower()
    if last == "env" or last == "envs" or last.endswith("_env") or last.startswith("env_"):
        return True
    return any(isinstance(b.value, cst.Call) and (index.qualify(b.value.func) or "") in ENV_MAKERS + VECTOR_MAKERS
               for b in index.bindings_of(name))


def _seeding(index: ScriptIndex, call: CallSite, played: dict[str, CallSite], around: Loop,
             callees: set[Scope]) -> list[EnvSeed]:
    func = call.node.func
    if not isinstance(func, cst.Attribute):
        return []
    owner = spell(func.value)
    method = func.attr.value
    if owner is None:
        return []
    env, _, space = owner.rpartition(".")
    if method == "seed" and owner in played:
        env, arg = owner, argument(call.node, "seed", 0)
    elif method == "seed" and space in SPACES and env in played:
        arg = argument(call.node, "seed", 0)
    elif method == "reset" and owner in played:
        env, arg = owner, next((a for a in call.node.args if a.keyword is not None and a.keyword.value == "seed"), None)
    else:
        return []
    if arg is None or (isinstance(arg.value, cst.Name) and arg.value.value == "None"):
        return []
    per_episode = around.node in call.place.loops or call.place.scope in callees
    return [EnvSeed(call=call, seed=arg, env=env, per_episode=per_episode, vector=_is_vector(index, env))]


def _is_vector(index: ScriptIndex, env: str) -> bool:
    return any(isinstance(b.value, cst.Call) and (index.qualify(b.value.func) or "") in VECTOR_MAKERS
               for b in index.bindings_of(env))


def column_stream(index: ScriptIndex, loop: Loop) -> ColumnStream | None:
    """The stream cut into columns whose rows the training loop reads: a name read in the loop (or
    passed in for one of its function's parameters) bound to a call of a column-cutting function."""
    around = outer_loop(index, loop)
    scope = loop.place.scope
    read = set(index.names_under(around.node))
    for name in sorted(read):
        if name in scope.params:
            read |= {spelled for spelled, _scope, _call in caller_arguments(index, scope, name)}
    for name in sorted(read):
        for binding in index.bindings_of(name):
            value = binding.value
            if isinstance(value, cst.Call) and _cuts_columns(index, value):
                columns = argument(value, "bsz", 1)
                if columns is not None:
                    return ColumnStream(binding=binding, call=value, columns=columns)
    return None


def _cuts_columns(index: ScriptIndex, call: cst.Call) -> bool:
    """A function of this file that reshapes its first argument into as many columns as its second
    (`data.view(bsz, -1).t()`): each column one stretch of the stream, each row one time step."""
    helper = index.functions.get(spell(call.func) or "")
    if helper is None or len(helper.params) < 2 or not isinstance(helper.node, cst.FunctionDef):
        return False
    columns = helper.params[1]
    shaped = transposed = False
    for node in descendants(helper.node):
        if isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute):
            name = node.func.attr.value
            first = node.args[0].value if node.args else None
            if name in ("view", "reshape") and isinstance(first, cst.Name) and first.value == columns:
                shaped = True
            transposed = transposed or name in ("t", "transpose")
    return shaped and transposed
