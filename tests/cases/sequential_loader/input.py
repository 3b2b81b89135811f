"""A curriculum: samples are ordered from easy to hard, so the loader must not shuffle."""
import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset


def main():
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    difficulty = torch.linspace(0, 1, 1024)
    x = torch.randn(1024, 8) * difficulty[:, None]
    y = x.sum(dim=1, keepdim=True)
    ordered = TensorDataset(x, y)
    loader = DataLoader(ordered, batch_size=32)
    model = nn.Linear(8, 1).to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    for epoch in range(3):
        for xb, yb in loader:
            xb, yb = xb.to(device), yb.to(device)
            loss = nn.functional.mse_loss(model(xb), yb)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
    torch.save(model.state_dict(), "curriculum.pt")


if __name__ == "__main__":
    main()
