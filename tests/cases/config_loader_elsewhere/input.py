"""The training loader comes from the project's own data module: nothing here says it is a
DataLoader, so its `.batch_size` is not read; the config's batch size is left to the reviewer."""
import argparse

import torch
import torch.nn as nn

from data import get_loader


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--batch-size", type=int, default=64)
    args = parser.parse_args()
    loader = get_loader(args)
    model = nn.Linear(8, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    for epoch in range(3):
        for x, y in loader:
            loss = nn.functional.mse_loss(model(x), y)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
    torch.save(model.state_dict(), "elsewhere.pt")


if __name__ == "__main__":
    main()
