"""ZeRO-3 hazards, run for real: small scripts converted with `--zero 3` and launched by the
`deepspeed` launcher on 2 CPU ranks with every parameter partitioned (the threshold and probe of
test_deepspeed.py: partition_every_parameter, run_partitioned, assert_partitioned).

The scripts are the golden case inputs tests/cases/zero3_<name>/input.py, whose DeepSpeed output
is pinned beside them. Each test checks what the original script does and the converted one must
keep. A test may name the failure it guards against (`fail_on`): a conversion bug that comes back
raises ConversionBug with that failure's text, so it is reported as what it is.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import torch

from migrate import DeepSpeedOptions, migrate_source
from tests import progress
from tests.equivalence import zero3_probe
from tests.equivalence.harness import ROOT, assert_same_weights, environment, log_lines
from tests.equivalence.test_deepspeed import assert_partitioned, partition_every_parameter, run_partitioned

CASES = ROOT / "tests" / "cases"


class ConversionBug(Exception):
    """The known failure that the test's xfail reason names."""


def case_input(name: str) -> Path:
    path = CASES / f"zero3_{name}" / "input.py"
    if not path.exists():
        raise FileNotFoundError(f"no tests/cases/zero3_{name}/input.py")
    return path


def run_original(name: str, folder: Path, args: tuple[str, ...] = ()) -> subprocess.CompletedProcess[str]:
    """The case's input with plain python and `args`, one process, in `folder`."""
    folder.mkdir(parents=True, exist_ok=True)
    process = progress.run([sys.executable, str(case_input(name)), *args], cwd=folder, env=environment())
    assert process.returncode == 0, process.stderr[-3000:]
    return process


def run_converted(name: str, folder: Path, args: tuple[str, ...] = ()) -> tuple[subprocess.CompletedProcess[str], Any]:
    """The case's input converted with --zero 3 into `folder`, run with `args` on 2 ranks with every
    parameter partitioned: (the finished launch, the zero_optimization config DeepSpeed read)."""
    source = case_input(name).read_text()
    script = folder / "train.py"
    result = migrate_source(source, "deepspeed", DeepSpeedOptions(zero=3), path=str(script))
    assert not result.error and result.new != source, [f.message for f in result.findings]
    script.write_text(result.new)
    for artifact in result.artifacts:
        Path(artifact.path).write_text(artifact.text)
    zero = partition_every_parameter(folder / "ds_config.json")
    return run_partitioned(script, list(args)), zero


def output(process: subprocess.CompletedProcess[str]) -> str:
    return process.stdout + process.stderr


def fail_on(text: str, process: subprocess.CompletedProcess[str]) -> None:
    """Raise ConversionBug when the known failure `text` is in the run's output."""
    if text in output(process):
        raise ConversionBug(f"{text}\n{output(process)[-3000:]}")


def assert_finished(process: subprocess.CompletedProcess[str]) -> None:
    assert process.returncode == 0, f"exit {process.returncode}\n{process.stdout[-3000:]}\n{process.stderr[-6000:]}"


@pytest.mark.slow
def test_a_forward_inside_a_print_runs_on_every_rank(tmp_path: Path) -> None:
    """zero3_rank0_forward: `print(f"... {validation_loss(model, ...)}")`. The converted script
    computes the message on every rank and prints it on rank 0; a forward on rank 0 alone would
    wait forever for the other rank's shards."""
    process, zero = run_converted("rank0_forward", tmp_path)
    assert_finished(process)
    assert_partitioned(tmp_path, zero)
    assert len([line for line in log_lines(process.stdout) if "val_loss" in line]) == 2


PARAMETER_LINE = re.compile(r"^(parameters: |\S+\.(weight|bias): \()")


@pytest.mark.slow
@pytest.mark.full  # CI budget (the gather outside the engine: CI runs it in the EMA test below); scripts/test --full
def test_parameter_count_and_shapes_are_the_whole_model(tmp_path: Path) -> None:
    """zero3_param_count: the parameter count and shapes printed after the optimizer is made are
    the original's (deepspeed.initialize goes after them, just before the epoch loop)."""
    original = run_original("param_count", tmp_path / "original")
    process, zero = run_converted("param_count", tmp_path)
    fail_on("parameters: 0\n", process)
    assert_finished(process)
    assert_partitioned(tmp_path, zero)
    expected = [line for line in log_lines(original.stdout) if PARAMETER_LINE.match(line)]
    assert [line for line in log_lines(process.stdout) if PARAMETER_LINE.match(line)] == expected


