"""Projects whose training step lives in their own modules (issue 27), converted with those modules
and run for real: the original as one process at the global batch, the conversion on 2 ranks (gloo)
at half of it, under each target's own launcher; the saved weights must match.

tests/cases_projects/step_in_engine: train.py calls `engine.train_one_epoch(model, loader, optimizer)`,
the loader is built by data.py's `make_loader()` and the weights saved by checkpoint.py's
`save_weights()`: the conversion shards the loader in data.py and saves on rank 0 in checkpoint.py.
tests/cases_projects/trainer_class: train.py hands the model to `Trainer` of trainer.py, whose `fit()`
runs the loop: the model is wrapped in the Trainer, the print guarded there.

DDP on step_in_engine runs in CI; the rest of the matrix is `full` (scripts/test --full).
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from migrate import HorovodOptions
from migrate.api import migrate_file
from migrate.records import FileResult
from tests.equivalence.harness import (assert_same_weights, full_unless, run_deepspeed, run_horovod, run_python,
                                       run_torchrun)

pytestmark = pytest.mark.slow

PROJECTS = Path(__file__).resolve().parents[1] / "cases_projects"
CASES = ["step_in_engine", "trainer_class"]
TARGETS = ["ddp", "fsdp", "horovod", "deepspeed"]
MATRIX = [(case, target) for case in CASES for target in TARGETS]


def _converted(case: str, target: str, folder: Path) -> Path:
    """The project copied into `folder` and converted there (every file its conversion edits, and
    the launcher and config it makes)."""
    shutil.copytree(PROJECTS / case, folder)
    options = HorovodOptions(scale_lr=False) if target == "horovod" else None  # the batch is split, not grown
    result = migrate_file(str(folder / "train.py"), target, options)
    assert isinstance(result, FileResult) and result.changed and not result.skipped, result
    assert result.modules, "the training step lives in a module: the conversion edits it or its helpers"
    for each in (result, *result.modules):
        Path(each.path).write_text(each.new)
    for artifact in result.artifacts:
        Path(artifact.path).write_text(artifact.text)
    return folder / "train.py"


@pytest.mark.parametrize(("case", "target"), full_unless(MATRIX, {("step_in_engine", "ddp")}))
def test_the_converted_project_learns_what_the_original_learns(tmp_path: Path, case: str, target: str) -> None:
    shutil.copytree(PROJECTS / case, tmp_path / "original")
    reference = run_python(tmp_path / "original" / "train.py", ["--batch-size", "16"], tmp_path / "original.pt")
    script = _converted(case, target, tmp_path / "converted")
    launch = {"ddp": run_torchrun, "fsdp": run_torchrun, "horovod": run_horovod, "deepspeed": run_deepspeed}[target]
    two_ranks = launch(script, 2, ["--batch-size", "8"], tmp_path / f"{target}.pt")
    assert_same_weights(two_ranks.weights, reference.weights)
