"""Each training DataLoader draws its batches through a DistributedSampler, so every rank sees
its own shard; `shuffle=` moves into the sampler (a loader that did not shuffle gets
`shuffle=False`: DistributedSampler shuffles by default), and `set_epoch(epoch)` runs at the top of
every epoch so the shuffle differs per epoch yet agrees across ranks (with no `for epoch in ...`, a
counter raised by one first in each pass of the loop around the step loop, or around the call that
runs it, is the epoch: `while True: cur_epochs += 1` gets `set_epoch(cur_epochs)` right after it;
MIG103 otherwise, saying what the script has instead). A `shuffle` that reaches the
loader through `**kwargs` is taken out of the dict into the sampler (DataLoader refuses both).

Evaluation loaders are left alone: every rank evaluates the whole set, so the metric printed
on rank 0 is the true one and no rank waits on another. Iterable datasets take no sampler, and a
loader the step loop cannot be traced to is never sharded in its place: both are reported.
Without a training DataLoader, batches drawn from a seeded global generator in the training loop
are reseeded per rank (steps.per_rank_seed); anything else is MIG101.
"""

from __future__ import annotations

from dataclasses import dataclass

import libcst as cst

from migrate.analysis.datasets import streaming_origin
from migrate.analysis.index import CallSite, Loop, Scope, descendants, spell
from migrate.analysis.loaders import (
    EVALUATION_WORDS,
    data_loader_calls,
    loader_names,
    loader_spelling,
    untraced_source,
)
from migrate.analysis.sites import LoaderSite
from migrate.analysis.syntax import argument, contains
from migrate.analysis.training import callers_of
from migrate.steps.base import Context, expression, statement, with_keyword
from migrate.steps.per_rank_seed import per_rank_seed
from migrate.steps.per_rank_sources import per_rank_sampler
from migrate.target_options import keeps_global_batch

SHARD_BY_HAND = "give each rank its own shard by hand, e.g. indices[{rank}::{world}]"


def shard_by_hand(ctx: Context) -> str:
    runtime = ctx.distributed
    return SHARD_BY_HAND.format(rank=runtime.said(runtime.rank), world=runtime.said(runtime.world_size))


@dataclass
class DataNotSharded:
    """Recorded when the conversion gave no training loader a sampler and no rank draws its own
    samples (MIG101, MIG102, MIG111): every rank reads every batch, so an epoch's figures are the
    original's on every rank, and reducing them must average, not sum (steps.epoch_figures)."""


UNSHARDED_CODES = ("MIG101", "MIG102", "MIG111")


def distributed_sampler(ctx: Context) -> None:
    sites = ctx.sites
    if not sites.loaders:
        if not per_rank_seed(ctx):  # batches drawn from a seeded generator: reseeded per rank
            _report_unsharded(ctx)
            ctx.record(DataNotSharded())
        return
    shuffles: dict[str | None, bool | None] = {}
    left_whole = 0
    for site in sites.loaders:
        before = len(ctx.findings)
        shuffles[site.spelling] = _shard(ctx, site)
        left_whole += any(f.code in UNSHARDED_CODES for f in ctx.findings[before:])
    if left_whole == len(sites.loaders):
        ctx.record(DataNotSharded())
    reshuffled = {name for name, shuffle in shuffles.items() if shuffle}
    if reshuffled:  # a sampler with shuffle=False draws the same order every epoch: no set_epoch
        _set_epochs(ctx, all_sharded=len(reshuffled) == len(sites.loaders), sharded=reshuffled)


