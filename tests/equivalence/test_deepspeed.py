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
