"""The same epoch figures on every target: tests/cases/fig_epoch_sums, converted, prints what the
original prints.

Three real runs on CPU, the original's global batch kept (2 ranks x B against one process x 2B,
no shuffling, so the global batches are the same samples):
  original, `python`, batch 2B                                  -> the reference
  `migrate to-ddp`, torchrun x2 (gloo), batch B                 -> the same epoch lines
  `migrate to-horovod --no-scale-lr`, horovodrun x2 (gloo), B   -> the same epoch lines
  `migrate to-fsdp`, torchrun x2 (gloo), batch B                -> the same epoch lines
  `migrate to-deepspeed --zero 2`, deepspeed x2 (gloo), batch B -> the same epoch lines
The case prints `total_loss / len(loader)` (this rank's batches: the sum is averaged over the
ranks) and `correct / len(loader.dataset)` (every sample: the count is summed).
Marked `full` (CI budget): scripts/test --full runs it.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from migrate import DeepSpeedOptions, HorovodOptions, Options, migrate_source
from tests.equivalence.harness import Run, assert_same_weights, run_deepspeed, run_horovod, run_python, run_torchrun

pytestmark = [pytest.mark.slow, pytest.mark.full]

CASE = Path(__file__).resolve().parents[1] / "cases" / "fig_epoch_sums" / "input.py"
PER_PROCESS_BATCH = 8
EPOCHS = ["--epochs", "2"]
EPOCH_LINE = re.compile(r"^epoch (\d+) loss ([0-9.]+) acc ([0-9.]+)$", re.MULTILINE)
# the loss is printed with 6 decimals; two ranks add the same batch means in another order
LOSS_ABS = 2e-6


class FiguresDiffer(AssertionError):
    """The converted run's epoch figures are not the original's (and nothing else went wrong)."""


def convert_case(target: str, folder: Path, options: Options | None = None) -> Path:
    source = CASE.read_text()
    converted = folder / "converted.py"
    result = migrate_source(source, target, options, path=str(converted))
    assert not result.error and result.new != source, [f.message for f in result.findings]
    converted.write_text(result.new)
    for artifact in result.artifacts:
        Path(artifact.path).write_text(artifact.text)
    return converted


def epoch_figures(run: Run) -> list[tuple[int, float, float]]:
    found = [(int(epoch), float(loss), float(acc)) for epoch, loss, acc in EPOCH_LINE.findall(run.stdout)]
    assert [epoch for epoch, _loss, _acc in found] == [0, 1], run.stdout[-2000:]
    return found


def assert_same_figures(actual: Run, expected: Run) -> None:
    for (epoch, loss, acc), (_, want_loss, want_acc) in zip(epoch_figures(actual), epoch_figures(expected)):
        if loss != pytest.approx(want_loss, abs=LOSS_ABS) or acc != want_acc:
            raise FiguresDiffer(f"epoch {epoch}: loss {loss} acc {acc}, the original printed loss {want_loss} acc {want_acc}")


@pytest.fixture(scope="module")
def original(tmp_path_factory: pytest.TempPathFactory) -> Run:
    folder = tmp_path_factory.mktemp("original")
    script = folder / "original.py"
    script.write_text(CASE.read_text())
    return run_python(script, [*EPOCHS, "--batch-size", str(2 * PER_PROCESS_BATCH)], folder / "original.pt")


def test_ddp_prints_the_original_figures(original: Run, tmp_path: Path) -> None:
    converted = convert_case("ddp", tmp_path)
    two_ranks = run_torchrun(converted, 2, [*EPOCHS, "--batch-size", str(PER_PROCESS_BATCH)], tmp_path / "ddp.pt")
    assert_same_weights(two_ranks.weights, original.weights)  # the same training, so the same figures are due
    assert_same_figures(two_ranks, original)


def test_horovod_prints_the_original_figures(original: Run, tmp_path: Path) -> None:
    converted = convert_case("horovod", tmp_path, HorovodOptions(scale_lr=False))
    two_ranks = run_horovod(converted, 2, [*EPOCHS, "--batch-size", str(PER_PROCESS_BATCH)], tmp_path / "horovod.pt")
    assert_same_weights(two_ranks.weights, original.weights)
    assert_same_figures(two_ranks, original)


def test_fsdp_prints_the_original_figures(original: Run, tmp_path: Path) -> None:
    converted = convert_case("fsdp", tmp_path)
    two_ranks = run_torchrun(converted, 2, [*EPOCHS, "--batch-size", str(PER_PROCESS_BATCH)], tmp_path / "fsdp.pt")
    assert_same_weights(two_ranks.weights, original.weights)
    assert_same_figures(two_ranks, original)


def test_deepspeed_prints_the_original_figures(original: Run, tmp_path: Path) -> None:
    converted = convert_case("deepspeed", tmp_path, DeepSpeedOptions(zero=2))
    two_ranks = run_deepspeed(converted, 2, [*EPOCHS, "--batch-size", str(PER_PROCESS_BATCH)], tmp_path / "ds.pt")
    assert_same_weights(two_ranks.weights, original.weights)
    assert_same_figures(two_ranks, original)
