"""DeepSpeed equivalence: every sample the DeepSpeed target converts trains the same as the
original, at each ZeRO stage, launched by the real `deepspeed` launcher with 2 processes on CPU.

Reference: the original with batch 2B and no shuffling. Converted: 2 ranks x batch B, no
shuffling. amp_accum proves that gradient accumulation and clipping moved into the config
(equal weights, not just "it ran"). The GAN gets one engine per model (generator and
discriminator, each with its own optimizer), checked engine by engine under the probe.

Stage 3 partitions every parameter: ZeRO-3 keeps a parameter of at most
stage3_param_persistence_threshold elements (1e5 by default) whole on every rank, and the
samples' largest has about 8k, so with the generated config stage 3 shards only what stage 2
does. The test sets the threshold to 0 in the generated ds_config.json (the converted script
reads it and overwrites only keys outside zero_optimization) and runs the script under
zero3_probe.py, which records the parameters' state on each rank at each forward's start and
after each optimizer step: assert_partitioned requires every one to be an empty shard after each
step and at the forward that follows.

scripts/test runs the sample and stage pairs in DEFAULT_RUNS (stage 3; the other stages run in the
files beside it), scripts/test --full every sample at every stage (`full` mark).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
import torch

from migrate import DeepSpeedOptions
from tests.equivalence import zero3_probe
from tests.equivalence.harness import (
    assert_loads_strictly,
    assert_same_weights,
    convert,
    full_unless,
    launch_deepspeed,
    run_deepspeed,
    run_python,
    sample_names,
)
from tests.equivalence.harness import final_train_loss, loss_lines
from tests.equivalence.test_ddp import BATCHNORM_SAMPLES, LOSS_RTOL

pytestmark = pytest.mark.slow

SAMPLES_CONVERTED = sample_names()
# The converted script is the same at every stage (only ds_config.json differs). scripts/test runs
# stage 3 (partitioned parameters, the hardest for a converted script) with two engines and with a
# trainer class; DeepSpeed's other code paths run by default elsewhere: stage 0 (no ZeRO optimizer)
# in test_deepspeed_precision.py's float16 test, stage 2 (stage_1_and_2.py, which stage 1 shares) in
# test_deepspeed_accumulation.py and the bfloat16 config test. scripts/test --full runs every sample
# at every stage.
DEFAULT_RUNS = {("gan", 3), ("trainer_class", 3)}
ARGS = ["--epochs", "2", "--no-shuffle"]
_references: dict[str, object] = {}


def partition_every_parameter(config_path: Path) -> Any:
    """Set stage3_param_persistence_threshold to 0 in a generated ZeRO-3 config, so that no
    parameter stays whole; the zero_optimization section as DeepSpeed reads it."""
    from deepspeed.runtime.zero.config import DeepSpeedZeroConfig

    config = json.loads(config_path.read_text())
    config["zero_optimization"]["stage3_param_persistence_threshold"] = 0
    config_path.write_text(json.dumps(config, indent=2))
    zero = DeepSpeedZeroConfig(**config["zero_optimization"])
    assert (zero.stage, zero.param_persistence_threshold) == (3, 0)
    return zero


def run_partitioned(script: Path, args: list[str], save: Path | None = None):  # type: ignore[no-untyped-def]
    """`script` under zero3_probe.py (copied beside it) and the deepspeed launcher, 2 ranks:
    run_deepspeed's Run when `save` is given, else the finished process (launch_deepspeed)."""
    probe = script.parent / "zero3_probe.py"
    shutil.copy(zero3_probe.__file__, probe)
    if save is not None:
        return run_deepspeed(probe, 2, [str(script), *args], save)
    return launch_deepspeed(probe, 2, [str(script), *args])


def assert_partitioned(folder: Path, zero: Any, nproc: int = 2) -> None:
    """What zero3_probe.py recorded in `folder`, on every rank: no parameter of the model is
    persistent, and after every optimizer step and at the start of the forward that follows it,
    each one is NOT_AVAILABLE and empty (`p.numel() == 0`) while this rank keeps its own slice
    (`ds_tensor`, about 1/nproc of `ds_numel`). So each training forward gathers every weight from
    all ranks, and a weight read outside a forward is empty. (Forwards in a row without a step
    between them, an evaluation's, may find the weights still gathered: DeepSpeed keeps what it
    will use again soon, up to stage3_max_reuse_distance.)"""
    records = zero3_probe.read_records(folder)
    assert sorted(records) == list(range(nproc)), f"probe records from ranks {sorted(records)}"
    for rank, events in records.items():
        assert {e["event"] for e in events} == {"forward", "step"}, f"rank {rank}: {events[:3]}"
        after_step = {e["engine"]: True for e in events}  # the first forward comes after initialize partitioned all
        for e in events:
            assert e["stage"] == 3 and e["params"] == e["zero_params"] > 0, e
            assert e["persistent"] == 0, f"rank {rank}: parameters kept whole: {e}"
            assert e["full_numel"] <= nproc * e["shard_numel"] < nproc * e["full_numel"], f"rank {rank}: {e}"
            # DeepSpeed's limits on what is gathered at once leave the whole model room
            assert zero.max_live_parameters >= e["full_numel"] and zero.prefetch_bucket_size >= e["full_numel"], zero
            if e["event"] == "step" or after_step[e["engine"]]:
                assert e["not_available"] == e["empty"] == e["params"] and e["held_numel"] == 0, f"rank {rank}: {e}"
            after_step[e["engine"]] = e["event"] == "step"


