"""DDP equivalence: every sample, converted by `migrate to-ddp`, trains the same as before.

Per sample, four real runs on CPU (gloo):
  original, `python`, batch 2B, no shuffle          -> the reference
  converted, torchrun x2, batch B, no shuffle       -> must equal the reference
  converted, torchrun x2, batch B, shuffled         -> must equal the next one
  converted, plain `python` (1 process), batch 2B, shuffled
With shuffling both converted runs draw through DistributedSampler with the same seed, so the
global batches agree; against the original's DataLoader(shuffle=True) only unshuffled runs can.
scripts/test runs the samples in DEFAULT_SAMPLES, scripts/test --full every sample (`full` mark).
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from tests.equivalence.harness import (
    assert_loads_strictly,
    assert_same_weights,
    final_train_loss,
    loss_lines,
    convert,
    full_unless,
    run_python,
    run_torchrun,
    sample_names,
)

pytestmark = pytest.mark.slow

PER_PROCESS_BATCH = 8
EPOCHS = ["--epochs", "2"]
# BatchNorm normalises each process's batch with that batch's own statistics: B samples on each
# of 2 ranks instead of 2B in one process, so the weights differ slightly and such samples are
# held to their final training loss instead. Measured for cnn_classifier (2 epochs, B=8 x 2 vs
# 16): 0.3633 vs 0.3638 at the end (0.14%), 1.9% after the first epoch; 5% leaves room for that
# gap. A loss this coarse cannot prove gradient sync: the samples without BatchNorm, held to
# equal weights, do that.
BATCHNORM_SAMPLES = {"cnn_classifier"}
LOSS_RTOL = 0.05
# scripts/test runs these (accumulation under no_sync, a trainer class); the others are `full`: their
# shapes are run by another target's default test or by test_launch.py
DEFAULT_SAMPLES = {"amp_accum", "trainer_class"}


@pytest.mark.parametrize("sample", full_unless(sample_names(), DEFAULT_SAMPLES))
def test_ddp_sample_trains_like_the_original(sample: str, tmp_path: Path) -> None:
    original, converted = convert(sample, "ddp", tmp_path)
    batch = ["--batch-size", str(2 * PER_PROCESS_BATCH)]
    half = ["--batch-size", str(PER_PROCESS_BATCH)]

    reference = run_python(original, [*EPOCHS, *batch, "--no-shuffle"], tmp_path / "original.pt")
    two_ranks = run_torchrun(converted, 2, [*EPOCHS, *half, "--no-shuffle"], tmp_path / "ddp2.pt")
    shuffled_two = run_torchrun(converted, 2, [*EPOCHS, *half], tmp_path / "ddp2_shuffled.pt")
    shuffled_one = run_python(converted, [*EPOCHS, *batch], tmp_path / "ddp1_shuffled.pt")

    # the rank-0 checkpoint loads into the original script's model
    assert_loads_strictly(two_ranks.weights, reference.weights)
    # log lines appear once, not once per rank
    assert len(loss_lines(two_ranks.stdout + two_ranks.stderr)) == len(loss_lines(reference.stdout + reference.stderr))

    if sample in BATCHNORM_SAMPLES:
        expected = final_train_loss(reference.stdout + reference.stderr)
        actual = final_train_loss(two_ranks.stdout + two_ranks.stderr)
        assert actual == pytest.approx(expected, rel=LOSS_RTOL)
        return
    assert_same_weights(two_ranks.weights, reference.weights)
    assert_same_weights(shuffled_two.weights, shuffled_one.weights)


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
@pytest.mark.parametrize("sample", sample_names())
def test_ddp_sample_on_one_gpu_over_nccl(sample: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """World size 1 on NCCL against the original on the same GPU (GPU kernels: default tolerances)."""
    monkeypatch.setenv("MIGRATE_TEST_CUDA", "1")
    original, converted = convert(sample, "ddp", tmp_path)
    args = [*EPOCHS, "--batch-size", "16", "--no-shuffle"]
    reference = run_python(original, args, tmp_path / "original.pt")
    one_gpu = run_torchrun(converted, 1, args, tmp_path / "ddp1.pt")
    if sample in BATCHNORM_SAMPLES:
        return
    assert_same_weights(one_gpu.weights, reference.weights)
