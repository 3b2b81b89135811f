"""Trains under nn.DataParallel and resumes from its own checkpoints, whose keys start with `module.`."""
import argparse
import os

import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset


class Regressor(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(8, 32), nn.Tanh(), nn.Linear(32, 1))

    def forward(self, x):
        return self.body(x)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--resume", default="")
    parser.add_argument("--save", default="regressor.pt")
    args = parser.parse_args()

    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    torch.manual_seed(0)
    x = torch.randn(256, 8)
    y = x.sum(dim=1, keepdim=True)
    loader = DataLoader(TensorDataset(x, y), batch_size=args.batch_size)

    model = Regressor().to(device)
    model = nn.DataParallel(model)
    if args.resume and os.path.exists(args.resume):
        model.load_state_dict(torch.load(args.resume, map_location=device))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05)

    for epoch in range(args.epochs):
        for inputs, targets in loader:
            inputs, targets = inputs.to(device), targets.to(device)
            loss = nn.functional.mse_loss(model(inputs), targets)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        print(f"epoch {epoch}: loss {loss.item():.4f}")

    torch.save(model.state_dict(), args.save)


if __name__ == "__main__":
    main()
