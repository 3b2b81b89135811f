"""Batches drawn without a DataLoader, from a seeded global generator in the training loop
(`ix = torch.randint(len(data) - block, (batch_size,))` after `torch.manual_seed(1337)`): every
rank would draw the same batches. As the frameworks' own examples do, each seeding of the script
is repeated with a per-rank offset (`torch.manual_seed(1337 + rank)`, `np.random.seed(...)`,
`random.seed(...)`, or the script's own `set_seed(...)` helper) right before the training loop:
after the weights are made equal on every rank, so each rank then draws its own batches. Each
rank keeps its batch, so the global batch grows with the ranks, as with a DistributedSampler.

A generator the script never seeds already differs per process (torch, numpy and `random` seed
themselves from the OS): nothing is changed, and the note says so. Not reseeded, and reported as
MIG101 with the reason: a random number of backward passes (ranks would then step apart and hang),
weights drawn again inside the loop, a model wrapped after the loop starts, a seed set inside the
loop, or a seed the loop's function cannot read and no caller of it that can.

A training loop that plays a seeded environment, or reads rows of one stream cut into columns
(`batchify(data, bsz)`), is given per-rank data by steps.per_rank_sources, as is a DataLoader's
sampler drawing with replacement from a seeded generator (per_rank_sampler, asked by
steps.distributed_sampler).
"""

from __future__ import annotations

import libcst as cst

from migrate.analysis.divergence import per_rank_control, reinitialized_after_wrap
from migrate.analysis.index import CallSite, Loop, Scope
from migrate.analysis.loaders import SeedSource, loader_spelling, random_draws, seed_sources
from migrate.analysis.models import aliases, is_after
from migrate.analysis.syntax import contains
from migrate.analysis.training import callers_of
from migrate.steps.base import Context, statements
from migrate.steps.per_rank_sources import per_rank_columns, per_rank_environments
from migrate.target_options import keeps_global_batch

# the finding for "reseeded per rank" (a note); a code of its own is proposed (see the report)
RESEEDED = "MIG008"
SIMPLE = (cst.Name, cst.Attribute, cst.Integer, cst.Call, cst.Subscript)


def per_rank_seed(ctx: Context) -> bool:
    """Reseed per rank where the step loop draws its batches from a seeded global generator, plays an
    environment or reads a stream cut into columns (steps.per_rank_sources). True when it does any of
    these (handled here: reseeded, already different, or MIG101 saying why not); False when it does
    none (the caller reports MIG101 as before)."""
    loop = _batch_loop(ctx)
    if loop is None:
        return False
    sourced = per_rank_environments(ctx, loop) | per_rank_columns(ctx, loop)
    draws = random_draws(ctx.index, loop)
    if not draws:
        return sourced
    seeds = [s for s in seed_sources(ctx.index) if s.generators & draws.keys()]
    first = min(draws.values(), key=ctx.index.call_position)
    drawn = f"`{ctx.code(first.node.func)}(...)` (line {ctx.position(first.node)[0]})"
    if not seeds:
        ctx.report(RESEEDED, f"the training loop draws its batches with {drawn} from a global generator this script never "
                   "seeds: each process seeds it from the OS, so every rank already draws its own batches; nothing "
                   "was changed", loop.node)
        return True
    anchor, reason = _anchor(ctx, loop, seeds)
    if anchor is None:
        ctx.report("MIG101", f"the training loop draws its batches with {drawn} from the generator seeded at line "
                   f"{ctx.position(seeds[0].call.node)[0]}, so every rank draws the same batches; not reseeded per rank: "
                   f"{reason}; reseed with the seed plus the rank yourself after the model is wrapped", loop.node)
        return True
    _reseed(ctx, anchor, _last_per_generator(seeds, anchor, ctx), drawn)
    return True


def _batch_loop(ctx: Context) -> Loop | None:
    """The training loop, when it iterates no data of its own (`for it in range(n)`, `while True`)."""
    sites = ctx.sites
    index = ctx.index
    if sites.training_loader_names:
        return None
    if sites.step_loops:
        loop = sites.step_loops[0]
        return loop if loader_spelling(index, loop) is None else None
    backward = sites.backward_calls[0] if sites.backward_calls else None
    return index.loop_of(backward.place.loops[-1]) if backward is not None and backward.place.loops else None


