"""A single-process script that updates its weights by hand, with no optimizer object."""

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


class Net(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.hidden = nn.Linear(6, 12)
        self.out = nn.Linear(12, 1)

    def forward(self, x):
        return self.out(torch.tanh(self.hidden(x)))


def main() -> None:
    generator = torch.Generator().manual_seed(1)
    inputs = torch.randn(96, 6, generator=generator)
    targets = (inputs[:, :1] - inputs[:, 1:2]).tanh()
    loader = DataLoader(TensorDataset(inputs, targets), batch_size=8, shuffle=True)
    torch.manual_seed(1)
    model = Net()
    rate = 0.1
    for epoch in range(2):
        for x, y in loader:
            loss = nn.functional.mse_loss(model(x), y)
            model.zero_grad()
            loss.backward()
            for parameter in model.parameters():
                parameter.data -= rate * parameter.grad
        print(f"epoch {epoch} loss {loss.item():.4f}")


if __name__ == "__main__":
    main()
