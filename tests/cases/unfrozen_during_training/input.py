"""Gradual unfreezing: the pretrained trunk stays frozen for the first epochs, then trains too."""
import argparse

import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--epochs", type=int, default=4)
    parser.add_argument("--unfreeze-at", type=int, default=2)
    args = parser.parse_args()

    x = torch.randn(256, 6)
    y = (x.sum(dim=1) > 0).long()
    loader = DataLoader(TensorDataset(x, y), batch_size=32, shuffle=True)

    model = nn.Sequential(nn.Linear(6, 24), nn.ReLU(), nn.Linear(24, 2))
    trunk = model[0]
    trunk.requires_grad_(False)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for epoch in range(args.epochs):
        if epoch == args.unfreeze_at:
            for param in model[0].parameters():
                param.requires_grad = True
        for inputs, labels in loader:
            loss = nn.functional.cross_entropy(model(inputs), labels)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()


if __name__ == "__main__":
    main()
