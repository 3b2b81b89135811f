"""A dataset download in another module of the project, under a test of a function's parameter
that every caller hands a value of the command line (`if name == "mnist":` in
`data.make_dataset(name)`, called as `data.make_dataset(args.dataset)`, `args` read by a helper
module, `args = cli.args()`; w033's shape): every rank takes the same branch, so each branch
downloads on the first process of each node, behind a barrier, instead of MIG120. Conversions only."""

from __future__ import annotations

from pathlib import Path

from migrate.api import migrate_source
from migrate.project_files import read_from_disk

CLI = '''import argparse


def args():
    parser = argparse.ArgumentParser()
    parser.add_argument("--dataset", default="mnist")
    return parser.parse_args()
'''

DATA = '''from torch.utils.data import DataLoader
from torchvision import datasets, transforms


def make_dataset(name):
    if name == "mnist":
        name = datasets.MNIST("data/MNIST", transform=transforms.ToTensor(), download=True)
    elif name == "fashion":
        name = datasets.FashionMNIST("data/FashionMNIST", transform=transforms.ToTensor(), download=True)
    else:
        raise ValueError(name)
    return DataLoader(name, batch_size=32, shuffle=True)
'''

TRAIN = '''import torch
import torch.nn as nn

import cli
import data

args = cli.args()
loader = data.make_dataset(args.dataset)
model = nn.Linear(28 * 28, 10)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
for x, y in loader:
    optimizer.zero_grad()
    nn.functional.cross_entropy(model(x.flatten(1)), y).backward()
    optimizer.step()
'''


def test_each_branch_downloads_once_per_node_when_every_rank_takes_the_same_one(tmp_path: Path) -> None:
    (tmp_path / "cli.py").write_text(CLI)
    (tmp_path / "data.py").write_text(DATA)
    result = migrate_source(TRAIN, "ddp", path=str(tmp_path / "train.py"), read_module=read_from_disk)
    assert not [f for f in result.findings if f.code == "MIG120"]
    [data] = [m for m in result.modules if m.path.endswith("data.py")]
    for dataset, root in (("MNIST", "data/MNIST"), ("FashionMNIST", "data/FashionMNIST")):
        assert (f'            datasets.{dataset}("{root}", download=True)\n'
                "        dist.barrier()\n"
                f'        name = datasets.{dataset}("{root}", transform=transforms.ToTensor(), download=False)\n') in data.new