def _report_unsharded(ctx: Context) -> None:
    """MIG101, saying what feeds the training loop instead of a DataLoader of this file."""
    sites = ctx.sites
    index = ctx.index
    loop = sites.step_loops[0] if sites.step_loops else None
    node = loop.node if loop is not None else sites.backward_calls[0].node
    names = set(sites.training_loader_names)
    source = untraced_source(index, names)
    others = [c for c in data_loader_calls(index)]
    made = source.value if source is not None and source.value is not None else source.node.value if source else None
    if source is not None and isinstance(made, cst.Call):
        func = ctx.code(made.func)
        where = "a function of this file" if (spell(made.func) or "") in index.functions else "another module"
        line, _ = ctx.position(source.node)
        message = (
            f"the training loop iterates `{source.target}`, made by `{func}(...)` (line {line}) in {where}, not by a "
            "DataLoader this file builds, so no DistributedSampler was added: shard it by rank where it is built "
            "(a DistributedSampler in its DataLoader, then sampler.set_epoch(epoch) each epoch)"
        )
    elif loop is None:
        message = f"no `for` loop over batches was found around backward; the training data is not sharded: {shard_by_hand(ctx)}"
    else:
        iterated = loader_spelling(index, loop)
        header = f"for ... in {ctx.code(loop.node.iter)}" if isinstance(loop.node, cst.For) else f"while {ctx.code(loop.node.test)}"
        seen = f"iterates `{iterated}`" if iterated else f"runs `{header}`"
        unbound = sorted(n for n in names - {iterated} if not index.bindings_of(n))
        if iterated and unbound:
            seen += f" (passed in as `{unbound[0]}`, which this file does not build)"
        message = f"the training loop {seen} and draws its batches without a DataLoader this tool can trace: {shard_by_hand(ctx)}"
    if others:
        listed = ", ".join(f"`{_loader_name(ctx, c)}` (line {ctx.position(c.node)[0]})" for c in others[:3])
        message += f"; the DataLoader(s) {listed} do not feed backward and are left whole"
    ctx.report("MIG101", message, node)


def _loader_name(ctx: Context, call: CallSite) -> str:
    names = ctx.index.targets_of(call.node)
    return names[0] if names else f"{ctx.code(call.node.func)}(...)"


def _shard(ctx: Context, site: LoaderSite) -> bool | None:
    """Give the loader a DistributedSampler: whether it may shuffle (False: it keeps the order);
    None when it cannot take one (reported)."""
    call = site.call.node
    if argument(call, "sampler", 3) is not None or argument(call, "batch_sampler", 4) is not None:
        if per_rank_sampler(ctx, site):  # draws with replacement from a seeded generator: seeded per rank
            return None
        ctx.report("MIG102", "this DataLoader has its own sampler, kept as is: every rank will read all of it; "
                   "shard it by rank (e.g. wrap its indices in a DistributedSampler)", call)
        return None
    dataset = argument(call, "dataset", 0)
    if dataset is None:
        unpacked = _unpacked_kwargs(call)
        through = f"through `**{ctx.code(unpacked)}`" if unpacked is not None else "in a way this tool cannot see"
        ctx.report("MIG101", f"this DataLoader gets its dataset {through}, so no DistributedSampler was added: every "
                   "rank would read all of it; pass sampler=DistributedSampler(<the dataset>, shuffle=...) instead of "
                   "shuffle", call)
        return None
    streaming = streaming_origin(ctx.index, dataset.value, site.call.place.scope, site.call.place.stmt)
    if streaming is not None:
        line, _ = ctx.position(streaming.origin)
        ctx.report("MIG111", f"this DataLoader reads `{ctx.code(dataset.value)}`, built by `{ctx.code(streaming.origin.func)}"
                   f"(...)` (line {line}), and {streaming.what}: it takes no sampler, so none was added and every rank "
                   f"reads all of it; {streaming.hint}", call)
        return None
    unpacked = _unpacked_kwargs(call)
    known = _dict_keys(ctx, unpacked, site.call.place.scope) if unpacked is not None else set()
    if unpacked is not None and known is not None and known & {"sampler", "batch_sampler"}:
        ctx.report("MIG102", f"this DataLoader gets a sampler through `**{ctx.code(unpacked)}`, kept as is: every rank "
                   "will read all of it; shard it by rank", call)
        return None
    dataset_code = ctx.code(dataset.value)
    if spell(dataset.value) is None:
        dataset_code = _bind_dataset(ctx, site, dataset)
    shuffle = argument(call, "shuffle", 2)
    if shuffle is not None:
        shuffle_code = ctx.code(shuffle.value)
    elif unpacked is not None and (known is None or "shuffle" in known):
        shuffle_code = _shuffle_from_kwargs(ctx, site, unpacked)
    else:
        shuffle_code = "False"
    sampler_class = ctx.imported("torch.utils.data.distributed", "DistributedSampler")
    ranks = ctx.spell(ctx.distributed.sampler_arguments)  # Horovod: num_replicas and rank, which torch cannot know
    new_sampler = expression(f"{sampler_class}({dataset_code}, {ranks + ', ' if ranks else ''}shuffle={shuffle_code})")
    world = ctx.world_size()

    def rewrite(updated: cst.CSTNode) -> cst.CSTNode:
        assert isinstance(updated, cst.Call)
        args: list[cst.Arg] = []
        placed = False
        for position, arg in enumerate(updated.args):
            keyword = arg.keyword.value if arg.keyword else None
            if shuffle is not None and call.args[position] is shuffle:
                if keyword == "shuffle":
                    args.append(arg.with_changes(keyword=cst.Name("sampler"), value=new_sampler))
                    placed = True
                continue  # a positional shuffle: the sampler goes in as a keyword below
            if arg.star == "**" and not placed:
                args.append(_sampler_arg(args, new_sampler))
                placed = True
            is_batch = keyword == "batch_size" or (keyword is None and not arg.star and position == 1)
            if is_batch and keeps_global_batch(ctx.options):
                arg = arg.with_changes(value=expression(_per_rank_batch(ctx.code(arg.value), arg.value, world)))
            args.append(arg)
        rewritten = updated.with_changes(args=args)
        return rewritten if placed else with_keyword(rewritten, "sampler", new_sampler)

    ctx.plan.replace(call, rewrite)
    _report_shared_builder(ctx, site)
    return shuffle_code != "False"


