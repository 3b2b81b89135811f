"""`migrate check --fix`: the findings a small edit repairs, repaired in the script's text.

DC202 (`shuffle=True` beside a sampler): the keyword is dropped, since the sampler shuffles. DC203
(a shuffling DistributedSampler never told the epoch): `loader.sampler.set_epoch(epoch)` opens
each epoch loop over that loader, as the to-* conversions write it. DC801 (a process group never
destroyed): `dist.destroy_process_group()` closes the entry point (the outermost function of the
script that leads to init_process_group, before a final `return`; the module's end when it is
set up there), spelled with the script's own name for torch.distributed. A finding whose shape
does not allow the edit (a positional `shuffle`, an epoch loop written on one line, no name for
torch.distributed) is left as it is, and the next check reports it. Text in, text out: writing is
the command's (migrate.writing, all or nothing).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import libcst as cst

from migrate.analysis.index import Scope
from migrate.analysis.loaders import DATA_LOADERS, find_epoch_loops, step_loops
from migrate.analysis.training import backward_calls, callers_of, training_scopes
from migrate.check import rules_data, rules_state
from migrate.check.facts import Hit, Script, parse_script

FIXABLE = ("DC202", "DC203", "DC801")


@dataclass
class Edits:
    """What to change, by node of the parsed script, and what each change repairs."""

    dropped_args: set[int] = field(default_factory=set)  # id of cst.Arg to drop
    prepend: dict[int, list[str]] = field(default_factory=dict)  # id of an indented block -> statements
    before: dict[int, list[str]] = field(default_factory=dict)  # id of a statement -> statements before it
    append_module: list[str] = field(default_factory=list)
    fixed: list[tuple[cst.CSTNode | None, str, str]] = field(default_factory=list)  # (node, code, what was done)


def fix_source(code: str, path: str = "train.py", codes: tuple[str, ...] = FIXABLE) -> tuple[str, list[tuple[int, int, str, str]]]:
    """The text with every fixable finding of `codes` repaired, and (line, col, code, what) for each
    repair, at the finding's place in the original text. Raises InputError for text that does not
    parse (migrate.check.facts.parse_script's own checks)."""
    script = parse_script(code, path)
    edits = Edits()
    if "DC202" in codes:
        _drop_shuffle(script, edits)
    if "DC203" in codes:
        _add_set_epoch(script, edits)
    if "DC801" in codes:
        _add_destroy(script, edits)
    if not edits.fixed:
        return code, []
    new = script.module.visit(_Apply(edits)).code
    done = [(*(script.position(node) if node is not None else (0, 0)), c, what) for node, c, what in edits.fixed]
    return new, sorted(done)


def _drop_shuffle(script: Script, edits: Edits) -> None:
    for hit in rules_data.shuffle_beside_sampler(script):
        parent = next((a for c in script.calls_to(*DATA_LOADERS) for a in c.node.args if a.value is hit.node), None)
        if parent is not None and parent.keyword is not None:
            edits.dropped_args.add(id(parent))
            edits.fixed.append((hit.node, "DC202", "dropped shuffle=True (the sampler shuffles)"))


def _add_set_epoch(script: Script, edits: Edits) -> None:
    hits = list(rules_data.set_epoch_missing(script))
    if not hits:
        return
    index = script.index
    backward = backward_calls(index)
    loops = step_loops(index, training_scopes(index, backward), {c.place.scope.name for c in backward})
    epochs = find_epoch_loops(index, loops)
    for hit in hits:
        loader = _loader_of(script, hit)
        for epoch in epochs:
            node = epoch.loop.node
            if epoch.loader != loader or not isinstance(node, cst.For) or not isinstance(node.body, cst.IndentedBlock):
                continue
            line = f"{loader}.sampler.set_epoch({epoch.loop.target or script.text(node.target)})"
            edits.prepend.setdefault(id(node.body), []).append(line)
            edits.fixed.append((hit.node, "DC203", f"added `{line}` at the top of the epoch loop"))


def _loader_of(script: Script, hit: Hit) -> str | None:
    for site in rules_data.training_loaders(script):
        if rules_data.distributed_sampler(script, site.call.node) is hit.node:
            return site.spelling
    return None


def _add_destroy(script: Script, edits: Edits) -> None:
    for hit in rules_state.process_group_kept(script):
        dist = next((local for local, full in script.index.imports.items() if full == "torch.distributed"), None)
        site = script.index.call_site(hit.node) if isinstance(hit.node, cst.Call) else None
        if dist is None or site is None:
            return
        line = f"{dist}.destroy_process_group()"
        scope = _entry(script, site.place.scope)
        if scope.is_module:
            edits.append_module.append(line)
        else:
            assert isinstance(scope.node, (cst.FunctionDef, cst.ClassDef))  # not the module: a def
            body = scope.node.body
            last = body.body[-1]
            returns = isinstance(last, cst.SimpleStatementLine) and isinstance(last.body[0], cst.Return)
            (edits.before.setdefault(id(last), []) if returns else edits.prepend.setdefault(-id(body), [])).append(line)
        edits.fixed.append((hit.node, "DC801", f"added `{line}` at the end of {'the script' if scope.is_module else scope.name + '()'}"))


def _entry(script: Script, scope: Scope) -> Scope:
    """The outermost function of the script whose call leads to `scope` (the module: itself)."""
    seen = {scope}
    while not scope.is_module:
        callers = [c for c in callers_of(script.index, scope) if c.place.scope not in seen]
        if not callers or callers[0].place.scope.is_module:
            return scope
        scope = callers[0].place.scope
        seen.add(scope)
    return scope


class _Apply(cst.CSTTransformer):
    """Carries out the Edits on the tree they were planned on (nodes matched by identity).
    A block's key is its id for statements put first, minus its id for statements put last."""

    def __init__(self, edits: Edits) -> None:
        self.edits = edits

    def leave_Call(self, original: cst.Call, updated: cst.Call) -> cst.Call:
        kept = [a for o, a in zip(original.args, updated.args) if id(o) not in self.edits.dropped_args]
        if len(kept) == len(updated.args):
            return updated
        if kept and original.args[-1] is not None and id(original.args[-1]) in self.edits.dropped_args:
            kept[-1] = kept[-1].with_changes(comma=cst.MaybeSentinel.DEFAULT)
        return updated.with_changes(args=kept)

    def leave_IndentedBlock(self, original: cst.IndentedBlock, updated: cst.IndentedBlock) -> cst.IndentedBlock:
        first = [_statement(s) for s in self.edits.prepend.get(id(original), [])]
        last = [_statement(s) for s in self.edits.prepend.get(-id(original), [])]
        body = []
        for o, u in zip(original.body, updated.body):
            body += [_statement(s) for s in self.edits.before.get(id(o), [])] + [u]
        if not (first or last or len(body) != len(updated.body)):
            return updated
        return updated.with_changes(body=[*first, *body, *last])

    def leave_Module(self, original: cst.Module, updated: cst.Module) -> cst.Module:
        if not self.edits.append_module:
            return updated
        return updated.with_changes(body=[*updated.body, *(_statement(s) for s in self.edits.append_module)])


def _statement(text: str) -> cst.BaseStatement:
    return cst.parse_statement(text + "\n")
