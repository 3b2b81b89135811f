"""Checkpoints written atomically (temp file, then rename); the best one is reloaded for the test."""
import os
import shutil

import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset


def save_atomic(state, path):
    tmp = path + ".tmp"
    torch.save(state, tmp)
    os.replace(tmp, path)


def main():
    train = TensorDataset(torch.randn(256, 10), torch.randint(0, 2, (256,)))
    val = TensorDataset(torch.randn(64, 10), torch.randint(0, 2, (64,)))
    train_loader = DataLoader(train, batch_size=32, shuffle=True)
    val_loader = DataLoader(val, batch_size=64)
    model = nn.Linear(10, 2)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    best = 0.0
    for epoch in range(5):
        for x, y in train_loader:
            loss = nn.functional.cross_entropy(model(x), y)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        with torch.no_grad():
            x, y = next(iter(val_loader))
            accuracy = (model(x).argmax(1) == y).float().mean().item()
        save_atomic(model.state_dict(), "last.pt")
        if accuracy > best:
            best = accuracy
            shutil.copyfile("last.pt", "best.pt")
        if os.path.exists(f"epoch{epoch - 2}.pt"):
            os.remove(f"epoch{epoch - 2}.pt")
        torch.save(model.state_dict(), f"epoch{epoch}.pt")

    model.load_state_dict(torch.load("best.pt"))
    print("best accuracy", best)


if __name__ == "__main__":
    main()
