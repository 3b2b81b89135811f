"""Where a trained model, the optimizer built for it and that optimizer's LR schedulers all exist:
the first statement after which a target can hand the three to its framework together
(`deepspeed.initialize(model=..., optimizer=...)`), or why there is no such statement.

The answer is computed once per script (`model_ordering(sites)`); steps turn a reason into their
own finding.
"""

from __future__ import annotations

import dataclasses
import enum

import libcst as cst

from migrate.analysis.index import ScriptIndex, spell
from migrate.analysis.models import top_statement
from migrate.analysis.optimizers import OptimizerSide, optimizer_side
from migrate.analysis.sites import ModelSite, TrainingSites

Block = cst.Module | cst.IndentedBlock


@dataclasses.dataclass(frozen=True, eq=False)
class ModelOrdering:
    """The one trained model, its optimizer, and the statement after which both (and the
    optimizer's schedulers) exist."""

    model: ModelSite  # the model's site, with wrap_after moved to `anchor` (and no wrap_before)
    optimizer: str  # the optimizer's spelling, as stepped in training
    anchor: cst.BaseStatement  # the framework's call goes right after this statement
    side: OptimizerSide  # the optimizer side of the training step
    compiled_first: cst.BaseStatement | None = None  # a `torch.compile` of the model that runs before `anchor`


class Unordered(enum.Enum):
    """Why there is no statement after which the model and its optimizer exist together."""

    NO_MODEL = "no model"  # nothing trained that can be wrapped
    SEVERAL_MODELS = "several models"  # one framework object per model and optimizer: not placed
    OPTIMIZER_ELSEWHERE = "optimizer not built beside the model"


@dataclasses.dataclass(frozen=True, eq=False)
class NoModelOrdering:
    """The reason, and the models it is about (none, several, or the one whose optimizer is elsewhere)."""

    reason: Unordered
    models: tuple[ModelSite, ...]
    compiled_first: cst.BaseStatement | None = None  # as in ModelOrdering


def model_ordering(sites: TrainingSites) -> ModelOrdering | NoModelOrdering:
    """The ordering of the script's model, optimizer and schedulers (computed once, then reused)."""
    return sites.index.derived("model_ordering", lambda: _ordering(sites))  # type: ignore[no-any-return]


def _ordering(sites: TrainingSites) -> ModelOrdering | NoModelOrdering:
    if not sites.models:
        return NoModelOrdering(Unordered.NO_MODEL, ())
    if len(sites.models) > 1:
        return NoModelOrdering(Unordered.SEVERAL_MODELS, tuple(sites.models))
    index = sites.index
    site = sites.models[0]
    side = optimizer_side(sites)
    compiled_first = site.wrap_before if site.wrap_after is None else None
    anchor = site.wrap_after or site.wrap_before
    assert anchor is not None
    block, position = index.block_of[anchor]
    for optimizer in sorted(side.optimizers):
        stmt = _binding_statement(index, optimizer, site, block)
        if stmt is not None:
            later = max(position, block.body.index(stmt), _last_scheduler(index, optimizer, block))
            anchor = block.body[later]
            moved = dataclasses.replace(site, wrap_after=anchor, wrap_before=None)
            return ModelOrdering(model=moved, optimizer=optimizer, anchor=anchor, side=side, compiled_first=compiled_first)
    return NoModelOrdering(Unordered.OPTIMIZER_ELSEWHERE, (site,), compiled_first)


def _last_scheduler(index: ScriptIndex, optimizer: str, block: Block) -> int:
    """Index of the last statement in `block` that builds an LR scheduler on the optimizer: the
    scheduler must hold the torch optimizer (a framework's wrapper is not one), so the framework's
    call comes after it. DeepSpeed's optimizer shares its param_groups, so the LR still follows."""
    last = -1
    for call in index.calls:
        if not (call.name or "").startswith("torch.optim.lr_scheduler."):
            continue
        if any(spell(a.value) == optimizer for a in call.node.args):
            top = top_statement(index, call.place.stmt, block)
            if top is not None:
                last = max(last, block.body.index(top))
    return last


def _binding_statement(index: ScriptIndex, spelling: str, site: ModelSite, block: Block) -> cst.BaseStatement | None:
    """The statement of `block` that binds the optimizer where the model is bound (the same
    function, or for `self.optimizer` the same class)."""
    for binding in index.bindings:
        if binding.target != spelling:
            continue
        same_place = binding.place.scope is site.scope or (
            spelling.startswith("self.") and binding.place.scope.class_name == site.scope.class_name
        )
        top = top_statement(index, binding.place.stmt, block) if same_place else None
        if top is not None:
            return top
    return None
