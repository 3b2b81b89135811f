import argparse
import random

import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset


class Regressor(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(10, 32), nn.ReLU())
        self.head = nn.Linear(32, 1)

    def forward(self, x):
        return self.head(self.body(x))


def init_weights(m):
    if isinstance(m, nn.Linear):
        nn.init.normal_(m.weight, std=0.1)
        nn.init.zeros_(m.bias)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--epochs", type=int, default=5)
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--lr", type=float, default=0.05)
    parser.add_argument("--target-loss", type=float, default=0.05)
    args = parser.parse_args()

    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    x = torch.randn(512, 10)
    y = x @ torch.randn(10, 1)
    loader = DataLoader(TensorDataset(x, y), batch_size=args.batch_size, shuffle=True)

    model = Regressor().to(device)
    model.apply(init_weights)
    optimizer = torch.optim.SGD(model.parameters(), lr=args.lr)

    for epoch in range(args.epochs):
        if epoch == 2:
            model.head.apply(init_weights)  # restart the head halfway through
        for xb, yb in loader:
            xb, yb = xb.to(device), yb.to(device)
            optimizer.zero_grad()
            micro_steps = random.randint(1, 3)  # a random number of micro-steps on each batch
            done = 0
            while done < micro_steps:
                loss = nn.functional.mse_loss(model(xb), yb) / micro_steps
                loss.backward()
                done += 1
            optimizer.step()
            if loss.item() < args.target_loss:
                break
        print(f"epoch {epoch}: loss {loss.item():.4f}")

    torch.save(model.state_dict(), "regressor.pt")


if __name__ == "__main__":
    main()
