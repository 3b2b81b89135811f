"""Classifier trained for a number of steps from an endless stream of shuffled batches."""

import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset


def infinite(loader):
    while True:
        for batch in loader:
            yield batch


def evaluate(model, dataset):
    loader = DataLoader(dataset, batch_size=64, shuffle=True)
    correct = 0
    with torch.no_grad():
        for x, y in loader:
            correct += (model(x).argmax(1) == y).sum().item()
    return correct / len(dataset)


def main():
    torch.manual_seed(0)
    train_set = TensorDataset(torch.randn(256, 8), torch.randint(0, 3, (256,)))
    held_out = TensorDataset(torch.randn(64, 8), torch.randint(0, 3, (64,)))
    model = nn.Sequential(nn.Linear(8, 32), nn.ReLU(), nn.Linear(32, 3))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
    batches = infinite(DataLoader(train_set, 16, True))
    for step in range(200):
        x, y = next(batches)
        loss = nn.functional.cross_entropy(model(x), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        if step % 50 == 0:
            print(f"step {step} loss {loss.item():.3f} accuracy {evaluate(model, held_out):.3f}")


if __name__ == "__main__":
    main()
