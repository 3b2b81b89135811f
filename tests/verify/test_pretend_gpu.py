"""Pretend-GPU mode (migrate/verify/pretend_gpu.py) on the hand-made scripts in tests/verify/pretend/.

The fast tests run every single-process script in ONE child process (torch is imported once):
the child installs the mode with two pretend GPUs and runs each script as `__main__`, recording
its output or the error it raised. The slow tests launch torchrun with 2 ranks.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests import progress

ROOT = Path(__file__).resolve().parents[2]
SCRIPTS = Path(__file__).resolve().parent / "pretend"
SINGLE = ("model_on_gpu_inputs_on_cpu", "model_and_inputs_on_gpu", "cuda_with_index", "factory_on_gpu",
          "autocast_and_scaler", "numpy_of_gpu_tensor", "inputs_on_gpu_model_on_cpu", "semantics",
          "device_past_the_count", "ddp_of_cpu_model_under_nccl", "data_parallel_one_gpu")

DRIVER = r"""
import contextlib, io, json, runpy, sys
from migrate.verify import pretend_gpu
pretend_gpu.install()
outcomes = {}
for path in sys.argv[2:]:
    pretend_gpu.STATE.current = 0
    pretend_gpu.STATE.nccl_groups.clear()
    output = io.StringIO()
    outcome = {"error": None, "type": None}
    try:
        with contextlib.redirect_stdout(output):
            runpy.run_path(path, run_name="__main__")
    except BaseException as error:
        outcome = {"error": str(error), "type": type(error).__name__,
                   "runtime_error": isinstance(error, RuntimeError)}
    outcome["stdout"] = output.getvalue()
    outcomes[path.rsplit("/", 1)[-1][:-3]] = outcome
with open(sys.argv[1], "w") as stream:
    json.dump(outcomes, stream)
"""


def _env() -> dict[str, str]:
    env = {**os.environ, "MIGRATE_PRETEND_GPUS": "2", "PYTHONPATH": str(ROOT)}
    env.pop("LOCAL_WORLD_SIZE", None)
    return env


@pytest.fixture(scope="module")
def outcomes(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, object]]:
    result = tmp_path_factory.mktemp("pretend") / "outcomes.json"
    paths = [str(SCRIPTS / f"{name}.py") for name in SINGLE]
    done = subprocess.run([sys.executable, "-c", DRIVER, str(result), *paths], cwd=ROOT, env=_env(),
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(result.read_text())


def _refused(outcome: dict[str, object], where: str, *words: str) -> None:
    assert outcome["type"] == "PretendGPUError" and outcome["runtime_error"], outcome
    text = str(outcome["error"])
    assert text.startswith(f"pretend GPU: tests/verify/pretend/{where} "), text
    for word in words:
        assert word in text, text


def _moved(outcome: dict[str, object]) -> float:
    assert outcome["error"] is None, outcome
    return float(str(outcome["stdout"]).split("moved ")[1].split()[0])


def test_model_on_gpu_with_cpu_batches_fails_at_the_forward(outcomes: dict[str, dict[str, object]]) -> None:
    _refused(outcomes["model_on_gpu_inputs_on_cpu"], "model_on_gpu_inputs_on_cpu.py:13:",
             "model on cuda:0, input on cpu", "Sequential")


def test_model_and_batches_on_gpu_train(outcomes: dict[str, dict[str, object]]) -> None:
    outcome = outcomes["model_and_inputs_on_gpu"]
    assert "device cuda:0" in str(outcome["stdout"]) and "memory 0" in str(outcome["stdout"])
    assert _moved(outcome) > 0.1


def test_cuda_with_an_explicit_index(outcomes: dict[str, dict[str, object]]) -> None:
    _refused(outcomes["cuda_with_index"], "cuda_with_index.py:8:", "model on cuda:1, input on cuda:0")


def test_factory_with_device_cuda(outcomes: dict[str, dict[str, object]]) -> None:
    _refused(outcomes["factory_on_gpu"], "factory_on_gpu.py:8:", "two devices, cuda:0 and cpu")


def test_autocast_and_grad_scaler_train(outcomes: dict[str, dict[str, object]]) -> None:
    assert _moved(outcomes["autocast_and_scaler"]) > 0.01


def test_numpy_of_a_gpu_tensor(outcomes: dict[str, dict[str, object]]) -> None:
    _refused(outcomes["numpy_of_gpu_tensor"], "numpy_of_gpu_tensor.py:5:", "Tensor.cpu()")


def test_batches_on_gpu_model_on_cpu(outcomes: dict[str, dict[str, object]]) -> None:
    _refused(outcomes["inputs_on_gpu_model_on_cpu"], "inputs_on_gpu_model_on_cpu.py:7:", "model on cpu, input on cuda:0")


def test_what_torch_cuda_answers(outcomes: dict[str, dict[str, object]]) -> None:
    outcome = outcomes["semantics"]
    assert outcome["error"] is None, outcome
    assert outcome["stdout"] == "ok pretend GPU (CPU)\ntypes ok\n"


def test_data_parallel_on_one_pretend_gpu(outcomes: dict[str, dict[str, object]]) -> None:
    """nn.DataParallel divides by the devices' total memory (a 0 there was a ZeroDivisionError)."""
    outcome = outcomes["data_parallel_one_gpu"]
    assert outcome["error"] is None, outcome
    assert outcome["stdout"] == "dp True\n"


