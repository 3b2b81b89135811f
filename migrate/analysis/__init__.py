"""Read-only analysis of a training script: `analyze(module)` returns its TrainingSites."""

from __future__ import annotations

import libcst as cst

from migrate.analysis.devices import device_bindings
from migrate.analysis.entry import find_entry
from migrate.analysis.index import CallSite, ScriptIndex, build_index, spell
from migrate.analysis.loaders import find_epoch_loops, find_loaders, step_loops, training_loader_names
from migrate.analysis.models import forward_spellings, model_site, origin, trained_candidates, unwrappable
from migrate.analysis.sites import Accumulation, ModelSite, TrainingSites
from migrate.analysis.trained import Stepped, root, same_module, stepped_optimizers
from migrate.analysis.training import backward_calls, calls_in, contains, training_scopes

DISTRIBUTED_MARKERS = {
    "torch.distributed.init_process_group": "torch.distributed",
    "torch.nn.parallel.DistributedDataParallel": "DistributedDataParallel",
    "torch.distributed.fsdp.fully_shard": "FSDP",
    "torch.distributed.fsdp.FullyShardedDataParallel": "FSDP",
    "deepspeed.initialize": "DeepSpeed",
    "horovod.torch.init": "Horovod",
    "accelerate.Accelerator": "Accelerate",
}
# torch.distributed's own data helpers are what a conversion adds, not a sign of one
NOT_A_DISTRIBUTED_LAYER = ("torch.utils.data.distributed", "torch.distributed")


def analyze(module: cst.Module) -> TrainingSites:
    index = build_index(module)
    sites = TrainingSites(index=index)
    sites.already = _already_distributed(index)
    sites.backward_calls = backward_calls(index)
    if not sites.backward_calls:
        return sites
    sites.training_scopes = training_scopes(index, sites.backward_calls)
    training_names = {name.rsplit(".", 1)[-1] for name in sites.training_scopes if name != "<module>"}
    sites.stepped = stepped_optimizers(index, sites.training_scopes)
    trained = trained_candidates(index, sites.training_scopes, sites.stepped)
    sites.unwrappable = unwrappable(index, sites.training_scopes, sites.stepped, trained, sites.backward_calls[0].node)
    if sites.unwrappable is None:
        sites.models = [model_site(index, c, training_names) for c in trained]
    sites.optimizers = [c for c in index.calls if _is_optimizer(c.name)]
    sites.step_loops = step_loops(index, sites.training_scopes, {c.place.scope.name for c in sites.backward_calls})
    sites.loaders = find_loaders(index, training_loader_names(index, sites.step_loops), sites.step_loops)
    sites.epoch_loops = find_epoch_loops(index, sites.step_loops)
    sites.device_bindings = device_bindings(index)
    sites.accumulations = _accumulations(sites)
    must_follow = [b.place.stmt for b in sites.device_bindings] + [
        site.call.place.stmt for site in sites.loaders
    ] + [_model_statement(site) for site in sites.models]
    sites.entry = find_entry(index, [s for s in must_follow if s is not None], sites.training_scopes)
    return sites


def _model_statement(site: ModelSite) -> cst.BaseStatement | None:
    return site.wrap_after or site.wrap_before


def _already_distributed(index: ScriptIndex) -> str | None:
    """The distributed framework the script already calls. Names are resolved through every import
    of the file, wherever it is (a call's own name was resolved through the imports seen before it:
    `dist.init_process_group()` in main() with `import torch.distributed as dist` further down)."""
    names = [_fully_qualified(index, call) for call in index.calls]
    for name in names:
        if name in DISTRIBUTED_MARKERS:
            return DISTRIBUTED_MARKERS[name]
    for name in names:
        layer = _own_distributed_layer(name)
        if layer:
            return f"a distributed layer of its own (`{layer}`)"
    return None


def _fully_qualified(index: ScriptIndex, call: CallSite) -> str | None:
    """The call's name resolved through all of the file's imports (the index holds them all by now)."""
    return index.qualify(call.node.func) or call.name


def _own_distributed_layer(name: str | None) -> str | None:
    """`dalle_pytorch.distributed_utils.set_backend_from_args` -> `dalle_pytorch.distributed_utils`:
    a project module named for distributed training that the script calls into."""
    if not name or name.startswith(NOT_A_DISTRIBUTED_LAYER) or name.startswith(("deepspeed.", "horovod.")):
        return None
    parts = name.split(".")
    for i, part in enumerate(parts[:-1]):
        if "distributed" in part.lower():
            return ".".join(parts[: i + 1])
    return None


def _is_optimizer(name: str | None) -> bool:
    if not name or not name.startswith("torch.optim."):
        return False
    last = name.rsplit(".", 1)[-1]
    return "lr_scheduler" not in name and last[:1].isupper()


