"""Warms up in float32, then switches the model (and its inputs) to float64 for the last epochs."""
import argparse

import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--epochs", type=int, default=4)
    parser.add_argument("--precise-from", type=int, default=2)
    args = parser.parse_args()

    x = torch.randn(320, 5)
    y = torch.exp(-x.pow(2).sum(dim=1, keepdim=True))
    loader = DataLoader(TensorDataset(x, y), batch_size=32, shuffle=True)
    model = nn.Sequential(nn.Linear(5, 40), nn.Softplus(), nn.Linear(40, 1))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    dtype = torch.float32
    for epoch in range(args.epochs):
        if epoch == args.precise_from:
            model.double()
            dtype = torch.float64
        for inputs, targets in loader:
            loss = nn.functional.mse_loss(model(inputs.to(dtype)), targets.to(dtype))
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()


if __name__ == "__main__":
    main()
