"""Runs original and converted training scripts as real processes and compares what they learned.

Reused by every target: convert a sample with `migrate_source`, launch it (plain python,
torchrun, or a target's own launcher), load the saved state dicts, compare them tensor by tensor.
Launches run under tests/progress.py: one fails when its process tree hangs (no output and no
CPU for progress.QUIET_S), not when a busy machine makes it slow.
"""

from __future__ import annotations

import os
import re
import socket
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import torch

from migrate import Options, migrate_source
from migrate.verify.session import remove_deepspeed_buffers
from tests import progress

ROOT = Path(__file__).resolve().parents[2]
SAMPLES = ROOT / "samples"
BIN = Path(sys.executable).parent


@dataclass(frozen=True)
class Run:
    stdout: str
    stderr: str
    weights: dict[str, torch.Tensor]


def sample_names() -> list[str]:
    return sorted(p.parent.name for p in SAMPLES.glob("*/train.py"))


def full_unless(values: list[Any], default: set[Any]) -> list[Any]:
    """`values` for a parametrize, each one not in `default` marked `full`: scripts/test runs the
    default ones (a representative of each code path), scripts/test --full all of them."""
    assert default <= set(values), default - set(values)
    return [value if value in default else pytest.param(*(value if isinstance(value, tuple) else (value,)),
                                                        marks=pytest.mark.full)
            for value in values]


def convert(sample: str, target: str, folder: Path, options: Options | None = None) -> tuple[Path, Path]:
    """(original, converted) copies of a sample in `folder`."""
    source = (SAMPLES / sample / "train.py").read_text()
    original = folder / "original.py"
    converted = folder / "converted.py"
    original.write_text(source)
    result = migrate_source(source, target, options, path=str(converted))
    assert not result.error and result.new != source, [f.message for f in result.findings]
    converted.write_text(result.new)
    for artifact in result.artifacts:
        Path(artifact.path).write_text(artifact.text)
    return original, converted


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def environment() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("RANK", "LOCAL_RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT")}
    env.update(OMP_NUM_THREADS="1", PYTHONUNBUFFERED="1", MASTER_PORT=str(free_port()))
    if not os.environ.get("MIGRATE_TEST_CUDA"):
        env["CUDA_VISIBLE_DEVICES"] = ""
    return env


def run_python(script: Path, args: list[str], save: Path) -> Run:
    """`python script.py ...`: the original, or a converted script run as one process."""
    env = environment()
    command = [sys.executable, str(script), *args, "--save", str(save)]
    return _finish(_launch(command, script.parent, env), save)


def run_torchrun(script: Path, nproc: int, args: list[str], save: Path) -> Run:
    env = environment()
    command = [
        str(BIN / "torchrun"), "--standalone", f"--nproc_per_node={nproc}", str(script), *args, "--save", str(save),
    ]
    return _finish(_launch(command, script.parent, env), save)


def run_deepspeed(script: Path, nproc: int, args: list[str], save: Path) -> Run:
    """The real `deepspeed` launcher; on CPU its accelerator is forced to the CPU (gloo)."""
    return _finish(launch_deepspeed(script, nproc, [*args, "--save", str(save)]), save)


def launch_deepspeed(script: Path, nproc: int, args: list[str]) -> subprocess.CompletedProcess[str]:
    """`deepspeed script args` in the script's folder, as run_deepspeed, for a script without
    `--save`: the finished process, whatever its exit status."""
    env = environment()
    if not os.environ.get("MIGRATE_TEST_CUDA"):
        env["DS_ACCELERATOR"] = "cpu"  # GPUs are hidden (environment()): DeepSpeed must not look for one
    command = [str(BIN / "deepspeed"), "--num_gpus", str(nproc), "--master_port", env["MASTER_PORT"], str(script), *args]
    try:
        return _launch(command, script.parent, env)
    finally:
        remove_deepspeed_buffers(env["MASTER_PORT"])


