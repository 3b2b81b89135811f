"""--fake-data: each fake split divides like the real one, so a script's fixed batch shapes still fit.

Fast: every fake length in fake_data.LENGTHS against its real length, for the batch sizes and
world sizes in common use. Slow: the fake MNIST split at batch 100 over 2 ranks leaves no short
batch (it left one of 12 items at 512), and `migrate verify --fake-data --to-end` passes a DDP
conversion of tests/verify/scripts/mnist_reshape.py (`x.reshape(100, -1)` on every batch), where
the original used to fail on its own on the fake data's last batch.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from migrate.verify.fake_data import COMMON_BATCHES, LENGTHS

ROOT = Path(__file__).resolve().parents[2]
SHIMS = ROOT / "tests" / "shims"
SCRIPTS = Path(__file__).parent / "scripts"
WORLD_SIZES = range(1, 9)
needs_torchvision = pytest.mark.skipif(importlib.util.find_spec("torchvision") is None,
                                       reason="torchvision is not installed (scripts/bootstrap test)")


def mismatches(real: int, fake: int) -> list[tuple[int, int]]:
    return [(b, w) for b in COMMON_BATCHES for w in WORLD_SIZES if (real % (b * w) == 0) != (fake % (b * w) == 0)]


@pytest.mark.parametrize("dataset", sorted(LENGTHS))
def test_each_fake_split_divides_like_the_real_one(dataset: str) -> None:
    for split, (real, fake) in LENGTHS[dataset].items():
        assert 0 < fake <= 12000, (dataset, split)
        if real is None:  # a folder: no real length to follow
            assert fake % 800 == 0
            continue
        assert fake <= real
        odd = [(b, w) for b, w in mismatches(real, fake) if (b * w) % 125]
        assert odd == [], f"{dataset} {split}: {real} and {fake} divide differently by batch x ranks {odd[:5]}"


def test_mnist_at_batch_100_keeps_its_full_batches_where_512_items_did_not() -> None:
    real, fake = LENGTHS["MNIST"]["train"]
    assert real % (100 * 2) == fake % (100 * 2) == 0
    assert 512 % 100 != 0  # the former fake length: a last batch of 12


PROBE = r'''
import json, torch
from migrate.verify.fake_data import install_fake_datasets
install_fake_datasets()
from torchvision import datasets, transforms
from torch.utils.data import DataLoader, DistributedSampler
train = datasets.MNIST("data", train=True, transform=transforms.ToTensor())
sizes = set()
for rank in (0, 1):
    loader = DataLoader(train, batch_size=100, sampler=DistributedSampler(train, num_replicas=2, rank=rank))
    sizes |= {x.reshape(100, -1).shape[0] for x, _ in loader}
print(json.dumps({"length": len(train), "sizes": sorted(sizes)}))
'''


@pytest.mark.slow
@needs_torchvision
def test_every_fake_mnist_batch_of_100_on_2_ranks_is_full(tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(SHIMS), str(ROOT)])}
    process = subprocess.run([sys.executable, "-c", PROBE], cwd=tmp_path, env=env, capture_output=True, text=True,
                             timeout=300)
    assert process.returncode == 0, process.stderr
    assert json.loads(process.stdout.splitlines()[-1]) == {"length": 12000, "sizes": [100]}
    assert os.listdir(tmp_path) == []


@pytest.mark.slow
@needs_torchvision
def test_verify_to_the_end_on_fake_mnist_passes_a_fixed_batch_reshape(tmp_path: Path) -> None:
    shutil.copy(SCRIPTS / "mnist_reshape.py", tmp_path / "train.py")
    shutil.copy(SCRIPTS / "mnist_reshape_ddp.py", tmp_path / "converted.py")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(SHIMS), str(ROOT)])}
    command = [sys.executable, "-m", "migrate", "verify", "--report", "json", "--fake-data", "--to-end",
               "--converted", str(tmp_path / "converted.py"), str(tmp_path / "train.py")]
    process = subprocess.run(command, capture_output=True, text=True, timeout=500, env=env)
    report = json.loads(process.stdout)
    assert process.returncode == 0, json.dumps(report, indent=1)
    steps = next(c["detail"] for c in report["checks"] if c["name"] == "steps")
    assert steps == ["2 ranks ran the script to its end (60, 60 steps)"]
