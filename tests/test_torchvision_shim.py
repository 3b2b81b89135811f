"""tests/shims/sitecustomize.py lets the CUDA-built torchvision wheel import next to the CPU torch.

The check runs in a fresh interpreter with the shim on PYTHONPATH, as the fake-data tests and the
corpus runner use it; this process never imports torchvision.
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest

SHIMS = Path(__file__).resolve().parent / "shims"

pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("torchvision") is None, reason="torchvision is not installed (scripts/bootstrap test)"
)


def run_with_shim(code: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(SHIMS), os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep)}
    return subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)


def test_torchvision_imports_and_runs_with_the_shim() -> None:
    result = run_with_shim(
        "import torch, torchvision\n"
        "from torchvision import transforms\n"
        "data = torchvision.datasets.FakeData(size=4, image_size=(3, 32, 32), num_classes=10,\n"
        "                                     transform=transforms.ToTensor())\n"
        "image, label = data[0]\n"
        "assert image.shape == (3, 32, 32) and 0 <= int(label) < 10, (image.shape, label)\n"
        "model = torchvision.models.resnet18(num_classes=10).eval()\n"
        "with torch.no_grad():\n"
        "    out = model(torch.stack([data[i][0] for i in range(2)]))\n"
        "assert out.shape == (2, 10), out.shape\n"
        "print('ok')\n"
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "ok"


def test_the_shim_imports_nothing_until_torchvision_is_imported() -> None:
    result = run_with_shim("import sys\nprint('torch' in sys.modules, 'sitecustomize' in sys.modules)\n")
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["False", "True"]
