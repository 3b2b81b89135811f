"""A regressor whose forward() adds an auxiliary correction only when asked to, and which drops
its middle block at random while training (layer drop)."""
import argparse
import random

import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset


class DropNet(nn.Module):
    def __init__(self, width=32, drop=0.25):
        super().__init__()
        self.drop = drop
        self.stem = nn.Linear(4, width)
        self.middle = nn.Sequential(nn.Linear(width, width), nn.GELU())
        self.out = nn.Linear(width, 1)
        self.correction = nn.Linear(4, 1)

    def forward(self, x, corrected=False):
        h = torch.relu(self.stem(x))
        if not (self.training and random.random() < self.drop):
            h = h + self.middle(h)
        y = self.out(h)
        if corrected:
            y = y + self.correction(x)
        return y


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--epochs", type=int, default=3)
    args = parser.parse_args()

    x = torch.randn(640, 4)
    y = torch.sin(x).sum(dim=1, keepdim=True)
    loader = DataLoader(TensorDataset(x, y), batch_size=64, shuffle=True)
    model = DropNet()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    for epoch in range(args.epochs):
        model.train()
        for inputs, targets in loader:
            loss = nn.functional.mse_loss(model(inputs), targets)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        model.eval()
        with torch.no_grad():
            error = nn.functional.mse_loss(model(x, corrected=True), y).item()
        print(f"epoch {epoch}: corrected error {error:.4f}")


if __name__ == "__main__":
    main()
