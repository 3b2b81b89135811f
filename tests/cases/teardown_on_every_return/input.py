"""Trains until a step budget is spent: the loop never ends by itself, the function returns."""

import argparse

import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset


def evaluate(model, loader):
    model.eval()
    with torch.no_grad():
        total = sum(nn.functional.mse_loss(model(x), y).item() for x, y in loader)
    model.train()
    return total / len(loader)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=40)
    parser.add_argument("--test-only", action="store_true")
    parser.add_argument("--dry-run", action="store_true")
    parser.add_argument("--max-epochs", type=int, default=0)
    opts = parser.parse_args()

    model = nn.Linear(8, 1)
    data = TensorDataset(torch.randn(128, 8), torch.randn(128, 1))
    loader = DataLoader(data, batch_size=16, shuffle=True)
    if opts.test_only:
        print("loss", evaluate(model, loader))
        return
    if opts.dry_run: return evaluate(model, loader)

    def lr_at(step):
        if step < 10:
            return 0.01 * step
        return 0.1

    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    epoch, step = 0, 0
    while True:
        epoch += 1
        for x, y in loader:
            step += 1
            for group in optimizer.param_groups:
                group["lr"] = lr_at(step)
            optimizer.zero_grad()
            loss = nn.functional.mse_loss(model(x), y)
            loss.backward()
            optimizer.step()
            if step >= opts.steps:
                torch.save(model.state_dict(), "last.pt")
                return
        print("epoch", epoch, "done")
        if opts.max_epochs and epoch >= opts.max_epochs: print("epoch budget spent"); return


if __name__ == "__main__":
    main()
