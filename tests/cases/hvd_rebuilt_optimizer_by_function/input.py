"""Restarts Adam from scratch, at half the rate, every few epochs (a warm restart)."""
import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset


def rebuild(model, lr):
    return torch.optim.Adam(model.parameters(), lr=lr)


def main():
    torch.manual_seed(0)
    data = TensorDataset(torch.randn(96, 5), torch.randn(96, 1))
    loader = DataLoader(data, batch_size=12, shuffle=True)
    model = nn.Sequential(nn.Linear(5, 16), nn.Tanh(), nn.Linear(16, 1))
    lr = 0.01
    optimizer = rebuild(model, lr)
    for epoch in range(6):
        for x, y in loader:
            optimizer.zero_grad()
            loss = nn.functional.mse_loss(model(x), y)
            loss.backward()
            optimizer.step()
        if epoch % 2 == 1:
            lr = lr / 2
            optimizer = rebuild(model, lr)
        print(f"epoch {epoch}: loss {loss.item():.4f}")
    torch.save(model.state_dict(), "restarted.pt")


if __name__ == "__main__":
    main()
