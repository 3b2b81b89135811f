"""Each rank its own data where no DistributedSampler can shard it (MIG008, a note, says what was done):

- a DataLoader's own sampler drawing with replacement from a seeded generator (`RandomSampler(ds,
  replacement=True, num_samples=10**9, generator=g)` after `g.manual_seed(0)`): the generator is
  seeded with the seed plus the rank where it is seeded (a generator of the sampler's own: the
  weights never read it), so each rank draws its own indices;
- an environment the training loop plays, seeded with a fixed seed (`env.seed(s)`, `env.reset(seed=s)`,
  `env.action_space.seed(s)`): seeded with `s + rank` where it is seeded (`s + rank * envs.num_envs`
  for a vector environment); a seeding that runs once per episode gets `s * world + rank`, so no
  rank replays an episode another rank plays. An environment this script never seeds is seeded
  from the OS in each process: nothing is changed;
- one token stream cut into columns (`train_data = batchify(corpus, bsz)`): cut into `bsz * world`
  columns, of which each rank keeps every world-th from its rank on
  (`batchify(corpus, bsz * world)[:, rank::world].contiguous()`): every rank keeps `bsz` columns and
  the same number of rows, so the ranks run the same number of steps.

In each case every rank keeps its batch, so the global batch grows with the ranks, as with a
DistributedSampler; the learning rate is scaled only under --scale-lr (steps.scale_lr). Seeds are
read with the rank the launcher sets where the seeding runs before setup.
"""

from __future__ import annotations

import os

import libcst as cst

from migrate.analysis.entry import runs_in_process_group
from migrate.analysis.index import CallSite, Loop, descendants, spell
from migrate.analysis.models import foreign_method
from migrate.analysis.loaders import seeded_sampler
from migrate.analysis.per_rank_sources import EnvSeed, column_stream, environments
from migrate.analysis.sites import LoaderSite
from migrate.steps.base import Context, expression
from migrate.target_options import keeps_global_batch

RESEEDED = "MIG008"
SIMPLE = (cst.Name, cst.Attribute, cst.Integer, cst.Call, cst.Subscript)
GROWS = "each rank keeps its batch and the global batch grows with the ranks, as with a DistributedSampler"


def per_rank_sampler(ctx: Context, site: LoaderSite) -> bool:
    """The loader's sampler draws with replacement from a seeded generator: seeded per rank (True);
    False for any other sampler (the caller reports it)."""
    found = seeded_sampler(ctx.index, site.call)
    if found is None:
        return False
    rank = _rank_at(ctx, found.seeding.place.stmt)
    ctx.plan.replace_with(found.seed, expression(_plus(ctx, found.seed, rank)))
    line = ctx.position(found.seeding.node)[0]
    ctx.report(RESEEDED, f"this DataLoader's sampler `{ctx.code(found.sampler.func)}(...)` draws with replacement from "
               f"the generator seeded at line {line}, which a DistributedSampler cannot replace: the generator is seeded "
               f"with the seed plus the rank, so each rank draws its own indices; {GROWS}" + _keep_note(ctx),
               site.call.node)
    return True


def per_rank_environments(ctx: Context, loop: Loop) -> bool:
    """Seed per rank each environment the training loop plays; True when it plays one."""
    found = environments(ctx.index, loop)
    if not found.played:
        return False
    if not found.seeds:
        seeded = next(((name, line) for name, call in found.played.items()
                       if (line := _seeded_by_its_class(ctx, name, call)) is not None), None)
        if seeded is not None:
            name, line = seeded
            ctx.report("MIG101", f"the training loop plays `{name}`, whose class seeds it itself (`{line}`), with the same "
                       "value on every rank unless that value holds the rank: where nothing else the episodes draw "
                       "differs, every rank plays the same episodes; seed it there with the seed plus the rank",
                       loop.node)
            return True
        names = ", ".join(f"`{name}`" for name in found.played)
        ctx.report(RESEEDED, f"the training loop plays {names}, which this script never seeds: each process seeds its "
                   "environment from the OS, so every rank already plays its own episodes; nothing was changed", loop.node)
        return True
    for seed in found.seeds:
        _seed_environment(ctx, seed)
    return True


