"""The batch size reaches the training function as a parameter, written as a number in the call:
`train(args, 32)` makes 32 the config's batch size."""
import argparse

import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset


def train(args, batch_size):
    dataset = TensorDataset(torch.randn(512, 8), torch.randn(512, 1))
    loader = DataLoader(dataset, batch_size=batch_size, shuffle=True)
    model = nn.Linear(8, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=args.lr)
    for epoch in range(args.epochs):
        for x, y in loader:
            loss = nn.functional.mse_loss(model(x), y)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
    torch.save(model.state_dict(), "parameter.pt")


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--lr", type=float, default=0.01)
    args = parser.parse_args()
    train(args, 32)
