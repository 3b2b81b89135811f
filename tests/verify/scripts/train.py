"""A small single-process training script: the original that verify's own tests convert by hand."""

import argparse

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


class Regressor(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.body = nn.Sequential(nn.Linear(8, 16), nn.BatchNorm1d(16), nn.ReLU(), nn.Linear(16, 1))

    def forward(self, x):
        return self.body(x)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--batch-size", type=int, default=8)
    parser.add_argument("--save", default="model.pt")
    args = parser.parse_args()

    data = torch.Generator().manual_seed(0)
    inputs = torch.randn(64, 8, generator=data)
    targets = inputs.sum(dim=1, keepdim=True)
    loader = DataLoader(TensorDataset(inputs, targets), batch_size=args.batch_size, shuffle=True)

    torch.manual_seed(0)
    model = Regressor()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
    for epoch in range(args.epochs):
        for step, (x, y) in enumerate(loader):
            loss = nn.functional.mse_loss(model(x), y)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            if step == 1:
                torch.save(model.state_dict(), args.save)
        print(f"epoch {epoch} loss {loss.item():.4f}")


if __name__ == "__main__":
    main()
