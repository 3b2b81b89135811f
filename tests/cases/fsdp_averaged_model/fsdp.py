"""Weights averaged into a torch AveragedModel built before training (stochastic weight averaging)."""
import torch
import torch.nn as nn
from torch.optim.swa_utils import AveragedModel
from torch.utils.data import DataLoader, TensorDataset


def main():
    data = TensorDataset(torch.randn(512, 12), torch.randn(512, 1))
    loader = DataLoader(data, batch_size=32, shuffle=True)
    model = nn.Sequential(nn.Linear(12, 48), nn.ReLU(), nn.Linear(48, 1))
    averaged = AveragedModel(model)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
    for epoch in range(10):
        for x, y in loader:
            loss = nn.functional.mse_loss(model(x), y)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        if epoch >= 5:
            averaged.update_parameters(model)
    torch.save(averaged.module.state_dict(), "averaged.pt")


if __name__ == "__main__":
    main()