def _anchor(ctx: Context, loop: Loop, seeds: list[SeedSource]) -> tuple[cst.BaseStatement | None, str]:
    """The statement the reseed goes before (the outermost one around the training loop, in the
    scope that can read the seed), or None and why not."""
    why = _divergence(ctx)
    if why:
        return None, why
    scope = seeds[-1].call.place.scope
    if scope is loop.place.scope or scope.is_module:
        anchor = _outermost_in(ctx, loop.place.stmt, loop.place.scope)
    else:
        call = next((c for c in callers_of(ctx.index, loop.place.scope) if c.place.scope is scope), None)
        if call is None:
            return None, (f"the seed is set in `{scope.name}()`, which the training loop's function "
                          f"`{loop.place.scope.name}()` cannot read and does not call it")
        anchor = _outermost_in(ctx, call.place.stmt, scope)
    inside = next((s for s in seeds if contains(anchor, lambda n: n is s.call.node)), None)
    if inside is not None:
        return None, f"the generator is seeded again inside the training loop (line {ctx.position(inside.call.node)[0]})"
    late = _wrapped_late(ctx, anchor)
    if late:
        return None, late
    return anchor, ""


def _divergence(ctx: Context) -> str:
    """Why per-rank draws would make the ranks diverge: a random number of backward passes, weights
    drawn again after the wrap (both reported by rank_divergence too)."""
    for divergence in per_rank_control(ctx.sites):
        if divergence.code == "MIG122":
            return (f"the number of backward passes is drawn at random (line {ctx.position(divergence.node)[0]}): "
                    "ranks drawing differently would step apart and hang")
    wrapper = ctx.wrapper
    sharded = ctx.distributed.module == "torch.distributed" and wrapper is not None and not wrapper.through_module
    again = reinitialized_after_wrap(ctx.sites, aliases, is_after, sharded)
    if again:
        return f"weights are drawn again after the wrap (line {ctx.position(again[0].node)[0]}): they must stay equal on every rank"
    return ""


def _outermost_in(ctx: Context, stmt: cst.BaseStatement, scope: Scope) -> cst.BaseStatement:
    """The outermost statement of `scope` around `stmt` (itself when it is one of the scope's own)."""
    chain = [s for s in ctx.index.enclosing_statements(stmt) if ctx.index.scope_of.get(s) is scope]
    return chain[-1] if chain else stmt


def _wrapped_late(ctx: Context, anchor: cst.BaseStatement) -> str:
    """A model wrapped (its weights made equal) inside or after the anchor: the reseed would come
    before the weights are equal."""
    order = ctx.index.statement_order()
    for site in ctx.sites.models:
        where = site.wrap_after or site.wrap_before
        if where is None:
            continue
        if contains(anchor, lambda n: n is where) or (
                ctx.index.scope_of.get(where) is ctx.index.scope_of.get(anchor) and order.get(where, -1) > order[anchor]):
            return (f"`{site.spelling}` is made (and its weights made equal) at line {ctx.position(where)[0]}, after the "
                    "training loop starts")
    return ""


def _last_per_generator(seeds: list[SeedSource], anchor: cst.BaseStatement, ctx: Context) -> list[CallSite]:
    """The seedings in force when the loop starts: the last one of each generator, in source order."""
    order = ctx.index.statement_order()
    before = [s for s in seeds if s.call.place.scope is not ctx.index.scope_of.get(anchor)
              or order[s.call.place.stmt] < order[anchor]]
    last: dict[str, SeedSource] = {}
    for source in before or seeds:
        for kind in source.generators:
            last[kind] = source
    unique = {id(s.call): s.call for s in last.values()}
    return sorted(unique.values(), key=ctx.index.call_position)


def _reseed(ctx: Context, anchor: cst.BaseStatement, calls: list[CallSite], drawn: str) -> None:
    rank = ctx.rank()
    lines = [f"{ctx.code(c.node.func)}({_offset(ctx, c.node.args[0].value, rank)})\n" for c in calls]
    comment = "# each rank draws its own batches from here on: the seed plus the rank (the weights are already equal)\n"
    ctx.plan.insert_before(anchor, statements(comment + "".join(lines)))
    message = (f"the training loop draws its batches with {drawn}: reseeded with the seed plus the rank before the loop "
               f"(line {ctx.position(anchor)[0]}), after the weights are made equal, so each rank draws its own batches "
               "and the global batch grows with the ranks, as with a DistributedSampler")
    if keeps_global_batch(ctx.options):
        message += f"; --keep-global-batch: the size of each draw is not divided: divide the batch size by {ctx.world_size()} yourself"
    ctx.report(RESEEDED, message, anchor)


def _offset(ctx: Context, seed: cst.BaseExpression, rank: str) -> str:
    code = ctx.code(seed)
    return f"{code if isinstance(seed, SIMPLE) else f'({code})'} + {rank}"
