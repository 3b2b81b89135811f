"""Starts with SGD and switches to averaged SGD once the validation loss stops improving."""
import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset


def main():
    train_set = TensorDataset(torch.randn(400, 10), torch.randn(400, 1))
    valid_x, valid_y = torch.randn(100, 10), torch.randn(100, 1)
    loader = DataLoader(train_set, batch_size=25, shuffle=True)
    model = nn.Sequential(nn.Linear(10, 30), nn.ReLU(), nn.Linear(30, 1))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    history = []
    for epoch in range(20):
        for inputs, targets in loader:
            optimizer.zero_grad()
            loss = nn.functional.mse_loss(model(inputs), targets)
            loss.backward()
            optimizer.step()
        with torch.no_grad():
            history.append(nn.functional.mse_loss(model(valid_x), valid_y).item())
        if len(history) > 5 and history[-1] > min(history[:-5]) and not isinstance(optimizer, torch.optim.ASGD):
            optimizer = torch.optim.ASGD(model.parameters(), lr=0.1, t0=0, lambd=0.0)


if __name__ == "__main__":
    main()
