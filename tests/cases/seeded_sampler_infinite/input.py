"""Regression on a small table, read forever through a seeded sampler with replacement."""

import torch
import torch.nn as nn
from torch.utils.data import DataLoader, RandomSampler, TensorDataset


def main():
    torch.manual_seed(0)
    features = torch.randn(256, 8)
    targets = features.sum(dim=1, keepdim=True)
    dataset = TensorDataset(features, targets)
    g = torch.Generator()
    g.manual_seed(0)
    sampler = RandomSampler(dataset, replacement=True, num_samples=10**9, generator=g)
    loader = DataLoader(dataset, batch_size=16, sampler=sampler)
    model = nn.Linear(8, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
    for step, (x, y) in enumerate(loader):
        loss = nn.functional.mse_loss(model(x), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        if step % 10 == 0:
            print(f"step {step} loss {loss.item():.4f}")
        if step == 50:
            break
    torch.save(model.state_dict(), "regressor.pt")


if __name__ == "__main__":
    main()
