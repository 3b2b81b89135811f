"""Read-only analysis of a training script: `analyze(module)` returns its TrainingSites."""

from __future__ import annotations

from collections.abc import Mapping

import libcst as cst

from migrate.analysis.accumulation import accumulations
from migrate.analysis.devices import device_bindings
from migrate.analysis.entry import find_entry
from migrate.analysis.index import CallSite, ScriptIndex, build_index
from migrate.analysis.loaders import find_epoch_loops, find_loaders, step_loops, training_loader_names
from migrate.analysis.models import model_site, trained_candidates, unwrappable
from migrate.analysis.sites import ModelSite, TrainingSites
from migrate.analysis.trained import stepped_optimizers
from migrate.analysis.training import backward_calls, training_scopes

# torch.distributed's own data helpers are what a conversion adds, not a sign of one
NOT_A_DISTRIBUTED_LAYER = ("torch.utils.data.distributed", "torch.distributed")


def analyze(module: cst.Module, local_modules: frozenset[str] = frozenset(), script_end: int | None = None) -> TrainingSites:
    """Where the parts of training are; `local_modules`, `script_end`: a program's (analysis.program)."""
    index = build_index(module, local_modules, script_end)
    sites = TrainingSites(index=index)
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
    sites.training_loader_names = frozenset(training_loader_names(index, sites.step_loops))
    sites.loaders = find_loaders(index, set(sites.training_loader_names), sites.step_loops)
    sites.epoch_loops = find_epoch_loops(index, sites.step_loops)
    sites.device_bindings = device_bindings(index)
    sites.accumulations = accumulations(sites)
    must_follow = [b.place.stmt for b in sites.device_bindings] + [
        site.call.place.stmt for site in sites.loaders
    ] + [_model_statement(site) for site in sites.models]
    sites.entry = find_entry(index, [s for s in must_follow if s is not None], sites.training_scopes)
    return sites


def _model_statement(site: ModelSite) -> cst.BaseStatement | None:
    return site.wrap_after or site.wrap_before


def frameworks_called(index: ScriptIndex, markers: Mapping[str, str]) -> list[str]:
    """The distributed frameworks the script already calls (`markers`: qualified call -> framework),
    in the order of their first call, then a project's own distributed layer when it calls one.
    Names are resolved through every import of the file, wherever it is (a call's own name was
    resolved through the imports seen before it: `dist.init_process_group()` in main() with
    `import torch.distributed as dist` further down)."""
    names = [_fully_qualified(index, call) for call in index.calls]
    found: list[str] = []
    for name in names:
        framework = markers.get(name or "")
        if framework is not None and framework not in found:
            found.append(framework)
    for name in names:
        layer = _own_distributed_layer(name)
        if layer:
            found.append(f"a distributed layer of its own (`{layer}`)")
            break
    return found


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