def _seeded_by_its_class(ctx: Context, name: str, played: CallSite) -> str | None:
    """The seeding line in the `__init__` of the class `name` is built from (`env = Env(args)`, its
    class seeding its emulator: `self.ale.setInt('random_seed', args.seed)`), in this program or in
    a module of the project; None when there is none."""
    index = ctx.index
    binding = next((b for b in index.bindings_of_in(name, played.place.scope) if isinstance(b.value, cst.Call)), None)
    if binding is None:
        return None
    assert isinstance(binding.value, cst.Call)
    cls = spell(binding.value.func)
    if cls is None:
        return None
    init = index.functions.get(f"{cls}.__init__")
    body: cst.CSTNode | None = init.node if init is not None else None
    if body is None and index.qualify(binding.value.func):
        body = foreign_method(os.path.dirname(ctx.path), index.qualify(binding.value.func) or "", "__init__", ctx.read_module)
    if body is None:
        return None
    for node in descendants(body):
        if isinstance(node, cst.Call) and "seed" in cst.Module([]).code_for_node(node).lower():
            return cst.Module([]).code_for_node(node)
    return None


def _seed_environment(ctx: Context, seed: EnvSeed) -> None:
    value = seed.seed.value
    rank = _rank_at(ctx, seed.call.place.stmt)
    count = f"{seed.env}.num_envs"
    if not seed.per_episode:
        new = _plus(ctx, value, f"{rank} * {count}" if seed.vector else rank)
        how = "the seed plus the rank" + (f" times `{count}` (each sub-environment takes the next seed)" if seed.vector else "")
    else:
        world = _world_at(ctx, seed.call.place.stmt)
        if world is None:
            ctx.report("MIG101", f"`{seed.env}` is seeded once per episode before the process group starts, so not per rank: "
                       "every rank plays the same episodes; seed it with the seed times the world size plus the rank",
                       seed.call.node)
            return
        new = f"{_grouped(ctx, value)} * {world} + {rank}"
        new = f"({new}) * {count}" if seed.vector else new
        how = "the seed times the world size plus the rank (the seed changes per episode: no rank replays another's)"
    ctx.plan.replace_with(value, expression(new))
    ctx.report(RESEEDED, f"the training loop plays `{seed.env}`, seeded here alike on every rank: seeded with {how}, so each "
               f"rank plays its own episodes (the weights do not read this seed); {GROWS}" + _keep_note(ctx),
               seed.call.node)


def per_rank_columns(ctx: Context, loop: Loop) -> bool:
    """Give each rank its own columns of a stream cut by `batchify(data, bsz)`; True when there is one."""
    found = column_stream(ctx.index, loop)
    if found is None:
        return False
    stmt = found.binding.place.stmt
    world = _world_at(ctx, stmt)
    if world is None:
        ctx.report("MIG101", f"the training loop reads the columns `{found.binding.target}` cut by "
                   f"`{ctx.code(found.call.func)}(...)`, which runs before the process group starts: every rank reads all "
                   "of them; cut the stream into batch size times world size columns and keep every world-th one from "
                   "the rank on, after setup", found.call)
        return True
    rank = ctx.rank()
    columns = found.columns.value
    call = found.call

    def cut(updated: cst.CSTNode) -> cst.CSTNode:
        assert isinstance(updated, cst.Call)
        args = [a.with_changes(value=expression(f"{_grouped(ctx, columns)} * {world}")) if o is found.columns else a
                for a, o in zip(updated.args, call.args)]
        code = cst.Module([]).code_for_node(updated.with_changes(args=args))
        return expression(f"{code}[:, {rank}::{world}].contiguous()")

    ctx.plan.replace(call, cut)
    ctx.report(RESEEDED, f"the training loop reads rows of `{found.binding.target}`, one stream cut into "
               f"`{ctx.code(columns)}` columns: it is cut into that many columns per rank and each rank keeps every "
               f"world-th column from its rank on, so each rank reads its own stretches of the stream and all run the "
               f"same number of steps; {GROWS}" + _keep_note(ctx), call)
    return True


def _rank_at(ctx: Context, stmt: cst.BaseStatement) -> str:
    """The rank as code at `stmt`: the runtime's, or the launcher's variable before setup."""
    if runs_in_process_group(ctx.index, ctx.sites.entry, stmt):
        return ctx.rank()
    return f"int({ctx.launcher_variable(ctx.distributed.rank_variable)})"


def _world_at(ctx: Context, stmt: cst.BaseStatement) -> str | None:
    return ctx.world_size() if runs_in_process_group(ctx.index, ctx.sites.entry, stmt) else None


def _grouped(ctx: Context, value: cst.BaseExpression) -> str:
    code = ctx.code(value)
    return code if isinstance(value, SIMPLE) else f"({code})"


def _plus(ctx: Context, value: cst.BaseExpression, offset: str) -> str:
    return f"{_grouped(ctx, value)} + {offset}"


def _keep_note(ctx: Context) -> str:
    if not keeps_global_batch(ctx.options):
        return ""
    return f"; --keep-global-batch: the batch is not divided: divide the batch size by {ctx.world_size()} yourself"
