"""A two-input model run through the functional DataParallel when several GPUs are asked for."""
import argparse

import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset


class Pair(nn.Module):
    def __init__(self):
        super().__init__()
        self.left = nn.Linear(6, 3)
        self.right = nn.Linear(6, 3)

    def forward(self, a, b):
        return self.left(a) + self.right(b)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--gpus", type=int, default=0)
    args = parser.parse_args()
    a, b = torch.randn(96, 6), torch.randn(96, 6)
    y = torch.randn(96, 3)
    loader = DataLoader(TensorDataset(a, b, y), batch_size=12, shuffle=True)
    net = Pair()
    optimizer = torch.optim.Adam(net.parameters(), lr=1e-3)
    for epoch in range(2):
        for left, right, target in loader:
            if args.gpus > 1:
                out = nn.parallel.data_parallel(net, (left, right), list(range(args.gpus)))
            else:
                out = net(left, right)
            loss = (out - target).pow(2).mean()
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()


if __name__ == "__main__":
    main()
