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
            f"e.g. indices[{ctx.dist}.get_rank()::{ctx.dist}.get_world_size()]",
            node,
        )
        return
    for site in sites.loaders:
        _shard(ctx, site)
    _set_epochs(ctx)


def _shard(ctx: Context, site: LoaderSite) -> None:
    call = site.call.node
    if argument(call, "sampler", 3) is not None or argument(call, "batch_sampler", 4) is not None:
        ctx.report("MIG102", "this DataLoader has its own sampler, kept as is: every rank will read all of it; "
                   "shard it by rank (e.g. wrap its indices in a DistributedSampler)", call)
        return
    dataset = argument(call, "dataset", 0)
    if dataset is None:
        return
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


def _bind_dataset(ctx: Context, site: LoaderSite, dataset: cst.Arg) -> str:
    """`DataLoader(TensorDataset(x, y), ...)`: the dataset gets a name, so the sampler and the
    loader share one object instead of building it twice."""
    taken = {b.target for b in ctx.index.bindings}
    name = next((n for n in ("train_dataset", "dataset", "train_set") if n not in taken), "sharded_dataset")
    stmt = site.call.place.stmt
    ctx.plan.insert_above(stmt, statement(f"{name} = {ctx.code(dataset.value)}\n"))
    ctx.plan.replace(dataset, lambda updated: updated.with_changes(value=cst.Name(name)))
    return name


def _set_epochs(ctx: Context) -> None:
    sites = ctx.sites
    if not sites.epoch_loops:
        ctx.report("MIG103", "no `for epoch in ...` loop found around the training loader; call "
                   "loader.sampler.set_epoch(epoch) at the start of each epoch, or every epoch reuses one shuffle",
                   sites.step_loops[0].node if sites.step_loops else None)
    for epoch in sites.epoch_loops:
        loop = epoch.loop.node
        assert isinstance(loop, cst.For) and isinstance(loop.body, cst.IndentedBlock)
        first = loop.body.body[0]
        ctx.plan.insert_before(first, [statement(f"{epoch.loader}.sampler.set_epoch({epoch.loop.target})\n")])
