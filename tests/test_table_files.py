"""A table the script writes and then reads back by name (`train_df.to_csv("train.csv")`, then
`TextDataset(csv_file="train.csv")`; w019's shape): written on rank 0 alone (every rank writing the
same file at once can hand another rank a half-written file), and one barrier before the first
read, after which every file written above it is whole. Conversions only."""

from __future__ import annotations

from migrate.api import migrate_source

SCRIPT = '''import pandas as pd
import torch
import torch.nn as nn
from torch.utils.data import DataLoader, Dataset


class TableDataset(Dataset):
    def __init__(self, csv_file):
        self.rows = pd.read_csv(csv_file)

    def __len__(self):
        return len(self.rows)

    def __getitem__(self, i):
        row = self.rows.iloc[i]
        return torch.tensor([row["x"]], dtype=torch.float32), torch.tensor([row["y"]], dtype=torch.float32)


def main():
    table = pd.DataFrame({"x": range(64), "y": [2 * v for v in range(64)]})
    train_df, val_df = table.iloc[:48], table.iloc[48:]
    train_df.to_csv("train.csv", index=None)
    val_df.to_csv("val.csv", index=None)
    train_set = TableDataset(csv_file="train.csv")
    val_set = TableDataset(csv_file="val.csv")
    loader = DataLoader(train_set, batch_size=8, shuffle=True)
    model = nn.Linear(1, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=1e-4)
    for x, y in loader:
        optimizer.zero_grad()
        nn.functional.mse_loss(model(x), y).backward()
        optimizer.step()
    print(len(val_set))


if __name__ == "__main__":
    main()
'''


def test_tables_are_written_on_rank_zero_and_read_after_one_barrier() -> None:
    new = migrate_source(SCRIPT, "ddp").new
    assert ('    if dist.get_rank() == 0:\n'
            '        train_df.to_csv("train.csv", index=None)\n'
            '        val_df.to_csv("val.csv", index=None)\n'
            '    dist.barrier()  # rank 0 has finished writing "train.csv"\n'
            '    train_set = TableDataset(csv_file="train.csv")\n'
            '    val_set = TableDataset(csv_file="val.csv")\n') in new
