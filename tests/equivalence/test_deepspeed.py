"""DeepSpeed equivalence: every sample the DeepSpeed target converts trains the same as the
original, at each ZeRO stage, launched by the real `deepspeed` launcher with 2 processes on CPU.

Reference: the original with batch 2B and no shuffling. Converted: 2 ranks x batch B, no
shuffling. amp_accum proves that gradient accumulation and clipping moved into the config
(equal weights, not just "it ran"). The GAN is left unconverted by design (two engines), and
says so (test_gan_is_left_unconverted).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from migrate import Options, migrate_source
from tests.equivalence.harness import (
    SAMPLES,
    assert_loads_strictly,
    assert_same_weights,
    convert,
    run_deepspeed,
    run_python,
    sample_names,
)
from tests.equivalence.test_ddp import BATCHNORM_SAMPLES, LOSS_RTOL, final_train_loss, loss_lines

pytestmark = pytest.mark.slow

SAMPLES_CONVERTED = [name for name in sample_names() if name != "gan"]
ARGS = ["--epochs", "2", "--no-shuffle"]
_references: dict[str, object] = {}


def reference(sample: str, folder: Path):  # type: ignore[no-untyped-def]
    """The original sample's run with batch 16 (computed once per sample)."""
    if sample not in _references:
        original, _ = convert(sample, "ddp", folder)
        _references[sample] = run_python(original, [*ARGS, "--batch-size", "16"], folder / "original.pt")
    return _references[sample]


@pytest.mark.parametrize("stage", [0, 1, 2, 3])
@pytest.mark.parametrize("sample", SAMPLES_CONVERTED)
def test_deepspeed_sample_trains_like_the_original(sample: str, stage: int, tmp_path: Path, tmp_path_factory) -> None:  # type: ignore[no-untyped-def]
    expected = reference(sample, tmp_path_factory.mktemp(f"reference-{sample}"))
    _, converted = convert(sample, "deepspeed", tmp_path, Options(zero=stage))
    config = json.loads((tmp_path / "ds_config.json").read_text())
    assert config["zero_optimization"]["stage"] == stage
    run = run_deepspeed(converted, 2, [*ARGS, "--batch-size", "8"], tmp_path / "ds.pt")

    assert_loads_strictly(run.weights, expected.weights)
    assert len(loss_lines(run.stdout + run.stderr)) == len(loss_lines(expected.stdout + expected.stderr))
    if sample in BATCHNORM_SAMPLES:
        actual = final_train_loss(run.stdout + run.stderr)
        assert actual == pytest.approx(final_train_loss(expected.stdout + expected.stderr), rel=LOSS_RTOL)
        return
    assert_same_weights(run.weights, expected.weights)


def test_gan_is_left_unconverted() -> None:
    source = (SAMPLES / "gan" / "train.py").read_text()
    result = migrate_source(source, "deepspeed")
    assert result.new == source and result.skipped
    assert [f.code for f in result.findings] == ["MIG113"]


def test_converted_script_still_runs_with_plain_python(tmp_path: Path, tmp_path_factory) -> None:  # type: ignore[no-untyped-def]
    """No launcher: the converted script runs as one process and trains as before."""
    expected = reference("mlp_regression", tmp_path_factory.mktemp("reference-plain"))
    _, converted = convert("mlp_regression", "deepspeed", tmp_path, Options(zero=2))
    run = run_python(converted, [*ARGS, "--batch-size", "16"], tmp_path / "plain.pt")
    assert_same_weights(run.weights, expected.weights)


def test_accumulation_and_clipping_follow_the_command_line(tmp_path: Path, tmp_path_factory) -> None:  # type: ignore[no-untyped-def]
    """amp_accum with a tight clip and 4 micro-steps, given on the command line only: the
    converted script hands both to DeepSpeed (its config says 1.0 and 2), and matches the
    original run with the same flags. The clip is tight enough to change the result."""
    folder = tmp_path_factory.mktemp("reference-clip")
    original, _ = convert("amp_accum", "ddp", folder)
    flags = [*ARGS, "--max-grad-norm", "0.05", "--accum-steps", "4"]
    clipped = run_python(original, [*flags, "--batch-size", "16"], folder / "clipped.pt")
    loose = [*ARGS, "--max-grad-norm", "1e9", "--accum-steps", "4", "--batch-size", "16"]
    unclipped = run_python(original, loose, folder / "unclipped.pt")
    assert any(not torch.allclose(clipped.weights[k], unclipped.weights[k]) for k in clipped.weights)

    _, converted = convert("amp_accum", "deepspeed", tmp_path, Options(zero=2))
    config = json.loads((tmp_path / "ds_config.json").read_text())
    assert (config["gradient_clipping"], config["gradient_accumulation_steps"]) == (1.0, 2)
    run = run_deepspeed(converted, 2, [*flags, "--batch-size", "8"], tmp_path / "ds.pt")
    assert_same_weights(run.weights, clipped.weights)
