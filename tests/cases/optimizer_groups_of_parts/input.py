"""An encoder trained more gently than the head on top of it: the optimizer's two parameter groups
are the model's own parts (`model.encoder`, `model.head`), while the loop calls the whole model."""

import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset


class Regressor(nn.Module):
    def __init__(self):
        super().__init__()
        self.encoder = nn.Sequential(nn.Linear(5, 10), nn.ReLU())
        self.head = nn.Linear(10, 1)

    def forward(self, x):
        return self.head(self.encoder(x))


def main():
    torch.manual_seed(0)
    model = Regressor()
    optimizer = torch.optim.Adam(
        [{"params": model.encoder.parameters(), "lr": 1e-4}, {"params": model.head.parameters()}],
        lr=1e-3,
    )
    rows = TensorDataset(torch.randn(60, 5), torch.randn(60, 1))
    loader = DataLoader(rows, batch_size=6, shuffle=True)
    for epoch in range(3):
        for x, y in loader:
            optimizer.zero_grad()
            nn.functional.mse_loss(model(x), y).backward()
            optimizer.step()
        print(f"epoch {epoch} done")
    torch.save(model.state_dict(), "regressor.pt")


if __name__ == "__main__":
    main()
