"""Training steps written in a few compact shapes."""
import argparse

import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset


def clip(model, limit):
    torch.nn.utils.clip_grad_norm_(model.parameters(), limit)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--clip", type=float, default=0.0)
    args = parser.parse_args()
    data = TensorDataset(torch.randn(64, 4), torch.randn(64, 1))
    loader = DataLoader(data, batch_size=16, shuffle=True)
    model = nn.Linear(4, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for epoch in range(2):
        for x, y in loader:
            optimizer.zero_grad()
            loss = nn.functional.mse_loss(model(x), y)
            loss.backward(); optimizer.step()
    for epoch in range(2):
        for x, y in loader:
            optimizer.zero_grad()
            loss = nn.functional.mse_loss(model(x), y)
            loss.backward()
            if args.clip > 0:
                clip(model, args.clip)
                optimizer.step()
            else:
                optimizer.step()
    for epoch in range(2):
        for x, y in loader:
            optimizer.zero_grad()
            loss = nn.functional.mse_loss(model(x), y)
            loss.backward()
            clip(model, 1.0)
            if epoch == 0:
                optimizer.step()
            else:
                optimizer.step()


if __name__ == "__main__":
    main()
