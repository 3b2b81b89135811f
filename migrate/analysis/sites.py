"""TrainingSites: where the parts of a training script are, as found by the finders.

Read-only facts about the original tree; steps decide what to change at each site.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import libcst as cst

from migrate.analysis.index import Binding, CallSite, Loop, Scope, ScriptIndex

if TYPE_CHECKING:  # trained.py reads the index and the training sites' helpers; only its record is named here
    from migrate.analysis.trained import Stepped


@dataclass(eq=False)
class Entry:
    """Where process-group setup and teardown go."""

    scope: Scope  # the function (or module) that runs the script
    block: cst.Module | cst.IndentedBlock  # the block setup is inserted into
    setup_before: cst.BaseStatement | None  # setup goes right before this statement (None: end of block)
    teardown_after: cst.BaseStatement | None  # teardown goes after this one (None: at the top, empty block)
    teardown_before_return: cst.Return | None = None
    found: bool = True  # False: no entry function or __main__ block, fell back to module level
    library: bool = False  # no entry at all: only definitions, nothing runs training (refused)
    spans: dict[int, bool] = field(default_factory=dict)  # function id -> runs in the process group (a cache)


@dataclass(eq=False)
class ModelSite:
    """A module whose forward feeds a backward pass: the thing the wrapper goes around."""

    spelling: str  # "model", "self.model", "netD"
    scope: Scope  # where it is bound and wrapped
    wrap_after: cst.BaseStatement | None  # the wrapper statement goes after this one...
    wrap_before: cst.BaseStatement | None  # ...or before this one (a torch.compile of it)
    data_parallel: list[cst.BaseStatement]  # the existing nn.DataParallel statements to replace (none: empty)


@dataclass(eq=False)
class LoaderSite:
    """A DataLoader feeding training."""

    call: CallSite
    spelling: str | None  # what it is bound to, when it is bound


@dataclass(eq=False)
class EpochLoop:
    loop: Loop
    loader: str  # spelling of the training loader as seen from the loop's scope


@dataclass(eq=False)
class Accumulation:
    """`if (step + 1) % n == 0: optimizer.step()` after a backward in the same loop body."""

    condition: cst.BaseExpression  # the `if`'s test
    factor: cst.BaseExpression  # `n`: the micro-steps per optimizer step
    first: cst.BaseStatement | None  # first statement of the micro-step (holds the forward); None: not in the loop body
    last: cst.BaseStatement  # the statement holding backward
    model: str
    step_if: cst.If | None = None  # the `if` that steps; its test is `condition`, or a name bound to it
    # after the loop of micro-steps, a statement that steps the same optimizer again (the micro-steps
    # left over at an epoch's end): their gradients must have been reduced too
    stepped_after_loop: cst.BaseStatement | None = None
    factor_scope: Scope | None = None  # the scope that reads `factor` (a caller's, when passed down)


@dataclass(eq=False)
class TrainingSites:
    index: ScriptIndex
    training_scopes: set[str] = field(default_factory=set)  # scopes that call backward, or call those
    backward_calls: list[CallSite] = field(default_factory=list)
    entry: Entry | None = None
    models: list[ModelSite] = field(default_factory=list)
    optimizers: list[CallSite] = field(default_factory=list)
    loaders: list[LoaderSite] = field(default_factory=list)
    epoch_loops: list[EpochLoop] = field(default_factory=list)
    step_loops: list[Loop] = field(default_factory=list)
    training_loader_names: frozenset[str] = frozenset()  # every spelling of a training loader (loaders.training_loader_names)
    accumulations: list[Accumulation] = field(default_factory=list)  # analysis.accumulation: one per backward at most
    device_bindings: list[Binding] = field(default_factory=list)
    already: str | None = None  # "DistributedDataParallel" etc. when the script is distributed
    notes: list[tuple[str, str, cst.CSTNode]] = field(default_factory=list)  # (code, message, node)
    stepped: list[Stepped] = field(default_factory=list)  # the optimizers stepped in training
    # why the trained module cannot be wrapped (MIG104): text and nodes that stand for their line, and where
    unwrappable: tuple[list[str | cst.CSTNode], cst.CSTNode | None] | None = None
