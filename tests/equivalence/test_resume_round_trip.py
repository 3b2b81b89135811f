"""A script that saves its own checkpoint and resumes from it (`--resume`) still resumes after
`migrate to-ddp` (tests/cases/ckpt_resume): one epoch on 2 ranks, then a second epoch resumed
from the checkpoint the first one saved, ends with the weights of the original run for 2 epochs
at twice the batch (2 ranks x B with an unshuffled DistributedSampler take the same global
batches as one process with 2B, and DDP averages the two halves' gradients). Real processes:
marked `full`, run by `scripts/test --full`.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import torch

from migrate import migrate_source
from tests import progress
from tests.equivalence.harness import BIN, assert_same_weights, environment

CASE = Path(__file__).resolve().parents[1] / "cases" / "ckpt_resume" / "input.py"
B = 16


def _run(command: list[str], cwd: Path) -> None:
    process = progress.run(command, cwd=cwd, env=environment())
    assert process.returncode == 0, f"exit {process.returncode}\n{process.stdout[-3000:]}\n{process.stderr[-4000:]}"


def _torchrun(script: Path, args: list[str]) -> None:
    _run([str(BIN / "torchrun"), "--standalone", "--nproc_per_node=2", str(script), *args], script.parent)


def _checkpoint(path: Path) -> dict:  # type: ignore[type-arg]
    return torch.load(path, map_location="cpu", weights_only=True)


@pytest.mark.full
@pytest.mark.slow
def test_ddp_resumes_from_its_own_checkpoint(tmp_path: Path) -> None:
    source = CASE.read_text()
    converted = tmp_path / "converted.py"
    result = migrate_source(source, "ddp", path=str(converted))
    assert not result.error and "model = DDP(model)" in result.new
    converted.write_text(result.new)
    original = tmp_path / "original.py"
    original.write_text(source)

    _run([sys.executable, str(original), "--epochs", "2", "--batch-size", str(2 * B), "--out", "reference.pt"], tmp_path)
    _torchrun(converted, ["--epochs", "1", "--batch-size", str(B), "--out", "first.pt"])
    _torchrun(converted, ["--epochs", "1", "--batch-size", str(B), "--resume", "first.pt", "--out", "second.pt"])

    reference, first, second = (_checkpoint(tmp_path / name) for name in ("reference.pt", "first.pt", "second.pt"))
    assert (first["epoch"], second["epoch"]) == (0, 1)
    assert not any(key.startswith("module.") for key in second["model"])  # loads into the original script
    assert_same_weights(second["model"], reference["model"])
    assert first["model"].keys() == second["model"].keys()
    assert any(not torch.equal(first["model"][key], second["model"][key]) for key in first["model"])