def _per_rank_batch(code: str, value: cst.BaseExpression, world: str) -> str:
    """`max(1, batch // world)`: a batch smaller than the world size keeps one sample per rank
    rather than flooring to 0 (DataLoader refuses 0); a compound expression is parenthesised."""
    simple = isinstance(value, (cst.Name, cst.Attribute, cst.Integer, cst.Call, cst.Subscript))
    return f"max(1, {code if simple else f'({code})'} // {world})"


def _report_shared_builder(ctx: Context, site: LoaderSite) -> None:
    """A helper that builds the training loader and an evaluation loader alike: the sampler added
    in it shards evaluation too."""
    names = loader_names(ctx.index, site.call)
    training = ctx.sites.training_loader_names
    evaluation = [n for n in names if n not in training and any(w in n.lower() for w in EVALUATION_WORDS)]
    if evaluation and not site.call.place.scope.is_module:
        ctx.report("MIG004", f"`{site.call.place.scope.name}()` builds `{evaluation[0]}` too: the DistributedSampler added "
                   "here shards that evaluation loader as well, so each rank evaluates only its part; give the helper a "
                   "flag if evaluation must see the whole set", site.call.node)


def _sampler_arg(before: list[cst.Arg], sampler: cst.BaseExpression) -> cst.Arg:
    """`sampler=...` placed before `**kwargs`, spaced like the call's other keywords."""
    tight = cst.AssignEqual(whitespace_before=cst.SimpleWhitespace(""), whitespace_after=cst.SimpleWhitespace(""))
    equal = next((a.equal for a in before if a.keyword is not None), tight)
    return cst.Arg(sampler, keyword=cst.Name("sampler"), equal=equal, comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" ")))


def _unpacked_kwargs(call: cst.Call) -> cst.BaseExpression | None:
    return next((a.value for a in call.args if a.star == "**"), None)


def _dict_keys(ctx: Context, value: cst.BaseExpression, scope: Scope) -> set[str] | None:
    """The keys a `**name` dict can hold, from its literal and the `update(...)` / `name[key] = ...`
    edits in the same function; None when that cannot be told (a parameter, a computed dict)."""
    name = spell(value)
    if name is None or name in scope.params:
        return None
    index = ctx.index
    bindings = index.bindings_of_in(name, scope)
    if not bindings:
        return None
    keys: set[str] = set()
    for binding in bindings:
        found = _literal_keys(ctx, binding.value, scope, depth=0)
        if found is None:
            return None
        keys |= found
    for call in index.calls_from(scope):
        func = call.node.func
        if isinstance(func, cst.Attribute) and spell(func.value) == name:
            if func.attr.value == "update":
                for arg in call.node.args:
                    found = _literal_keys(ctx, arg.value, scope, depth=0) if arg.keyword is None else {arg.keyword.value}
                    if found is None:
                        return None
                    keys |= found
            elif func.attr.value in ("setdefault",) and call.node.args:
                key = _string(call.node.args[0].value)
                if key is None:
                    return None
                keys.add(key)
    for node in _subscript_targets(scope.node, name):
        key = _string(node)
        if key is None:
            return None
        keys.add(key)
    return keys