def test_device_past_the_count(outcomes: dict[str, dict[str, object]]) -> None:
    _refused(outcomes["device_past_the_count"], "device_past_the_count.py:4:", "CUDA device 2 does not exist")


def test_ddp_of_a_cpu_model_under_nccl(outcomes: dict[str, dict[str, object]]) -> None:
    _refused(outcomes["ddp_of_cpu_model_under_nccl"], "ddp_of_cpu_model_under_nccl.py:8:", "NCCL only moves CUDA tensors")


def _torchrun(script: str, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}
    env.pop("MIGRATE_PRETEND_GPUS", None)
    command = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2",
               "-m", "migrate.verify.pretend_gpu", f"tests/verify/pretend/{script}", *args]
    return progress.run_ranks(command, cwd=ROOT, env=env)  # a hang fails it, slowness does not


@pytest.mark.slow
def test_all_reduce_under_nccl_needs_gpu_tensors() -> None:
    right = _torchrun("all_reduce_nccl.py")
    assert right.returncode == 0, right.stderr[-3000:]
    assert right.stdout.count("reduced [3.0, 3.0, 3.0]") == 2
    wrong = _torchrun("all_reduce_nccl.py", "cpu")
    assert wrong.returncode != 0
    assert ("pretend GPU: tests/verify/pretend/all_reduce_nccl.py:16: all_reduce of a tensor on cpu under a process "
            "group created with backend 'nccl'") in wrong.stderr


@pytest.mark.slow
def test_ddp_on_pretend_gpus_trains_and_ranks_agree() -> None:
    done = _torchrun("ddp_on_gpu.py")
    assert done.returncode == 0, done.stderr[-3000:]
    lines = sorted(line for line in done.stdout.splitlines() if line.startswith("rank "))
    assert [line.split(" moved")[0] for line in lines] == ["rank 0 device cuda:0 equal True",
                                                           "rank 1 device cuda:1 equal True"]
    assert all(float(line.split("moved ")[1]) > 0.1 for line in lines)


@pytest.mark.slow
def test_fsdp2_of_a_model_left_on_cpu_fails_at_the_loss() -> None:
    """The default mesh is CUDA: fully_shard moves the parameters and the root's inputs to the GPU
    (as on a GPU machine), so the CPU labels meet the GPU output in the loss."""
    wrong = _torchrun("fsdp2_model_left_on_cpu.py")
    assert wrong.returncode != 0
    assert ("pretend GPU: tests/verify/pretend/fsdp2_model_left_on_cpu.py:27: cross_entropy got tensors on two "
            "devices, cuda:0 and cpu") in wrong.stderr
    right = _torchrun("fsdp2_model_left_on_cpu.py", "gpu")
    assert right.returncode == 0, right.stderr[-3000:]
    assert "rank 1 output on cuda:1" in right.stdout
