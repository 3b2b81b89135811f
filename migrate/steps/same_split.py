"""`random_split` splits the same way on every rank.

Without a generator, `torch.utils.data.random_split` draws from each process's own default random
state. Scripts that seed only later (or not at all) then split differently on every rank, and the
distributed sampler shards different lists: samples are skipped or seen twice, and one rank's
validation samples are another's training samples. A seeded generator makes the split one.
"""

from __future__ import annotations

from functools import partial

from migrate.analysis.index import CallSite
from migrate.analysis.syntax import argument
from migrate.steps.base import Context, expression, with_keyword

RANDOM_SPLIT = ("torch.utils.data.random_split", "torch.utils.data.dataset.random_split")
SPLIT_SEED = 0


SEEDS = ("torch.manual_seed", "torch.random.manual_seed")


def same_split(ctx: Context) -> None:
    seeds = ctx.index.calls_named(*SEEDS)
    for call in ctx.index.calls_named(*RANDOM_SPLIT):
        if argument(call.node, "generator", 2) is not None or _seeded_before(ctx, call, seeds):
            continue
        generator = expression(f"{ctx.torch}.Generator().manual_seed({SPLIT_SEED})")
        ctx.plan.replace(call.node, partial(with_keyword, keyword="generator", value=generator))
        ctx.report("MIG004", f"random_split gets a seeded generator (seed {SPLIT_SEED}) so that every rank splits "
                   "the data the same way; the split differs from the original's unseeded one", call.node)


def _seeded_before(ctx: Context, split: CallSite, seeds: list[CallSite]) -> bool:
    """A `torch.manual_seed(...)` earlier in the split's own scope, or at module level for a split
    in a function (module-level code runs first), makes every rank draw the same split already."""
    line = ctx.position(split.node)[0]
    in_function = not split.place.scope.is_module
    return any((in_function and seed.place.scope.is_module)
               or (seed.place.scope is split.place.scope and ctx.position(seed.node)[0] < line) for seed in seeds)
