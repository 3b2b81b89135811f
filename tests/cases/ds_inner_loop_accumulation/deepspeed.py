"""Accumulation as an inner loop of backwards, then one step: the step is not in the backward's
block, so the engine's step-after-every-backward cannot follow it without rewriting the loop."""
import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset

ACCUM = 4


def main():
    model = nn.Linear(4, 2)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    loader = DataLoader(TensorDataset(torch.randn(256, 4), torch.randn(256, 2)), batch_size=8, shuffle=True)
    batches = iter(loader)
    for step in range(8):
        optimizer.zero_grad()
        for _ in range(ACCUM):
            x, y = next(batches)
            loss = nn.functional.mse_loss(model(x), y) / ACCUM
            loss.backward()
        optimizer.step()
        print(f"step {step} loss {loss.item():.4f}")


if __name__ == "__main__":
    main()