def _literal_keys(ctx: Context, value: cst.BaseExpression | None, scope: Scope, depth: int) -> set[str] | None:
    if isinstance(value, cst.Dict):
        keys: set[str] = set()
        for element in value.elements:
            if not isinstance(element, cst.DictElement):
                inner = _literal_keys(ctx, element.value, scope, depth + 1) if depth < 3 else None
                if inner is None:
                    return None
                keys |= inner
                continue
            key = _string(element.key)
            if key is None:
                return None
            keys.add(key)
        return keys
    if isinstance(value, cst.Call) and spell(value.func) == "dict":
        if any(a.keyword is None for a in value.args):
            return None
        return {a.keyword.value for a in value.args if a.keyword is not None}
    name = spell(value) if value is not None else None
    if name is not None and depth < 3:
        bound = ctx.index.bindings_of_in(name, scope)
        if len(bound) == 1:
            return _literal_keys(ctx, bound[0].value, scope, depth + 1)
    return None


def _subscript_targets(node: cst.CSTNode, name: str) -> list[cst.BaseExpression]:
    """The keys of `name[key] = ...` assignments under `node`."""
    found: list[cst.BaseExpression] = []
    for n in descendants(node):
        if not isinstance(n, cst.Assign):
            continue
        for target in n.targets:
            t = target.target
            if isinstance(t, cst.Subscript) and spell(t.value) == name and len(t.slice) == 1:
                key = t.slice[0].slice
                if isinstance(key, cst.Index):
                    found.append(key.value)
    return found


def _string(node: cst.BaseExpression | None) -> str | None:
    if isinstance(node, cst.SimpleString) and isinstance(node.evaluated_value, str):
        return node.evaluated_value
    return None


def _shuffle_from_kwargs(ctx: Context, site: LoaderSite, unpacked: cst.BaseExpression) -> str:
    """`kwargs.pop("shuffle", False)`: taken out of the dict before `**kwargs` is unpacked, so
    DataLoader never sees both. When the dict is read again later, the dict passed on is a copy
    without the key instead, and the original is left as it was."""
    name = ctx.code(unpacked)
    if _read_after(ctx, site, name):
        ctx.plan.replace(
            next(a for a in site.call.node.args if a.value is unpacked),
            lambda updated: updated.with_changes(
                value=expression(f'{{key: value for key, value in {name}.items() if key != "shuffle"}}')
            ),
        )
        return f'{name}.get("shuffle", False)'
    return f'{name}.pop("shuffle", False)'


def _read_after(ctx: Context, site: LoaderSite, name: str) -> bool:
    """Whether `name` is read again after the DataLoader statement in the same function."""
    index = ctx.index
    order = index.statement_order()
    position = order[site.call.place.stmt]
    return any(
        order[other] > position and isinstance(other, cst.SimpleStatementLine)
        for other in index.readers_in(site.call.place.scope).get(name, ())
    ) or bool(site.call.place.loops)


def _named_in_place(arg: cst.CSTNode, name: str) -> cst.Arg:
    """`TensorDataset(x, y)` -> `(train_dataset := TensorDataset(x, y))`."""
    assert isinstance(arg, cst.Arg)
    named = cst.NamedExpr(target=cst.Name(name), value=arg.value, lpar=[cst.LeftParen()], rpar=[cst.RightParen()])
    return arg.with_changes(value=named)


def _first_on_its_line(stmt: cst.BaseStatement, node: cst.CSTNode) -> bool:
    """Whether `node` is in the first statement of a line of its own (not after `a = 1;`, not in
    the body of a one-line `for x in y: ...`)."""
    return isinstance(stmt, cst.SimpleStatementLine) and contains(stmt.body[0], lambda n: n is node)


def _bind_dataset(ctx: Context, site: LoaderSite, dataset: cst.Arg) -> str:
    """`DataLoader(TensorDataset(x, y), ...)`: the dataset gets a name, so the sampler and the
    loader share one object instead of building it twice."""
    name = next((n for n in ("train_dataset", "dataset", "train_set") if not ctx.index.bindings_of(n)), "sharded_dataset")
    stmt = site.call.place.stmt
    if not _first_on_its_line(stmt, site.call.node):
        # `x = f(); loader = DataLoader(TensorDataset(x))`, `for ...: loader = ...`: a line above
        # would run before what the dataset reads is bound; it is named where it is built instead
        ctx.plan.replace(dataset, lambda updated: _named_in_place(updated, name))
        return name
    hoisted = statement(f"{name} = {ctx.code(dataset.value)}\n")
    ctx.plan.insert_above(stmt, hoisted)
    ctx.hoisted_datasets.append(ctx.plan.before[stmt][-1])  # shared_files downloads ahead of it
    ctx.plan.replace(dataset, lambda updated: updated.with_changes(value=cst.Name(name)))
    return name


