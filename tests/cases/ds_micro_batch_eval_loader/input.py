"""Two DataLoaders called `loader`: evaluate() builds its own over the test set (batches of 1000),
and is written above the training one (batches of --batch-size), which train_epoch() iterates
under the same name. DeepSpeed's micro batch is the training loader's."""
import argparse

import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset


def evaluate(model, test_set):
    loader = DataLoader(test_set, batch_size=1000)
    right = 0
    with torch.no_grad():
        for inputs, labels in loader:
            right += (model(inputs).argmax(dim=1) == labels).sum().item()
    return right / len(test_set)


def train_epoch(model, loader, optimizer):
    for inputs, labels in loader:
        optimizer.zero_grad()
        loss = nn.functional.cross_entropy(model(inputs), labels)
        loss.backward()
        optimizer.step()


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--epochs", type=int, default=2)
    args = parser.parse_args()
    train_set = TensorDataset(torch.randn(512, 10), torch.randint(0, 3, (512,)))
    test_set = TensorDataset(torch.randn(128, 10), torch.randint(0, 3, (128,)))
    loader = DataLoader(train_set, batch_size=args.batch_size, shuffle=True)
    model = nn.Sequential(nn.Linear(10, 32), nn.ReLU(), nn.Linear(32, 3))
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    for epoch in range(args.epochs):
        train_epoch(model, loader, optimizer)
        print(f"epoch {epoch}: accuracy {evaluate(model, test_set):.3f}")


if __name__ == "__main__":
    main()
