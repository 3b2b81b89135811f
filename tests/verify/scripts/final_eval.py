"""A single-process script with work after training: a final evaluation through a submodule."""

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


class Regressor(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.body = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 1))

    def forward(self, x):
        return self.body(x)


def main() -> None:
    data = torch.Generator().manual_seed(0)
    inputs = torch.randn(64, 8, generator=data)
    targets = inputs.sum(dim=1, keepdim=True)
    loader = DataLoader(TensorDataset(inputs, targets), batch_size=8, shuffle=True)
    torch.manual_seed(0)
    model = Regressor()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
    for _ in range(2):
        for x, y in loader:
            loss = nn.functional.mse_loss(model(x), y)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
    model.eval()
    with torch.no_grad():
        first = model.body[0](inputs[:4])
    print(f"final loss {loss.item():.4f}, first layer mean {first.mean().item():.4f}")


if __name__ == "__main__":
    main()
