"""`migrate verify --pretend-gpu`: the GPU path of a script that hard-codes `.cuda()`, checked on a
machine without a GPU. The original runs under the same pretend GPU, so it runs here at all."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPTS = Path(__file__).parent / "scripts"


def verify(folder: Path, *options: str) -> tuple[int, dict, str]:
    shutil.copy(SCRIPTS / "cuda_only.py", folder / "train.py")
    command = [sys.executable, "-m", "migrate", "verify", "--report", "json", "--pretend-gpu", *options,
               str(folder / "train.py")]
    process = subprocess.run(command, capture_output=True, text=True, timeout=400)
    assert process.stdout, process.stderr
    return process.returncode, json.loads(process.stdout), process.stderr


def detail(report: dict, name: str) -> str:
    return "\n".join(next(c["detail"] for c in report["checks"] if c["name"] == name))


@pytest.mark.slow
def test_the_tool_s_conversion_of_a_cuda_only_script_passes_on_the_pretend_gpu(tmp_path: Path) -> None:
    code, report, stderr = verify(tmp_path)
    assert code == 0, json.dumps(report, indent=1) + stderr
    assert report["status"] == "passed"


@pytest.mark.slow
def test_batches_left_on_the_cpu_beside_a_gpu_model_fail_with_the_line(tmp_path: Path) -> None:
    shutil.copy(SCRIPTS / "cuda_only_wrong_ddp.py", tmp_path / "converted.py")
    code, report, stderr = verify(tmp_path, "--converted", str(tmp_path / "converted.py"))
    assert code == 1, json.dumps(report, indent=1) + stderr
    steps = detail(report, "steps")
    assert "pretend GPU" in steps and "train.py:32: model on cuda:0, input on cpu" in steps, steps


def test_pretend_gpu_with_real_gpus_or_deepspeed_is_refused() -> None:
    script = str(SCRIPTS / "cuda_only.py")
    for extra, said in ((["--gpu"], "--gpu"), (["--target", "deepspeed"], "--pretend-gpu")):
        process = subprocess.run([sys.executable, "-m", "migrate", "verify", "--pretend-gpu", *extra, script],
                                 capture_output=True, text=True, timeout=60)
        assert process.returncode == 2 and said in process.stderr, process.stderr
