"""Compiles the model, checks one forward pass, and only then casts it to half precision."""
import argparse

import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--epochs", type=int, default=2)
    args = parser.parse_args()

    device = "cuda" if torch.cuda.is_available() else "cpu"
    x = torch.randn(256, 16)
    loader = DataLoader(TensorDataset(x, x.roll(1, dims=1)), batch_size=32)

    model = nn.Sequential(nn.Linear(16, 64), nn.SiLU(), nn.Linear(64, 16))
    model = torch.compile(model)
    print("output shape:", model(x[:2]).shape)
    model.half().to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    for epoch in range(args.epochs):
        for inputs, targets in loader:
            inputs, targets = inputs.to(device).half(), targets.to(device).half()
            loss = nn.functional.mse_loss(model(inputs), targets)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()


if __name__ == "__main__":
    main()
