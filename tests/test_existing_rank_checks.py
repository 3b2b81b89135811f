"""What the conversion takes for a rank check the script already has (steps.rank_zero.under_rank_check):

- `if int(os.environ.get("RANK", "0")) == 0:` is one, whatever the case of the word: no second test
  is added to it;
- `if args.local_rank != -1:` is not: it says whether the run is distributed, and is true on every
  rank of one, so the print under it is guarded like any other.
Conversion only."""

from __future__ import annotations

from migrate import migrate_source

SCRIPT = """\
import argparse
import os

import torch
import torch.nn as nn

parser = argparse.ArgumentParser()
parser.add_argument("--local_rank", type=int, default=-1)
args = parser.parse_args()

model = nn.Linear(4, 2)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(torch.randn(64, 4), torch.randn(64, 2)), batch_size=8)
for epoch in range(2):
    for x, y in loader:
        optimizer.zero_grad()
        nn.functional.mse_loss(model(x), y).backward()
        optimizer.step()
    if int(os.environ.get("RANK", "0")) == 0:
        print("epoch", epoch)
    if args.local_rank != -1:
        print("a distributed run")
"""


def test_an_upper_case_rank_test_is_kept_as_it_is_and_a_distributed_ness_test_is_not_one() -> None:
    new = migrate_source(SCRIPT, "ddp", path="train.py").new
    assert '    if int(os.environ.get("RANK", "0")) == 0:\n        print("epoch", epoch)\n' in new
    assert '    if args.local_rank != -1 and dist.get_rank() == 0:\n        print("a distributed run")\n' in new
