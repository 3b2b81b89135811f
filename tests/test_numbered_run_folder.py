"""A run folder numbered from the folders that exist (`run_id = len(glob.glob("runs/exp_*"))`,
then `os.makedirs(f"runs/exp_{run_id}")`; w045's Saver): a rank that lists after rank 0 made its
folder takes the next number and would make a second, empty folder. The folder is made on rank 0,
then a barrier. Conversions only."""

from __future__ import annotations

from migrate.api import migrate_source

SCRIPT = '''import glob
import os

import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset


class Saver:
    def __init__(self, root):
        self.runs = sorted(glob.glob(os.path.join(root, "exp_*")))
        run_id = len(self.runs)
        self.folder = os.path.join(root, "exp_{}".format(run_id))
        if not os.path.exists(self.folder):
            os.makedirs(self.folder)

    def save(self, model):
        torch.save(model.state_dict(), os.path.join(self.folder, "model.pt"))


def main():
    saver = Saver("runs")
    loader = DataLoader(TensorDataset(torch.randn(32, 8), torch.randn(32, 1)), batch_size=8, shuffle=True)
    model = nn.Linear(8, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for x, y in loader:
        optimizer.zero_grad()
        nn.functional.mse_loss(model(x), y).backward()
        optimizer.step()
    saver.save(model)


if __name__ == "__main__":
    main()
'''


def test_a_folder_numbered_from_a_listing_is_made_on_rank_zero_then_a_barrier() -> None:
    new = migrate_source(SCRIPT, "ddp").new
    assert ("        if dist.get_rank() == 0:\n"
            "            if not os.path.exists(self.folder):\n"
            "                os.makedirs(self.folder)\n"
            "        dist.barrier()  # the other ranks wait for the directory rank 0 made\n") in new