@pytest.mark.slow
def test_ema_update_reads_whole_weights(tmp_path: Path) -> None:
    """zero3_ema: the moving average is updated from the whole weights every step, gathered on
    every rank inside the no_grad block; it equals the original's (one process with batch 32
    against 2 ranks x 16)."""
    expected, actual = run_both("ema", tmp_path, "ema.pt", fail="must match the size of tensor b (0)")
    assert_same_weights(actual, expected)

@pytest.mark.slow
@pytest.mark.full  # CI budget (evaluation between epochs: CI runs one in the forward-inside-a-print test); scripts/test --full
def test_inference_mode_evaluation_between_epochs(tmp_path: Path) -> None:
    """zero3_inference_mode: evaluation under @torch.inference_mode(), then training again (the
    conversion makes it torch.no_grad())."""
    process, zero = run_converted("inference_mode", tmp_path)
    fail_on("Inference tensors cannot be saved for backward", process)
    assert_finished(process)
    assert_partitioned(tmp_path, zero)
    assert len([line for line in log_lines(process.stdout) if "val_loss" in line]) == 2


def test_the_partition_check_refuses_persistent_parameters(tmp_path: Path) -> None:
    """What the probe records with the generated config alone (measured on mlp_regression): the
    parameters are persistent, gathered again right after each step, so the next forward finds
    them whole. assert_partitioned must refuse that."""
    from deepspeed.runtime.zero.config import DeepSpeedZeroConfig

    shard = {"engine": 0, "stage": 3, "params": 6, "zero_params": 6, "full_numel": 4929, "shard_numel": 2465}
    released = {"not_available": 6, "empty": 6, "held_numel": 0}
    whole = {"not_available": 0, "empty": 0, "held_numel": 4929}
    for rank in (0, 1):
        events = [{"event": "forward", "step": 0, "persistent": 6, **shard, **released},
                  {"event": "step", "step": 1, "persistent": 6, **shard, **released},
                  {"event": "forward", "step": 1, "persistent": 6, **shard, **whole}]
        (tmp_path / zero3_probe.RECORD.format(rank=rank)).write_text("".join(json.dumps(e) + "\n" for e in events))
    zero = DeepSpeedZeroConfig(stage=3)
    with pytest.raises(AssertionError, match="parameters kept whole"):
        assert_partitioned(tmp_path, zero)
    for path in tmp_path.glob("zero3_probe.rank*.jsonl"):  # not persistent, but still whole after a step
        path.write_text(path.read_text().replace('"persistent": 6', '"persistent": 0'))
    with pytest.raises(AssertionError, match="'held_numel': 4929"):
        assert_partitioned(tmp_path, zero)


def test_probe_hands_the_launcher_argument_to_the_script() -> None:
    assert zero3_probe.split_arguments(["--local_rank=1", "train.py", "--epochs", "2"]) == ("train.py", ["--epochs", "2", "--local_rank=1"])
    assert zero3_probe.split_arguments(["train.py"]) == ("train.py", [])


@pytest.mark.slow
def test_an_optimizer_built_in_the_training_function_trains_the_callers_model(tmp_path: Path) -> None:
    """zero3_optimizer_in_train: `train(model, ...)` builds the optimizer, so the engine is made
    there; main() saves its own `model`, the plain module the engine trained in place, gathered
    on every rank. Weights equal the original's: one process with batch 32 against 2 ranks x 16."""
    expected, actual = run_both("optimizer_in_train", tmp_path, "classifier.pt")
    assert_same_weights(actual, expected)


def run_both(name: str, tmp_path: Path, saved: str, fail: str | None = None) -> tuple[dict[str, Any], dict[str, Any]]:
    """The case's input as one process with `--batch-size 32`, and converted with --zero 3 on 2
    ranks x 16 with every parameter partitioned (asserted): the file each saved as `saved`."""
    original = tmp_path / "original"
    run_original(name, original, ("--batch-size", "32"))
    converted, zero = run_converted(name, tmp_path, ("--batch-size", "16"))
    if fail is not None:
        fail_on(fail, converted)
    assert_finished(converted)
    assert_partitioned(tmp_path, zero)
    return (torch.load(original / saved, weights_only=True), torch.load(tmp_path / saved, weights_only=True))


@pytest.mark.slow
@pytest.mark.full  # the optimizer made away from the model, as above: scripts/test --full
def test_an_optimizer_kept_in_the_scripts_own_class_is_stepped_there(tmp_path: Path) -> None:
    """zero3_optimizer_holder: `ScheduledStepper(AdamW(...))` sets the learning rate and steps its
    inner optimizer; DeepSpeed's optimizer takes the inner one's place and the class steps it.
    Weights equal the original's (the warmup schedule reaches DeepSpeed's optimizer)."""
    expected, actual = run_both("optimizer_holder", tmp_path, "scheduled.pt")
    assert_same_weights(actual, expected)
