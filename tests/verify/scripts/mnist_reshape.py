"""A single-process MNIST script that flattens each batch with a fixed batch size, as many do."""

import torch
from torch import nn
from torch.utils.data import DataLoader
from torchvision import datasets, transforms


def main() -> None:
    train = datasets.MNIST("data", train=True, download=True, transform=transforms.ToTensor())
    loader = DataLoader(train, batch_size=100, shuffle=True)
    torch.manual_seed(0)
    model = nn.Linear(28 * 28, 10)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for x, y in loader:
        x = x.reshape(100, -1)
        loss = nn.functional.cross_entropy(model(x), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    print(f"last loss {loss.item():.4f}")


if __name__ == "__main__":
    main()
