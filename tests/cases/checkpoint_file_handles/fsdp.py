"""Keeps the best model in a file written and read through open() handles."""
import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset

BEST = "best_model.pt"


def save_best(model, path):
    with open(path, "wb") as handle:
        torch.save(model.state_dict(), handle)


def load_best(model, path):
    with open(path, "rb") as handle:
        model.load_state_dict(torch.load(handle))


def main():
    data = TensorDataset(torch.randn(256, 6), torch.randn(256, 1))
    loader = DataLoader(data, batch_size=16, shuffle=True)
    model = nn.Sequential(nn.Linear(6, 24), nn.ReLU(), nn.Linear(24, 1))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    best = float("inf")
    for epoch in range(5):
        total = 0.0
        for features, targets in loader:
            optimizer.zero_grad()
            loss = nn.functional.mse_loss(model(features), targets)
            loss.backward()
            optimizer.step()
            total += loss.item()
        if total < best:
            best = total
            save_best(model, BEST)
    load_best(model, BEST)


if __name__ == "__main__":
    main()
