"""The command line is parsed by a helper that returns `parser.parse_args()`: the argparse default
(64) is the config's batch size, and `args.batch_size` overwrites it at run time."""
import argparse

import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset


def get_args():
    parser = argparse.ArgumentParser()
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--epochs", type=int, default=3)
    return parser.parse_args()


def main():
    args = get_args()
    dataset = TensorDataset(torch.randn(512, 8), torch.randn(512, 1))
    loader = DataLoader(dataset, batch_size=args.batch_size, shuffle=True)
    model = nn.Linear(8, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    for epoch in range(args.epochs):
        for x, y in loader:
            loss = nn.functional.mse_loss(model(x), y)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
    torch.save(model.state_dict(), "args_helper.pt")


if __name__ == "__main__":
    main()
