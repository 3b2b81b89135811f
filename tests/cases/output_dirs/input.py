"""Output folders: a fresh run folder each time, a checkpoint folder kept between runs."""
import argparse
import os
import shutil

import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--run-dir", default="runs/latest")
    parser.add_argument("--ckpt-dir", default="checkpoints")
    args = parser.parse_args()

    # start from an empty run folder
    if os.path.exists(args.run_dir):
        shutil.rmtree(args.run_dir)
    os.mkdir(args.run_dir)
    os.mkdir(os.path.join(args.run_dir, "samples"))

    if not os.path.exists(args.ckpt_dir):
        os.makedirs(args.ckpt_dir)
    try:
        os.makedirs("logs")
    except FileExistsError:
        pass

    dataset = TensorDataset(torch.randn(128, 4), torch.randn(128, 1))
    loader = DataLoader(dataset, batch_size=16, shuffle=True)
    model = nn.Linear(4, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for epoch in range(3):
        for x, y in loader:
            loss = nn.functional.mse_loss(model(x), y)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        epoch_dir = os.path.join(args.ckpt_dir, f"epoch{epoch}")
        if not os.path.isdir(epoch_dir):
            os.mkdir(epoch_dir)
        torch.save(model.state_dict(), os.path.join(epoch_dir, "model.pt"))


if __name__ == "__main__":
    main()