def run_horovod(script: Path, nproc: int, args: list[str], save: Path) -> Run:
    """The generated run_<script>_horovod.sh (horovodrun, gloo on the CPU) with `nproc` processes;
    horovodrun's `[rank]<stdout>:` prefixes are taken off the output."""
    return _finish(launch_horovod(script, nproc, [*args, "--save", str(save)]), save)


def launch_horovod(script: Path, nproc: int, args: list[str]) -> subprocess.CompletedProcess[str]:
    env = environment()
    env.update(NUM_PROCESSES=str(nproc), PYTHON=sys.executable, PATH=f"{BIN}{os.pathsep}{env.get('PATH', '')}")
    launcher = script.parent / f"run_{script.stem}_horovod.sh"
    process = _launch(["bash", str(launcher), *args], script.parent, env)
    return subprocess.CompletedProcess(process.args, process.returncode, _unprefixed(process.stdout),
                                       _unprefixed(process.stderr))


def _unprefixed(text: str) -> str:
    return re.sub(r"(?m)^\[\d+\]<std(?:out|err)>:", "", text)


# torch 2.13 with gloo can abort a rank while the interpreter shuts down, after the script has
# finished and saved (a gloo worker thread frees the last all-reduce's thread-local state and needs
# the GIL that finalisation no longer gives): measured in 5 of 80 two-rank runs even with the
# converted script's barrier before destroy_process_group. Only that exact failure is run again.
EXIT_ABORT = "terminate called without an active exception"
LAUNCH_TRIES = 3


def _launch(command: list[str], cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    for _ in range(LAUNCH_TRIES):
        process = progress.run(command, cwd=cwd, env=env)
        if process.returncode == 0 or EXIT_ABORT not in process.stderr + process.stdout:
            return process
    return process


def _finish(process: subprocess.CompletedProcess[str], save: Path) -> Run:
    assert process.returncode == 0, f"exit {process.returncode}\n{process.stdout[-3000:]}\n{process.stderr[-6000:]}"
    return Run(process.stdout, process.stderr, flatten(torch.load(save, map_location="cpu", weights_only=True)))


def flatten(state: object, prefix: str = "") -> dict[str, torch.Tensor]:
    """A state dict, or a dict of them ({"generator": ..., "discriminator": ...}), as one flat dict."""
    if isinstance(state, torch.Tensor):
        return {prefix: state}
    assert isinstance(state, dict), type(state)
    flat: dict[str, torch.Tensor] = {}
    for key, value in state.items():
        flat.update(flatten(value, f"{prefix}{key}." if not isinstance(value, torch.Tensor) else f"{prefix}{key}"))
    return flat


def assert_same_weights(actual: dict[str, torch.Tensor], expected: dict[str, torch.Tensor]) -> None:
    assert actual.keys() == expected.keys()
    for key in expected:
        torch.testing.assert_close(actual[key], expected[key], msg=lambda m, k=key: f"{k}: {m}")


def assert_loads_strictly(checkpoint: dict[str, torch.Tensor], original: dict[str, torch.Tensor]) -> None:
    """What `original_model.load_state_dict(checkpoint, strict=True)` checks: the same keys (no
    `module.` prefix), the same shapes and dtypes; plus every tensor on the CPU."""
    assert sorted(checkpoint) == sorted(original), sorted(set(checkpoint) ^ set(original))
    for key, tensor in checkpoint.items():
        assert tensor.shape == original[key].shape and tensor.dtype == original[key].dtype, key
        assert tensor.device.type == "cpu", key


def log_lines(text: str) -> list[str]:
    """The script's own output lines: not the launchers' (torchrun writes none to stdout;
    DeepSpeed's logger lines start with a bracketed time stamp)."""
    return [line for line in text.splitlines() if line.strip() and not line.startswith("[")]


def final_train_loss(output: str) -> float:
    """The last `train_loss X` a sample printed."""
    values = re.findall(r"train_loss[ =:]+([0-9.]+)", output)
    assert values, output[-2000:]
    return float(values[-1])


def loss_lines(output: str) -> list[str]:
    """The sample's own lines that report a loss (not progress bars)."""
    return [line for line in log_lines(output) if "loss" in line.lower() and "%|" not in line]
