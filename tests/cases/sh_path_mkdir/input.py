"""Folders made with pathlib and os on every rank."""
import argparse
import os
import time
from pathlib import Path

import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", default="out")
    args = parser.parse_args()

    Path(args.out).mkdir(parents=True)
    Path(args.out, "figures").mkdir(exist_ok=False)
    os.mkdir(os.path.join(args.out, "ckpt"))
    run_dir = Path("runs") / time.strftime("%Y%m%d-%H%M%S")
    run_dir.mkdir(parents=True)
    try:
        os.mkdir("cache")
    except FileExistsError:
        print("cache already there")

    dataset = TensorDataset(torch.randn(64, 4), torch.randn(64, 1))
    loader = DataLoader(dataset, batch_size=16, shuffle=True)
    model = nn.Linear(4, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for epoch in range(2):
        for x, y in loader:
            loss = nn.functional.mse_loss(model(x), y)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        torch.save(model.state_dict(), run_dir / f"model{epoch}.pt")


if __name__ == "__main__":
    main()
