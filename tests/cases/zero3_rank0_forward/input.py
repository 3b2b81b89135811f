# The validation loss is computed inside the print. Under ZeRO-3 each forward gathers the sharded
# weights from every rank, so it must run on every rank: only the printing may move to rank 0.
import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset


def validation_loss(model, x, y):
    model.eval()
    with torch.no_grad():
        loss = nn.functional.mse_loss(model(x), y).item()
    model.train()
    return loss


def main():
    torch.manual_seed(0)
    x, y = torch.randn(256, 8), torch.randn(256, 1)
    val_x, val_y = torch.randn(64, 8), torch.randn(64, 1)
    loader = DataLoader(TensorDataset(x, y), batch_size=16, shuffle=True)
    model = nn.Sequential(nn.Linear(8, 32), nn.ReLU(), nn.Linear(32, 1))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    for epoch in range(2):
        for xb, yb in loader:
            loss = nn.functional.mse_loss(model(xb), yb)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        print(f"epoch {epoch} val_loss {validation_loss(model, val_x, val_y):.4f}")


if __name__ == "__main__":
    main()
