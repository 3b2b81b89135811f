"""Finds the optimizer side of a training step: the optimizer stepped in training and the calls
around it (zero_grad, clipping, an AMP GradScaler, autocast blocks), for targets whose engine
takes these over (DeepSpeed). The accumulation factor is analysis.accumulation's.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import libcst as cst

from migrate.analysis.index import Binding, CallSite, ScriptIndex, spell
from migrate.analysis.sites import TrainingSites

SCALERS = ("torch.cuda.amp.GradScaler", "torch.amp.GradScaler", "torch.cuda.amp.grad_scaler.GradScaler")
AUTOCASTS = ("torch.autocast", "torch.cuda.amp.autocast", "torch.amp.autocast", "torch.cpu.amp.autocast")
PROFILERS = ("torch.profiler.", "torch.autograd.profiler.")
CLIPS = ("torch.nn.utils.clip_grad_norm_", "torch.nn.utils.clip_grad.clip_grad_norm_")


@dataclass(eq=False)
class OptimizerSide:
    optimizers: set[str] = field(default_factory=set)  # spellings stepped in training
    scalers: set[str] = field(default_factory=set)  # GradScaler spellings
    scaler_bindings: list[Binding] = field(default_factory=list)
    step_calls: list[CallSite] = field(default_factory=list)  # optimizer.step() / scaler.step(optimizer)
    zero_grad_calls: list[CallSite] = field(default_factory=list)  # optimizer.zero_grad() / model.zero_grad()
    scaler_calls: list[CallSite] = field(default_factory=list)  # scaler.update() / scaler.unscale_(...)
    clip_calls: list[CallSite] = field(default_factory=list)
    autocast_blocks: list[cst.With] = field(default_factory=list)


def optimizer_side(sites: TrainingSites) -> OptimizerSide:
    index = sites.index
    side = OptimizerSide()
    side.scaler_bindings = [b for b in index.bindings if _call_named(index, b.value, SCALERS)]
    side.scalers = {b.target for b in side.scaler_bindings}
    schedulers = {b.target for b in index.bindings if _call_named(index, b.value, ("torch.optim.lr_scheduler",), prefix=True)}
    # a torch.profiler schedule's `prof.step()` is no optimizer step
    schedulers |= {b.target for b in index.bindings if _call_named(index, b.value, PROFILERS, prefix=True)}
    schedulers |= {
        spell(item.asname.name) or "" for stmt in index.block_of if isinstance(stmt, cst.With) for item in stmt.items
        if item.asname is not None and _call_named(index, item.item, PROFILERS, prefix=True)
    }
    for call in index.calls:
        owner, method = _owner_and_method(call)
        if owner is None:
            continue
        if method == "step" and owner in side.scalers:
            side.step_calls.append(call)
            first = call.node.args[0].value if call.node.args else None
            if first is not None and spell(first):
                side.optimizers.add(spell(first) or "")
        elif method == "step" and owner not in schedulers and not call.node.args and _in_training(sites, call):
            side.step_calls.append(call)
            side.optimizers.add(owner)
        elif method == "zero_grad" and _in_training(sites, call):
            side.zero_grad_calls.append(call)
        elif method in ("update", "unscale_") and owner in side.scalers:
            side.scaler_calls.append(call)
    side.clip_calls = [c for c in index.calls if c.name in CLIPS]
    side.autocast_blocks = [
        stmt for stmt in index.block_of if isinstance(stmt, cst.With) and all(
            _call_named(index, item.item, AUTOCASTS) for item in stmt.items
        )
    ]
    return side


def _owner_and_method(call: CallSite) -> tuple[str | None, str]:
    func = call.node.func
    if not isinstance(func, cst.Attribute):
        return None, ""
    return spell(func.value), func.attr.value


def _in_training(sites: TrainingSites, call: CallSite) -> bool:
    return call.place.scope.name in sites.training_scopes


def _call_named(index: ScriptIndex, value: cst.BaseExpression | None, names: tuple[str, ...], prefix: bool = False) -> bool:
    if not isinstance(value, cst.Call):
        return False
    qualified = index.qualify(value.func) or ""
    return qualified.startswith(names) if prefix else qualified in names
