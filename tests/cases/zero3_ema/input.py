# An exponential moving average of the weights, updated after each step from model.parameters().
# Under ZeRO-3 those are empty shards outside a forward: every rank must gather them for the update.
import argparse
import copy

import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--batch-size", type=int, default=16)
    args = parser.parse_args()
    torch.manual_seed(0)
    loader = DataLoader(TensorDataset(torch.randn(256, 8), torch.randn(256, 1)), batch_size=args.batch_size, shuffle=False)
    model = nn.Sequential(nn.Linear(8, 32), nn.ReLU(), nn.Linear(32, 1))
    ema_model = copy.deepcopy(model).eval().requires_grad_(False)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    for epoch in range(2):
        for xb, yb in loader:
            loss = nn.functional.mse_loss(model(xb), yb)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            with torch.no_grad():
                for ema_p, p in zip(ema_model.parameters(), model.parameters()):
                    ema_p.mul_(0.99).add_(p, alpha=0.01)
        print(f"epoch {epoch} loss {loss.item():.4f}")
    torch.save(ema_model.state_dict(), "ema.pt")


if __name__ == "__main__":
    main()
