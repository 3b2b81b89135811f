"""A message about one sample, printed in a Dataset's `__getitem__` ("skipping a broken image"), is
left on every rank: each rank reads its own samples, so each message is said once, by the rank that
met the sample; a guard to rank 0 would lose the other ranks' messages. Conversions only."""

from __future__ import annotations

from migrate.api import migrate_source

SCRIPT = '''import torch
import torch.nn as nn
from torch.utils.data import DataLoader, Dataset


class Readings(Dataset):
    def __init__(self, values):
        print(f"{len(values)} readings")
        self.values = values

    def __len__(self):
        return len(self.values)

    def __getitem__(self, i):
        value = self.values[i]
        if value != value:
            print(f"reading {i} is NaN, using 0")
            value = 0.0
        return torch.tensor([value]), torch.tensor([2 * value])


def main():
    loader = DataLoader(Readings([float(v) for v in range(32)]), batch_size=8, shuffle=True)
    model = nn.Linear(1, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=1e-3)
    for x, y in loader:
        optimizer.zero_grad()
        nn.functional.mse_loss(model(x), y).backward()
        optimizer.step()


if __name__ == "__main__":
    main()
'''


def test_a_message_about_one_sample_stays_on_the_rank_that_reads_it() -> None:
    new = migrate_source(SCRIPT, "ddp").new
    assert '        if value != value:\n            print(f"reading {i} is NaN, using 0")\n' in new
    assert '        if dist.get_rank() == 0:\n            print(f"{len(values)} readings")\n' in new
