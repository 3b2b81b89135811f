# An L2 penalty on the weights, read from model.parameters() outside the model's forward. Under
# ZeRO-3 those are empty shards there (the backward then fails on a gradient of the wrong shape):
# the penalty belongs in the forward, or in the optimizer's weight_decay.
import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset


def main():
    torch.manual_seed(0)
    loader = DataLoader(TensorDataset(torch.randn(256, 8), torch.randn(256, 1)), batch_size=16, shuffle=True)
    model = nn.Sequential(nn.Linear(8, 32), nn.ReLU(), nn.Linear(32, 1))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    for epoch in range(2):
        for xb, yb in loader:
            penalty = sum(p.pow(2).sum() for p in model.parameters())
            loss = nn.functional.mse_loss(model(xb), yb) + 1e-3 * penalty
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        print(f"epoch {epoch} loss {loss.item():.4f} penalty {penalty.item():.4f}")


if __name__ == "__main__":
    main()
