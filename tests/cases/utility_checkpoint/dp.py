"""Fine-tunes a classifier; checkpoints go through the project's own helper module."""
import argparse

import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset

from utils import *  # save_checkpoint, AverageMeter


def validate(model, loader, criterion):
    model.eval()
    total = 0.0
    with torch.no_grad():
        for x, y in loader:
            total += criterion(model(x), y).item()
    model.train()
    return total / len(loader)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--epochs", type=int, default=30)
    parser.add_argument("--lr", type=float, default=0.05)
    args = parser.parse_args()

    x, y = torch.randn(2048, 10), torch.randint(0, 2, (2048,))
    train_loader = DataLoader(TensorDataset(x[:1792], y[:1792]), batch_size=64, shuffle=True)
    val_loader = DataLoader(TensorDataset(x[1792:], y[1792:]), batch_size=256)

    model = nn.Sequential(nn.Linear(10, 32), nn.ReLU(), nn.Linear(32, 2))
    criterion = nn.CrossEntropyLoss()
    optimizer = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=0.9)
    scheduler = torch.optim.lr_scheduler.ReduceLROnPlateau(optimizer, factor=0.5, patience=2)

    best = float("inf")
    for epoch in range(args.epochs):
        for inputs, targets in train_loader:
            optimizer.zero_grad()
            loss = criterion(model(inputs), targets)
            loss.backward()
            optimizer.step()
        val_loss = validate(model, val_loader, criterion)
        scheduler.step(val_loss)
        is_best = val_loss < best
        best = min(best, val_loss)
        save_checkpoint({"epoch": epoch, "state_dict": model.state_dict(), "best": best}, is_best)


if __name__ == "__main__":
    main()
