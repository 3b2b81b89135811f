"""Horovod equivalence: every sample, converted by `migrate to-horovod`, trains the same as before.

Per sample, two real runs on CPU:
  original, `python`, batch 2B, no shuffle                          -> the reference
  converted, run_converted_horovod.sh (horovodrun, gloo) x2, batch B, -> must equal the reference
  no shuffle, `--lr` halved: the conversion multiplies it by hvd.size() (Horovod's recipe), so the
  run applies the original's rate and the weights can be compared.
Horovod averages each gradient over the ranks: 2 x B equals one batch of 2B.
scripts/test runs the samples in DEFAULT_SAMPLES, scripts/test --full every sample (`full` mark).
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from migrate import HorovodOptions, migrate_source
from tests.equivalence.harness import (
    SAMPLES,
    assert_loads_strictly,
    assert_same_weights,
    convert,
    final_train_loss,
    full_unless,
    launch_horovod,
    loss_lines,
    run_horovod,
    run_python,
    sample_names,
)

pytestmark = pytest.mark.slow

PER_PROCESS_BATCH = 8
EPOCHS = ["--epochs", "2"]
BATCHNORM_SAMPLES = {"cnn_classifier"}  # see test_ddp.py: held to the final loss (5%)
LOSS_RTOL = 0.05
# scripts/test runs these (BatchNorm with the loss summed over the ranks, two models); the others
# are `full` (scripts/test --full)
DEFAULT_SAMPLES = {"cnn_classifier", "gan"}


def default_lr(sample: str) -> float:
    source = (SAMPLES / sample / "train.py").read_text()
    found = re.search(r'"--lr", type=float, default=([0-9.e-]+)', source)
    assert found, sample
    return float(found.group(1))


@pytest.mark.parametrize("sample", full_unless(sample_names(), DEFAULT_SAMPLES))
def test_horovod_sample_trains_like_the_original(sample: str, tmp_path: Path) -> None:
    original, converted = convert(sample, "horovod", tmp_path, HorovodOptions(scale_lr=True))
    assert "hvd.DistributedOptimizer(" in converted.read_text()
    lr = default_lr(sample)
    reference = run_python(original, [*EPOCHS, "--batch-size", str(2 * PER_PROCESS_BATCH), "--no-shuffle"],
                           tmp_path / "original.pt")
    two_ranks = run_horovod(converted, 2, [*EPOCHS, "--batch-size", str(PER_PROCESS_BATCH), "--no-shuffle",
                                           "--lr", repr(lr / 2)], tmp_path / "horovod2.pt")

    assert_loads_strictly(two_ranks.weights, reference.weights)
    # where the epoch's running sums are summed over the ranks (MIG405), rank 0 prints the
    # original's training loss (trainer_class's sum comes from a method: rank 0 prints its share)
    if "hvd.allreduce(" in converted.read_text() and "train_loss" in reference.stdout:
        assert final_train_loss(two_ranks.stdout) == pytest.approx(final_train_loss(reference.stdout),
                                                                    rel=LOSS_RTOL if sample in BATCHNORM_SAMPLES else 1e-3)
    assert len(loss_lines(two_ranks.stdout + two_ranks.stderr)) == len(loss_lines(reference.stdout + reference.stderr))
    if sample in BATCHNORM_SAMPLES:
        return
    assert_same_weights(two_ranks.weights, reference.weights)


# Each rank draws its own initial weights (seeded by its rank); the weights every rank ends with
# are written by a helper module the conversion does not touch, one file per rank.
SEEDED_PER_RANK = '''\
import os

import torch
import torch.nn as nn

from probe_out import write_weights


def main():
    torch.manual_seed(int(os.environ.get("HOROVOD_RANK", "0")))
    model = nn.Linear(4, 2)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    data = torch.arange(32, dtype=torch.float32).reshape(8, 4) / 32
    for _ in range(3):
        optimizer.zero_grad()
        loss = model(data).pow(2).mean()
        loss.backward()
        optimizer.step()
    write_weights(model)


if __name__ == "__main__":
    main()
'''

PROBE_OUT = '''\
import os

import torch


def write_weights(model):
    torch.save(model.state_dict(), f"weights_{os.environ.get('HOROVOD_RANK', '0')}.pt")
'''


@pytest.mark.full  # the broadcast itself is run by every default test; this shows it matters
def test_broadcast_gives_every_rank_rank_0s_weights(tmp_path: Path) -> None:
    """With the broadcast the two ranks end equal; the same script without it ends apart."""
    import torch

    (tmp_path / "probe_out.py").write_text(PROBE_OUT)
    result = migrate_source(SEEDED_PER_RANK, "horovod", path=str(tmp_path / "seeded.py"))
    assert "hvd.broadcast_parameters(model.state_dict(), root_rank=0)" in result.new
    for name, text in (("seeded", result.new),
                       ("unbroadcast", "\n".join(line for line in result.new.splitlines() if "broadcast_parameters" not in line))):
        folder = tmp_path / name
        folder.mkdir()
        (folder / "probe_out.py").write_text(PROBE_OUT)
        (folder / "seeded.py").write_text(text)
        for artifact in result.artifacts:
            (folder / Path(artifact.path).name).write_text(artifact.text)
        process = launch_horovod(folder / "seeded.py", 2, [])
        assert process.returncode == 0, process.stderr[-3000:]
    same = [torch.load(tmp_path / "seeded" / f"weights_{r}.pt") for r in (0, 1)]
    apart = [torch.load(tmp_path / "unbroadcast" / f"weights_{r}.pt") for r in (0, 1)]
    assert_same_weights(same[1], same[0])
    assert not torch.allclose(apart[0]["weight"], apart[1]["weight"])


def test_a_checkpoint_resumes_like_the_original_script_resumes(tmp_path: Path) -> None:
    """cnn_classifier writes model and optimizer state each epoch. Its Horovod checkpoint (2 ranks,
    2 epochs) is resumed for a third epoch by the original script and by the converted one, whose
    optimizer is wrapped before the state loads and broadcast after: as one process the weights are
    equal; as 2 ranks the final loss agrees (BatchNorm: see test_ddp.BATCHNORM_SAMPLES)."""
    original, converted = convert("cnn_classifier", "horovod", tmp_path, HorovodOptions(scale_lr=False))
    assert "hvd.broadcast_optimizer_state(optimizer, root_rank=0)" in converted.read_text()
    checkpoint = tmp_path / "checkpoint.pt"
    run_horovod(converted, 2, ["--batch-size", "8", "--no-shuffle", "--epochs", "2", "--checkpoint", str(checkpoint)],
                tmp_path / "two.pt")
    resume = ["--no-shuffle", "--epochs", "3", "--resume", str(checkpoint)]
    by_original = run_python(original, [*resume, "--batch-size", "16"], tmp_path / "original_resumed.pt")
    one_rank = run_python(converted, [*resume, "--batch-size", "16"], tmp_path / "one_rank_resumed.pt")
    two_ranks = run_horovod(converted, 2, [*resume, "--batch-size", "8"], tmp_path / "two_ranks_resumed.pt")
    assert "resumed from" in by_original.stderr and "resumed from" in two_ranks.stderr
    assert_same_weights(one_rank.weights, by_original.weights)
    assert_loads_strictly(two_ranks.weights, by_original.weights)
    assert final_train_loss(two_ranks.stderr) == pytest.approx(final_train_loss(by_original.stderr), rel=LOSS_RTOL)
