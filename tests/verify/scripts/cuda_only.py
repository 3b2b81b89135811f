"""A single-GPU script that hard-codes `.cuda()`: the model and every batch go to the GPU."""
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


def main():
    torch.manual_seed(0)
    data = torch.randn(128, 8)
    labels = (data[:, 0] > 0).long()
    loader = DataLoader(TensorDataset(data, labels), batch_size=16, shuffle=True)
    model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 2)).cuda()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for epoch in range(2):
        for x, y in loader:
            x, y = x.cuda(), y.cuda()
            loss = nn.functional.cross_entropy(model(x), y)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()


if __name__ == "__main__":
    main()
