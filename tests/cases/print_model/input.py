# Printing a model shows its layers; it does not run it: the print just moves to rank 0.
import logging

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

logging.basicConfig(level=logging.INFO)
logger = logging.getLogger(__name__)


def evaluate(net, loader):
    with torch.no_grad():
        return sum(nn.functional.mse_loss(net(x), y).item() for x, y in loader) / len(loader)


def main():
    dataset = TensorDataset(torch.randn(64, 4), torch.randn(64, 1))
    loader = DataLoader(dataset, batch_size=8, shuffle=True)
    model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 1))
    print(model)
    logger.info("parameters: %d", sum(p.numel() for p in model.parameters()))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for epoch in range(3):
        for x, y in loader:
            loss = nn.functional.mse_loss(model(x), y)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        print(evaluate(model, loader))


if __name__ == "__main__":
    main()