def _fresh_call(loop: cst.CSTNode) -> cst.Call | None:
    """The first `iter(x)` inside a loop: a new iterator of `x` made while the loop runs."""
    return next((node for node in descendants(loop) if isinstance(node, cst.Call) and isinstance(node.func, cst.Name)
                 and node.func.value == "iter" and len(node.args) == 1), None)


def _fresh_iterator(loop: cst.CSTNode) -> str | None:
    """`loader` when the loop draws from `iter(loader)` made inside it (`next(iter(loader))` per step)."""
    call = _fresh_call(loop)
    return spell(call.args[0].value) if call is not None else None


def _set_before_fresh_iterator(ctx: Context, step: Loop, all_sharded: bool, sharded: set[str | None]) -> bool:
    """`for epoch in range(n): data_iter = iter(loader)` then `next(data_iter)` in an inner loop: one
    new iterator per pass, made by a statement of the loop's own body, so `loader.sampler.set_epoch(epoch)`
    goes right above it."""
    call, fresh = _fresh_call(step.node), _fresh_iterator(step.node)
    if call is None or fresh is None or not isinstance(step.node, cst.For) or not step.target:
        return False
    if not all_sharded and fresh not in sharded:
        return False
    made = ctx.index.statement_holding(call)
    body = step.node.body
    iterators = [node for node in descendants(step.node) if isinstance(node, cst.Call) and spell(node.func) == "iter"]
    if made is None or not isinstance(body, cst.IndentedBlock) or made not in body.body or len(iterators) != 1:
        return False
    ctx.plan.insert_above(made, statement(f"{fresh}.sampler.set_epoch({step.target})\n"))
    return True


def _no_epoch_loop_message(ctx: Context, step: Loop | None) -> str:
    """MIG103 as seen: the loop around the training loop, and why set_epoch was not added to it."""
    advice = "call loader.sampler.set_epoch(epoch) at the start of each epoch, or every epoch reuses one shuffle"
    outer = ctx.index.enclosing_statements(step.place.stmt)[1:] if step is not None else []
    around = next((s for s in outer if isinstance(s, (cst.For, cst.While))), None)
    caller = None
    if step is not None and around is None:
        caller = next((c for c in callers_of(ctx.index, step.place.scope) if c.place.loops), None)
        if caller is not None:
            around = caller.place.loops[-1]
    fresh = _fresh_iterator(step.node) if step is not None else None
    fresh_call = _fresh_call(step.node) if step is not None else None
    if step is not None and fresh is not None and fresh_call is not None and isinstance(step.node, cst.For) and step.target:
        return (f"the training loop at line {ctx.position(step.node)[0]} (`for {step.target} in ...`) takes its batches "
                f"from a new `iter({fresh})` (line {ctx.position(fresh_call)[0]}), and a DistributedSampler "
                f"gives every new iterator the same order until set_epoch changes it, so each draw would start from "
                f"the same batch: call {fresh}.sampler.set_epoch({step.target}) right before each `iter({fresh})` "
                "(a new number each time a new iterator is made)")
    if step is not None and around is None and isinstance(step.node, cst.For) and step.target:
        return (f"the training loop at line {ctx.position(step.node)[0]} (`for {step.target} in ...`) reads its batches in a "
                f"way this tool does not follow, so it got no set_epoch; if it runs once per epoch, call "
                f"loader.sampler.set_epoch({step.target}) at its top, or every epoch reuses one shuffle")
    if step is None:
        return _no_step_loop_message(ctx, advice)
    if around is None:
        return f"no epoch loop found around the training loop; {advice}"
    line = ctx.position(around)[0]
    loader = loader_spelling(ctx.index, step)
    if loader is not None:
        return _uncounted_message(ctx, step, around, loader, caller)
    return (f"the training loop iterates `{ctx.code(step.node.iter).strip()}`, not a DataLoader this tool can follow, "
            f"so the epoch loop at line {line} got no set_epoch; {advice}") if isinstance(step.node, cst.For) else \
        f"the training loop is not over a DataLoader this tool can follow, so the epoch loop at line {line} got no set_epoch; {advice}"


