"""Plain gradient descent written out by hand, without a torch optimizer."""
import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset

LEARNING_RATE = 0.05


def main():
    data = TensorDataset(torch.randn(512, 8), torch.randn(512, 1))
    loader = DataLoader(data, batch_size=32, shuffle=True)
    model = nn.Linear(8, 1)

    for epoch in range(4):
        for inputs, targets in loader:
            model.zero_grad()
            loss = nn.functional.mse_loss(model(inputs), targets)
            loss.backward()
            with torch.no_grad():
                for parameter in model.parameters():
                    parameter -= LEARNING_RATE * parameter.grad

    torch.save(model.state_dict(), "descent.pt")


if __name__ == "__main__":
    main()
