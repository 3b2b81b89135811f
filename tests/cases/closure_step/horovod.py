"""Fits a small regression with L-BFGS, whose step calls a closure that recomputes the loss."""
import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset


def main():
    points = TensorDataset(torch.randn(256, 3), torch.randn(256, 1))
    loader = DataLoader(points, batch_size=64, shuffle=True)
    model = nn.Sequential(nn.Linear(3, 16), nn.Tanh(), nn.Linear(16, 1))
    optimizer = torch.optim.LBFGS(model.parameters(), lr=0.5, max_iter=5)

    for epoch in range(10):
        for inputs, targets in loader:
            def closure():
                optimizer.zero_grad()
                loss = nn.functional.mse_loss(model(inputs), targets)
                loss.backward()
                return loss

            optimizer.step(closure)

    torch.save(model.state_dict(), "lbfgs_fit.pt")


if __name__ == "__main__":
    main()