def _no_step_loop_message(ctx: Context, advice: str) -> str:
    """MIG103 where no loop over a DataLoader holds the backward: the loop that does, when there is
    one (`while batch is not None:` over a prefetcher's `next()`), by its line."""
    backward = ctx.sites.backward_calls[0] if ctx.sites.backward_calls else None
    loop = backward.place.loops[-1] if backward is not None and backward.place.loops else None
    if backward is None or loop is None:
        return f"no training loop around the backward pass that this tool can follow; {advice}"
    header = ctx.code(loop).strip().splitlines()[0]
    return (f"the backward pass at line {ctx.position(backward.node)[0]} runs in the loop at line {ctx.position(loop)[0]} "
            f"(`{header}`), which does not iterate a DataLoader this tool can follow, so no epoch got set_epoch; {advice}")


def _around(ctx: Context, stmt: cst.BaseStatement) -> cst.For | cst.While | None:
    """The loop around `stmt` in its own function."""
    outer = ctx.index.enclosing_statements(stmt)[1:]
    around = next((s for s in outer if isinstance(s, (cst.For, cst.While))), None)
    return around if around is not None and ctx.index.scope_of.get(around) is ctx.index.scope_of.get(stmt) else None


def _increment_of(stmt: cst.BaseStatement) -> str | None:
    """`n` for a line `n += 1` or `n = n + 1`."""
    if not isinstance(stmt, cst.SimpleStatementLine) or len(stmt.body) != 1:
        return None
    small = stmt.body[0]
    if isinstance(small, cst.AugAssign) and isinstance(small.operator, cst.AddAssign):
        target, added = small.target, small.value
    elif (isinstance(small, cst.Assign) and len(small.targets) == 1 and isinstance(small.value, cst.BinaryOperation)
          and isinstance(small.value.operator, cst.Add) and small.value.left.deep_equals(small.targets[0].target)):
        target, added = small.targets[0].target, small.value.right
    else:
        return None
    one = isinstance(added, cst.Integer) and added.value == "1"
    return target.value if one and isinstance(target, cst.Name) else None


def _bound_in(loop: cst.CSTNode, name: str) -> list[cst.CSTNode]:
    """The targets inside `loop` that bind `name` (assignments, `for name in`, `with ... as name`)."""
    kinds = (cst.AssignTarget, cst.AugAssign, cst.AnnAssign, cst.For, cst.NamedExpr)
    targets = [n.target if isinstance(n, kinds) else n.name for n in descendants(loop) if isinstance(n, (*kinds, cst.AsName))]
    return [t for t in targets if any(isinstance(n, cst.Name) and n.value == name for n in descendants(t))]


def _epoch_counter(ctx: Context, stmt: cst.BaseStatement) -> tuple[str, cst.BaseStatement] | None:
    """`cur_epochs += 1` in the body of the loop around `stmt` (the step loop, or the call that runs
    it), before the statement that holds `stmt`, so run once per pass (`while True: cur_epochs += 1;
    for x, y in loader: ...`): the epoch number, and its line. Not a counter bound anywhere else in
    that loop (reset, or counted per batch too)."""
    around = _around(ctx, stmt)
    if around is None or not isinstance(around.body, cst.IndentedBlock):
        return None
    body = list(around.body.body)
    holding = next((s for s in ctx.index.enclosing_statements(stmt) if any(s is b for b in body)), None)
    if holding is None:
        return None
    for line in body[:next(i for i, s in enumerate(body) if s is holding)]:
        name = _increment_of(line)
        if name is not None and len(_bound_in(around, name)) == 1:
            return name, line
    return None


def _as_passed(ctx: Context, step: Loop, loader: str, call: CallSite) -> str | None:
    """The loader of a step loop as the caller of its function spells it: the argument given for
    a parameter, the same name for a global, `self.x` from a method of the same class."""
    scope = step.place.scope
    if loader in scope.params:
        position = scope.params.index(loader) - (1 if scope.class_name else 0)
        given = argument(call.node, loader, position)
        return spell(given.value) if given is not None else None
    if loader.startswith("self."):
        return loader if call.place.scope.class_name == scope.class_name else None
    return None if ctx.index.bindings_of_in(loader, scope) else loader  # built in the function: not seen outside


