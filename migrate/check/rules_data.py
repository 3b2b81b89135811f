"""Check rules about the model wrapper and the data: DataParallel (DC101), a training DataLoader
without a DistributedSampler (DC201; over an iterable dataset, which takes no sampler: one whose
class never reads the rank, with the way to split it that migrate.analysis.datasets gives),
`shuffle=True` beside a sampler (DC202), a DistributedSampler never told the epoch (DC203).
`data_sharded` says whether a script splits its training data across the ranks at all (DC301)."""

from __future__ import annotations

import re
from collections.abc import Iterator

import libcst as cst

from migrate.analysis.index import descendants, spell
from migrate.analysis.datasets import Streaming, streaming_origin
from migrate.analysis.loaders import DATA_LOADERS, find_epoch_loops, find_loaders, step_loops, training_loader_names
from migrate.analysis.sites import LoaderSite
from migrate.analysis.training import backward_calls, training_scopes
from migrate.check.facts import DATA_PARALLEL, Hit, Script, argument, is_literal

SHARDED_DATA = re.compile(r"rank|shard|num_replicas|world", re.IGNORECASE)
STREAM_SPLITTERS = re.compile(r"split_dataset_by_node|\.sharding_filter\(")


def data_parallel(script: Script) -> Iterator[Hit]:
    """DC101: nn.DataParallel (or its function form)."""
    for call in script.calls_to(*DATA_PARALLEL):
        yield Hit(call.node, "nn.DataParallel runs every GPU from one process (one machine, the first GPU a "
                  "bottleneck): use DistributedDataParallel (`migrate to-ddp` converts it)")


def training_loaders(script: Script) -> list[LoaderSite]:
    """The DataLoaders that feed the backward pass (migrate.analysis.loaders)."""
    def find() -> list[LoaderSite]:
        index = script.index
        backward = backward_calls(index)
        if not backward:
            return []
        scopes = training_scopes(index, backward)
        loops = step_loops(index, scopes, {c.place.scope.name for c in backward})
        return find_loaders(index, set(training_loader_names(index, loops)), loops)
    return script.index.derived("check_training_loaders", find)


def _sampler(call: cst.Call) -> cst.BaseExpression | None:
    given = argument(call, "sampler", 3) or argument(call, "batch_sampler", 4)
    return None if given is None or is_literal(given, None) else given


def missing_sampler(script: Script) -> Iterator[Hit]:
    """DC201: a training DataLoader without a sampler in a script that sets up a process group."""
    if not script.initialises:
        return
    for site in training_loaders(script):
        call = site.call.node
        dataset = argument(call, "dataset", 0)
        if _sampler(call) is not None or (dataset is not None and _sharded_by_hand(script, dataset)):
            continue
        named = f"`{site.spelling}`" if site.spelling else "the training DataLoader"
        streaming = streaming_origin(script.index, dataset, site.call.place.scope, site.call.place.stmt) \
            if dataset is not None else None
        if streaming is None:
            yield Hit(call, f"{named} has no DistributedSampler: every rank trains on the whole dataset, so each "
                      "epoch sees every sample once per rank; pass sampler=DistributedSampler(dataset) (shuffle= goes there)")
        elif not _stream_split(script, streaming):
            yield Hit(call, f"{named} reads an iterable dataset ({streaming.what}) that is not split by rank: it takes "
                      f"no sampler, so every rank trains on all of it; {streaming.hint}")


def _stream_split(script: Script, streaming: Streaming) -> bool:
    """An iterable dataset split across the ranks: its class of the script reads the rank in its
    body, or the script splits streams (`split_dataset_by_node`, a datapipe's `sharding_filter()`)."""
    if STREAM_SPLITTERS.search(script.code):
        return True
    name = spell(streaming.origin.func)
    classes = [n for n in descendants(script.module) if isinstance(n, cst.ClassDef) and n.name.value == name]
    return any(SHARDED_DATA.search(script.text(c.body)) for c in classes)


def data_sharded(script: Script) -> bool:
    """The training data is split across the ranks: a training DataLoader takes a sampler or a
    dataset cut per rank, or the script indexes something by rank (`indices[hvd.rank()::hvd.size()]`)."""
    for site in training_loaders(script):
        dataset = argument(site.call.node, "dataset", 0)
        if _sampler(site.call.node) is not None or (dataset is not None and _sharded_by_hand(script, dataset)):
            return True
    slices = [e.slice for n in descendants(script.module) if isinstance(n, cst.Subscript) for e in n.slice]
    return any(isinstance(s, cst.Slice) and SHARDED_DATA.search(script.text(s)) for s in slices)


def _sharded_by_hand(script: Script, dataset: cst.BaseExpression) -> bool:
    """The dataset is cut per rank already: its expression, or what its name is bound to, says so."""
    texts = [script.text(dataset)]
    name = spell(dataset)
    if name is not None:
        texts += [script.text(b.node) for b in script.index.bindings_of(name)]
    return any(SHARDED_DATA.search(text) for text in texts)


def shuffle_beside_sampler(script: Script) -> Iterator[Hit]:
    """DC202: `DataLoader(..., sampler=..., shuffle=True)`: DataLoader raises at once."""
    for call in script.calls_to(*DATA_LOADERS):
        shuffle = argument(call.node, "shuffle", 2)
        if shuffle is not None and is_literal(shuffle, True) and _sampler(call.node) is not None:
            yield Hit(shuffle, "shuffle=True beside a sampler: DataLoader raises \"sampler option is mutually exclusive "
                      "with shuffle\"; drop it (DistributedSampler shuffles, shuffle=True is its default)")


def set_epoch_missing(script: Script) -> Iterator[Hit]:
    """DC203: a shuffling DistributedSampler of a loader trained over several epochs, and no
    `set_epoch` call anywhere: every epoch draws the same order."""
    if script.method_calls("set_epoch"):
        return
    index = script.index
    backward = backward_calls(index)
    if not backward:
        return
    loops = step_loops(index, training_scopes(index, backward), {c.place.scope.name for c in backward})
    if not find_epoch_loops(index, loops):
        return
    for site in training_loaders(script):
        sampler = distributed_sampler(script, site.call.node)
        if sampler is not None and not is_literal(argument(sampler, "shuffle", 3), False):
            yield Hit(sampler, "DistributedSampler without set_epoch: it shuffles with the same seed every epoch, so "
                      "each epoch repeats the first one's order; call sampler.set_epoch(epoch) at the top of each epoch")


def distributed_sampler(script: Script, loader: cst.Call) -> cst.Call | None:
    """The DistributedSampler call a DataLoader's sampler is, in place or through a name."""
    given = _sampler(loader)
    candidates: list[cst.BaseExpression] = [given] if given is not None else []
    name = spell(given) if given is not None else None
    if name is not None:
        candidates += [b.value for b in script.index.bindings_of(name) if b.value is not None]
    for value in candidates:
        if isinstance(value, cst.Call) and (script.index.qualify(value.func) or "").endswith("DistributedSampler"):
            return value
    return None
