"""DataParallel equivalence: every sample, converted by `migrate to-dp`, trains exactly as before.

On a CPU, nn.DataParallel has no device to split batches across and calls the wrapped module
directly, so the converted script, run as the one process it is, must end with bit-identical
weights (same seed, same shuffling, same batch). What this proves is the rewrite itself: the
wrapper placed after the model is built and before the optimizer reads its parameters, nothing
else changed, and the checkpoint saved through `.module` keeps the original's plain keys. The
split across GPUs is DataParallel's own; `scripts/gpu-check` runs it where there are GPUs.
scripts/test runs the samples in DEFAULT_SAMPLES, scripts/test --full every sample (`full` mark).
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from tests.equivalence.harness import assert_loads_strictly, convert, full_unless, log_lines, run_python, sample_names

pytestmark = pytest.mark.slow

ARGS = ["--epochs", "2", "--batch-size", "8"]
DEFAULT_SAMPLES = {"autoencoder", "trainer_class"}  # the others are `full` (scripts/test --full)


@pytest.mark.parametrize("sample", full_unless(sample_names(), DEFAULT_SAMPLES))
def test_dp_sample_trains_exactly_like_the_original_on_cpu(sample: str, tmp_path: Path) -> None:
    original, converted = convert(sample, "dp", tmp_path)
    assert "DataParallel(" in converted.read_text()

    reference = run_python(original, ARGS, tmp_path / "original.pt")
    wrapped = run_python(converted, ARGS, tmp_path / "dp.pt")

    assert_loads_strictly(wrapped.weights, reference.weights)  # plain keys, no `module.`
    for key, tensor in reference.weights.items():
        assert torch.equal(wrapped.weights[key], tensor), key
    # the same output, line for line (each run names its own checkpoint file)
    said = [line.replace("dp.pt", "<checkpoint>") for line in log_lines(wrapped.stdout)]
    assert said == [line.replace("original.pt", "<checkpoint>") for line in log_lines(reference.stdout)]
