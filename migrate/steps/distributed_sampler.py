"""Each training DataLoader draws its batches through a DistributedSampler, so every rank sees
its own shard; `shuffle=` moves into the sampler, and `set_epoch(epoch)` runs at the top of
every epoch so the shuffle differs per epoch yet agrees across ranks.

Evaluation loaders are left alone: every rank evaluates the whole set, so the metric printed
on rank 0 is the true one and no rank waits on another.
"""

from __future__ import annotations

import libcst as cst

from migrate.analysis.index import spell
from migrate.analysis.sites import LoaderSite
from migrate.analysis.training import argument
from migrate.steps.base import Context, expression, statement, with_keyword


def distributed_sampler(ctx: Context) -> None:
    sites = ctx.sites
    if not sites.loaders:
        node = sites.step_loops[0].node if sites.step_loops else sites.backward_calls[0].node
        ctx.report(
            "MIG101",
            "the training loop is not fed by a DataLoader; give each rank its own shard by hand, "
            "e.g. indices[dist.get_rank()::dist.get_world_size()]",
            node,
        )
        return
    sharded = {site.spelling for site in sites.loaders if _shard(ctx, site)}
    if sharded:
        _set_epochs(ctx, all_sharded=len(sharded) == len(sites.loaders), sharded=sharded)


def _shard(ctx: Context, site: LoaderSite) -> bool:
    """Give the loader a DistributedSampler; False when it cannot take one (reported)."""
    call = site.call.node
    if argument(call, "sampler", 3) is not None or argument(call, "batch_sampler", 4) is not None:
        ctx.report("MIG102", "this DataLoader has its own sampler, kept as is: every rank will read all of it; "
                   "shard it by rank (e.g. wrap its indices in a DistributedSampler)", call)
        return False
    dataset = argument(call, "dataset", 0)
    if dataset is None:
        return False
    if _is_iterable_dataset(ctx, dataset.value):
        ctx.report("MIG111", "this DataLoader reads an IterableDataset, which takes no sampler: make its __iter__ "
                   "yield only every torch.distributed.get_world_size()-th item, starting at torch.distributed.get_rank()", call)
        return False
    dataset_code = ctx.code(dataset.value)
    if spell(dataset.value) is None:
        dataset_code = _bind_dataset(ctx, site, dataset)
    shuffle = argument(call, "shuffle", 2)
    shuffle_code = f", shuffle={ctx.code(shuffle.value)}" if shuffle is not None and shuffle.keyword else ""
    sampler_class = ctx.imported("torch.utils.data.distributed", "DistributedSampler")
    new_sampler = expression(f"{sampler_class}({dataset_code}{shuffle_code})")
    world = f"{ctx.dist}.get_world_size()"

    def rewrite(updated: cst.CSTNode) -> cst.CSTNode:
        assert isinstance(updated, cst.Call)
        args = []
        for arg in updated.args:
            keyword = arg.keyword.value if arg.keyword else None
            if keyword == "shuffle":
                args.append(arg.with_changes(keyword=cst.Name("sampler"), value=new_sampler))
                continue
            if keyword == "batch_size" and ctx.options.keep_global_batch:
                arg = arg.with_changes(value=expression(f"{ctx.code(arg.value)} // {world}"))
            args.append(arg)
        rewritten = updated.with_changes(args=args)
        return rewritten if shuffle is not None else with_keyword(rewritten, "sampler", new_sampler)

    ctx.plan.replace(call, rewrite)
    return True


def _is_iterable_dataset(ctx: Context, value: cst.BaseExpression) -> bool:
    """Built by a class of this file that derives from IterableDataset (directly or via a name)."""
    index = ctx.index
    if spell(value) is not None:
        bound = [b.value for b in index.bindings if b.target == spell(value)]
        value = bound[-1] if bound and bound[-1] is not None else value
    if not isinstance(value, cst.Call):
        return False
    cls = index.classes.get(spell(value.func) or "")
    return cls is not None and any(
        (index.qualify(base.value) or "").endswith("IterableDataset") for base in cls.bases
    )


def _bind_dataset(ctx: Context, site: LoaderSite, dataset: cst.Arg) -> str:
    """`DataLoader(TensorDataset(x, y), ...)`: the dataset gets a name, so the sampler and the
    loader share one object instead of building it twice."""
    taken = {b.target for b in ctx.index.bindings}
    name = next((n for n in ("train_dataset", "dataset", "train_set") if n not in taken), "sharded_dataset")
    stmt = site.call.place.stmt
    ctx.plan.insert_above(stmt, statement(f"{name} = {ctx.code(dataset.value)}\n"))
    ctx.plan.replace(dataset, lambda updated: updated.with_changes(value=cst.Name(name)))
    return name


def _set_epochs(ctx: Context, all_sharded: bool, sharded: set[str | None]) -> None:
    """`loader.sampler.set_epoch(epoch)` first thing in each epoch, for sharded loaders only."""
    sites = ctx.sites
    if not sites.epoch_loops:
        ctx.report("MIG103", "no `for epoch in ...` loop found around the training loader; call "
                   "loader.sampler.set_epoch(epoch) at the start of each epoch, or every epoch reuses one shuffle",
                   sites.step_loops[0].node if sites.step_loops else None)
    for epoch in sites.epoch_loops:
        if not all_sharded and epoch.loader not in sharded:
            continue
        loop = epoch.loop.node
        assert isinstance(loop, cst.For) and isinstance(loop.body, cst.IndentedBlock)
        first = loop.body.body[0]
        ctx.plan.insert_before(first, [statement(f"{epoch.loader}.sampler.set_epoch({epoch.loop.target})\n")])
