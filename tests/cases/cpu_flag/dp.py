"""Regression on synthetic data; the GPU is opt-in with --cuda."""
import argparse

import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset


class Regressor(nn.Module):
    def __init__(self, width):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(8, width), nn.Tanh(), nn.Linear(width, 1))

    def forward(self, x):
        return self.body(x)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--cuda", action="store_true", help="train on the GPU")
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--width", type=int, default=32)
    args = parser.parse_args()

    device = torch.device("cuda" if args.cuda else "cpu")
    features = torch.randn(512, 8)
    targets = features.sum(dim=1, keepdim=True)
    loader = DataLoader(TensorDataset(features, targets), batch_size=32, shuffle=True,
                        pin_memory=device.type == "cuda")

    model = Regressor(args.width).to(device)
    model = nn.DataParallel(model)  # splits each batch across the GPUs
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    for epoch in range(args.epochs):
        total = 0.0
        for x, y in loader:
            x, y = x.to(device), y.to(device)
            optimizer.zero_grad()
            loss = nn.functional.mse_loss(model(x), y)
            loss.backward()
            optimizer.step()
            total += loss.item()
        print(f"epoch {epoch}: {total / len(loader):.4f}")
    torch.save(model.module.state_dict(), "regressor.pt")


if __name__ == "__main__":
    main()
