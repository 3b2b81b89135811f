"""Fits a small regressor in fit(), which hands the trained network back to the caller: the
caller saves its weights, then rebuilds a fresh network from the file to check it loads."""
import argparse

import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset


class Regressor(nn.Module):
    def __init__(self):
        super().__init__()
        self.hidden = nn.Linear(6, 16)
        self.out = nn.Linear(16, 1)

    def forward(self, x):
        return self.out(torch.relu(self.hidden(x)))


def fit():
    parser = argparse.ArgumentParser()
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--batch-size", type=int, default=12)
    parser.add_argument("--save", default="regressor.pt")
    options = parser.parse_args()
    torch.manual_seed(0)
    data = TensorDataset(torch.randn(96, 6), torch.randn(96, 1))
    loader = DataLoader(data, batch_size=options.batch_size)
    net = Regressor()
    optimizer = torch.optim.SGD(net.parameters(), lr=0.05)
    for epoch in range(options.epochs):
        for x, y in loader:
            optimizer.zero_grad()
            loss = nn.functional.mse_loss(net(x), y)
            loss.backward()
            optimizer.step()
    return options.save, net


if __name__ == "__main__":
    path, net = fit()
    torch.save(net.state_dict(), path)
    check = Regressor()
    check.load_state_dict(torch.load(path))
    print("reloaded", sum(p.numel() for p in check.parameters()), "weights")
