# nn.DataParallel wraps the constructor call itself: the model must still be built once DP goes.
import argparse

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


def build(width):
    return nn.Sequential(nn.Linear(4, width), nn.ReLU(), nn.Linear(width, 1))


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--width", type=int, default=16)
    args = parser.parse_args()
    model = torch.nn.DataParallel(build(args.width))
    model.cuda()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    loader = DataLoader(TensorDataset(torch.randn(64, 4), torch.randn(64, 1)), batch_size=8, shuffle=True)
    for epoch in range(2):
        for x, y in loader:
            x, y = x.cuda(), y.cuda()
            loss = nn.functional.mse_loss(model(x), y)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
    torch.save({"state_dict": model.state_dict()}, "model.pth")


if __name__ == "__main__":
    main()