def _accumulations(sites: TrainingSites) -> list[Accumulation]:
    """Micro-steps that skip an optimizer step: after a model's backward, the SAME optimizer (the
    one holding that model's parameters) is stepped only under `if ... % n ...:`. An `if` that runs
    a backward of its own before its step is another update on a schedule (a GAN's generator every
    n_critic steps), not accumulation: the model before it syncs every step."""
    index = sites.index
    models = {m.spelling for m in sites.models}
    roots = {m.spelling: root(index, m.spelling, m.scope) for m in sites.models}
    stepped = {id(s.step.node): s for s in sites.stepped}
    found: list[Accumulation] = []
    for backward in sites.backward_calls:
        for ancestor in index.enclosing_statements(backward.place.stmt):
            if ancestor not in index.block_of:
                continue
            block, position = index.block_of[ancestor]
            later = list(block.body[position + 1 :])
            step_ifs = [s for s in later if _is_accumulation_if(s)]
            if not step_ifs:
                continue
            for step_if in step_ifs:
                assert isinstance(step_if, cst.If)
                skipped = _skipped_steps(index, step_if, stepped)
                if skipped is None:
                    break  # the `if` holds an update of its own
                elsewhere = [s for s in later if s is not step_if]
                held = [
                    m for m in sorted(models)
                    if _holds(index, skipped, roots[m]) and not _stepped_in(index, elsewhere, skipped, roots[m], stepped)
                ]
                if not held:
                    continue  # `if step % 100 == 0: scheduler.step()`, or another model's optimizer
                first, model = _first_forward(block.body[: position + 1], held, index)
                if first is not None and model is not None:
                    found.append(Accumulation(condition=step_if.test, first=first, last=ancestor, model=model))
                elif not any(_forwards(s, models, index) for s in block.body[: position + 1]):
                    sites.notes.append(("MIG109", "the forward pass is not in the same loop body as backward", ancestor))
                break
            break
    return found


def _skipped_steps(index: ScriptIndex, step_if: cst.If, stepped: dict[int, Stepped]) -> list[Stepped | None] | None:
    """The optimizers the `if` steps (None for a `.step()` this analysis did not take for an
    optimizer's); None when a backward runs in the `if` before its step."""
    found: list[Stepped | None] = []
    for call in calls_in(step_if.body):
        if isinstance(call.func, cst.Attribute) and call.func.attr.value == "backward" and not found:
            return None
        if isinstance(call.func, cst.Attribute) and call.func.attr.value == "step":
            found.append(stepped.get(id(call)))
    return found


def _holds(index: ScriptIndex, skipped: list[Stepped | None], key: tuple) -> bool:
    """Whether one of the optimizers holds the model (an optimizer that cannot be traced may)."""
    for optimizer in skipped:
        if optimizer is None:
            continue
        if optimizer.owners is None or any(same_module(index, root(index, o.spelling, o.scope), key) for o in optimizer.owners):
            return True
    return False


def _stepped_in(index: ScriptIndex, statements: list[cst.BaseStatement], skipped: list[Stepped | None], key: tuple,
                stepped: dict[int, Stepped]) -> bool:
    """Whether the model's optimizer is also stepped outside the `if` (then nothing is skipped)."""
    names = {s.spelling for s in skipped if s is not None}
    for stmt in statements:
        for call in index.calls_under(stmt):
            optimizer = stepped.get(id(call))
            if optimizer is not None and optimizer.spelling in names and _holds(index, [optimizer], key):
                return True
    return False


def _first_forward(statements: list[cst.BaseStatement], held: list[str], index: ScriptIndex) -> tuple[cst.BaseStatement | None, str | None]:
    """The first statement that calls one of the models, and that model."""
    for stmt in statements:
        model = _forwarded_model(stmt, set(held), index)
        if model is not None:
            return stmt, model
    return None, None


def _is_accumulation_if(stmt: cst.BaseStatement) -> bool:
    if not isinstance(stmt, cst.If):
        return False
    has_modulo = contains(stmt.test, lambda n: isinstance(n, cst.Modulo))
    steps = any(
        isinstance(c.func, cst.Attribute) and c.func.attr.value == "step" for c in calls_in(stmt.body)
    )
    return has_modulo and steps


def _forwarded_model(stmt: cst.BaseStatement, models: set[str], index: ScriptIndex) -> str | None:
    aliases = _forward_aliases(models, index)
    for call in index.calls_under(stmt):
        name = spell(call.func)
        if name in aliases:
            return aliases[name]
    return None


def _forwards(stmt: cst.BaseStatement, models: set[str], index: ScriptIndex) -> bool:
    return _forwarded_model(stmt, models, index) is not None


def _forward_aliases(models: set[str], index: ScriptIndex) -> dict[str, str]:
    """Spellings a model is called by inside functions (parameters named otherwise) -> its site name."""
    known = index.memo("forward_aliases")
    key = frozenset(models)
    if key not in known:
        aliases = {name: name for name in models}
        for spelling, scope in forward_spellings(index, {s.name for s in index.functions.values()} | {"<module>"}).items():
            home, _scope = origin(index, spelling, scope)
            if home in models:
                aliases[spelling] = home
        known[key] = aliases
    return dict(known[key])
