"""Learns one input offset that fools a fixed scorer: the scorer itself is frozen whole, and the
optimizer trains a plain tensor."""
import argparse

import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset


class Scorer(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(10, 20), nn.ReLU(), nn.Linear(20, 2))

    def forward(self, x):
        return self.net(x)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=3)
    args = parser.parse_args()

    samples = torch.randn(300, 10)
    wanted = torch.ones(300, dtype=torch.long)
    loader = DataLoader(TensorDataset(samples, wanted), batch_size=30, shuffle=True)

    scorer = Scorer()
    scorer.requires_grad_(False)
    offset = torch.zeros(1, 10, requires_grad=True)
    optimizer = torch.optim.Adam([offset], lr=0.05)
    for step in range(args.steps):
        for x, y in loader:
            loss = nn.functional.cross_entropy(scorer(x + offset), y)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
    torch.save(offset.detach(), "offset.pt")


if __name__ == "__main__":
    main()