def _epoch_counters(ctx: Context, step: Loop, loader: str) -> list[tuple[str, str, cst.BaseStatement]]:
    """(the loader as the counting code spells it, the epoch counter, its increment) around the step
    loop in its function, or else around each call of that function (one level up)."""
    own = _epoch_counter(ctx, step.place.stmt)
    if own is not None or _around(ctx, step.place.stmt) is not None:
        return [(loader, *own)] if own is not None else []
    found: list[tuple[str, str, cst.BaseStatement]] = []
    for call in callers_of(ctx.index, step.place.scope):
        seen = _as_passed(ctx, step, loader, call)
        counted = _epoch_counter(ctx, call.place.stmt) if seen is not None else None
        if seen is not None and counted is not None:
            found.append((seen, *counted))
    return found


def _set_counted_epochs(ctx: Context, all_sharded: bool, sharded: set[str | None]) -> bool:
    """`loader.sampler.set_epoch(cur_epochs)` right after the count of each pass of the loop around
    the step loop (or around the call that runs it), when no `for epoch in ...` is there; whether
    any was added."""
    added: set[int] = set()
    for step in ctx.sites.step_loops:
        loader = loader_spelling(ctx.index, step)
        if loader is None or not (all_sharded or loader in sharded):
            continue
        for seen, name, increment in _epoch_counters(ctx, step, loader):
            if id(increment) not in added:
                ctx.plan.insert_after(increment, [statement(f"{seen}.sampler.set_epoch({name})\n")])
                added.add(id(increment))
    return bool(added)


def _uncounted_message(ctx: Context, step: Loop, around: cst.CSTNode, loader: str, caller: CallSite | None) -> str:
    """MIG103 for a loop of epochs around a DataLoader's loop (or around the call that runs it)
    that gives no number per epoch."""
    line = ctx.position(around)[0]
    loop = "the `while` loop" if isinstance(around, cst.While) else "the loop"
    why = "" if isinstance(around, cst.While) else ", whose variable is not one plain name,"
    training = f"the training loop (line {ctx.position(step.node)[0]})"
    passed = None
    if caller is not None:
        training = f"`{ctx.code(caller.node.func)}(...)` (line {ctx.position(caller.node)[0]}), which runs {training},"
        passed = _as_passed(ctx, step, loader, caller)
        loader = passed or loader
    if isinstance(around, cst.For) and isinstance(around.target, cst.Name) and caller is not None and passed is None:
        epoch = around.target.value
        return (f"epochs repeat in the loop at line {line} (`{epoch}`), but {training.rstrip(',')} reads its loader as "
                f"`{loader}`, which that loop cannot name: call that loader's sampler.set_epoch({epoch}) at the top "
                "of the loop (through the object that holds it), or every epoch reuses one shuffle")
    return (f"epochs repeat in {loop} at line {line}{why} with no epoch number to pass to set_epoch: no counter is raised "
            f"by one in each pass before {training} and set nowhere else in that loop; count the passes there "
            f"(`epoch += 1`) and call {loader}.sampler.set_epoch(epoch) right after, or every epoch reuses one shuffle")


def _set_epochs(ctx: Context, all_sharded: bool, sharded: set[str | None]) -> None:
    """`loader.sampler.set_epoch(epoch)` first thing in each epoch, for sharded loaders only."""
    sites = ctx.sites
    if not sites.epoch_loops and not _set_counted_epochs(ctx, all_sharded, sharded):
        step = sites.step_loops[0] if sites.step_loops else None
        if step is None or not _set_before_fresh_iterator(ctx, step, all_sharded, sharded):
            ctx.report("MIG103", _no_epoch_loop_message(ctx, step), step.node if step is not None else None)
    for epoch in sites.epoch_loops:
        if not all_sharded and epoch.loader not in sharded:
            continue
        loop = epoch.loop.node
        assert isinstance(loop, cst.For)
        if not isinstance(loop.body, cst.IndentedBlock):  # `for epoch in range(3): train(...)`
            ctx.report("MIG103", f"the epoch loop at line {ctx.position(loop)[0]} is written on one line, where no "
                       f"statement can go before its body: call {epoch.loader}.sampler.set_epoch({epoch.loop.target}) "
                       "first in each epoch yourself, or every epoch reuses one shuffle", loop)
            continue
        first = loop.body.body[0]
        ctx.plan.insert_before(first, [statement(f"{epoch.loader}.sampler.set_epoch({epoch.loop.target})\n")])