def reference(sample: str, folder: Path):  # type: ignore[no-untyped-def]
    """The original sample's run with batch 16 (computed once per sample)."""
    if sample not in _references:
        original, _ = convert(sample, "ddp", folder)
        _references[sample] = run_python(original, [*ARGS, "--batch-size", "16"], folder / "original.pt")
    return _references[sample]


@pytest.mark.parametrize(("sample", "stage"),
                         full_unless([(sample, stage) for sample in SAMPLES_CONVERTED for stage in range(4)], DEFAULT_RUNS))
def test_deepspeed_sample_trains_like_the_original(sample: str, stage: int, tmp_path: Path, tmp_path_factory) -> None:  # type: ignore[no-untyped-def]
    expected = reference(sample, tmp_path_factory.mktemp(f"reference-{sample}"))
    _, converted = convert(sample, "deepspeed", tmp_path, DeepSpeedOptions(zero=stage))
    config = json.loads((tmp_path / "ds_config.json").read_text())
    assert config["zero_optimization"]["stage"] == stage
    if stage == 3:
        zero = partition_every_parameter(tmp_path / "ds_config.json")
        run = run_partitioned(converted, [*ARGS, "--batch-size", "8"], tmp_path / "ds.pt")
        assert_partitioned(tmp_path, zero)
    else:
        run = run_deepspeed(converted, 2, [*ARGS, "--batch-size", "8"], tmp_path / "ds.pt")

    assert_loads_strictly(run.weights, expected.weights)
    assert len(loss_lines(run.stdout + run.stderr)) == len(loss_lines(expected.stdout + expected.stderr))
    if sample in BATCHNORM_SAMPLES:
        actual = final_train_loss(run.stdout + run.stderr)
        assert actual == pytest.approx(final_train_loss(expected.stdout + expected.stderr), rel=LOSS_RTOL)
        return
    assert_same_weights(run.weights, expected.weights)


def test_converted_script_still_runs_with_plain_python(tmp_path: Path, tmp_path_factory) -> None:  # type: ignore[no-untyped-def]
    """No launcher: the converted script runs as one process and trains as before."""
    expected = reference("mlp_regression", tmp_path_factory.mktemp("reference-plain"))
    _, converted = convert("mlp_regression", "deepspeed", tmp_path, DeepSpeedOptions(zero=2))
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

    _, converted = convert("amp_accum", "deepspeed", tmp_path, DeepSpeedOptions(zero=2))
    config = json.loads((tmp_path / "ds_config.json").read_text())
    assert (config["gradient_clipping"], config["gradient_accumulation_steps"]) == (1.0, 2)
    run = run_deepspeed(converted, 2, [*flags, "--batch-size", "8"], tmp_path / "ds.pt")
    assert_same_weights(run.weights, clipped.weights)


def test_the_generated_launcher_trains_on_the_port_asked_for(tmp_path: Path) -> None:
    """run_<script>_deepspeed.sh for one node, NUM_GPUS=2 (CPU ranks here) and MASTER_PORT set:
    the launcher rendezvouses there and the weights are the original's."""
    import os

    from migrate.verify.session import remove_deepspeed_buffers
    from tests import progress
    from tests.equivalence.harness import BIN, environment, flatten

    original, converted = convert("mlp_regression", "deepspeed", tmp_path)
    reference = run_python(original, [*ARGS, "--batch-size", "16"], tmp_path / "original.pt")
    env = environment()
    env.update(NUM_GPUS="2", DS_ACCELERATOR="cpu", PATH=f"{BIN}{os.pathsep}{env['PATH']}")
    save = tmp_path / "launched.pt"
    try:
        process = progress.run(["bash", str(tmp_path / "run_converted_deepspeed.sh"), *ARGS, "--batch-size", "8",
                                "--save", str(save)], cwd=tmp_path, env=env)
    finally:
        remove_deepspeed_buffers(env["MASTER_PORT"])
    assert process.returncode == 0, process.stdout[-2000:] + process.stderr[-3000:]
    assert f"--master_port={env['MASTER_PORT']}" in process.stdout + process.stderr
    assert_same_weights(flatten(torch.load(save, map_location="cpu", weights_only=True)), reference.weights)
