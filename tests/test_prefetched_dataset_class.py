"""A dataset class of the project that downloads in its own `__init__` under `if download:`
(`download_extract(...)`, a helper of that module), built by the script with `download=opts.download`
(w044's VOCSegmentation): the script's construction is the download this tool makes once per
node (the first process builds it with the script's value, then a barrier, then every rank builds
it with download=False), so the class's own download runs on that process alone and is left as
written: no MIG120, and no barrier inside the class, which only that process would reach."""

from __future__ import annotations

from pathlib import Path

from migrate.api import migrate_source
from migrate.project_files import read_from_disk

DATASETS = '''import os
import tarfile
import urllib.request

import torch
from torch.utils.data import Dataset


def download_extract(url, root, filename):
    urllib.request.urlretrieve(url, os.path.join(root, filename))
    with tarfile.open(os.path.join(root, filename)) as archive:
        archive.extractall(root)


class Shapes(Dataset):
    def __init__(self, root, download=False):
        self.root = root
        if download:
            download_extract("https://example.org/shapes.tar", root, "shapes.tar")
        if not os.path.isdir(os.path.join(root, "shapes")):
            raise RuntimeError("Dataset not found: use download=True")
        self.items = sorted(os.listdir(os.path.join(root, "shapes")))

    def __len__(self):
        return len(self.items)

    def __getitem__(self, i):
        return torch.zeros(8), torch.zeros(1)
'''

TRAIN = '''import argparse

import torch
import torch.nn as nn
from torch.utils.data import DataLoader
from datasets import Shapes


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--download", action="store_true")
    opts = parser.parse_args()
    train_set = Shapes("data", download=opts.download)
    loader = DataLoader(train_set, batch_size=4, shuffle=True)
    model = nn.Linear(8, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for x, y in loader:
        optimizer.zero_grad()
        nn.functional.mse_loss(model(x), y).backward()
        optimizer.step()


if __name__ == "__main__":
    main()
'''


def test_the_class_download_runs_where_the_dataset_is_prefetched_and_is_left_as_written(tmp_path: Path) -> None:
    (tmp_path / "datasets.py").write_text(DATASETS)
    result = migrate_source(TRAIN, "ddp", path=str(tmp_path / "train.py"), read_module=read_from_disk)
    assert not [f for f in result.findings if f.code == "MIG120"]
    assert not [m for m in result.modules if m.path.endswith("datasets.py")]  # left as written
    assert ('        Shapes("data", download=opts.download)\n'
            '    dist.barrier()\n'
            '    train_set = Shapes("data", download=False)\n') in result.new
